"""Seating rules: members, explorer exclusions, the rotation in turns, the capped verdict
weighting, seats in flight, and the waiting bound whatever the verdicts."""

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from panelist.metrics.roster.collection import Collection
from panelist.metrics.ledger.index import ModelState
from panelist.metrics.roster.roster import Endpoint, Model, RosterView
from panelist.metrics.panel.seating import SeatsInFlight, seat_panel

NOW = 1_800_000_000.0


def roster(*models: Model) -> RosterView:
    return RosterView(
        {"e": Endpoint("e", "http://127.0.0.1:1/v1", "K")}, {m.alias: m for m in models}
    )


def model(alias, family=None, **kw) -> Model:
    return Model(alias=alias, endpoint="e", served=alias, family=family or alias, **kw)


def state(last=None, useful=0, not_useful=0, cooling=0.0, window=None, waited=None):
    return ModelState(
        last_seated=last,
        useful=useful,
        not_useful=not_useful,
        cooling_until=cooling,
        window=window,
        waited=waited,
    )


def seat(view, members, states=None, explorers=2, estimate=100, busy=frozenset()):
    states = {a: (states or {}).get(a, state()) for a in view.models}
    return seat_panel(
        Collection("c", tuple(members)),
        view,
        states,
        explorers=explorers,
        estimate=estimate,
        busy=busy,
        now=NOW,
    )


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


def test_the_longest_wait_in_turns_sits_and_seconds_only_break_ties():
    view = roster(model("m1"), model("a"), model("b"))
    # a sat longer ago in seconds, but b has waited more panels of this shape
    s = seat(
        view,
        ["m1"],
        {"a": state(last=NOW - 900, waited=2), "b": state(last=NOW - 5, waited=3)},
        explorers=1,
    )
    assert explorers_of(s) == ["b"]
    # equal turns: the older seating time sits, at timestamp precision
    s = seat(
        view,
        ["m1"],
        {"a": state(last=NOW - 5.001, waited=1), "b": state(last=NOW - 5.002, waited=1)},
        explorers=1,
    )
    assert explorers_of(s) == ["b"]


def test_verdicts_change_who_sits_between_otherwise_equal_models():
    view = roster(model("m1"), model("good"), model("bad"))
    same_time = NOW - 100
    liked = {"good": state(last=same_time, useful=3), "bad": state(last=same_time, not_useful=3)}
    assert explorers_of(seat(view, ["m1"], liked, explorers=1)) == ["good"]
    flipped = {"good": state(last=same_time, not_useful=3), "bad": state(last=same_time, useful=3)}
    assert explorers_of(seat(view, ["m1"], flipped, explorers=1)) == ["bad"]


def test_verdicts_at_most_double_a_claim_and_never_shrink_one():
    view = roster(model("m1"), model("good"), model("poor"))
    # good waited 1 panel (2 turns) with 3 useful verdicts: its claim doubles, 2 * 2 = 4
    s = seat(
        view,
        ["m1"],
        {
            "good": state(last=NOW - 60, useful=3, waited=1),
            "poor": state(last=NOW - 200, not_useful=1, waited=2),
        },
        explorers=1,
    )
    assert explorers_of(s) == ["good"]  # 4 > 3 * 1
    # a hundred useful verdicts still only double it: 5 turns of waiting beat it
    s = seat(
        view,
        ["m1"],
        {
            "good": state(last=NOW - 60, useful=100, waited=1),
            "poor": state(last=NOW - 200, not_useful=1, waited=4),
        },
        explorers=1,
    )
    assert explorers_of(s) == ["poor"]  # 5 > 4
    # not-useful verdicts do not push a model behind the plain rotation
    s = seat(
        view,
        ["m1"],
        {
            "good": state(last=NOW - 60, waited=2),
            "poor": state(last=NOW - 200, not_useful=50, waited=3),
        },
        explorers=1,
    )
    assert explorers_of(s) == ["poor"]  # 4 > 3


def test_a_model_with_a_seat_in_flight_waits_behind_every_other():
    view = roster(model("m1"), model("hangs"), model("b"), model("c"))
    states = {
        "hangs": state(last=NOW - 9, waited=9, useful=5),
        "b": state(last=NOW, waited=0),
        "c": state(last=NOW, waited=0),
    }
    s = seat(view, ["m1"], states, busy={"hangs"})
    assert explorers_of(s) == ["b", "c"]
    assert "still answering" in why(s, "hangs")[0]
    # with no one else to ask it still sits; members sit whatever is in flight
    s = seat(view, ["m1"], states, explorers=3, busy={"hangs", "m1"})
    assert explorers_of(s) == ["b", "c", "hangs"] and s.seats[0].model.alias == "m1"
    # in flight outranks never seated too
    s = seat(
        roster(model("m1"), model("new"), model("old")),
        ["m1"],
        {"old": state(last=NOW, waited=0)},
        explorers=1,
        busy={"new"},
    )
    assert explorers_of(s) == ["old"]


