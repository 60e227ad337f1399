"""Panels as server-sent events in every wire format, and a reply awaited while its caller is
watched.

A stream opens at once: once the panel is seated (every refusal comes before, with its own
status), the 200 head and the format's opening events go out, and from then on a keep-alive
goes out after every ``keepalive`` seconds (the server's setting) in which nothing else was
sent, so neither a client's read timeout nor a proxy's idle timer ever sees a silent panel,
however long its seats take. Then, by reply mode:

* ``all``: in chat, each seat's section the moment that seat finishes (fastest first); in the
  other formats, the whole reply once every seat ended.
* ``pick`` and ``merged``: the one answer. When the answer that will be the reply is known
  before it is written (``metrics.panel.live``: a pick's first choice, the merger), its text is
  sent piece by piece as its upstream writes it, the rest (tool calls, ``bench``) at its end;
  a first choice that fails before its first piece fails over and that answer is sent whole,
  one that fails after it ends the stream with an error (no other answer can follow those
  pieces), and so does one that stalls after it: no piece for the stall limit
  (``stall_timeout`` in gateway.json, or ``PANELIST_STALL_TIMEOUT``) cuts that call alone.
  Otherwise the answer is sent whole once known, and ``bench.buffered`` says why.

A panel that fails after the stream opened (no seat answered, a fault) ends with the format's
error event, carrying the body a reply would have had. A caller that leaves gives its panel up:
the seats still running (and a merge under way) are cut and the panel is logged abandoned.
The events themselves are the format's (``metrics.wire.chat``, ``responses``, ``messages``,
``gemini``, ``ollama``: ``Events``; an ``Events`` with ``ndjson`` set is sent as one JSON object
a line, under its own ``content_type``); this module only decides when each goes out.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import TimeoutError as FutureTimeout

from panelist.metrics.errors import PanelistError
from panelist.metrics.store import jsonwire
from panelist.metrics.panel.live import END
from panelist.metrics.panel.sections import section
from panelist.metrics.seats import GRACE
from panelist.metrics.server.front.handler import Handler, fault
from panelist.metrics.wire.errors import body_of, status_of

PANEL_HEADER = "X-Panelist-Panel"  # on every reply of a seated panel: its id, to judge it by


def answer_of(h: Handler, run, alive):
    """``panels.complete`` as ``post_chat`` calls it; a failure names the panel in its head."""
    try:
        return h.server.panels.complete(run, verdict_url=h.base_url(), alive=alive)
    except PanelistError as exc:
        exc.headers.setdefault(PANEL_HEADER, run.panel)
        raise


class Gone(ConnectionResetError):
    """Raised when the caller closed the stream."""


class Out:
    """One open stream: its events sent in order, the quiet between them watched."""

    def __init__(self, h: Handler, run, events):
        self.h, self.run, self.events = h, run, events
        self.every = h.server.keepalive
        self.tick = min(0.25, self.every)
        self.quiet_since = time.monotonic()

    def open(self) -> None:
        kind = getattr(self.events, "content_type", None)
        self.h.start_events({PANEL_HEADER: self.run.panel}, *([kind] if kind else []))
        self.send(self.events.opening())

    def send(self, items) -> None:
        lines = getattr(self.events, "ndjson", False)  # one JSON object a line, no SSE
        for name, data in items:
            if lines:
                self.h.send_chunk(jsonwire.dumps(data) + "\n")
            elif name is None:  # an SSE comment
                self.h.send_chunk(f"{data}\n\n")
            else:
                self.h.send_event(data, event=name)
        self.quiet_since = time.monotonic()

    def keep_alive(self) -> None:
        self.send(self.events.keepalive())

    def still_there(self) -> None:
        """Raise ``Gone`` if the caller left; a keep-alive if the stream was quiet too long."""
        if not self.h.client_alive():
            raise Gone("the caller closed the stream")
        if time.monotonic() - self.quiet_since >= self.every:
            self.keep_alive()


def stream_panel(h: Handler, run, events) -> None:
    """Stream a started panel's reply with ``events`` (see the module docstring)."""
    out = Out(h, run, events)
    try:
        out.open()
    except OSError:  # gone before the first byte: nothing to answer
        run.give_up([])
        h.close_connection = True
        return
    reply = None
    try:
        if run.req.reply_mode == "all":
            reply = sections(out, run) if events.sections else await_reply(h, run, out.keep_alive)
        else:
            reply = one_answer(out, run)
        if reply is None:  # the caller left; the panel was cancelled and logged
            h.close_connection = True
            return
        if events.streamed:  # the caller has the text as it was sent: that is the reply's
            reply["choices"][0]["message"]["content"] = events.streamed
        # made before the reply counts as delivered, so a fault in them is still an error event
        ending = events.closing(reply)
    except PanelistError as exc:
        reply, ending = None, events.failure(status_of(exc), body_of(exc))
    except Exception:
        reply, ending = (
            None,
            events.failure(
                500, fault(f"streaming {run.panel}", "internal error after the stream began")
            ),
        )
    try:
        if reply is not None:
            run.delivered_reply(reply)  # before the last events: see post_chat
        out.send(ending)
        h.end_events(done=events.done)
    except OSError:
        h.close_connection = True


