"""Explorer policies: the order in which eligible candidates take a collection's explorer seats,
and the one line that says why each seated explorer sat (``bench.seats[].why``).

``staleness`` (the default) is the rotation of ``seating.claim``: the longest wait, weighted at
most twice by verdicts. ``thompson`` seats the candidates likeliest to beat the member they would
replace, so verdicts land where they can change the collection's decision:

- Each model's useful rate for the shape has a Beta posterior, ``Beta(useful + 1,
  not_useful + 1)``, from the ledger's per-model counts (nothing is read from logs; O(candidates)
  per panel). One draw per candidate from an injectable ``random.Random`` ranks them, highest
  first: a candidate with few verdicts has a wide posterior and is drawn high often enough to be
  tried, one judged often sits as often as it stays likely to win.
- The member it would replace is the seated member with the lowest posterior mean; ``p`` in its
  ``why`` is the chance the candidate's rate is above that member's (normal approximation of the
  two posteriors).
- The staleness bound is a hard floor: a candidate never seated for the shape, or one that has
  waited ``floor_turns(K, E)`` turns, is *due* and sits before any drawn candidate, the longest
  wait first. With K candidates and E explorer seats, a due candidate has at most K − 1 ahead
  of it, each seated at most once before it (a candidate seated later waits less), E a panel; so
  every candidate sits at least once in any ``bound(K, E)`` = 2⌊(K−1)/E⌋ + 1 consecutive panels
  of the shape, no more than the staleness rotation's own bound, whatever the verdicts. The same
  conditions as the rotation's bound apply: the candidate is eligible, has no seat in flight,
  its endpoint has room and the families are distinct (``seating.py``).

Invariants: the order depends only on the states, the members' states and the draws, so a seeded
``random.Random`` seats the same panels every run; a busy candidate (a seat in flight) comes after
every idle one under both policies.
"""

from __future__ import annotations

import math
import random

STALENESS, THOMPSON = "staleness", "thompson"


def floor_turns(candidates: int, explorers: int) -> int:
    """Turns after which a candidate is due under ``thompson`` (see the module's bound)."""
    return (max(candidates, 1) - 1) // max(explorers, 1) + 1


def bound(candidates: int, explorers: int) -> int:
    """The most panels from one explorer seat to the next, under either policy."""
    return 2 * ((max(candidates, 1) - 1) // max(explorers, 1)) + 1


def turns(state) -> int | None:
    """Turns since the last seat, counting that one (1: it sat in the latest), or None if it
    never sat for the shape."""
    if state is None or state.last_seated is None:
        return None
    return (state.waited or 0) + 1


def posterior(state) -> tuple[float, float]:
    """``(alpha, beta)`` of the useful rate's Beta posterior under a uniform prior."""
    if state is None:
        return 1.0, 1.0
    return state.useful + 1.0, state.not_useful + 1.0


def _mean_var(a: float, b: float) -> tuple[float, float]:
    n = a + b
    return a / n, a * b / (n * n * (n + 1))


def p_beats(candidate, member) -> float:
    """The chance the candidate's useful rate is above the member's, both posteriors taken as
    normal (close enough to rank and to print with two decimals)."""
    mc, vc = _mean_var(*posterior(candidate))
    mm, vm = _mean_var(*posterior(member))
    return 0.5 * (1.0 + math.erf((mc - mm) / math.sqrt(2.0 * (vc + vm))))


def weakest(members: list[tuple[str, object]]) -> tuple[str, object] | None:
    """Of ``(label, state)`` pairs, the member with the lowest posterior mean (first wins ties),
    or None when no member sat."""
    best = None
    for label, state in members:
        mean = _mean_var(*posterior(state))[0]
        if best is None or mean < best[0]:
            best = (mean, label, state)
    return None if best is None else (best[1], best[2])


def ago(seconds: float) -> str:
    """A wait as a person reads it: ``40 s``, ``12 min``, ``5 h``, ``3 d``."""
    seconds = max(0.0, seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds // size:.0f} {unit}"
    return f"{seconds:.0f} s"


def stale_why(state, now: float) -> str:
    """``why`` of an explorer the rotation seated."""
    t = turns(state)
    if t is None:
        return "never seated for this shape"
    return f"stale {ago(now - state.last_seated)} ({t} panel{'s' if t != 1 else ''} of this shape)"


def thompson_order(candidates: list, states: dict, members: list[tuple[str, object]],
                   explorers: int, busy, rng: random.Random, now: float):
    """The candidates (``Model``s) in the order they take explorer seats, and ``why(alias)``
    for the ones seated (worded only when asked: a long roster seats few). ``members``:
    ``(seat label, state)`` of each seated member; ``busy``: aliases with a seat in flight."""
    floor = floor_turns(len(candidates), explorers)
    order, drawn = [], {}
    for model in candidates:   # roster order: the draws are the same for the same seed
        state = states.get(model.alias)
        t = turns(state)
        idle = model.alias not in busy
        if t is None or t >= floor:
            order.append(((not idle, 0, -(math.inf if t is None else t), model.alias), model))
            continue
        drawn[model.alias] = sample = rng.betavariate(*posterior(state))
        order.append(((not idle, 1, -sample, model.alias), model))
    # idle before busy; within each, due (longest wait first) before drawn (highest draw first)
    order.sort(key=lambda pair: pair[0])
    target = weakest(members)

    def why(alias: str) -> str:
        state = states.get(alias)
        if alias not in drawn:
            t = turns(state)
            if t is None:
                return "never seated for this shape"
            return f"due: {stale_why(state, now)}, at the floor of {floor}"
        if target is None:
            return f"drawn rate {drawn[alias]:.2f} (no member sat to compare)"
        return f"could beat {target[0]} (p={p_beats(state, target[1]):.2f})"
    return [m for _, m in order], why
