"""The error tree. Every error a caller can see is one of these.

    PanelistError (500)                  something went wrong; the catch-all's type
    ├── BadRequest (400)                 the request or a command's input is malformed
    │   ├── ConfigInvalid (400)          a roster / collection / limit / access setting is invalid
    │   └── PromptTooLong (400)          no seat's window holds the prompt (context_length_exceeded)
    ├── Unauthorized (401)               a gateway key is missing, malformed or unknown
    ├── Forbidden (403)                  a foreign host or origin, or outside the key's scope
    ├── NotFound (404)                   unknown collection, call, route, endpoint or model
    ├── MethodNotAllowed (405)
    ├── RequestTimeout (408)             the client stopped sending mid-request
    ├── Conflict (409)                   an edit of something changed meanwhile, or a name taken
    ├── PayloadTooLarge (413)            body or prompt too big
    ├── UnsupportedMediaType (415)       a request body that is not JSON
    ├── TooManyRequests (429)            a gateway key past its requests a minute
    ├── Unavailable (503)                no seat could be filled, or every seat was rate limited
    │   └── DatabaseUnreachable (503)    the database the ledger lives in does not answer;
    │                                    carries Retry-After
    ├── AllSeatsFailed (502)             no seat (nor merger) gave an answer the caller can use
    ├── GatewayUnreachable (502)         `--url` or MCP: no working gateway at that URL
    └── UpstreamError (502)              one upstream call failed; a seat's error, not a reply
        │                                .upstream_status: the status the upstream (or its proxy)
        │                                answered with, None when no HTTP reply came
        ├── RateLimited                  429; carries retry_after seconds when the upstream said
        ├── ContextTooLong               the prompt exceeds the window; carries the window if stated
        ├── OutputCapExceeded            max_tokens above the model's cap; carries the cap if stated
        ├── AuthFailed                   401/403 from the upstream
        ├── PaymentRequired              402, or a quota / entitlement refusal
        ├── UpstreamServerError          5xx, or a 200 whose body is an error
        ├── UpstreamBadReply             a reply that is not an OpenAI chat completion
        │   └── ModelNotFound            404/410: the served id or the endpoint URL is wrong
        ├── UpstreamTimeout              the seat's deadline passed
        ├── UpstreamUnreachable          connection refused, reset or closed
        ├── EmptyAnswer                  the upstream answered with no text
        ├── Cancelled                    the panel no longer wants the answer
        ├── AtLimit (503)                no admission slot within the wait: the endpoint (or
        │                                model) is at its limit; carries retry_after seconds
        └── KeyRefused (400)             the endpoint's key variable is not one an endpoint may
                                         read (``roster.keyenv``): no call was made

The statuses in brackets are what a caller of ours gets; they are decided at the server
boundary, by the one table in ``metrics.wire.errors`` (which also renders the body: OpenAI's error
shape, Anthropic's on /v1/messages). An upstream's own status never becomes ours: it travels as
``upstream_status``, for the people reading the error (the dashboard's endpoint Test shows it).

Messages say what to do next. ``details`` (e.g. the seats of a panel that failed) are extra fields
of the body's ``error`` object, which OpenAI's clients keep (``APIStatusError.body``).
"""

from __future__ import annotations

import math


class PanelistError(Exception):
    """Raised when something fails that no narrower class describes."""

    def __init__(
        self,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
        details: dict | None = None,
    ):
        super().__init__(message)
        self.message = message
        self.param = param
        self.code = code
        self.headers = headers or {}
        self.details = details or {}


class BadRequest(PanelistError):
    """Raised when a request or command input is malformed or has a wrong type."""


class ConfigInvalid(BadRequest):
    """Raised when an endpoint, model, collection or limit fails validation on write."""


