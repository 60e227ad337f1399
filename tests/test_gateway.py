"""End to end: the openai package → the gateway → the simulated upstream, over real sockets."""

import json
import socket
import threading
import time

import openai
import pytest

from conftest import Gateway, PATIENCE, move_to, read_jsonl, set_limits
from panelist.gateway import make_gateway
from panelist.metrics.roster.roster import Roster


def ask(gw, content="Review: def add(a, b): return a - b", **extra):
    return gw.post(
        "/v1/chat/completions",
        {"model": "bench/trio", "messages": [{"role": "user", "content": content}], **extra},
    )


def test_openai_client_gets_every_seat_labelled(gateway, home):
    with openai.OpenAI(
        base_url=gateway.url + "/v1", api_key="local", max_retries=0, timeout=PATIENCE
    ) as client:
        r = client.chat.completions.create(
            model="bench/trio", messages=[{"role": "user", "content": "Review: x = 1/0"}]
        )
    bench = r.model_extra["bench"]
    seats = bench["seats"]
    assert [s["seat"] for s in seats] == ["member"] * 3 + ["explorer"] * 2
    assert [s["alias"] for s in seats[:3]] == ["fast", "mid", "slow"]
    bad = [s for s in seats if s["status"] != "ok" or not s["answer"].startswith("[simulated")]
    assert not bad, f"seats without a simulated answer: {bad}"
    foreign = [s["call"] for s in seats if not s["call"].startswith(bench["panel"] + ".")]
    assert not foreign, f"call ids outside panel {bench['panel']}: {foreign}"
    assert len({s["call"] for s in seats}) == 5
    content = r.choices[0].message.content
    for s in seats:
        assert s["call"] in content and s["alias"] in content
    assert bench["collection"] == "bench/trio" and bench["shape"] == "general"
    assert "/bench/verdict" in bench["verdict"]
    assert r.usage.total_tokens > 0
    # the call log has the panel; the evidence log has every seat
    calls = read_jsonl(home.gateway_runs / "calls.jsonl")
    assert [c["panel"] for c in calls] == [bench["panel"]]
    assert calls[0]["prompt"].endswith("Review: x = 1/0")
    evidence = [e for e in read_jsonl(home.gateway_runs / "evidence.jsonl") if e["kind"] == "seat"]
    assert sorted(e["call"] for e in evidence) == sorted(s["call"] for s in seats)


def test_seats_are_asked_at_once(gateway, home, gated):
    # every member waits at a gate that opens only once all three are waiting: asked one after
    # another, the second would never be asked and the request would hang
    move_to(home, gated, "fast", "mid", "slow")
    replies = []
    caller = threading.Thread(target=lambda: replies.append(ask(gateway)))
    caller.start()
    try:
        assert gated.wait_arrived("fast", "mid", "slow"), f"only {gated.arrived} were asked"
    finally:
        gated.open("fast", "mid", "slow")
        caller.join(PATIENCE)
    assert not caller.is_alive(), "the panel did not answer once its seats were let go"
    ((status, body, _),) = replies
    assert status == 200
    assert {s["alias"]: s["status"] for s in body["bench"]["seats"][:3]} == {
        "fast": "ok",
        "mid": "ok",
        "slow": "ok",
    }


def test_models_list_describes_each_collection(gateway, home):
    Roster(home).add_model("fast", "sim", family="fast", context=8_000, vision=True, tools=True)
    status, body, _ = gateway.get("/v1/models")
    assert status == 200 and body["object"] == "list"
    trio, merged, picked = body["data"]
    assert trio["id"] == "bench/trio" and trio["reply"] == "all"
    assert merged["id"] == "bench/trio:merged" and merged["reply"] == "merged"
    assert picked["id"] == "bench/trio:pick" and picked["reply"] == "pick"
    assert merged["members"] == trio["members"]
    assert trio["description"] == "Three simulated reviewers"
    assert trio["tags"] == ["test", "code"] and trio["members"] == ["fast", "mid", "slow"]
    assert trio["shape"] == "general" and trio["explorers"] == 2
    # every member takes 8,000 tokens; up to 100,000 some member is still seated
    assert trio["together"] == {
        "context_window": 8_000,
        "max_context_window": 100_000,
        "capabilities": [],
    }


