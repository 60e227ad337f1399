"""One upstream call: an OpenAI-compatible chat completion (or model list), its errors and usage.

``Upstream`` speaks the protocol over a ``metrics.upstream.transport.Transport``: it writes the
request, reads the reply's JSON (``Answer``: text, tool calls, usage, finish reason) and says
what a refusal means (``metrics.errors``, as ``refusal.py`` reads it). A call is not streamed
unless its caller listens (``on_delta``): it is then asked with ``stream: true``, each piece of
the answer's text is handed on as it arrives (``Streamed``), and the same whole ``Answer`` is
returned at the end.

Invariants:

- ``Upstream.chat`` either returns an ``Answer`` with non-blank text (or tool calls) or raises
  one class of ``metrics.errors``; ``json`` errors are translated here, socket and ``ssl`` errors
  and replies that are not HTTP/1.x by the transport, and nowhere else.
- An error read from an HTTP reply carries that reply's status as ``upstream_status`` (a 200
  whose body is an error, or empty, too); one without a reply carries None. It is never the
  status our own caller gets (``metrics.wire.errors`` decides that).
- ``timeout`` bounds the whole call (connect, send, full response); ``cancel`` ends it early.
- Every JSON body an upstream sends is parsed by ``jsonwire.loads``: an ``Answer`` and every
  error message hold no lone surrogate (it became U+FFFD), and JSON nested too deep is an
  ``UpstreamBadReply``, never a ``RecursionError``.
- Error messages carry the HTTP status and the upstream's own words (at most 300 characters, cut
  after a sentence or a word, never inside one), never the request body. They name the upstream
  by host and port (``transport.named`` names the endpoint instead, for callers' eyes). Neither
  they nor an ``Answer`` nor a piece handed on ever hold the call's API key or the proxy's
  credentials, even when an upstream or a proxy echoes them: each is replaced before any cut (a
  piece that could end in the start of one waits for the next).
- A streamed call's pieces add up to its ``Answer``'s text; it raises as an unstreamed call does
  (a refusal before the stream, an error object in it, a stream with no text nor tool calls),
  and an upstream that answers a streamed request whole is read whole.
- One write per request: head and body go out in one segment, but for messages of
  ``SHARED_BODY`` bytes or more encoded once for a whole panel: those follow the head unchanged.
"""

from __future__ import annotations

import json
import re
import ssl
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Callable, Protocol

from panelist.metrics.store import jsonwire
from panelist.metrics.upstream.http11 import Reply

# under the names this module calls them by (tests import ``_refusal`` from here)
from panelist.metrics.upstream.refusal import classified as _classified
from panelist.metrics.upstream.refusal import error_parts as _error_parts
from panelist.metrics.upstream.refusal import refusal as _refusal
from panelist.metrics.upstream.refusal import scrub as _scrub
from panelist.metrics.upstream.refusal import snippet as _snippet
from panelist.metrics.upstream.refusal import trim as _trim
from panelist.metrics.upstream.settle import Release
from panelist.metrics.upstream.transport import USER_AGENT, Origin, Sent, Transport
from panelist.metrics.errors import (
    AuthFailed,
    Cancelled,
    EmptyAnswer,
    UpstreamBadReply,
    UpstreamServerError,
    UpstreamTimeout,
)

_TOKEN = re.compile(r"[\x21-\x7e]+")  # what a bearer token may be made of, as sent


@dataclass(slots=True)
class Answer:
    text: str  # choices[0].message.content, list-of-parts content joined to text
    tokens: dict  # {"prompt", "completion", "total"}: ints from "usage", or None
    seconds: float
    model: str  # the model id the upstream reported, "" if none
    # the calls the model asked of the caller's tools, in OpenAI's form:
    # {"id", "type": "function", "function": {"name", "arguments" (a JSON string)}}
    tool_calls: list = field(default_factory=list)
    finish_reason: str = "stop"


SHARED_BODY = 64 * 1024


class _Target:
    """An endpoint as the protocol sees it: its origin and the fixed heads of its two requests."""

    __slots__ = ("origin", "label", "proxy", "head", "streaming", "listing")

    def __init__(self, origin: Origin):
        self.origin, self.label, self.proxy = origin, origin.label, origin.proxy
        host = origin.host_field
        path, via = origin.target("/chat/completions")
        self.head, self.streaming = (
            (
                f"POST {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: {USER_AGENT}\r\n"
                f"Accept: {accept}\r\nAccept-Encoding: identity\r\n"
                "Content-Type: application/json\r\n"
            ).encode()
            + via
            for accept in ("application/json", "text/event-stream")
        )
        path, via = origin.target("/models")
        self.listing = (
            f"GET {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: {USER_AGENT}"
            "\r\nAccept: application/json\r\nAccept-Encoding: identity\r\n"
        ).encode() + via


