"""Pick mode end to end: one seat's answer verbatim, for agents (the openai package's tool loop,
LangChain's bind_tools), sent as soon as it is known while slower seats run on and are logged."""

import json
import threading

import httpx
import pytest

from conftest import (
    Gateway,
    PATIENCE,
    move_to,
    openai_client,
    raw_stream,
    read_jsonl,
    set_limits,
    wait_until,
)
from panelist.gateway import make_gateway

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "lookup_order",
            "description": "Find an order by its number",
            "parameters": {
                "type": "object",
                "properties": {"number": {"type": "string"}},
                "required": ["number"],
            },
        },
    }
]
ASK = [{"role": "user", "content": "Where is order 42?"}]
LOOKUP = [{"name": "lookup_order", "arguments": {"number": "42"}}]


def panels_logged(home) -> dict:
    path = home.gateway_runs / "calls.jsonl"
    return {r["panel"]: r for r in read_jsonl(path)} if path.exists() else {}


def judge_useful(gateway, alias: str) -> None:
    """One panel in all mode, and a useful verdict on ``alias``'s seat in it."""
    status, body, _ = gateway.post("/v1/chat/completions", {"model": "bench/trio", "messages": ASK})
    assert status == 200, body
    call = next(s["call"] for s in body["bench"]["seats"] if s["alias"] == alias)
    assert gateway.post("/bench/verdict", {"call": call, "useful": True})[0] == 200


def test_the_openai_tool_loop_through_pick_keeps_the_best_member(gateway, home, sim):
    for alias in ("fast", "mid", "slow"):
        sim.script(alias, tool_calls=LOOKUP)
    judge_useful(gateway, "mid")  # mid's useful rate is now the best of the members
    with openai_client(gateway) as client:
        raw = client.chat.completions.with_raw_response.create(
            model="bench/trio:pick", messages=ASK, tools=TOOLS
        )
        first = raw.parse()
        panel = raw.headers["x-panelist-panel"]
        choice = first.choices[0]
        assert choice.finish_reason == "tool_calls" and choice.message.content is None
        (call,) = choice.message.tool_calls
        assert call.function.name == "lookup_order"
        assert json.loads(call.function.arguments) == {"number": "42"}
        bench = first.model_extra["bench"]
        assert bench["panel"] == panel and bench["reply"] == "pick"
        assert bench["picked"]["alias"] == "mid" and bench["picked"]["call"] == f"{panel}.member2"
        assert len(bench["seats"]) == 5  # every seat is listed, whatever it is doing

        # the tool runs; meanwhile the first panel's slower seats end and it is logged whole
        assert wait_until(lambda: panel in panels_logged(home))
        history = ASK + [
            choice.message.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": call.id, "content": "shipped Monday"},
        ]
        second = client.chat.completions.create(
            model="bench/trio:pick", messages=history, tools=TOOLS
        )
    reply = second.choices[0]
    assert reply.finish_reason == "stop" and not reply.message.tool_calls
    assert reply.message.content == "[simulated mid] The tools said: shipped Monday."
    assert second.model_extra["bench"]["picked"]["alias"] == "mid"

    # every seat of the second turn saw the tool result: as a tool message answering a call in
    # its own history (its own call, or the picked one when it did not sit), as a note when it
    # sat in the first panel and answered with text instead
    def turn_two():
        return [
            r
            for r in sim.requests
            if any("shipped Monday" in str(m.get("content")) for m in r["body"]["messages"])
        ]

    assert wait_until(lambda: len(turn_two()) == 5)
    texted = {s["alias"] for s in panels_logged(home)[panel]["seats"] if s["status"] == "ok"}
    last = {r["model"]: r["body"]["messages"][-1] for r in turn_two()}
    assert {m for m, said in last.items() if said["role"] != "tool"} == texted & set(last)
    assert {"fast", "mid", "slow"}.isdisjoint(texted)
    assert all("shipped Monday" in said["content"] for said in last.values())
    second_panel = second.model_extra["bench"]["panel"]
    assert wait_until(lambda: {panel, second_panel} <= set(panels_logged(home)))
    for pid in (panel, second_panel):
        record = panels_logged(home)[pid]
        assert record["picked"]["alias"] == "mid" and record["abandoned"] is False
        assert len(record["seats"]) == 5 and record["reply"] == "pick"


