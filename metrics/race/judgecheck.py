"""``panelist judge check``: a judge (or several) run blind over a sample of the panels people
judged, and scored against their verdicts (``peoplematch``), with its cost shown first and capped.

A **judged panel** is one whose current verdicts mark two answers or more, useful or not. The
check samples ``sample`` of them (of one shape when asked), and asks each judge, blind
(``checkprompt``; names masked by ``race.blind``), whether each answer is useful, and, for each
pair the person separated (one useful, one not), which answer is better, in both orders.

Invariants:

* Cost of the sample: the candidates come from the ledger's index in memory
  (``Ledger.judged_panels``, the most recent judged panels it keeps), are shuffled with the
  seed, and read one panel line at a time through panels.idx until ``sample`` usable ones are
  found: O(sample) reads (plus one per panel passed over: no answer text left, fewer than two
  judged answers with text), never a log scan.
* Money: before any question is sent, the plan prices every question (the roster's price, else
  the catalog's, × its tokens: characters / 4 in, ``checkprompt.OUT_TOKENS`` out). With a
  ``budget`` the check is refused when that estimate exceeds it, when a judge has no price, or
  when the judges are priced in more than one currency; while it runs, the next panels are
  asked only while what was spent (the tokens the upstream counted; a call without counts at
  its estimate) plus their estimate stays within the budget, and the report says where it
  stopped and why.
* Judges are of distinct families (``jury.check``'s rule); the default judge is the ceiling
  model, as a race's.
* Every question is logged as a seat record (role ``judge``) in ``<check>/calls.jsonl``; the
  report is ``<check>.json`` and the latest figures per judge and shape ``latest.json``
  (``race.checks``). What was asked is not kept: it is the panels' own text, in calls.jsonl.
* A question whose reply cannot be read is asked once more; a second failure, or a failed
  call, leaves that mark or that order out of every figure, and is counted (``failed``).
"""

from __future__ import annotations

import math
import random
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from panelist.metrics.errors import BadRequest, NotFound
from panelist.metrics.home import Home
from panelist.metrics.race import blind, checkprompt, checks, jury, peoplematch
from panelist.metrics.race.checkprompt import ORDERS, PREFERENCE, USEFULNESS
from panelist.metrics.race.costs import Costs, call_cost
from panelist.metrics.race.verdict import cost_text
from panelist.metrics.roster.known import KnownRoster
from panelist.metrics.roster.learned import LearnedFacts
from panelist.metrics.roster.roster import Model, Roster
from panelist.metrics.seats.record import CallLog
from panelist.metrics.seats import SeatCall, Seats
from panelist.metrics.store.jsonl import utc_iso

ASKS = 2  # tries of one question: an unreadable reply is asked once more

SAMPLE = 100  # panels sampled when no --sample is given
MAX_SAMPLE = 2000
MAX_JUDGES = 9
PANELS_AT_ONCE = 8  # panels whose questions are asked together
PARALLEL = 16  # questions in flight at once per endpoint
CALL_TIMEOUT = 120.0
CHECK_TIMEOUT = 3600.0
JURY = "jury"


@dataclass
class Sampled:
    """One judged panel as the check reads it: its prompt and its judged answers."""

    panel: str
    shape: str
    prompt: str
    answers: list[dict]  # {"call", "alias", "useful", "text"}: text as the person saw it


@dataclass
class _Questions:
    """One panel's questions (the same for every judge): a mark per answer, and per separated
    pair its question in each order; ``tokens`` in of all of them."""

    sampled: Sampled
    panel: peoplematch.Panel
    marks: list[list[dict]]
    pairs: list[dict]  # order -> messages
    tokens: int

    @property
    def asks(self) -> int:
        return len(self.marks) + 2 * len(self.pairs)