class Chats(Protocol):
    """What a caller of ``Upstream.chat`` needs: an ``Upstream``, or a stand-in that sends
    through one (onboarding's ``Asking``, which records each call around it)."""

    def chat(
        self,
        base_url: str,
        api_key: str | None,
        body: dict,
        *,
        timeout: float,
        cancel: threading.Event | None = None,
        messages_json: bytes | None = None,
        on_release: Callable[[], None] | None = None,
    ) -> Answer: ...


class Upstream:
    """Makes chat-completion calls; one instance is shared by every thread of a process."""

    def __init__(
        self,
        *,
        max_idle_per_host: int = 64,
        proxies: dict[str, str] | None = None,
        tls: ssl.SSLContext | None = None,
        transport: Transport | None = None,
    ):
        """``proxies``: ``{"http"|"https"|"all": proxy URL, "no": NO_PROXY}``; default: read from
        the environment now (``metrics.upstream.proxy``), never again. ``tls``: the context https
        upstreams are checked with; default: the system's trusted certificates. ``transport``:
        the connections to use instead (a test's in-process one); the others are then unused."""
        self.transport = transport or Transport(
            max_idle_per_host=max_idle_per_host, proxies=proxies, tls=tls
        )
        self._targets: dict[str, _Target] = {}

    def close(self) -> None:
        """Close every idle connection; calls still in flight end with ``Cancelled``."""
        self.transport.close()

    # -- the call ---------------------------------------------------------------------------------
    def chat(
        self,
        base_url: str,
        api_key: str | None,
        body: dict,
        *,
        timeout: float,
        cancel: threading.Event | None = None,
        messages_json: bytes | None = None,
        on_delta: Callable[[str], None] | None = None,
        meter=None,
        on_release: Callable[[], None] | None = None,
    ) -> Answer:
        """POST ``body`` (with ``"stream": false``) to ``{base_url}/chat/completions``.
        ``messages_json``: ``body["messages"]`` already encoded (``encode_messages``), shared
        by every seat of a panel instead of encoded, and held, once per seat. ``on_delta``:
        stream the call (``"stream": true``, usage asked for) and hand it each piece of the
        answer's text as it arrives; the whole answer is returned all the same. ``meter``: the
        memory budget a large answer is charged to as it arrives (``Transport.exchange``); past
        it the call fails with ``OutOfMemoryBudget``. What it took stays taken for the caller to
        give back; when the call fails it has already gone back. ``on_release``: run once, when
        the upstream is done with the call: at once after an answer, later for a call cut
        before its answer came, once the upstream ended it (``metrics.upstream.settle``);
        always, whether this returns or raises."""
        sent = self._begin(
            base_url,
            api_key,
            body,
            timeout,
            cancel,
            messages_json,
            meter,
            streamed=on_delta is not None,
            on_release=on_release,
        )
        return sent.answer(
            None if on_delta is None else Streamed(on_delta, sent.target.label, sent.secrets)
        )

    def send_chat(
        self,
        base_url: str,
        api_key: str | None,
        body: dict,
        *,
        timeout: float,
        cancel: threading.Event | None = None,
        messages_json: bytes | None = None,
        meter=None,
        on_release: Callable[[], None] | None = None,
    ) -> "SentChat":
        """``chat``'s first half, for a caller that waits on several calls in one thread: the
        request is sent; ``SentChat.answer`` reads and returns the ``Answer`` (raising what
        ``chat`` raises), ``fileno`` says when some of it has come."""
        return self._begin(
            base_url,
            api_key,
            body,
            timeout,
            cancel,
            messages_json,
            meter,
            streamed=False,
            on_release=on_release,
        )

    def _begin(
        self,
        base_url: str,
        api_key: str | None,
        body: dict,
        timeout: float,
        cancel,
        messages_json: bytes | None,
        meter,
        *,
        streamed: bool,
        on_release: Callable[[], None] | None = None,
    ) -> "SentChat":
        started = time.monotonic()
        release = None if on_release is None else Release(on_release)
        try:
            target = self._target(base_url)
            head, wire = (target.streaming, _STREAMED) if streamed else (target.head, _PLAIN)
            request = self._request(
                target, head, _payload(body, messages_json, wire), api_key, timeout, cancel
            )
        except BaseException:
            if release is not None:  # nothing was sent: the upstream has nothing to end
                release.done()
            raise
        sent = self.transport.begin(
            target.origin,
            request,
            deadline=started + timeout,
            timeout=timeout,
            cancel=cancel,
            meter=meter,
            release=release,
        )
        return SentChat(target, sent, _secrets(target, api_key), started)

    def models(self, base_url: str, api_key: str | None, *, timeout: float) -> list[dict]:
        """``GET {base_url}/models``: the entries of the endpoint's model list (each has an
        ``id``; many providers add ``context_length``, pricing and the like), as sent."""
        started = time.monotonic()
        target = self._target(base_url)
        request = self._request(target, target.listing, None, api_key, timeout, None)
        response, data = self.transport.exchange(
            target.origin, request, deadline=started + timeout, timeout=timeout, cancel=None
        )
        assert isinstance(data, bytes)  # read without a stream, a body is its bytes
        if not 200 <= response.status <= 299:
            raise _refusal(
                response.status,
                response,
                data,
                target.label,
                _secrets(target, api_key),
                target.proxy,
            )
        try:
            listing = jsonwire.loads(data)
        except (ValueError, UnicodeDecodeError) as exc:
            raise UpstreamBadReply(
                f"{target.label} listed its models with a body that is not "
                "JSON; check that the endpoint URL is OpenAI-compatible (it "
                "usually ends in /v1)",
                upstream_status=response.status,
            ) from exc
        entries = listing.get("data") if isinstance(listing, dict) else listing
        if not isinstance(entries, list):
            raise UpstreamBadReply(
                f"{target.label} answered GET /models without a 'data' list; "
                "check that the endpoint URL is OpenAI-compatible",
                upstream_status=response.status,
            )
        return [e for e in entries if isinstance(e, dict) and isinstance(e.get("id"), str)]

    def _target(self, base_url: str) -> _Target:
        target = self._targets.get(base_url)
        if target is None:
            target = _Target(self.transport.origin(base_url))
            if len(self._targets) > 1024:  # endpoints are few; this only bounds a misuse
                self._targets.clear()
            self._targets[base_url] = target
        return target

    def _request(
        self,
        target: _Target,
        head: bytes,
        payload: bytes | tuple | None,
        api_key: str | None,
        timeout: float,
        cancel,
    ) -> bytes | tuple:
        """One request's bytes (its parts, for a shared body), once its checks pass."""
        if self.transport.closed:
            raise Cancelled(
                f"call to {target.label} not made: this Upstream is closed; build a new one"
            )
        if cancel is not None and cancel.is_set():
            raise Cancelled(f"call to {target.label} cancelled: the panel no longer needs it")
        if timeout <= 0:
            raise UpstreamTimeout(
                f"{target.label} not called: the deadline had already passed; "
                "raise the seat's timeout"
            )
        auth = b""
        if api_key:
            if not _TOKEN.fullmatch(api_key):
                raise AuthFailed(
                    f"the API key for {target.label} holds spaces or characters a "
                    "header cannot carry; check the environment variable it is read "
                    "from"
                )
            auth = b"Authorization: Bearer " + api_key.encode() + b"\r\n"
        # One write per request: head and body in one segment, so the server never waits for a
        # second packet (TCP_NODELAY is set) and the call costs a single send.
        request: bytes | tuple[bytes, bytes, bytes]
        if payload is None:
            request = b"%s%s\r\n" % (head, auth)
        elif isinstance(payload, tuple):  # a shared body: its parts go out as they are
            opening, shared, closing = payload
            size = len(opening) + len(shared) + len(closing)
            request = (
                b"%s%sContent-Length: %d\r\n\r\n%s" % (head, auth, size, opening),
                shared,
                closing,
            )
        else:
            request = b"%s%sContent-Length: %d\r\n\r\n%s" % (head, auth, len(payload), payload)
        return request