def test_exclusions_are_listed_with_why():
    view = roster(
        model("m1", family="fam"),
        model("cousin", family="fam"),
        model("old", retired=True),
        model("hot"),
        model("tiny", context=50),
        model("learned", context=10_000),
        model("ok"),
    )
    s = seat(
        view, ["m1"], {"hot": state(cooling=NOW + 30), "learned": state(window=80)}, estimate=100
    )
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


def test_seats_in_flight_are_counted_released_once_and_lapse():
    flight = SeatsInFlight()
    first = flight.hold(["a", "b"], 3600)
    second = flight.hold(["a"], 3600)
    assert flight.counts() == {"a": 2, "b": 1} and flight.busy() == {"a", "b"}
    first.release("a")
    first.release("a")  # a seat ends once; a second release is nothing
    assert flight.counts() == {"a": 1, "b": 1}
    first.release_all()
    second.release_all()
    second.release("a")
    assert flight.counts() == {} and flight.busy() == frozenset()
    flight.hold(["lost"], 0)  # never released: it lapses at its deadline
    assert flight.counts() == {}


# -- the waiting bound ---------------------------------------------------------------------------
def rotate(view, members, explorers, verdicts, panels):
    """Seat ``panels`` panels in a row, one a second, keeping turns as the ledger does; returns
    each panel's explorer aliases. ``verdicts`` maps an alias to its (useful, not_useful)."""
    turns, turn_of, seated_at, out = 0, {}, {}, []
    for i in range(panels):
        states = {
            a: state(
                last=seated_at.get(a),
                useful=verdicts.get(a, (0, 0))[0],
                not_useful=verdicts.get(a, (0, 0))[1],
                waited=turns - turn_of[a] if a in turn_of else None,
            )
            for a in view.models
        }
        seating = seat_panel(
            Collection("c", tuple(members)),
            view,
            states,
            explorers=explorers,
            estimate=1,
            now=NOW + i,
        )
        turns += 1
        for s in seating.seats:
            turn_of[s.model.alias], seated_at[s.model.alias] = turns, NOW + i
        out.append(explorers_of(seating))
    return out


def longest_wait(history, alias) -> int:
    """Most panels from one seat of ``alias`` to the next (or from the start to its first)."""
    seated = [i for i, panel in enumerate(history, 1) if alias in panel]
    gaps = [b - a for a, b in zip([0] + seated, seated)]
    return max(gaps + [len(history) + 1 - (seated[-1] if seated else 0)])


@settings(max_examples=150, deadline=None)
@given(
    k=st.integers(2, 9),
    e=st.integers(1, 3),
    verdicts=st.lists(st.tuples(st.integers(0, 30), st.integers(0, 30)), min_size=9, max_size=9),
)
def test_every_candidate_sits_within_the_bound_whatever_the_verdicts(k, e, verdicts):
    aliases = [f"x{i}" for i in range(k)]
    view = roster(model("m1"), *(model(a) for a in aliases))
    history = rotate(view, ["m1"], e, dict(zip(aliases, verdicts)), 12 * k)
    bound = 2 * (k - 1) // e + 1
    assert bound <= 2 * math.ceil(k / e)
    for alias in aliases:
        assert longest_wait(history, alias) <= bound, (alias, history)


@settings(max_examples=80, deadline=None)
@given(
    k=st.integers(2, 8),
    e=st.integers(1, 3),
    families=st.integers(1, 3),
    verdicts=st.lists(st.tuples(st.integers(0, 30), st.integers(0, 30)), min_size=8, max_size=8),
)
def test_shared_families_still_bound_the_wait(k, e, families, verdicts):
    aliases = [f"x{i}" for i in range(k)]
    view = roster(
        model("m1"), *(model(a, family=f"f{i % families}") for i, a in enumerate(aliases))
    )
    history = rotate(view, ["m1"], e, dict(zip(aliases, verdicts)), 12 * k)
    for alias in aliases:
        assert longest_wait(history, alias) <= 2 * k - 1, (alias, history)


def test_one_all_useful_model_does_not_become_a_member():
    # the adversarial case: one model judged useful every time, every other never
    aliases = [f"x{i}" for i in range(6)]
    view = roster(model("m1"), *(model(a) for a in aliases))
    verdicts = {a: (0, 50) for a in aliases} | {"x5": (50, 0)}
    history = rotate(view, ["m1"], 2, verdicts, 60)
    seats = {a: sum(a in panel for panel in history) for a in aliases}
    assert seats["x5"] > seats["x0"]  # verdicts still count
    assert seats["x5"] <= 60 // 2  # at most twice its fair share of 60 * 2 / 6
    for alias in aliases:
        assert longest_wait(history, alias) <= 2 * math.ceil(6 / 2)
