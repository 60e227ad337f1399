"""A panel: one request asked of every seat at once, answered with every seat's answer.

The split: this module holds what makes a panel a panel (seating the checked request of
``request.py``, history per seat, pick / merge / all, the reply, the panel's records); the
seats core (``metrics.seats``) makes the calls. A ``PanelRun`` hands its seats to ``Seats.start``
as ``SeatCall``s and gives it the panel's own hooks: ``SeatEvidence`` as the log (each seat's
record, ``seatrecord``, with the panel's fields), ``Panels.learn`` (cooldowns, learned
windows), a scrub for image traces, and ``on_end`` (release the seat's in-flight hold; in pick
mode the last seat records the panel). The merger is a set of one more call (``Seats.run``),
on the finishing thread. Seats and the merger are ``seats.SeatResult``s; ``public`` is how a
panel's reply shows one (``sections``).

Invariants: every seat runs in parallel under its own deadline, and the whole panel (merge
included) under the panel deadline; a seat that fails, comes back empty, runs out of time or is
cancelled is data in the reply (status and error), never an exception and never dropped. The
seating is written to the evidence log (one ``"seated"`` line) before any seat is asked, each
seat as it finishes, and the whole panel to the call log once, when it is done or abandoned.
Each seat counts as in flight from its seating until it ends, however it ends (answered, failed,
cancelled, given up, or the panel never started). A rate limit cools the model down for the
stated time (or the configured default) instead of being retried; a context-length error that
states a window teaches the ledger that (lower) window, and both are kept in the catalog as
learned facts. Seating reads the roster with the catalog's facts filled in (``KnownRoster``),
so a window or a vision flag only the endpoint's listing states still counts. Images are
forwarded to seats as sent and written nowhere: logs, errors and the merger's input carry
placeholders.

Reply modes (``collection.REPLIES``): ``all`` answers with every seat's section (markdown) once
every seat ended; ``merged`` with one answer a merger writes after them; ``pick`` with one
seat's answer verbatim (``pick.py`` says which), as soon as it is known, while the slower seats
keep running behind it. A streamed panel's ``Live`` (``live.py``) follows the answer that
will be the reply when that is known before it is written: a pick's first choice, or the
merger. However the reply went out, ``record`` runs exactly once: after every
seat ended (a picked panel records when its last seat ends, whether or not the caller is still
there), or when the caller left before its reply (the panel is then abandoned). Nothing can
skip it: a run is a context manager whose exit settles it (recorded then, or by its last seat),
so a fault after any seat was asked (while building or sending the reply) still leaves the
panel's line, and a line that cannot be built whole is written bare (every seat's call id and
status, no prompt or answers). A panel in which no seat answered (nor could a usable answer
be found) is not a reply but an error: ``AllSeatsFailed`` (502), or ``Unavailable`` (503, with
``Retry-After``) when every seat was rate limited; either is raised after the panel is recorded.
Requests are checked whole before seating (``request.py``).
"""

from __future__ import annotations

import math
import random
import threading
import time
from typing import Any, Callable, Iterator, cast

from panelist.metrics.seats import record as seatrecord
from panelist.metrics.panel import failures, history, jsonshape, merge, pick, prompt
from panelist.metrics.panel.budgets import Budgets
from panelist.metrics.panel.live import Live
from panelist.metrics.panel.request import Request, parse_request
from panelist.metrics.ledger import suiteevidence
from panelist.metrics.upstream.admission import Admission
from panelist.metrics.upstream.client import Upstream
from panelist.metrics.upstream.transport import CancelFlag
from panelist.metrics.roster.collection import AUTO, Collections
from panelist.metrics.panel.decider import Decider
from panelist.metrics.panel.held import Held
from panelist.metrics.panel.sections import markdown, public, verdict_hint
from panelist.metrics.panel.usage import tokens_of
from panelist.metrics.errors import (AllSeatsFailed, BadRequest, ContextTooLong,
                                     PanelistError, PromptTooLong, RateLimited, Unavailable,
                                     UpstreamError)
from panelist.metrics.home import Home
from panelist.metrics.plaintext import shorten
from panelist.metrics.ledger.ledger import Ledger
from panelist.metrics.roster.known import KnownRoster
from panelist.metrics.roster.learned import LearnedFacts
from panelist.metrics.roster.roster import Model, Roster
from panelist.metrics.panel.seating import (NEEDS, Seat, Seating, SeatsInFlight, seat_panel,
                                            window_of)
from panelist.metrics.seats import Result, SeatCall, SeatResult, Seats
from panelist.metrics.panel.suggest import ReplySuggestions
from panelist.metrics.ledger.ratings import Ratings

