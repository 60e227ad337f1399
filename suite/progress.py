"""A one-line progress bar for a suite run on a terminal: done / total, per model, time left.

Invariants: nothing is written unless the stream is a terminal (a pipe or a log file stays
clean); the line is redrawn in place at most every ``EVERY`` seconds and fits the terminal's
width; ``close`` ends the line so what follows starts on a fresh one.
"""

from __future__ import annotations

import shutil
import time

EVERY = 0.2  # seconds between redraws


def _clock(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    if seconds >= 60:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds}s"


def line(
    done: int, total: int, per_model: dict[str, list[int]], elapsed: float, width: int = 100
) -> str:
    """The bar's text: ``suite 12/40 [####----] a 6/20 b 6/20 · 1m05s left``."""
    bar_w = 16
    filled = bar_w * done // total if total else bar_w
    left = "…" if not done else _clock(elapsed / done * (total - done))
    head = f"suite {done}/{total} [{'#' * filled}{'-' * (bar_w - filled)}]"
    tail = f"· {left} left" if done < total else f"· {_clock(elapsed)}"
    models = " ".join(f"{m} {d}/{t}" for m, (d, t) in per_model.items())
    text = f"{head} {models} {tail}"
    if len(text) > width - 1:
        room = max(0, width - 1 - len(head) - len(tail) - 3)
        text = f"{head} {models[:room]}… {tail}"
    return text


class Bar:
    def __init__(self, stream, totals: dict[str, int]):
        self.stream = stream
        self.on = bool(getattr(stream, "isatty", lambda: False)())
        self.totals = totals
        self.t0 = time.monotonic()
        self._last = 0.0

    def update(self, done_by_model: dict[str, int], *, force: bool = False) -> None:
        if not self.on:
            return
        now = time.monotonic()
        if not force and now - self._last < EVERY:
            return
        self._last = now
        per = {m: [done_by_model.get(m, 0), t] for m, t in self.totals.items()}
        done = sum(d for d, _ in per.values())
        width = shutil.get_terminal_size((100, 20)).columns
        self.stream.write(
            "\r\x1b[2K" + line(done, sum(self.totals.values()), per, now - self.t0, width)
        )
        self.stream.flush()

    def close(self) -> None:
        if self.on:
            self.stream.write("\n")
            self.stream.flush()
