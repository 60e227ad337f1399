"""The judges of a race and how one run is judged: every judge, in both orders (or one order
drawn per run), each prompt kept as it was sent, the judgements pooled.

Invariants:

* Judges are of distinct families. A judge named by the caller (``--judges``) of a family a
  candidate or the reference is also of is refused before anything runs. A model never judges
  its own family's runs: the default judge (the ceiling model) of such a family gives way to the
  strongest model the roster can call of a family no raced model is of (``default_judge``), or,
  when there is none, judges the others and leaves the runs of its own family unjudged, saying
  why; either is a warning, in the log and in the report. A family is the roster's (typed, or
  derived from the model's id: ``roster.family``).
* A run that names itself, or a reference that does (``blind.Seen.names_itself``: its own
  alias, served id, family or vendor, said of itself), is never judged: its judgement is void,
  the row says why, and ``void_evidence`` holds each place (which name, as read and as written,
  its disguises, an excerpt) for a person to confirm. No judge is asked.
* Each judge is asked with temperature 0 and the race's seed; a parameter the judge's endpoint
  refuses (a 400 naming it) is dropped for that judge for the rest of the race, and the
  question is sent again without it (that resend is not one of the ``judge.ASKS``).
* Every question sent is kept in ``<race folder>/judge/<n>.json``: the request body exactly as
  the seats core sent it (model, parameters, messages; the client adds ``"stream": false``),
  beside the answer it got; its ``calls.jsonl`` line names the file (``prompt``), and so does
  the row's judgement.
* A judgement is tried at most ``judge.ASKS`` times in all. A call that fails in a way that may
  pass (a rate limit, a server error, a dropped connection) is tried again by the seats core,
  with its backoff, after a stated Retry-After, and only while the race's deadline leaves room;
  an unusable answer is asked again with the problem named. A call that still fails is not
  asked again. Every try is in ``calls.jsonl`` (``attempts``) and its kept question, and a
  judgement that never came back is logged.
* A run's scores are the means over the judgements that came back (every judge, every order),
  each capped for the tool difference first. A judgement that did not come back (its judge
  failed) is named in ``missing`` and left out, never guessed; once the race is over ``even``
  takes out the missing judges' offsets, so the run is scored as if judged in full. Only when
  no judgement came back has the run no score, and ``judge_error`` says which failed and why.
"""

from __future__ import annotations

import itertools
import logging
import random
import threading
import time
from pathlib import Path
from typing import Any, Callable

from panelist.metrics.errors import BadRequest
from panelist.metrics.race import judge
from panelist.metrics.race.blind import Seen
from panelist.metrics.race.tooldiff import differs
from panelist.metrics.roster.roster import Model
from panelist.metrics.seats import SeatCall, SeatResult
from panelist.metrics.store import atomic, jsonwire
from panelist.metrics.store.jsonl import utc_iso

log = logging.getLogger("panelist.race")

ORDERS = ("both", "random")
TUNED = ("temperature", "seed")  # what is dropped for a judge whose endpoint refuses it

Ask = Callable[[list[SeatCall]], list[SeatResult]]


def check(judges: list[Model], sides: list[Model], *, chosen: bool) -> list[str]:
    """Refuse a jury it would be wrong to seat; the warnings for one that may be biased.
    ``sides``: the reference's and the candidates' models; ``chosen``: the caller named the
    judges (refused) rather than taking the ceiling model (warned)."""
    families: dict[str, str] = {}
    for m in judges:
        if m.family in families:
            raise BadRequest(
                f"judges {families[m.family]} and {m.alias} are both of family "
                f"'{m.family}'; name judges of distinct families",
                param="judges",
            )
        families[m.family] = m.alias
    warnings = []
    for m in judges:
        own = [s.alias for s in sides if s.family == m.family]
        if not own:
            continue
        said = (
            f"the judge {m.alias} is of family '{m.family}', as {', '.join(own)} "
            "is, and may favour its own family's runs"
        )
        if chosen:
            raise BadRequest(f"{said}; name judges of other families", param="judges")
        warnings.append(f"{said}: name judges of other families with --judges a,b,c")
    for w in warnings:
        log.warning("race judge: %s", w)
    return warnings


