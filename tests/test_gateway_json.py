"""JSON at the gateway's edge: what callers send is read with ``jsonwire`` (a lone surrogate
becomes U+FFFD, nesting is bounded), so a bad character never costs a reply or a log line."""

import json

from conftest import read_jsonl
from test_replies import EventStream

# the escape as a caller's JSON carries it: six ASCII bytes naming half of a surrogate pair
SURROGATE = (
    b'{"model": "bench/trio", "messages": [{"role": "user", "content": "why \\ud800 here?"}]}'
)


def logged(gateway, home, panel: str) -> dict:
    record = gateway.server.panels.ledger.panel(panel)  # through its panels.idx slot
    assert record is not None and record["panel"] == panel
    assert "why \ufffd here?" in record["prompt"]
    lines = read_jsonl(home.gateway_runs / "calls.jsonl")  # every line still parses
    assert [r["panel"] for r in lines].count(panel) == 1
    return record


def test_a_lone_surrogate_in_a_message_becomes_u_fffd(gateway, home, sim):
    status, reply, _ = gateway.post("/v1/chat/completions", raw=SURROGATE)
    assert status == 200
    assert [s["status"] for s in reply["bench"]["seats"]].count("ok") >= 3
    logged(gateway, home, reply["bench"]["panel"])
    sent = [json.dumps(r["body"], ensure_ascii=False) for r in sim.requests]
    assert sent and all("why \ufffd here?" in text for text in sent)


def test_a_lone_surrogate_in_a_streamed_request(gateway, home):
    body = {
        "model": "bench/trio",
        "stream": True,
        "messages": [{"role": "user", "content": "why \ud800 here?"}],
    }
    assert b"why \\ud800 here?" in json.dumps(body).encode()  # what EventStream sends
    with EventStream(gateway, body) as stream:
        status, events = stream.status, stream.rest()
    assert b" 200 " in status
    data = [payload for kind, payload in events if kind == "data"]
    assert data[-1] == "[DONE]"
    final = data[-2]
    assert final["choices"][0]["finish_reason"] == "stop" and "error" not in final
    logged(gateway, home, final["bench"]["panel"])


def test_a_body_nested_past_the_bound_is_a_400(gateway, home):
    deep = b"[" * 5_000 + b"]" * 5_000
    raw = b'{"model": "bench/trio", "messages": [{"role": "user", "content": %s}]}' % deep
    status, reply, _ = gateway.post("/v1/chat/completions", raw=raw)
    assert status == 400
    assert reply["error"]["message"].startswith("the JSON nests deeper than 64 levels; ")
    assert (
        not (home.gateway_runs / "calls.jsonl").exists()
        or read_jsonl(home.gateway_runs / "calls.jsonl") == []
    )
    assert gateway.get("/health")[0] == 200
