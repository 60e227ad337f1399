"""Wilson intervals, and suggestions to seat a model rated clearly above a member instead of
it: the rule (ratings, corrected for many candidates), the reply's ``bench.suggest`` and
``panelist collection suggest``, which must agree."""

import json
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from panelist.metrics.cli.main import main
from panelist.metrics.roster.collection import Collection
from panelist.metrics.ledger.index import Index
from panelist.metrics.ledger.ledger import Ledger
from panelist.metrics.ledger.ratings import rate
from panelist.metrics.roster.roster import Endpoint, Model, RosterView
from panelist.metrics.stats import wilson
from panelist.metrics.panel.suggest import suggestions


def test_wilson_matches_known_values():
    assert wilson(0, 0) == (0.0, 1.0)
    lo, hi = wilson(50, 100)
    assert round(lo, 4) == 0.4038 and round(hi, 4) == 0.5962
    lo, hi = wilson(20, 20)
    assert round(lo, 4) == 0.8389 and hi == 1.0  # n / (n + z²) at all useful
    assert round(wilson(3, 3)[0], 4) == 0.4385  # "three of three" reads as 44% or more
    a, b = wilson(3, 10), wilson(7, 10)
    assert a[0] == pytest.approx(1 - b[1]) and a[1] == pytest.approx(1 - b[0])


@given(st.integers(0, 400), st.integers(0, 400))
def test_wilson_bounds_hold_the_rate_and_narrow_with_evidence(useful, extra):
    n = useful + extra
    lo, hi = wilson(useful, n)
    assert 0.0 <= lo <= hi <= 1.0
    if n:
        assert lo <= useful / n <= hi
        lo2, hi2 = wilson(useful * 2, n * 2)
        assert hi2 - lo2 <= hi - lo + 1e-12


@pytest.mark.parametrize("useful, n", [(5, 3), (-1, 3), (1.5, 3), (True, 3), (1, "3")])
def test_wilson_refuses_what_is_not_a_count(useful, n):
    with pytest.raises(ValueError, match="whole counts"):
        wilson(useful, n)


def view(*aliases, retired=()):
    return RosterView(
        {"e": Endpoint("e", "http://127.0.0.1:1/v1", "K")},
        {
            a: Model(alias=a, endpoint="e", served=a, family=a, retired=a in retired)
            for a in aliases
        },
    )


def fold_panels(panels, shape="general"):
    """The ratings of ``shape`` from ``[(alias, useful), ...]`` per panel, through the index's
    own fold of verdict lines."""
    ix = Index()
    offset = 0
    for p, seats in enumerate(panels):
        for s, (alias, useful) in enumerate(seats):
            offset += 100
            ix.fold(
                offset,
                {
                    "kind": "verdict",
                    "call": f"p{p}.s{s}",
                    "panel": f"p{p}",
                    "alias": alias,
                    "shape": shape,
                    "useful": useful,
                },
            )
    return rate(shape, {"verdicts": ix.pairs.of(shape)})


def test_a_suggestion_needs_intervals_that_do_not_overlap():
    roster = view("m1", "m2", "x", "y", "old", "quiet", retired={"old"})
    duo = Collection("c", ("m1", "m2"))
    # three wins of three: promising, but the intervals still overlap
    few = fold_panels([[("x", True), ("m1", False)]] * 3)
    assert suggestions(duo, roster, few, "general") == []
    many = fold_panels(
        [[("x", True), ("m1", False)]] * 40
        + [[("y", True), ("m2", False)]] * 40
        + [[("old", True), ("m1", False)]] * 60
        + [[("x", True), ("y", False)], [("y", True), ("x", False)]] * 5
    )
    got = suggestions(duo, roster, many, "review")
    # m1 lost to a retired model too, so it is the weakest member, and y, which beat the
    # stronger m2 as often, rates above x: the strongest model against the weakest member
    # first; each named once; retired never
    assert [(s["alias"], s["instead_of"]) for s in got] == [("y", "m1"), ("x", "m2")]
    for s in got:
        assert s["shape"] == "review" and s["compared"] == 2  # x and y; old is retired
        assert s["interval"][0] > s["member_interval"][1]
        assert s["interval"][0] < s["rating"] < s["interval"][1]
        assert s["member_interval"][0] < s["member_rating"] < s["member_interval"][1]
    # a member without comparisons is never suggested against; "quiet" has none either
    only_m1 = fold_panels([[("x", True), ("m1", False)]] * 40)
    assert [s["instead_of"] for s in suggestions(duo, roster, only_m1, "general")] == ["m1"]