@dataclass
class Plan:
    """What a check will do, checked and priced before anything is sent."""

    judges: list[Model]
    shape: str | None
    panels: list[_Questions]
    available: int  # judged panels the index holds (of the shape)
    read: int  # panel lines read to find them
    estimate: dict  # currency -> amount, for every question once
    unpriced: list[str]  # judges without a price
    budget: float | None
    seed: int

    @property
    def questions(self) -> int:
        return sum(q.asks for q in self.panels) * len(self.judges)

    def cost_of(self, questions: list[_Questions]) -> dict[str, float]:
        return _estimate(self.judges, questions)

    def public(self) -> dict:
        return {
            "judges": [m.alias for m in self.judges],
            "shape": self.shape,
            "panels": len(self.panels),
            "available": self.available,
            "questions": self.questions,
            "estimate": {c: round(v, 8) for c, v in self.estimate.items()},
            "unpriced": self.unpriced,
            "budget": self.budget,
            "seed": self.seed,
        }

    def said(self) -> str:
        """The estimate as a person reads it, before the check runs."""
        cost = ", ".join(cost_text(v, c) for c, v in self.estimate.items()) or "nothing known"
        if self.unpriced:
            cost += f" (+ unknown: {', '.join(self.unpriced)} has no price)"
        cap = (
            f"; budget {cost_text(self.budget, self._currency())}"
            if self.budget is not None
            else ""
        )
        return (
            f"judge check: {len(self.panels)} of {self.available} judged panels"
            + (f" of shape {self.shape}" if self.shape else "")
            + f", {self.questions} questions to {', '.join(m.alias for m in self.judges)}"
            f"; estimated cost {cost}{cap}"
        )

    def _currency(self) -> str:
        return next(iter(self.estimate), self.judges[0].currency)


def _estimate(judges: list[Model], questions: list[_Questions]) -> dict[str, float]:
    tokens_in = sum(q.tokens for q in questions)
    tokens_out = sum(q.asks for q in questions) * checkprompt.OUT_TOKENS
    out: dict[str, float] = {}
    for m in judges:
        cost = call_cost(m, {"prompt": tokens_in, "completion": tokens_out})
        if cost is not None:
            out[m.currency] = out.get(m.currency, 0.0) + cost
    return out


def _tokens(messages: list[dict]) -> int:
    return math.ceil(sum(len(m["content"]) for m in messages) / 4)


# -- the sample ------------------------------------------------------------------------------------
def sample(ledger, shape: str | None, n: int, seed: int) -> tuple[list[Sampled], int, int]:
    """``(panels, judged panels available, panel lines read)``: up to ``n`` judged panels, drawn
    with ``seed``, each with two judged answers or more that have text."""
    found = ledger.judged_panels(shape)
    order = list(found)
    random.Random(f"judge check {seed}").shuffle(order)
    chosen: list[Sampled] = []
    read = 0
    for panel, shp, verdicts in order:
        if len(chosen) >= n:
            break
        record = ledger.panel(panel)
        read += 1
        if (
            not isinstance(record, dict)
            or not isinstance(record.get("prompt"), str)
            or not record["prompt"].strip()
        ):
            continue
        seats = [s for s in record.get("seats") or () if isinstance(s, dict)]
        if isinstance(record.get("merger"), dict):
            seats.append(record["merger"])
        by_call = {s.get("call"): s for s in seats}
        answers = []
        for call, alias, useful in verdicts:
            text = (by_call.get(call) or {}).get("answer")
            if isinstance(text, str) and text.strip():
                answers.append({"call": call, "alias": alias, "useful": bool(useful), "text": text})
        if len(answers) >= 2:
            chosen.append(Sampled(panel, shp, record["prompt"], answers))
    return chosen, len(found), read


def _questions(sampled: Sampled, masker: blind.Masker) -> _Questions:
    texts = [masker(a["text"]) for a in sampled.answers]
    panel = peoplematch.Panel(
        sampled.shape,
        [peoplematch.Answer(a["useful"], len(t)) for a, t in zip(sampled.answers, texts)],
    )
    panel.pairs = peoplematch.separated(panel.answers)
    marks = [checkprompt.usefulness(sampled.prompt, t) for t in texts]
    pairs = [
        {
            "good_first": checkprompt.preference(sampled.prompt, texts[p.good], texts[p.bad]),
            "bad_first": checkprompt.preference(sampled.prompt, texts[p.bad], texts[p.good]),
        }
        for p in panel.pairs
    ]
    tokens = sum(map(_tokens, marks)) + sum(_tokens(m) for q in pairs for m in q.values())
    return _Questions(sampled, panel, marks, pairs, tokens)


# -- the check -------------------------------------------------------------------------------------
def _admission(home: Home):
    try:
        from panelist.metrics.upstream.admission import Admission
    except ImportError:  # admission not installed in this build: no limits
        return None
    return Admission.of_home(home)


def parse_budget(text) -> float:
    """``--budget``'s amount, in the judges' currency."""
    try:
        value = float(str(text).strip())
    except ValueError:
        value = float("nan")
    if not math.isfinite(value) or value <= 0:
        raise BadRequest(
            f"--budget must be an amount above 0 in the judges' currency, such "
            f"as 2.50, not {str(text)[:40]!r}",
            param="budget",
        )
    return value


