"""Rating intervals from the units that were sampled: a panel's pairs are counted together
(its pattern), the pattern moves when a verdict is replaced and survives a restart, and the
interval of clustered evidence is wider than that of the same pairs counted as independent."""

import json
import math
import random

from panelist.metrics.ledger.index import Index
from panelist.metrics.ledger.ledger import Ledger
from panelist.metrics.ledger.pairs import Pairs, pairs_of
from panelist.metrics.ledger.pairsfile import PairsView
from panelist.metrics.ledger.ratings import rate


def verdict(panel, seat, alias, useful, shape="general"):
    return {
        "kind": "verdict",
        "call": f"{panel}.s{seat}",
        "panel": panel,
        "alias": alias,
        "shape": shape,
        "useful": useful,
    }


def fold(panels: list[list[tuple[str, bool]]]) -> Index:
    """An index that folded ``[(alias, useful), ...]`` per panel, one verdict line a seat."""
    ix = Index()
    offset = 0
    for p, seats in enumerate(panels):
        for s, (alias, useful) in enumerate(seats):
            offset += 100
            ix.fold(offset, verdict(f"p{p}", s, alias, useful))
    return ix


def summed(patterns: dict) -> dict:
    return pairs_of(patterns)


def test_a_panel_s_pairs_are_one_pattern_and_a_replaced_verdict_moves_it():
    ix = fold(
        [
            [("x", True), ("a", False), ("b", False), ("c", False)],
            [("x", True), ("a", False), ("b", False), ("c", False)],
            [("a", True), ("b", False)],
        ]
    )
    three = (("x", "a"), ("x", "b"), ("x", "c"))
    assert ix.pairs.patterns_of("general") == {three: 2, (("a", "b"),): 1}
    assert summed(ix.pairs.patterns_of("general")) == ix.pairs.of("general")
    # b's answer on p1 is judged useful after all: p1 leaves the three-pair pattern
    ix.fold(10_000, verdict("p1", 2, "b", True))
    moved = (("b", "a"), ("b", "c"), ("x", "a"), ("x", "c"))
    assert ix.pairs.patterns_of("general") == {three: 1, moved: 1, (("a", "b"),): 1}
    # and back: the same pattern is counted twice again, the moved one is gone
    ix.fold(10_100, verdict("p1", 2, "b", False))
    assert ix.pairs.patterns_of("general") == {three: 2, (("a", "b"),): 1}
    # a panel judged all alike makes no pattern; once it separates two models, it does
    ix.fold(10_200, verdict("p9", 0, "a", True))
    ix.fold(10_300, verdict("p9", 1, "b", True))
    assert ix.pairs.patterns_of("general") == {three: 2, (("a", "b"),): 1}
    ix.fold(10_400, verdict("p9", 1, "b", False))
    assert ix.pairs.patterns_of("general") == {three: 2, (("a", "b"),): 2}
    assert summed(ix.pairs.patterns_of("general")) == ix.pairs.of("general")


def test_a_panel_that_left_the_kept_window_keeps_its_pattern_as_its_pairs_do():
    pairs = Pairs(kept=2)
    for p in ("p1", "p2", "p3"):
        pairs.fold(p, f"{p}.a", "a", "general", True)
        pairs.fold(p, f"{p}.b", "b", "general", False)
    assert "p1" not in pairs.panels
    # a late verdict on p1 starts a new entry: it changes neither p1's old pairs nor pattern
    pairs.fold("p1", "p1.a", "a", "general", False)
    assert pairs.patterns_of("general") == {(("a", "b"),): 3}
    assert summed(pairs.patterns_of("general")) == pairs.of("general") == {("a", "b"): 3}


def four_seat_panels() -> list[list[tuple[str, bool]]]:
    """100 four-seat panels, one answer useful on each: 300 pairs, three per panel."""
    winners = ["a"] * 40 + ["b"] * 25 + ["c"] * 20 + ["d"] * 15
    return [[(m, m == w) for m in "abcd"] for w in winners]


def test_clustered_evidence_gets_a_wider_interval_than_the_same_pairs_independent():
    clustered = fold(four_seat_panels())
    # the very same pair counts, each from a two-seat panel of its own
    apart = fold(
        [
            [(w, True), (l, False)]
            for (w, l), n in clustered.pairs.of("general").items()
            for _ in range(n)
        ]
    )
    assert apart.pairs.of("general") == clustered.pairs.of("general")
    assert sum(clustered.pairs.patterns_of("general").values()) == 100
    assert sum(apart.pairs.patterns_of("general").values()) == 300
    wide = rate("general", {"verdicts": clustered.pairs.patterns_of("general")})
    narrow = rate("general", {"verdicts": apart.pairs.patterns_of("general")})
    assert [r.alias for r in wide.models] == [r.alias for r in narrow.models] == list("abcd")
    for w, n in zip(wide.models, narrow.models):
        assert w.theta == n.theta and w.wins == n.wins  # the same fit
        assert w.se > 1.15 * n.se, (w, n)
        assert w.bounds()[0] < n.bounds()[0] and w.bounds()[1] > n.bounds()[1]
        # every panel seats every model; apart, each of a model's pairs is its own unit
        assert (w.clusters, n.clusters) == (100, n.wins + n.losses)
    assert wide.public()["clusters"] == {"verdicts": 100}
    assert narrow.public()["clusters"] == {"verdicts": 300}
    assert wide.public()["models"][0]["clusters"] == 100


