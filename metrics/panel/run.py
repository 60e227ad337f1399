"""One panel in flight (``PanelRun``): its seats handed to the seats core, their answers
merged, picked or shown whole, the reply, and the panel's records.

A ``PanelRun`` hands its seats to ``Seats.start`` as ``SeatCall``s and gives it the panel's own
hooks: ``SeatEvidence`` as the log (each seat's record, ``seatrecord``, with the panel's
fields), ``Panels.learn`` (cooldowns, learned windows), a scrub for image traces, and
``on_end`` (release the seat's in-flight hold; in pick mode the last seat records the panel).
The merger is a set of one more call (``Seats.run``), on the finishing thread. Seats and the
merger are ``seats.SeatResult``s; ``public`` is how a panel's reply shows one (``sections``).

Invariants: every seat runs in parallel under its own deadline, and the whole panel (merge
included) under the panel deadline; a seat that fails, comes back empty, runs out of time or is
cancelled is data in the reply (status and error), never an exception and never dropped. The
seating is written to the evidence log (one ``"seated"`` line) before any seat is asked, each
seat as it finishes, and the whole panel to the call log once, when it is done or abandoned.
Images are forwarded to seats as sent and written nowhere: logs, errors and the merger's input
carry placeholders.

Reply modes (``collection.REPLIES``): ``all`` answers with every seat's section (markdown) once
every seat ended; ``merged`` with one answer a merger writes after them; ``pick`` with one
seat's answer verbatim (``pick.py`` says which), as soon as it is known, while the slower seats
keep running behind it. A streamed panel's ``Live`` (``live.py``) follows the answer that will
be the reply when that is known before it is written: a pick's first choice, or the merger.
However the reply went out, ``record`` runs exactly once: after every seat ended (a picked
panel records when its last seat ends, whether or not the caller is still there), or when the
caller left before its reply (the panel is then abandoned). Nothing can skip it: a run is a
context manager whose exit settles it (recorded then, or by its last seat), so a fault after
any seat was asked (while building or sending the reply) still leaves the panel's line, and a
line that cannot be built whole is written bare (every seat's call id and status, no prompt or
answers). A panel in which no seat answered (nor could a usable answer be found) is not a reply
but an error: ``AllSeatsFailed`` (502), or ``Unavailable`` (503, with ``Retry-After``) when
every seat was rate limited; either is raised after the panel is recorded.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Iterator, cast

from panelist.metrics.seats import record as seatrecord
from panelist.metrics.panel import failures, history, jsonshape, merge, pick, prompt
from panelist.metrics.panel.live import Live
from panelist.metrics.panel.request import Request
from panelist.metrics.ledger import suiteevidence
from panelist.metrics.upstream.transport import CancelFlag
from panelist.metrics.roster.collection import AUTO
from panelist.metrics.panel.held import Held
from panelist.metrics.panel.sections import markdown, public, verdict_hint
from panelist.metrics.panel.usage import tokens_of
from panelist.metrics.errors import AllSeatsFailed, DatabaseUnreachable, PanelistError
from panelist.metrics.panel.seating import Seat, Seating, window_of
from panelist.metrics.seats import Result, SeatCall, SeatResult

if TYPE_CHECKING:  # Panels starts the runs
    from panelist.metrics.panel.panel import Panels


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
        return seatrecord.line(
            result,
            "seat",
            answer=False,
            panel=run.panel,
            shape=run.req.shape,
            seated=run.started,
            key=run.key,
            collection=run.req.collection.model_id,
        )


class PanelRun:
    """One panel in flight: its seats, a set of the seats core, handed over as they finish."""

    def __init__(
        self,
        panels: Panels,
        req: Request,
        seating: Seating,
        key: str,
        live: Live | None = None,
        budget=None,
    ):
        self.panels, self.req, self.seating, self.key = panels, req, seating, key
        self.live, self.held = live, Held(budget)  # the answers' share of the memory budget
        try:
            limits = panels.collections.limits()
            self.started = seating.at or time.time()
            self.panel = seating.panel or panels.ledger.new_panel(self.started)
            self.cancel = CancelFlag()  # setting it cuts every seat's upstream connection at once
            # earlier Panelist replies in the history, found once, shown to each seat its own way
            self.history = history.Conversation(req.messages, panels.ledger)
            self.merger: SeatResult | None = None
            self.merge_size = 0  # the merger's input, estimated in tokens
            # the one seat (or the merger) whose answer is the reply; None: every answer
            self.answer: SeatResult | None = None
            self.note = ""
            # merged JSON: the seats whose JSON the reply's differs from (merge.disagreement)
            self.disagreement: list[dict] | None = None
            # what the one answer must be (pick, or a merge that needs one answer): the JSON
            # asked for, a tool call when tool_choice forces one
            self.demand = pick.Demand(req.response_format, req.params.get("tool_choice"))
            self.done: list[SeatResult] = []  # pick mode: seats handed over, in finish order
            self._suggest: list | None = None
            self._recorded = False
            self.logged = threading.Event()  # set once the panel's line is written
            # set once the line is written and the caller is done with the run (its reply and
            # what it writes of it): only then may a closing server close the logs
            self.over = threading.Event()
            self._ends: set[str] = set()
            self._lock = threading.Lock()  # guards _recorded, _left and _detached
            self._detached = False  # pick mode: the reply is out; the last seat records
            self._closing = False  # cut short by the server closing, not by the caller
            self.seat_timeout, self.stall_timeout = limits.seat_timeout, limits.stall_timeout
            calls = [
                self._call(s, self.history.for_seat(s.model.alias), req.params)
                for s in seating.seats
            ]
            if live is not None:
                calls = live.plan(req, calls)
            self._number = {c.label: i for i, c in enumerate(calls)}
            self._left = len(calls)  # seats still running
            self._max_pause = limits.max_cooldown
            self._scrub = (lambda text: prompt.scrub(text, req.images)) if req.images else None
            self._log = SeatEvidence(self)
            self._t0 = time.monotonic()
            self.seats = panels.seats.start(
                calls,
                timeout=limits.panel_timeout,
                cancel=self.cancel,
                log=self._log,
                learn=panels.learn,
                scrub=self._scrub,
                on_end=self._ended,
                max_pause=self._max_pause,
                meter=self.held,
                poll=live is None,
            )
            self.deadline = self.seats.deadline
            # each seat, filled in as it ends; until then as seated (status "error", no answer)
            self.results = cast(list[SeatResult], self.seats.results)  # a set of SeatCalls
            panels.running(self, True)  # until it is over: a closing server waits
        except BaseException:
            self._release(whole=True)  # a panel that never ran holds no seat, and no memory
            raise

    def _call(self, seat: Seat, messages: list[dict], params: dict) -> SeatCall:
        # a seat waits for admission within its own deadline, and never past the panel's
        return SeatCall(
            label=f"{self.panel}.{seat.label}",
            role=seat.seat,
            model=seat.model,
            messages=messages,
            params=params,
            timeout=self.seat_timeout,
            wait_in_timeout=True,
        )

    def _ended(self, ended: Result) -> None:
        """A seat's call ended (the core calls this on its thread, after the seat's evidence
        line and before handing the result over)."""
        result = cast(SeatResult, ended)  # the set holds SeatCalls only
        # released before the result is handed over, so a caller that has every result
        # also finds the seat no longer in flight
        if self.seating.hold is not None:
            self.seating.hold.release(result.alias)
        if self.live is not None and result.call == self.live.call:
            self.live.end()
        with self._lock:
            self._left -= 1
            last = self._left == 0 and self._detached
        if last:  # the caller has its picked reply; the panel is whole only now
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
        self.held.end("caller")  # the reply is written (or never will be)
        self._end("caller")

    def _end(self, which: str) -> None:
        """``which`` of the caller's part and the panel's record ended; after both, the run is
        over."""
        with self._lock:
            self._ends.add(which)
            over = len(self._ends) == 2
        if over:
            self.panels.running(self, False)
            self.over.set()

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
        """The server is closing: stop the seats still running, whether a caller still waits for
        them or they run behind a picked reply (they are logged as cancelled, and the panel with
        them). A panel whose seats all ended is left as it is: its caller is only finishing."""
        with self._lock:
            if self._left == 0 or self._recorded:
                return
        self._closing = True
        self.note = "; ".join(
            filter(
                None,
                [
                    self.note,
                    "the server closed before every seat ended; those still running were cancelled",
                ],
            )
        )
        self.cancel.set()

    def progress(self, tick: float = 0.25) -> Iterator[SeatResult | None]:
        """Yield each SeatResult once, as its seat finishes (fastest first), and None every
        ``tick`` seconds while seats are still working, so the caller can check on its client.
        Called again (after ``abandon``), it yields only what it has not yielded yet."""
        # the client enforces each seat's deadline; the core's grace only guards a stuck thread
        return cast(Iterator[SeatResult | None], self.seats.progress(tick))  # of SeatCalls

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
        return pick.order(
            self.in_seat_order(results),
            self.req.collection.members,
            self.req.member_states,
            self.req.prefer,
        )

    def wait_pick(
        self, alive: Callable[[], bool] | None = None, tick: float = 0.25
    ) -> SeatResult | None:
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
        if picker.picked is None:  # every seat ended, none usable
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
        said = (
            f"{live.seat} broke off mid-answer ({followed[0].reason})"
            if not live.stalled
            else f"{live.seat} stalled mid-answer (no token within its {live.stalled:g} s limit)"
        )
        self.note = "; ".join(filter(None, [self.note, said]))
        return AllSeatsFailed(
            f"{said} after its first tokens were sent; ask again (every seat "
            f"is in GET /bench/panels/{self.panel})",
            [public(followed[0])],
            code="answer_stalled" if live.stalled else "answer_broke_off",
        )

    def _detach(self) -> None:
        """The reply is going out before every seat ended: the last seat to end records the
        panel (or this does, when none is left or the deadline already gave up on them)."""
        with self._lock:
            self._detached = True
            now = self._left == 0 or self.seats.settled
        if now:
            self.record(self.results)
        else:
            self.seats.let_go()  # the seats still running are read on the core's threads

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
        messages = merge.merger_input(
            self.history.for_seat(None), ordered, self.req.images, response_format=fmt, tools=tools
        )
        size = self.merge_size = prompt.estimate_tokens(messages, tools=tools, response_format=fmt)
        states = panels.ledger.states(view.models.keys(), self.req.shape)
        suiteevidence.adjust(panels.suite, states, self.req.shape)
        model, why = merge.choose(self.req.collection, view, states, size, time.time())
        if model is None:
            self.note = why
            self._fall_back(results)
            return
        # the caller's budget was for one answer; the merger's is its own (merge.budget)
        params = {
            k: v
            for k, v in merge.merger_params(self.req.params, tools).items()
            if k not in ("max_tokens", "max_completion_tokens")
        }
        budget_key = (
            "max_completion_tokens" if "max_completion_tokens" in self.req.params else "max_tokens"
        )
        params[budget_key] = merge.budget(ordered, window_of(model, states.get(model.alias)), size)
        call = self._call(Seat("merger", 1, model), messages, params)
        live = self.live if self.live is not None and self.live.may_follow() else None
        try:
            self.merger = merger = panels.seats.run(
                [live.follow(call) if live is not None else call],
                deadline=self.deadline,
                cancel=self.cancel,
                log=self._log,
                learn=panels.learn,
                scrub=self._scrub,
                max_pause=self._max_pause,
                meter=self.held,
            )[0]  # one unit, one result
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
        self.note += f"; here is {pick.label(picker.picked)} {picker.picked.alias}'s answer" + (
            f" ({picker.note()})" if picker.passed else ""
        )
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
            "tool_calls" if self.answer.tool_calls else "stop"
        )

    def bench(self, results: list[SeatResult], *, verdict_url: str | None = None) -> dict:
        """Every seat: those in ``results`` as they ended, the others (still working behind a
        picked reply) as ``running``, with the seconds they have run so far."""
        ended, now = {r.call for r in results}, round(time.monotonic() - self._t0, 3)
        # why each seat sat, by call id (``Seat.why``)
        whys = {f"{self.panel}.{s.label}": s.why for s in self.seating.seats}
        bench = {
            "panel": self.panel,
            "collection": self.req.collection.model_id,
            "shape": self.req.shape,
            "shape_by": self.req.shape_by,
            "reply": self.req.reply_mode,
            "seats": [
                dict(
                    public(r)
                    if r.call in ended
                    else {
                        "call": r.call,
                        "seat": r.seat,
                        "alias": r.alias,
                        "status": "running",
                        "seconds": now,
                    },
                    why=whys.get(r.call) or r.seat,
                )
                for r in self.results
            ],
            "skipped": self.seating.skipped,
            "seconds": now,
            "verdict": verdict_hint(verdict_url),
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
            try:
                self._suggest = panels.suggest.of(
                    self.req.collection, self.seating.roster or panels.known.view(), self.req.shape
                )
            except DatabaseUnreachable:
                # the fit reads the database's newest evidence; a database away for a moment
                # costs this reply its suggestions, never the answers its seats are giving
                self._suggest = []
        return self._suggest

    def picked(self) -> dict:
        a = cast(SeatResult, self.answer)  # asked only once a seat's answer is picked
        return {"call": a.call, "seat": a.seat, "alias": a.alias}

    def usage(self, results: list[SeatResult]) -> dict:
        """Tokens of what was asked: every seat and the merger; in pick mode the picked seat's
        alone (the answer the caller got, as one model's reply would count it). An uncounted
        answer is estimated (``usage.py``)."""
        seats = (
            [self.answer]
            if self.req.reply_mode == "pick" and self.answer
            else results + ([self.merger] if self.merger else [])
        )
        return tokens_of(seats, self._read)

    def _read(self, r: SeatResult) -> int:  # the estimate of what a seat read
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
            "id": f"chatcmpl-{self.panel}",
            "object": "chat.completion",
            "created": int(self.started),
            "model": self.req.asked,
            "choices": [{"index": 0, "finish_reason": finish, "message": message}],
            "usage": self.usage(results),
            "bench": self.bench(results, verdict_url=verdict_url),
        }

    def delivered(self, content: str | None, tool_calls=()) -> None:
        """The caller has the reply (``content`` as sent): its seats are owed verdicts now, and
        a later request that carries this reply in its history is recognised by it."""
        self.panels.ledger.record_delivered(
            self.panel, content, [c.get("id") for c in tool_calls or () if isinstance(c, dict)]
        )

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
            self._release()  # done or given up: a seat that never reported counts no longer
            self.seats.drop_encodings()  # the seats' request bodies: not part of the line
            # a seat whose line could not be written (a database cut off as it ended) has it
            # written now, in the panel's own transaction: a panel stored is every seat stored
            missed = [
                r
                for r in (*results, self.merger)
                if r is not None and r.meta.pop("log_error", None) is not None
            ]
            try:
                line = self._line(results)
            except Exception as exc:
                line = self._bare_line(results, exc)
            self.panels.ledger.record_panel(line, evidence=[self._log.line(r) for r in missed])
            view = self.seating.roster or self.panels.known.view()
            self.panels.budgets.charge(
                self.key,
                self.req.collection.name,
                [*results, self.merger],
                view.models,
                self.req.estimate,
            )
        finally:
            self.logged.set()
            self._end("record")

    def _head(self, *, prompt: str, seats: list[dict]) -> dict:
        """The fields every panel line carries, whole or bare, in the log's order."""
        return {
            "panel": self.panel,
            "collection": self.req.collection.model_id,
            "shape": self.req.shape,
            "key": self.key,
            "started": self.started,
            "seconds": round(time.monotonic() - self._t0, 3),
            "estimate": self.req.estimate,
            "reply": self.req.reply_mode,
            "prompt": prompt,
            "seats": seats,
            "skipped": self.seating.skipped,
            "abandoned": self.abandoned,
        }

    def _line(self, results: list[SeatResult]) -> dict:
        urls = self.req.images
        seats = [self._seat_line(r, urls) for r in self.in_seat_order(results)]
        line = self._head(prompt=self.req.text(), seats=seats)
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

        line = self._head(prompt="", seats=[bare(r) for r in results])
        line["note"] = (
            "this line was written without the prompt and answers: building it failed "
            f"({type(exc).__name__})"
        )
        if self.merger is not None:
            line["merger"] = bare(self.merger)
        return line