class PromptTooLong(BadRequest):
    """Raised when the prompt is larger than the window of every model that could take a seat
    (known before asking, or said by every seat asked); ``window`` is the largest of theirs
    (None when none was stated), ``estimate`` the prompt's size in tokens.

    The message starts as OpenAI's own context-length error does, with its code
    ``context_length_exceeded`` (``anthropic_head`` gives Anthropic's words, for /v1/messages),
    and goes on with "The prompt is too long for every seat": the clients that trim a
    conversation recognise it by those words (LiteLLM by the first sentence, LangChain by
    "prompt is too long", as the openai package leaves the code out of the error's text)."""

    def __init__(self, window: int | None, estimate: int, collection: str, seats: str):
        """``seats``: each seat that could not hold it, with its window."""
        super().__init__(
            f"{self.openai_head(window, estimate)} The prompt is too long for every seat of "
            f"{collection}: {seats}. Trim the conversation, or ask a collection whose models "
            "have larger windows (GET /v1/models).",
            param="messages",
            code="context_length_exceeded",
            details={"window": window, "estimate": estimate},
        )
        self.window, self.estimate = window, estimate

    @staticmethod
    def openai_head(window: int | None, estimate: int) -> str:
        size = f"is {window} tokens" if window else "is less than that"
        return (
            f"This model's maximum context length {size}. However, your messages resulted in "
            f"{estimate} tokens (estimated: characters/4 + 10%). Please reduce the length of "
            "the messages."
        )

    @staticmethod
    def anthropic_head(window: int | None, estimate: int) -> str:
        most = f"{window} maximum" if window else "the context window"
        return (
            f"prompt is too long: {estimate} tokens > {most} (estimated: characters/4 + "
            "10%). Please reduce the length of the messages."
        )


class Unauthorized(PanelistError):
    """Raised when a caller must present a key and did not, or presented a bad one."""


class Forbidden(PanelistError):
    """Raised when a caller may not do what it asked."""


class NotFound(PanelistError):
    """Raised when a collection, call, route, endpoint or model does not exist."""


class MethodNotAllowed(PanelistError):
    """Raised when a route exists but not for this HTTP method."""


class RequestTimeout(PanelistError):
    """Raised when a client stops sending before its request is complete."""


class Conflict(PanelistError):
    """Raised when an edit was based on a version that changed meanwhile (code ``stale``), or a
    new thing takes a name already in use (code ``exists``, ``in_use``)."""


class PayloadTooLarge(PanelistError):
    """Raised when a body or a prompt is larger than what may be sent on."""


class UnsupportedMediaType(PanelistError):
    """Raised when a request body is not declared ``application/json``."""


class TooManyRequests(PanelistError):
    """Raised when a gateway key has used up its requests a minute; carries ``Retry-After``."""


class Unavailable(PanelistError):
    """Raised when a panel cannot seat anyone, or when every seat it asked was rate limited
    (then with ``Retry-After``: when the soonest of their rests ends), or when the server holds
    as many request bodies in memory as it may (with ``Retry-After``)."""


class DatabaseUnreachable(Unavailable):
    """Raised when the database (``PANELIST_DATABASE_URL``) cannot be connected to or drops
    the connection: nothing of the request was written, and a retry after ``retry_after``
    seconds may succeed once it is back."""

    def __init__(self, message: str, retry_after: float = 2.0, **kw):
        kw.setdefault("headers", {"Retry-After": str(max(1, math.ceil(retry_after)))})
        kw.setdefault("code", "database_unreachable")
        super().__init__(message, **kw)
        self.retry_after = retry_after


class AllSeatsFailed(PanelistError):
    """Raised when no seat of a panel (nor its merger) gave an answer the caller can use; the
    panel is logged all the same. ``seats`` are the seats' public dicts, also in the body."""

    def __init__(
        self,
        message: str,
        seats: list[dict],
        *,
        code: str = "all_seats_failed",
        headers: dict[str, str] | None = None,
    ):
        # the openai and anthropic clients retry a 5xx on their own; a panel every seat of which
        # failed was already tried by every seat, and a silent retry starts (and bills) another
        headers = {"x-should-retry": "false", **(headers or {})}
        super().__init__(message, code=code, headers=headers, details={"seats": seats})
        self.seats = seats


