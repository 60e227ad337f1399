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
gives ``per_panel`` verdicts from the owed queue, oldest first or by value
(``explore.verdict_values``), until the first suggestion or until ``budget`` verdicts are spent
(``equal_budget`` among equal models). Verdicts feed the next panel's states at once.

The decision, checked after each verdict, is ``stopping.swap``: the shape of ``suggest.py``'s
rule, on useful rates rather than Bradley–Terry ratings since a simulated person judges single
answers, and with bounds valid under repeated looks where ``suggest.py`` keeps a fixed level. A candidate is
suggested instead of the member with the lowest high bound when its low bound is above that
bound, the bounds holding at every look at once over all the models compared. ``right`` means
the better candidate is suggested instead of the truly weakest member; a trial ends at its first
suggestion, right or not.

Figures per policy: ``verdicts_to_decision``, the median verdicts given until the right
suggestion, a trial that never gets there counting as the whole budget (``>budget`` when the
median trial is one of those: only a bound is known); ``regret``, the median useful answers lost
until the trial ends against seating the five truly best models every time (a panel's expected
useful answers, summed), the cost of learning; ``bound_broken``, trials in which any candidate
waited more than ``explore.bound`` panels between explorer seats; ``false_swap``, the share of
equal-scenario trials with any suggestion. ``ratio`` divides the last policy's median by the
first's, or bounds it when the first's is censored.
"""

from __future__ import annotations

import random
import statistics
from collections import deque
from dataclasses import dataclass
from hashlib import blake2b

from panelist.metrics.ledger.index import ModelState
from panelist.metrics.panel import explore, stopping
from panelist.metrics.panel.seating import seat_panel
from panelist.metrics.roster.collection import Collection
from panelist.metrics.roster.roster import Model, RosterView

MEMBERS = {"m1": 0.65, "m2": 0.60, "m3": 0.55}
WEAKEST = "m3"
SEATS = 5  # members plus explorer seats: the best possible panel seats the five best models
# (policy, verdict order) pairs compared, the first being today's default
POLICIES = (("staleness", "oldest"), ("thompson", "oldest"), ("thompson", "value"))
BUDGET = 20_000  # verdicts a trial may give (the default of both commands)
# verdicts an equal-models trial may give: the rule's guarantee holds at any length, and these
# trials, which rarely stop early, would otherwise take most of the run's time
EQUAL_BUDGET = 3_000


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


class Decision:
    """``stopping.swap`` kept up to date one verdict at a time: only the judged model's bound
    is worked out again (members' high bounds, candidates' low ones, each kept only once the
    model has a verdict), the same rule without its square roots for every model."""

    def __init__(self, counts: dict, members, family: int):
        self.counts, self.members, self.family = counts, members, family
        self.highs: dict[str, tuple[float, str]] = {}
        self.lows: dict[str, tuple[float, str]] = {}

    def judged(self, alias: str) -> tuple[str, str] | None:
        useful, not_useful = self.counts[alias]
        low, high = stopping.rate_bounds(useful, not_useful, self.family)
        if alias in self.members:
            self.highs[alias] = (high, alias)
        else:
            self.lows[alias] = (low, alias)
        if not self.highs or not self.lows:
            return None
        weak, top = min(self.highs.values()), max(self.lows.values())
        return (top[1], weak[1]) if top[0] > weak[0] else None


def run_trial(
    seed: int,
    policy: str,
    order: str,
    *,
    candidates: int = 20,
    edge: float = 0.15,
    equal: bool = False,
    budget: int = BUDGET,
    per_panel: int = 2,
) -> Trial:
    """One history: panels seated and verdicts given until the first suggestion (right or
    not) or until ``budget`` verdicts are spent."""
    truth = rates(seed, candidates, edge, equal)
    models = {a: Model(alias=a, endpoint="sim", served=a, family=a, context=100_000) for a in truth}
    roster = RosterView(models=models)
    members = tuple(MEMBERS)
    collection = Collection(name="replay", members=members, explorer_policy=policy)
    explorers = SEATS - len(members)
    limit = explore.bound(candidates, explorers)
    best = sum(sorted(truth.values(), reverse=True)[:SEATS])
    rng = random.Random(seed * 7919 + 1)
    counts = {a: [0, 0] for a in truth}
    decision = Decision(counts, members, len(truth))
    # the ledger's states, kept as the ledger's index keeps them: changed in place as panels
    # are seated and verdicts given
    states = {
        a: ModelState(last_seated=None, useful=0, not_useful=0, cooling_until=0.0, window=None)
        for a in truth
    }
    turn_of: dict[str, int] = {}
    # the owed answers per model, oldest first: (order owed, useful); oldest first over all
    # models is the one queue ``queue`` of (alias, useful), in the order they became owed
    owed: dict[str, deque] = {a: deque() for a in truth}
    queue: deque = deque()
    given = panel = seq = 0
    regret, broken, found = 0.0, False, None
    while given < budget and found is None:
        panel += 1
        seating = seat_panel(
            collection, roster, states, explorers=explorers, estimate=0, now=float(panel), rng=rng
        )
        for state in states.values():
            if state.waited is not None:
                state.waited += 1
        seated = [s.model.alias for s in seating.seats]
        for alias in seated:
            if alias not in members and panel - turn_of.get(alias, 0) > limit:
                broken = True
            turn_of[alias] = panel
            states[alias].last_seated, states[alias].waited = float(panel), 0
            seq += 1
            useful = _uniform(seed, panel, alias) < truth[alias]
            if order == "value":
                owed[alias].append((seq, useful))
            else:
                queue.append((alias, useful))
        regret += best - sum(truth[a] for a in seated)
        for _ in range(min(per_panel, budget - given)):
            if order == "value":
                waiting = [a for a in truth if owed[a]]
                if not waiting:
                    break
                worth = explore.verdict_values(states, members)
                alias = max(waiting, key=lambda a: (worth[a], -owed[a][0][0]))
                useful = owed[alias].popleft()[1]
            elif queue:
                alias, useful = queue.popleft()
            else:
                break
            counts[alias][0 if useful else 1] += 1
            states[alias].useful, states[alias].not_useful = counts[alias]
            given += 1
            found = decision.judged(alias)
            if found is not None:
                break
    # a candidate unseated at the end has waited since its last seat (or since the start)
    for alias in truth:
        if alias not in members and panel + 1 - turn_of.get(alias, 0) > limit:
            broken = True
    decided = found == ("c00", WEAKEST) and not equal
    return Trial(
        verdicts_to_decision=given if decided else budget,
        decided=decided,
        regret=regret,
        bound_broken=broken,
        false_swap=equal and found is not None,
    )


def row(
    policy: str,
    order: str,
    trials: int,
    *,
    seed: int = 1,
    candidates: int = 20,
    edge: float = 0.15,
    budget: int = BUDGET,
    equal_budget: int = EQUAL_BUDGET,
    per_panel: int = 2,
) -> dict:
    """One policy's medians and counts, described in the module's docstring."""
    better = [
        run_trial(
            seed + t,
            policy,
            order,
            candidates=candidates,
            edge=edge,
            budget=budget,
            per_panel=per_panel,
        )
        for t in range(trials)
    ]
    equal = [
        run_trial(
            seed + t,
            policy,
            order,
            candidates=candidates,
            edge=edge,
            equal=True,
            budget=equal_budget,
            per_panel=per_panel,
        )
        for t in range(trials)
    ]
    steps = [t.verdicts_to_decision for t in better]
    return {
        "policy": policy,
        "order": order,
        "verdicts_to_decision": statistics.median(steps),
        # the median trial never decided: only "more than the budget" is known
        "censored": sorted(steps)[trials // 2] >= budget,
        "decided": sum(t.decided for t in better),
        "regret": round(statistics.median(t.regret for t in better), 1),
        "bound_broken": sum(t.bound_broken for t in better + equal),
        "false_swap": round(sum(t.false_swap for t in equal) / len(equal), 3),
        "trials": trials,
        "budget": budget,
        "equal_budget": equal_budget,
    }


def summary(trials: int, **options) -> list[dict]:
    """One ``row`` per policy of ``POLICIES``, in that order."""
    return [row(policy, order, trials, **options) for policy, order in POLICIES]


def line(row: dict) -> str:
    """A row as the one line ``panelist replay`` prints per policy."""
    steps = f">{row['budget']}" if row["censored"] else f"{row['verdicts_to_decision']:g}"
    return (
        f"{row['policy']}+{row['order']}: verdicts_to_decision={steps} "
        f"(right swap in {row['decided']}/{row['trials']}) regret={row['regret']} "
        f"bound_broken={row['bound_broken']}/{2 * row['trials']} "
        f"false_swap={row['false_swap']:.1%}"
    )


def ratio(rows: list[dict]) -> str:
    """thompson+value's median verdicts over staleness+oldest's, the target being at most 1/3;
    a bound when the baseline's median is censored, unknown when thompson+value's is."""
    by = {(r["policy"], r["order"]): r for r in rows}
    first, last = by[POLICIES[0]], by[POLICIES[-1]]
    name = f"{last['policy']}+{last['order']} / {first['policy']}+{first['order']}"
    if last["censored"]:
        return f"ratio {name}: unknown (its median trial never decided within the budget)"
    if first["censored"]:
        bound = last["verdicts_to_decision"] / first["budget"]
        return (
            f"ratio {name}: < {bound:.3f} (the baseline's median trial never decided "
            f"within {first['budget']} verdicts, so only a bound is known)"
        )
    return f"ratio {name}: {last['verdicts_to_decision'] / first['verdicts_to_decision']:.3f}"
