"""The seats core: the one fan-out. Every caller that asks models (the gateway's panels, the
decider, races, the suite, probes, the endpoint Test) hands it ``SeatCall``s and ``SeatJob``s and
gets ``SeatResult``s and ``JobResult``s back; the rules it keeps are in ``core``'s docstring.

    calls     what the core is given and hands back, and the small rules both the engine and a
              set apply to them (a failure becomes a result, a call's own deadline, logging)
    core      ``Seats``: one call's attempts (admission, retries, output caps), ``start``/``run``
    seatset   ``SeatSet``: a set in flight, run on the core's threads or polled by its caller's
              thread (``Seats.start(poll=True)``)
    record    the one line shape every model call is written in (``line``, ``read``, ``CallLog``)

Only the names below are the package's surface; the modules' other public names (``Hooks``,
``SentCall``, ``Seats.send`` …) are how its modules work together and may change.
"""

from panelist.metrics.seats.calls import (
    ANSWERED,
    GRACE,
    STATUSES,
    Admission,
    CallFailed,
    CallSink,
    JobResult,
    Result,
    SeatCall,
    SeatJob,
    SeatResult,
    Unit,
)
from panelist.metrics.seats.core import Seats, clamp
from panelist.metrics.seats.seatset import SeatSet

__all__ = [
    "ANSWERED",
    "GRACE",
    "STATUSES",
    "Admission",
    "CallFailed",
    "CallSink",
    "JobResult",
    "Result",
    "SeatCall",
    "SeatJob",
    "SeatResult",
    "SeatSet",
    "Seats",
    "Unit",
    "clamp",
]
