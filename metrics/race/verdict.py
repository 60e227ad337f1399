"""The race's verdict: which model is good enough for the job, by a test that fails closed.

A candidate is **good enough** when a paired, one-sided non-inferiority test shows it at most
``margin`` points (of 10) worse than the pinned model on the same inputs:

* **What is tested.** The judge's accuracy after code's tool cap, put on 0–10 (× 10/7), and,
  when the race has a scorer, the scorer's score on 0–10 (× 10): a candidate must pass every
  measure (an intersection–union test, so no correction is owed between the measures). Shown
  work is reported beside them and never tested, so it cannot buy back accuracy the cap took.
* **The pairs.** With one input a unit is a run: the candidate's run ``n`` minus the pinned
  model's run ``n``. With several inputs a unit is an input: the candidate's mean over its runs
  of that input minus the pinned model's, so runs of one input never pass for independent
  evidence about the job.
* **The test.** H0: the mean difference is at most ``-margin``. ``t = (mean + margin) / (s /
  sqrt(n))``, ``p = P(T(n - 1) > t)``. ``s`` is the differences' standard deviation with the
  rounding of whole marks added, ``sqrt(sd² + ROUNDING²)`` (a difference of two marks rounded
  to a step ``d`` spreads by ``d / sqrt(6)`` from the rounding alone): marks are whole numbers,
  so two runs marked alike are not proof, and on whole marks the test keeps its level at the
  margin (on simulated races, about 4% where 5% is allowed, from 2 to 30 runs).
* **Several candidates.** Holm's correction across the candidates tested: the chance that any
  model not good enough is called good enough stays at most ``alpha``.
* **Looks.** A job raced again is tested again on all its runs so far; look ``k`` of a job
  tests at its share of ``alpha`` (``metrics.race.sequential``: alpha spent over 5 planned
  looks, 1.48% at the first), so racing again until a model is named names one not good
  enough at most ``alpha`` of the time over every look. Holm's adjusted p is compared with
  that share.
* **Worse** is a candidate whose one-sided upper bound (at ``1 - alpha``) on some measure lies
  below ``-margin``. Neither good enough nor worse is **undecided**, and the verdict says how
  many more units would settle it, as a range (``sequential.advice``): what the next look's
  test (its share over ``k`` candidates, Holm's first step) needs at ``power`` to show a model
  as good as the pinned model good enough, with the spread at either end of its interval
  (pooled over the candidates); when too few units measured a spread, an assumed spread, and
  the verdict says so.

The choice, failing closed:

* No model is named when the pinned model has no judged run, when the judge gave every judged
  run the same accuracy (it cannot discriminate), or when a candidate cheaper than the one
  that would be named is undecided, or has runs not judged or not scored (judge failures count,
  they are never dropped from a mean in silence; so does a run voided because it named a model:
  it is no evidence either way): the verdict then says how much more evidence would settle it.
* Otherwise the cheapest of the pinned model and the good-enough candidates is named (costs
  compared only within one currency; an unknown cost is never taken as cheap; good-enough
  models priced in several currencies name none). A candidate with a failed run is never
  named. When no cheaper candidate is good enough and none is open, the verdict keeps the
  pinned model.
"""

from __future__ import annotations

import math
from typing import Any

from panelist.metrics.race import sequential
from panelist.metrics.race.judge import MAX_ACCURACY
from panelist.metrics.stats import MOST_PAIRS, holm, t_quantile, t_sf

SCALE = 10.0  # every measure is tested in points of 10
MARGIN = 1.0  # how much worse than the pinned model is still good enough
ALPHA = 0.05
POWER = 0.8
STEP = SCALE / MAX_ACCURACY  # one accuracy mark, in points of 10
ROUNDING = STEP / math.sqrt(6)  # the spread a difference of two whole marks has from rounding
MAX_MARGIN = 5.0
METHOD = "paired one-sided non-inferiority t test, Holm across candidates, " + sequential.SPENDING
OPEN = ("undecided", "unjudged", "unscored")


def cost_text(v: float, currency: str) -> str:
    """A cost as people read it: 0 → "0 USD", 0.0001234 → "0.000123 USD", 12.5 → "12.50 USD"
    (six fixed decimals read "0.000000" for a free model and hide a small one's digits)."""
    if v == 0:
        text = "0"
    elif abs(v) < 1:
        text = f"{v:.3g}" if abs(v) >= 1e-4 else f"{v:.2e}"
    else:
        text = f"{v:.2f}"
    return f"{text} {currency}".strip()


