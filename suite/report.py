"""The suite's report: per model, how often it was right, with 95% intervals.

Rates, each counted over the latest scored samples (``results.latest``). The first two are
the headline: no constant strategy scores above 50% on them.

* ``pairs``: bug/control pairs where both halves were right in the same epoch (the bug found
  and its control judged clean). Always answering ``NO FAULT`` or always ``FAULT`` scores 0.
* ``balanced``: balanced claim accuracy, the mean of the right verdicts on true claims and on
  false claims, so always ``VERDICT: TRUE`` or always ``FALSE`` scores 50% however many claims
  of each key there are; none (``–``) unless claims of both keys were asked.
* ``accuracy``: right answers over every sample (always ``NO FAULT`` scores 50% on pairs
  alone, so it comes after the headline).
* ``precision``: of the faults the model claimed on paired tasks, those on the faulty statement
  (a fault claimed on a control, or on the wrong lines, is a false one).
* ``recall``: of the bug samples, those whose fault was found. An unparseable answer, a
  ``NO FAULT`` and a model failure are all misses: abstaining is not free.
* ``claims``: right verdicts over claim samples (plain, so it follows the keys' mix).
* ``unparseable``: answers the strict parser could not read, over answers given (lower is
  better).

Invariants: a rate is the mean over epochs (each epoch asks every task once); its interval is
Wilson's at 95% over the distinct tasks (or pairs) behind it, not over samples, since one task
asked K times is not K independent trials; with one epoch the two are the same. A rate with
nothing to count is None with the interval [0, 1]. ``balanced``'s interval is the mean of the
two keys' intervals (wider than need be, never narrower). Samples whose way to the model failed
are never counted, only listed (``unfinished``) for a rerun to finish. A bug whose control has
no sample (or a control without its bug) is counted in ``accuracy`` only, and named in the
report's ``warnings``, so a ``–`` for pairs, precision and recall never goes unexplained.
"""

from __future__ import annotations

import time
from collections import defaultdict
from pathlib import Path

from panelist.metrics.store import atomic, jsonwire
from panelist.metrics.store.jsonl import utc_iso
from panelist.metrics.home import Home
from panelist.metrics.ledger import samples as sample_store
from panelist.metrics.seats import record as seatrecord
from panelist.metrics.stats import wilson_rate
from panelist.suite import results
from panelist.suite.tasks import pair_of

HEADLINE = ("pairs", "balanced")
RATES = (*HEADLINE, "accuracy", "precision", "recall", "claims", "unparseable")
REPORT_FILE = "report.json"
VERSION = 2  # a report.json of another version is rebuilt, whatever its stamp says


def rate(units: list[tuple[str, int]]) -> dict:
    """``units``: (task or pair, hit 0/1) per sample. The pooled rate, its interval over the
    distinct tasks, the hits and the count."""
    n = len(units)
    if not n:
        return {"rate": None, "interval": [0.0, 1.0], "hits": 0, "n": 0, "tasks": 0}
    hits = sum(h for _, h in units)
    tasks = len({u for u, _ in units})
    low, high = wilson_rate(hits / n, tasks)
    return {
        "rate": round(hits / n, 4),
        "interval": [round(low, 4), round(high, 4)],
        "hits": hits,
        "n": n,
        "tasks": tasks,
    }


def balanced(of_true: dict, of_false: dict) -> dict:
    """The mean of two rates (``rate``'s dicts), or None unless both were counted."""
    if not of_true["n"] or not of_false["n"]:
        return {
            "rate": None,
            "interval": [0.0, 1.0],
            "hits": of_true["hits"] + of_false["hits"],
            "n": of_true["n"] + of_false["n"],
            "tasks": of_true["tasks"] + of_false["tasks"],
        }

    def mean(a: float, b: float) -> float:
        return round((a + b) / 2, 4)

    return {
        "rate": mean(of_true["rate"], of_false["rate"]),
        "interval": [
            mean(of_true["interval"][0], of_false["interval"][0]),
            mean(of_true["interval"][1], of_false["interval"][1]),
        ],
        "hits": of_true["hits"] + of_false["hits"],
        "n": of_true["n"] + of_false["n"],
        "tasks": of_true["tasks"] + of_false["tasks"],
    }


