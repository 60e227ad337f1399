"""Details OpenAI's clients rely on: retrieving one model, the stream's charset, the code for a
prompt over a window, when to come back after a 503, and no NaN passed on upstream."""

import json
import socket

from openai import NotFoundError, OpenAI

from panelist.metrics.roster.collection import Collections
from panelist.metrics.ledger.ledger import Ledger
from panelist.metrics.roster.roster import Roster

ASK = {"model": "bench/trio", "messages": [{"role": "user", "content": "review this"}]}


def test_one_model_is_retrieved_by_its_id(gateway):
    client = OpenAI(base_url=gateway.url + "/v1", api_key="local", max_retries=0)
    try:
        for wanted in ("bench/trio", "bench/trio:merged"):
            model = client.models.retrieve(wanted)
            assert model.id == wanted and model.object == "model"
        try:
            client.models.retrieve("bench/nope")
            raise AssertionError("an unknown model was retrieved")
        except NotFoundError as exc:
            assert exc.body["code"] == "model_not_found"
    finally:
        client.close()
    status, body, _ = gateway.get("/v1/models/bench%2Ftrio")  # percent-encoded, as some send
    assert status == 200 and body["id"] == "bench/trio"


def test_the_stream_says_its_charset(gateway):
    host, port = gateway.server.server_address[:2]
    raw = json.dumps(dict(ASK, stream=True)).encode()
    with socket.create_connection((host, port), timeout=30) as s:
        s.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
            b"Content-Type: application/json\r\nContent-Length: %d\r\n"
            b"Connection: close\r\n\r\n%s" % (port, len(raw), raw)
        )
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head = data.partition(b"\r\n\r\n")[0].decode().lower()
    assert "content-type: text/event-stream; charset=utf-8" in head, head


def test_a_prompt_over_every_window_says_context_length_exceeded(gateway, home):
    path = home.file("gateway.json")
    path.write_text(json.dumps(dict(json.loads(path.read_text()), max_explorers=0)))
    for alias in ("fast", "mid", "slow"):
        Roster(home).add_model(alias, "sim", family=alias, context=10)
    long = {"model": "bench/trio", "messages": [{"role": "user", "content": "x" * 400}]}
    status, body, _ = gateway.post("/v1/chat/completions", long)
    assert status == 400 and body["error"]["code"] == "context_length_exceeded"
    assert "mid (10 tokens)" in body["error"]["message"]


def test_a_panel_of_resting_members_says_when_to_come_back(gateway, home):
    Collections(home).save(Roster(home).view(), "pair", ["fast", "mid"])
    path = home.file("gateway.json")
    path.write_text(json.dumps(dict(json.loads(path.read_text()), max_explorers=0)))
    with Ledger(home.gateway_runs) as ledger:
        ledger.cool_down("fast", 120, "rate limit")
        ledger.cool_down("mid", 30, "rate limit")
    status, body, headers = gateway.post("/v1/chat/completions", dict(ASK, model="bench/pair"))
    assert status == 503, body
    assert 1 <= int(headers["Retry-After"]) <= 30  # the sooner of the two rests


def test_nan_and_infinity_are_refused_not_passed_on(gateway, sim):
    for constant in (b"NaN", b"Infinity", b"-Infinity"):
        raw = (
            b'{"model": "bench/trio", "temperature": %s, "messages": '
            b'[{"role": "user", "content": "hi"}]}' % constant
        )
        status, body, _ = gateway.post("/v1/chat/completions", raw=raw)
        assert status == 400 and "not a JSON number" in body["error"]["message"], body
    assert not sim.requests, "a request with NaN reached an upstream"
