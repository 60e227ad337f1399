"""A panel: one request asked of every seat at once, answered with every seat's answer.

The split: this module holds ``Panels``, the front door every surface asks through: it checks
a request (``request.py``), seats it (``seating.py``), refuses what cannot be seated, learns
from what an upstream refused (``Panels.learn``: cooldowns, learned windows) and starts a
``PanelRun`` (``run.py``), one panel in flight: history per seat, pick / merge / all, the reply
and the panel's records. The seats core (``metrics.seats``) makes the calls.

Invariants: each seat counts as in flight from its seating until it ends, however it ends
(answered, failed, cancelled, given up, or the panel never started). A rate limit cools the
model down for the stated time (or the configured default) instead of being retried; a
context-length error that states a window teaches the ledger that (lower) window, and both are
kept in the catalog as learned facts. Seating reads the roster with the catalog's facts filled
in (``KnownRoster``), so a window or a vision flag only the endpoint's listing states still
counts. Requests are checked whole before seating (``request.py``). A closing server cuts the
seats of every panel still running (a caller still waiting, or seats behind a picked reply) and
waits, at most ``CLOSE_GRACE``, for those panels to be logged before it closes the logs.
"""

from __future__ import annotations

import math
import random
import threading
import time
from typing import Callable

from panelist.metrics.panel import history
from panelist.metrics.panel.budgets import Budgets
from panelist.metrics.panel.live import Live
from panelist.metrics.panel.run import PanelRun
from panelist.metrics.panel.request import Request, parse_request
from panelist.metrics.ledger import suiteevidence
from panelist.metrics.upstream.admission import Admission
from panelist.metrics.upstream.client import Upstream
from panelist.metrics.roster.collection import AUTO, Collections
from panelist.metrics.panel.decider import Decider
from panelist.metrics.errors import (
    BadRequest,
    ContextTooLong,
    PromptTooLong,
    RateLimited,
    Unavailable,
    UpstreamError,
)
from panelist.metrics.home import Home
from panelist.metrics.plaintext import shorten
from panelist.metrics.ledger.ledger import Ledger
from panelist.metrics.roster.known import KnownRoster
from panelist.metrics.roster.learned import LearnedFacts
from panelist.metrics.roster.roster import Model, Roster
from panelist.metrics.panel.seating import NEEDS, Seating, SeatsInFlight, seat_panel
from panelist.metrics.seats import Seats
from panelist.metrics.panel.suggest import ReplySuggestions
from panelist.metrics.ledger.ratings import Ratings

CLOSE_GRACE = 10.0  # seconds a closing server waits for cut seats to log their panels
HOLD_GRACE = 5.0  # seconds past the panel deadline before an unreleased seat stops counting