def test_independent_pairs_keep_about_the_model_based_interval():
    rng = random.Random(5)
    strength = {"a": 0.8, "b": 0.3, "c": 0.0, "d": -0.6}
    panels = []
    for _ in range(600):
        seats = rng.sample(sorted(strength), 2)
        panels.append([(m, rng.random() < 1 / (1 + math.exp(-strength[m]))) for m in seats])
    ix = fold(panels)
    robust = rate("general", {"verdicts": ix.pairs.patterns_of("general")})
    counts = rate("general", {"verdicts": ix.pairs.of("general")})  # pairs as units
    for r, c in zip(robust.models, counts.models):
        assert c.se <= r.se < 1.12 * c.se, (r, c)


def test_the_patterns_survive_a_restart_and_an_older_snapshot_is_replayed(tmp_path):
    runs = tmp_path / "gateway"
    with Ledger(runs) as ledger:
        for seats in four_seat_panels()[:30] + [[("a", True), ("b", False)]] * 3:
            panel = ledger.new_panel()
            for i, (alias, useful) in enumerate(seats):
                call = f"{panel}.member{i + 1}"
                ledger.record_seat(
                    {
                        "call": call,
                        "panel": panel,
                        "alias": alias,
                        "shape": "general",
                        "status": "ok",
                        "key": "local",
                    }
                )
                ledger.record_verdict(call, useful=useful)
        # a replaced verdict: the first panel's b is useful after all
        ledger.record_verdict(f"{panel.rsplit('-', 1)[0]}-1.member2", useful=True)
        want = ledger.patterns("general")
    assert sum(want.values()) == 33 and len(want) == 3
    reopened = Ledger(runs)
    try:
        assert reopened.from_snapshot and reopened.replayed == 0
        assert reopened.patterns("general") == want
    finally:
        reopened.close()
    assert PairsView(runs).patterns("general") == want
    # files as the version before patterns wrote them: pairs, no patterns
    for name, older in (("index.json", 6), ("pairs.json", 1)):
        path = runs / name
        data = json.loads(path.read_text())
        data["pairs"].pop("patterns")
        data["v"] = older
        path.write_text(json.dumps(data))
    assert PairsView(runs).patterns("general") == want  # the verdicts folded again
    again = Ledger(runs)
    try:
        assert not again.from_snapshot  # replayed, not converted
        assert again.patterns("general") == want
    finally:
        again.close()
    assert json.loads((runs / "pairs.json").read_text())["pairs"]["patterns"]


def coverage(trials: int, as_pairs: bool) -> float:
    """How often the 95% interval holds the true strength, read against the average player
    the prior anchors (the fit's strengths satisfy sum(tanh(theta / 2)) = 0; so does the
    truth, shifted), on four-seat panels with prompts of varying difficulty."""
    rng = random.Random(11)
    truth = {"a": -1.0, "b": -0.4, "c": 0.0, "d": 0.5, "e": 1.0, "f": 0.2}
    members, others = ["a", "c", "e"], ["b", "d", "f"]
    held = seen = 0
    for _ in range(trials):
        pairs = Pairs(kept=10_000)
        for p in range(300):
            hard = rng.gauss(0.0, 1.5)
            for s, m in enumerate(members + [rng.choice(others)]):
                useful = rng.random() < 1 / (1 + math.exp(-(truth[m] + hard)))
                pairs.fold(f"p{p}", f"p{p}.{s}", m, "general", useful)
        found = pairs.of("general") if as_pairs else pairs.patterns_of("general")
        fitted = rate("general", {"verdicts": found})
        lo, hi = -5.0, 5.0
        for _ in range(50):
            c = (lo + hi) / 2
            if sum(math.tanh((truth[r.alias] + c) / 2) for r in fitted.models) > 0:
                hi = c
            else:
                lo = c
        for r in fitted.models:
            seen += 1
            held += abs(r.theta - truth[r.alias] - c) <= 1.96 * r.se
    return held / seen


def test_clustered_intervals_hold_the_truth_about_95_percent_of_the_time():
    # seeded and small: the real figures come from scripts/bench_ratings.py
    assert 0.91 <= coverage(120, as_pairs=False) <= 0.99
    assert coverage(120, as_pairs=True) < 0.90  # the pairs counted as independent


def test_a_fit_is_kept_while_the_patterns_stand_and_redone_when_one_moves(folder):
    from panelist.metrics.ledger.ratings import Ratings

    with Ledger(folder.gateway_runs) as ledger:
        calls = []
        for seats in four_seat_panels()[:12]:
            panel = ledger.new_panel()
            for i, (alias, useful) in enumerate(seats):
                call = f"{panel}.member{i + 1}"
                calls.append(call)
                ledger.record_seat(
                    {
                        "call": call,
                        "panel": panel,
                        "alias": alias,
                        "shape": "general",
                        "status": "ok",
                        "key": "local",
                    }
                )
                ledger.record_verdict(call, useful=useful)
        book = Ratings.of_home(folder, ledger)
        first = book.of("general")
        assert book.of("general") is first  # nothing changed: the same fit
        ledger.record_verdict(calls[0], useful=True)  # the same verdict again: no change
        assert book.of("general") is first
        ledger.record_verdict(calls[1], useful=True)  # b too was useful on the first panel
        second = book.of("general")
        assert second is not first and second.of("b").wins == first.of("b").wins + 2
        assert second.public()["clusters"] == {"verdicts": 12, "races": 0}
