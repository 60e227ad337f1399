"""Each model's latest outcomes: whether its recent calls answered, and its newest probe.

Part of the index's pure fold (``index.py``); ``upkeep.failing`` reads it (through
``Queries.failing``) to mark a model whose calls keep failing, and the dashboard shows a
model's newest probe.

Invariants:

* Per alias, the outcomes of its last ``KEPT`` calls (gateway seats and health probes, in log
  order) are the bits of one int, the newest lowest, 1 for a failure, under a marker bit, so the
  int also says how many are known. A seat that ended ``cancelled``, ``at_limit`` or ``memory`` (the
  model was no longer needed, never asked, or its answer did not fit the server's memory
  budget) is no outcome; neither is an endpoint Test (role
  ``test``: its model is on no roster).
* Per alias, the kind of its newest failure, and its newest probe: ``(ts, status, failure kind,
  error cut to ERROR_CHARS, seconds)``.
* ``probe_failed`` holds the aliases whose newest outcome is a failed probe; any later outcome
  takes an alias out.
"""

from __future__ import annotations

KEPT = 64  # outcomes kept per alias: the most ``failing_of`` may be
ERROR_CHARS = 300
_TOP = 1 << KEPT
_MASK = _TOP - 1
NOT_OUTCOMES = frozenset(
    {"cancelled", "at_limit", "memory"}
)  # failure kinds that say nothing of a model


class Outcomes:
    """The outcomes of one index; the caller serialises access (the ledger's lock)."""

    def __init__(self):
        self.bits: dict[str, int] = {}
        self.last_kind: dict[str, str] = {}
        self.probes: dict[str, tuple] = {}
        self.probe_failed: set[str] = set()

    def fold(self, alias: str, kind: str | None, probe: tuple | None = None) -> None:
        """One call of ``alias`` ended: ``kind`` its failure kind (None: it answered);
        ``probe``, for a probe, the tuple kept as its newest probe."""
        if kind in NOT_OUTCOMES:
            return
        v = (self.bits.get(alias, 1) << 1) | (kind is not None)
        if v >> (KEPT + 1):
            v = (v & _MASK) | _TOP  # the oldest outcome leaves
        self.bits[alias] = v
        if kind is not None:
            self.last_kind[alias] = kind
        if probe is not None:
            self.probes[alias] = probe
        if probe is not None and kind is not None:
            self.probe_failed.add(alias)
        else:
            self.probe_failed.discard(alias)

    def recent(self, alias: str, m: int) -> tuple[int, int]:
        """``(failed, known)`` over the last ``m`` outcomes of ``alias`` (``known`` <= ``m``:
        fewer when it made fewer calls)."""
        v = self.bits.get(alias)
        if v is None:
            return 0, 0
        known = min(v.bit_length() - 1, m)
        return (v & ((1 << known) - 1)).bit_count(), known

    def encode(self) -> dict:
        return {
            "bits": self.bits,
            "kinds": self.last_kind,
            "probes": {a: list(p) for a, p in self.probes.items()},
            "probe_failed": sorted(self.probe_failed),
        }

    @classmethod
    def decode(cls, data: dict, intern) -> "Outcomes":
        out = cls()
        for alias, v in data["bits"].items():
            if not isinstance(v, int) or isinstance(v, bool) or not 1 <= v < _TOP << 1:
                raise ValueError("outcome bits out of range")
            out.bits[intern(alias)] = v
        out.last_kind = {intern(a): intern(str(k)) for a, k in data["kinds"].items()}
        for alias, p in data["probes"].items():
            ts, status, kind, error, seconds = p
            out.probes[intern(alias)] = (ts, status, kind, error, seconds)
        out.probe_failed = {intern(a) for a in data["probe_failed"]}
        return out

    def copy(self) -> "Outcomes":
        other = Outcomes()
        other.bits, other.last_kind = dict(self.bits), dict(self.last_kind)
        other.probes, other.probe_failed = dict(self.probes), set(self.probe_failed)
        return other
