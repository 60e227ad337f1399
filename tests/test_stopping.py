"""The stopping rule behind suggested swaps: bounds that hold however often they are looked at,
checked by seeded simulation against the fixed-quantile rule they replace; the replay's
one-verdict-at-a-time form of the rule; and where the value order sends verdicts."""

import random
from statistics import NormalDist

from panelist.metrics.ledger.index import ModelState
from panelist.metrics.panel import explore, replay, stopping


MEMBERS = ("m1", "m2", "m3")


def fixed_quantile_swap(counts: dict, members) -> tuple[str, str] | None:
    """The rule before: each model's Beta posterior mean ± z sd, z the normal quantile
    Bonferroni-corrected for the candidates; valid at a single look."""
    candidates = [a for a in counts if a not in members]
    z = NormalDist().inv_cdf(1 - 0.05 / (2 * len(candidates)))

    def bounds(useful, not_useful):
        a, b = useful + 1.0, not_useful + 1.0
        n = a + b
        mean, sd = a / n, (a * b / (n * n * (n + 1))) ** 0.5
        return mean - z * sd, mean + z * sd

    weak = min(members, key=lambda a: bounds(*counts[a])[1])
    top = max(candidates, key=lambda a: bounds(*counts[a])[0])
    return (top, weak) if bounds(*counts[top])[0] > bounds(*counts[weak])[1] else None


def false_swaps(rule, trials: int = 100, verdicts: int = 600) -> float:
    """The share of seeded histories in which ``rule`` ever suggests a swap: three members and
    one candidate, all useful 60% of the time, judged in turn, the rule checked after every
    verdict (as a reply's suggestion is), so any swap is false."""
    aliases = [*MEMBERS, "c0"]
    swapped = 0
    for seed in range(trials):
        rng = random.Random(seed)
        counts = {a: [0, 0] for a in aliases}
        for v in range(verdicts):
            alias = aliases[v % len(aliases)]
            counts[alias][0 if rng.random() < 0.6 else 1] += 1
            if rule(counts, MEMBERS) is not None:
                swapped += 1
                break
    return swapped / trials


def test_equal_models_watched_after_every_verdict_are_rarely_swapped():
    assert false_swaps(stopping.swap) <= 0.05


def test_the_fixed_quantile_rule_fails_the_same_check():
    # checked that often, a fixed quantile finds a chance separation sooner or later (and the
    # weakest of three members is picked after the fact): the check above would catch it
    assert false_swaps(fixed_quantile_swap) > 0.05


def test_a_truly_better_candidate_is_still_found():
    rng = random.Random(7)
    counts = {"m": [0, 0], "c0": [0, 0], "c1": [0, 0]}
    rate = {"m": 0.5, "c0": 0.8, "c1": 0.5}
    found = None
    for v in range(3000):
        alias = list(counts)[v % 3]
        counts[alias][0 if rng.random() < rate[alias] else 1] += 1
        if (found := stopping.swap(counts, ("m",))) is not None:
            break
    assert found == ("c0", "m"), (found, counts)


def test_bounds_cover_everything_without_evidence_and_are_wider_than_one_look():
    assert stopping.rate_bounds(0, 0, 5) == (0.0, 1.0)
    one_look = NormalDist().inv_cdf(1 - 0.05 / (2 * 5))
    for n in (1, 10, 100, 1000, 100_000):
        assert stopping.anytime_z(n, 5) > one_look
    low, high = stopping.rate_bounds(300, 100, 5)
    assert 0 < low < 0.75 < high < 1
    narrower = stopping.rate_bounds(3000, 1000, 5)
    assert low < narrower[0] and narrower[1] < high
    # more compared models, wider bounds
    assert stopping.radius(400, 20) > stopping.radius(400, 5)


def test_the_replay_decides_by_the_same_rule_one_verdict_at_a_time():
    rng = random.Random(3)
    members = ("m1", "m2")
    counts = {a: [0, 0] for a in ("m1", "m2", "c0", "c1", "c2")}
    decision = replay.Decision(counts, members, len(counts))
    rate = {"m1": 0.6, "m2": 0.4, "c0": 0.7, "c1": 0.5, "c2": 0.3}
    outcomes = []
    for _ in range(1500):
        alias = rng.choice(list(counts))
        counts[alias][0 if rng.random() < rate[alias] else 1] += 1
        got = decision.judged(alias)
        assert got == stopping.swap(counts, members), counts
        outcomes.append(got)
    assert None in outcomes and ("c0", "m2") in outcomes


def state(useful, not_useful):
    return ModelState(
        last_seated=0.0, useful=useful, not_useful=not_useful, cooling_until=0.0, window=None
    )


def test_verdicts_are_worth_most_on_the_two_models_a_swap_hinges_on():
    states = {
        "m1": state(70, 30),
        "m2": state(55, 45),  # m2 is the weakest member
        "lead": state(14, 6),  # likely better than m2
        "hopeless": state(6, 14),  # cannot overtake the lead
        "fresh": state(0, 0),
    }  # nothing known yet
    worth = explore.verdict_values(states, ("m1", "m2"))
    assert explore.pending(states, ("m1", "m2")) == ("lead", "m2")
    assert worth["lead"] > worth["hopeless"] and worth["m2"] > worth["m1"]
    # a verdict that cannot change which two the swap is decided on is worth next to nothing
    assert worth["hopeless"] < worth["lead"] / 20 and worth["m1"] < worth["m2"] / 20
    # an unknown candidate may still take the lead: worth asking about
    assert worth["fresh"] > worth["hopeless"]


def test_the_ratio_is_a_bound_when_the_baseline_never_decided():
    def row(policy, order, median, censored):
        return {
            "policy": policy,
            "order": order,
            "verdicts_to_decision": median,
            "censored": censored,
            "budget": 20000,
        }

    base = row("staleness", "oldest", 12000, False)
    fast = row("thompson", "value", 3000, False)
    assert replay.ratio([base, fast]) == "ratio thompson+value / staleness+oldest: 0.250"
    censored = row("staleness", "oldest", 20000, True)
    assert replay.ratio([censored, fast]).startswith(
        "ratio thompson+value / staleness+oldest: < 0.150 (the baseline's median trial never"
    )
    assert "unknown" in replay.ratio([censored, row("thompson", "value", 20000, True)])