def check_margin(margin) -> float:
    """``margin`` as a float, or ValueError saying what to give."""
    if (
        isinstance(margin, bool)
        or not isinstance(margin, (int, float))
        or not 0 < margin <= MAX_MARGIN
    ):
        raise ValueError(
            f"the margin is how many points of 10 worse than the pinned model a "
            f"model may be and still be good enough: a number above 0 and at most "
            f"{MAX_MARGIN:g} (default {MARGIN:g}), not {margin!r}"
        )
    return float(margin)


def _value(row: dict, measure: str) -> float | None:
    if measure == "accuracy":
        return None if row.get("accuracy") is None else row["accuracy"] * STEP
    return None if row.get("score") is None else row["score"] * SCALE


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def differences(mine: list[dict], pinned: list[dict], measure: str, unit: str) -> list[float]:
    """The unit differences (candidate minus pinned model) of one measure; a unit where either
    side has no value is left out (the caller counts why)."""
    if unit == "run":
        ref = {r["run"]: w for r in pinned if (w := _value(r, measure)) is not None}
        return [
            v - ref[r["run"]]
            for r in mine
            if (v := _value(r, measure)) is not None and r["run"] in ref
        ]
    out = []
    for i in sorted({r.get("input", 1) for r in mine}):
        a = [v for r in mine if r.get("input", 1) == i and (v := _value(r, measure)) is not None]
        b = [v for r in pinned if r.get("input", 1) == i and (v := _value(r, measure)) is not None]
        if a and b:
            out.append(_mean(a) - _mean(b))
    return out


def measure_test(diffs: list[float], margin: float, alpha: float) -> dict:
    """One measure's test: ``{n, mean, sd, spread, p, lower, upper}`` (``sd`` as observed,
    ``spread`` as used, with ``ROUNDING`` added; ``lower`` and ``upper`` the one-sided
    ``1 - alpha`` bounds on the mean difference)."""
    n = len(diffs)
    if n == 0:
        return {
            "n": 0,
            "mean": None,
            "sd": None,
            "spread": ROUNDING,
            "p": 1.0,
            "lower": None,
            "upper": None,
        }
    mean = _mean(diffs)
    sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (n - 1)) if n > 1 else None
    spread = math.hypot(sd or 0.0, ROUNDING)
    out = {
        "n": n,
        "mean": round(mean, 6),
        "sd": None if sd is None else round(sd, 6),
        "spread": round(spread, 6),
        "p": 1.0,
        "lower": None,
        "upper": None,
    }
    if n > 1:
        se = spread / math.sqrt(n)
        half = t_quantile(1 - alpha, n - 1) * se
        out.update(
            p=t_sf((mean + margin) / se, n - 1),
            lower=round(mean - half, 6),
            upper=round(mean + half, 6),
        )
    return out


