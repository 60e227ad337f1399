"""Seating rules: members, explorer exclusions, staleness and the verdict weighting."""

from panelist.metrics.collection import Collection
from panelist.metrics.ledger import ModelState
from panelist.metrics.roster import Endpoint, Model, RosterView
from panelist.metrics.route import seat_panel

NOW = 1_800_000_000.0


def roster(*models: Model) -> RosterView:
    return RosterView({"e": Endpoint("e", "http://127.0.0.1:1/v1", "K")},
                      {m.alias: m for m in models})


def model(alias, family=None, **kw) -> Model:
    return Model(alias=alias, endpoint="e", served=alias, family=family or alias, **kw)


def state(last=None, useful=0, not_useful=0, cooling=0.0, window=None) -> ModelState:
    return ModelState(last_seated=last, useful=useful, not_useful=not_useful,
                      cooling_until=cooling, window=window)


def seat(view, members, states=None, explorers=2, estimate=100):
    states = {a: (states or {}).get(a, state()) for a in view.models}
    return seat_panel(Collection("c", tuple(members)), view, states, explorers=explorers,
                      estimate=estimate, now=NOW)


def explorers_of(seating):
    return [s.model.alias for s in seating.seats if s.seat == "explorer"]


def why(seating, alias):
    return [s["why"] for s in seating.skipped if s["alias"] == alias]


def test_members_sit_and_never_seated_explorers_come_first():
    view = roster(model("m1"), model("a"), model("b"), model("c"))
    s = seat(view, ["m1"], {"a": state(last=NOW - 10), "b": state(), "c": state(last=NOW - 50)})
    assert [x.label for x in s.seats] == ["member1", "explorer1", "explorer2"]
    assert explorers_of(s) == ["b", "c"]  # never seated, then the oldest seat
    assert why(s, "a") and "older evidence" in why(s, "a")[0]


def test_staleness_is_compared_at_timestamp_precision():
    view = roster(model("m1"), model("a"), model("b"))
    s = seat(view, ["m1"], {"a": state(last=NOW - 5.001), "b": state(last=NOW - 5.002)},
             explorers=1)
    assert explorers_of(s) == ["b"]


def test_verdicts_change_who_sits_between_otherwise_equal_models():
    view = roster(model("m1"), model("good"), model("bad"))
    same_time = NOW - 100
    liked = {"good": state(last=same_time, useful=3), "bad": state(last=same_time, not_useful=3)}
    assert explorers_of(seat(view, ["m1"], liked, explorers=1)) == ["good"]
    flipped = {"good": state(last=same_time, not_useful=3), "bad": state(last=same_time, useful=3)}
    assert explorers_of(seat(view, ["m1"], flipped, explorers=1)) == ["bad"]


def test_useful_model_returns_sooner_but_a_poor_one_is_not_shut_out_forever():
    view = roster(model("m1"), model("good"), model("poor"))
    # good sat 60 s ago with 3 useful verdicts; poor sat 200 s ago with 1 not useful
    s = seat(view, ["m1"], {"good": state(last=NOW - 60, useful=3),
                            "poor": state(last=NOW - 200, not_useful=1)}, explorers=1)
    assert explorers_of(s) == ["good"]   # 60*4 = 240 > 200/2 = 100
    s = seat(view, ["m1"], {"good": state(last=NOW - 60, useful=3),
                            "poor": state(last=NOW - 600, not_useful=1)}, explorers=1)
    assert explorers_of(s) == ["poor"]   # 600/2 = 300 > 240


def test_exclusions_are_listed_with_why():
    view = roster(model("m1", family="fam"), model("cousin", family="fam"),
                  model("old", retired=True), model("hot"), model("tiny", context=50),
                  model("learned", context=10_000), model("ok"))
    s = seat(view, ["m1"], {"hot": state(cooling=NOW + 30), "learned": state(window=80)},
             estimate=100)
    assert explorers_of(s) == ["ok"]
    assert "family" in why(s, "cousin")[0]
    assert why(s, "old") == ["retired"]
    assert "cooling down" in why(s, "hot")[0]
    assert "50 tokens" in why(s, "tiny")[0]
    assert "80 tokens" in why(s, "learned")[0]  # the learned window is lower, so it wins
    seated = {x.model.alias for x in s.seats}
    listed = {x["alias"] for x in s.skipped}
    assert seated | listed == set(view.models)  # everyone is accounted for


def test_a_model_with_no_known_window_is_never_refused_for_size():
    view = roster(model("m1"), model("unknown"))
    assert explorers_of(seat(view, ["m1"], estimate=10**9)) == ["unknown"]


def test_a_cooling_member_is_skipped_not_called_into_its_limit():
    view = roster(model("m1"), model("m2"))
    s = seat(view, ["m1", "m2"], {"m1": state(cooling=NOW + 5)}, explorers=0)
    assert [x.model.alias for x in s.seats] == ["m2"]
    assert "cooling down" in why(s, "m1")[0]


def test_explorers_prefer_distinct_families_then_fill():
    view = roster(model("m1"), model("x1", family="x"), model("x2", family="x"), model("y"))
    s = seat(view, ["m1"], {"x1": state(), "x2": state(), "y": state(last=NOW - 1)})
    assert explorers_of(s) == ["x1", "y"]
    view = roster(model("m1"), model("x1", family="x"), model("x2", family="x"))
    assert explorers_of(seat(view, ["m1"])) == ["x1", "x2"]
