"""A race's report: its inputs, a row per run, means per model, the verdict, and its table.

Invariants:

* A model's accuracy, shown work and total are means over its judged runs only, and the runs
  that were not are counted beside them: ``judge_failures`` (the judge failed, or the race
  ended first), ``voided`` (a run named itself, so it was not judged, to stay blind) and
  ``score_errors`` (the scorer failed): a run is never dropped from a mean in silence.
  ``accuracy_interval`` is the 95% interval on mean accuracy (Student's t, clipped to 0..7),
  given only when at least two of the model's runs were judged.
* The verdict is ``metrics.race.verdict``'s: a paired non-inferiority test on accuracy (and the
  scorer's score) that fails closed; a voided run, like a judge failure, is no evidence either
  way and keeps its candidate open. The table shows what it tested, its margin, each
  candidate's p-values and what more evidence would settle an open one.
* ``inputs`` holds every input's text and ``references`` one reference row per input; ``task``
  is the first input's text and ``reference`` the first reference that failed, else the first
  (what a reader of a race of one input knows).
* ``judging`` says how the runs were judged (the judges, the orders, temperature and seed, the
  parameters an endpoint refused) and how far the judgements agree: ``position`` (the same
  judge's totals for one run with the reference shown first and with the candidate first) and,
  with several judges, ``alpha`` (``race.agreement``: Krippendorff's α on accuracy, its
  interval, each judge's mean offset, and what it means in words). ``missing`` counts the
  judgements that did not come back, by judge, and the runs scored without them.
  ``voided`` counts the runs not judged because a run named itself; ``warnings`` what may bias
  the judge (a judge of a candidate's family).
* ``voids`` lists every voided run for a person to confirm: its model, label, input and run,
  and each place it named itself (``void_evidence``: which name, as read and as written, its
  disguises, an excerpt); the table prints them under "voids to confirm".
* Every judgement names the files its questions were kept in (``judgements[].prompts``,
  relative to the race's folder ``runs/races/<race id>/``).
* Each row's ``tool_difference`` is code's (``metrics.race.tooldiff``) and ``flags`` the text
  in the run addressed to the judge (``metrics.race.flags``); the table lists both, a line per
  run, with ``allow_extra_tools`` (the extra tool calls the race lets pass) on its own line.
  A flag is for a person to read: it never voids or rescores a run. A model's ``flagged``
  counts its runs with a flag.
* ``job`` is what the race asked and how it was judged (``metrics.race.jobs``; None for a race
  run by code) and ``looks`` a line per race of that job so far, this one last: raced again,
  ``rows`` hold every look's runs (each marked with its ``look`` and ``race``) and the verdict
  is on all of them, at this look's share of the error.
* The saved report is written whole (``store.atomic``): a reader sees the old file
  or the new one, never half of one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from panelist.metrics.race import flags as run_flags
from panelist.metrics.race import tooldiff
from panelist.metrics.race import agreement
from panelist.metrics.race.checks import people_lines
from panelist.metrics.race.judge import MAX_ACCURACY
from panelist.metrics.race.verdict import cost_text, points
from panelist.metrics.plaintext import visible
from panelist.metrics.stats import t_interval
from panelist.metrics.store import atomic, jsonwire

VERSION = 2  # 2: inputs and references, the verdict's test, judge failures per model


def interval(values: list[float], top: float = MAX_ACCURACY) -> tuple[float, float] | None:
    """The 95% interval on the mean of ``values``, clipped to 0..``top``; None with fewer
    than two."""
    found = t_interval(values)
    if found is None:
        return None
    return round(max(0.0, found[0]), 3), round(min(float(top), found[1]), 3)


def _mean(values) -> float | None:
    values = [v for v in values if v is not None]
    return round(sum(values) / len(values), 6) if values else None


def summarise(alias: str, rows: list[dict], currency: str) -> dict:
    """One model's line: its runs' means (failed runs count in ``runs``, not in the means; runs
    not judged count in ``judge_failures`` or, named itself, ``voided``, never in the judge's
    means)."""
    ok = [r for r in rows if r["succeeded"]]
    judged = [r for r in ok if r.get("accuracy") is not None]
    voided = sum(bool(r.get("voided")) for r in ok)
    costs = [r["cost"] for r in ok]
    return {
        "model": alias,
        "runs": len(rows),
        "succeeded": len(ok),
        "judged": len(judged),
        "judge_failures": len(ok) - len(judged) - voided,
        "voided": voided,
        "score_errors": sum(bool(r.get("score_error")) for r in ok),
        "flagged": sum(bool(r.get("flags")) for r in rows),
        "wall": _mean(r["wall"] for r in ok),
        "first_answer": _mean(r["first_answer"] for r in ok),
        "tokens_in": _mean(r["tokens_in"] for r in ok),
        "tokens_out": _mean(r["tokens_out"] for r in ok),
        "cost": None if not ok or None in costs else _mean(costs),
        "currency": currency,
        "score": _mean(r["score"] for r in ok),
        "accuracy": _mean(r["accuracy"] for r in judged),
        "shown_work": _mean(r["shown_work"] for r in judged),
        "total": _mean(r["total"] for r in judged),
        "accuracy_interval": interval([r["accuracy"] for r in judged]),
    }


def voids_of(rows: list[dict]) -> list[dict]:
    """The voided runs, with why, for a person to confirm."""
    return [
        {
            "model": r["model"],
            "label": r.get("label"),
            "input": r.get("input"),
            "run": r.get("run"),
            "voided": r["voided"],
            "evidence": list(r.get("void_evidence") or ()),
        }
        for r in rows
        if r.get("voided")
    ]


def judging_of(rows: list[dict], jury: dict) -> dict:
    """How the rows were judged (``jury``: ``Jury.public()``) and how far judgements agree."""
    pairs = [t for r in rows for t in ((r.get("position") or {}).get("by_judge") or {}).values()]
    gaps = [abs(t["reference_first"] - t["candidate_first"]) for t in pairs]
    out = dict(jury)
    if jury.get("orders") == "both":
        out["position"] = {
            "judgements": len(pairs),
            "disagree": sum(g > 0 for g in gaps),
            "mean_difference": _mean(gaps),
        }
    else:  # one drawn order a run: compare the totals each order got
        totals = {
            o: [
                j["total"]
                for r in rows
                for j in r.get("judgements") or ()
                if j["order"] == o and j["total"] is not None
            ]
            for o in ("reference_first", "candidate_first")
        }
        out["position"] = {
            o: {"judgements": len(v), "mean_total": _mean(v)} for o, v in totals.items()
        }
    if len(jury.get("judges") or ()) > 1:
        out["alpha"] = agreement.jury_agreement(rows, jury["judges"])
    missing = [m for r in rows for m in r.get("missing") or ()]
    if missing:
        by: dict[str, int] = {}
        for m in missing:
            by[m["judge"]] = by.get(m["judge"], 0) + 1
        out["missing"] = {
            "judgements": len(missing),
            "runs": sum(bool(r.get("missing")) for r in rows),
            "evened": sum(bool(r.get("evened_from")) for r in rows),
            "by_judge": dict(sorted(by.items())),
        }
    return out


@dataclass
class BenchmarkReport:
    race: str
    grade: str
    pinned: str
    ceiling: str
    runs: int
    started: str
    seconds: float = 0.0
    task: str = ""
    rubric: str | None = None
    candidates: list[str] = field(default_factory=list)
    reference: dict = field(default_factory=dict)
    rows: list[dict] = field(default_factory=list)
    models: list[dict] = field(default_factory=list)
    verdict: dict = field(default_factory=dict)
    costs: dict = field(default_factory=dict)
    judge_failures: int = 0
    calls_log: str = ""
    judges: list[str] = field(default_factory=list)
    judging: dict = field(default_factory=dict)
    voided: int = 0
    warnings: list[str] = field(default_factory=list)
    inputs: list[str] = field(default_factory=list)
    references: list[dict] = field(default_factory=list)
    allow_extra_tools: bool | list[str] | None = None
    job: dict | None = None
    looks: list[dict] = field(default_factory=list)

    def public(self) -> dict:
        return {
            "v": VERSION,
            "race": self.race,
            "grade": self.grade,
            "pinned": self.pinned,
            "ceiling": self.ceiling,
            "runs": self.runs,
            "started": self.started,
            "seconds": self.seconds,
            "task": self.task,
            "inputs": self.inputs,
            "rubric": self.rubric,
            "candidates": self.candidates,
            "reference": self.reference,
            "references": self.references,
            "rows": self.rows,
            "models": self.models,
            "verdict": self.verdict,
            "costs": self.costs,
            "judge_failures": self.judge_failures,
            "calls_log": self.calls_log,
            "judges": self.judges,
            "judging": self.judging,
            "voided": self.voided,
            "voids": voids_of(self.rows),
            "warnings": self.warnings,
            "allow_extra_tools": self.allow_extra_tools,
            "job": self.job,
            "looks": self.looks,
        }

    def save(self, path: Path) -> None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic.write(path, jsonwire.dumps(self.public(), indent=1) + "\n", fsync=False)

    def table(self) -> str:
        """The report as plain text: the references, a row per run, a line per model, how the
        runs were judged, the verdict's test and the verdict."""
        several = len(self.inputs) > 1
        judges = self.judges or [self.ceiling]
        lines = [
            f"race {self.race} · grade {self.grade} · reference {self.pinned} · "
            f"{'judge' if len(judges) == 1 else 'judges'} {', '.join(judges)} · "
            f"{self.runs} run(s) per model"
            + (f" · {len(self.inputs)} input(s)" if several else "")
            + f" · {self.seconds:.1f} s",
            *(f"WARNING: {w}" for w in self.warnings),
        ]
        for ref in self.references or [self.reference]:
            outcome = "succeeded" if ref.get("succeeded") else f"FAILED: {ref.get('error')}"
            lines.append(
                ("reference" + (f", input {ref.get('input')}" if several else ""))
                + f": {outcome} · calls {ref.get('model_calls', 0)} · tools "
                f"{ref.get('tool_calls', 0)} · wall {_num(ref.get('wall'))} s · cost "
                f"{_cost(ref.get('cost'), ref.get('currency'))}"
            )
        head = (
            "model",
            *(("input",) if several else ()),
            "run",
            "ok",
            "calls",
            "tools",
            "in",
            "out",
            "first s",
            "wall s",
            "cost",
            "score",
            "acc",
            "work",
            "total",
            "reason",
        )
        body = [
            (
                r["model"],
                *((str(r.get("input")),) if several else ()),
                str(r["run"]),
                "yes" if r["succeeded"] else "no",
                str(r["model_calls"]),
                str(r["tool_calls"]),
                _num(r["tokens_in"]),
                _num(r["tokens_out"]),
                _num(r["first_answer"]),
                _num(r["wall"]),
                _cost(r["cost"], r["currency"]),
                _num(r["score"]),
                _num(r["accuracy"]),
                _num(r["shown_work"]),
                _num(r["total"]),
                _short(r["reason"]),
            )
            for r in self.rows
        ]
        lines += _grid(head, body)
        head = (
            "model",
            "runs",
            "ok",
            "judged",
            "judge failed",
            "void",
            "wall s",
            "cost/run",
            "score",
            "acc",
            "95% acc interval",
            "work",
            "total",
        )
        body = [
            (
                m["model"],
                str(m["runs"]),
                str(m["succeeded"]),
                str(m["judged"]),
                str(m.get("judge_failures", 0)),
                str(m.get("voided", 0)),
                _num(m["wall"]),
                _cost(m["cost"], m["currency"]),
                _num(m["score"]),
                _num(m["accuracy"]),
                _span(m.get("accuracy_interval")),
                _num(m["shown_work"]),
                _num(m["total"]),
            )
            for m in self.models
        ]
        lines += [""] + _grid(head, body)
        lines += _tool_lines(
            self.rows, self.references or [self.reference], self.allow_extra_tools, several
        )
        lines += looks_lines(self.looks)
        said = _judging_lines(self.judging, self.voided)
        lines += [""] + said if said else []
        lines += _void_lines(voids_of(self.rows))
        lines += verdict_lines(self.verdict)
        spent = ", ".join(cost_text(v, c) for c, v in self.costs.get("by_currency", {}).items())
        unknown = self.costs.get("unknown_calls")
        lines += [
            f"verdict: {self.verdict.get('model') or 'none'}: {self.verdict.get('why')}",
            f"spent: {spent or 'nothing known'}"
            + (f" (+{unknown} call(s) of unknown cost)" if unknown else "")
            + (f" · judge failures: {self.judge_failures}" if self.judge_failures else ""),
        ]
        return "\n".join(lines)