def _counts(rows: list[dict], scored: bool) -> dict:
    return {
        "runs": len(rows),
        "failed": sum(not r["succeeded"] for r in rows),
        "unjudged": sum(r["succeeded"] and r.get("accuracy") is None for r in rows),
        "voided": sum(r["succeeded"] and bool(r.get("voided")) for r in rows),
        "unscored": sum(r["succeeded"] and bool(r.get("score_error")) for r in rows)
        if scored
        else 0,
    }


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def decide(
    rows: list[dict],
    models: list[dict],
    pinned: str,
    *,
    scored: bool = False,
    margin: float = MARGIN,
    alpha: float = ALPHA,
    power: float = POWER,
    look: int = 1,
) -> dict:
    """The verdict on a race's candidate ``rows`` (each ``model``, ``input``, ``run``,
    ``succeeded``, ``accuracy``, ``capped_from``, ``score``, ``score_error``), ``models`` (each
    ``model``, ``cost``, ``currency``) and the ``pinned`` alias; ``scored``: the race has a
    scorer; ``look``: which look of its job this is (1 for a first race). See the module
    docstring."""
    margin = check_margin(margin)
    share = sequential.level(look, alpha)
    units = "input" if len({r.get("input", 1) for r in rows}) > 1 else "run"
    ref_rows = [r for r in rows if r["model"] == pinned]
    ref_scored = scored and any(r.get("score") is not None for r in ref_rows)
    measures = ["accuracy", "score"] if ref_scored else ["accuracy"]
    out: dict[str, Any]
    out = {
        "model": None,
        "state": "",
        "why": "",
        "good_enough": [],
        "candidates": [],
        "needed": None,
        "band": None,
        "test": {
            "method": METHOD,
            "measures": measures,
            "margin": margin,
            "alpha": alpha,
            "power": power,
            "unit": units,
            "scale": SCALE,
            "rounding": round(ROUNDING, 6),
            "look": look,
            "looks": sequential.LOOKS,
            "level": round(share, 6),
            "levels": [round(x, 6) for x in sequential.levels(alpha)],
        },
    }
    notes = []
    if scored and not ref_scored:
        notes.append(
            "the scorer compared none of the pinned model's runs, so the verdict rests "
            "on accuracy alone"
        )
    ref_counts = _counts(ref_rows, scored)
    judged = [r for r in ref_rows if r.get("accuracy") is not None]
    if not judged:
        out.update(
            state="no_reference",
            why=f"the pinned model {pinned} has no judged run in this race, so there is "
            "nothing to compare with; race it too (it is raced by default when it is "
            "of the grade)",
        )
        return out
    ref_accuracy = _mean([r["accuracy"] for r in judged])
    out["band"] = [round(max(0.0, ref_accuracy - margin / STEP), 6), round(ref_accuracy, 6)]
    lost = [
        f"{_plural(ref_counts[k], 'run')} {word}"
        for k, word in (("failed", "failed"), ("unjudged", "not judged"))
        if ref_counts[k]
    ]
    if lost:
        notes.append(f"of the pinned model, {' and '.join(lost)}: their pairs are left out")
    cost = {m["model"]: (m.get("cost"), m.get("currency")) for m in models}
    entries, tested = [], []
    for alias in dict.fromkeys(r["model"] for r in rows):
        if alias == pinned:
            continue
        theirs = [r for r in rows if r["model"] == alias]
        c = _counts(theirs, scored)
        entry = {
            "model": alias,
            "cost": cost.get(alias, (None, None))[0],
            "currency": cost.get(alias, (None, None))[1],
            "result": "",
            "why": "",
            "measures": {},
            "p": None,
            "p_holm": None,
            "needed": None,
        }
        entries.append(entry)
        if c["failed"]:
            entry.update(result="failed", why=f"{c['failed']} of its {c['runs']} runs failed")
            continue
        if c["unjudged"]:
            failures = c["unjudged"] - c["voided"]
            how = [f"{failures} judge failure(s)"] if failures else []
            how += [f"{c['voided']} voided: the run named a model"] if c["voided"] else []
            entry.update(
                result="unjudged",
                why=f"{c['unjudged']} of its {c['runs']} runs were not judged "
                f"({', '.join(how)}); race again so every run is judged",
            )
            continue
        if c["unscored"]:
            entry.update(
                result="unscored",
                why=f"the scorer failed on {c['unscored']} of its {c['runs']} runs; "
                "fix the scorer and race again",
            )
            continue
        tested.append((entry, theirs))
    out["candidates"] = entries
    said = {
        r["capped_from"] if r.get("capped_from") is not None else r["accuracy"]
        for r in rows
        if r.get("accuracy") is not None
    }
    n_judged = sum(r.get("accuracy") is not None for r in rows)
    if n_judged >= 2 and len(said) == 1:
        for entry, _ in tested:
            entry.update(result="untested", why="the judge cannot tell the models apart")
        out.update(
            state="cannot_discriminate",
            why=f"the judge gave all {n_judged} judged runs the same accuracy "
            f"({next(iter(said))} of {MAX_ACCURACY}): it cannot tell the models "
            "apart, so no model is named; give it a rubric that separates good "
            "answers from bad ones, or another judge",
        )
        return _noted(out, notes)
    for entry, theirs in tested:
        for measure in measures:
            entry["measures"][measure] = measure_test(
                differences(theirs, ref_rows, measure, units), margin, alpha
            )
        entry["p"] = max(t["p"] for t in entry["measures"].values())
    tested_entries = [entry for entry, _ in tested]
    spreads = {
        m: sequential.pooled(
            [(e["measures"][m]["spread"], e["measures"][m]["n"]) for e in tested_entries]
        )
        for m in measures
    }
    after = sequential.level(look + 1, alpha) / len(tested_entries) if tested_entries else 0.0
    for entry, adjusted in zip(tested_entries, holm([e["p"] for e in tested_entries])):
        entry["p_holm"] = adjusted
        tests = entry["measures"].values()
        if share > 0 and adjusted <= share:
            entry["result"] = "good_enough"
            entry["why"] = _shown(entry, margin)
        elif any(t["upper"] is not None and t["upper"] < -margin for t in tests):
            entry["result"] = "worse"
            entry["why"] = f"shown more than {points(margin)} worse than {pinned}"
        else:
            entry["result"] = "undecided"
            entry["needed"] = _needed(entry, spreads, margin, after, power, units)
            entry["why"] = _open_why(entry, units, margin, look)
    good = [e for e in entries if e["result"] == "good_enough"]
    out["good_enough"] = [e["model"] for e in good]
    ref_cost, ref_currency = cost.get(pinned, (None, None))
    reference: dict[str, Any] = {"model": pinned, "cost": ref_cost, "currency": ref_currency}
    pick = reference
    priced = [e for e in [reference, *good] if e["cost"] is not None]
    if good and not priced:
        out.update(
            state="unpriced",
            why=f"{', '.join(out['good_enough'])} shown good enough, but no model to "
            "choose between has a known cost; add prices to the roster (price_in, "
            "price_out)",
        )
        return _noted(out, notes)
    if good:
        cheapest: dict[str, dict] = {}
        for e in priced:
            best = cheapest.get(e["currency"])
            if best is None or e["cost"] < best["cost"]:
                cheapest[e["currency"]] = e
        if len(cheapest) > 1:
            out["cheapest_by_currency"] = {c: e["model"] for c, e in sorted(cheapest.items())}
            out.update(
                state="currencies",
                why="the models shown good enough are priced in different currencies, "
                "which are never compared: "
                + ", ".join(
                    f"{e['model']} is cheapest in {c}" for c, e in sorted(cheapest.items())
                ),
            )
            return _noted(out, notes)
        (pick,) = cheapest.values()
    blocking = [
        e
        for e in entries
        if e["result"] in OPEN
        and e["cost"] is not None
        and (
            pick["cost"] is None or (e["currency"] == pick["currency"] and e["cost"] < pick["cost"])
        )
    ]
    out["needed"] = _most(blocking)
    if pick is reference and blocking:
        out.update(
            state="insufficient", why="too little evidence to name a model: " + _blocked(blocking)
        )
    elif pick is reference:
        others = "; ".join(
            f"{e['model']}: {e['why']}" + (" (no known cost)" if e["cost"] is None else "")
            for e in entries
        )
        out.update(
            model=pinned,
            state="keep",
            why=f"keep {pinned}: no cheaper model is shown good enough"
            + (f" ({others})" if others else " (no other model was raced)"),
        )
    else:
        out.update(
            model=pick["model"],
            state="named",
            why=f"{pick['model']} is the cheapest model shown good enough "
            f"({cost_text(pick['cost'], pick['currency'])} a run): {pick['why']}"
            + (f"; a cheaper one may be too: {_blocked(blocking)}" if blocking else ""),
        )
    return _noted(out, notes)


