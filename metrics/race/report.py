"""A race's report: a row per run, means per model, intervals, the verdict, and its table.

Invariants:

* A model's judge total is the mean over its judged runs; the 95% interval on it (Student's t on
  the runs' totals, clipped to 0..10) is given only when at least two of its runs were judged.
* The reference's interval is the pinned model's interval from its own raced runs (a single
  judged run gives a point). A model is within it when its mean total is at or above the
  interval's low end: scoring higher than the pinned model is never held against a model.
* The verdict picks, among the models whose every run succeeded, that have at least one judged
  run and are within the reference's interval, the one with the lowest mean cost per run. Costs
  are compared only within one currency and an unknown cost is never taken as cheap; when the
  qualifying models price in several currencies the verdict names the cheapest in each and picks
  none.
* ``judging`` says how the runs were judged (the judges, the orders, temperature and seed, the
  parameters an endpoint refused) and how far the judgements agree: ``position`` (the same
  judge's totals for one run with the reference shown first and with the candidate first) and
  ``agreement`` (the judges' totals for one run). ``voided`` counts the runs not judged because
  a run named itself; ``warnings`` what may bias the judge (a judge of a candidate's family).
* Every judgement names the files its questions were kept in (``judgements[].prompts``,
  relative to the race's folder ``runs/races/<race id>/``).
* The saved report is written whole (``store.atomic``): a reader sees the old file
  or the new one, never half of one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from panelist.metrics.store import atomic, jsonwire
from panelist.metrics.stats import Z95

TOTAL_MAX = 10
# Student's t, two-sided 95% (the 0.975 quantile), for 1..30 degrees of freedom
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
         2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
         2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


def interval(values: list[float]) -> tuple[float, float] | None:
    """The 95% interval on the mean of ``values``, or None with fewer than two."""
    n = len(values)
    if n < 2:
        return None
    mean = sum(values) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    t = _T975[n - 2] if n - 1 <= len(_T975) else Z95
    half = t * sd / math.sqrt(n)
    return round(max(0.0, mean - half), 3), round(min(float(TOTAL_MAX), mean + half), 3)


def _mean(values) -> float | None:
    values = [v for v in values if v is not None]
    return round(sum(values) / len(values), 6) if values else None


def summarise(alias: str, rows: list[dict], currency: str) -> dict:
    """One model's line: its runs' means (failed runs count in ``runs``, not in the means)."""
    ok = [r for r in rows if r["succeeded"]]
    totals = [r["total"] for r in rows if r["total"] is not None]
    costs = [r["cost"] for r in ok]
    return {
        "model": alias, "runs": len(rows), "succeeded": len(ok), "judged": len(totals),
        "wall": _mean(r["wall"] for r in ok), "first_answer": _mean(r["first_answer"] for r in ok),
        "tokens_in": _mean(r["tokens_in"] for r in ok),
        "tokens_out": _mean(r["tokens_out"] for r in ok),
        "cost": None if not ok or None in costs else _mean(costs), "currency": currency,
        "score": _mean(r["score"] for r in ok), "accuracy": _mean(r["accuracy"] for r in rows),
        "shown_work": _mean(r["shown_work"] for r in rows), "total": _mean(totals),
        "interval": interval(totals),
    }


def verdict(models: list[dict], pinned: str) -> dict:
    mine = next((m for m in models if m["model"] == pinned), None)
    if mine is None or mine["total"] is None:
        return {"model": None, "reference_interval": None,
                "why": f"the pinned model {pinned} has no judged run in this race, so there is "
                       "no interval to compare with; race it too (it is raced by default when "
                       "it is of the grade)"}
    ref = mine["interval"] or (mine["total"], mine["total"])
    fit = [m for m in models if m["succeeded"] == m["runs"] and m["total"] is not None
           and m["total"] >= ref[0]]
    priced = [m for m in fit if m["cost"] is not None]
    out = {"model": None, "reference_interval": list(ref),
           "within": [m["model"] for m in fit]}
    if not priced:
        out["why"] = ("no model within the reference's interval has a known cost; add prices "
                      "to the roster (price_in, price_out)" if fit else
                      "no model whose runs all succeeded scored within the reference's interval")
        return out
    cheapest: dict[str, dict] = {}
    for m in priced:
        best = cheapest.get(m["currency"])
        if best is None or m["cost"] < best["cost"]:
            cheapest[m["currency"]] = m
    if len(cheapest) > 1:
        out["cheapest_by_currency"] = {c: m["model"] for c, m in sorted(cheapest.items())}
        out["why"] = ("the models within the reference's interval are priced in different "
                      "currencies, which are never compared: " +
                      ", ".join(f"{m['model']} is cheapest in {c}"
                                for c, m in sorted(cheapest.items())))
        return out
    (currency, best), = cheapest.items()
    out["model"] = best["model"]
    out["why"] = (f"{best['model']} is the cheapest model ({best['cost']:.6f} {currency} a run) "
                  f"whose judge total ({best['total']:.2f}) is within the reference's interval "
                  f"({ref[0]:.2f}–{ref[1]:.2f}) and whose runs all succeeded")
    return out


def judging_of(rows: list[dict], jury: dict) -> dict:
    """How the rows were judged (``jury``: ``Jury.public()``) and how far judgements agree."""
    pairs = [t for r in rows for t in ((r.get("position") or {}).get("by_judge") or {}).values()]
    gaps = [abs(t["reference_first"] - t["candidate_first"]) for t in pairs]
    panels = [list(r["jury"].values()) for r in rows
              if len(r.get("jury") or {}) > 1 and None not in r["jury"].values()]
    spreads = [max(t) - min(t) for t in panels]
    out = dict(jury)
    if jury.get("orders") == "both":
        out["position"] = {"judgements": len(pairs), "disagree": sum(g > 0 for g in gaps),
                           "mean_difference": _mean(gaps)}
    else:   # one drawn order a run: compare the totals each order got
        by = {o: [j["total"] for r in rows for j in r.get("judgements") or ()
                  if j["order"] == o and j["total"] is not None]
              for o in ("reference_first", "candidate_first")}
        out["position"] = {o: {"judgements": len(v), "mean_total": _mean(v)}
                           for o, v in by.items()}
    if len(jury.get("judges") or ()) > 1:
        out["agreement"] = {"runs": len(spreads), "within_1": sum(x <= 1 for x in spreads),
                            "mean_spread": _mean(spreads)}
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

    def public(self) -> dict:
        return {"v": 1, "race": self.race, "grade": self.grade, "pinned": self.pinned,
                "ceiling": self.ceiling, "runs": self.runs, "started": self.started,
                "seconds": self.seconds, "task": self.task, "rubric": self.rubric,
                "candidates": self.candidates, "reference": self.reference, "rows": self.rows,
                "models": self.models, "verdict": self.verdict, "costs": self.costs,
                "judge_failures": self.judge_failures, "calls_log": self.calls_log,
                "judges": self.judges, "judging": self.judging, "voided": self.voided,
                "warnings": self.warnings}

    def save(self, path: Path) -> None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic.write(path, jsonwire.dumps(self.public(), indent=1) + "\n", fsync=False)

    def table(self) -> str:
        """The report as plain text: the reference, a row per run, a line per model, verdict."""
        ref = self.reference
        outcome = "succeeded" if ref.get("succeeded") else f"FAILED: {ref.get('error')}"
        judges = self.judges or [self.ceiling]
        lines = [f"race {self.race} · grade {self.grade} · reference {self.pinned} · "
                 f"{'judge' if len(judges) == 1 else 'judges'} {', '.join(judges)} · "
                 f"{self.runs} run(s) per model · {self.seconds:.1f} s",
                 *(f"WARNING: {w}" for w in self.warnings),
                 f"reference: {outcome} · calls {ref.get('model_calls', 0)} · tools "
                 f"{ref.get('tool_calls', 0)} · wall {_num(ref.get('wall'))} s · cost "
                 f"{_cost(ref.get('cost'), ref.get('currency'))}"]
        head = ("model", "run", "ok", "calls", "tools", "in", "out", "first s", "wall s", "cost",
                "score", "acc", "work", "total", "reason")
        body = [(r["model"], str(r["run"]), "yes" if r["succeeded"] else "no",
                 str(r["model_calls"]), str(r["tool_calls"]), _num(r["tokens_in"]),
                 _num(r["tokens_out"]), _num(r["first_answer"]), _num(r["wall"]),
                 _cost(r["cost"], r["currency"]), _num(r["score"]), _num(r["accuracy"]),
                 _num(r["shown_work"]), _num(r["total"]), _short(r["reason"]))
                for r in self.rows]
        lines += _grid(head, body)
        head = ("model", "runs", "ok", "judged", "wall s", "cost/run", "score", "acc", "work",
                "total", "95% interval")
        body = [(m["model"], str(m["runs"]), str(m["succeeded"]), str(m["judged"]),
                 _num(m["wall"]), _cost(m["cost"], m["currency"]), _num(m["score"]),
                 _num(m["accuracy"]), _num(m["shown_work"]), _num(m["total"]),
                 _span(m["interval"]))
                for m in self.models]
        lines += [""] + _grid(head, body)
        said = _judging_lines(self.judging, self.voided)
        lines += [""] + said if said else []
        spent = ", ".join(f"{v:.6f} {c}" for c, v in self.costs.get("by_currency", {}).items())
        unknown = self.costs.get("unknown_calls")
        lines += ["", f"verdict: {self.verdict.get('model') or 'none'}: {self.verdict.get('why')}",
                  f"spent: {spent or 'nothing known'}"
                  + (f" (+{unknown} call(s) of unknown cost)" if unknown else "")
                  + (f" · judge failures: {self.judge_failures}" if self.judge_failures else "")]
        return "\n".join(lines)


def _judging_lines(judging: dict, voided: int) -> list[str]:
    lines = []
    position = judging.get("position") or {}
    if "judgements" in position and position["judgements"]:
        lines.append(f"position: the orders disagree on {position['disagree']} of "
                     f"{position['judgements']} judgement pair(s) (mean difference "
                     f"{_num(position['mean_difference'])})")
    elif position and "judgements" not in position:
        lines.append("position (one order drawn a run): mean total " + ", ".join(
            f"{_num(v['mean_total'])} with the {o.replace('_', ' ')} ({v['judgements']})"
            for o, v in position.items()))
    agreement = judging.get("agreement")
    if agreement and agreement["runs"]:
        lines.append(f"jury: within 1 point on {agreement['within_1']} of {agreement['runs']} "
                     f"run(s) (mean spread {_num(agreement['mean_spread'])})")
    if voided:
        lines.append(f"voided: {voided} run(s) named a model, so were not judged (see their "
                     "reason)")
    return lines


def _num(v) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:.2f}" if abs(v) < 1000 else f"{v:.0f}"
    return str(v)


def _span(pair) -> str:
    return "–" if pair is None else f"{pair[0]:.2f}–{pair[1]:.2f}"


def _cost(v, currency) -> str:
    return "–" if v is None else f"{v:.6f} {currency}"


def _short(text, n: int = 60) -> str:
    text = " ".join(str(text or "").split())
    return text if len(text) <= n else text[:n - 1] + "…"


def _grid(head: tuple, body: list[tuple]) -> list[str]:
    widths = [max(len(str(c)) for c in col) for col in zip(head, *body)]
    return ["  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip()
            for row in (head, *body)]