class GatewayUnreachable(PanelistError):
    """Raised when ``--url`` or ``panelist mcp`` finds no working gateway at its URL: nothing
    listens, no answer in time, or what answers is not a Panelist gateway."""


class UpstreamError(PanelistError):
    """Raised when one upstream call fails; the panel turns it into a seat's error.
    ``upstream_status``: the HTTP status of the reply the error was read from (the upstream's,
    or its proxy's), None when no reply came (refused, cut, timed out, not HTTP)."""

    kind = "upstream"

    def __init__(self, message: str, *, upstream_status: int | None = None, **kw):
        super().__init__(message, **kw)
        self.upstream_status = upstream_status


class RateLimited(UpstreamError):
    """Raised when the upstream answers 429; ``retry_after`` is its stated wait, if any."""

    kind = "rate_limit"

    def __init__(self, message: str, retry_after: float | None = None, **kw):
        super().__init__(message, **kw)
        self.retry_after = retry_after


class ContextTooLong(UpstreamError):
    """Raised when the upstream says the prompt exceeds its window; ``window`` if it said which."""

    kind = "context_length"

    def __init__(self, message: str, window: int | None = None, **kw):
        super().__init__(message, **kw)
        self.window = window


class OutputCapExceeded(UpstreamError):
    """Raised when the upstream refuses a ``max_tokens`` above what the model may write;
    ``max_output`` if it said how much that is."""

    kind = "max_output"

    def __init__(self, message: str, max_output: int | None = None, **kw):
        super().__init__(message, **kw)
        self.max_output = max_output


class AuthFailed(UpstreamError):
    """Raised when the upstream refuses the key (401/403)."""

    kind = "auth"


class PaymentRequired(UpstreamError):
    """Raised when the upstream wants payment or the account lacks the model (402, quota)."""

    kind = "payment"


class UpstreamServerError(UpstreamError):
    """Raised on a 5xx, or a 200 whose body is an error object."""

    kind = "server_error"


class UpstreamBadReply(UpstreamError):
    """Raised when a reply cannot be read as an OpenAI chat completion."""

    kind = "bad_reply"


class ModelNotFound(UpstreamBadReply):
    """Raised when an endpoint answers 404 or 410: the served model id or the endpoint's URL is
    wrong, or the provider withdrew it; no retry will mend that."""

    kind = "not_found"


class UpstreamTimeout(UpstreamError):
    """Raised when the seat's deadline passes before the answer is complete."""

    kind = "timeout"


class UpstreamUnreachable(UpstreamError):
    """Raised when the upstream cannot be connected to, or drops the connection."""

    kind = "connection"


class EmptyAnswer(UpstreamError):
    """Raised when the upstream answers with no text."""

    kind = "empty"


class Cancelled(UpstreamError):
    """Raised when a call is abandoned because nobody waits for its answer any more."""

    kind = "cancelled"


class OutOfMemoryBudget(UpstreamError):
    """Raised when a seat's answer would take the server past its memory budget for bytes in
    flight (``PANELIST_MAX_INFLIGHT_MB``): the rest of the answer is not read. It says nothing
    of the model."""

    kind = "memory"


class AtLimit(UpstreamError):
    """Raised when admission gives a call no slot within its wait: its endpoint (or model) is at
    its limit of calls at once or a minute, or paused after an upstream's Retry-After.
    ``retry_after``: seconds until a call may fit (a guess of one second when only a running call
    ending would make room)."""

    kind = "at_limit"

    def __init__(self, message: str, retry_after: float, **kw):
        kw.setdefault("headers", {"Retry-After": str(max(1, math.ceil(retry_after)))})
        super().__init__(message, **kw)
        self.retry_after = retry_after


class KeyRefused(UpstreamError):
    """Raised when an endpoint names a key variable it may not read (``roster.keyenv``): the
    call is not made and the value never read; the message says how to allow the name."""

    kind = "key_refused"
