"""The error a panel answers with when none of its answers can be the reply: every seat rate
limited or at its limit (503 with Retry-After, when there will be room), every seat refused
the prompt as too long (the caller's to trim), answers that all broke the request's demand
(a tool called under ``tool_choice: "none"``, no forced tool call, no valid JSON), or no answer
at all (each seat's error shortened, the whole in ``error.seats``).

Invariants: it reads the run and its results and changes neither.
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING

from panelist.metrics.errors import (
    AllSeatsFailed,
    AtLimit,
    ContextTooLong,
    PanelistError,
    PromptTooLong,
    Unavailable,
)
from panelist.metrics.panel import jsonshape, pick
from panelist.metrics.panel.sections import public
from panelist.metrics.plaintext import shorten
from panelist.metrics.seats import SeatResult

if TYPE_CHECKING:
    from panelist.metrics.panel.run import PanelRun

SAID = 240  # characters of each failed seat's error a panel's own error repeats (error.seats: all)


def of(run: "PanelRun", results: list[SeatResult]) -> PanelistError:
    """The error for a panel none of whose answers can be the reply (every seat ended)."""
    seats = [public(r) for r in run.in_seat_order(results)]
    name = run.req.collection.model_id
    # each seat's error shortened with what to do kept whole (``shorten``)
    said = "; ".join(
        f"{pick.label(r)} {r.alias}: {shorten(r.reason or r.status, SAID)}"
        for r in run.in_seat_order(results)
        if not r.answered
    )
    limited = [r for r in results if r.reason.startswith("rate_limit:")]
    full = [r for r in results if isinstance(r.raised, AtLimit)]
    if results and len(limited) + len(full) == len(results):
        # nothing failed but room: the caller is told when there will be some
        waits = [r.raised.retry_after for r in full if isinstance(r.raised, AtLimit)]
        if limited:
            waits.append(_soonest_rest(run, [r.alias for r in limited]))
        wait = max(1, math.ceil(min(waits)))
        what = (
            "rate limited"
            if not full
            else "at its endpoint's limit"
            if not limited
            else "rate limited or at its limit"
        )
        return Unavailable(
            f"every seat of {name} was {what} ({said}); try again in {wait} s "
            "(Retry-After), or ask a collection whose models have room",
            code="all_seats_rate_limited" if not full else "all_seats_at_limit",
            headers={"Retry-After": str(wait)},
            details={"seats": seats},
        )
    if results and all(r.error_kind == ContextTooLong.kind for r in results):
        # every seat said the prompt is too long: the caller's to trim, not a failure of ours
        stated = {r.alias: getattr(r.raised, "window", None) for r in run.in_seat_order(results)}
        return PromptTooLong(
            max(filter(None, stated.values()), default=None),
            run.req.estimate,
            name,
            ", ".join(
                f"{a} (its window: {w} tokens)" if w else f"{a} (said so)"
                for a, w in stated.items()
            ),
        )
    if (
        any(r.answered for r in results)
        and run.demand.tool == "none"
        and not jsonshape.wants_json(run.demand.fmt)
    ):
        return AllSeatsFailed(
            f"every answer of {name} called a tool, though tool_choice "
            f'is "none" ({run.note or "each was a tool call"}); try again, '
            "or leave the tools out",
            seats,
            code="tool_called",
        )
    if any(r.answered for r in results) and run.demand.forced:
        return AllSeatsFailed(
            f"no answer from {name} was {run.demand.wanted()}: "
            f"{run.note or 'no seat called it'}; try again, or ask a collection whose "
            "models call tools (together.capabilities lists tools)",
            seats,
            code="no_tool_call",
        )
    if any(r.answered for r in results):
        return AllSeatsFailed(
            f"no answer from {name} was the JSON the response_format asks for "
            f"({run.note or 'no seat answered with it'}); try again, loosen the schema, or "
            "ask a collection whose models follow JSON schemas",
            seats,
            code="no_valid_json",
        )
    return AllSeatsFailed(
        f"no seat of {name} answered ({said}); try again, or ask another collection; each "
        f"seat's error is in error.seats and GET /bench/panels/{run.panel}",
        seats,
    )


def _soonest_rest(run: "PanelRun", aliases: list[str]) -> int:
    """Seconds until the first of these rate-limited models may be asked again."""
    now = time.time()
    states = run.panels.ledger.states(aliases, run.req.shape, now)
    ends = [st.cooling_until for st in states.values() if st.cooling_until > now]
    soonest = min(ends) - now if ends else run.panels.collections.limits().cooldown
    return max(1, math.ceil(soonest))