class SentChat:
    """A chat call sent, its answer not read yet (``Upstream.send_chat``)."""

    __slots__ = ("target", "sent", "secrets", "started")

    def __init__(self, target: _Target, sent: Sent, secrets: tuple, started: float):
        self.target, self.sent, self.secrets, self.started = target, sent, secrets, started

    def fileno(self) -> int:
        return self.sent.fileno()

    def answer(self, reader: "Streamed | None" = None) -> Answer:
        """Read the answer; raises what ``Upstream.chat`` raises. ``reader``: a streamed call's,
        which reads a 2xx body as it arrives."""
        target = self.target
        response, data = self.sent.end(None if reader is None else reader.read)
        if reader is not None and data is reader:  # read as it arrived
            return reader.answer(response, time.monotonic() - self.started)
        # a stream reads only a 2xx body, and hands back a body it did not stream as its bytes
        assert isinstance(data, bytes)
        if not 200 <= response.status <= 299:
            raise _refusal(
                response.status, response, data, target.label, self.secrets, target.proxy
            )
        return _answer(response, data, target.label, self.secrets, time.monotonic() - self.started)

    def drop(self) -> None:
        """Give the answer up unread (its connection is closed)."""
        self.sent.drop()


_PLAIN = {"stream": False}
_STREAMED = {"stream": True, "stream_options": {"include_usage": True}}


