"""Simulate a race's jury: what its agreement statistic says about judges whose relation to the
runs is known, and what judge failures do to a race. It prints figures; it asserts nothing.

    python scripts/sim_jury.py [--seed N] [--runs N] [--candidates N]

1. **Agreement.** Two judges mark ``--runs`` runs (default 200) of a known quality 0–7, in both
   orders: without shared signal (each gives 6 or 7 whatever the run), opposite (one marks
   7 − what the other does), informative (each the quality plus noise, SD 0.7), and informative
   with one judge a point lower. For each: the old "within 1 point" count, and Krippendorff's α
   with its 95% interval and the judges' offsets (``race.agreement``, the report's own code).
2. **Failures.** A jury of three judges, both orders, 10 runs a candidate, each judgement lost
   with probability ``p`` after its tries (``--candidates`` candidates, default 20,000): the share
   of candidates left with a run not judged when one missing judgement voids a run (the old rule)
   and when a run is unjudged only if every judgement is missing (the new).
3. **Evening.** Three judges with offsets +1, 0 and −1, the strict one's judgements missing 30%
   of the time and the others' 5% (a judge that fails more often than the rest): the mean error of a run's pooled accuracy against the full jury's, as the plain mean of the
   judgements that came back and as evened by ``race.jury.even`` (the report's own code).
"""

import sys
from pathlib import Path

if not __package__:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    import _bootstrap  # noqa

import argparse
import random
from typing import Any

from panelist.metrics.race import agreement, jury

ORDERS = ("reference_first", "candidate_first")


def clip(v: float) -> int:
    return max(0, min(7, round(v)))


def agreement_rows(rng: random.Random, runs: int, mark) -> list[dict]:
    rows = []
    for n in range(runs):
        q = rng.randint(0, 7)
        marks = {"judge-a": mark(rng, q, "judge-a"), "judge-b": mark(rng, q, "judge-b")}
        rows.append(
            {
                "label": f"run{n}",
                "judgements": [
                    {"judge": j, "order": o, "accuracy": v, "capped_from": None, "error": None}
                    for o in ORDERS
                    for j, v in marks.items()
                ],
            }
        )
    return rows


def part_agreement(seed: int, runs: int) -> None:
    print(f"1. Agreement of two judges over {runs} runs, both orders (seed {seed})")
    cases = [
        ("no shared signal (6 or 7 to all)", lambda r, q, j: r.choice((6, 7))),
        ("opposite rankings", lambda r, q, j: q if j == "judge-a" else 7 - q),
        ("informative (quality ± 0.7)", lambda r, q, j: clip(q + r.gauss(0, 0.7))),
        (
            "informative, judge-b a point lower",
            lambda r, q, j: clip(q + r.gauss(0, 0.7) - (j == "judge-b")),
        ),
    ]
    for name, mark in cases:
        rows = agreement_rows(random.Random(seed), runs, mark)
        within = sum(
            abs(r["judgements"][0]["accuracy"] - r["judgements"][1]["accuracy"]) <= 1 for r in rows
        )
        found = agreement.jury_agreement(rows, ["judge-a", "judge-b"])
        offsets = ", ".join(f"{j} {o['offset']:+.2f}" for j, o in found["offsets"].items())
        print(
            f"   {name:<38} within 1 point {within:>3}/{runs}   {found['meaning'].split(';')[0]}"
            f"   (offsets {offsets})"
        )


def part_failures(seed: int, candidates: int) -> None:
    print(
        f"\n2. Judge failures: 3 judges × 2 orders × 10 runs a candidate ({candidates:,} "
        "candidates)"
    )
    for p in (0.001, 0.01, 0.05):
        rng = random.Random(seed)
        old = new = 0
        for _ in range(candidates):
            lost = [[rng.random() < p for _ in range(6)] for _ in range(10)]
            old += any(any(run) for run in lost)
            new += any(all(run) for run in lost)
        print(
            f"   judgement lost {p:>5.1%}: a candidate left with an unjudged run "
            f"{old / candidates:6.1%} (one missing judgement voids the run) → "
            f"{new / candidates:6.2%} (only when every judgement is missing)"
        )
    print(
        "   (a call failing at random 1% of the time is lost after three tries about "
        f"{0.01**3:.0e} of the time)"
    )


def part_evening(seed: int, runs: int = 2000) -> None:
    print(
        f"\n3. Evening: 3 judges with offsets +1, 0, -1; the strict one's judgements missing 30%, "
        f"the others' 5% ({runs:,} runs)"
    )
    rng = random.Random(seed)
    offsets = {"judge-a": 1, "judge-b": 0, "judge-c": -1}
    rows, truth = [], []
    for n in range(runs):
        q = rng.randint(1, 6)
        judgements: list[dict[str, Any]] = []
        for o in ORDERS:
            for j, off in offsets.items():
                v = clip(q + off + rng.gauss(0, 0.5))
                lost = rng.random() < (0.30 if off < 0 else 0.05)
                judgements.append(
                    {
                        "judge": j,
                        "order": o,
                        "accuracy": None if lost else v,
                        "shown_work": None if lost else 2,
                        "error": "lost" if lost else None,
                        "full": v,
                    }
                )
        truth.append(sum(j["full"] for j in judgements) / len(judgements))
        kept = [j for j in judgements if not j["error"]]
        row: dict[str, Any] = {
            "label": f"run{n}",
            "judgements": judgements,
            "tool_difference": None,
            "accuracy": sum(j["accuracy"] for j in kept) / len(kept) if kept else None,
            "shown_work": 2 if kept else None,
            "total": None,
        }
        if kept and len(kept) < len(judgements):
            row["missing"] = [
                {"judge": j["judge"], "order": j["order"], "error": "lost"}
                for j in judgements
                if j["error"]
            ]
        rows.append(row)
    plain = [
        (r["accuracy"], t)
        for r, t in zip(rows, truth)
        if r.get("missing") and r["accuracy"] is not None
    ]
    evened = jury.even(rows)
    after = [(r["accuracy"], t) for r, t in zip(rows, truth) if r.get("evened_from")]
    for label, pairs in (("plain mean of what came back", plain), ("evened", after)):
        errors = [a - t for a, t in pairs]
        mean = sum(errors) / len(errors)
        mad = sum(abs(e) for e in errors) / len(errors)
        print(
            f"   {label:<30} over {len(pairs):>4} runs missing a judgement: mean error "
            f"{mean:+.3f}, mean absolute error {mad:.3f}"
        )
    print(f"   ({evened} runs evened)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--candidates", type=int, default=20_000)
    args = ap.parse_args()
    part_agreement(args.seed, args.runs)
    part_failures(args.seed, args.candidates)
    part_evening(args.seed)


if __name__ == "__main__":
    main()
