"""The judge checks a data folder holds: each check's report, the latest figures per judge and
shape, what each figure means, and the weights a race's jury may take from them.

Files (``Home.judge_checks``, ``runs/judgecheck/``)::

    <check id>.json        one check's report, written whole once it ended
    <check id>/calls.jsonl one line per question a judge was asked (the seat record)
    latest.json            per judge and shape, the figures of its latest check (derived:
                           rebuilt from the reports when missing or unreadable)

Invariants:

* Every file is written whole (``store.atomic``): a reader sees the old file or the new one.
  ``latest.json`` is changed under ``latest.json.lock``'s ``flock``, read, changed and written,
  so two checks ending at once both land.
* Reading the latest figures (``latest``) reads ``latest.json`` alone: its cost does not grow
  with the checks run; only a missing or broken ``latest.json`` is rebuilt, once, from the
  reports.
* A check id is ``j{YYYYMMDD}-{8 hex}``; an id is looked up on disk only once it matches.
* A race's jury weights (``weights``): each judge's κ from its latest check of the race's shape
  (else of every shape, ``all``), floored at 0; a judge never checked, or weights that are all
  0, refuse the race before it starts, with what to do.
"""

from __future__ import annotations

import re
import secrets
import time
from pathlib import Path

from panelist.metrics.errors import BadRequest, NotFound
from panelist.metrics.store import atomic, jsonwire
from panelist.metrics.store.configfile import flocked

CHECK_ID = re.compile(r"j\d{8}-[0-9a-f]{8}")
LATEST = "latest.json"
VERSION = 1
WEIGHTS = ("agreement",)  # how a race may weight its jury
RACE_SHAPE = "general"  # a race names no shape: its evidence counts as general work

EXPLAIN = {
    "kappa": "Cohen's κ: how often the judge's useful / not marks match the people's, beyond "
    "what chance would give at the same rates (1: always, 0: no better than chance).",
    "accuracy": "Pairwise accuracy: on pairs of answers a person separated (one useful, one "
    "not), how often the judge preferred the useful one, averaged over both orders.",
    "flip_rate": "Position flip rate: the share of pairs whose preferred answer changed when "
    "the order they were shown in was swapped.",
    "own_family_lift": "Own-family lift: on pairs with one answer of the judge's own family, "
    "how much more often the judge preferred it than the person did.",
    "length_slope": "Length slope: how much more the judge's preference leans to the longer "
    "answer than the person's did, per doubling of the length ratio.",
    "baselines": "Beside each figure: a constant judge (always useful, always the first "
    "shown) and a length-only judge (the longer answer). A judge whose pairwise "
    "accuracy does not clear them adds nothing.",
}


def new_id(root: Path) -> tuple[str, Path]:
    """A fresh check id and its folder, made here so no two checks share one."""
    root.mkdir(parents=True, exist_ok=True)
    day = time.strftime("%Y%m%d", time.gmtime())
    while True:
        check = f"j{day}-{secrets.token_hex(4)}"
        try:
            (root / check).mkdir()
        except FileExistsError:
            continue
        return check, root / check


def _entries(report: dict) -> dict[tuple[str, str], dict]:
    """A report's latest-figure entries, by (judge, shape)."""
    out = {}
    for result in report.get("results") or ():
        entry = {
            "judge": result["judge"],
            "shape": result["shape"],
            "check": report["check"],
            "ts": report.get("ts"),
            "panels": result.get("panels"),
            "pairs": result.get("pairs"),
            "answers": result.get("answers"),
            "figures": result.get("figures"),
            "baselines": result.get("baselines"),
            "findings": result.get("findings") or [],
        }
        out[(entry["judge"], entry["shape"])] = entry
    return out


def save(root: Path, report: dict) -> Path:
    """Write ``report`` as ``<check>.json`` and fold it into ``latest.json``."""
    root.mkdir(parents=True, exist_ok=True)
    path = root / f"{report['check']}.json"
    atomic.write(path, jsonwire.dumps(report, indent=1) + "\n", fsync=False)
    with flocked(root / (LATEST + ".lock")):
        found = _read_latest(root)
        entries = (
            {(e["judge"], e["shape"]): e for e in found} if found is not None else _rebuilt(root)
        )
        entries.update(_entries(report))
        _write_latest(root, entries)
    return path


def _read_latest(root: Path) -> list[dict] | None:
    try:
        doc = jsonwire.loads((root / LATEST).read_bytes())
        if doc.get("v") != VERSION or not isinstance(doc.get("checks"), list):
            return None
        return [e for e in doc["checks"] if isinstance(e, dict) and "judge" in e and "shape" in e]
    except (OSError, ValueError, AttributeError):
        return None


def _write_latest(root: Path, entries: dict) -> None:
    ordered = [entries[k] for k in sorted(entries)]
    atomic.write(
        root / LATEST,
        jsonwire.dumps({"v": VERSION, "checks": ordered}, indent=1) + "\n",
        fsync=False,
    )


def _rebuilt(root: Path) -> dict:
    """The latest entries from every report, oldest first (so the newest wins)."""
    entries: dict = {}
    for path in sorted(root.glob("j*.json"), key=lambda p: (p.stem[1:9], p.stat().st_mtime_ns)):
        if not CHECK_ID.fullmatch(path.stem):
            continue
        try:
            entries.update(_entries(jsonwire.loads(path.read_bytes())))
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return entries