def _payload(body: dict, messages_json: bytes | None, wire: dict) -> bytes | tuple:
    """A chat body's bytes; given its messages already encoded, their JSON is spliced in (and
    a large one is left as a part of its own, sent without a copy)."""
    if messages_json is None:
        return json.dumps({**body, **wire}).encode()
    rest = {k: v for k, v in body.items() if k != "messages"}
    opening = json.dumps({**rest, **wire}).encode()[:-1]  # without its "}"
    payload = (opening + b', "messages": ', messages_json, b"}")
    if len(messages_json) < SHARED_BODY:  # a copy costs less than a second send
        return b"".join(payload)
    return payload


def _secrets(target: _Target, api_key: str | None) -> tuple:
    """The (secret, stand-in) pairs a call's answers and errors are scrubbed of."""
    secrets = target.origin.secrets
    if api_key:
        secrets = ((api_key, "[api key]"),) + secrets
    return secrets


def encode_messages(messages: list) -> bytes:
    """A chat's messages as ``chat`` sends them, for ``messages_json``."""
    return json.dumps(messages).encode()


# -- reading a reply ------------------------------------------------------------------------------
def _answer(response: Reply, data: bytes, label: str, secrets: tuple, seconds: float) -> Answer:
    up = {"upstream_status": response.status}  # every error below read a 2xx reply
    try:
        reply = jsonwire.loads(data)
    except ValueError as exc:  # not JSON, not UTF-8, or nested deeper than jsonwire allows
        why = str(exc) if isinstance(exc, jsonwire.JSONRefused) else "not UTF-8"
        raise UpstreamBadReply(
            f"{label} answered {response.status} with a body that is not JSON we can read ({why}; "
            f"it starts: {_snippet(data, secrets)}); "
            "check that the endpoint URL is OpenAI-compatible (it usually ends in /v1)",
            **up,
        ) from exc
    if not isinstance(reply, dict):
        raise UpstreamBadReply(
            f"{label} answered {response.status} with JSON that is not an "
            "object; check that the endpoint URL is OpenAI-compatible",
            **up,
        )
    error = reply.get("error")
    if error:
        message, codes, error = _error_parts(reply, data, secrets)
        raise _classified(
            response.status,
            message,
            codes,
            error,
            response,
            label,
            fallback=UpstreamServerError,
            advice="try again later or seat another model",
        )
    choices = reply.get("choices")
    choice = choices[0] if isinstance(choices, list) and choices else None
    if not isinstance(choice, dict):
        choice = {}
    said = choice.get("message")
    if not isinstance(said, dict):
        raise UpstreamBadReply(
            f"{label} answered {response.status} without choices[0].message; "
            "check that the endpoint serves OpenAI chat completions",
            **up,
        )
    return _finished(
        _text(said.get("content")),
        _tool_calls(said.get("tool_calls"), label, up),
        choice.get("finish_reason"),
        reply.get("usage"),
        reply.get("model"),
        label,
        secrets,
        seconds,
        up,
    )


