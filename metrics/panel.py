"""A panel: one request asked of every seat at once, answered with every seat's answer.

Invariants: every seat runs in parallel under its own deadline; a seat that fails, comes back
empty or runs out of time is data in the reply (status and error), never an exception and never
dropped; each seat is written to the evidence log as it finishes and the whole panel to the call
log once it is done. A rate limit cools the model down for the stated time (or the configured
default) instead of being retried; a context-length error that states a window teaches the
ledger that (lower) window.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field

from panelist.metrics import prompt
from panelist.metrics.client import Upstream
from panelist.metrics.collection import Collection, Collections
from panelist.metrics.errors import (BadRequest, ContextTooLong, EmptyAnswer, PayloadTooLarge,
                                     RateLimited, Unavailable, UpstreamError)
from panelist.metrics.home import Home
from panelist.metrics.ledger import Ledger
from panelist.metrics.roster import Roster
from panelist.metrics.route import Seat, Seating, seat_panel, window_of

# Fields that describe the panel rather than the question; everything else reaches each seat.
OWN_FIELDS = ("model", "messages", "stream", "stream_options", "n", "bench", "with")
NUMBERS = ("temperature", "top_p", "presence_penalty", "frequency_penalty")
COUNTS = ("max_tokens", "max_completion_tokens", "seed")


@dataclass
class SeatResult:
    call: str
    seat: str
    alias: str
    served: str
    status: str = "error"       # ok | empty | error | cancelled
    seconds: float = 0.0
    answer: str = ""
    error: str = ""
    tokens: dict = field(default_factory=dict)

    def public(self) -> dict:
        return {k: v for k, v in asdict(self).items() if k != "served"}


@dataclass
class Request:
    collection: Collection
    reply_mode: str
    messages: list[dict]
    params: dict
    shape: str
    shape_by: str
    estimate: int


def parse_request(body, collections: Collections) -> Request:
    """Validate a chat-completions body; raise BadRequest / NotFound naming the field."""
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object (an OpenAI chat completion request)")
    collection, mode = collections.resolve(body.get("model"))
    messages = prompt.check_messages(body.get("messages"))
    if "stream" in body and not isinstance(body["stream"], bool):
        raise BadRequest("'stream' must be true or false", param="stream")
    if body.get("n", 1) != 1:
        raise BadRequest("'n' must be 1: a panel already asks every seat once", param="n")
    for name in NUMBERS:
        v = body.get(name)
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
            raise BadRequest(f"'{name}' must be a number", param=name)
    for name in COUNTS:
        v = body.get(name)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int)):
            raise BadRequest(f"'{name}' must be a whole number", param=name)
    bench = body.get("bench", {})
    if not isinstance(bench, dict):
        raise BadRequest("'bench' must be an object", param="bench")
    params = {k: v for k, v in body.items() if k not in OWN_FIELDS}
    shape = collection.shape or "general"
    return Request(collection=collection, reply_mode=mode or collection.reply,
                   messages=messages, params=params, shape=shape,
                   shape_by="set on the collection" if collection.shape else "default",
                   estimate=prompt.estimate_tokens(messages))


class Panels:
    """Runs panels for one data folder. Build one per server; it owns the seat threads."""

    def __init__(self, home: Home, *, upstream: Upstream | None = None,
                 ledger: Ledger | None = None, max_workers: int = 512):
        self.home = home
        self.roster = Roster(home)
        self.collections = Collections(home)
        self.ledger = ledger or Ledger(home.gateway_runs)
        self.upstream = upstream or Upstream()
        # threads are made only as seats need them and then reused, so an idle gateway is small
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="seat")

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self.upstream.close()
        self.ledger.close()

    # -- seating ----------------------------------------------------------------------------
    def seat(self, req: Request) -> Seating:
        view = self.roster.view()
        limits = self.collections.limits()
        states = self.ledger.states(view.models.keys(), req.shape)
        seating = seat_panel(req.collection, view, states,
                             explorers=req.collection.explorers(limits), estimate=req.estimate)
        too_small = []
        for alias in req.collection.members:
            model = view.models.get(alias)
            window = model and window_of(model, states.get(alias))
            if window is not None and window < req.estimate:
                too_small.append(f"{alias} ({window} tokens)")
        if too_small:
            raise PayloadTooLarge(
                f"the prompt is estimated at {req.estimate} tokens, more than the context window "
                f"of {', '.join(too_small)}; trim the prompt or pick a collection whose "
                "together.context_window fits (GET /v1/models)", param="messages")
        if not seating.seats:
            reasons = "; ".join(f"{s['alias']}: {s['why']}" for s in seating.skipped) or \
                "the roster is empty"
            raise Unavailable(f"no seat could be filled for {req.collection.model_id} "
                              f"({reasons}); try again later or change the collection")
        return seating

    # -- asking -----------------------------------------------------------------------------
    def ask(self, body, *, key: str = "local", verdict_url: str | None = None) -> dict:
        """Run one panel to the end and return the OpenAI ``chat.completion`` reply."""
        req = parse_request(body, self.collections)
        seating = self.seat(req)
        run = self.start(req, seating, key=key)
        results = list(run.finished())
        return run.reply(results, verdict_url=verdict_url)

    def start(self, req: Request, seating: Seating, *, key: str) -> "PanelRun":
        return PanelRun(self, req, seating, key)

    def _ask_seat(self, run: "PanelRun", seat: Seat, result: SeatResult) -> SeatResult:
        model = seat.model
        endpoint = self.roster.view().endpoints.get(model.endpoint)
        body = dict(run.req.params, model=model.served, messages=run.req.messages)
        t0 = time.monotonic()
        try:
            if endpoint is None:
                raise UpstreamError(f"endpoint '{model.endpoint}' is gone from the roster")
            answer = self.upstream.chat(endpoint.base_url, endpoint.api_key(), body,
                                        timeout=run.timeout, cancel=run.cancel)
            result.status, result.answer, result.tokens = "ok", answer.text, answer.tokens
        except EmptyAnswer as exc:
            result.status, result.error = "empty", str(exc)
        except UpstreamError as exc:
            result.status = "cancelled" if exc.kind == "cancelled" else "error"
            result.error = f"{exc.kind}: {exc.message}"
            self._learn(model.alias, exc)
        except Exception as exc:  # a bug in one seat must not fail the panel
            result.status, result.error = "error", f"internal: {type(exc).__name__}: {exc}"
        result.seconds = round(time.monotonic() - t0, 3)
        self.ledger.record_seat({
            "call": result.call, "panel": run.panel, "alias": model.alias, "seat": seat.seat,
            "shape": run.req.shape, "seated": run.started, "status": result.status,
            "seconds": result.seconds, "tokens": result.tokens, "error": result.error,
            "key": run.key, "collection": run.req.collection.model_id})
        return result

    def _learn(self, alias: str, exc: UpstreamError) -> None:
        if isinstance(exc, RateLimited):
            wait_s = exc.retry_after or self.collections.limits().cooldown
            self.ledger.cool_down(alias, wait_s, exc.message[:200])
        elif isinstance(exc, ContextTooLong) and exc.window:
            self.ledger.learn_window(alias, exc.window)


class PanelRun:
    """One panel in flight: its seats' futures, yielded in the order they finish."""

    def __init__(self, panels: Panels, req: Request, seating: Seating, key: str):
        self.panels, self.req, self.seating, self.key = panels, req, seating, key
        self.started = time.time()
        self._t0 = time.monotonic()
        self.panel = panels.ledger.new_panel(self.started)
        self.timeout = panels.collections.limits().seat_timeout
        self.cancel = threading.Event()
        self.results = [SeatResult(call=f"{self.panel}.{s.label}", seat=s.seat,
                                   alias=s.model.alias, served=s.model.served)
                        for s in seating.seats]
        self._futures = {panels._pool.submit(panels._ask_seat, self, s, r): r
                         for s, r in zip(seating.seats, self.results)}

    def finished(self):
        """Yield each SeatResult as its seat finishes (fastest first)."""
        pending = set(self._futures)
        # the client enforces each deadline; the margin only guards against a stuck thread
        limit = time.monotonic() + self.timeout + 5
        while pending:
            done, pending = wait(pending, timeout=max(0.0, limit - time.monotonic()),
                                 return_when=FIRST_COMPLETED)
            if not done:
                break
            for f in done:
                yield self._futures[f]
        for f in pending:
            r = self._futures[f]
            r.status, r.error = "error", "timeout: the seat did not finish by its deadline"
            yield r

    def abandon(self) -> None:
        """The caller left: stop every seat still running."""
        self.cancel.set()

    def reply(self, results: list[SeatResult], *, verdict_url: str | None = None) -> dict:
        seconds = round(time.monotonic() - self._t0, 3)
        order = {r.call: i for i, r in enumerate(self.results)}
        seats = sorted(results, key=lambda r: order[r.call])  # seat order, not finishing order
        bench = {
            "panel": self.panel, "collection": self.req.collection.model_id,
            "shape": self.req.shape, "shape_by": self.req.shape_by,
            "seats": [r.public() for r in seats], "skipped": self.seating.skipped,
            "seconds": seconds, "verdict": verdict_hint(verdict_url),
        }
        usage = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
        for r in seats:
            for mine, theirs in (("prompt_tokens", "prompt"), ("completion_tokens", "completion"),
                                 ("total_tokens", "total")):
                usage[mine] += (r.tokens or {}).get(theirs) or 0
        self.panels.ledger.record_panel({
            "panel": self.panel, "collection": self.req.collection.model_id,
            "shape": self.req.shape, "key": self.key, "started": self.started,
            "seconds": seconds, "estimate": self.req.estimate,
            "prompt": prompt.as_text(self.req.messages),
            "seats": [dict(r.public(), served=r.served) for r in seats],
            "skipped": self.seating.skipped})
        return {
            "id": f"chatcmpl-{self.panel}", "object": "chat.completion",
            "created": int(self.started), "model": self.req.collection.model_id,
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": markdown(seats)}}],
            "usage": usage, "bench": bench,
        }


def verdict_hint(url: str | None) -> str:
    cli = "panelist verdict <call> --useful|--not-useful [--note TEXT]"
    if url:
        return (f'POST {url}/bench/verdict {{"call": "<call>", "useful": true|false, '
                f'"note": "...", "real": [...], "false": [...]}} or {cli}')
    return cli


def section(r: SeatResult, n: int) -> str:
    head = (f"## Seat {n}: {r.seat} · {r.alias}\n\n"
            f"call `{r.call}` · {r.status} · {r.seconds:.2f} s\n\n")
    if r.status == "ok":
        return head + r.answer.strip() + "\n"
    return head + f"> {r.status}: {r.error or 'no answer'}\n"


def markdown(seats: list[SeatResult]) -> str:
    return "\n".join(section(r, i) for i, r in enumerate(seats, 1))
