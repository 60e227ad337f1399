"""Answer-time histograms: fixed log-spaced buckets, so a quantile costs the same at any log size.

Bucket 0 holds answers under ``HIST_LO`` seconds; bucket i >= 1 holds
[HIST_LO * 2**((i-1)/HIST_STEPS), HIST_LO * 2**(i/HIST_STEPS)); the last one everything from
HIST_LO * 2**HIST_DOUBLINGS (about 70 minutes) up. Eight buckets per doubling (each 9% wide) put
a quantile, read as its bucket's geometric middle, within 4.4% of the true value: 2.45 s and
2.75 s read apart (four buckets per doubling read both as 2.66 s).

A histogram is dense (a list of ``HIST_BUCKETS`` counts, for the all-time aggregates folded
millions of times) or sparse (``{bucket: count}``, for the windows' many small slots); both read
with the same nearest-rank rule.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from itertools import accumulate

HIST_LO = 0.001
HIST_STEPS = 8
HIST_DOUBLINGS = 22
HIST_BUCKETS = HIST_DOUBLINGS * HIST_STEPS + 2
RESOLUTION = 2 ** (1 / (2 * HIST_STEPS)) - 1  # the most a quantile reads off: 4.4%


def hist_bucket(seconds: float) -> int:
    """The answer-time histogram bucket of ``seconds`` (see the module docstring)."""
    if seconds < HIST_LO:
        return 0
    return min(HIST_BUCKETS - 1, 1 + int(math.log2(seconds / HIST_LO) * HIST_STEPS))


def _bucket_value(i: int) -> float:
    """What a quantile falling in bucket ``i`` reads as: its geometric middle (its edge at the
    open ends), to the millisecond."""
    if i == 0:
        return HIST_LO
    if i == HIST_BUCKETS - 1:
        return round(HIST_LO * 2**HIST_DOUBLINGS, 3)
    return round(HIST_LO * 2 ** ((i - 0.5) / HIST_STEPS), 3)


BUCKET_VALUES = tuple(_bucket_value(i) for i in range(HIST_BUCKETS))


def hist_quantiles(hist: list[int] | None, *qs: float) -> list[float | None]:
    """The ``qs`` quantiles (0 < q <= 1) of a dense histogram, in seconds; None for an empty
    one."""
    cum = list(accumulate(hist)) if hist else [0]
    n = cum[-1]
    if n <= 0:
        return [None for _ in qs]
    # the nearest-rank quantile: the bucket holding the ceil(q * n)-th answer
    return [BUCKET_VALUES[bisect_left(cum, max(1, math.ceil(q * n)))] for q in qs]


def sparse_quantiles(hist: dict[int, int], *qs: float) -> list[float | None]:
    """The same for a sparse histogram ``{bucket: count}``."""
    buckets = sorted(b for b, n in hist.items() if n > 0)
    cum = list(accumulate(hist[b] for b in buckets))
    if not cum:
        return [None for _ in qs]
    return [BUCKET_VALUES[buckets[bisect_left(cum, max(1, math.ceil(q * cum[-1])))]] for q in qs]
