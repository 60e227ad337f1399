"""The error table: each class of ``metrics.errors`` and the HTTP status a caller of ours gets for
it, with the body it reads (OpenAI's error shape; Anthropic's on /v1/messages and the routes under
it, Ollama's on its routes, Google's under /v1beta/: each format's clients read only their own).

Invariants:

* ``TABLE`` has one row for every class of ``metrics.errors``; a class defined elsewhere (a
  subclass of one of them) is answered by its nearest ancestor's row.
* The status of an error is decided here and nowhere else; an upstream's own status
  (``UpstreamError.upstream_status``) is never read here, so a 401 from an upstream can never
  become a 401 to our caller (who would take it for their own key being refused).
* A body never holds more than the error's message, param, code and details: never a traceback,
  never the request.
"""

from __future__ import annotations

from panelist.metrics import errors as e
from panelist.metrics.store import jsonwire
from panelist.metrics.wire import gemini, messages, ollama

# class -> (HTTP status, OpenAI's error type)
TABLE: dict[type[e.PanelistError], tuple[int, str]] = {
    e.PanelistError: (500, "server_error"),
    e.BadRequest: (400, "invalid_request_error"),
    e.ConfigInvalid: (400, "invalid_request_error"),
    # OpenAI's status and code for a prompt over the window: a client trims on them
    e.PromptTooLong: (400, "invalid_request_error"),
    e.Unauthorized: (401, "authentication_error"),
    e.Forbidden: (403, "permission_error"),
    e.NotFound: (404, "not_found_error"),
    e.MethodNotAllowed: (405, "invalid_request_error"),
    e.RequestTimeout: (408, "invalid_request_error"),
    e.Conflict: (409, "invalid_request_error"),
    e.PayloadTooLarge: (413, "invalid_request_error"),
    e.UnsupportedMediaType: (415, "invalid_request_error"),
    e.TooManyRequests: (429, "rate_limit_error"),
    e.Unavailable: (503, "service_unavailable"),
    e.DatabaseUnreachable: (503, "service_unavailable"),
    e.AllSeatsFailed: (502, "upstream_error"),
    e.GatewayUnreachable: (502, "api_connection_error"),
    # one upstream call failed, and reached a caller whole (a Discover, a probe): it is our
    # gateway that failed them, whatever the upstream answered
    e.UpstreamError: (502, "upstream_error"),
    e.RateLimited: (502, "upstream_error"),
    e.ContextTooLong: (502, "upstream_error"),
    e.OutputCapExceeded: (502, "upstream_error"),
    e.AuthFailed: (502, "upstream_error"),
    e.PaymentRequired: (502, "upstream_error"),
    e.UpstreamServerError: (502, "upstream_error"),
    e.UpstreamBadReply: (502, "upstream_error"),
    e.ModelNotFound: (502, "upstream_error"),
    e.UpstreamTimeout: (502, "upstream_error"),
    e.UpstreamUnreachable: (502, "upstream_error"),
    e.EmptyAnswer: (502, "upstream_error"),
    e.Cancelled: (502, "upstream_error"),
    e.AtLimit: (503, "service_unavailable"),
    e.OutOfMemoryBudget: (503, "service_unavailable"),  # room comes back as panels end
    # our own setting refused the call before it was made: the fix is the user's, not a retry
    e.KeyRefused: (400, "invalid_request_error"),
}


def _row(exc: e.PanelistError) -> tuple[int, str]:
    for cls in type(exc).__mro__:
        row = TABLE.get(cls)
        if row is not None:
            return row
    return TABLE[e.PanelistError]


def status_of(exc: e.PanelistError) -> int:
    """The HTTP status a caller gets for ``exc``."""
    return _row(exc)[0]


def body_of(exc: e.PanelistError) -> dict:
    """``exc`` in OpenAI's error shape; its details are extra fields of the ``error`` object."""
    return {
        "error": {
            "message": exc.message,
            "type": _row(exc)[1],
            "param": exc.param,
            "code": exc.code,
            **exc.details,
        }
    }


def refusal(message: str) -> dict:
    """OpenAI's error shape for a refusal made while reading the request."""
    return {
        "error": {"message": message, "type": "invalid_request_error", "param": None, "code": None}
    }


def error_body(message: str) -> bytes:
    return jsonwire.encode(refusal(message))


# Ollama's routes (``metrics.wire.ollama``), beside the dashboard's own /api/ routes
OLLAMA_PATHS = ("/api/chat", "/api/generate", "/api/tags", "/api/show", "/api/version")
GEMINI_PREFIX = "/v1beta/"


def shaped(path: str, status: int, body: dict) -> dict:
    """An OpenAI error body in the wire format of the route asked: Anthropic's on /v1/messages
    and under it (count_tokens; its clients read only that shape), Ollama's on its routes,
    Google's under /v1beta/, OpenAI's everywhere else."""
    path = path.partition("?")[0].rstrip("/")
    if path == "/v1/messages" or path.startswith("/v1/messages/"):
        return _anthropic_words(messages.from_openai(status, body))
    if path in OLLAMA_PATHS:
        return ollama.error_body(body["error"]["message"])
    if path.startswith(GEMINI_PREFIX) or path == GEMINI_PREFIX.rstrip("/"):
        return gemini.error_body(status, body["error"]["message"])
    return body


def _anthropic_words(body: dict) -> dict:
    """A prompt too long for every seat, in Anthropic's words ("prompt is too long: M tokens >
    N maximum"), which the clients of /v1/messages look for; any other body as it is."""
    error = body["error"]
    if "estimate" not in error or not isinstance(error.get("message"), str):
        return body
    window, estimate = error.get("window"), error["estimate"]
    head = e.PromptTooLong.openai_head(window, estimate)
    message = error["message"]
    if message.startswith(head):
        error["message"] = e.PromptTooLong.anthropic_head(window, estimate) + message[len(head) :]
    return body