@pytest.mark.parametrize(
    "body, status, fragment",
    [
        ({"messages": [{"role": "user", "content": "hi"}]}, 400, "no collection named"),
        (
            {"model": "bench/nope", "messages": [{"role": "user", "content": "hi"}]},
            404,
            "unknown collection",
        ),
        (
            {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]},
            404,
            "not a collection",
        ),
    ],
)
def test_refusals_list_every_collection(gateway, body, status, fragment):
    got, reply, _ = gateway.post("/v1/chat/completions", body)
    assert got == status
    message = reply["error"]["message"]
    assert fragment in message
    assert "bench/trio [test, code]: Three simulated reviewers" in message


@pytest.mark.parametrize(
    "body, param",
    [
        ({"model": "bench/trio", "messages": "hi"}, "messages"),
        (
            {"model": "bench/trio", "messages": [{"role": "user", "content": 5}]},
            "messages[0].content",
        ),
        (
            {"model": "bench/trio", "messages": [{"role": "robot", "content": "x"}]},
            "messages[0].role",
        ),
        ({"model": 7, "messages": [{"role": "user", "content": "x"}]}, "model"),
        (
            {
                "model": "bench/trio",
                "messages": [{"role": "user", "content": "x"}],
                "temperature": "hot",
            },
            "temperature",
        ),
        (
            {
                "model": "bench/trio",
                "messages": [{"role": "user", "content": "x"}],
                "stream": "yes",
            },
            "stream",
        ),
    ],
)
def test_wrong_types_name_the_field(gateway, body, param):
    status, reply, _ = gateway.post("/v1/chat/completions", body)
    assert status == 400
    assert reply["error"]["param"] == param and param in reply["error"]["message"]
    assert reply["error"]["type"] == "invalid_request_error"


def test_malformed_json_route_and_method(gateway):
    status, reply, _ = gateway.post("/v1/chat/completions", raw=b'{"model": ')
    assert status == 400 and "not valid JSON" in reply["error"]["message"]
    status, reply, _ = gateway.post("/v1/chat/completions", raw=b"[1, 2]")
    assert status == 400 and "JSON object" in reply["error"]["message"]
    status, reply, _ = gateway.get("/v1/nothing")
    assert status == 404 and "/v1/chat/completions" in reply["error"]["message"]
    status, reply, headers = gateway.get("/v1/chat/completions")
    assert status == 405 and headers["Allow"] == "POST"
    status, reply, headers = gateway.request("DELETE", "/v1/models")
    assert status == 405 and "GET" in reply["error"]["message"]


def test_an_unexpected_fault_is_a_500_with_a_request_id(gateway, home, capfd):
    home.file("collections.json").write_text('{"collections": {"x": {"members": 5}}}')
    status, reply, _ = gateway.get("/v1/models")
    assert status == 500
    rid = reply["error"]["code"]
    assert rid.startswith("req_") and rid in reply["error"]["message"]
    assert rid in capfd.readouterr().err  # the traceback on stderr carries the same id


def test_a_hanging_seat_is_named_and_the_panel_answers(gateway, home, sim):
    # the deadline leaves the other seats (answering at once) ample room on a loaded machine
    set_limits(home, seat_timeout=2)
    sim.script("slow", fail="hang")  # never answers: only the seat's deadline ends the wait
    status, body, _ = ask(gateway)
    assert status == 200
    seats = {s["alias"]: s for s in body["bench"]["seats"]}
    assert seats["slow"]["status"] == "error" and "timeout" in seats["slow"]["error"]
    assert seats["fast"]["status"] == "ok"
    assert "error" in body["choices"][0]["message"]["content"]
    assert sim.wait_disconnects(1, timeout=PATIENCE)  # the upstream call was really abandoned


def test_failed_and_empty_seats_never_fail_the_panel(gateway, sim):
    sim.script("fast", fail="server_error")
    sim.script("mid", fail="empty")
    status, body, _ = ask(gateway)
    assert status == 200
    seats = {s["alias"]: s for s in body["bench"]["seats"]}
    assert seats["fast"]["status"] == "error" and seats["fast"]["error"].startswith("server_error")
    assert seats["mid"]["status"] == "empty"
    assert seats["slow"]["status"] == "ok"


