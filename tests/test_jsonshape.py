"""The structured-output check (metrics/panel/jsonshape.py) and the pick order (metrics/panel/pick.py)."""

import json
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from panelist.metrics.panel import jsonshape, pick

NESTED = {
    "type": "json_schema",
    "json_schema": {
        "name": "r",
        "schema": {
            "type": "object",
            "required": ["a", "place", "tags"],
            "additionalProperties": False,
            "properties": {
                "a": {"type": "integer"},
                "place": {"$ref": "#/$defs/Place"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "kind": {"enum": ["bug", "style"]},
                "maybe": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            },
            "$defs": {
                "Place": {
                    "type": "object",
                    "required": ["line"],
                    "properties": {"line": {"type": "integer"}},
                }
            },
        },
    },
}


@pytest.mark.parametrize(
    "answer, why",
    [
        ({"a": 1, "place": {"line": 3}, "tags": ["x"]}, None),
        ({"a": 1.0, "place": {"line": 3}, "tags": [], "maybe": None}, None),
        ({"a": 1, "place": {"line": 3}, "tags": [], "kind": "bug", "maybe": "y"}, None),
        ({"a": "1", "place": {"line": 3}, "tags": []}, "$.a: expected integer, got string"),
        ({"a": True, "place": {"line": 3}, "tags": []}, "$.a: expected integer, got boolean"),
        ({"a": 1, "place": {}, "tags": []}, "$.place: missing required key line"),
        ({"a": 1, "place": {"line": 3}, "tags": [1]}, "$.tags[0]: expected string, got integer"),
        ({"a": 1, "place": {"line": 3}, "tags": [], "kind": "nit"}, "$.kind: must be one of"),
        ({"a": 1, "place": {"line": 3}, "tags": [], "x": 0}, "$.x: this key is not allowed"),
        ({"a": 1, "place": {"line": 3}, "tags": [], "maybe": 2}, "$.maybe: fits none of the 2"),
        ({"place": {"line": 3}}, "$: missing required keys a, tags"),
        ([1], "$: expected object, got array"),
    ],
)
def test_a_schema_checks_required_keys_and_types_recursively(answer, why):
    found = jsonshape.problem(json.dumps(answer), NESTED)
    assert (found is None) if why is None else (found is not None and found.startswith(why)), found


@pytest.mark.parametrize(
    "text, fmt, ok",
    [
        ('{"a": 1}', {"type": "json_object"}, True),
        ("[1]", {"type": "json_object"}, False),
        ("```json\n{}\n```", {"type": "json_object"}, False),  # fenced is not JSON: never edited
        ('{"a": NaN}', {"type": "json_object"}, False),
        ("", {"type": "json_object"}, False),
        ("any prose", {"type": "text"}, True),
        ("any prose", None, True),
        ("{}", {"type": "json_schema", "json_schema": {"name": "free"}}, True),
    ],
)
def test_json_mode_wants_an_object_and_text_mode_wants_nothing(text, fmt, ok):
    assert (jsonshape.problem(text, fmt) is None) == ok


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=12,
)


@settings(max_examples=200, deadline=None)
@given(value=json_values, schema=json_values, text=st.text(max_size=20))
def test_the_check_never_raises(value, schema, text):
    odd = {"$ref": "#", "anyOf": [schema]}  # a ref to the root: followed a bounded depth
    for fmt in (
        {"type": "json_schema", "json_schema": {"schema": schema}},
        {"type": "json_schema", "json_schema": {"schema": odd}},
    ):
        for answer in (json.dumps(value), text):
            found = jsonshape.problem(answer, fmt)
            assert found is None or isinstance(found, str)


def seat(call, seat_kind, alias, status="ok", answer="x", tool_calls=()):
    return SimpleNamespace(
        call=f"p1.{call}",
        seat=seat_kind,
        alias=alias,
        status=status,
        answer=answer,
        error="" if status == "ok" else "server_error: down",
        tool_calls=list(tool_calls),
        answered=status in ("ok", "tool_calls"),
    )


def state(useful, not_useful):
    return SimpleNamespace(useful=useful, not_useful=not_useful)


def test_the_pick_order_ranks_members_by_useful_rate_then_the_rest_in_seat_order():
    seats = [
        seat("member1", "member", "a"),
        seat("member2", "member", "b"),
        seat("member3", "member", "c"),
        seat("nominee1", "nominee", "n"),
        seat("explorer1", "explorer", "x"),
    ]
    # b: 3 of 4 useful ranks above the unjudged a (1/2); c: 0 of 2 ranks below it
    states = {"b": state(3, 1), "c": state(0, 2)}
    assert [s.alias for s in pick.order(seats, ("a", "b", "c"), states)] == [
        "b",
        "a",
        "c",
        "n",
        "x",
    ]
    assert [s.alias for s in pick.order(seats, ("a", "b", "c"), {})] == ["a", "b", "c", "n", "x"]
    # a preferred member goes first; a preferred alias that is no seated member is ignored
    assert pick.order(seats, ("a", "b", "c"), states, prefer="c")[0].alias == "c"
    assert pick.order(seats, ("a", "b", "c"), states, prefer="x")[0].alias == "b"


def test_the_picker_never_lets_a_later_seat_jump_the_order():
    a, b, c = (
        seat("member1", "member", "a", status="error"),
        seat("member2", "member", "b"),
        seat("member3", "member", "c"),
    )
    picker = pick.Picker([a, b, c])
    assert picker.offer(c) is False  # c is ready, but a and b come first
    assert picker.offer(a) is False  # a failed: b is next, and not done yet
    assert picker.offer(b) is True and picker.picked is b
    assert picker.note() == "failover: member1 a: server_error: down; picked member2 b"


def test_a_schema_that_would_branch_forever_is_checked_within_bounds():
    # each level doubles: unbounded, this would be 2**64 comparisons
    fmt = {
        "type": "json_schema",
        "json_schema": {
            "schema": {"anyOf": [{"$ref": "#"}, {"$ref": "#"}], "type": "object", "required": ["a"]}
        },
    }
    assert jsonshape.problem('{"b": 1}', fmt) is not None  # the bound still reports a misfit
    assert jsonshape.problem(json.dumps([[[[1]]]] * 1000), fmt) is not None
