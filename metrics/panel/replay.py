"""Replay: how fast each seating policy learns, on a simulated roster whose true useful rates are
known. It backs ``panelist replay`` and ``scripts/bench_learning.py``; nothing here runs in a
gateway.

A trial: three members (true useful rates 0.65, 0.60, 0.55) and ``candidates`` explorer
candidates of distinct families. In the *better* scenario one candidate's rate is the weakest
member's plus ``edge`` and the others are drawn below that member's; in the *equal* scenario
every candidate's rate equals the weakest member's, so any suggestion is a false swap. Each
panel seats the members and the explorers through ``seating.seat_panel`` (the gateway's own
seating, with the policy's order), each seat's answer is useful with its model's true rate (the
same draw for the same panel and model under every policy: the same prompts), and a person then
gives ``per_panel`` verdicts from the owed queue, oldest first or by value, until ``budget``
verdicts are spent. Verdicts feed the next panel's states at once.

The decision, checked after each verdict, is the shape of ``suggest.py``'s rule on useful rates
(not its Bradley–Terry fit): a candidate is suggested instead of the member with the lowest upper
bound when its lower bound is above that bound, the bounds being each Beta posterior's mean ±
z·sd with z Bonferroni-corrected for the candidates judged so far. ``right`` means the better
candidate is suggested instead of the truly weakest member.

Figures per policy (medians over trials): ``verdicts_to_decision``, the verdicts given until the
right suggestion (a trial that never gets there counts as the whole budget, marked ``>``);
``regret``, useful answers lost over the trial's panels against seating the five truly best models
every time (a panel's expected useful answers, summed); ``bound_broken``, trials in which any
candidate waited more than ``explore.bound`` panels between explorer seats; ``false_swap``, the
share of equal-scenario trials with any suggestion.
"""

from __future__ import annotations

import random
from hashlib import blake2b
import statistics
from collections import deque
from dataclasses import dataclass

from panelist.metrics.ledger.index import ModelState
from panelist.metrics.ledger.ratings import z_for
from panelist.metrics.panel import explore
from panelist.metrics.panel.seating import seat_panel
from panelist.metrics.roster.collection import Collection
from panelist.metrics.roster.roster import Model, RosterView

MEMBERS = {"m1": 0.65, "m2": 0.60, "m3": 0.55}
WEAKEST = "m3"
SEATS = 5   # members plus explorer seats: the best possible panel seats the five best models
# (policy, verdict order) pairs compared, the first being today's default
POLICIES = (("staleness", "oldest"), ("thompson", "oldest"), ("thompson", "value"))


@dataclass
class Trial:
    verdicts_to_decision: int
    decided: bool
    regret: float
    bound_broken: bool
    false_swap: bool


