"""Looking for bytes that are due at once without falling asleep first.

A thread that sleeps in ``poll`` is woken late when its bytes come: the system takes tens of
microseconds to run it again (a virtual machine more), which is as long as an upstream on the
same host takes to answer. So where bytes are due within moments (the answers to calls just sent,
a kept connection's next request right after its reply), a thread first looks for them without
sleeping, for at most ``PANELIST_SPIN_US`` microseconds (default 200; 0 turns it off), and only
then sleeps.

Invariants:

* a thread looks only while nothing else of its process is being worked on (``working``
  counts what is): under load a look would only take turns from threads with work to do;
* one thread of a process looks at a time (the others sleep at once), so looking costs the
  process at most one thread's share of a core while it lasts;
* each look is a ``poll`` that gives the GIL back, so the other threads run meanwhile;
* a look never outlasts the wait its caller allows.
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager

from panelist.metrics.errors import ConfigInvalid

DEFAULT_US = 200
MAX_US = 10_000   # past this a look costs more than any wake-up it saves
_TOKEN = threading.Lock()   # held by the one thread looking now
_limit = [DEFAULT_US / 1e6]   # seconds a look may last
_busy = [0]   # requests this process is working on now (``working``)
_count = threading.Lock()


def configure(env) -> None:
    """Take ``PANELIST_SPIN_US`` from ``env`` (a mapping); unset or empty: the default. A bad
    value raises ``ConfigInvalid`` and changes nothing."""
    raw = env.get("PANELIST_SPIN_US")
    if raw is None or raw == "":
        _limit[0] = DEFAULT_US / 1e6
        return
    try:
        us = int(raw)
    except ValueError:
        us = -1
    if not 0 <= us <= MAX_US:
        raise ConfigInvalid(f"PANELIST_SPIN_US must be a whole number of microseconds from 0 to "
                            f"{MAX_US} (not {raw!r}); 0 turns looking without sleeping off")
    _limit[0] = us / 1e6


def limit() -> float:
    """Seconds a look may last now (0: off)."""
    return _limit[0]


@contextmanager
def working():
    """Count a request as being worked on while the block runs."""
    with _count:
        _busy[0] += 1
    try:
        yield
    finally:
        with _count:
            _busy[0] -= 1


def soon(poller, wait: float, *, mine: int = 0) -> list:
    """``poller.poll(0)`` again and again for at most ``limit()`` seconds (and at most
    ``wait``): what became ready, or ``[]`` when nothing did, looking is off, another thread is
    looking, or more requests than the caller's own ``mine`` are being worked on."""
    most = min(_limit[0], wait)
    if most <= 0 or _busy[0] > mine or not _TOKEN.acquire(blocking=False):
        return []
    try:
        until = time.perf_counter() + most
        while time.perf_counter() < until:
            ready = poller.poll(0)
            if ready:
                return ready
        return []
    finally:
        _TOKEN.release()