CLOSE_GRACE = 10.0  # seconds a closing server waits for cut seats to log their panels
HOLD_GRACE = 5.0  # seconds past the panel deadline before an unreleased seat stops counting


class Panels:
    """Runs panels for one data folder. Build one per server; it owns the seat threads."""

    def __init__(self, home: Home, *, upstream: Upstream | None = None,
                 ledger: Ledger | None = None, max_workers: int = 512):
        self.home = home
        self.roster = Roster(home)
        self.known = KnownRoster(self.roster, home)   # the roster with the catalog's facts
        self.learned = LearnedFacts(home, background=True)   # seats never wait on its disk
        self.collections = Collections(home)
        self.ledger = ledger or Ledger.of_home(home)
        self.suite = suiteevidence.SuiteEvidence.of_home(home)   # review-suite records
        self.ratings = Ratings.of_home(home, self.ledger, self.suite)   # for bench.suggest
        self.suggest = ReplySuggestions(self.ratings)
        self.upstream = upstream or Upstream()
        self.admission = Admission.of_home(home)   # limits per endpoint, shared with other processes
        # the seats core asks the models; its threads are made only as seats need them and then
        # reused, so an idle gateway is small
        self.seats = Seats(self.roster, self.upstream, admission=self.admission,
                           max_workers=max_workers, thread_name="seat",
                           learn=self.learned.heard)   # for calls with no hook of their own
        self.in_flight = SeatsInFlight()
        # a thompson collection's draws, taken under ``_seating`` only (a test seeds its own)
        self.rng = random.Random()
        self.budgets = Budgets(home)   # spend caps of keys and collections, every worker
        # one seating at a time: pick and mark are one step, so a concurrent panel sees this one
        self._seating = threading.Lock()
        self.decider = Decider(self.seats, self.roster, self.collections, self.ledger)
        # pick panels whose reply went out while seats still run: closing must log them
        self._behind: set[PanelRun] = set()
        self._behind_lock = threading.Lock()

    def close(self) -> None:
        """Cut the seats still running behind picked replies and wait (at most ``CLOSE_GRACE``)
        for their panels to be logged; then close the seats, the upstream and the logs."""
        with self._behind_lock:
            behind = list(self._behind)
        for run in behind:
            run.cut_short()
        until = time.monotonic() + CLOSE_GRACE
        for run in behind:
            run.logged.wait(max(0.0, until - time.monotonic()))
        self.seats.close()
        self.learned.close()   # what the last seats taught is written before the process ends
        self.upstream.close()
        self.ledger.close()
        self.suite.close()
        self.admission.close()

    def running_behind(self, run: "PanelRun", behind: bool) -> None:
        with self._behind_lock:
            if behind:
                self._behind.add(run)
            else:
                self._behind.discard(run)

    def parse(self, body, **chosen) -> Request:
        """``chosen``: the members and explorer seats a caller picked (``parse_request``)."""
        req = parse_request(body, self.collections, **chosen)
        if req.collection.shape == AUTO and not req.images:   # images fix the shape: vision
            self.decider.label(req)
        if req.reply_mode == "pick" and req.prefer is None:
            # a tool exchange stays with the member whose tool calls it is answering
            req.prefer = history.sticky_alias(req.messages, self.ledger)
        return req

    def seat(self, req: Request, key: str = "local") -> Seating:
        """Seat a panel, or refuse it (400 too big for every seat that could sit, 400 nobody can
        do what it needs: see its images, call its tools, follow its schema; 503 nobody at all)
        before anything is asked.

        A seating is taken in one locked step: follow the evidence log, pick, reserve the panel
        id, log a ``"seated"`` line and hold its seats as in flight. The next seating in this
        process, however concurrent, starts after that and sees it; other processes see the line.
        The hold is released seat by seat by the ``PanelRun`` that ``start`` makes."""
        view = self.known.view()
        limits = self.collections.limits()
        with self._seating:
            now = time.time()
            states = self.ledger.states(view.models.keys(), req.shape, now)
            suiteevidence.adjust(self.suite, states, req.shape)   # the suite counts too
            seating = seat_panel(req.collection, view, states,
                                 explorers=req.collection.explorers(limits)
                                 if req.explorers is None else req.explorers,
                                 estimate=req.estimate, needs=req.needs,
                                 nominees=req.nominees, busy=self.in_flight.busy(), now=now,
                                 room=lambda m: self.admission.has_room(m.endpoint, m.alias),
                                 rng=self.rng)
            self._refuse(req, states, seating)
            self.budgets.check(key, req.collection.name, seating, req.estimate)   # 429, 403
            req.member_states = {a: states[a] for a in req.collection.members if a in states}
            aliases = [s.model.alias for s in seating.seats]
            seating.panel, seating.at = self.ledger.new_panel(now), now
            # its seats are owed verdicts once the reply is delivered (``PanelRun.delivered``)
            self.ledger.record_seated(seating.panel, req.shape, aliases, now,
                                      collection=req.collection.model_id, awaits_delivery=True)
            seating.hold = self.in_flight.hold(aliases, limits.panel_timeout + HOLD_GRACE)
        seating.roster = view
        return seating

    def _refuse(self, req: Request, states: dict, seating: Seating) -> None:
        """Raise if the panel must not run; see ``seat``."""
        if not seating.seats and seating.too_small:
            # a shorter prompt would seat them: the one refusal a client can act on at once
            raise PromptTooLong(max(seating.too_small.values()), req.estimate,
                                req.collection.model_id,
                                ", ".join(f"{a} ({w} tokens)"
                                          for a, w in seating.too_small.items()))
        if not seating.seats and seating.lacking:
            need = next(iter(seating.lacking.values()))
            what, param = NEEDS[need]
            unable = ", ".join(a for a, n in seating.lacking.items() if n == need)
            raise BadRequest(f"no seat of {req.collection.model_id} can {what} ({unable} "
                             "cannot, and no explorer that can was free); use a collection "
                             "whose models can, or nominate one with 'with'", param=param)
        if not seating.seats:
            reasons = "; ".join(f"{s['alias']}: {s['why']}" for s in seating.skipped) or \
                "the roster is empty"
            # when every seat is only resting, the soonest end of a rest is when to come back
            rests = [st.cooling_until for a in req.collection.members
                     if (st := states.get(a)) is not None and st.cooling_until]
            headers = {"Retry-After": str(max(1, math.ceil(min(rests) - time.time())))} \
                if rests else {}
            raise Unavailable(f"no seat could be filled for {req.collection.model_id} "
                              f"({reasons}); try again later or change the collection",
                              headers=headers)

    def ask(self, body, *, key: str = "local", verdict_url: str | None = None,
            alive: Callable[[], bool] | None = None) -> dict | None:
        """Run one panel to the end and return the OpenAI ``chat.completion`` reply, or None
        when ``alive`` reports that the caller left (the panel is then cancelled and logged).
        In pick mode too it returns once every seat ended and the panel is logged (a process
        that closes its ``Panels`` next would cut the seats still running), with every seat
        in ``bench`` as it ended; a server, which lives on, answers earlier through
        ``complete``."""
        req = self.parse(body)
        with self.start(req, self.seat(req, key), key=key) as run:
            reply = self.complete(run, verdict_url=verdict_url, alive=alive)
            if reply is not None:
                run.delivered_reply(reply)   # the caller of ask is handed the reply
        if reply is not None and run.req.reply_mode == "pick" and \
                run.logged.wait(self.collections.limits().panel_timeout + HOLD_GRACE):
            reply = run.reply(run.results, verdict_url=verdict_url)   # every seat as it ended
        return reply

    def complete(self, run: "PanelRun", *, verdict_url: str | None = None,
                 alive: Callable[[], bool] | None = None) -> dict | None:
        """Wait for every seat (and the merge) of a started panel, or in pick mode for the
        picked seat only; see ``ask``. Raises ``AllSeatsFailed`` / ``Unavailable`` when no
        seat gave a usable answer."""
        run.suggestions()   # while the seats answer: nothing sent waits for it
        if run.req.reply_mode == "pick":
            if run.wait_pick(alive) is None:
                return None
            return run.reply(run.done, verdict_url=verdict_url)
        results = []
        for result in run.progress():
            if result is not None:
                results.append(result)
            elif alive is not None and not alive():
                run.give_up(results)
                return None
        return run.finish(results, verdict_url=verdict_url)

    def start(self, req: Request, seating: Seating, *, key: str, live: Live | None = None,
              budget=None) -> "PanelRun":
        """Ask every seat of a seated panel; leaving ``with panels.start(...) as run:`` settles
        it (``PanelRun.settle``): its line is written however the caller's part ends. ``live``: a
        stream's, following the answer that will be the reply (``live.py``). ``budget``: the
        server's memory budget (``InFlight``), charged its large answers (``held.py``)."""
        return PanelRun(self, req, seating, key, live, budget)

    def learn(self, model: Model, exc: UpstreamError) -> None:
        """The seats core's hook for a seat's failure: a rate limit rests the model, a stated
        context window is remembered, and both are kept in the catalog as learned facts. (A
        stated Retry-After also pauses the endpoint for every caller: the core does that,
        capped at ``max_cooldown`` as this cooldown is.)"""
        self.learned.heard(model, exc)
        if isinstance(exc, RateLimited):
            limits = self.collections.limits()
            # capped: a Retry-After of a year must not bench a model for a year
            wait_s = min(exc.retry_after or limits.cooldown, limits.max_cooldown)
            self.ledger.cool_down(model.alias, wait_s, shorten(exc.message, 200))
        elif isinstance(exc, ContextTooLong) and exc.window:
            self.ledger.learn_window(model.alias, exc.window)