def _uniform(seed: int, panel: int, alias: str) -> float:
    """The same draw for the same panel and model under every policy."""
    # a cryptographic hash: a checksum such as crc32 is linear, and its draws for neighbouring
    # panels would be correlated
    digest = blake2b(f"{seed}:{panel}:{alias}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def rates(seed: int, candidates: int, edge: float, equal: bool) -> dict[str, float]:
    rng = random.Random(seed)
    base = MEMBERS[WEAKEST]
    out = dict(MEMBERS)
    for i in range(candidates):
        out[f"c{i:02d}"] = base if equal else round(rng.uniform(base - 0.25, base), 3)
    if not equal:
        out["c00"] = base + edge
    return out


def interval(useful: int, not_useful: int, z: float) -> tuple[float, float]:
    a, b = useful + 1.0, not_useful + 1.0
    n = a + b
    mean, sd = a / n, (a * b / (n * n * (n + 1))) ** 0.5
    return mean - z * sd, mean + z * sd


def suggestion(counts: dict, members: tuple) -> tuple[str, str] | None:
    """``(candidate, member)`` the rule suggests, or None."""
    judged = [a for a, (u, n) in counts.items() if a not in members and u + n]
    rated = [a for a in members if sum(counts[a])]
    if not judged or not rated:
        return None
    z = z_for(len(judged))
    def bounds(alias: str) -> tuple[float, float]:
        useful, not_useful = counts[alias]
        return interval(useful, not_useful, z)
    weak = min(rated, key=lambda a: (bounds(a)[1], a))
    top = max(judged, key=lambda a: (bounds(a)[0], a))
    if bounds(top)[0] > bounds(weak)[1]:
        return top, weak
    return None


def _state(useful: int, not_useful: int, last=None, waited=None) -> ModelState:
    return ModelState(last_seated=last, useful=useful, not_useful=not_useful,
                      cooling_until=0.0, window=None, waited=waited)


def run_trial(seed: int, policy: str, order: str, *, candidates: int = 20, edge: float = 0.15,
              equal: bool = False, budget: int = 2000, per_panel: int = 2) -> Trial:
    truth = rates(seed, candidates, edge, equal)
    models = {a: Model(alias=a, endpoint="sim", served=a, family=a, context=100_000)
              for a in truth}
    roster = RosterView(models=models)
    members = tuple(MEMBERS)
    collection = Collection(name="replay", members=members, explorer_policy=policy)
    explorers = SEATS - len(members)
    limit = explore.bound(candidates, explorers)
    best = sum(sorted(truth.values(), reverse=True)[:SEATS])
    rng = random.Random(seed * 7919 + 1)
    counts = {a: [0, 0] for a in truth}
    last: dict[str, float] = {}
    turn_of: dict[str, int] = {}
    # the owed answers per model, oldest first: (order owed, useful)
    owed: dict[str, deque] = {a: deque() for a in truth}
    given = panel = seq = 0
    regret, broken, at, decided = 0.0, False, None, False
    while given < budget:
        panel += 1
        states = {a: _state(counts[a][0], counts[a][1], last.get(a),
                            None if a not in last else panel - 1 - turn_of[a]) for a in truth}
        seating = seat_panel(collection, roster, states, explorers=explorers, estimate=0,
                             now=float(panel), rng=rng)
        seated = [s.model.alias for s in seating.seats]
        for alias in seated:
            if alias not in collection.members and panel - turn_of.get(alias, 0) > limit:
                broken = True
            last[alias], turn_of[alias] = float(panel), panel
            seq += 1
            owed[alias].append((seq, _uniform(seed, panel, alias) < truth[alias]))
        regret += best - sum(truth[a] for a in seated)
        for _ in range(min(per_panel, budget - given)):
            waiting = [a for a in truth if owed[a]]
            if not waiting:
                break
            if order == "value":
                worth = explore.verdict_values(
                    {a: _state(u, n) for a, (u, n) in counts.items()}, collection.members)
                alias = max(waiting, key=lambda a: (worth[a], -owed[a][0][0]))
            else:
                alias = min(waiting, key=lambda a: owed[a][0][0])
            useful = owed[alias].popleft()[1]
            counts[alias][0 if useful else 1] += 1
            given += 1
            if at is None and (found := suggestion(counts, collection.members)) is not None:
                at = given
                decided = found == ("c00", WEAKEST) and not equal
                if decided:   # the person takes the suggestion: the better model becomes a member
                    collection = Collection(name="replay", members=("m1", "m2", "c00"),
                                            explorer_policy=policy)
    # a candidate unseated at the end has waited since its last seat (or since the start)
    for alias in truth:
        if alias not in collection.members and panel + 1 - turn_of.get(alias, 0) > limit:
            broken = True
    return Trial(verdicts_to_decision=at if decided and at is not None else budget, decided=decided,
                 regret=regret, bound_broken=broken, false_swap=equal and at is not None)


def summary(trials: int, *, seed: int = 1, candidates: int = 20, edge: float = 0.15,
            budget: int = 2000, per_panel: int = 2) -> list[dict]:
    """One row per policy: the medians and counts described in the module's docstring."""
    rows = []
    for policy, order in POLICIES:
        better = [run_trial(seed + t, policy, order, candidates=candidates, edge=edge,
                            budget=budget, per_panel=per_panel) for t in range(trials)]
        equal = [run_trial(seed + t, policy, order, candidates=candidates, edge=edge, equal=True,
                           budget=budget, per_panel=per_panel) for t in range(trials)]
        steps = [t.verdicts_to_decision for t in better]
        median = statistics.median(steps)
        rows.append({"policy": policy, "order": order,
                     "verdicts_to_decision": median,
                     "censored": median >= budget,
                     "decided": sum(t.decided for t in better),
                     "regret": round(statistics.median(t.regret for t in better), 1),
                     "bound_broken": sum(t.bound_broken for t in better + equal),
                     "false_swap": round(sum(t.false_swap for t in equal) / len(equal), 3),
                     "trials": trials})
    return rows


def line(row: dict) -> str:
    """A row as the one line ``panelist replay`` prints per policy."""
    steps = f"{'>' if row['censored'] else ''}{row['verdicts_to_decision']:g}"
    return (f"{row['policy']}+{row['order']}: verdicts_to_decision={steps} "
            f"(right swap in {row['decided']}/{row['trials']}) regret={row['regret']} "
            f"bound_broken={row['bound_broken']}/{2 * row['trials']} "
            f"false_swap={row['false_swap']:.1%}")