def sections(out: Out, run) -> dict | None:
    """All mode in chat: each seat's section as it finishes; the reply (``bench``, ``usage``)
    once every seat ended. None when the caller left (the panel is given up and logged)."""
    results = []
    try:
        for result in run.progress(tick=out.tick):
            if result is None:
                out.still_there()
                continue
            results.append(result)
            out.send(out.events.text(section(result, run.seat_number(result)) + "\n"))
    except OSError:  # the caller went away: stop the seats still running and log the panel
        run.give_up(results)
        return None
    return run.finish(results, verdict_url=out.h.base_url())


def one_answer(out: Out, run) -> dict | None:
    """Pick and merged: the reply, its text sent as it is written when it is followed
    (``run.live``); None when the caller left meanwhile (the panel is then given up and
    logged). Raises ``PanelRun.broke_off``'s error when the followed answer failed after its
    first pieces went out."""
    live = run.live
    if run.req.reply_mode == "pick":
        if live is not None and live.call is not None:
            # the first choice's pieces, until it ended (its deadline bounds the wait)
            if not pump(
                out, live, lambda: time.monotonic() > run.deadline + GRACE, stall_of(out.h, run)
            ):
                run.give_up([])
                return None
            broken = run.broke_off()
            if broken is not None:
                raise broken
        return await_reply(out.h, run, out.keep_alive)  # the pick, and its failover
    results = gather(out, run)
    if results is None:
        return None
    merging = run.finish_later(results, verdict_url=out.h.base_url())
    if live is not None and not pump(out, live, merging.done, stall_of(out.h, run)):
        cut_merge(run, merging)
        return None
    reply = merged(out, run, merging)
    if reply is not None and (broken := run.broke_off()) is not None:
        raise broken
    return reply


def stall_of(h: Handler, run) -> float:
    """Seconds a streamed answer may pause between tokens: the server's setting
    (``PANELIST_STALL_TIMEOUT``), else the panel's limit (gateway.json's ``stall_timeout``)."""
    return h.server.stall_timeout or run.stall_timeout


def pump(out: Out, live, done, stall: float) -> bool:
    """Send the followed answer's pieces as they come, until its end (or ``done()`` with none
    waiting), the stream kept alive meanwhile; False when the caller left. Once a piece went
    out, ``stall`` seconds without the next cut the followed call (``Live.stall``): it then
    ends, and the stream with the error ``PanelRun.broke_off`` makes of it."""
    last = time.monotonic()
    try:
        while True:
            piece = live.next(out.tick)
            if piece is END:
                return True
            if piece is not None:
                out.send(out.events.text(piece))
                last = time.monotonic()
            elif done():
                return True
            else:
                if live.started and not live.stalled and time.monotonic() - last >= stall:
                    live.stall(stall)
                out.still_there()
    except OSError:
        return False


def gather(out: Out, run) -> list | None:
    """Every seat's result as the seats end, the stream kept alive meanwhile; None when the
    caller left (the panel is then given up and logged)."""
    results = []
    try:
        for result in run.progress(tick=out.tick):
            if result is not None:
                results.append(result)
            else:
                out.still_there()
    except OSError:
        run.give_up(results)
        return None
    return results


def merged(out: Out, run, merging) -> dict | None:
    """The merge's reply (a Future run on a seat thread), the stream kept alive while the
    merger works; None when the caller left (the merge is cut and records the panel)."""
    while True:
        try:
            return merging.result(timeout=out.tick)
        except FutureTimeout:
            try:
                out.still_there()
            except OSError:
                cut_merge(run, merging)
                return None


def cut_merge(run, merging) -> None:
    """The caller left during the merge: cut the merger's call; the merge records the panel."""
    run.abandon()
    try:
        merging.result()
    except PanelistError:
        pass


def await_reply(h: Handler, run, keep_alive) -> dict | None:
    """``panels.complete`` on a helper thread while this one watches the caller: ``keep_alive()``
    after every ``keepalive`` seconds of quiet, and a caller that left (or a write that failed)
    cancels the panel, merge included, which is then logged abandoned; None then."""
    gone = threading.Event()
    outcome: dict = {}

    def work() -> None:
        try:
            outcome["reply"] = answer_of(h, run, lambda: not gone.is_set())
        except BaseException as exc:  # handed to the handler's thread, which answers it
            outcome["error"] = exc

    worker = threading.Thread(target=work, name=f"reply-{run.panel}", daemon=True)
    worker.start()
    tick = min(0.25, h.server.keepalive)
    quiet_since = time.monotonic()
    while True:
        worker.join(tick)
        if not worker.is_alive():
            break
        try:
            if not h.client_alive():
                raise Gone("the caller closed the stream")
            if time.monotonic() - quiet_since >= h.server.keepalive:
                keep_alive()
                quiet_since = time.monotonic()
        except OSError:
            gone.set()
            run.abandon()  # stops the seats and a merge under way, not only what is to come
            worker.join()
            return None
    if "error" in outcome:
        raise outcome["error"]
    return outcome["reply"]
