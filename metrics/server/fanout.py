"""What a request that fans out to many upstream calls may cost, judged once its calls are
counted and before anything is named or asked: a race over a gateway key (``POST /bench/race``
and ``/bench/race/{race}/again``: ``admit``), and a race or a suite run the dashboard starts
(``/api/races``, ``/api/suite/run``, ``/api/onboarding``: ``within_cap``, the signed-in
person having no key).

Invariants, in the order a request meets them:

1. A key made with ``--no-races`` is refused (403 ``races_not_allowed``).
2. A request that could make more upstream calls, retries included (``at_most``), than the
   server's cap (``PANELIST_MAX_REQUEST_CALLS``) is refused (400 ``too_many_calls``), naming
   the count and the cap.
3. A key with a requests-a-minute limit pays for the calls the request plans (``planned``), not
   for the one HTTP request: the guard counted the request itself, this counts the rest at once,
   all or none. A request that plans more calls than the key may make in a minute can never fit
   and is refused (403 ``over_key_limit``); one that does not fit yet gets 429 with Retry-After.
   A refused request is not counted beyond the HTTP request itself.
"""

from __future__ import annotations

from panelist.metrics.errors import BadRequest, Forbidden, TooManyRequests
from panelist.metrics.server.ratelimit import RateCounter


FEWER = {
    "race": "race fewer candidates, inputs or runs",
    "suite run": "score fewer models or tasks, or fewer epochs",
    "onboarding": "onboard fewer models at once",
}
PARAM = {"race": "runs", "suite run": "models", "onboarding": "aliases"}


def within_cap(limits, calls, what: str = "race") -> None:
    """400 ``too_many_calls`` when ``calls`` could pass the server's cap."""
    cap = limits.max_request_calls
    if calls.at_most > cap:
        raise BadRequest(
            f"this {what} could make up to {calls.at_most:,} upstream calls "
            f"({calls.planned:,} if every call answers at once), over the {cap:,} "
            f"one request may make (PANELIST_MAX_REQUEST_CALLS); {FEWER[what]}",
            code="too_many_calls",
            param=PARAM[what],
        )


def admit(h, calls, what: str = "race") -> None:
    """Let the request of handler ``h`` make ``calls`` (``planned`` and ``at_most``), or raise
    the refusal that says why."""
    caller = h.caller
    if not getattr(caller, "races", True):
        raise Forbidden(
            f"key '{caller.name}' may not start a {what}: it was made with "
            "--no-races; use another key",
            code="races_not_allowed",
        )
    within_cap(h.server.parts.limits, calls, what)
    rpm = getattr(caller, "rpm", None)
    rates = h.server.guard.rates
    if not getattr(caller, "keyed", False) or rpm is None or rates is None:
        return
    if calls.planned > rpm:
        raise Forbidden(
            f"this {what} makes {calls.planned:,} upstream calls, each counted "
            f"against key '{caller.name}', which may make {rpm:,} a minute; race "
            "fewer candidates, inputs or runs, or use a key with a higher --rpm",
            code="over_key_limit",
            param="runs",
        )
    extra = calls.planned - 1  # the guard counted the HTTP request itself
    if extra > 0:
        wait = rates.admit(caller.name, rpm, cost=extra)
        if wait is not None:
            after = RateCounter.retry_after(wait)
            raise TooManyRequests(
                f"this {what} makes {calls.planned:,} upstream calls, more "
                f"than key '{caller.name}' has left of its {rpm:,} a minute; "
                f"retry in {after} s",
                code="rate_limit_exceeded",
                headers={"Retry-After": after},
            )