def _judging_lines(judging: dict, voided: int) -> list[str]:
    lines = []
    position = judging.get("position") or {}
    if "judgements" in position and position["judgements"]:
        lines.append(
            f"position: the orders disagree on {position['disagree']} of "
            f"{position['judgements']} judgement pair(s) (mean difference "
            f"{_num(position['mean_difference'])})"
        )
    elif position and "judgements" not in position:
        lines.append(
            "position (one order drawn a run): mean total "
            + ", ".join(
                f"{_num(v['mean_total'])} with the {o.replace('_', ' ')} ({v['judgements']})"
                for o, v in position.items()
            )
        )
    alpha = judging.get("alpha")
    if alpha:
        lines.append(
            f"jury agreement on accuracy: {alpha['meaning']} (Krippendorff's α, "
            f"{alpha['units']} judged prompt(s) of {alpha['runs']} run(s))"
        )
        lines.append(f"jury α assumes: {alpha['assumes']}")
        if alpha.get("offsets"):
            lines.append(
                "jury offsets (a judge's mean accuracy minus the jury's on the same "
                "runs): "
                + ", ".join(f"{j} {o['offset']:+.2f}" for j, o in alpha["offsets"].items())
            )
    missing = judging.get("missing")
    if missing:
        lines.append(
            f"missing judgements: {missing['judgements']} on {missing['runs']} run(s) ("
            + ", ".join(f"{j} {n}" for j, n in missing["by_judge"].items())
            + "); those runs are scored by the judgements that came back, less the "
            f"missing judges' offsets ({missing['evened']} evened)"
        )
    if voided:
        lines.append(
            f"voided: {voided} run(s) named themselves, so were not judged (see "
            "the voids to confirm)"
        )
    lines += people_lines(judging)  # the judges against people (race.checks)
    return lines


