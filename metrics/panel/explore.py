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
- The staleness bound is a hard floor. With K candidates and E explorer seats, no candidate may
  wait more than ``bound(K, E)`` = ⌊2(K−1)/E⌋ + 1 panels of the shape from one seat to the
  next, the rotation's own bound. Each candidate's deadline is the panel by which it must sit;
  sorted by deadline, the k-th can wait ``slack`` more panels, in which E × slack seats go to
  those before it. The fewest that must sit now for every other to still make its deadline
  (``forced``) are *due* and sit first, earliest deadline first; the draws fill the seats left.
  A model never seated for the shape is due at once, as under staleness (a real deadline goes
  first at a tie; the bound counts from a model's first seat). Seating the forced keeps every
  deadline reachable: the rest lose one panel of slack and one fewer seat is needed before
  each, and those seated come back with ``bound − 1`` panels of slack, which K ≤ E·bound
  covers. Each candidate needs a seat only once per bound, which leaves about E − K/bound seats
  a panel to the draws (about half of them at K = 20, E = 2). The same conditions as the rotation's
  bound apply: the candidate is eligible, has no seat in flight, its endpoint has room and the
  families are distinct (``seating.py``).

Invariants: the order depends only on the states, the members' states and the draws, so a seeded
``random.Random`` seats the same panels every run; a busy candidate (a seat in flight) comes after
every idle one under both policies.
"""

from __future__ import annotations

import math
import random

STALENESS, THOMPSON = "staleness", "thompson"


def bound(candidates: int, explorers: int) -> int:
    """The most panels from one explorer seat to the next, under either policy: the staleness
    rotation's ⌊2(K−1)/E⌋ + 1 (``seating.py``)."""
    return 2 * (max(candidates, 1) - 1) // max(explorers, 1) + 1


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


def forced(slacks: list[int], explorers: int) -> int:
    """How many of the candidates, sorted by ``slacks`` (panels each may still wait, fewest
    first), must sit now so that every other one can still sit in time, ``explorers`` a panel:
    the k-th can wait at most ``slack`` panels, by which time ``explorers × slack`` seats have
    gone to those before it, so ``k − f ≤ explorers × slack`` for every k."""
    need = 0
    for k, slack in enumerate(slacks, 1):
        need = max(need, k - explorers * max(slack, 0))
    return need


def thompson_order(
    candidates: list,
    states: dict,
    members: list[tuple[str, object]],
    explorers: int,
    busy,
    rng: random.Random,
    now: float,
):
    """The candidates (``Model``s) in the order they take explorer seats, and ``why(alias)``
    for the ones seated (worded only when asked: a long roster seats few). ``members``:
    ``(seat label, state)`` of each seated member; ``busy``: aliases with a seat in flight."""
    limit = bound(len(candidates), explorers)
    idle: list = []  # the candidates with no seat in flight, then those with one
    waiting: list = []
    for model in candidates:
        (waiting if model.alias in busy else idle).append(model)

    def slack(model) -> int:
        t = turns(states.get(model.alias))
        return 0 if t is None else limit - t  # never seated: due now, as under staleness

    # the earliest deadlines first; at a tie a model with a real deadline before one never seated
    idle.sort(key=lambda m: (slack(m), turns(states.get(m.alias)) is None, m.alias))
    due = idle[: forced([slack(m) for m in idle], explorers)]
    drawn = {}
    for model in idle[len(due) :] + waiting:  # in a fixed order: same seed, same draws
        drawn[model.alias] = rng.betavariate(*posterior(states.get(model.alias)))
    rest = sorted(idle[len(due) :], key=lambda m: (-drawn[m.alias], m.alias))
    waiting.sort(key=lambda m: (-drawn[m.alias], m.alias))
    target = weakest(members)

    def why(alias: str) -> str:
        state = states.get(alias)
        if alias not in drawn:
            if turns(state) is None:
                return "never seated for this shape"
            return f"due: {stale_why(state, now)}, the most a model may wait is {limit}"
        if target is None:
            return f"drawn rate {drawn[alias]:.2f} (no member sat to compare)"
        return f"could beat {target[0]} (p={p_beats(state, target[1]):.2f})"

    return due + rest + waiting, why


def _mean(state) -> float:
    return _mean_var(*posterior(state))[0]


def _summary(state) -> tuple[float, float, float]:
    """``(mean, variance, narrowing)`` of a model's posterior, the narrowing being how much one
    more verdict is expected to shrink its sd."""
    a, b = posterior(state)
    n = a + b
    mean = a / n
    sd = math.sqrt(a * b / (n * n * (n + 1)))
    m = n + 1
    after = mean * math.sqrt((a + 1) * b / (m * m * (m + 1))) + (1 - mean) * math.sqrt(
        a * (b + 1) / (m * m * (m + 1))
    )
    return mean, sd * sd, sd - after


def _beats(a: tuple, b: tuple) -> float:
    """``p_beats`` from each posterior's ``(mean, variance)``."""
    return 0.5 * (1.0 + math.erf((a[0] - b[0]) / math.sqrt(2.0 * (a[1] + b[1]))))


def pending(states: dict, members) -> tuple[str, str] | None:
    """``(candidate, member)`` of the swap a verdict could bring closer: the member with the
    lowest posterior mean (the one a swap would replace) and the candidate with the highest
    (the nearest to replacing it); None without both. Ties go to the first alias."""
    seated = [a for a in members if a in states]
    others = [a for a in states if a not in members]
    if not seated or not others:
        return None
    weak = min(seated, key=lambda a: (_mean(states[a]), a))
    top = min(others, key=lambda a: (-_mean(states[a]), a))
    return top, weak


def verdict_values(states: dict, members) -> dict[str, float]:
    """How far one more verdict on each model (``states``: alias -> state, members included)
    could bring the collection's pending swap (``pending``) closer, as the chance that model is
    the one the decision hinges on times how much one verdict is expected to narrow its
    posterior:

    - the leading candidate and the weakest member: the chance the candidate beats the member;
    - another candidate: the chance it beats the stronger of those two (it matters only if it
      could take the lead and still win);
    - another member: the chance the leading candidate beats it and it is below the weakest
      (it matters only if it is the one a swap should replace).

    So verdicts go to the two models a swap is decided on, in proportion to how little each is
    known, and to others only while they could still change which two those are. O(models)."""
    # each posterior's (mean, variance, narrowing) in one pass: this runs before every verdict
    # the replay gives, over the whole roster
    known = {alias: _summary(state) for alias, state in states.items()}
    seated = [a for a in members if a in states]
    others = [a for a in states if a not in seated]
    if not seated or not others:
        return {a: 0.0 for a in states}
    weak = min(seated, key=lambda a: (known[a][0], a))
    top = min(others, key=lambda a: (-known[a][0], a))
    lead, low = known[top], known[weak]
    hinge = _beats(lead, low)
    rival = lead if lead[0] >= low[0] else low
    out = {}
    for alias, mvn in known.items():
        if alias == top or alias == weak:
            chance = hinge
        elif alias in seated:
            chance = _beats(lead, mvn) * _beats(low, mvn)
        else:
            chance = _beats(mvn, rival)
        out[alias] = chance * mvn[2]
    return out
