"""The live answer of a streamed panel: the one call whose answer will be the reply, followed while
it is written, so that a stream can send its text as it arrives.

A pick follows its first choice (the first seat of ``pick.order``: the preferred member, else the
best member by rate) and a merged panel its merger, but only when nothing in that answer must be
read whole before it can be the reply (``pick.Demand.why_checked``: a JSON ``response_format``,
a ``tool_choice`` that forces or forbids a tool call). The followed call is streamed upstream (``SeatCall.on_delta``); its pieces wait
here, in order, until the stream takes them (``next``), and ``END`` follows its last piece.

Invariants: at most one call of a panel is followed; pieces are taken in the order they came;
``started`` is True once any piece came, and from then on no other answer may follow them (a
followed call that fails after that breaks the reply off, ``PanelRun.broke_off``); ``END`` is put
once, after the followed call ended. ``buffered`` says why a streamed reply was sent whole. A
followed call that stalls after its first piece (``stall``: no piece for the stall limit) is cut
by its own ``stop`` flag, not the panel's: the other seats go on, and it ends as cancelled.
"""

from __future__ import annotations

import dataclasses
import queue

from panelist.metrics.panel import pick
from panelist.metrics.seats import SeatCall, SeatResult
from panelist.metrics.upstream.transport import CancelFlag

END = object()  # after the followed call's last piece


class Live:
    """The followed call of one streamed panel; see the module docstring."""

    def __init__(self):
        self.call: str | None = None  # the followed call's id
        self.seat = ""  # its seat and alias in words ("member1 fast")
        self.why = ""  # why no answer of this request may be followed
        self.started = False  # a piece of it came
        self.stalled = 0.0  # the stall limit it was cut at (0: not cut)
        self.stop = CancelFlag()  # cuts the followed call alone
        self._pieces: queue.SimpleQueue = queue.SimpleQueue()

    def plan(self, req, calls: list[SeatCall]) -> list[SeatCall]:
        """The seats' calls of a panel about to start; in a pick that may stream, its first
        choice's is followed."""
        if req.reply_mode == "all":
            return calls
        self.why = pick.Demand(req.response_format, req.params.get("tool_choice")).why_checked()
        if self.why or req.reply_mode != "pick" or not calls:
            return calls
        first = pick.order(
            [SeatResult.of(c) for c in calls], req.collection.members, req.member_states, req.prefer
        )[0]
        return [self.follow(c) if c.label == first.call else c for c in calls]

    def may_follow(self) -> bool:
        """Whether a merger's call may be followed (no condition, nothing followed yet)."""
        return not self.why and self.call is None

    def follow(self, call: SeatCall) -> SeatCall:
        self.call = call.label
        self.seat = f"{pick.label(SeatResult.of(call))} {call.model.alias}"
        return dataclasses.replace(call, on_delta=self._hear, stop=self.stop)

    def stall(self, seconds: float) -> None:
        """The followed call sent no piece for ``seconds`` after its first: cut it."""
        self.stalled = seconds
        self.stop.set()

    def _hear(self, piece: str) -> None:  # on the call's thread
        self.started = True
        self._pieces.put(piece)

    def end(self) -> None:
        """The followed call ended: nothing more comes."""
        self._pieces.put(END)

    def next(self, timeout: float):
        """The next piece, ``END``, or None when nothing came within ``timeout`` seconds."""
        try:
            return self._pieces.get(timeout=timeout)
        except queue.Empty:
            return None

    def buffered(self, mode: str, answer: SeatResult | None) -> str:
        """Why the reply (``answer``: the picked seat or the merger; None: every answer) was
        sent whole although the caller streamed; "" when it went out as it was written."""
        if mode == "all":
            return ""
        if self.why:
            return self.why
        if self.call is None:  # merged, and no merger was asked
            return "no merger was asked (see note): every answer is sent whole"
        if answer is not None and answer.call == self.call:
            return (
                ""
                if self.started or not answer.answer
                else f"the upstream of {self.seat} sent its answer whole, not as a stream"
            )
        if mode == "pick":
            return (
                f"{self.seat} failed before its first token: the next choice's answer is sent whole"
            )
        return "the merger failed before its first token: " + (
            "the answer pick mode gives is sent whole"
            if answer is not None
            else "every answer is sent whole"
        )