def test_langchain_bind_tools_through_pick_returns_the_tool_call(gateway, sim):
    from langchain_openai import ChatOpenAI

    for alias in ("fast", "mid", "slow"):
        sim.script(alias, tool_calls=LOOKUP)

    def lookup_order(number: str) -> str:
        """Find an order by its number."""
        return "shipped"

    with httpx.Client(timeout=PATIENCE) as http:
        llm = ChatOpenAI(
            model="bench/trio:pick",
            base_url=gateway.url + "/v1",
            api_key="local",
            max_retries=0,
            http_client=http,
        )
        said = llm.bind_tools([lookup_order]).invoke("Where is order 42?")
    assert [c["name"] for c in said.tool_calls] == ["lookup_order"]
    assert said.tool_calls[0]["args"] == {"number": "42"}


def test_pick_replies_before_a_slow_seat_ends_and_logs_the_panel_when_it_does(home, gated):
    set_limits(home, max_explorers=0)
    move_to(home, gated, "slow")  # held at its gate; fast and mid answer from the simulator
    with Gateway(make_gateway(home, env={})) as gw:
        status, body, headers = gw.post(
            "/v1/chat/completions", {"model": "bench/trio:pick", "messages": ASK}
        )
        assert status == 200, body
        assert not gated.gates["slow"].is_set()  # slow is still held
        bench = body["bench"]
        panel = headers["X-Panelist-Panel"]
        assert bench["panel"] == panel and bench["picked"]["alias"] == "fast"
        assert body["choices"][0]["message"]["content"].startswith("[simulated fast]")
        statuses = {s["alias"]: s["status"] for s in bench["seats"]}
        assert statuses["fast"] == "ok" and statuses["slow"] == "running"
        assert panel not in panels_logged(home)  # a seat is still running: not logged yet
        gated.open("slow")
        assert wait_until(lambda: panel in panels_logged(home)), "the panel was never logged"
    record = panels_logged(home)[panel]
    assert record["abandoned"] is False and record["picked"] == bench["picked"]
    assert {s["alias"]: s["status"] for s in record["seats"]} == {
        "fast": "ok",
        "mid": "ok",
        "slow": "ok",
    }
    # the slow seat took its evidence line and is owed a verdict like any answer
    owed = {
        r["call"]
        for r in read_jsonl(home.gateway_runs / "evidence.jsonl")
        if r.get("kind") == "seat" and r["status"] == "ok"
    }
    assert f"{panel}.member3" in owed


def test_pick_usage_is_the_picked_seats_and_usage_total_every_ended_seats(home, gated):
    set_limits(home, max_explorers=0)
    move_to(home, gated, "slow")  # held at its gate while the pick goes out
    with Gateway(make_gateway(home, env={})) as gw:
        status, body, headers = gw.post(
            "/v1/chat/completions", {"model": "bench/trio:pick", "messages": ASK}
        )
        assert status == 200, body
        bench = body["bench"]
        # the seats that ended by the time the pick went out (mid may or may not have)
        ended = [s["tokens"] for s in bench["seats"] if s["status"] != "running"]
        running = [s["alias"] for s in bench["seats"] if s["status"] == "running"]
        assert "slow" in running and bench["picked"]["alias"] == "fast"
        fast = next(s["tokens"] for s in bench["seats"] if s["alias"] == "fast")
        assert body["usage"] == {
            "prompt_tokens": fast["prompt"],
            "completion_tokens": fast["completion"],
            "total_tokens": fast["total"],
        }
        assert bench["usage_total"] == {
            "prompt_tokens": sum(t["prompt"] for t in ended),
            "completion_tokens": sum(t["completion"] for t in ended),
            "total_tokens": sum(t["total"] for t in ended),
            "seats_running": len(running),
        }
        gated.open("slow")
        assert wait_until(lambda: headers["X-Panelist-Panel"] in panels_logged(home))


def test_usage_total_counts_every_seat_once_all_ended(home, sim, capsys):
    from panelist.metrics.cli.main import main

    for mode in ("pick", "all"):
        assert (
            main(["ask", f"trio:{mode}", "Where is order 42?", "--data", str(home.root), "--json"])
            == 0
        )
        reply = json.loads(capsys.readouterr().out)
        seats = reply["bench"]["seats"]
        assert len(seats) == 5 and {s["status"] for s in seats} == {"ok"}
        total = reply["bench"]["usage_total"]
        assert total == {
            "prompt_tokens": sum(s["tokens"]["prompt"] for s in seats),
            "completion_tokens": sum(s["tokens"]["completion"] for s in seats),
            "total_tokens": sum(s["tokens"]["total"] for s in seats),
        }
        if mode == "all":
            assert reply["usage"] == {k: v for k, v in total.items()}


