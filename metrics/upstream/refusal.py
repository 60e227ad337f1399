"""What an upstream's refusal means: the class of ``metrics.errors`` a non-2xx reply (or an error
object in a 2xx one) is, read from its status, its error code and type, and its own words, and
those words made safe to repeat.

Invariants:

- Every error made here carries the reply's status as ``upstream_status`` and says what to do.
- A rate limit states the wait when the reply does (``Retry-After`` in seconds or as an HTTP
  date, else "try again in N s" in its words); a context-length refusal states the window when
  the upstream names it; an output-budget refusal states the most tokens an answer may have.
- An upstream's words are repeated at most ``MESSAGE_CHARS`` characters, cut after a sentence or
  a word, and only after every secret in them was replaced (``scrub`` before ``trim``), so no
  cut can leave part of a secret behind.
"""

from __future__ import annotations

import json
import math
import re
import time
from email.utils import parsedate_to_datetime

from panelist.metrics.errors import (
    AuthFailed,
    ContextTooLong,
    ModelNotFound,
    OutputCapExceeded,
    PaymentRequired,
    RateLimited,
    UpstreamBadReply,
    UpstreamError,
    UpstreamServerError,
)
from panelist.metrics.plaintext import clip
from panelist.metrics.store import jsonwire
from panelist.metrics.upstream.http11 import Reply
from panelist.metrics.upstream.proxy import Proxy
from panelist.metrics.upstream.transport import proxy_refusal

MESSAGE_CHARS = 300  # how much of an upstream's own message an error repeats

_RATE = re.compile(r"rate.?limit|too many requests", re.I)
_QUOTA = re.compile(r"insufficient.quota|exceeded your current quota", re.I)
_TOO_LONG = re.compile(
    r"context.length|context.window|maximum context|context.size|reduce the length|too many tokens"
    r"|prompt is too long|input is too long|exceeds? the (?:available )?context|max_model_len",
    re.I,
)
# Each pattern's one group is the window the upstream states (OpenAI, vLLM, llama.cpp, Anthropic).
_WINDOW = re.compile(
    r"(?:maximum context length|context window|context length|context size|max_model_len|n_ctx)"
    r"(?: is| of|:|=)?\s*(\d[\d,]*)"
    r"|>\s*(\d[\d,]*)\s*(?:tokens?\s*)?maximum",
    re.I,
)
# A refusal of the output budget that states the cap: the group that matched is the most
# completion tokens the model may write (Anthropic, OpenAI, DeepSeek, Groq, in that order).
# Read before the window, as some of them also name the context window.
_OUTPUT_CAP = re.compile(
    r"max_tokens:\s*\d[\d,]*\s*>\s*(\d[\d,]*)"
    r"|supports at most (\d[\d,]*) completion tokens"
    r"|valid range of max_tokens is \[\s*\d+\s*,\s*(\d[\d,]*)\s*\]"
    r"|max_tokens`? must be (?:less than or equal to|<=|at most) `?(\d[\d,]*)",
    re.I,
)
_TRY_AGAIN = re.compile(r"try again in (\d+(?:\.\d+)?)\s*(ms|s)\b", re.I)


def refusal(
    status: int,
    response: Reply | None,
    data: bytes,
    label: str,
    secrets: tuple = (),
    proxy: Proxy | None = None,
) -> UpstreamError:
    """The error a non-2xx reply means; it carries the reply's status as ``upstream_status``."""
    message, codes, error = error_parts(None, data, secrets)
    said = f"(HTTP {status}: {message})" if message else f"(HTTP {status})"
    up = {"upstream_status": status}
    if status == 407 and proxy is not None:  # only a proxy asks for proxy credentials
        return proxy_refusal(proxy, said, label, status)
    if status in (429, 403) and _QUOTA.search(codes):
        return PaymentRequired(
            f"{label} refused for quota or billing {said}; check the "
            "account's plan and credit for this model",
            **up,
        )
    if status == 429:
        wait = _retry_after(response, message)
        then = f"; retry after {wait:g} s" if wait is not None else "; retry later"
        return RateLimited(
            f"{label} rate-limited the call {said}{then}, or lower this model's concurrency",
            retry_after=wait,
            **up,
        )
    if status == 402:
        return PaymentRequired(
            f"{label} wants payment {said}; check the account's plan and credit for this model",
            **up,
        )
    if status in (401, 403):
        return AuthFailed(
            f"{label} refused the API key {said}; check the endpoint's key (the "
            "environment variable it names)",
            **up,
        )
    if status in (400, 413):
        return classified(
            status,
            message,
            codes,
            error,
            response,
            label,
            fallback=UpstreamBadReply,
            advice="check the parameters passed on to this model",
        )
    if status in (404, 410):  # 410: the provider withdrew the model or the route
        return ModelNotFound(
            f"{label} answered {said}; the served model id may be wrong or "
            "withdrawn (model not found), or the endpoint URL may lack its /v1 "
            "prefix",
            **up,
        )
    if 500 <= status <= 599:
        return UpstreamServerError(
            f"{label} failed {said}; try again later or seat another model", **up
        )
    return UpstreamBadReply(
        f"{label} rejected the request {said}; check the parameters passed on to this model", **up
    )