def _void_lines(voids: list[dict]) -> list[str]:
    """Each void, for a person to confirm the run really named itself."""
    if not voids:
        return []
    lines = ["voids to confirm (a run that named its own model, vendor or family):"]
    for v in voids:
        for e in v["evidence"] or [{}]:
            if not e:
                lines.append(f"  {v['label']}: {_short(v['voided'], 160)}")
                continue
            how = f" [{', '.join(e['forms'])}]" if e.get("forms") else ""
            lines.append(
                f"  {v['label']}: the {e.get('run', 'candidate')} run wrote its "
                f"{e['as']} {e['name']!r} as “{e['written']}” (read “{e['read']}”)"
                f"{how}: “{_short(e['excerpt'], 120)}”"
            )
    return lines


def _run_name(row: dict, several: bool) -> str:
    where = f" input {row.get('input')}" if several else ""
    if row.get("role") == "reference":
        return f"reference {row['model']}{where}"
    return f"{row['model']}{where} run {row['run']}"


def _tool_lines(rows: list[dict], references: list[dict], allow, several: bool) -> list[str]:
    """A line per run whose tool calls differ from its reference's, then a line per flag (text
    addressed to the judge) of the references and the runs; names the runs chose are shown
    quoted, escaped for a terminal."""
    lines = []
    if allow is not None:
        lines.append(f"extra tool calls allowed: {tooldiff.allow_text(allow)}")
    for r in rows:
        said = tooldiff.summary(r.get("tool_difference"))
        if said:
            capped = (
                f"; accuracy capped at {_num(r['accuracy'])} from {_num(r['capped_from'])}"
                if r.get("capped_from") is not None
                else ""
            )
            lines.append(f"tools: {_run_name(r, several)}: {visible(said)}{capped}")
    for r in [*references, *rows]:
        for f in r.get("flags") or ():
            lines.append(
                f"FLAG: {_run_name(r, several)}, {f['where']}: "
                f"{run_flags.describe(f['what'])}: “{visible(f['excerpt'])}”"
            )
    return [""] + lines if lines else []