def test_pick_waits_for_the_preferred_member_even_when_others_answered(home, gated, sim):
    set_limits(home, max_explorers=0)
    with Gateway(make_gateway(home, env={})) as gw:
        judge_useful(gw, "slow")  # slow now ranks first
        move_to(home, gated, "slow")
        done = {}

        def ask():
            done["reply"] = gw.post(
                "/v1/chat/completions", {"model": "bench/trio:pick", "messages": ASK}
            )

        asker = threading.Thread(target=ask)
        asker.start()
        try:
            assert gated.wait_arrived("slow")
            evidence = home.gateway_runs / "evidence.jsonl"

            def answered(alias):  # seat lines: one from the judged panel, one from this one
                return sum(
                    r.get("kind") == "seat" and r["alias"] == alias for r in read_jsonl(evidence)
                )

            assert wait_until(lambda: answered("fast") == 2 and answered("mid") == 2)
            assert "reply" not in done, "a faster seat jumped the order"
        finally:
            gated.open("slow")
            asker.join(PATIENCE)
    status, body, _ = done["reply"]
    assert status == 200 and body["bench"]["picked"]["alias"] == "slow"
    assert body["choices"][0]["message"]["content"].startswith("[gated slow]")


def test_a_failed_pick_fails_over_to_the_next_member_and_says_so(gateway, sim):
    sim.script("fast", fail="server_error")
    status, body, _ = gateway.post(
        "/v1/chat/completions", {"model": "bench/trio", "messages": ASK, "bench": {"reply": "pick"}}
    )
    assert status == 200, body
    bench = body["bench"]
    assert bench["picked"]["alias"] == "mid"
    assert "member1 fast: server_error" in bench["note"] and "picked member2 mid" in bench["note"]


def test_explorers_answer_when_every_member_failed(gateway, sim):
    for alias in ("fast", "mid", "slow"):
        sim.script(alias, fail="server_error")
    status, body, _ = gateway.post(
        "/v1/chat/completions", {"model": "bench/trio:pick", "messages": ASK}
    )
    assert status == 200, body
    picked = body["bench"]["picked"]
    assert picked["seat"] == "explorer" and picked["alias"] == "x-one"  # the first explorer
    assert "picked explorer1 x-one" in body["bench"]["note"]


def stream_events(gw, body) -> tuple[str, list]:
    """A raw streamed request: its status line and its data events, JSON-decoded."""
    head, rest = raw_stream(gw, body)
    events = [line[6:] for line in rest.decode().split("\n") if line.startswith("data: ")]
    return head, [e if e == "[DONE]" else json.loads(e) for e in events]


def test_streaming_pick_sends_the_picked_text_and_tool_calls_as_openai_does(gateway, sim):
    with openai_client(gateway) as client:
        with client.chat.completions.stream(model="bench/trio:pick", messages=ASK) as stream:
            text = "".join(e.delta for e in stream if e.type == "content.delta")
            final = stream.get_final_completion()
        assert text.startswith("[simulated fast]")
        assert final.choices[0].finish_reason == "stop"

        for alias in ("fast", "mid", "slow"):
            sim.script(
                alias, tool_calls=LOOKUP + [{"name": "lookup_order", "arguments": {"number": "43"}}]
            )
        with client.chat.completions.stream(
            model="bench/trio:pick", messages=ASK, tools=TOOLS
        ) as stream:
            for _ in stream:
                pass
            final = stream.get_final_completion()
    message = final.choices[0].message
    assert final.choices[0].finish_reason == "tool_calls"
    assert [json.loads(c.function.arguments)["number"] for c in message.tool_calls] == ["42", "43"]
    assert all(c.id.startswith("call_sim") for c in message.tool_calls)

    head, events = stream_events(
        gateway, {"model": "bench/trio:pick", "messages": ASK, "tools": TOOLS, "stream": True}
    )
    assert head.startswith("HTTP/1.1 200") and "x-panelist-panel: p" in head.lower()
    deltas = [e["choices"][0]["delta"] for e in events[:-1]]
    assert deltas[0] == {"role": "assistant"}
    (calls,) = [d["tool_calls"] for d in deltas if "tool_calls" in d]
    assert [c["index"] for c in calls] == [0, 1]
    assert events[-2]["choices"][0]["finish_reason"] == "tool_calls"
    assert events[-2]["bench"]["picked"]["alias"] == "fast" and "usage" in events[-2]
    assert events[-1] == "[DONE]"


@pytest.mark.parametrize("mode", ["pick", "merged", "all"])
def test_every_reply_names_its_panel_in_a_header(gateway, mode):
    status, body, headers = gateway.post(
        "/v1/chat/completions", {"model": f"bench/trio:{mode}", "messages": ASK}
    )
    assert status == 200 and headers["X-Panelist-Panel"] == body["bench"]["panel"]