def _finished(
    text: str,
    calls: list,
    finish,
    usage,
    model,
    label: str,
    secrets: tuple,
    seconds: float,
    up: dict,
) -> Answer:
    """The ``Answer`` an answer's parts make, streamed or not; ``EmptyAnswer`` if it has neither
    text nor tool calls. Every field is scrubbed of ``secrets``."""
    finish = _trim(_scrub(finish, secrets)) if isinstance(finish, str) else None
    if not text.strip() and not calls:
        why = f" (finish_reason {finish!r})" if finish else ""
        advice = (
            "raise max_tokens: the answer was cut off before any text"
            if finish == "length"
            else "try again, or seat another model"
        )
        raise EmptyAnswer(f"{label} answered with no text{why}; {advice}", **up)
    usage = usage if isinstance(usage, dict) else {}
    tokens = {
        "prompt": _count(usage.get("prompt_tokens")),
        "completion": _count(usage.get("completion_tokens")),
        "total": _count(usage.get("total_tokens")),
    }
    model = model if isinstance(model, str) else ""
    if secrets:  # an upstream that echoes the key must not have it logged or served
        text, model = _scrub(text, secrets), _scrub(model, secrets)
        calls = jsonwire.loads(_scrub(jsonwire.dumps(calls), secrets)) if calls else calls
    finish = finish or ("tool_calls" if calls else "stop")
    return Answer(text, tokens, seconds, model, calls, finish)


class Streamed:
    """The reader of one streamed answer (``Transport.exchange``'s ``stream``): server-sent
    events (WHATWG HTML, "Server-sent events") of OpenAI chat chunks. Each piece of text is
    scrubbed and handed to ``on_delta`` as it comes, but for a tail that could be the start of
    a secret, which waits for the next piece; tool calls, usage, the model and the finish reason
    are gathered for ``answer``. A body that is not an event stream is returned whole."""

    def __init__(self, on_delta: Callable[[str], None], label: str, secrets: tuple):
        self.on_delta, self.label, self.secrets = on_delta, label, secrets
        self.reply: Reply | None = None
        self.sent: list[str] = []  # the pieces handed on, in order
        self._held = ""  # scrubbed text not handed on yet
        self._calls: dict[int, dict] = {}
        self._finish = self._usage = self._model = None

    def read(self, reply: Reply, pieces) -> "Streamed | bytes":
        self.reply = reply
        if "text/event-stream" not in reply.headers.get("content-type", "").lower():
            return b"".join(pieces)  # answered whole, stream or not: read as such
        done = False
        lines: list[bytes] = []
        partial: list[bytes] = []
        for piece in pieces:  # read to the end, [DONE] or not: the connection is then reusable
            if b"\n" not in piece:
                partial.append(piece)
                continue
            *complete, rest = (b"".join(partial) + piece).split(b"\n")
            partial = [rest]
            for line in complete:
                line = line.rstrip(b"\r")
                if done or line.startswith(b":"):  # after [DONE], or a comment
                    continue
                if not line:  # a blank line ends an event
                    done = bool(lines) and self._event(b"\n".join(lines))
                    lines = []
                elif line.partition(b":")[0] == b"data":
                    value = line.partition(b":")[2]
                    lines.append(value[1:] if value.startswith(b" ") else value)
        if lines and not done:
            self._event(b"\n".join(lines))
        held, self._held = self._held, ""
        if held:  # the end: no secret can start in it any more
            self._hand_on(held)
        return self

    def _event(self, data: bytes) -> bool:
        """One event's data; True once it is ``[DONE]``."""
        if data.strip() == b"[DONE]":
            return True
        assert self.reply is not None  # set by read, which feeds the events
        status = self.reply.status
        try:
            chunk = jsonwire.loads(data)
        except ValueError as exc:  # not JSON, not UTF-8, or nested too deep
            raise UpstreamBadReply(
                f"{self.label} streamed an event that is not JSON we can read (it starts: "
                f"{_snippet(data, self.secrets)}); check that the endpoint serves OpenAI chat "
                "completions",
                upstream_status=status,
            ) from exc
        if not isinstance(chunk, dict):
            raise UpstreamBadReply(
                f"{self.label} streamed an event that is not a JSON object; "
                "check that the endpoint serves OpenAI chat completions",
                upstream_status=status,
            )
        if chunk.get("error"):
            message, codes, error = _error_parts(chunk, data, self.secrets)
            raise _classified(
                status,
                message,
                codes,
                error,
                self.reply,
                self.label,
                fallback=UpstreamServerError,
                advice="try again later or seat another model",
            )
        if isinstance(chunk.get("model"), str) and chunk["model"]:
            self._model = chunk["model"]
        if isinstance(chunk.get("usage"), dict):  # the last chunk, with include_usage
            self._usage = chunk["usage"]
        choices = chunk.get("choices")
        choice = choices[0] if isinstance(choices, list) and choices else None
        if not isinstance(choice, dict):
            return False
        if isinstance(choice.get("finish_reason"), str):
            self._finish = choice["finish_reason"]
        delta = choice.get("delta")
        if not isinstance(delta, dict):
            delta = {}
        text = _text(delta.get("content"))
        if text:
            self._hear(text)
        calls = delta.get("tool_calls")
        for call in calls if isinstance(calls, list) else ():
            self._call_piece(call)
        return False

    def _call_piece(self, call) -> None:
        """A piece of a tool call: strings add up, by the call's ``index``, as OpenAI sends."""
        assert self.reply is not None  # set by read, which feeds the events
        if not isinstance(call, dict):
            raise UpstreamBadReply(
                f"{self.label} streamed a tool call that is not an object; "
                "check that the endpoint serves OpenAI chat completions",
                upstream_status=self.reply.status,
            )
        index = call.get("index")
        index = index if type(index) is int else len(self._calls)
        slot = self._calls.setdefault(index, {"id": None, "name": "", "arguments": ""})
        if isinstance(call.get("id"), str) and call["id"]:
            slot["id"] = call["id"]
        fn = call.get("function")
        if not isinstance(fn, dict):
            fn = {}
        if isinstance(fn.get("name"), str):
            slot["name"] += fn["name"]
        args = fn.get("arguments")
        if args is not None:
            slot["arguments"] += args if isinstance(args, str) else jsonwire.dumps(args)

    def _hear(self, text: str) -> None:
        pending = _scrub(self._held + text, self.secrets)
        risky = _secret_start(pending, self.secrets)
        self._held = pending[len(pending) - risky :] if risky else ""
        if len(pending) > risky:
            self._hand_on(pending[: len(pending) - risky])

    def _hand_on(self, piece: str) -> None:
        self.sent.append(piece)
        self.on_delta(piece)

    def answer(self, response: Reply, seconds: float) -> Answer:
        """The whole answer, once the stream was read."""
        up = {"upstream_status": response.status}
        calls = [
            {
                "id": c["id"],
                "type": "function",
                "function": {"name": c["name"], "arguments": c["arguments"]},
            }
            for _, c in sorted(self._calls.items())
        ]
        return _finished(
            "".join(self.sent),
            _tool_calls(calls, self.label, up),
            self._finish,
            self._usage,
            self._model,
            self.label,
            self.secrets,
            seconds,
            up,
        )