def default_judge(
    ceiling: Model, sides: list[Model], strongest: list[Model]
) -> tuple[Model, dict[str, str], list[str]]:
    """The judge of a race that names none: ``(judge, barred, notes)``. The ceiling model,
    unless it is of a family a raced model (``sides``: the reference and the candidates) is of:
    a model never judges its own family's runs. Then the first of ``strongest`` (the models the
    roster can call, strongest first) of a family no raced model is of judges instead. When
    there is none, the ceiling judges the others, and ``barred`` maps its family to the reason
    the runs of that family are not judged."""
    raced = {m.family for m in sides}
    if ceiling.family not in raced:
        return ceiling, {}, []
    own = ", ".join(dict.fromkeys(m.alias for m in sides if m.family == ceiling.family))
    said = f"the ceiling model {ceiling.alias} is of family '{ceiling.family}', as {own} is"
    for m in strongest:
        if m.family not in raced:
            return (
                m,
                {},
                [f"{said}, so {m.alias} (family '{m.family}') judges the race in its place"],
            )
    why = (
        f"not judged: {said}, and no model the roster can call is of a family no raced "
        "model is of; name judges of other families with --judges a,b,c"
    )
    return (
        ceiling,
        {ceiling.family: why},
        [
            f"{said}, and no model of another family can judge: the runs of {own} are not judged; "
            "name judges of other families with --judges a,b,c"
        ],
    )


def _mean(values: list) -> float | int | None:
    if not values:
        return None
    mean = round(sum(values) / len(values), 3)
    return int(mean) if float(mean).is_integer() else mean


def even(rows: list[dict]) -> int:
    """Score each run a judgement is missing from as the runs judged in full are: each
    judgement it has, less its judge's (and order's) mean offset from the full runs' pooled
    score, then pooled; clipped to the marks a run may have (the cap included). Without it a
    run that lost its strictest judge would score as if judged leniently, and the verdict's
    pairs would compare runs judged by different juries. The plain mean is kept in
    ``evened_from``; a run whose judges were never all seen together keeps the plain mean.
    Returns how many runs were evened."""
    full = [
        r
        for r in rows
        if r.get("accuracy") is not None and r.get("judgements") and not r.get("missing")
    ]
    gaps: dict[tuple[str, str, str], list[float]] = {}
    for r in full:
        for measure in ("accuracy", "shown_work"):
            mean = sum(j[measure] for j in r["judgements"]) / len(r["judgements"])
            for j in r["judgements"]:
                gaps.setdefault((j["judge"], j["order"], measure), []).append(j[measure] - mean)
    offset = {k: sum(v) / len(v) for k, v in gaps.items()}
    evened = 0
    for r in rows:
        if not r.get("missing") or r.get("accuracy") is None or r.get("evened_from"):
            continue
        answered = [j for j in r["judgements"] if not j.get("error")]
        if any((j["judge"], j["order"], "accuracy") not in offset for j in answered):
            continue
        top = {
            "accuracy": judge.CAP
            if differs(r.get("tool_difference") or {})
            else judge.MAX_ACCURACY,
            "shown_work": judge.MAX_SHOWN_WORK,
        }
        was = {m: r[m] for m in ("accuracy", "shown_work", "total")}
        for measure in ("accuracy", "shown_work"):
            value = _mean(
                [j[measure] - offset[(j["judge"], j["order"], measure)] for j in answered]
            )
            assert value is not None  # a run with an accuracy has an answered judgement
            r[measure] = min(max(value, 0), top[measure])
        r["total"] = _mean([r["accuracy"] + r["shown_work"]])
        r["evened_from"] = was
        evened += 1
    return evened