def points(margin: float) -> str:
    return f"{margin:g} point" + ("" if margin == 1 else "s")


def _shown(entry: dict, margin: float) -> str:
    parts = [
        f"{m} {t['mean']:+.2f}, lower bound {t['lower']:+.2f}, over {t['n']}"
        for m, t in entry["measures"].items()
    ]
    return (
        f"shown at most {points(margin)} of 10 worse than the pinned model (mean "
        f"difference {'; '.join(parts)}; p {entry['p']:.3g}, Holm p {entry['p_holm']:.3g})"
    )


def _needed(
    entry: dict, spreads: dict, margin: float, alpha: float, power: float, units: str
) -> dict | None:
    """How many more units the next look needs to settle an undecided candidate, as a range:
    the most any of its measures needs (``sequential.advice``)."""
    found = None
    for measure, t in entry["measures"].items():
        if t["mean"] is None:
            return None
        spread, df = spreads[measure]
        said = sequential.advice(spread, df, t["n"], margin, alpha, power, ROUNDING)
        if said is None:
            return None
        if found is None or said["high"] > found["high"]:
            found = said
    return dict(found, of=units + "s") if found else None


def _open_why(entry: dict, units: str, margin: float, look: int) -> str:
    needed = entry["needed"]
    have = max(t["n"] for t in entry["measures"].values())
    unpaired = [m for m, t in entry["measures"].items() if t["n"] == 0]
    if unpaired:
        return (
            f"undecided: none of its {units}s has a {' or '.join(unpaired)} to pair with "
            "the pinned model's (the scorer returned None for them)"
        )
    if needed is None and look >= sequential.LOOKS:
        return (
            f"undecided after {_plural(have, units)} over {look} looks: the job's "
            f"{sequential.LOOKS} planned looks are spent, so racing it again can name "
            "no model; a new job (another margin, rubric or inputs) starts afresh"
        )
    if needed is None:
        return (
            f"undecided after {_plural(have, units)}: even as good as the pinned model, "
            f"more than {MOST_PAIRS} {units}s would be needed to settle it"
        )
    return f"undecided after {_plural(have, units)}: {_more(needed)}"


def _more(needed: dict) -> str:
    return sequential.advice_text(needed, needed["of"])


def _most(blocking: list[dict]) -> dict | None:
    known = [e["needed"] for e in blocking if e["needed"] is not None]
    if not known:
        return None
    return max(known, key=lambda n: n["high"])


def _blocked(blocking: list[dict]) -> str:
    return "; ".join(
        f"{e['model']} is {e['why']}" if e["result"] == "undecided" else f"{e['model']}: {e['why']}"
        for e in blocking
    )


def _noted(out: dict, notes: list[str]) -> dict:
    if notes:
        out["why"] += " (" + "; ".join(notes) + ")"
    return out