class Panels:
    """Runs panels for one data folder. Build one per server; it owns the seat threads."""

    def __init__(
        self,
        home: Home,
        *,
        upstream: Upstream | None = None,
        ledger: Ledger | None = None,
        max_workers: int = 512,
    ):
        self.home = home
        self.roster = Roster(home)
        self.known = KnownRoster(self.roster, home)  # the roster with the catalog's facts
        self.learned = LearnedFacts(home, background=True)  # seats never wait on its disk
        self.collections = Collections(home)
        self.ledger = ledger or Ledger.of_home(home)
        self.suite = suiteevidence.SuiteEvidence.of_home(home)  # review-suite records
        self.ratings = Ratings.of_home(home, self.ledger, self.suite)  # for bench.suggest
        self.suggest = ReplySuggestions(self.ratings)
        self.upstream = upstream or Upstream()
        self.admission = Admission.of_home(home)  # limits per endpoint, shared with other processes
        # the seats core asks the models; its threads are made only as seats need them and then
        # reused, so an idle gateway is small
        self.seats = Seats(
            self.roster,
            self.upstream,
            admission=self.admission,
            max_workers=max_workers,
            thread_name="seat",
            learn=self.learned.heard,
        )  # for calls with no hook of their own
        self.in_flight = SeatsInFlight()
        # a thompson collection's draws, taken under ``_seating`` only (a test seeds its own)
        self.rng = random.Random()
        self.budgets = Budgets.of_home(home)  # spend caps of keys and collections, every worker
        # one seating at a time: pick and mark are one step, so a concurrent panel sees this one
        self._seating = threading.Lock()
        self.decider = Decider(self.seats, self.roster, self.collections, self.ledger)
        # every panel whose seats were asked and that is not over yet (a caller still waiting,
        # or seats running behind a picked reply): closing must let them end first
        self._running: set[PanelRun] = set()
        self._running_lock = threading.Lock()

    def close(self) -> None:
        """Cut the seats of every panel still running and wait (at most ``CLOSE_GRACE``) for
        each to be over: logged (by its caller, or by its last seat behind a picked reply) and
        its caller done with it; then close the seats, the upstream and the logs."""
        with self._running_lock:
            running = list(self._running)
        for run in running:
            run.cut_short()
        until = time.monotonic() + CLOSE_GRACE
        for run in running:
            run.over.wait(max(0.0, until - time.monotonic()))
        self.seats.close()
        self.learned.close()  # what the last seats taught is written before the process ends
        self.upstream.close()
        self.ratings.close()  # a background fit reads the ledger
        self.ledger.close()
        self.suite.close()
        self.admission.close()
        self.budgets.close()

    def running(self, run: "PanelRun", started: bool) -> None:
        """``run`` asked its seats (``started``), or it is over (``PanelRun.over``)."""
        with self._running_lock:
            if started:
                self._running.add(run)
            else:
                self._running.discard(run)

    def parse(self, body, **chosen) -> Request:
        """``chosen``: the members and explorer seats a caller picked (``parse_request``)."""
        req = parse_request(body, self.collections, **chosen)
        if req.collection.shape == AUTO and not req.images:  # images fix the shape: vision
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
            suiteevidence.adjust(self.suite, states, req.shape)  # the suite counts too
            seating = seat_panel(
                req.collection,
                view,
                states,
                explorers=req.collection.explorers(limits)
                if req.explorers is None
                else req.explorers,
                estimate=req.estimate,
                needs=req.needs,
                nominees=req.nominees,
                busy=self.in_flight.busy(),
                now=now,
                room=lambda m: self.admission.has_room(m.endpoint, m.alias),
                rng=self.rng,
            )
            self._refuse(req, states, seating)
            self.budgets.check(key, req.collection.name, seating, req.estimate)  # 429, 403
            req.member_states = {a: states[a] for a in req.collection.members if a in states}
            aliases = [s.model.alias for s in seating.seats]
            seating.panel, seating.at = self.ledger.new_panel(now), now
            # its seats are owed verdicts once the reply is delivered (``PanelRun.delivered``)
            self.ledger.record_seated(
                seating.panel,
                req.shape,
                aliases,
                now,
                collection=req.collection.model_id,
                awaits_delivery=True,
            )
            seating.hold = self.in_flight.hold(aliases, limits.panel_timeout + HOLD_GRACE)
        seating.roster = view
        return seating

    def _refuse(self, req: Request, states: dict, seating: Seating) -> None:
        """Raise if the panel must not run; see ``seat``."""
        if not seating.seats and seating.too_small:
            # a shorter prompt would seat them: the one refusal a client can act on at once
            raise PromptTooLong(
                max(seating.too_small.values()),
                req.estimate,
                req.collection.model_id,
                ", ".join(f"{a} ({w} tokens)" for a, w in seating.too_small.items()),
            )
        if not seating.seats and seating.lacking:
            need = next(iter(seating.lacking.values()))
            what, param = NEEDS[need]
            unable = ", ".join(a for a, n in seating.lacking.items() if n == need)
            raise BadRequest(
                f"no seat of {req.collection.model_id} can {what} ({unable} "
                "cannot, and no explorer that can was free); use a collection "
                "whose models can, or nominate one with 'with'",
                param=param,
            )
        if not seating.seats:
            reasons = (
                "; ".join(f"{s['alias']}: {s['why']}" for s in seating.skipped)
                or "the roster is empty"
            )
            # when every seat is only resting, the soonest end of a rest is when to come back
            rests = [
                st.cooling_until
                for a in req.collection.members
                if (st := states.get(a)) is not None and st.cooling_until
            ]
            headers = (
                {"Retry-After": str(max(1, math.ceil(min(rests) - time.time())))} if rests else {}
            )
            raise Unavailable(
                f"no seat could be filled for {req.collection.model_id} "
                f"({reasons}); try again later or change the collection",
                headers=headers,
            )

    def ask(
        self,
        body,
        *,
        key: str = "local",
        verdict_url: str | None = None,
        alive: Callable[[], bool] | None = None,
    ) -> dict | None:
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
                run.delivered_reply(reply)  # the caller of ask is handed the reply
        if (
            reply is not None
            and run.req.reply_mode == "pick"
            and run.logged.wait(self.collections.limits().panel_timeout + HOLD_GRACE)
        ):
            reply = run.reply(run.results, verdict_url=verdict_url)  # every seat as it ended
        return reply

    def complete(
        self,
        run: "PanelRun",
        *,
        verdict_url: str | None = None,
        alive: Callable[[], bool] | None = None,
    ) -> dict | None:
        """Wait for every seat (and the merge) of a started panel, or in pick mode for the
        picked seat only; see ``ask``. Raises ``AllSeatsFailed`` / ``Unavailable`` when no
        seat gave a usable answer."""
        run.suggestions()  # while the seats answer: nothing sent waits for it
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

    def start(
        self, req: Request, seating: Seating, *, key: str, live: Live | None = None, budget=None
    ) -> "PanelRun":
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