def looks_lines(looks: list[dict]) -> list[str]:
    """A line per look of the job, when it has been raced more than once: the race, the runs it
    added, the level it was tested at and the verdict it gave then."""
    if len(looks) < 2:
        return []
    lines = [
        "",
        f"looks: this job has been raced {len(looks)} times; the verdict is on the runs "
        "of every look, each look tested at its share of the error",
    ]
    for look in looks:
        level = "–" if look.get("level") is None else f"{look['level']:.2%}"
        lines.append(
            f"  look {look['look']}: race {look['race']} added {look['runs']} run(s) "
            f"· tested at {level} · {look.get('state') or '–'}"
            + (f" ({look['model']})" if look.get("model") else "")
        )
    return lines


def verdict_lines(said: dict) -> list[str]:
    """What the verdict tested, and a line per candidate and measure: its pairs, mean
    difference, lower bound, p and Holm's p, and its result (with what more would settle it)."""
    test, candidates = said.get("test"), said.get("candidates") or []
    if not test or not candidates or said.get("state") == "cannot_discriminate":
        return [""]
    margin = test["margin"]
    scales = {"accuracy": "accuracy (× 10/7)", "score": "code score (× 10)"}
    tested = sum(c.get("p") is not None for c in candidates)
    lines = [
        "",
        f"test: {test['method'].split(',')[0]} on "
        + " and ".join(scales.get(m, m) for m in test["measures"])
        + f", margin {points(margin)} of 10, alpha "
        f"{test['alpha']:g}, Holm across {tested} candidate(s), a unit per {test['unit']}"
        + (
            f"; look {test['look']} of {test['looks']} of this job, tested at "
            f"{test['level']:.2%} (alpha spent over the looks)"
            if test.get("look")
            else ""
        ),
    ]
    head = ("model", "measure", "pairs", "mean diff", "lower", "p", "Holm p", "result")
    body = []
    for c in candidates:
        result = c["result"].replace("_", " ")
        needed = c.get("needed")
        if needed and "low" in needed:
            result += f", needs {needed['low']} to {needed['high']} more {needed['of'][:-1]}(s)" + (
                " (spread assumed, not yet measured)" if needed.get("assumed") else ""
            )
        elif needed:  # a report written before the advice was a range
            result += f", needs about {needed['more']} more {needed['of'][:-1]}(s)"
        elif c["result"] not in ("good_enough", "worse"):
            result += f": {c['why']}"
        measures = c.get("measures") or {"–": {}}
        for name, t in measures.items():
            body.append(
                (
                    c["model"],
                    name,
                    _num(t.get("n")),
                    _signed(t.get("mean")),
                    _signed(t.get("lower")),
                    _p(t.get("p")),
                    _p(c.get("p_holm")),
                    result,
                )
            )
    return lines + _grid(head, body) + [""]


def _signed(v) -> str:
    return "–" if v is None else f"{v:+.2f}"


def _p(v) -> str:
    return "–" if v is None else f"{v:.3g}"


def _num(v) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:.2f}" if abs(v) < 1000 else f"{v:.0f}"
    return str(v)


def _span(pair) -> str:
    return "–" if pair is None else f"{pair[0]:.2f}–{pair[1]:.2f}"


def _cost(v, currency) -> str:
    return "–" if v is None else cost_text(v, currency)


def _short(text, n: int = 60) -> str:
    text = " ".join(str(text or "").split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _grid(head: tuple, body: list[tuple]) -> list[str]:
    widths = [max(len(str(c)) for c in col) for col in zip(head, *body)]
    return [
        "  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip() for row in (head, *body)
    ]
