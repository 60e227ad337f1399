"""Benchmark blinding: how long masking a long answer takes, and what the self-naming rule
catches. It prints figures; it asserts nothing.

    python scripts/bench_blind.py [--kb N] [--served N] [--repeat N]

A race masks every part of every run a judge reads, once per run, and searches the parts a
model wrote for the run naming itself. This builds the names a large deployment would hold (a
roster of 40 models, ``--served`` served ids listed by the catalog, default 2,000, and the
built-in table), then an answer of ``--kb`` kilobytes (default 100) of prose about models:
names in plain, split, joined, look-alike, percent-encoded and base64 forms, markdown, code,
non-ASCII text and long words. It prints the best of ``--repeat`` runs (default 5), in
milliseconds, of:

1. **fold**: the text as masking reads it (``race.normal.fold``);
2. **mask**: every name found and masked (``Masker.mask``);
3. **itself**: the same, plus the search for the writer naming itself (``Masker.itself``);

and the same for an answer twice as long, so the growth with length can be read (linear:
about twice the time); then the masking of one token as long as the answer (a base64 blob of
random bytes, where names turn up by chance). Figures vary with the machine and its load.
"""

import argparse
import base64
import random
import sys
import time
from pathlib import Path

if not __package__:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    import _bootstrap  # noqa

from panelist.metrics.race.blind import Masker, Names, own_of
from panelist.metrics.race.normal import fold
from panelist.metrics.roster.roster import Endpoint, Model

PIECES = [
    "The reviewer read the change twice and found an off-by-one in the loop. ",
    "Claude 3.5 Sonnet and GPT-4o differ in how they cite sources; Gemini 1.5 Pro reads more. ",
    "This is **Zephyr**-mini's strength: Z\u0435phyr\u00adMini keeps answers short. ",
    "```python\nfor i in range(len(items) - 1):\n    total += items[i]\n```\n",
    "Llama 3.1 70B, from Meta AI, and Mistral Large by Mistral AI are open choices. ",
    "Ein Beispiel auf Deutsch: die Schleife läuft einmal zu oft. Пример: цикл лишний. ",
    "See https://platform.openai.com/docs and zephyr%2Dmini in the logs. ",
    "Characterisation, internationalisation and counterintuitively long words appear. ",
    "Encoded: " + base64.b64encode(b"made by aurora").decode() + " and aGVsbG8gd29ybGQ=. ",
    "ZephyrMini, Z e p h y r, Zep*hyr* and Zephyr\nMini are the same model. ",
]


def answer(size: int, seed: int) -> str:
    rng = random.Random(seed)
    out, n = [], 0
    while n < size:
        piece = rng.choice(PIECES)
        out.append(piece)
        n += len(piece.encode())
    return "".join(out)


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times) * 1000


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kb", type=int, default=100)
    parser.add_argument("--served", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    rng = random.Random(7)
    words = ["nova", "zeta", "orbit", "lumen", "quill", "ember", "delta", "sable", "onyx"]
    roster = [
        Model("zephyr-mini", "alpha", "aurora/zephyr-mini-v2", "zephyr"),
        Model("gpt-4o", "alpha", "openai/gpt-4o", "gpt"),
    ]
    roster += [
        Model(
            f"{rng.choice(words)}-{i}",
            "alpha",
            f"vendor{i % 7}/{rng.choice(words)}-{rng.choice(words)}-{i}b",
            f"fam{i}",
        )
        for i in range(38)
    ]
    served = [
        f"org{i % 50}/{rng.choice(words)}-{rng.choice(words)}-{i}-instruct"
        for i in range(args.served)
    ]
    t = time.perf_counter()
    names = Names.of(roster, [Endpoint("alpha", "http://10.0.0.7:8000/v1", "K")], served)
    built = (time.perf_counter() - t) * 1000
    masker = Masker(names, ["Review the loop below and list its bugs."])
    own = own_of(roster[0])
    print(
        f"names: {len(roster)} roster models, {args.served} served ids listed, "
        f"built in {built:.0f} ms"
    )
    for kb in (args.kb, 2 * args.kb):
        text = answer(kb * 1000, seed=kb)
        fold_ms = best(lambda: fold(text), args.repeat)
        mask_ms = best(lambda: masker.mask(text), args.repeat)
        self_ms = best(lambda: masker.itself(text, own), args.repeat)
        masked, count = masker.mask(text)
        print(
            f"{len(text.encode()) / 1000:.0f} KB answer: fold {fold_ms:.0f} ms · mask "
            f"{mask_ms:.0f} ms ({count} names masked) · mask + itself {self_ms:.0f} ms "
            f"(best of {args.repeat})"
        )
    blob = base64.b64encode(random.Random(3).randbytes(args.kb * 750)).decode()
    blob_ms = best(lambda: masker.mask(blob), args.repeat)
    print(
        f"one {len(blob) / 1000:.0f} KB token (a base64 blob of random bytes): mask "
        f"{blob_ms:.0f} ms ({masker.mask(blob)[1]} names masked)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
