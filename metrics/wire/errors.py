"""Error bodies in each wire format: OpenAI's error shape, and Anthropic's on ``/v1/messages``
(its clients read only that shape).

The HTTP status of an error is decided at the server boundary from the error's class
(``PanelistError.status``); an upstream's own status travels on the error as its own field and is
never the caller's status by accident.
"""

from __future__ import annotations

from panelist.metrics.store import jsonwire
from panelist.metrics.wire import messages


def refusal(message: str) -> dict:
    """OpenAI's error shape for a refusal made while reading the request."""
    return {"error": {"message": message, "type": "invalid_request_error", "param": None,
                      "code": None}}


def error_body(message: str) -> bytes:
    return jsonwire.encode(refusal(message))


def shaped(path: str, status: int, body: dict) -> dict:
    """An OpenAI error body in the wire format of the route asked: Anthropic's on /v1/messages,
    OpenAI's everywhere else."""
    if path.partition("?")[0].rstrip("/") == "/v1/messages":
        return messages.from_openai(status, body)
    return body
