"""The tool difference by value: arguments compared as data after the tool's schema coercion,
what the tools returned compared too, and an extra call whose result the answer did not use
reported but not capped; end to end on the simulated upstream."""

import pytest

from panelist.metrics.home import open_home
from panelist.metrics.race.benchmark import Benchmark, GradeBook, tool
from panelist.metrics.race.tooldiff import coerce, differs, tool_difference
from panelist.metrics.roster.roster import Roster
from panelist.metrics.upstream.sim import SimUpstream

SCHEMA = {
    "type": "object",
    "properties": {
        "n": {"type": "integer"},
        "verbose": {"type": "boolean"},
        "note": {"type": "string"},
        "weight": {"type": "number"},
        "tags": {"type": "array", "items": {"type": "integer"}},
    },
    "required": ["n"],
}


@pytest.mark.parametrize(
    "sent, used",
    [
        ({"n": "42"}, {"n": 42}),
        ({"n": " 42 "}, {"n": 42}),
        ({"n": 42.0}, {"n": 42}),
        ({"verbose": "true"}, {"verbose": True}),
        ({"note": 7}, {"note": "7"}),
        ({"weight": "2.5"}, {"weight": 2.5}),
        ({"tags": ["1", 2]}, {"tags": [1, 2]}),
        # nothing that loses information: these are left for the tool to refuse
        ({"n": "42.5"}, {"n": "42.5"}),
        ({"n": "forty-two"}, {"n": "forty-two"}),
        ({"n": True}, {"n": True}),
        ({"verbose": 1}, {"verbose": 1}),
        ({"other": "42"}, {"other": "42"}),
    ],
)
def test_arguments_are_coerced_to_the_tools_schema_only_where_nothing_is_lost(sent, used):
    assert coerce(SCHEMA, sent) == used
    assert type(coerce(SCHEMA, sent).get("n")) is type(used.get("n"))


def call(args, returned, tool_name="lookup"):
    return {
        "tool": tool_name,
        "arguments": args,
        "used": coerce(SCHEMA, args),
        "returned": returned,
    }


def test_arguments_are_compared_by_value_never_as_text():
    ref = [call({"n": 42, "weight": 2}, '{"order": 42}')]
    for run in (
        [call({"n": "42", "weight": 2.0}, '{"order": 42}')],
        [call({"weight": 2, "n": 42}, '{"order":42}')],
    ):
        assert not differs(tool_difference(ref, run)), run
    # a boolean is never a number
    flagged = tool_difference([call({"n": 1}, "a")], [call({"n": True}, "b")])
    assert flagged["different"] and differs(flagged)


def test_a_call_with_other_arguments_and_the_very_same_result_is_noted_not_counted():
    diff = tool_difference(
        [call({"n": 42}, '{"order": 42, "status": "shipped"}')],
        [call({"n": 42, "verbose": True}, '{"status": "shipped", "order": 42}')],
    )
    assert diff["equivalent"] == [
        {
            "tool": "lookup",
            "reference": {"n": 42},
            "run": {"n": 42, "verbose": True},
            "call": 1,
            "reference_call": 1,
        }
    ]
    assert not differs(diff)


def test_an_extra_call_counts_only_when_its_result_shows_in_what_the_run_did_after():
    ref = [call({"n": 42}, '{"order": 42, "status": "shipped"}')]
    run = [
        call({"n": 42}, '{"order": 42, "status": "shipped"}'),
        call({"n": 43}, '{"order": 43, "status": "lost"}'),
    ]
    unused = tool_difference(ref, run, output="Order 42 has shipped.")
    assert unused["unused"] == [{"tool": "lookup", "arguments": {"n": 43}, "call": 2}]
    assert unused["extra"] == [] and not differs(unused)
    used = tool_difference(ref, run, output="Order 42 shipped; order 43 is lost.")
    assert used["extra"] == [{"tool": "lookup", "arguments": {"n": 43}, "call": 2}] and differs(
        used
    )
    # a result the run fed into a later call was used, whatever the output says
    chained = run + [call({"n": 1, "note": "lost"}, "ok", "report")]
    assert tool_difference(ref, chained, output="Done.")["extra"][0]["arguments"] == {"n": 43}
    # a value the task itself holds proves nothing
    assert tool_difference(ref, run, output="order 43", task="What of order 43?")["unused"]