class JudgeCheck:
    """One check of a data folder: ``plan()`` (sampled and priced; refusals raised there),
    then ``run(plan)`` (the report, saved)."""

    def __init__(
        self,
        home: Home,
        *,
        judges: list[str] | None = None,
        shape: str | None = None,
        sample: int = SAMPLE,
        budget: float | None = None,
        seed: int = 0,
        upstream=None,
        admission="home",
        call_timeout: float = CALL_TIMEOUT,
        ledger=None,
    ):
        if isinstance(sample, bool) or not isinstance(sample, int) or not 1 <= sample <= MAX_SAMPLE:
            raise BadRequest(
                f"--sample must be a whole number from 1 to {MAX_SAMPLE}: how "
                "many judged panels to check",
                param="sample",
            )
        if judges is not None and (not judges or len(judges) > MAX_JUDGES):
            raise BadRequest(
                f"--judges names 1 to {MAX_JUDGES} models, of distinct families", param="judges"
            )
        self.home, self.names, self.shape = home, judges, shape
        self.n, self.budget, self.seed = sample, budget, seed
        self.upstream, self.call_timeout = upstream, call_timeout
        self.admission = _admission(home) if admission == "home" else admission
        self._ledger = ledger
        self._cancel = threading.Event()

    def cancel(self) -> None:
        self._cancel.set()

    def _judges(self, known: KnownRoster) -> list[Model]:
        view = known.view()
        if self.names is None:
            from panelist.metrics.race.benchmark import GradeBook

            ceiling = GradeBook.of_home(self.home, known.roster).ceiling()
            ceiling = getattr(ceiling, "alias", ceiling)
            if ceiling is None:
                raise NotFound(
                    "there is no ceiling model to judge with; set one with "
                    "`panelist grade ceiling ALIAS`, or name judges with --judges",
                    param="judges",
                )
            names = [ceiling]
        else:
            names = list(dict.fromkeys(self.names))
        unknown = [a for a in names if a not in view.models]
        if unknown:
            raise NotFound(
                f"unknown judge(s) {', '.join(unknown)}; name models of the roster "
                "(`panelist model list`)",
                param="judges",
            )
        models = [view.models[a] for a in names]
        jury.check(models, [], chosen=True)  # distinct families, as a race's jury
        return models

    def plan(self) -> Plan:
        """Sample the panels and price every question; refused here, before anything is sent,
        when there is nothing to check or the estimate breaks the budget."""
        known = KnownRoster(Roster(self.home), self.home)
        judges = self._judges(known)
        view = known.view()
        ledger = self._ledger
        own = ledger is None
        if own:
            from panelist.metrics.ledger.ledger import Ledger

            ledger = Ledger.of_home(self.home)
        try:
            found, available, read = sample(ledger, self.shape, self.n, self.seed)
        finally:
            if own:
                ledger.close()
        if not found:
            where = f" of shape '{self.shape}'" if self.shape else ""
            raise BadRequest(
                f"no judged panel{where} to check: a panel counts once a person "
                "has marked two or more of its answers useful or not (on Panels, "
                "or with `panelist verdict`)",
                param="shape",
            )
        names = blind.Names.of(view.models.values(), view.endpoints.values(), known.served_ids())
        questions = [_questions(s, blind.Masker(names, [s.prompt])) for s in found]
        estimate = _estimate(judges, questions)
        unpriced = [m.alias for m in judges if m.price_in is None or m.price_out is None]
        plan = Plan(
            judges,
            self.shape,
            questions,
            available,
            read,
            estimate,
            unpriced,
            self.budget,
            self.seed,
        )
        if self.budget is not None:
            self._check_budget(plan, self.budget)
        return plan

    def _check_budget(self, plan: Plan, budget: float) -> None:
        if plan.unpriced:
            raise BadRequest(
                f"--budget cannot be kept: {', '.join(plan.unpriced)} has no "
                "price; give it one (`panelist model add ALIAS --price-in X "
                "--price-out Y`) or check without --budget",
                param="budget",
            )
        currencies = sorted({m.currency for m in plan.judges})
        if len(currencies) > 1:
            raise BadRequest(
                f"--budget is one amount, but the judges are priced in "
                f"{' and '.join(currencies)}; check them one at a time",
                param="budget",
            )
        cost = sum(plan.estimate.values())
        if cost > budget:
            each = cost / max(1, len(plan.panels))
            fit = int(budget // each) if each else len(plan.panels)
            raise BadRequest(
                f"the check would cost about {cost_text(cost, currencies[0])} "
                f"({len(plan.panels)} panels, {plan.questions} questions), over "
                f"the budget of {cost_text(budget, currencies[0])}; lower "
                f"--sample (about {fit} panels fit) or raise --budget",
                param="budget",
            )

    def run(self, plan: Plan, progress=None) -> dict:
        """Ask every question of ``plan`` (within its budget), score the judges and save the
        report; ``progress(done, of)`` hears each batch of panels end."""
        check, folder = checks.new_id(self.home.judge_checks)
        log = CallLog(folder / "calls.jsonl")
        seats = Seats(
            Roster(self.home),
            self.upstream,
            admission=self.admission,
            learn=LearnedFacts(self.home).heard,
            thread_name=f"check-{check}",
        )
        started, t0 = time.time(), time.monotonic()
        deadline = t0 + CHECK_TIMEOUT
        costs, spent = Costs(), 0.0
        self._priced = [0.0, 0.0]  # estimated and spent, over the calls whose cost is known
        said: dict[str, list[peoplematch.Decisions]] = {m.alias: [] for m in plan.judges}
        done: list[_Questions] = []
        asked = failed = 0
        stopped = None
        try:
            at = 0
            while at < len(plan.panels):
                if self._cancel.is_set():
                    stopped = "cancelled"
                    break
                batch = plan.panels[at : at + PANELS_AT_ONCE]
                if plan.budget is not None:
                    while (
                        batch
                        and spent + self._scaled(sum(plan.cost_of(batch).values())) > plan.budget
                    ):
                        batch = batch[:-1]
                    if not batch:
                        stopped = (
                            f"the budget of {cost_text(plan.budget, plan._currency())} "
                            f"was reached after {len(done)} of {len(plan.panels)} panels"
                        )
                        break
                left = None if plan.budget is None else plan.budget - spent
                answers, n_asked, n_failed, cost = self._ask(
                    seats, log, plan.judges, batch, check, deadline, costs, left
                )
                asked, failed, spent = asked + n_asked, failed + n_failed, spent + cost
                for alias, decisions in answers.items():
                    said[alias] += decisions
                done += batch
                at += len(batch)
                if progress is not None:
                    progress(len(done), len(plan.panels))
        finally:
            log.close()
            seats.close()
        report = self._report(
            plan,
            check,
            started,
            time.monotonic() - t0,
            done,
            said,
            costs,
            asked,
            failed,
            stopped,
            str(log.path),
        )
        checks.save(self.home.judge_checks, report)
        return report

    def _scaled(self, estimate: float) -> float:
        """``estimate`` corrected by what the calls so far cost against their estimates (never
        below it): a judge that writes more than expected is caught before the next batch."""
        guessed, paid = self._priced
        return estimate * max(1.0, paid / guessed) if guessed > 0 else estimate

    def _ask(
        self,
        seats: Seats,
        log: CallLog,
        judges: list[Model],
        batch: list[_Questions],
        check: str,
        deadline: float,
        costs: Costs,
        left: float | None,
    ):
        """Every question of ``batch`` to every judge, re-asked once when unreadable while
        ``left`` (the budget left, None: no budget) allows: ``({alias: [Decisions per panel]},
        asked, failed, spent)``."""
        states: list[dict[str, Any]] = []  # one question to one judge: its asks so far
        for m in judges:
            for k, q in enumerate(batch):
                for i, messages in enumerate(q.marks):
                    states.append(
                        {
                            "judge": m,
                            "panel": k,
                            "kind": USEFULNESS,
                            "at": i,
                            "order": None,
                            "messages": messages,
                            "value": None,
                            "asks": 0,
                            "estimate": _tokens(messages),
                        }
                    )
                for i, pair in enumerate(q.pairs):
                    for order in ORDERS:
                        states.append(
                            {
                                "judge": m,
                                "panel": k,
                                "kind": PREFERENCE,
                                "at": i,
                                "order": order,
                                "messages": pair[order],
                                "value": None,
                                "asks": 0,
                                "estimate": _tokens(pair[order]),
                            }
                        )
        spent, asked = 0.0, 0
        while True:
            pending = [
                s for s in states if s["value"] is None and not s.get("failed") and s["asks"] < ASKS
            ]
            if not pending:
                break
            # a budget needs every judge priced (_check_budget): no cost here is None
            if (
                left is not None
                and spent > 0
                and spent + self._scaled(sum(_cost(s) or 0.0 for s in pending)) > left
            ):
                break  # no room to ask again: those questions fail, and the budget holds
            calls = [
                SeatCall(
                    label=f"judge.{q_label(batch[s['panel']], s)}.{s['judge'].alias}.{s['asks'] + 1}",
                    role="judge",
                    model=s["judge"],
                    messages=s["messages"],
                    params={
                        "response_format": checkprompt.response_format(s["kind"]),
                        "temperature": 0,
                        "seed": self.seed,
                    },
                    timeout=self.call_timeout,
                    retries=2,
                    meta={
                        "check": check,
                        "panel": batch[s["panel"]].sampled.panel,
                        "question": s["kind"],
                        "order": s["order"],
                        "ask": s["asks"] + 1,
                    },
                )
                for s in pending
            ]
            results = seats.run(
                calls, deadline=deadline, cancel=self._cancel, log=log, parallel=PARALLEL
            )
            for s, result in zip(pending, results):
                s["asks"] += 1
                asked += 1
                cost = call_cost(s["judge"], result.tokens)
                if cost is not None:
                    self._priced[0] += _cost(s) or 0.0
                    self._priced[1] += cost
                elif result.status != "cancelled":
                    cost = _cost(s)
                costs.add(s["judge"].currency, cost)
                spent += cost or 0.0
                if not result.answered:
                    s["failed"] = True
                    continue
                value, problem = checkprompt.parse(result.text, s["kind"])
                if value is None:
                    s["messages"] = checkprompt.again(
                        s["messages"], result.text, problem, s["kind"]
                    )
                    s["estimate"] = _tokens(s["messages"])
                else:
                    s["value"] = value
        out = {
            m.alias: [
                peoplematch.Decisions(
                    [None] * len(q.marks), [dict.fromkeys(ORDERS) for _ in q.pairs]
                )
                for q in batch
            ]
            for m in judges
        }
        failed = 0
        for s in states:
            if s["value"] is None:
                failed += 1
                continue
            said = out[s["judge"].alias][s["panel"]]
            if s["kind"] == USEFULNESS:
                said.marks[s["at"]] = s["value"]
            else:  # A is the good answer when it is shown first
                good = "A" if s["order"] == "good_first" else "B"
                said.prefs[s["at"]][s["order"]] = "good" if s["value"] == good else "bad"
        return out, asked, failed, spent

    def _report(
        self,
        plan: Plan,
        check: str,
        started: float,
        seconds: float,
        done: list[_Questions],
        said: dict,
        costs: Costs,
        asked: int,
        failed: int,
        stopped: str | None,
        calls_log: str,
    ) -> dict:
        families = {m.alias: m.family for m in plan.judges}
        known = KnownRoster(Roster(self.home), self.home).view().models
        family_of = {a: m.family for a, m in known.items()}
        shapes = [plan.shape] if plan.shape else ["all", *sorted({q.sampled.shape for q in done})]
        median = peoplematch.median_chars([q.panel for q in done])
        judges = list(said)
        sources = dict(said)
        if len(judges) > 1:
            sources[JURY] = [majority([said[a][k] for a in judges]) for k in range(len(done))]
        results = []
        for alias, decisions in sources.items():
            for shape in shapes:
                picked = [
                    k
                    for k, q in enumerate(done)
                    if shape in ("all", plan.shape) or q.sampled.shape == shape
                ]
                panels = [_owned(done[k], family_of, families.get(alias)) for k in picked]
                scored = peoplematch.score(
                    panels, [decisions[k] for k in picked], seed=self.seed, median=median
                )
                results.append(
                    dict(
                        judge=alias if alias != JURY else f"{JURY}:{','.join(judges)}",
                        family=families.get(alias),
                        shape=shape,
                        panels=len(panels),
                        answers=sum(len(p.answers) for p in panels),
                        pairs=sum(len(p.pairs) for p in panels),
                        **scored,
                    )
                )
        return {
            "v": 1,
            "check": check,
            "ts": utc_iso(started),
            "seconds": round(seconds, 3),
            "seed": plan.seed,
            "shape": plan.shape,
            "sample": self.n,
            "available": plan.available,
            "panels": len(done),
            "planned": len(plan.panels),
            "judges": judges,
            "families": families,
            "estimate": {c: round(v, 8) for c, v in plan.estimate.items()},
            "unpriced": plan.unpriced,
            "budget": plan.budget,
            "spent": costs.public(),
            "stopped": stopped,
            "questions": {"asked": asked, "failed": failed},
            "sampled": [q.sampled.panel for q in done],
            "results": results,
            "calls_log": calls_log,
        }


def _cost(state: dict) -> float | None:
    """What one question is expected to cost its judge."""
    return call_cost(
        state["judge"], {"prompt": state["estimate"], "completion": checkprompt.OUT_TOKENS}
    )


def q_label(q: _Questions, s: dict) -> str:
    """A question's place: ``<panel>.mark<i>`` or ``<panel>.pair<i>.<order>``."""
    if s["kind"] == USEFULNESS:
        return f"{q.sampled.panel}.mark{s['at'] + 1}"
    return f"{q.sampled.panel}.pair{s['at'] + 1}.{s['order']}"


def _owned(q: _Questions, family_of: dict, family: str | None) -> peoplematch.Panel:
    """The panel with each answer marked as of the judge's family (a jury has none)."""
    answers = [
        peoplematch.Answer(
            a.useful, a.chars, family is not None and family_of.get(s["alias"]) == family
        )
        for a, s in zip(q.panel.answers, q.sampled.answers)
    ]
    return peoplematch.Panel(q.panel.shape, answers, q.panel.pairs)


def majority(said: list[peoplematch.Decisions]) -> peoplematch.Decisions:
    """A jury's decisions: each mark and each order's preference by the majority of the judges
    that answered; a tie is no decision."""

    def vote(values, yes):
        values = [v for v in values if v is not None]
        up = sum(v == yes for v in values)
        if not values or 2 * up == len(values):
            return None
        return 2 * up > len(values)

    marks = []
    for i in range(len(said[0].marks)):
        marks.append(vote([d.marks[i] for d in said], True))
    prefs = []
    for i in range(len(said[0].prefs)):
        pref = {}
        for order in ORDERS:
            won = vote([d.prefs[i][order] for d in said], "good")
            pref[order] = None if won is None else ("good" if won else "bad")
        prefs.append(pref)
    return peoplematch.Decisions(marks, prefs)


# -- the report as text ----------------------------------------------------------------------------
LABELS = (
    ("kappa", "κ (useful / not)"),
    ("accuracy", "pair accuracy"),
    ("flip_rate", "position flip rate"),
    ("own_family_lift", "own-family lift"),
    ("length_slope", "length slope"),
)


def _fig(f: dict) -> str:
    if f["value"] is None:
        return "–"
    span = f" ({f['interval'][0]:.2f} to {f['interval'][1]:.2f})" if f["interval"] else ""
    return f"{f['value']:.2f}{span}"


def table(report: dict) -> str:
    """The report as plain text: what was done, then per judge and shape its figures beside
    the baselines', and the findings."""
    spent = ", ".join(cost_text(v, c) for c, v in report["spent"]["by_currency"].items())
    lines = [
        f"judge check {report['check']} · {report['panels']} of {report['available']} "
        f"judged panels · {report['questions']['asked']} questions asked, "
        f"{report['questions']['failed']} failed · spent {spent or 'nothing known'}"
    ]
    if report.get("stopped"):
        lines.append(f"STOPPED: {report['stopped']}")
    for r in report["results"]:
        lines += [
            "",
            f"{r['judge']}"
            + (f" (family {r['family']})" if r.get("family") else "")
            + f" · shape {r['shape']} · {r['panels']} panels, {r['answers']} answers, "
            f"{r['pairs']} pairs separated",
        ]
        rows = [("figure (95% interval)", "judge", "constant", "length-only")]
        for key, label in LABELS:
            rows.append(
                (
                    label,
                    _fig(r["figures"][key]),
                    _fig(r["baselines"]["constant"][key]),
                    _fig(r["baselines"]["length"][key]),
                )
            )
        widths = [max(len(row[i]) for row in rows) for i in range(4)]
        lines += [
            "  " + "  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows
        ]
        lines += [f"  NOTE: {f}" for f in r["findings"]]
    return "\n".join(lines)


def load(root: Path, check: str) -> dict:
    return checks.report(root, check)


__all__ = ["JudgeCheck", "Plan", "parse_budget", "sample", "table"]
