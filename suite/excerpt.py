"""What of an attached file a prompt shows, and how its lines are numbered.

Every attached file is shown under ``===== FILE: <path> =====`` with each line prefixed by its
number in the file (``"  153| code"``), so ``FAULT: line N`` always means line N of the file
itself, whether the model saw the whole file or an excerpt.

A file longer than ``LONG`` lines is shown as an excerpt of ``WINDOW`` lines. Invariants:

* Each long file's excerpt holds that file's own focus lines (``focus``; in a bug's first file
  its faulty statement; for its control, the same lines of the bug, so both halves of a pair
  show the same window in the same epoch; for a claim, the lines that decide it), as long as
  they span at most ``WINDOW`` lines (the loader refuses a wider focus).
* Where the focus sits inside the window is random, drawn from a generator seeded by the pair,
  the epoch and the path: the same sample always gets the same prompt (a rerun is comparable,
  a resumed run asks what it would have asked), while across tasks and epochs the fault is
  anywhere in the window, so the window's middle says nothing.
* The excerpt never states its bounds or that anything was left out: the only numbers shown
  are the file's own line numbers in the margin.
"""

from __future__ import annotations

import hashlib
import random

LONG = 300  # lines a file may have and still be shown whole
WINDOW = 160  # lines an excerpt shows
MARGIN = 8  # lines kept between the focus and the window's edges, where the file allows
GUTTER = 5  # digits of the line-number margin


def header(path: str) -> str:
    return f"===== FILE: {path} ====="


def numbered_line(n: int, line: str) -> str:
    """One shown line (without its newline): the file's own number, a bar, the text."""
    return f"{n:>{GUTTER}}| {line}"


def file_lines(text: str) -> list[str]:
    """The file's lines as an editor numbers them: split on newlines only (``splitlines`` would
    also split on form feeds and other separators, and the numbers would drift)."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def span(total: int, focus: tuple[int, ...], seed: str) -> tuple[int, int]:
    """The first and last line (1-based, inclusive) of what is shown of a ``total``-line file."""
    if total <= LONG:
        return 1, total
    rng = random.Random(int.from_bytes(hashlib.sha256(seed.encode()).digest()[:8], "big"))
    last_start = total - WINDOW + 1
    focus = tuple(n for n in focus if 1 <= n <= total)
    if not focus:
        start = rng.randint(1, last_start)
    else:
        lo, hi = min(focus), max(focus)
        room = WINDOW - (hi - lo + 1)
        margin = min(MARGIN, max(0, room // 2))
        start = lo - rng.randint(margin, max(margin, room - margin))
        start = min(max(1, start), last_start)
    return start, start + WINDOW - 1


def render(path: str, text: str, *, focus: tuple[int, ...] = (), seed: str = "") -> str:
    """The file as a prompt shows it: its header, then its (excerpted) numbered lines."""
    lines = file_lines(text)
    first, last = span(len(lines), focus, seed)
    body = "\n".join(numbered_line(n, lines[n - 1]) for n in range(first, last + 1))
    return f"{header(path)}\n{body}\n"
