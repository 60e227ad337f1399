"""Multi-turn history as each seat sees it (metrics/panel/history.py), and the sticky member of a tool
conversation, on a real ledger, on replies a real gateway gave, and checked by an upstream that
refuses tool messages answering calls it did not make."""

import copy
import json
import urllib.error
import urllib.request

import pytest

from conftest import PATIENCE
from panelist.metrics.panel import history
from panelist.metrics.panel.history import Conversation, for_seat, sticky_alias
from panelist.metrics.ledger.ledger import Ledger
from test_delivered import set_limits, write_panel

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    },
    {
        "type": "function",
        "function": {"name": "news", "parameters": {"type": "object", "properties": {}}},
    },
]
Q = {"role": "user", "content": "Is it warm in Paris?"}


def tool_call(tid, name, args):
    return {
        "id": tid,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args)},
    }


@pytest.fixture
def ledger(tmp_path):
    with Ledger(tmp_path / "runs" / "gateway") as ledger:
        yield ledger


def upstream_takes(sim, messages, model="fast"):
    """Whether a real (simulated) upstream accepts this history: (status, message)."""
    req = urllib.request.Request(
        sim.url + "/chat/completions",
        headers={"Content-Type": "application/json"},
        data=json.dumps({"model": model, "messages": messages, "tools": TOOLS}).encode(),
    )
    try:
        with urllib.request.urlopen(req, timeout=PATIENCE) as resp:
            return resp.status, json.loads(resp.read())["choices"][0]["message"]
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, json.loads(exc.read())["error"]["message"]


# -- text replies -----------------------------------------------------------------------------
def test_each_seat_sees_its_own_answer_else_the_one_given(ledger):
    pid, _ = write_panel(
        ledger,
        [("a", "It is 24 C.", []), ("b", "About 20 degrees.", []), ("c", "", [], "error")],
        delivered=("It is 24 C.", []),
    )
    messages = [
        Q,
        {"role": "assistant", "content": "It is 24 C.\n"},
        {"role": "user", "content": "And tomorrow?"},
    ]
    sent = copy.deepcopy(messages)
    conv = Conversation(messages, ledger)
    assert conv.for_seat("a")[1] == {"role": "assistant", "content": "It is 24 C."}
    assert conv.for_seat("b") == [
        Q,
        {"role": "assistant", "content": "About 20 degrees."},
        messages[2],
    ]
    # failed there, or never sat: the answer the caller was given
    assert conv.for_seat("c") == messages and conv.for_seat("z") == messages
    assert for_seat(messages, "b", ledger)[1]["content"] == "About 20 degrees."
    assert messages == sent  # the request's own messages are never changed


def test_messages_that_are_no_panelist_reply_pass_unchanged(ledger):
    write_panel(ledger, [("a", "hello", [])], delivered=("hello", []))
    messages = [
        Q,
        {"role": "assistant", "content": "hello there"},  # another text
        {"role": "assistant", "content": "see p20250101-9.member1"},  # no such panel
        {"role": "assistant", "content": None, "tool_calls": [tool_call("unknown", "weather", {})]},
        {"role": "tool", "tool_call_id": "unknown", "content": "sunny"},
    ]
    assert for_seat(messages, "a", ledger) == messages
    assert sticky_alias(messages, ledger) is None


def test_a_merged_earlier_reply(ledger):
    pid, _ = write_panel(
        ledger,
        [("a", "24 C", []), ("b", "20 C", [])],
        reply="merged",
        merger=("m", "Both say it is warm: 20 to 24 C."),
        delivered=("Both say it is warm: 20 to 24 C.", []),
    )
    messages = [
        Q,
        {"role": "assistant", "content": "Both say it is warm: 20 to 24 C."},
        {"role": "user", "content": "Thanks. Rain?"},
    ]
    conv = Conversation(messages, ledger)
    assert conv.for_seat("a")[1]["content"] == "24 C"
    assert conv.for_seat("b")[1]["content"] == "20 C"
    assert conv.for_seat("m") == messages and conv.for_seat("new") == messages
    assert conv.for_seat(None) == messages  # as the caller was answered (for a merger)


def test_replies_a_real_gateway_gave(gateway, home, sim):
    """A markdown reply (every seat's section) and a merged one, as the gateway sent them."""
    set_limits(home, max_explorers=0)
    sim.script("mid", fail="server_error")
    status, reply, _ = gateway.post(
        "/v1/chat/completions", {"model": "bench/trio", "messages": [Q]}
    )
    assert status == 200
    markdown = reply["choices"][0]["message"]["content"]
    answers = {s["alias"]: s["answer"] for s in reply["bench"]["seats"]}
    messages = [
        Q,
        {"role": "assistant", "content": markdown},
        {"role": "user", "content": "Which of you is right?"},
    ]
    with Ledger(home.gateway_runs) as ledger:  # a second process's view of the folder
        conv = Conversation(messages, ledger)
        assert conv.for_seat("fast")[1] == {"role": "assistant", "content": answers["fast"].strip()}
        for other in ("mid", "x-one"):  # failed in that panel, or never sat
            given = conv.for_seat(other)[1]["content"]
            assert "## Seat" not in given and "call `" not in given
            assert given == history.SEPARATOR.join(answers[a].strip() for a in ("fast", "slow"))
        assert conv.for_seat("fast")[2] == messages[2]

        status, merged, _ = gateway.post(
            "/v1/chat/completions", {"model": "bench/trio:merged", "messages": [Q]}
        )
        assert status == 200
        text = merged["choices"][0]["message"]["content"]
        # the call site the merger adds: the gateway records what it delivered
        ledger.record_delivered(merged["bench"]["panel"], text, [])
        later = [Q, {"role": "assistant", "content": text}, {"role": "user", "content": "ok?"}]
        mine = {s["alias"]: s["answer"] for s in merged["bench"]["seats"]}
        assert for_seat(later, "slow", ledger)[1]["content"] == mine["slow"]
        assert for_seat(later, "x-two", ledger) == later


