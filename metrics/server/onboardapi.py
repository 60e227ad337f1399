"""The dashboard's onboarding queue: its entries and who works it, and enqueueing models for
the server's worker to take through register, probe, a quick suite run and ready.

Invariants (beside ``metrics.server.api``'s): the calls an enqueue will make are stated, and
judged against the server's cap, before anything is queued; the reply is 202 (``Accepted``).
"""

from __future__ import annotations

from typing import Callable

from panelist.metrics.server import fanout
from panelist.metrics.server.api import NAME, Accepted, ApiRequest, _limit
from panelist.metrics.server.bodies import Body, Strings, Text, takes
from panelist.metrics.upkeep.onboarding_queue import calls_of
from panelist.metrics.upkeep.suitejob import SuiteCalls


def list_onboarding(req: ApiRequest) -> dict:
    """The onboarding queue, newest first, and who works it."""
    queue = req.parts.onboarding.worker.queue
    entries = queue.entries()
    return {"data": entries[::-1][: _limit(req)], "worker": queue.holder()}


@takes(
    Body(
        aliases=Strings(
            1000,
            NAME,
            required=True,
            hint="the models to onboard: roster aliases, or served ids from GET /api/discover",
        ),
        endpoint=Text(NAME, nonempty=True, hint="see GET /api/endpoints"),
    )
)
def post_onboarding(req: ApiRequest) -> dict:
    """Enqueue models for onboarding, as ``panelist model onboard`` does; the server's worker
    takes them through register, probe, a quick suite run and ready."""
    body = req.body
    # said, and judged against the server's cap, before anything is queued
    calls = SuiteCalls(*calls_of(len(body["aliases"])))
    fanout.within_cap(req.parts.limits, calls, "onboarding")
    entries = req.parts.onboarding.worker.queue.enqueue(
        req.panels.upstream, body["aliases"], body.get("endpoint")
    )
    req.parts.onboarding.wake()
    return Accepted({"enqueued": entries, "calls": calls.public()})


ROUTES: list[tuple[str, dict[str, Callable[[ApiRequest], object]]]] = [
    ("/api/onboarding", {"GET": list_onboarding, "POST": post_onboarding}),
]