def _secret_start(text: str, secrets: tuple) -> int:
    """How many of ``text``'s last characters could be the start of a secret (0: none)."""
    longest = 0
    for secret, _ in secrets:
        for k in range(min(len(text), len(secret) - 1), longest, -1):
            if secret.startswith(text[-k:]):
                longest = k
                break
    return longest


def _tool_calls(raw, label: str, up: dict | None = None) -> list[dict]:
    """The tool calls of an answer, normalised to OpenAI's form; a malformed one is refused
    whole, since running half of what a model asked for is worse than running none."""
    if raw is None or raw == []:
        return []
    if not isinstance(raw, list):
        raise UpstreamBadReply(
            f"{label} answered with 'tool_calls' that is not a list; check "
            "that the endpoint serves OpenAI chat completions",
            **(up or {}),
        )
    calls = []
    for i, call in enumerate(raw):
        fn = call.get("function") if isinstance(call, dict) else None
        if not isinstance(fn, dict):
            fn = {}
        name = fn.get("name")
        if not isinstance(name, str) or not name:
            raise UpstreamBadReply(
                f"{label} answered with tool call {i} without a function "
                "name; check that the endpoint serves OpenAI chat "
                "completions",
                **(up or {}),
            )
        args = fn.get("arguments")
        if args is None:
            args = "{}"
        elif not isinstance(args, str):  # some servers send the object itself
            args = jsonwire.dumps(args)
        cid = call.get("id")
        # an id is how a conversation finds the seat that made the call: never reuse one
        cid = cid if isinstance(cid, str) and cid else f"call_{uuid.uuid4().hex[:24]}"
        calls.append({"id": cid, "type": "function", "function": {"name": name, "arguments": args}})
    return calls


def _text(content) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts = []
    for part in content:  # content parts: [{"type": "text", "text": ...}, ...]
        if isinstance(part, str):
            parts.append(part)
        elif isinstance(part, dict) and isinstance(part.get("text"), str):
            parts.append(part["text"])
    return "".join(parts)


def _count(value) -> int | None:
    return value if type(value) is int else None