# -- tool conversations -----------------------------------------------------------------------
def tool_panel(ledger, *, finish=True):
    """a (picked) asked for weather in Paris; b asked for the same and for the news; c answered
    with text. The caller got a's call and sent back its result."""
    a = [tool_call("ta", "weather", {"city": "Paris"})]
    b = [tool_call("tb1", "news", {}), tool_call("tb2", "weather", {"city": "Paris"})]
    pid, _ = write_panel(
        ledger,
        [("a", "", a), ("b", "Let me check.", b), ("c", "Probably, it is June.", [])],
        delivered=(None, ["ta"]),
        finish=finish,
    )
    messages = [
        Q,
        {"role": "assistant", "content": None, "tool_calls": a},
        {"role": "tool", "tool_call_id": "ta", "content": "sunny, 24 C"},
    ]
    return pid, messages


def test_a_tool_conversation_as_each_seat_sees_it(ledger, sim):
    pid, messages = tool_panel(ledger)
    conv = Conversation(messages, ledger)
    assert conv.for_seat("a") == messages
    as_b = conv.for_seat("b")
    assert as_b[1]["tool_calls"] == [tool_call("tb2", "weather", {"city": "Paris"})]
    assert as_b[1]["content"] == "Let me check.\n\n(tool call not run: news {})"
    assert as_b[2] == {"role": "tool", "tool_call_id": "tb2", "content": "sunny, 24 C"}
    as_c = conv.for_seat("c")
    assert as_c[1] == {"role": "assistant", "content": "Probably, it is June."}
    assert as_c[2]["role"] == "user" and as_c[2]["content"].startswith(history.NOTE_HEAD)
    assert 'weather {"city": "Paris"}: sunny, 24 C' in as_c[2]["content"]
    assert conv.for_seat("new") == messages
    # every seat's history is one an upstream takes; the reply as given is not, for b or c
    for alias in ("a", "b", "c", "new"):
        status, said = upstream_takes(sim, conv.for_seat(alias))
        assert status == 200, (alias, said)
    naive = [Q, {"role": "assistant", "content": "Probably, it is June."}, messages[2]]
    status, said = upstream_takes(sim, naive)
    assert status == 400 and "must answer a tool call" in said
    assert sticky_alias(messages, ledger) == "a"
    assert (
        sticky_alias(
            messages
            + [
                {"role": "assistant", "content": "It is warm."},
                {"role": "user", "content": "And Rome?"},
            ],
            ledger,
        )
        == "a"
    )


def test_a_picked_reply_whose_panel_still_runs(ledger, sim):
    pid, messages = tool_panel(ledger, finish=False)
    assert ledger.panel(pid) is None
    conv = Conversation(messages, ledger)
    # only the picked seat's own answer is known yet: it is the reply itself, for everyone
    for alias in ("a", "b", "c"):
        assert conv.for_seat(alias) == messages
        assert upstream_takes(sim, conv.for_seat(alias))[0] == 200
    assert sticky_alias(messages, ledger) == "a"


def test_tool_ids_issued_twice_name_no_owner(ledger):
    same = [tool_call("call_0", "weather", {"city": "Paris"})]
    first, _ = write_panel(ledger, [("a", "", same), ("b", "", same)], delivered=(None, ["call_0"]))
    assert ledger.tool_call_owner("call_0") is None
    messages = [
        Q,
        {"role": "assistant", "content": None, "tool_calls": same},
        {"role": "tool", "tool_call_id": "call_0", "content": "sunny"},
    ]
    assert for_seat(messages, "b", ledger) == messages and sticky_alias(messages, ledger) is None
    # an id that one seat issued in one panel, then another panel reused
    write_panel(ledger, [("a", "", [tool_call("t9", "news", {})])], delivered=(None, ["t9"]))
    assert ledger.tool_call_owner("t9")[1] == "a"
    write_panel(ledger, [("b", "", [tool_call("t9", "news", {})])], delivered=(None, ["t9"]))
    assert ledger.tool_call_owner("t9") is None
    # the same text delivered by two panels names neither
    write_panel(ledger, [("a", "Done.", [])], delivered=("Done.", []))
    assert ledger.delivered_panel("Done.") is not None
    write_panel(ledger, [("b", "Done.", [])], delivered=("Done.", []))
    assert ledger.delivered_panel("Done.") is None


def test_history_indexes_survive_snapshot_replay_and_other_processes(tmp_path):
    runs = tmp_path / "runs" / "gateway"
    with Ledger(runs) as writer, Ledger(runs) as reader:
        pid, messages = tool_panel(writer)
        assert reader.tool_call_owner("tb1") == (pid, "b")
        assert reader.delivered_panel("  x  ") is None
        writer.record_delivered(pid, "  the text given \n", ["ta"])
        assert reader.delivered_panel("the text given") == pid
    for _ in range(2):
        with Ledger(runs) as again:
            assert again.tool_call_owner("ta") == (pid, "a")
            assert again.delivered_panel("the text given") == pid
            assert Conversation(messages, again).for_seat("b")[2]["tool_call_id"] == "tb2"
        (runs / "index.json").unlink()  # the second time: replayed from the logs
    with Ledger(runs, recent_history=1) as small:
        assert (
            small.tool_call_owner("ta") is None and small.delivered_panel("the text given") == pid
        )
