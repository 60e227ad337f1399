"""Panels as server-sent events, and a reply awaited while its caller is watched.

A stream's 200 head waits until there is something to say, so a panel that fails whole is a
real error status, not a stream; a caller that leaves gives its panel up (the seats still
running are cut and the panel is logged abandoned).
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import TimeoutError as FutureTimeout

from panelist.metrics.errors import PanelistError
from panelist.metrics.panel.panel import section
from panelist.metrics.server.handler import Handler, fault
from panelist.metrics.wire.errors import body_of, status_of

PANEL_HEADER = "X-Panelist-Panel"   # on every reply of a seated panel: its id, to judge it by


def answer_of(h: Handler, run, alive):
    """``panels.complete`` as ``post_chat`` calls it; a failure names the panel in its head."""
    try:
        return h.server.panels.complete(run, verdict_url=h.base_url(), alive=alive)
    except PanelistError as exc:
        exc.headers.setdefault(PANEL_HEADER, run.panel)
        raise


def stream_panel(h: Handler, run, mark: dict) -> None:
    """Server-sent events. The 200 head waits until there is something to say: the first seat
    that answered (all mode), the picked answer (pick) or the merge (merged), so a panel that
    fails whole is a real error status, not a stream. Meanwhile the client is checked on, and
    a caller that leaves gives the panel up. Then: all mode sends each seat's section as it
    finishes (keep-alive comments while seats work); pick and merged send the one answer in
    OpenAI's chunk shapes (content, then tool calls); ``bench`` and ``usage`` ride on the final
    chunk."""
    base = {"id": f"chatcmpl-{run.panel}", "object": "chat.completion.chunk",
            "created": int(run.started), "model": run.req.asked}

    def delta(d: dict, finish=None, **extra):
        return dict(base, choices=[{"index": 0, "delta": d, "finish_reason": finish}], **extra)

    def begin() -> None:
        h.start_events(mark)
        h.send_event(delta({"role": "assistant"}))

    if run.req.reply_mode != "all":
        # the whole answer first (an error is raised before any byte of the stream is sent)
        reply = whole_reply(h, run)
        if reply is None:
            h.close_connection = True
            return
        (choice,) = reply["choices"]
        message = choice["message"]
        try:
            begin()
            if message.get("content"):
                h.send_event(delta({"content": message["content"]}))
            if message.get("tool_calls"):
                h.send_event(delta({"tool_calls": [
                    dict(call, index=i) for i, call in enumerate(message["tool_calls"])]}))
            run.delivered_reply(reply)   # before the last event: see post_chat
            h.send_event(delta({}, choice["finish_reason"], usage=reply["usage"],
                               bench=reply["bench"]))
            h.end_events()
        except OSError:
            h.close_connection = True
        return

    results, waiting = [], []   # waiting: sections of seats that failed before any answered
    sent = []   # the text as the caller received it, in the order it was sent
    quiet_since = time.monotonic()
    tick = min(0.25, h.server.keepalive)
    started = False

    def still_there() -> None:
        nonlocal quiet_since
        if not h.client_alive():
            raise ConnectionResetError("the caller closed the stream")
        if started and time.monotonic() - quiet_since >= h.server.keepalive:
            h.send_chunk(": seats still working\n\n")
            quiet_since = time.monotonic()

    try:
        for result in run.progress(tick=tick):
            if result is None:
                still_there()
                continue
            results.append(result)
            waiting.append(delta({"content": section(result, run.seat_number(result)) + "\n"}))
            if not started and result.answered:
                begin()
                started = True
            if started:
                for event in waiting:
                    h.send_event(event)
                    sent.append(event["choices"][0]["delta"]["content"])
                waiting.clear()
                quiet_since = time.monotonic()
    except OSError:  # the caller went away: stop the seats still running and log the panel
        run.give_up(results)
        h.close_connection = True
        return
    if not started:   # no seat answered: recorded, and a real error status
        run.record(results)
        raise run.failure(results)
    try:
        run.record(results)
        run.delivered("".join(sent))   # every section is out; before the last event
        h.send_event(delta({}, "stop", usage=run.usage(results),
                           bench=run.bench(results, verdict_url=h.base_url())))
    except OSError:
        h.close_connection = True
        return
    except Exception:
        h.send_event(fault(f"streaming {run.panel}", "internal error after the stream began"))
    h.end_events()


def whole_reply(h: Handler, run) -> dict | None:
    """A pick or merged panel's reply, for a stream that has not begun; None when the caller
    left meanwhile (the panel is then given up and logged). The merge runs on a seat thread,
    so the caller can be checked on while it works."""
    panels = h.server.panels
    if run.req.reply_mode == "pick":
        return panels.complete(run, verdict_url=h.base_url(), alive=h.client_alive)
    results = []
    for result in run.progress(tick=min(0.25, h.server.keepalive)):
        if result is not None:
            results.append(result)
        elif not h.client_alive():
            run.give_up(results)
            return None
    merging = run.finish_later(results, verdict_url=h.base_url())
    while True:
        try:
            return merging.result(timeout=0.25)
        except FutureTimeout:
            if not h.client_alive():
                run.abandon()   # cuts the merger's call; the merge then records the panel
                try:
                    merging.result()
                except PanelistError:
                    pass
                return None


def held_stream(h: Handler, run, events) -> None:
    """A stream in another format, sent once the panel's reply is known: its 200 head waits for
    the reply, so a panel that fails is a real error status. Only if the seats are still working
    after ``keepalive`` seconds does the stream open early, keeping the client (and proxies) alive
    with the format's keep-alive events; a failure after that is the format's error event.
    ``events`` makes the format's events (see ``wire_messages.Events``)."""
    opened = False

    def send(items) -> None:
        for name, data in items:
            if name is None:   # an SSE comment
                h.send_chunk(f"{data}\n\n")
            else:
                h.send_event(data, event=name)

    def begin() -> None:
        nonlocal opened
        h.start_events({PANEL_HEADER: run.panel})
        opened = True

    def keep_alive() -> None:
        if not opened:
            begin()
            send(events.opening())
        send(events.keepalive())

    reply = None
    try:
        reply = await_reply(h, run, keep_alive)
        if reply is None:  # the caller left; the panel was cancelled and logged
            h.close_connection = True
            return
        # made before the head goes out, so a fault in them is still a plain 500
        ending = ([] if opened else events.opening()) + events.closing(reply)
    except PanelistError as exc:
        if not opened:
            exc.headers.setdefault(PANEL_HEADER, run.panel)
            raise
        ending = events.failure(status_of(exc), body_of(exc))
    except Exception:
        if not opened:
            raise
        ending = events.failure(500, fault(f"streaming {run.panel}", "internal error after the "
                                           "stream began"))
    try:
        if not opened:
            begin()
        if reply is not None:
            run.delivered_reply(reply)   # before the last events: see post_chat
        send(ending)
        h.end_events(done=False)
    except OSError:
        h.close_connection = True


def await_reply(h: Handler, run, keep_alive) -> dict | None:
    """``panels.complete`` on a helper thread while this one watches the caller: ``keep_alive()``
    after every ``keepalive`` seconds of quiet, and a caller that left (or a write that failed)
    cancels the panel, merge included, which is then logged abandoned; None then."""
    gone = threading.Event()
    outcome: dict = {}

    def work() -> None:
        try:
            outcome["reply"] = answer_of(h, run, lambda: not gone.is_set())
        except BaseException as exc:   # handed to the handler's thread, which answers it
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
                raise ConnectionResetError("the caller closed the stream")
            if time.monotonic() - quiet_since >= h.server.keepalive:
                keep_alive()
                quiet_since = time.monotonic()
        except OSError:
            gone.set()
            run.abandon()   # stops the seats and a merge under way, not only what is to come
            worker.join()
            return None
    if "error" in outcome:
        raise outcome["error"]
    return outcome["reply"]


