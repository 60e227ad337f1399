"""Wilson intervals, and suggestions to seat a clearly more useful model instead of a member:
the rule, the reply's ``bench.suggest`` and ``panelist collection suggest``."""

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from panelist.metrics.cli.main import main
from panelist.metrics.roster.collection import Collection
from panelist.metrics.ledger.index import ModelState
from panelist.metrics.ledger.ledger import Ledger
from panelist.metrics.roster.roster import Endpoint, Model, RosterView
from panelist.metrics.stats import wilson
from panelist.metrics.panel.suggest import suggestions


def test_wilson_matches_known_values():
    assert wilson(0, 0) == (0.0, 1.0)
    lo, hi = wilson(50, 100)
    assert round(lo, 4) == 0.4038 and round(hi, 4) == 0.5962
    lo, hi = wilson(20, 20)
    assert round(lo, 4) == 0.8389 and hi == 1.0   # n / (n + z²) at all useful
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
    return RosterView({"e": Endpoint("e", "http://127.0.0.1:1/v1", "K")},
                      {a: Model(alias=a, endpoint="e", served=a, family=a, retired=a in retired)
                       for a in aliases})


def judged(useful, not_useful):
    return ModelState(last_seated=None, useful=useful, not_useful=not_useful, cooling_until=0.0,
                      window=None)


def test_a_suggestion_needs_intervals_that_do_not_overlap():
    roster = view("m1", "m2", "x", "y", "z", "old", retired={"old"})
    trio = Collection("c", ("m1", "m2"))
    states = {a: judged(0, 0) for a in roster.models}
    # three of three against none of three: promising, but the intervals still overlap
    assert suggestions(trio, roster, dict(states, x=judged(3, 0), m1=judged(0, 3)),
                       "general") == []
    states.update(x=judged(20, 0), y=judged(18, 2), z=judged(9, 1), old=judged(40, 0),
                  m1=judged(0, 20), m2=judged(2, 18))
    got = suggestions(trio, roster, states, "review")
    # the strongest model against the weakest member first; each named once; retired never
    assert [(s["alias"], s["instead_of"]) for s in got] == [("x", "m1"), ("y", "m2")]
    assert got[0] == {"alias": "x", "instead_of": "m1", "shape": "review", "useful": 20,
                      "of": 20, "interval": [0.839, 1.0], "member_interval": [0.0, 0.161]}
    # a member nobody has judged is never suggested against
    states["m2"] = judged(0, 0)
    assert [s["instead_of"] for s in suggestions(trio, roster, states, "review")] == ["m1"]


def judge(runs, alias, useful, of, shape="general"):
    """``of`` answered calls of ``alias`` on ``shape``, the first ``useful`` judged useful."""
    with Ledger(runs) as ledger:
        for i in range(of):
            panel = ledger.new_panel()
            call = f"{panel}.explorer1"
            ledger.record_seat({"call": call, "panel": panel, "alias": alias, "shape": shape,
                                "status": "ok", "key": "local"})
            ledger.record_verdict(call, useful=i < useful)


def test_the_reply_suggests_a_clearly_better_model(gateway, home):
    body = {"model": "bench/trio", "messages": [{"role": "user", "content": "Review this"}]}
    status, reply, _ = gateway.post("/v1/chat/completions", body)
    assert status == 200 and reply["bench"]["suggest"] == []
    judge(home.gateway_runs, "slow", 1, 20)
    judge(home.gateway_runs, "x-two", 19, 20)
    judge(home.gateway_runs, "x-one", 19, 20, shape="review")  # another shape does not count
    status, reply, _ = gateway.post("/v1/chat/completions", body)
    assert status == 200
    (s,) = reply["bench"]["suggest"]
    assert (s["alias"], s["instead_of"], s["shape"], s["useful"], s["of"]) == \
        ("x-two", "slow", "general", 19, 20)
    assert s["interval"][0] > s["member_interval"][1]


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_collection_suggest_on_the_command_line(home, capsys):
    d = str(home.root)
    judge(home.gateway_runs, "slow", 2, 6)
    judge(home.gateway_runs, "x-two", 4, 6)
    code, out, _ = run(capsys, "collection", "suggest", "trio", "--data", d)
    assert code == 0 and out.startswith("no suggestion for bench/trio on general")
    rows = [line.split() for line in out.splitlines()[2:4]]
    assert rows == [["member", "slow", "2", "6", "0.10-0.70"],
                    ["candidate", "x-two", "4", "6", "0.30-0.90"]]
    assert "members without verdicts on general: fast, mid" in out
    code, out, _ = run(capsys, "collection", "suggest", "bench/trio", "--json", "--data", d)
    report = json.loads(out)
    assert code == 0 and report["suggest"] == [] and report["shape"] == "general"
    assert [(r["seat"], r["alias"], r["useful"], r["of"]) for r in report["evidence"]] == \
        [("member", "slow", 2, 6), ("candidate", "x-two", 4, 6)]
    judge(home.gateway_runs, "slow", 0, 20)
    judge(home.gateway_runs, "x-two", 20, 20)
    code, out, _ = run(capsys, "collection", "suggest", "trio", "--data", d)
    assert code == 0 and out.startswith("x-two instead of slow on general: 24 of 26 useful")
    assert "panelist collection save trio" in out
    code, out, _ = run(capsys, "collection", "suggest", "trio", "--json", "--data", d)
    (s,) = json.loads(out)["suggest"]
    assert s["alias"] == "x-two" and s["instead_of"] == "slow" and s["of"] == 26
    # another shape has no verdicts at all
    code, out, _ = run(capsys, "collection", "suggest", "trio", "--shape", "review", "--data", d)
    assert code == 0 and "no suggestion" in out and "(none)" in out
    code, _, err = run(capsys, "collection", "suggest", "nope", "--data", d)
    assert code == 1 and "unknown collection 'bench/nope'" in err
    code, _, err = run(capsys, "collection", "suggest", "trio", "--shape", "Bad Shape",
                       "--data", d)
    assert code == 1 and "lower-case letters" in err