def equal_trial(seed: int, candidates: int, panels: int, rates=None) -> list[dict]:
    """Panels of two of three members and one of ``candidates`` candidates, each answer judged
    useful at its model's rate (0.6 unless ``rates`` says otherwise); the suggestions made."""
    rng = random.Random(seed)
    members = ["m1", "m2", "m3"]
    others = [f"c{i:02d}" for i in range(candidates)]
    rates = rates or {}
    seating = [rng.sample(members, 2) + [rng.choice(others)] for _ in range(panels)]
    ratings = fold_panels(
        [[(a, rng.random() < rates.get(a, 0.6)) for a in seats] for seats in seating]
    )
    return suggestions(Collection("c", tuple(members)), view(*members, *others), ratings, "general")


@pytest.mark.parametrize("candidates", [20, 35, 50])
def test_many_equally_good_candidates_yield_no_suggestion(candidates):
    # lightly judged: each candidate sits in 2 to 10 panels; without a correction for the
    # number of candidates, the luckiest of them looks clearly better in many trials
    trials = [equal_trial(seed, candidates, candidates * 6) for seed in range(20)]
    assert sum(bool(t) for t in trials) <= 1, [t for t in trials if t]  # >= 95% of trials


def test_a_truly_better_candidate_is_suggested_once_evidence_suffices():
    better = {"c00": 0.95, "m1": 0.4, "m2": 0.4, "m3": 0.4}
    assert not any(equal_trial(seed, 20, 60, better) for seed in range(5))  # too little yet
    for seed in range(5):
        got = equal_trial(seed, 20, 1500, better)
        assert got and got[0]["alias"] == "c00" and got[0]["compared"] == 20


def judge_pairs(runs, winner, loser, n, *, ties=0, shape="general"):
    """``n`` two-seat panels where ``winner``'s answer was judged useful and ``loser``'s not,
    then ``ties`` where both were."""
    with Ledger(runs) as ledger:
        for i in range(n + ties):
            panel = ledger.new_panel()
            for seat, alias in (("member1", loser), ("explorer1", winner)):
                call = f"{panel}.{seat}"
                ledger.record_seat(
                    {
                        "call": call,
                        "panel": panel,
                        "alias": alias,
                        "shape": shape,
                        "status": "ok",
                        "key": "local",
                    }
                )
                ledger.record_verdict(call, useful=alias == winner or i >= n)


def test_the_reply_suggests_a_clearly_better_model(gateway, home):
    body = {"model": "bench/trio", "messages": [{"role": "user", "content": "Review this"}]}
    status, reply, _ = gateway.post("/v1/chat/completions", body)
    assert status == 200 and reply["bench"]["suggest"] == []
    judge_pairs(home.gateway_runs, "x-two", "slow", 30)
    judge_pairs(home.gateway_runs, "x-one", "slow", 30, shape="review")  # not this shape
    status, reply, _ = gateway.post("/v1/chat/completions", body)
    assert status == 200
    (s,) = reply["bench"]["suggest"]
    assert (s["alias"], s["instead_of"], s["shape"], s["compared"]) == (
        "x-two",
        "slow",
        "general",
        1,
    )
    assert s["interval"][0] > s["member_interval"][1]


