"""The one interface both homes of the ledger's records satisfy (``Logs``): the JSONL files
(``logs.FileLogs``) and the PostgreSQL tables (``pglogs.DatabaseLogs``). ``Ledger`` talks to its
records through this surface alone, so the two are interchangeable beneath it;
``tests/test_ledger_backend.py`` checks that both keep every method with the same parameters.

Terms: a *position* is where a record sits in the evidence (a byte offset in evidence.jsonl, an
id in the database), strictly increasing in the order records were appended; a *pointer* is 1 +
where a finished panel's record sits (0: the panel is still in flight); the *panel counter* is
how many panel ids were ever reserved.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Iterator, Protocol, runtime_checkable

from panelist.metrics.ledger.index import Index


class Follower(Protocol):
    """Reads the evidence on from a position, as ``jsonl.Tail`` reads a file."""

    offset: int  # the position it got to

    def read(self) -> Iterator[tuple[int, dict]]: ...


@runtime_checkable
class Logs(Protocol):
    """Where a ledger's records live. Many threads may share one; appends are whole records."""

    snapshots: bool  # whether a snapshot of the index is kept beside the records

    # -- the clock and the index's snapshot
    def shared_time(self, local: float) -> float:
        """``local`` (this machine's epoch seconds) on the clock every writer shares."""
        ...

    def load_snapshot(self, index: Index) -> bool:
        """Fill ``index`` from the saved snapshot; False when there is none to use."""
        ...

    def save_snapshot(self, state: dict) -> None: ...

    # -- evidence
    def follow(self, index: Index, now: float, force: bool = False) -> int:
        """Fold every record appended since ``index`` last looked; how many were folded."""
        ...

    def append(self, *records: dict) -> None: ...

    def evidence_at(self, pos: int) -> dict | None: ...

    def evidence_many(self, positions: list[int]) -> list[dict | None]: ...

    def end(self) -> tuple[object, int]:
        """``(which log, the position after its last record)``."""
        ...

    def reader(self, pos: int) -> Follower: ...

    def exclusive(self, key: str) -> AbstractContextManager:
        """Hold off every other writer deciding about ``key`` (a call's verdict, a model's
        window) while the decision is made."""
        ...

    def write_held(self, record: dict) -> None:
        """Append one record while ``exclusive`` is held."""
        ...

    # -- panels
    def reserve(self, count: int, now: float | None = None) -> list[str]:
        """``count`` new panel ids, each in flight until its record is appended."""
        ...

    def reserved(self, seq: int) -> bool: ...

    def append_panels(self, pairs: list[tuple[int, dict]], abandoned: list[dict]) -> None: ...

    def pointer(self, seq: int) -> int | None: ...

    def count(self) -> tuple[object, int]:
        """``(handle, panel counter)``: ``slots`` reads through the handle."""
        ...

    def slots(self, handle, first: int, n: int): ...

    def panel_at(self, pointer: int) -> dict | None: ...

    def panels_at(self, pointers: list[int]) -> list[dict | None]: ...

    def recent_panels(self, n: int) -> list[dict]: ...

    def close(self) -> None: ...