def latest(root: Path) -> list[dict]:
    """Per judge and shape, its latest check's figures, sorted by judge then shape."""
    found = _read_latest(root)
    if found is not None:
        return found
    if not root.is_dir():
        return []
    with flocked(root / (LATEST + ".lock")):
        entries = _rebuilt(root)
        if entries:
            _write_latest(root, entries)
    return [entries[k] for k in sorted(entries)]


def report(root: Path, check: str) -> dict:
    """One check's saved report."""
    if not isinstance(check, str) or not CHECK_ID.fullmatch(check):
        raise NotFound(
            f"unknown judge check '{str(check)[:40]}'; GET /api/judge/checks lists the latest"
        )
    try:
        return jsonwire.loads((root / f"{check}.json").read_bytes())
    except FileNotFoundError:
        raise NotFound(
            f"unknown judge check '{check}'; GET /api/judge/checks lists the latest"
        ) from None


# -- a race's jury, weighted by agreement --------------------------------------------------------
def scored(root: Path, judges: list[str], shape: str) -> dict:
    """How each judge scored against people in its latest check of ``shape`` (else ``all``):
    ``{alias: {"shape", "check", "kappa", "kappa_interval", "accuracy", "accuracy_interval",
    "findings"}}``; a judge never checked is left out."""
    by = {(e["judge"], e["shape"]): e for e in latest(root)}
    out = {}
    for alias in judges:
        entry = by.get((alias, shape)) or by.get((alias, "all"))
        if entry is None:
            continue
        figs = entry.get("figures") or {}
        out[alias] = {
            "shape": entry["shape"],
            "check": entry["check"],
            "kappa": (figs.get("kappa") or {}).get("value"),
            "kappa_interval": (figs.get("kappa") or {}).get("interval"),
            "accuracy": (figs.get("accuracy") or {}).get("value"),
            "accuracy_interval": (figs.get("accuracy") or {}).get("interval"),
            "findings": entry.get("findings") or [],
        }
    return out


def weights(root: Path, judges: list[str], shape: str) -> dict[str, float]:
    """Each judge's weight: its κ against people (``scored``), floored at 0. Refused when a
    judge has no check, or when every weight is 0."""
    found = scored(root, judges, shape)
    missing = [a for a in judges if a not in found or found[a]["kappa"] is None]
    if missing:
        raise BadRequest(
            f"jury_weights 'agreement' needs a judge check of every judge; "
            f"{', '.join(missing)} has none (of shape '{shape}' or all shapes): run "
            f"`panelist judge check --judges {','.join(missing)}` first, or leave "
            "jury_weights out",
            param="jury_weights",
        )
    out = {a: max(0.0, float(found[a]["kappa"])) for a in judges}
    if not any(out.values()):
        raise BadRequest(
            "jury_weights 'agreement': no judge of this race agrees with people "
            "better than chance (every κ ≤ 0), so no judge would count; name other "
            "judges or leave jury_weights out",
            param="jury_weights",
        )
    return out


def reweigh(row: dict, by: dict[str, float]) -> dict:
    """A judged row's accuracy, shown work and total pooled again over its judgements, each
    judge's counting by its weight (its orders share it). A row without a score is as it was."""
    judged = [j for j in row.get("judgements") or () if j.get("accuracy") is not None]
    if row.get("accuracy") is None or not judged:
        return {}
    total = sum(by.get(j["judge"], 0.0) for j in judged)
    if total <= 0:
        return {}
    out = {}
    for key in ("accuracy", "shown_work", "total"):
        out[key] = round(sum(by.get(j["judge"], 0.0) * j[key] for j in judged) / total, 3)
    out["weighted"] = {a: round(w, 4) for a, w in by.items()}
    return out


def with_people(judging: dict, root: Path, weights: dict[str, float] | None) -> dict:
    """A race report's ``judging`` with how its judges scored against people (``people``: each
    checked judge's ``scored`` figures; left out when none was checked) and the weights its
    jury was pooled with (``weights``, when asked for)."""
    people = scored(root, list(judging.get("judges") or ()), RACE_SHAPE)
    if people:
        judging["people"] = people
    if weights:
        judging["weights"] = {a: round(w, 4) for a, w in weights.items()}
    return judging


def people_lines(judging: dict) -> list[str]:
    """The report's lines on its judges against people, and its weights."""
    lines = []
    for alias, s in (judging.get("people") or {}).items():

        def fig(v, iv):
            if v is None:
                return "–"
            return f"{v:.2f}" + (f" ({iv[0]:.2f} to {iv[1]:.2f})" if iv else "")

        weight = (judging.get("weights") or {}).get(alias)
        lines.append(
            f"against people: {alias} κ {fig(s['kappa'], s['kappa_interval'])}, pair "
            f"accuracy {fig(s['accuracy'], s['accuracy_interval'])} (judge check "
            f"{s['check']}, shape {s['shape']})"
            + (f"; weight {weight:.2f}" if weight is not None else "")
            + "".join(f"; {f}" for f in s["findings"][:1])
        )
    if judging.get("weights"):
        lines.append(
            "jury: each judge's accuracy, shown work and total weighted by its κ "
            "against people (floored at 0)"
        )
    return lines