def classified(
    status: int,
    message: str,
    codes: str,
    error: dict,
    response,
    label: str,
    *,
    fallback: type[UpstreamError],
    advice: str,
) -> UpstreamError:
    """An error body read for what it says: quota, rate limit or context length, else fallback."""
    said = f"(HTTP {status}: {message})" if message else f"(HTTP {status})"
    if _QUOTA.search(codes):
        return PaymentRequired(
            f"{label} refused for quota or billing {said}; check the "
            "account's plan and credit for this model",
            upstream_status=status,
        )
    if 200 <= status <= 299 and _RATE.search(codes):
        wait = _retry_after(response, message)
        return RateLimited(
            f"{label} rate-limited the call {said}; retry later",
            retry_after=wait,
            upstream_status=status,
        )
    cap = _OUTPUT_CAP.search(codes)
    if cap:
        most = int(next(g for g in cap.groups() if g).replace(",", ""))
        return OutputCapExceeded(
            f"{label} refused the output budget {said}; it writes at most "
            f"{most} tokens an answer: ask for max_tokens {most} or less",
            max_output=most,
            upstream_status=status,
        )
    if _TOO_LONG.search(codes):
        window = _window(codes, error)
        size = f" of {window} tokens" if window else ""
        return ContextTooLong(
            f"{label} says the prompt exceeds its context window{size} {said}; "
            "shorten the prompt or seat a model with a larger window",
            window=window,
            upstream_status=status,
        )
    return fallback(f"{label} answered with an error {said}; {advice}", upstream_status=status)


def error_parts(reply, data: bytes, secrets: tuple) -> tuple[str, str, dict]:
    """The upstream's message to show (scrubbed, trimmed); its code, type and whole message, to
    match rules against; and its error object."""
    if reply is None:
        try:
            reply = jsonwire.loads(data)
        except ValueError:  # not JSON, not UTF-8, or nested too deep: shown as a snippet
            reply = None
    error = reply.get("error") if isinstance(reply, dict) else None
    if isinstance(error, dict):
        message = error.get("message")
    elif isinstance(error, str):
        message, error = error, {}
    elif isinstance(reply, dict):  # vLLM and others put the fields at the top level
        message, error = reply.get("message") or reply.get("detail"), reply
    else:
        message, error = None, {}
    if not isinstance(message, str):
        message = json.dumps(message) if message is not None else snippet(data, secrets)
    message = scrub(message, secrets)
    codes = " ".join(str(error.get(k) or "") for k in ("code", "type")) + " " + message
    return trim(message), codes, error


def _window(text: str, error: dict) -> int | None:
    if type(error.get("n_ctx")) is int:  # llama.cpp states the window as a field
        return error["n_ctx"]
    match = _WINDOW.search(text)
    if match:
        return int((match.group(1) or match.group(2)).replace(",", ""))
    return None


def _retry_after(response, message: str) -> float | None:
    """Seconds to wait: Retry-After (seconds or HTTP-date, RFC 9110 §10.2.3), else the message."""
    value = response.headers.get("retry-after") if response is not None else None
    if value:
        try:
            seconds = float(value)
        except ValueError:
            try:
                date = parsedate_to_datetime(value)
                seconds = date.timestamp() - time.time()
            except (TypeError, ValueError, IndexError, OverflowError):
                seconds = math.nan
        if math.isfinite(seconds):
            return max(seconds, 0.0)
    match = _TRY_AGAIN.search(message)
    if match:
        amount = float(match.group(1))
        return amount / 1000 if match.group(2).lower() == "ms" else amount
    return None


def snippet(data: bytes, secrets: tuple) -> str:
    """The start of a body that is not an error object, whitespace folded, secrets scrubbed."""
    for secret, hidden in secrets:  # in the bytes, before a cut could leave a piece behind
        data = data.replace(secret.encode(), hidden.encode())
    text = " ".join(data[: 4 * MESSAGE_CHARS].decode("utf-8", "replace").split())
    return trim(text) or "an empty body"


def scrub(text: str, secrets: tuple) -> str:
    """``text`` with each (secret, stand-in) pair replaced, the API key as "[api key]".
    Always before trimming, so a cut can never leave part of a secret behind."""
    for secret, hidden in secrets:
        text = text.replace(secret, hidden)
    return text


def trim(text: str) -> str:
    """An upstream's words as an error repeats them: at most ``MESSAGE_CHARS``, cut after a
    sentence or a word."""
    return clip(text, MESSAGE_CHARS)
