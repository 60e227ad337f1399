"""Race evidence: the judge's accuracy marks of the races a data folder holds, as comparisons
for the ratings (``ratings.py``).

The rule: in each race report (``runs/races/<race id>.json``), for each input, every two
candidates with judged runs on it are compared by their mean accuracy over those runs, the
accuracy after code's tool cap (a row's ``accuracy``; the mark the judge gave before the cap is
``capped_from``, never used here), as the race's own verdict tests it; the higher wins one
comparison, an equal mean is a tie and counts nowhere. Shown work and the total never count: a
run whose tool calls were wrong must not win back with its explanation what the cap took. Runs
that failed, were voided or that the judge failed on carry no accuracy and do not count. A race
names no shape, so its comparisons count for ``general`` only (``SHAPE``).

One input of one race is one unit of evidence: every comparison it makes is counted together
(``patterns``: the sorted ``(better, worse)`` pairs of each input), since an input that is hard
for one model tends to be hard for all, and the ratings' intervals must not take its pairs for
independent ones.

Cost: a look at an unchanged folder costs one ``stat`` (a report is written whole by a rename,
which moves the folder's mtime); otherwise a listing and a ``stat`` per report, and a report is
read again only when its size or mtime changed; never a read of a race's calls log. A report
that cannot be read counts nothing.
"""

from __future__ import annotations

import os
import re
import threading
import time
from pathlib import Path

from panelist.metrics.ledger.pairs import pairs_of
from panelist.metrics.store import jsonwire

SHAPE = "general"
_REPORT = re.compile(r"r\d{8}-[0-9a-f]{8}\.json")


def patterns(report: dict) -> dict[tuple, int]:
    """``{pattern: inputs}`` of one race report, by the module's rule: per input, the sorted
    tuple of ``(better, worse)`` pairs it made, counted over the inputs (an input that
    separated no two models makes none)."""
    marks: dict[tuple, list[float]] = {}  # (input, model) -> judged accuracies
    rows = report.get("rows") if isinstance(report, dict) else None
    for row in rows if isinstance(rows, list) else ():
        if not isinstance(row, dict):
            continue
        model, accuracy, where = row.get("model"), row.get("accuracy"), row.get("input", 0)
        if (
            isinstance(model, str)
            and accuracy.__class__ in (int, float)
            and accuracy == accuracy
            and isinstance(where, (int, str))
        ):
            marks.setdefault((where, model), []).append(float(accuracy))
    by_input: dict = {}
    for (where, model), values in marks.items():
        by_input.setdefault(where, []).append((model, sum(values) / len(values)))
    out: dict[tuple, int] = {}
    for means in by_input.values():
        key = tuple(sorted((a, b) for a, ma in means for b, mb in means if ma > mb))
        if key:
            out[key] = out.get(key, 0) + 1
    return out


def comparisons(report: dict) -> dict[tuple[str, str], int]:
    """``{(better, worse): inputs}`` of one race report, by the module's rule."""
    return pairs_of(patterns(report))


_MISSING = ("no folder",)  # the stamp of a folder not made yet: no race has been run


class RaceEvidence:
    """The comparisons of every race report in one folder, refreshed as reports change."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self._lock = threading.Lock()
        self._seen: dict[str, tuple[tuple, dict]] = {}  # file name -> (stamp, patterns)
        self._folder_stamp: tuple | None = None
        self._sum: dict[tuple, int] = {}
        self._pairs: dict[tuple[str, str], int] = {}

    def pairs(self) -> dict[tuple[str, str], int]:
        """``{(better, worse): inputs}`` summed over every race."""
        self.patterns()
        with self._lock:
            return self._pairs

    def patterns(self) -> dict[tuple, int]:
        """``{pattern: inputs}`` summed over every race (``patterns``)."""
        try:
            st = os.stat(self.folder)
            folder: tuple = (st.st_mtime_ns, st.st_ino)
        except (FileNotFoundError, NotADirectoryError):
            folder = _MISSING
        with self._lock:
            # a report is written whole by a rename into the folder, which moves the folder's
            # mtime: an unchanged folder has unchanged reports. Not within a second of a change,
            # though: another rename in the same clock tick would leave the same mtime
            if folder == self._folder_stamp and (
                folder is _MISSING or time.time_ns() - folder[0] > 1_000_000_000
            ):
                return self._sum
        try:
            names = [n for n in os.listdir(self.folder) if _REPORT.fullmatch(n)]
        except (FileNotFoundError, NotADirectoryError):
            names = []
        with self._lock:
            seen = {}
            for name in sorted(names):
                path = self.folder / name
                try:
                    st = path.stat()
                except FileNotFoundError:
                    continue
                stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
                hit = self._seen.get(name)
                if hit is None or hit[0] != stamp:
                    try:
                        hit = (stamp, patterns(jsonwire.loads(path.read_bytes())))
                    except (OSError, ValueError):
                        hit = (stamp, {})
                seen[name] = hit
            self._seen = seen
            out: dict[tuple, int] = {}
            for _, found in seen.values():
                for key, n in found.items():
                    out[key] = out.get(key, 0) + n
            self._folder_stamp, self._sum, self._pairs = folder, out, pairs_of(out)
            return out
