"""What one panel's answers hold of the server's memory budget (``Held``).

Invariants:

* every byte the seats core charged for this panel's answers (``Seats.start(meter=...)``) is
  given back to the budget exactly once, and only when both the caller is done with the panel
  (its reply written, or its request ended any other way) and the panel's line is written (the
  seats still running behind a picked reply keep their answers until then);
* once given back, nothing more is charged: a seat still reading after its panel ended (given up
  by the deadline's grace) is refused room, so no charge outlives the panel;
* without a budget (a panel run outside a server) nothing is counted.
"""

from __future__ import annotations

import threading

ENDS = ("caller", "record")  # both must have happened before the answers are let go


class Held:
    """The bytes of one panel's large answers, taken from ``budget`` (``take``/``give``).
    *Held* means reserved from the server's memory budget (``PANELIST_MAX_INFLIGHT_MB``) and
    not yet given back: a lease on bytes, released once the panel no longer needs them."""

    def __init__(self, budget=None):
        self.budget = budget
        self.bytes = 0
        self._ended: set[str] = set()
        self._closed = budget is None
        self._lock = threading.Lock()

    def take(self, n: int) -> bool:
        with self._lock:
            if self._closed:
                return self.budget is None
            if not self.budget.take(n):
                return False
            self.bytes += n
            return True

    def give(self, n: int) -> None:
        """A failed call's bytes, back before the panel ends."""
        with self._lock:
            n = min(n, self.bytes)
            self.bytes -= n
        if n > 0:
            self.budget.give(n)

    def end(self, which: str) -> None:
        """``which`` of ``ENDS`` happened; after both (or ``release``), the bytes go back."""
        with self._lock:
            self._ended.add(which)
            last = self._ended.issuperset(ENDS)
        if last:
            self.release()

    def release(self) -> None:
        """Give back everything now (the panel never ran, or is over)."""
        with self._lock:
            n, self.bytes = self.bytes, 0
            self._closed = True
        if n > 0:
            self.budget.give(n)