class Jury:
    """What every judgement of one race shares: its judges, orders, seed and prompt folder."""

    def __init__(
        self,
        judges: list[Model],
        folder: Path,
        race: str,
        *,
        seed: int,
        orders: str = "both",
        call_timeout: float = 120.0,
    ):
        if orders not in ORDERS:
            raise BadRequest(
                f"orders must be one of {', '.join(ORDERS)}, not {orders!r}", param="orders"
            )
        if not judges:
            raise BadRequest("a race needs at least one judge", param="judges")
        self.judges, self.race, self.seed, self.orders = list(judges), race, seed, orders
        self.folder = folder / "judge"
        self.call_timeout = call_timeout
        self.refused: dict[str, list[str]] = {}  # judge alias -> parameters it refused
        self.barred: dict[str, str] = {}  # a family no judge may judge -> why (default_judge)
        self._seq = itertools.count(1)
        self._lock = threading.Lock()

    def public(self) -> dict:
        return {
            "judges": [m.alias for m in self.judges],
            "orders": self.orders,
            "temperature": 0,
            "seed": self.seed,
            "refused": {k: list(v) for k, v in sorted(self.refused.items())},
        }

    def orders_of(self, label: str) -> tuple[str, ...]:
        """The orders a run is judged in; a drawn order depends only on the seed and the run."""
        if self.orders == "both":
            return judge.ORDERS
        return (random.Random(f"{self.seed}:{label}").choice(judge.ORDERS),)

    def _params(self, model: Model) -> dict:
        with self._lock:
            refused = set(self.refused.get(model.alias, ()))
        params = {"response_format": judge.RESPONSE_FORMAT, "temperature": 0, "seed": self.seed}
        return {k: v for k, v in params.items() if k not in refused}

    def _refusal(self, model: Model, result: SeatResult, sent: dict) -> bool:
        """Whether ``result`` refused a tuning parameter ``sent`` held (now dropped)."""
        if result.answered or result.error_kind != "bad_reply":
            return False
        named = [p for p in TUNED if p in sent and p in (result.error or "").lower()]
        if not named:
            return False
        with self._lock:
            have = self.refused.setdefault(model.alias, [])
            have += [p for p in named if p not in have]
        log.info("race judge %s refuses %s; asked again without", model.alias, ", ".join(named))
        return True

    def judge(
        self,
        ask: Ask,
        *,
        label: str,
        run: int,
        task: str,
        rubric: str | None,
        reference: Seen,
        candidate: Seen,
        diff: dict,
        difference: str,
        input_: int = 1,
    ) -> dict:
        """The row's judging fields for the run ``label``: ``judgements`` (one per judge and
        order, with its prompts), the pooled ``accuracy``, ``shown_work``, ``total``, and
        ``voided`` or ``judge_error`` when there is no score. ``difference``: ``diff`` as the
        judge reads it (described and masked); ``diff`` caps each judgement; ``input_``: which
        input the run is of (from 1)."""
        void = [f"the reference run names itself: “{x}”" for x in reference.names_itself] + [
            f"the candidate run names itself: “{x}”" for x in candidate.names_itself
        ]
        blind = {"masked": {"reference": reference.masked, "candidate": candidate.masked}}
        if void:
            evidence = [dict(e, run="reference") for e in reference.evidence] + [
                dict(e, run="candidate") for e in candidate.evidence
            ]
            return {
                "voided": "not judged, so as to stay blind: " + "; ".join(void),
                "void_evidence": evidence,
                "blind": blind,
                "judgements": [],
                "judge_asks": 0,
            }
        states: list[dict[str, Any]] = []  # one judge in one order: its asks so far
        for model in self.judges:
            for order in self.orders_of(label):
                states.append(
                    {
                        "judge": model,
                        "order": order,
                        "asks": 0,
                        "problem": "",
                        "done": False,
                        "prompts": [],
                        "verdict": None,
                        "messages": judge.messages(
                            task, rubric, reference.text, candidate.text, difference, order
                        ),
                    }
                )
        while True:
            pending = [
                s
                for s in states
                if s["verdict"] is None and not s["done"] and s["asks"] < judge.ASKS
            ]
            if not pending:
                break
            calls = []
            for s in pending:
                name = f"{next(self._seq):05d}.json"
                s["sending"] = name
                # the seats core tries a transient failure again (its backoff, a stated
                # Retry-After, the race's deadline) within what is left of the judgement's tries
                calls.append(
                    SeatCall(
                        label=f"judge.{label}.{s['judge'].alias}.{s['order']}."
                        f"{len(s['prompts']) + 1}",
                        role="judge",
                        model=s["judge"],
                        messages=s["messages"],
                        params=self._params(s["judge"]),
                        timeout=self.call_timeout,
                        retries=judge.ASKS - s["asks"] - 1,
                        meta={
                            "race": self.race,
                            "run": run,
                            "input": input_,
                            "judged": label,
                            "order": s["order"],
                            "ask": s["asks"] + 1,
                            "prompt": f"judge/{name}",
                        },
                    )
                )
            for s, call, result in zip(pending, calls, ask(calls)):
                self._keep(s["sending"], call, result, label, s)
                s["prompts"].append(f"judge/{s['sending']}")
                if self._refusal(s["judge"], result, call.params):
                    continue
                s["asks"] += max(1, result.attempts)
                if not result.answered:
                    # the core has tried it again as far as trying could help: a call that
                    # failed is not asked once more
                    s["done"] = True
                    s["problem"] = (
                        f"the judge's call failed after {max(1, result.attempts)} "
                        f"attempt(s) ({result.error_kind}: {result.error})"
                    )
                    continue
                if result.attempts > 1:
                    log.info(
                        "race judge %s answered on %s after %d attempts",
                        s["judge"].alias,
                        label,
                        result.attempts,
                    )
                parsed, s["problem"] = judge.parse(result.text)
                if parsed is not None:
                    s["verdict"] = judge.Judgement(**parsed, asks=s["asks"]).cap(diff)
                else:
                    s["messages"] = judge.again(s["messages"], result.text, s["problem"])
        for s in states:
            if s["verdict"] is None:
                log.warning(
                    "race judge %s (%s) gave no judgement of %s after %d attempt(s): %s",
                    s["judge"].alias,
                    s["order"],
                    label,
                    s["asks"],
                    s["problem"],
                )
        return self._pooled(states, blind)

    def _keep(self, name: str, call: SeatCall, result: SeatResult, label: str, state: dict) -> None:
        """The question exactly as sent, beside its answer."""
        record = {
            "v": 1,
            "ts": utc_iso(time.time()),
            "race": self.race,
            "judged": label,
            "judge": call.model.alias,
            "order": state["order"],
            "ask": call.meta["ask"],
            "call": result.call,
            "attempts": result.attempts,
            "request": dict(call.params, model=call.model.served, messages=call.messages),
            "status": result.status,
            "answer": result.text if result.answered else None,
            "error": None if result.answered else result.reason,
        }
        self.folder.mkdir(parents=True, exist_ok=True)
        atomic.write(self.folder / name, jsonwire.dumps(record, indent=1) + "\n", fsync=False)

    def _pooled(self, states: list[dict], blind: dict) -> dict:
        judgements = []
        for s in states:
            v: judge.Judgement = s["verdict"] or judge.Judgement(
                error=f"judge failure after {s['asks']} attempt(s): {s['problem']}", asks=s["asks"]
            )
            judgements.append(
                {
                    "judge": s["judge"].alias,
                    "order": s["order"],
                    "accuracy": v.accuracy,
                    "shown_work": v.shown_work,
                    "total": v.total,
                    "capped_from": v.said,
                    "reason": v.reason,
                    "error": v.error or None,
                    "asks": v.asks,
                    "prompts": s["prompts"],
                }
            )
        out = {
            "judgements": judgements,
            "blind": blind,
            "judge_asks": sum(j["asks"] for j in judgements),
        }
        failed = [j for j in judgements if j["error"]]
        answered = [j for j in judgements if not j["error"]]
        said = "; ".join(
            f"{j['judge']} ({j['order'].replace('_', ' ')}): {j['error']}" for j in failed
        )
        if not answered:
            out["judge_error"] = said
            out["reason"] = out["judge_error"]
        else:
            # a judgement that did not come back is left out, never guessed: the run is scored
            # by those that did (``even`` then takes out the missing judges' offsets)
            out.update(
                accuracy=_mean([j["accuracy"] for j in answered]),
                shown_work=_mean([j["shown_work"] for j in answered]),
                total=_mean([j["total"] for j in answered]),
                reason=" | ".join(dict.fromkeys(j["reason"] for j in answered)),
            )
            capped = [j["capped_from"] for j in answered if j["capped_from"] is not None]
            if capped:
                out["capped_from"] = _mean(
                    [
                        j["capped_from"] if j["capped_from"] is not None else j["accuracy"]
                        for j in answered
                    ]
                )
                out["reason"] += (
                    f" [accuracy capped at {judge.CAP} from {out['capped_from']}: "
                    "the tool calls differ from the reference's]"
                )
            if failed:
                out["missing"] = [
                    {"judge": j["judge"], "order": j["order"], "error": j["error"]} for j in failed
                ]
                out["reason"] += f" [judged without {said}]"
        by_judge: dict[str, dict] = {}
        for j in judgements:
            if j["total"] is not None:
                by_judge.setdefault(j["judge"], {})[j["order"]] = j["total"]
        if self.orders == "both":
            pairs = {a: t for a, t in by_judge.items() if len(t) == 2}
            out["position"] = {
                "by_judge": pairs,
                "disagree": any(
                    t["reference_first"] != t["candidate_first"] for t in pairs.values()
                ),
            }
        if len(self.judges) > 1:
            out["jury"] = {a: _mean(list(t.values())) for a, t in by_judge.items()}
        return out