def test_the_reply_s_suggestions_follow_an_edit_of_the_collection(gateway, home):
    from panelist.metrics.roster.collection import Collections
    from panelist.metrics.roster.roster import Roster

    body = {"model": "bench/trio", "messages": [{"role": "user", "content": "Review this"}]}
    judge_pairs(home.gateway_runs, "x-two", "slow", 30)
    status, reply, _ = gateway.post("/v1/chat/completions", body)
    assert status == 200 and [s["alias"] for s in reply["bench"]["suggest"]] == ["x-two"]
    # the same evidence, the same roster: once x-two sits instead of slow, nothing is suggested
    Collections(home).save(Roster(home).view(), "trio", ["fast", "mid", "x-two"], by="test")
    status, reply, _ = gateway.post("/v1/chat/completions", body)
    assert status == 200 and reply["bench"]["suggest"] == []


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_the_reply_and_the_command_line_suggest_the_same(gateway, home, capsys):
    """One rule for both: race accuracy marks and verdicts count alike in each."""
    d = str(home.root)
    home.races.mkdir(parents=True, exist_ok=True)
    rows = [
        {"model": m, "input": i, "accuracy": a, "total": a + 1}
        for i in range(6)
        for m, a in (("x-two", 7), ("slow", 3), ("mid", 5))
    ]
    (home.races / "r20260101-0000abcd.json").write_text(json.dumps({"rows": rows}))
    body = {"model": "bench/trio", "messages": [{"role": "user", "content": "Review this"}]}
    won = 12  # the race: x-two above slow and mid on each of six inputs
    for rounds in (4, 30):
        won += rounds
        judge_pairs(home.gateway_runs, "x-two", "slow", rounds)
        judge_pairs(home.gateway_runs, "x-one", "fast", 2, ties=3)
        status, reply, _ = gateway.post("/v1/chat/completions", body)
        assert status == 200
        code, out, _ = run(capsys, "collection", "suggest", "trio", "--json", "--data", d)
        assert code == 0 and json.loads(out)["suggest"] == reply["bench"]["suggest"]
        rows = {r["alias"]: r for r in json.loads(out)["evidence"]}
        assert (rows["x-two"]["wins"], rows["x-two"]["losses"]) == (won, 0)
    assert [s["alias"] for s in reply["bench"]["suggest"]] == ["x-two"]


def test_collection_suggest_on_the_command_line(folder, capsys):
    d = str(folder.root)
    judge_pairs(folder.gateway_runs, "x-two", "slow", 4, ties=2)
    code, out, _ = run(capsys, "collection", "suggest", "trio", "--data", d)
    assert code == 0 and out.startswith("no suggestion for bench/trio on general")
    assert "corrected for 1 candidate(s)" in out
    rows = [line.split() for line in out.splitlines()[2:4]]
    assert [(r[0], r[1], r[4], r[5]) for r in rows] == [
        ("member", "slow", "0", "4"),
        ("candidate", "x-two", "4", "0"),
    ]
    assert "members without comparisons on general: fast, mid" in out
    code, out, _ = run(capsys, "collection", "suggest", "bench/trio", "--json", "--data", d)
    report = json.loads(out)
    assert code == 0 and report["suggest"] == [] and report["shape"] == "general"
    assert [(r["seat"], r["alias"], r["wins"], r["losses"]) for r in report["evidence"]] == [
        ("member", "slow", 0, 4),
        ("candidate", "x-two", 4, 0),
    ]
    judge_pairs(folder.gateway_runs, "x-two", "slow", 30)
    code, out, _ = run(capsys, "collection", "suggest", "trio", "--data", d)
    assert code == 0 and out.startswith("x-two instead of slow on general: rated 0.")
    assert "panelist collection save trio" in out
    code, out, _ = run(capsys, "collection", "suggest", "trio", "--json", "--data", d)
    (s,) = json.loads(out)["suggest"]
    assert s["alias"] == "x-two" and s["instead_of"] == "slow" and s["compared"] == 1
    # another shape has no comparisons at all
    code, out, _ = run(capsys, "collection", "suggest", "trio", "--shape", "review", "--data", d)
    assert code == 0 and "no suggestion" in out and "(none)" in out
    code, _, err = run(capsys, "collection", "suggest", "nope", "--data", d)
    assert code == 1 and "unknown collection 'bench/nope'" in err
    code, _, err = run(capsys, "collection", "suggest", "trio", "--shape", "Bad Shape", "--data", d)
    assert code == 1 and "lower-case letters" in err


def test_a_reply_never_waits_for_a_large_roster_s_first_fit(gateway, home):
    # forty judged models make the fit slow (counted, not timed): the first reply goes out
    # without suggestions while the fit is made behind it, and the next one has them
    body = {"model": "bench/trio", "messages": [{"role": "user", "content": "Review this"}]}
    judge_pairs(home.gateway_runs, "x-two", "slow", 30)
    for i in range(40):
        judge_pairs(home.gateway_runs, f"other{i:02d}", f"other{(i + 1) % 40:02d}", 1)
    status, reply, _ = gateway.post("/v1/chat/completions", body)
    assert status == 200 and reply["bench"]["suggest"] == []
    ratings = gateway.server.parts.panels.ratings
    assert ratings.idle()
    status, reply, _ = gateway.post("/v1/chat/completions", body)
    assert status == 200 and [s["alias"] for s in reply["bench"]["suggest"]] == ["x-two"]