class SeatEvidence:
    """The seats core's log for one panel: each seat's line in the evidence log, as it ends: the
    seat record (``seatrecord``; the answer is kept in the panel's line, not here) with the
    panel's own fields."""

    def __init__(self, run: "PanelRun"):
        self.run = run

    def write(self, result: SeatResult) -> None:
        self.write_all([result])

    def write_all(self, results: list[SeatResult]) -> None:
        """Seats that ended together, in one write."""
        self.run.panels.ledger.record_seat_lines([self.line(r) for r in results])

    def line(self, result: SeatResult) -> dict:
        run = self.run
        return seatrecord.line(result, "seat", answer=False, panel=run.panel,
                               shape=run.req.shape, seated=run.started, key=run.key,
                               collection=run.req.collection.model_id)


class PanelRun:
    """One panel in flight: its seats, a set of the seats core, handed over as they finish."""

    def __init__(self, panels: Panels, req: Request, seating: Seating, key: str,
                 live: Live | None = None, budget=None):
        self.panels, self.req, self.seating, self.key = panels, req, seating, key
        self.live, self.held = live, Held(budget)   # the answers' share of the memory budget
        try:
            limits = panels.collections.limits()
            self.started = seating.at or time.time()
            self.panel = seating.panel or panels.ledger.new_panel(self.started)
            self.cancel = CancelFlag()  # setting it cuts every seat's upstream connection at once
            # earlier Panelist replies in the history, found once, shown to each seat its own way
            self.history = history.Conversation(req.messages, panels.ledger)
            self.merger: SeatResult | None = None
            self.merge_size = 0   # the merger's input, estimated in tokens
            # the one seat (or the merger) whose answer is the reply; None: every answer
            self.answer: SeatResult | None = None
            self.note = ""
            # merged JSON: the seats whose JSON the reply's differs from (merge.disagreement)
            self.disagreement: list[dict] | None = None
            # what the one answer must be (pick, or a merge that needs one answer): the JSON
            # asked for, a tool call when tool_choice forces one
            self.demand = pick.Demand(req.response_format, req.params.get("tool_choice"))
            self.done: list[SeatResult] = []   # pick mode: seats handed over, in finish order
            self._suggest: list | None = None
            self._recorded = False
            self.logged = threading.Event()   # set once the panel's line is written
            self._lock = threading.Lock()   # guards _recorded, _left and _detached
            self._detached = False   # pick mode: the reply is out; the last seat records
            self._closing = False    # cut short by the server closing, not by the caller
            self.seat_timeout, self.stall_timeout = limits.seat_timeout, limits.stall_timeout
            calls = [self._call(s, self.history.for_seat(s.model.alias), req.params)
                     for s in seating.seats]
            if live is not None:
                calls = live.plan(req, calls)
            self._number = {c.label: i for i, c in enumerate(calls)}
            self._left = len(calls)   # seats still running
            self._max_pause = limits.max_cooldown
            self._scrub = (lambda text: prompt.scrub(text, req.images)) if req.images else None
            self._log = SeatEvidence(self)
            self._t0 = time.monotonic()
            self.seats = panels.seats.start(
                calls, timeout=limits.panel_timeout, cancel=self.cancel, log=self._log,
                learn=panels.learn, scrub=self._scrub, on_end=self._ended,
                max_pause=self._max_pause, meter=self.held, poll=live is None)
            self.deadline = self.seats.deadline
            # each seat, filled in as it ends; until then as seated (status "error", no answer)
            self.results = cast(list[SeatResult], self.seats.results)   # a set of SeatCalls
        except BaseException:
            self._release(whole=True)  # a panel that never ran holds no seat, and no memory
            raise

    def _call(self, seat: Seat, messages: list[dict], params: dict) -> SeatCall:
        # a seat waits for admission within its own deadline, and never past the panel's
        return SeatCall(label=f"{self.panel}.{seat.label}", role=seat.seat, model=seat.model,
                        messages=messages, params=params, timeout=self.seat_timeout,
                        wait_in_timeout=True)

    def _ended(self, ended: Result) -> None:
        """A seat's call ended (the core calls this on its thread, after the seat's evidence
        line and before handing the result over)."""
        result = cast(SeatResult, ended)   # the set holds SeatCalls only
        # released before the result is handed over, so a caller that has every result
        # also finds the seat no longer in flight
        if self.seating.hold is not None:
            self.seating.hold.release(result.alias)
        if self.live is not None and result.call == self.live.call:
            self.live.end()
        with self._lock:
            self._left -= 1
            last = self._left == 0 and self._detached
        if last:   # the caller has its picked reply; the panel is whole only now
            self.record(self.results)

    def _release(self, whole: bool = False) -> None:
        if self.seating.hold is not None:
            self.seating.hold.release_all()
        self.held.release() if whole else self.held.end("record")

    # -- the guarantee: a panel whose seats were asked is recorded --------------------------------
    def __enter__(self) -> "PanelRun":
        return self

    def __exit__(self, *exc) -> None:
        self.settle()
        self.held.end("caller")   # the reply is written (or never will be)

    def settle(self) -> None:
        """The caller is done with the run, however that went (a reply, an error, a fault while
        building the reply): a panel not recorded yet is recorded now, or by its last seat when
        some still run. Idempotent; a no-op after ``record`` or a picked reply's detach."""
        with self._lock:
            if self._recorded or self._detached:
                return
        self._detach()

    @property
    def abandoned(self) -> bool:
        """The caller left; seats cut because the server closed leave the panel delivered."""
        return self.cancel.is_set() and not self._closing

    def cut_short(self) -> None:
        """The server is closing: stop the seats still running behind a picked reply (they are
        logged as cancelled, and the panel with them)."""
        self._closing = True
        self.note = "; ".join(filter(None, [self.note, "the server closed before every seat "
                                            "ended; those still running were cancelled"]))
        self.cancel.set()

    def progress(self, tick: float = 0.25) -> Iterator[SeatResult | None]:
        """Yield each SeatResult once, as its seat finishes (fastest first), and None every
        ``tick`` seconds while seats are still working, so the caller can check on its client.
        Called again (after ``abandon``), it yields only what it has not yielded yet."""
        # the client enforces each seat's deadline; the core's grace only guards a stuck thread
        return cast(Iterator[SeatResult | None], self.seats.progress(tick))   # of SeatCalls

    def abandon(self) -> None:
        """The caller left: stop every seat still running (their connections are closed)."""
        self.cancel.set()

    def give_up(self, results: list[SeatResult]) -> None:
        """The caller left: cancel what still runs, collect it into ``results`` as it stops,
        and log the panel with those seats marked cancelled."""
        self.abandon()
        results.extend(r for r in self.progress() if r is not None)
        self.record(results)

    def seat_number(self, result: SeatResult) -> int:
        return self._number[result.call] + 1

    # -- pick mode ------------------------------------------------------------------------------
    def preference(self, results: list[SeatResult]) -> list[SeatResult]:
        """``results`` in pick order (see pick.py), by the ledger's verdicts for the shape."""
        return pick.order(self.in_seat_order(results), self.req.collection.members,
                          self.req.member_states, self.req.prefer)

    def wait_pick(self, alive: Callable[[], bool] | None = None,
                  tick: float = 0.25) -> SeatResult | None:
        """Collect seats into ``done`` until the picked answer is known, and return its seat;
        the seats still running go on, and the panel is recorded when the last one ends. None
        when ``alive`` reports that the caller left (the panel is given up and recorded).
        Raises (after recording) when no seat's answer can be used."""
        picker = pick.Picker(self.preference(self.results), self.demand)
        for result in self.progress(tick):
            if result is None:
                if alive is not None and not alive():
                    self.give_up(self.done)
                    return None
                continue
            self.done.append(result)
            if picker.offer(result):
                break
        self.note = picker.note()
        if picker.picked is None:   # every seat ended, none usable
            self.record(self.done)
            raise self.failure(self.done)
        self.answer = picker.picked
        self._detach()
        return picker.picked

    def broke_off(self) -> PanelistError | None:
        """The error a stream ends with when the followed answer (``live``) failed after its
        first tokens were sent, since no other answer can follow them; None otherwise. The
        panel's note says so."""
        live = self.live
        if live is None or not live.started:
            return None
        followed = [r for r in self.results + [self.merger] if r and r.call == live.call]
        if not followed or followed[0].answered:
            return None
        said = f"{live.seat} broke off mid-answer ({followed[0].reason})" if not live.stalled \
            else f"{live.seat} stalled mid-answer (no token within its {live.stalled:g} s limit)"
        self.note = "; ".join(filter(None, [self.note, said]))
        return AllSeatsFailed(f"{said} after its first tokens were sent; ask again (every seat "
                              f"is in GET /bench/panels/{self.panel})", [public(followed[0])],
                              code="answer_stalled" if live.stalled else "answer_broke_off")

    def _detach(self) -> None:
        """The reply is going out before every seat ended: the last seat to end records the
        panel (or this does, when none is left or the deadline already gave up on them)."""
        with self._lock:
            self._detached = True
            now = self._left == 0 or self.seats.settled
        if now:
            self.record(self.results)
        else:
            self.seats.let_go()   # the seats still running are read on the core's threads
            self.panels.running_behind(self, True)
            if self._recorded:   # the last seat ended meanwhile and recorded it
                self.panels.running_behind(self, False)

    # -- the end --------------------------------------------------------------------------------
    def failure(self, results: list[SeatResult]) -> PanelistError:
        """The error for a panel none of whose answers can be the reply (``failures``)."""
        return failures.of(self, results)

    def finish(self, results: list[SeatResult], *, verdict_url: str | None = None) -> dict:
        """Merge if asked, write the panel down, and return the OpenAI reply; raise (after
        writing it down) when no seat answered or no answer can be used."""
        try:
            if not any(r.answered for r in results):
                raise self.failure(results)
            if self.req.reply_mode == "merged":
                self._merge(results)
            return self.reply(results, verdict_url=verdict_url)
        finally:
            self.record(results)

    def finish_later(self, results: list[SeatResult], *, verdict_url: str | None = None):
        """``finish`` on a seat thread, so a streaming caller can keep its client alive while
        the merger works; returns a Future of the reply."""
        return self.panels.seats.submit(self.finish, results, verdict_url=verdict_url)

    def _merge(self, results: list[SeatResult]) -> None:
        panels = self.panels
        view = panels.known.view()
        ordered = self.in_seat_order(results)
        fmt = self.req.response_format
        # tools only for a turn whose seats called them: else an agent loop would never end
        tools = merge.offers_tools(self.req.tools, ordered)
        # the conversation as the caller was answered, not every earlier panel's markdown
        messages = merge.merger_input(self.history.for_seat(None), ordered, self.req.images,
                                      response_format=fmt, tools=tools)
        size = self.merge_size = prompt.estimate_tokens(messages, tools=tools,
                                                        response_format=fmt)
        states = panels.ledger.states(view.models.keys(), self.req.shape)
        suiteevidence.adjust(panels.suite, states, self.req.shape)
        model, why = merge.choose(self.req.collection, view, states, size, time.time())
        if model is None:
            self.note = why
            self._fall_back(results)
            return
        # the caller's budget was for one answer; the merger's is its own (merge.budget)
        params = {k: v for k, v in merge.merger_params(self.req.params, tools).items()
                  if k not in ("max_tokens", "max_completion_tokens")}
        budget_key = "max_completion_tokens" if "max_completion_tokens" in self.req.params \
            else "max_tokens"
        params[budget_key] = merge.budget(ordered, window_of(model, states.get(model.alias)),
                                          size)
        call = self._call(Seat("merger", 1, model), messages, params)
        live = self.live if self.live is not None and self.live.may_follow() else None
        try:
            self.merger = merger = panels.seats.run(
                [live.follow(call) if live is not None else call], deadline=self.deadline,
                cancel=self.cancel, log=self._log, learn=panels.learn, scrub=self._scrub,
                max_pause=self._max_pause, meter=self.held)[0]   # one unit, one result
        finally:
            if live is not None:
                live.end()
        problem = pick.problem(merger, self.demand)
        if problem is None:
            self.answer = merger
            self._disagreement(merger, ordered)
            return
        self.note = f"the merger {model.alias} failed ({problem})"
        self._fall_back(results)

    def _fall_back(self, results: list[SeatResult]) -> None:
        """No merged answer: every answer with a note, or, when the caller needs one answer
        (JSON or tools), the answer pick mode would have given; raise when there is none."""
        if not self.req.one_answer:
            self.note += "; here is every answer"
            return
        picker = pick.first_usable(self.preference(results), self.demand)
        if picker.picked is None:
            self.note += f"; {picker.note()}"
            raise self.failure(results)
        self.answer = picker.picked
        self.note += (f"; here is {pick.label(picker.picked)} {picker.picked.alias}'s answer"
                      + (f" ({picker.note()})" if picker.passed else ""))
        self._disagreement(picker.picked, self.in_seat_order(results))

    def _disagreement(self, answer: SeatResult, ordered: list[SeatResult]) -> None:
        """A merged JSON reply settles every disagreement by majority: keep which seats it
        overruled, and on which fields (``merge.disagreement``); ``answer``: the panel's."""
        if jsonshape.wants_json(self.req.response_format) and not answer.tool_calls:
            self.disagreement = merge.disagreement(answer, ordered)

    def in_seat_order(self, results: list[SeatResult]) -> list[SeatResult]:
        order = {r.call: i for i, r in enumerate(self.results)}
        return sorted(results, key=lambda r: order[r.call])

    def content(self, results: list[SeatResult]) -> str | None:
        if self.answer is not None:
            # OpenAI's shape: an answer that only calls tools has no content at all
            return self.answer.answer or (None if self.answer.tool_calls else "")
        text = markdown(self.in_seat_order(results))
        return f"> note: {self.note}\n\n{text}" if self.note else text

    def message(self, results: list[SeatResult]) -> tuple[dict, str]:
        """The reply's ``choices[0].message`` and ``finish_reason``."""
        message: dict[str, Any] = {"role": "assistant", "content": self.content(results)}
        if self.answer is None:
            return message, "stop"
        if self.answer.tool_calls:
            message["tool_calls"] = self.answer.tool_calls
        return message, self.answer.finish_reason or (
            "tool_calls" if self.answer.tool_calls else "stop")

    def bench(self, results: list[SeatResult], *, verdict_url: str | None = None) -> dict:
        """Every seat: those in ``results`` as they ended, the others (still working behind a
        picked reply) as ``running``, with the seconds they have run so far."""
        ended, now = {r.call for r in results}, round(time.monotonic() - self._t0, 3)
        # why each seat sat, by call id (``Seat.why``)
        whys = {f"{self.panel}.{s.label}": s.why for s in self.seating.seats}
        bench = {
            "panel": self.panel, "collection": self.req.collection.model_id,
            "shape": self.req.shape, "shape_by": self.req.shape_by,
            "reply": self.req.reply_mode,
            "seats": [dict(public(r) if r.call in ended else
                           {"call": r.call, "seat": r.seat, "alias": r.alias,
                            "status": "running", "seconds": now},
                           why=whys.get(r.call) or r.seat)
                      for r in self.results],
            "skipped": self.seating.skipped,
            "seconds": now, "verdict": verdict_hint(verdict_url),
            "usage_total": self.usage_total(results),
        }
        if self.req.decider is not None:
            bench["decider"] = self.req.decider
        if self.merger is not None:
            bench["merger"] = dict(public(self.merger), why="writes the merged reply")
        if self.answer is not None and self.answer is not self.merger:
            bench["picked"] = self.picked()
        if self.note:
            bench["note"] = self.note
        if self.disagreement is not None:
            bench["disagreement"] = self.disagreement
        if self.live is not None and (why := self.live.buffered(self.req.reply_mode, self.answer)):
            bench["buffered"] = why
        bench["suggest"] = self.suggestions()
        return bench

    def suggestions(self) -> list:
        """``bench.suggest`` (``suggest.ReplySuggestions``), worked out once, after the seats
        were asked, over the roster they were seated from."""
        if self._suggest is None:
            panels = self.panels
            self._suggest = panels.suggest.of(self.req.collection,
                                              self.seating.roster or panels.known.view(),
                                              self.req.shape)
        return self._suggest

    def picked(self) -> dict:
        a = cast(SeatResult, self.answer)   # asked only once a seat's answer is picked
        return {"call": a.call, "seat": a.seat, "alias": a.alias}

    def usage(self, results: list[SeatResult]) -> dict:
        """Tokens of what was asked: every seat and the merger; in pick mode the picked seat's
        alone (the answer the caller got, as one model's reply would count it). An uncounted
        answer is estimated (``usage.py``)."""
        seats = [self.answer] if self.req.reply_mode == "pick" and self.answer else \
            results + ([self.merger] if self.merger else [])
        return tokens_of(seats, self._read)

    def _read(self, r: SeatResult) -> int:   # the estimate of what a seat read
        return self.merge_size if r is self.merger else self.req.estimate

    def usage_total(self, results: list[SeatResult]) -> dict:
        """``bench.usage_total``: the tokens of every seat in ``results`` and the merger, what
        the panel was billed in every mode; ``seats_running`` (only when some are) counts the
        seats still working behind a picked reply, whose tokens are not known yet."""
        total = tokens_of(list(results) + ([self.merger] if self.merger else []), self._read)
        if running := len(self.results) - len({r.call for r in results}):
            total["seats_running"] = running
        return total

    def reply(self, results: list[SeatResult], *, verdict_url: str | None = None) -> dict:
        message, finish = self.message(results)
        return {
            "id": f"chatcmpl-{self.panel}", "object": "chat.completion",
            "created": int(self.started), "model": self.req.asked,
            "choices": [{"index": 0, "finish_reason": finish, "message": message}],
            "usage": self.usage(results),
            "bench": self.bench(results, verdict_url=verdict_url),
        }

    def delivered(self, content: str | None, tool_calls=()) -> None:
        """The caller has the reply (``content`` as sent): its seats are owed verdicts now, and
        a later request that carries this reply in its history is recognised by it."""
        self.panels.ledger.record_delivered(
            self.panel, content, [c.get("id") for c in tool_calls or () if isinstance(c, dict)])

    def delivered_reply(self, reply: dict) -> None:
        """``delivered`` for a chat.completion reply."""
        message = reply["choices"][0]["message"]
        self.delivered(message.get("content"), message.get("tool_calls"))

    @staticmethod
    def _seat_line(r: SeatResult, urls: list[str]) -> dict:
        """A seat in the panel's line: its seat record (answer scrubbed of image traces) and
        ``seat``, the role under the name older readers know."""
        return dict(seatrecord.fields(r, answer=prompt.scrub(r.answer, urls)), seat=r.seat)

    def record(self, results: list[SeatResult]) -> None:
        """Write the panel to the call log, once. Answers are scrubbed of image traces. A line
        that cannot be built whole is written bare (``_bare_line``): its seats were asked, and
        their call ids must stay findable whatever went wrong."""
        with self._lock:
            if self._recorded:
                return
            self._recorded = True
        try:
            self.panels.running_behind(self, False)
            self._release()  # done or given up: a seat that never reported counts no longer
            self.seats.drop_encodings()   # the seats' request bodies: not part of the line
            # a seat whose line could not be written (a database cut off as it ended) has it
            # written now, in the panel's own transaction: a panel stored is every seat stored
            missed = [r for r in (*results, self.merger)
                      if r is not None and r.meta.pop("log_error", None) is not None]
            try:
                line = self._line(results)
            except Exception as exc:
                line = self._bare_line(results, exc)
            self.panels.ledger.record_panel(line, evidence=[self._log.line(r) for r in missed])
            view = self.seating.roster or self.panels.known.view()
            self.panels.budgets.charge(self.key, self.req.collection.name,
                                       [*results, self.merger], view.models, self.req.estimate)
        finally:
            self.logged.set()

    def _line(self, results: list[SeatResult]) -> dict:
        urls = self.req.images
        seats = [self._seat_line(r, urls) for r in self.in_seat_order(results)]
        line = {
            "panel": self.panel, "collection": self.req.collection.model_id,
            "shape": self.req.shape, "key": self.key, "started": self.started,
            "seconds": round(time.monotonic() - self._t0, 3), "estimate": self.req.estimate,
            "reply": self.req.reply_mode, "prompt": self.req.text(), "seats": seats,
            "skipped": self.seating.skipped, "abandoned": self.abandoned}
        if self.req.collection.shape == AUTO:
            line["shape_by"], line["decider"] = self.req.shape_by, self.req.decider
        if self.merger is not None:
            line["merger"] = self._seat_line(self.merger, urls)
        if self.answer is not None and self.answer is not self.merger:
            line["picked"] = self.picked()
        if self.note:
            line["note"] = self.note
        if self.disagreement is not None:
            line["disagreement"] = self.disagreement
        return line

    def _bare_line(self, results: list[SeatResult], exc: Exception) -> dict:
        """The panel's line without what could not be written: the prompt and the answers are
        left out (nothing unscrubbed may reach the log), every seat keeps its call id, alias,
        status, error, tokens and times, and the note says why."""
        def bare(r: SeatResult) -> dict:
            return dict(seatrecord.fields(r, answer=False), seat=r.seat)
        line = {
            "panel": self.panel, "collection": self.req.collection.model_id,
            "shape": self.req.shape, "key": self.key, "started": self.started,
            "seconds": round(time.monotonic() - self._t0, 3), "estimate": self.req.estimate,
            "reply": self.req.reply_mode, "prompt": "", "seats": [bare(r) for r in results],
            "skipped": self.seating.skipped, "abandoned": self.abandoned,
            "note": "this line was written without the prompt and answers: building it failed "
                    f"({type(exc).__name__})"}
        if self.merger is not None:
            line["merger"] = bare(self.merger)
        return line