def test_a_browser_app_may_read_the_panel_header(home):
    app = "https://app.example"
    with Gateway(make_gateway(home, env={"PANELIST_ALLOWED_ORIGINS": app})) as gw:
        status, body, headers = gw.post(
            "/v1/chat/completions",
            {"model": "bench/trio:pick", "messages": ASK},
            headers={"Origin": app},
        )
    assert status == 200 and headers["X-Panelist-Panel"] == body["bench"]["panel"]
    exposed = [h.strip() for h in headers["Access-Control-Expose-Headers"].split(",")]
    assert "X-Panelist-Panel" in exposed and "Retry-After" in exposed


def test_models_list_offers_pick(gateway):
    status, body, _ = gateway.get("/v1/models")
    assert {"bench/trio", "bench/trio:merged", "bench/trio:pick"} <= {m["id"] for m in body["data"]}


def test_ask_on_the_command_line_picks_and_logs_the_whole_panel(home, sim, capsys):
    from panelist.metrics.cli.main import main

    sim.script("slow", latency=0.3)  # still running when the pick is known
    code = main(["ask", "trio:pick", "Where is order 42?", "--data", str(home.root)])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert out.startswith("[simulated fast]") and "## Seat" not in out
    (record,) = read_jsonl(home.gateway_runs / "calls.jsonl")  # logged before ask returned
    assert record["picked"]["alias"] == "fast" and len(record["seats"]) == 5
    assert {s["alias"]: s["status"] for s in record["seats"]}["slow"] == "ok"


def test_a_server_closed_while_seats_run_behind_a_pick_still_logs_the_panel(home, gated):
    set_limits(home, max_explorers=0)
    move_to(home, gated, "slow")  # held at its gate until the server closes
    with Gateway(make_gateway(home, env={})) as gw:
        status, body, headers = gw.post(
            "/v1/chat/completions", {"model": "bench/trio:pick", "messages": ASK}
        )
        assert status == 200, body
        panel = headers["X-Panelist-Panel"]
        assert gated.wait_arrived("slow")
        assert panel not in panels_logged(home)
    # closed: the held seat was cut and the panel written before the logs closed
    record = panels_logged(home)[panel]
    statuses = {s["alias"]: s["status"] for s in record["seats"]}
    assert statuses["fast"] == "ok" and statuses["slow"] == "cancelled"
    assert record["abandoned"] is False, "the reply was delivered: not an abandoned panel"
    assert "the server closed" in record["note"]
    lines = read_jsonl(home.gateway_runs / "evidence.jsonl")
    seats = {
        r["alias"]: r["status"]
        for r in lines
        if r.get("kind") == "seat" and r.get("panel") == panel
    }
    assert seats["slow"] == "cancelled" and seats["fast"] == "ok"


def test_a_server_closed_while_a_caller_waits_answers_it_and_logs_the_panel(home, gated):
    # the caller waits for every answer; the server closes under it: the held seat is cut, the
    # caller is answered with what came, and the panel is written before the logs close
    set_limits(home, max_explorers=0)
    move_to(home, gated, "slow")
    replies = []
    with Gateway(make_gateway(home, env={})) as gw:
        thread = threading.Thread(
            target=lambda: replies.append(
                gw.post("/v1/chat/completions", {"model": "bench/trio", "messages": ASK})
            )
        )
        thread.start()
        try:
            assert gated.wait_arrived("slow")
            # the others have answered (their seat lines are written as they end) before the close
            assert wait_until(lambda: {"fast", "mid"} <= _answered(home))
        finally:
            gw.server.close()
            thread.join()
    [(status, body, headers)] = replies
    assert status == 200, body
    panel = headers["X-Panelist-Panel"]
    answers = {s["alias"]: s["status"] for s in body["bench"]["seats"]}
    assert answers["fast"] == "ok" and answers["slow"] == "cancelled"
    record = panels_logged(home)[panel]
    assert {s["alias"]: s["status"] for s in record["seats"]}["slow"] == "cancelled"
    assert record["abandoned"] is False and "the server closed" in record["note"]


def _answered(home) -> set[str]:
    """The aliases whose seats have answered, by their evidence lines so far."""
    path = home.gateway_runs / "evidence.jsonl"
    lines = read_jsonl(path) if path.exists() else []
    return {r["alias"] for r in lines if r.get("kind") == "seat" and r.get("status") == "ok"}
