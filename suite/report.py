"""The suite's report: per model, how often it was right, with 95% intervals.

Rates, each counted over the latest scored samples (``results.latest``):

* ``accuracy``: right answers over every sample.
* ``pairs``: bug/control pairs where both halves were right in the same epoch. Always answering
  ``NO FAULT`` or always ``FAULT`` scores 0 here.
* ``precision``: of the faults the model claimed on paired tasks, those on the faulty statement
  (a fault claimed on a control, or on the wrong lines, is a false one).
* ``recall``: of the bug samples, those whose fault was found. An unparseable answer, a
  ``NO FAULT`` and a model failure are all misses: abstaining is not free.
* ``claims``: right verdicts over claim samples.
* ``unparseable``: answers the strict parser could not read, over answers given (lower is
  better).

Invariants: a rate is the mean over epochs (each epoch asks every task once); its interval is
Wilson's at 95% over the distinct tasks (or pairs) behind it, not over samples, since one task
asked K times is not K independent trials; with one epoch the two are the same. A rate with
nothing to count is None with the interval [0, 1]. Samples whose way to the model failed are
never counted, only listed (``unfinished``) for a rerun to finish.
"""

from __future__ import annotations

import time
from collections import defaultdict
from pathlib import Path

from panelist.metrics.store import atomic, jsonwire
from panelist.metrics.store.jsonl import utc_iso
from panelist.metrics.home import Home
from panelist.metrics import seatrecord
from panelist.metrics.stats import wilson_rate
from panelist.suite import results

RATES = ("accuracy", "pairs", "precision", "recall", "claims", "unparseable")
REPORT_FILE = "report.json"


def rate(units: list[tuple[str, int]]) -> dict:
    """``units``: (task or pair, hit 0/1) per sample. The pooled rate, its interval over the
    distinct tasks, the hits and the count."""
    n = len(units)
    if not n:
        return {"rate": None, "interval": [0.0, 1.0], "hits": 0, "n": 0, "tasks": 0}
    hits = sum(h for _, h in units)
    tasks = len({u for u, _ in units})
    low, high = wilson_rate(hits / n, tasks)
    return {"rate": round(hits / n, 4), "interval": [round(low, 4), round(high, 4)],
            "hits": hits, "n": n, "tasks": tasks}


def model_row(model: str, samples: list[dict]) -> dict:
    """One model's rates from its latest scored samples."""
    kinds = defaultdict(set)
    for s in samples:
        kinds[s["pair"]].add(s["task_kind"])
    paired = {p for p, k in kinds.items() if {"bug", "control"} <= k}
    units = defaultdict(list)
    by_epoch: dict[int, list[int]] = defaultdict(list)
    pair_epochs: dict[tuple, dict[str, int]] = defaultdict(dict)
    failures: dict[str, int] = defaultdict(int)
    flags: dict[str, int] = defaultdict(int)
    for s in samples:
        task, hit, kind = s["task"], int(bool(s.get("right"))), s["task_kind"]
        units["accuracy"].append((task, hit))
        by_epoch[s.get("epoch", 1)].append(hit)
        if s.get("failure"):
            failures[s["failure"]] += 1
        else:
            units["unparseable"].append((task, int(bool(s.get("flag")))))
            if s.get("flag"):
                flags[s["flag"]] += 1
        if kind == "claim":
            units["claims"].append((task, hit))
        elif s["pair"] in paired:
            pair_epochs[(s["pair"], s.get("epoch", 1))][kind] = hit
            if kind == "bug":
                units["recall"].append((task, hit))
            if s.get("verdict") == "fault":
                units["precision"].append((task, hit))
    for (pair, _), halves in pair_epochs.items():
        if len(halves) == 2:
            units["pairs"].append((pair, int(all(halves.values()))))
    row = {"model": model, "samples": len(samples),
           "tasks": len({s["task"] for s in samples}),
           "epochs": len(by_epoch)}
    for name in RATES:
        row[name] = rate(units[name])
    row["by_epoch"] = {str(e): round(sum(h) / len(h), 4) for e, h in sorted(by_epoch.items())}
    row["failures"] = dict(failures)
    row["flags"] = dict(flags)
    row["tokens"] = sum((s.get("tokens") or {}).get("total", 0) or 0 for s in samples)
    times = sorted(s.get("seconds", 0.0) - s.get("waited", 0.0) for s in samples)
    row["p50"] = round(times[len(times) // 2], 3) if times else None
    return row


def summarise(samples: list[dict]) -> dict:
    """The report of every model in ``samples`` (all lines of the samples file)."""
    samples = [seatrecord.read(s) for s in samples]   # lines of any version, in one shape
    return report_of(results.latest(samples), results.unfinished(samples))


def report_of(kept: list[dict], unfinished: dict[str, dict[str, int]]) -> dict:
    """The report from what it counts: the latest scored samples (``results.latest``) and the
    failures not made good per model (``results.unfinished``)."""
    by_model: dict[str, list[dict]] = defaultdict(list)
    for s in kept:
        by_model[s["alias"]].append(s)
    rows = []
    for model in sorted(set(by_model) | set(unfinished)):
        row = model_row(model, by_model.get(model, []))
        row["unfinished"] = unfinished.get(model, {})
        rows.append(row)
    return {"v": 1, "built": utc_iso(time.time()), "models": rows,
            "tasks": len({s["task"] for s in kept})}


def load(home: Home) -> dict:
    """The report of the data folder's samples, rebuilt only when the samples file changed
    since ``report.json`` was written (its size and mtime are kept in it)."""
    folder = home.suite_runs
    path = home.suite_samples
    try:
        st = path.stat()
        stamp = [st.st_size, st.st_mtime_ns]
    except FileNotFoundError:
        stamp = [0, 0]
    saved = folder / REPORT_FILE
    try:
        doc = jsonwire.loads(saved.read_bytes())
        if isinstance(doc, dict) and doc.get("samples") == stamp:
            return doc
    except (OSError, ValueError):
        pass
    doc = dict(summarise(results.read(path)), samples=stamp)
    if stamp != [0, 0]:
        _write(saved, doc)
    return doc


def _write(path: Path, doc: dict) -> None:
    """Atomically, under a name of its own, so two processes or threads never share a temp."""
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic.write(path, jsonwire.dumps(doc, separators=(",", ":")), mode=0o600, fsync=False)


def cell(r: dict) -> str:
    """A rate as a table shows it: ``72% (61–81)``, or ``–`` when nothing was counted."""
    if r["rate"] is None:
        return "–"
    low, high = r["interval"]
    return f"{r['rate'] * 100:.0f}% ({low * 100:.0f}–{high * 100:.0f})"


def table_rows(doc: dict) -> list[dict]:
    """The report's rows as the CLI prints them."""
    out = []
    for row in doc["models"]:
        failed = sum(row["failures"].values())
        out.append({"model": row["model"], "samples": row["samples"],
                    **{name: cell(row[name]) for name in RATES},
                    "failed": failed or "", "unfinished": sum(row["unfinished"].values()) or ""})
    return out