def claim_key(s: dict) -> bool | None:
    """A claim sample's key: as recorded, or for a line of an earlier version, from its verdict
    and whether it was right (None when the answer could not be read)."""
    if isinstance(s.get("key"), bool):
        return s["key"]
    if s.get("verdict") in ("true", "false"):
        return (s["verdict"] == "true") == bool(s.get("right"))
    return None


def model_row(model: str, samples: list[dict]) -> dict:
    """One model's rates from its latest scored samples."""
    kinds = defaultdict(set)
    for s in samples:
        kinds[pair_of(s["task"], s["task_kind"])].add(s["task_kind"])
    paired = {p for p, k in kinds.items() if {"bug", "control"} <= k}
    units = defaultdict(list)
    by_epoch: dict[int, list[int]] = defaultdict(list)
    pair_epochs: dict[tuple, dict[str, int]] = defaultdict(dict)
    failures: dict[str, int] = defaultdict(int)
    flags: dict[str, int] = defaultdict(int)
    unpaired = set()
    for s in samples:
        task, hit, kind = s["task"], int(bool(s.get("right"))), s["task_kind"]
        pair = pair_of(task, kind)
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
            key = claim_key(s)
            if key is not None:
                units["claims_true" if key else "claims_false"].append((task, hit))
        elif pair in paired:
            pair_epochs[(pair, s.get("epoch", 1))][kind] = hit
            if kind == "bug":
                units["recall"].append((task, hit))
            if s.get("verdict") == "fault":
                units["precision"].append((task, hit))
        else:
            unpaired.add(task)
    for (pair, _), halves in pair_epochs.items():
        if len(halves) == 2:
            units["pairs"].append((pair, int(all(halves.values()))))
    row = {
        "model": model,
        "samples": len(samples),
        "tasks": len({s["task"] for s in samples}),
        "epochs": len(by_epoch),
    }
    for name in RATES:
        row[name] = (
            balanced(rate(units["claims_true"]), rate(units["claims_false"]))
            if name == "balanced"
            else rate(units[name])
        )
    row["by_epoch"] = {str(e): round(sum(h) / len(h), 4) for e, h in sorted(by_epoch.items())}
    row["failures"] = dict(failures)
    row["flags"] = dict(flags)
    row["unpaired"] = sorted(unpaired)
    row["tokens"] = sum((s.get("tokens") or {}).get("total", 0) or 0 for s in samples)
    times = sorted(s.get("seconds", 0.0) - s.get("waited", 0.0) for s in samples)
    row["p50"] = round(times[len(times) // 2], 3) if times else None
    return row


def warnings(rows: list[dict]) -> list[str]:
    """What a reader of the rates must know: tasks whose other half has no sample."""
    unpaired = sorted({t for row in rows for t in row.get("unpaired", ())})
    if not unpaired:
        return []
    return [
        f"no pair for {', '.join(unpaired)}: a bug counts in pairs, precision and recall "
        "only beside its control (id + '-control', or '-bug' replaced by '-control'); "
        "add the missing half or run it too"
    ]


def summarise(samples: list[dict]) -> dict:
    """The report of every model in ``samples`` (all lines of the samples file)."""
    samples = [seatrecord.read(s) for s in samples]  # lines of any version, in one shape
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
    return {
        "v": VERSION,
        "built": utc_iso(time.time()),
        "models": rows,
        "tasks": len({s["task"] for s in kept}),
        "headline": list(HEADLINE),
        "warnings": warnings(rows),
    }


def load(home: Home) -> dict:
    """The report of the data folder's samples, rebuilt only when the samples changed since
    ``report.json`` was written (their stamp is kept in it: the file's size and mtime, or the
    table's last id)."""
    folder = home.suite_runs
    with sample_store.of_home(home) as store:
        return _load(folder, store)


def _load(folder: Path, store) -> dict:
    stamp = list(store.stamp())
    saved = folder / REPORT_FILE
    try:
        doc = jsonwire.loads(saved.read_bytes())
        if isinstance(doc, dict) and doc.get("samples") == stamp and doc.get("v") == VERSION:
            return doc
    except (OSError, ValueError):
        pass
    doc = dict(summarise(results.read(store)), samples=stamp)
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
        out.append(
            {
                "model": row["model"],
                "samples": row["samples"],
                **{name: cell(row[name]) for name in RATES},
                "failed": failed or "",
                "unfinished": sum(row["unfinished"].values()) or "",
            }
        )
    return out
