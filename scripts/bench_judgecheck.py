"""The judge check against judges of known agreement: a data folder filled with simulated
panels whose answers carry a hidden quality (the people's verdicts follow it), checked by
scripted judges on the simulated provider, the figures printed beside what each judge's script
implies.

    python scripts/bench_judgecheck.py [--panels 400] [--sample 300] [--seed 1]

A ``truth`` judge that agrees with each hidden mark with probability q has, when half the
answers are useful, Cohen's κ = 2q - 1 and pairwise accuracy q, and flips its preference when
the order is swapped with probability 2q(1 - q) (each order is a fresh draw). A constant judge
(always useful, always the first shown) has κ 0, accuracy 0.5 and flips every pair; a
length-only judge, on answers whose length says nothing of their quality, is near κ 0 and
accuracy 0.5 too, with a steep length slope.
"""

import sys
from pathlib import Path

if not __package__:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    import _bootstrap  # noqa

import argparse
import random
import tempfile
import time
from typing import Any

from panelist.metrics.home import Home, open_home
from panelist.metrics.ledger.ledger import Ledger
from panelist.metrics.upstream.simanswers import truth_mark

# alias -> family of the simulated panels' models
PANEL_MODELS = {"sim-ant": "antfam", "sim-bee": "beefam", "sim-cat": "catfam", "sim-dog": "dogfam"}
FILLER = (
    "The change keeps the cache warm and the writer holds its lock in one order; the "
    "retry path reads the same value twice. "
).split()


def answer_text(rng: random.Random, alias: str, useful: bool) -> str:
    """An answer of a random length (10 to 120 words) whose length says nothing of its
    quality, with its hidden quality marked."""
    words = [rng.choice(FILLER) for _ in range(rng.randint(10, 120))]
    return f"Review by a panel seat. {' '.join(words)} {truth_mark(useful)}"


def fill_judged(
    ledger: Ledger, panels: int, seed: int, *, shapes=("general", "review"), useful: float = 0.5
) -> dict:
    """Write ``panels`` finished panels of 2 to 4 answers each, every answer judged by a
    person whose verdict is its hidden quality (useful with probability ``useful``)."""
    rng = random.Random(seed)
    aliases = list(PANEL_MODELS)
    judged = 0
    t0 = time.time() - panels
    for i in range(panels):
        shape = shapes[i % len(shapes)]
        seated = t0 + i
        pid = ledger.new_panel(seated)
        chosen = rng.sample(aliases, rng.randint(2, 4))
        ledger.record_seated(pid, shape, chosen, seated, collection="bench/sim")
        seats, truths = [], []
        for k, alias in enumerate(chosen, 1):
            call = f"{pid}.member{k}"
            good = rng.random() < useful
            truths.append((call, good))
            ledger.record_seat(
                {
                    "call": call,
                    "panel": pid,
                    "alias": alias,
                    "role": "member",
                    "seat": "member",
                    "shape": shape,
                    "seated": seated,
                    "status": "ok",
                    "seconds": 1.0,
                    "tokens": {},
                    "error": "",
                    "key": "local",
                    "collection": "bench/sim",
                }
            )
            seats.append(
                {
                    "call": call,
                    "seat": "member",
                    "role": "member",
                    "alias": alias,
                    "served": alias,
                    "status": "ok",
                    "seconds": 1.0,
                    "answer": answer_text(rng, alias, good),
                    "error": "",
                    "tokens": {},
                }
            )
        ledger.record_panel(
            {
                "panel": pid,
                "collection": "bench/sim",
                "shape": shape,
                "key": "local",
                "started": seated,
                "seconds": 1.0,
                "estimate": 40,
                "reply": "all",
                "prompt": f"user: review change {i} of the writer's lock",
                "seats": seats,
                "skipped": [],
                "abandoned": False,
            }
        )
        for call, good in truths:
            ledger.record_verdict(call, useful=good, by="person")
            judged += 1
    return {"panels": panels, "verdicts": judged}


def setup(root: Path, panels: int, seed: int, sim_url: str, judges: dict) -> Home:
    """A data folder with the simulated panels and ``judges`` (alias -> family) on ``sim_url``,
    each priced at 1 / 2 USD per million tokens."""
    from panelist.metrics.roster.roster import Roster

    home = open_home(root)
    roster = Roster(home)
    roster.add_endpoint("sims", sim_url)
    for alias, family in {**PANEL_MODELS, **judges}.items():
        roster.add_model(alias, "sims", family=family, grade="general", price_in=1.0, price_out=2.0)
    with Ledger.of_home(home) as ledger:
        fill_judged(ledger, panels, seed)
    return home


def main(argv=None) -> int:
    from panelist.metrics.race.judgecheck import JudgeCheck
    from panelist.metrics.upstream.sim import SimUpstream

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--panels", type=int, default=400)
    p.add_argument("--sample", type=int, default=300)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args(argv)
    scripts: dict[str, tuple[str, dict[str, Any]]] = {
        "judge-q90": ("q90fam", {"mode": "truth", "agree": 0.9}),
        "judge-q75": ("q75fam", {"mode": "truth", "agree": 0.75}),
        "judge-q60": ("q60fam", {"mode": "truth", "agree": 0.6}),
        "judge-const": ("constfam", {"mode": "useful"}),
        "judge-long": ("longfam", {"mode": "longer", "long": 400}),
    }
    with (
        SimUpstream(
            {a: {"judge": dict(s, seed=args.seed)} for a, (_, s) in scripts.items()}
        ) as sim,
        tempfile.TemporaryDirectory() as tmp,
    ):
        home = setup(
            Path(tmp) / "data",
            args.panels,
            args.seed,
            sim.url,
            {a: f for a, (f, _) in scripts.items()},
        )
        print(f"{args.panels} simulated panels, {args.sample} sampled, seed {args.seed}")
        print(
            f"{'judge':12} {'kappa':>22} {'expected':>8} {'accuracy':>22} {'expected':>8} "
            f"{'flips':>6} {'expected':>8}  findings"
        )
        for alias, (_, script) in scripts.items():
            t0 = time.perf_counter()
            check = JudgeCheck(
                home, judges=[alias], sample=args.sample, seed=args.seed, admission=None
            )
            report = check.run(check.plan())
            r = next(x for x in report["results"] if x["shape"] == "all")
            expect: tuple[float | None, float | None, float]
            if script["mode"] == "truth":
                q = script["agree"]
                expect = (2 * q - 1, q, 2 * q * (1 - q))
            else:
                expect = {"useful": (0.0, 0.5, 1.0), "longer": (None, None, 0.0)}[script["mode"]]
            k, a, f = (r["figures"][x] for x in ("kappa", "accuracy", "flip_rate"))

            def shown(fig):
                iv = fig["interval"]
                return f"{fig['value']:.3f} ({iv[0]:.2f}-{iv[1]:.2f})" if iv else "-"

            def ex(v):
                return "-" if v is None else f"{v:.3f}"

            print(
                f"{alias:12} {shown(k):>22} {ex(expect[0]):>8} {shown(a):>22} "
                f"{ex(expect[1]):>8} {f['value']:>6.3f} {ex(expect[2]):>8}  "
                f"{'; '.join(r['findings']) or '-'}  [{time.perf_counter() - t0:.1f} s]"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