def test_a_429_cools_a_model_out_of_explorer_seats(gateway, home, sim):
    sim.script("x-one", fail="rate_limit", retry_after=120)
    before = time.monotonic()
    status, first, _ = ask(gateway)
    explorers = [s for s in first["bench"]["seats"] if s["seat"] == "explorer"]
    assert [s["alias"] for s in explorers] == ["x-one", "x-three"]  # never seated, alias order
    assert explorers[0]["status"] == "error" and "rate_limit" in explorers[0]["error"]
    status, second, _ = ask(gateway)
    between = time.monotonic() - before  # the cooldown can have run at most this long
    aliases = [s["alias"] for s in second["bench"]["seats"]]
    assert "x-one" not in aliases
    (skip,) = [s for s in second["bench"]["skipped"] if s["alias"] == "x-one"]
    left = float(skip["why"].split("for ")[1].split()[0])  # whole seconds, rounded
    assert "cooling down" in skip["why"] and 120 - between - 1 <= left <= 120, (between, skip)
    assert sim.count("x-one") == 1  # never retried into the limit


def test_no_seat_to_fill_is_a_503_saying_why(gateway, home, sim):
    set_limits(home, max_explorers=0)
    for alias in ("fast", "mid", "slow"):
        sim.script(alias, fail="rate_limit", retry_after=60)
    status, body, headers = ask(gateway)  # every seat rate limited: a 503, not a 200
    assert status == 503 and body["error"]["code"] == "all_seats_rate_limited"
    assert {s["status"] for s in body["error"]["seats"]} == {"error"}
    assert 1 <= int(headers["Retry-After"]) <= 60
    status, body, _ = ask(gateway)
    assert status == 503
    assert "cooling down" in body["error"]["message"] and "fast" in body["error"]["message"]


def test_a_prompt_over_a_members_window_leaves_that_member_out(gateway, home, sim):
    Roster(home).add_model("mid", "sim", family="mid", context=100)
    status, body, _ = ask(gateway, content="x" * 1000)
    assert status == 200
    assert "mid" not in [s["alias"] for s in body["bench"]["seats"]] and sim.count("mid") == 0
    (why,) = [s["why"] for s in body["bench"]["skipped"] if s["alias"] == "mid"]
    assert why.startswith("context window 100 tokens")


def test_tool_definitions_count_against_a_members_window(gateway, home, sim):
    Roster(home).add_model("mid", "sim", family="mid", context=4000)
    big = [
        {
            "type": "function",
            "function": {
                "name": f"tool_{i}",
                "description": "d" * 1000,
                "parameters": {"type": "object", "properties": {"x": {"type": "string"}}},
            },
        }
        for i in range(22)
    ]  # about 22k characters of schema around a two-word prompt
    status, body, _ = gateway.post(
        "/v1/chat/completions",
        {
            "model": "bench/trio:pick",
            "messages": [{"role": "user", "content": "hi there"}],
            "tools": big,
        },
    )
    assert status == 200, body
    assert "mid" not in [s["alias"] for s in body["bench"]["seats"]] and sim.count("mid") == 0
    (why,) = [s["why"] for s in body["bench"]["skipped"] if s["alias"] == "mid"]
    assert why.startswith("context window 4000 tokens")


def test_a_learned_window_only_lowers(gateway, home, sim):
    sim.script("fast", window=50)
    status, body, _ = ask(gateway, content="y" * 400)
    seat = next(s for s in body["bench"]["seats"] if s["alias"] == "fast")
    assert seat["status"] == "error" and seat["error"].startswith("context_length")
    status, body, _ = ask(gateway, content="y" * 400)
    assert status == 200 and sim.count("fast") == 1  # not asked again
    (why,) = [s["why"] for s in body["bench"]["skipped"] if s["alias"] == "fast"]
    assert why.startswith("context window 50 tokens")


def test_verdict_round_trip_over_http(gateway, home):
    _, body, _ = ask(gateway)
    call = body["bench"]["seats"][1]["call"]
    evidence = home.gateway_runs / "evidence.jsonl"
    verdict = {"call": call, "useful": True, "note": "found the real bug", "real": ["a - b"]}
    status, got, _ = gateway.post("/bench/verdict", verdict)
    assert status == 200 and got["written"] and not got["replaced"]
    lines = len(read_jsonl(evidence))
    status, got, _ = gateway.post("/bench/verdict", verdict)
    assert status == 200 and not got["written"]
    assert len(read_jsonl(evidence)) == lines  # the same verdict twice writes nothing
    status, got, _ = gateway.post("/bench/verdict", dict(verdict, useful=False, note="wrong"))
    assert got["written"] and got["replaced"]
    last = read_jsonl(evidence)[-1]
    assert last["kind"] == "verdict" and last["call"] == call and last["useful"] is False
    status, got, _ = gateway.post(
        "/bench/verdict", {"call": "p19990101-999.member1", "useful": True}
    )
    assert status == 404 and "unknown call" in got["error"]["message"]
    for bad, param in (
        ({"call": call, "useful": "yes"}, "useful"),
        ({"call": call, "useful": True, "real": "x"}, "real"),
        ({"useful": True}, "call"),
    ):
        status, got, _ = gateway.post("/bench/verdict", bad)
        assert status == 400 and got["error"]["param"] == param