# -- end to end --------------------------------------------------------------------------------
@tool(SCHEMA)
def lookup(n, verbose=False, note="", weight=0, tags=()):
    """Find an order by its number."""
    if not isinstance(n, int):  # the tool's own type: it sees the coerced value
        raise TypeError(f"n must be an integer, got {n!r}")
    return {"order": n, "status": "shipped" if n == 42 else "lost"}


class OrderJob:
    grade = "general"

    def run(self, question, seat):
        return seat.chat([{"role": "user", "content": question}], tools=[lookup])


def calls(*args):
    return [{"name": "lookup", "arguments": a} for a in args]


# alias -> (its tool calls, its answer after the tools)
RUNS = {
    "pinned": (calls({"n": 42}), "Order 42 has shipped."),
    "as-text": (calls({"n": "42"}), "Order 42 has shipped."),
    "verbose": (calls({"n": 42, "verbose": "true"}), "Order 42 has shipped."),
    "idle-extra": (calls({"n": 42}, {"n": 43}), "Order 42 has shipped."),
    "used-extra": (calls({"n": 42}, {"n": 43}), "Order 42 has shipped; order 43 is lost."),
}


@pytest.fixture()
def raced(tmp_path):
    with SimUpstream({}) as sim:
        home = open_home(tmp_path / "data")
        roster = Roster(home)
        roster.add_endpoint("sims", sim.url)
        for alias, (tool_calls, answer) in RUNS.items():
            roster.add_model(alias, "sims", grade="general", tools=True)
            sim.script(alias, tool_calls=tool_calls, answer=answer)
        roster.add_model("judge", "sims", grade="strong")
        sim.script("judge", json={"accuracy": 7, "shown_work": 3, "reason": "fine"})
        bench = Benchmark(
            OrderJob,
            home=home,
            admission=None,
            grades=GradeBook.plain({"general": "pinned"}, "judge", Roster(home)),
        )
        bench.set_input("Where is order 42?").set_candidates([a for a in RUNS if a != "pinned"])
        bench.run()
        judged = [
            r["body"]["messages"][-1]["content"] for r in sim.requests if r["model"] == "judge"
        ]
        yield {r["model"]: r for r in bench.report().rows}, judged


@pytest.mark.slow
def test_a_tool_called_with_the_same_value_as_text_is_no_difference(raced):
    rows, _ = raced
    row = rows["as-text"]
    (used,) = [e for e in row["transcript"]["events"] if e["kind"] == "tool"]
    assert used["arguments"] == {"n": "42"} and used["used"] == {"n": 42}
    assert "raised" not in used, "the tool was called with the coerced value"
    assert not differs(row["tool_difference"])
    assert row["accuracy"] == 7 and "capped_from" not in row


@pytest.mark.slow
def test_other_arguments_with_the_same_result_and_an_unused_extra_are_reported_not_capped(raced):
    rows, judged = raced
    assert rows["verbose"]["tool_difference"]["equivalent"] and rows["verbose"]["accuracy"] == 7
    idle = rows["idle-extra"]
    assert idle["tool_difference"]["unused"] == [
        {"tool": "lookup", "arguments": {"n": 43}, "call": 2}
    ]
    assert idle["tool_difference"]["extra"] == [] and idle["accuracy"] == 7
    assert any("its result does not show in the candidate's output" in text for text in judged)
    used = rows["used-extra"]
    assert used["tool_difference"]["extra"] == [
        {"tool": "lookup", "arguments": {"n": 43}, "call": 2}
    ]
    assert used["accuracy"] == 4 and used["capped_from"] == 7
