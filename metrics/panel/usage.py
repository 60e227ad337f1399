"""What a reply says it used, in OpenAI's ``usage`` shape: the tokens of the answer the caller got
(pick), or of every seat and the merger (all, merged; ``bench.usage_total`` in every mode).

A seat's counts are its upstream's. An upstream may leave them out (a stream that carries no
usage though the gateway asks for it with ``stream_options.include_usage``): an answered seat
without a count is then counted by estimate (what it read: the size estimate of the messages it
was sent, ``prompt.estimate_tokens``; what it wrote: its text and tool-call arguments at four
characters a token, rounded up) and the usage says ``"estimated": true``. A count is never a zero
that stands for "unknown". A seat that failed without a count adds nothing, as before: an upstream
that refused bills no answer. The seat's own record keeps the upstream's counts as they came
(None where it sent none), so the logs never hold a guess.
"""

from __future__ import annotations

import math
from typing import Callable

from panelist.metrics.seats import SeatResult

FIELDS = (
    ("prompt_tokens", "prompt"),
    ("completion_tokens", "completion"),
    ("total_tokens", "total"),
)


def written(r: SeatResult) -> int:
    """The tokens a seat's answer holds, estimated: text and tool-call arguments, chars / 4."""
    chars = len(r.answer or "") + sum(
        len(c.get("function", {}).get("name") or "")
        + len(c.get("function", {}).get("arguments") or "")
        for c in r.tool_calls or ()
    )
    return math.ceil(chars / 4)


def tokens_of(seats: list[SeatResult], read: Callable[[SeatResult], int] = lambda r: 0) -> dict:
    """The tokens of ``seats`` added up; ``read(seat)``: the estimate of what a seat read, used
    when its upstream sent no count (the usage then says ``estimated``)."""
    usage = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    guessed = False
    for r in seats:
        tokens = r.tokens or {}
        counts = {mine: tokens.get(theirs) for mine, theirs in FIELDS}
        if r.answered and not all(type(v) is int for v in counts.values()):
            known = {k: v for k, v in counts.items() if type(v) is int}
            prompt = known.get("prompt_tokens")
            completion = known.get("completion_tokens")
            if prompt is None:
                prompt = read(r)
            if completion is None:
                completion = written(r)
            guessed = (
                guessed
                or prompt != known.get("prompt_tokens")
                or completion != known.get("completion_tokens")
            )
            counts = {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            }
        for key in usage:
            value = counts[key]
            usage[key] += value if type(value) is int else 0
    if guessed:
        usage["estimated"] = True
    return usage