def explorers(body) -> list[str]:
    return [s["alias"] for s in body["bench"]["seats"] if s["seat"] == "explorer"]


def test_verdicts_feed_back_into_seating(gateway, home):
    set_limits(home, max_explorers=1)
    seen = [explorers(ask(gateway)[1]) for _ in range(3)]
    assert seen == [["x-one"], ["x-three"], ["x-two"]]  # never seated first, in alias order
    # one panel seats all three at the same moment, so their ages are equal and only verdicts
    # can tell them apart (ages from separate panels would make the outcome depend on timing)
    set_limits(home, max_explorers=3, max_calls=6)
    _, body, _ = ask(gateway)
    assert sorted(explorers(body)) == ["x-one", "x-three", "x-two"]
    call = next(s["call"] for s in body["bench"]["seats"] if s["alias"] == "x-three")
    status, _, _ = gateway.post("/bench/verdict", {"call": call, "useful": True})
    assert status == 200
    set_limits(home, max_explorers=1, max_calls=5)
    # a useful verdict doubles x-three's claim over the other two, seated with it
    assert explorers(ask(gateway)[1]) == ["x-three"]


def test_keys_are_sent_but_never_written(gateway, home, sim, monkeypatch):
    secret = "sk-sim-very-secret-0042"
    monkeypatch.setenv("PANELIST_KEY_SIM", secret)
    sim.script("fast", require_key=secret)
    sim.script("mid", require_key="another-key", echo_auth=True)
    _, body, _ = ask(gateway)
    seats = {s["alias"]: s for s in body["bench"]["seats"]}
    assert seats["fast"]["status"] == "ok"
    assert seats["mid"]["status"] == "error" and seats["mid"]["error"].startswith("auth")
    assert secret not in json.dumps(body)
    for f in home.root.rglob("*"):
        if f.is_file():
            assert secret.encode() not in f.read_bytes(), f


def test_panel_record_is_served_back(gateway):
    _, body, _ = ask(gateway)
    status, record, _ = gateway.get(f"/bench/panels/{body['bench']['panel']}")
    assert status == 200 and len(record["seats"]) == 5
    status, _, _ = gateway.get("/bench/panels/p20000101-99999")
    assert status == 404


def test_stream_true_gets_the_reply_as_events(gateway):
    with openai.OpenAI(
        base_url=gateway.url + "/v1", api_key="local", max_retries=0, timeout=PATIENCE
    ) as client:
        chunks = list(
            client.chat.completions.create(
                model="bench/trio", messages=[{"role": "user", "content": "hi"}], stream=True
            )
        )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert "## Seat 1" in text
    assert len(chunks[-1].model_extra["bench"]["seats"]) == 5


def test_keep_alive_connection_serves_several_requests(gateway):
    host, port = gateway.server.server_address[:2]
    with socket.create_connection((host, port), timeout=PATIENCE) as s, s.makefile("rb") as f:
        for _ in range(3):
            s.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n" % port)
            assert f.readline().startswith(b"HTTP/1.1 200")
            length = 0
            while (line := f.readline()) != b"\r\n":
                if line.lower().startswith(b"content-length"):
                    length = int(line.split(b":")[1])
            assert json.loads(f.read(length))["ok"] is True


def test_the_verdict_hint_uses_the_public_url_behind_a_proxy(home):
    with Gateway(make_gateway(home, env={"PANELIST_PUBLIC_URL": "https://bench.example/"})) as gw:
        status, body, _ = gw.post(
            "/v1/chat/completions",
            {"model": "bench/trio", "messages": [{"role": "user", "content": "hi"}]},
            headers={"Host": "bench.example"},
        )
    assert status == 200
    assert body["bench"]["verdict"].startswith("POST https://bench.example/bench/verdict ")
