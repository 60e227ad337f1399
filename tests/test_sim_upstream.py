"""The simulated provider, observed over raw HTTP on 127.0.0.1."""

import http.client
import json
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import PATIENCE, wait_until
from panelist.metrics.upstream.sim import DEMO_MODELS, SimUpstream

ROOT = Path(__file__).resolve().parent.parent

# the simulator is a server: every test here talks to it over a socket
pytestmark = pytest.mark.slow


@pytest.fixture
def sim():
    with SimUpstream({"m": {}}) as server:
        yield server


def post(sim, body, headers=None, conn=None):
    """POST to the simulator; returns (status, headers, raw body)."""
    own = conn is None
    conn = conn or http.client.HTTPConnection("127.0.0.1", sim.port, timeout=PATIENCE)
    try:
        conn.request(
            "POST",
            "/v1/chat/completions",
            json.dumps(body),
            {"Content-Type": "application/json", **(headers or {})},
        )
        response = conn.getresponse()
        return response.status, response, response.read()
    finally:
        if own:
            conn.close()


def ask(model="m", text="Please review this design for me now thanks", **extra):
    return {"model": model, "messages": [{"role": "user", "content": text}], **extra}


def error_of(data):
    return json.loads(data)["error"]


def raw_request(sim, body) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", sim.port), timeout=PATIENCE)
    payload = json.dumps(body).encode()
    sock.sendall(
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
        b"\r\nContent-Length: %d\r\n\r\n%s" % (len(payload), payload)
    )
    return sock


def test_answers_like_an_openai_chat_completion(sim):
    status, response, data = post(sim, ask(text="Please review this design for me now thanks"))
    assert status == 200 and response.getheader("Content-Type") == "application/json"
    reply = json.loads(data)
    assert reply["id"].startswith("simcmpl-")
    assert reply["object"] == "chat.completion" and reply["model"] == "m"
    text = reply["choices"][0]["message"]["content"]
    assert text.startswith("[simulated m] ")
    assert "Please review this design for me" in text
    assert reply["choices"][0]["finish_reason"] == "stop"
    prompt = len("Please review this design for me now thanks")
    assert reply["usage"]["prompt_tokens"] == -(-prompt // 4)
    assert reply["usage"]["completion_tokens"] == -(-len(text) // 4)
    assert reply["usage"]["total_tokens"] == (
        reply["usage"]["prompt_tokens"] + reply["usage"]["completion_tokens"]
    )


def test_answer_is_scripted_and_deterministic(sim):
    sim.script("m", answer="exactly this")
    assert json.loads(post(sim, ask())[2])["choices"][0]["message"]["content"] == "exactly this"
    sim.script("m")
    first = json.loads(post(sim, ask())[2])["choices"][0]["message"]["content"]
    assert first == json.loads(post(sim, ask())[2])["choices"][0]["message"]["content"]


def test_lists_models_in_openai_shape():
    with SimUpstream() as sim:
        conn = http.client.HTTPConnection("127.0.0.1", sim.port, timeout=PATIENCE)
        try:
            conn.request("GET", "/v1/models")
            listing = json.loads(conn.getresponse().read())
        finally:
            conn.close()
    assert listing["object"] == "list"
    assert [m["id"] for m in listing["data"]] == list(DEMO_MODELS)
    odd = [m for m in listing["data"] if not m["id"].startswith("sim-") or m["object"] != "model"]
    assert not odd, f"listed models not named sim-… or not of object 'model': {odd}"


def test_unknown_model_is_an_openai_404(sim):
    status, _, data = post(sim, ask("nope"))
    assert status == 404
    assert error_of(data)["code"] == "model_not_found" and "nope" in error_of(data)["message"]
    assert sim.count("nope") == 1


def test_records_every_request(sim):
    before = time.time()
    post(sim, ask(temperature=0.2), {"Authorization": "Bearer k1"})
    after = time.time()
    post(sim, ask("nope"))
    assert [r["model"] for r in sim.requests] == ["m", "nope"]
    first = sim.requests[0]
    assert first["body"]["temperature"] == 0.2
    assert first["headers"]["Authorization"] == "Bearer k1"
    assert before <= first["ts"] <= after  # stamped on arrival, in wall-clock seconds
    assert sim.count("m") == 1 and sim.count("other") == 0


def test_rate_limit_sends_retry_after(sim):
    sim.script("m", fail="rate_limit", retry_after=7)
    status, response, data = post(sim, ask())
    assert status == 429 and response.getheader("Retry-After") == "7"
    assert error_of(data)["code"] == "rate_limit_exceeded"
    sim.script("m", fail="rate_limit")
    assert post(sim, ask())[1].getheader("Retry-After") == "30"


@pytest.mark.parametrize(
    "fail, status, code",
    [
        ("quota", 429, "insufficient_quota"),
        ("server_error", 500, None),
        ("auth", 401, "invalid_api_key"),
    ],
)
def test_failures_have_openai_error_bodies(sim, fail, status, code):
    sim.script("m", fail=fail)
    got, _, data = post(sim, ask())
    assert got == status
    assert error_of(data)["code"] == code and "simulated" in error_of(data)["message"]


def test_context_length_states_the_window(sim):
    sim.script("m", fail="context_length", window=1000)
    status, _, data = post(sim, ask())
    assert status == 400
    error = error_of(data)
    assert error["code"] == "context_length_exceeded"
    assert "maximum context length is 1000 tokens" in error["message"]
    assert "resulted in 11 tokens" in error["message"]


def test_window_refuses_only_longer_prompts(sim):
    sim.script("m", window=10)
    assert post(sim, ask(text="x" * 40))[0] == 200
    status, _, data = post(sim, ask(text="x" * 41))
    assert status == 400 and "maximum context length is 10 tokens" in error_of(data)["message"]


def test_empty_garbage_and_error_body(sim):
    sim.script("m", fail="empty")
    assert json.loads(post(sim, ask())[2])["choices"][0]["message"]["content"] == ""
    sim.script("m", fail="garbage")
    status, _, data = post(sim, ask())
    assert status == 200
    with pytest.raises(ValueError):
        json.loads(data)
    sim.script("m", fail="error_body", message="overloaded, sorry")
    status, _, data = post(sim, ask())
    assert status == 200 and error_of(data)["message"] == "overloaded, sorry"


def test_require_key_and_echo_auth(sim):
    sim.script("m", require_key="right")
    assert post(sim, ask(), {"Authorization": "Bearer right"})[0] == 200
    status, _, data = post(sim, ask(), {"Authorization": "Bearer wrong"})
    assert status == 401 and "wrong" not in error_of(data)["message"]
    sim.script("m", require_key="right", echo_auth=True)
    status, _, data = post(sim, ask(), {"Authorization": "Bearer wrong"})
    assert status == 401 and "Bearer wrong" in error_of(data)["message"]


def test_fail_every_nth_call(sim):
    sim.script("m", fail="server_error", fail_every=3)
    assert [post(sim, ask())[0] for _ in range(6)] == [200, 200, 500, 200, 200, 500]


def test_demo_models_are_honest_and_flaky_is_predictable():
    with SimUpstream() as sim:
        sim.script("sim-flaky", **{**DEMO_MODELS["sim-flaky"], "latency": 0})
        assert [post(sim, ask("sim-flaky"))[0] for _ in range(3)] == [200, 200, 500]
        assert DEMO_MODELS["sim-flaky"]["latency"] == 0.1  # scripting copies, never mutates
        assert DEMO_MODELS["sim-careful"]["latency"] > DEMO_MODELS["sim-swift"]["latency"]


def test_latency_and_jitter_delay_the_answer(sim):
    # a lower bound only: the simulator never answers early, however fast the machine; how late
    # it may be under load is not the simulator's promise (scripts/bench_sim.py measures it)
    sim.script("m", latency=0.15, jitter=0.05)
    started = time.monotonic()
    assert post(sim, ask())[0] == 200
    assert time.monotonic() - started >= 0.1


def test_vision_models_take_images(sim):
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    body = {
        "model": "m",
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "What is this?"}, image]}
        ],
    }
    status, _, data = post(sim, body)
    assert status == 400 and error_of(data)["code"] == "image_not_supported"
    sim.script("m", vision=True)
    reply = json.loads(post(sim, body)[2])
    assert "shown 1 image" in reply["choices"][0]["message"]["content"]


def test_keep_alive_and_connection_count(sim):
    conn = http.client.HTTPConnection("127.0.0.1", sim.port, timeout=PATIENCE)
    try:
        assert [post(sim, ask(), conn=conn)[0] for _ in range(300)] == [200] * 300
    finally:
        conn.close()
    assert sim.count("m") == 300
    assert sim.connections == 1
    sim.script("m", close=True)
    status, response, _ = post(sim, ask())
    assert status == 200 and response.getheader("Connection") == "close"
    assert sim.connections == 2


def test_keepalive_closes_idle_connections():
    with SimUpstream({"m": {}}, keepalive=0.1) as sim, raw_request(sim, ask()) as sock:
        data = b""
        while chunk := sock.recv(65536):  # ends only if the server closes the idle connection
            data += chunk
        assert data.startswith(b"HTTP/1.1 200") and data.count(b"HTTP/1.1") == 1


def test_hang_notices_the_client_leaving(sim):
    sim.script("m", fail="hang")
    sock = raw_request(sim, ask())
    assert wait_until(lambda: sim.count("m") == 1), "the request never arrived"
    assert sim.disconnects == 0
    sock.close()
    assert sim.wait_disconnects(1, timeout=PATIENCE)
    assert sim.count("m") == 1


def test_latency_notices_the_client_leaving(sim):
    sim.script("m", latency=3600)
    sock = raw_request(sim, ask())
    assert wait_until(lambda: sim.count("m") == 1), "the request never arrived"
    sock.close()
    assert sim.wait_disconnects(1, timeout=PATIENCE)


def test_stop_returns_while_requests_hang():
    sim = SimUpstream({"m": {"fail": "hang"}}).start()
    socks = [raw_request(sim, ask()) for _ in range(3)]
    idle = socket.create_connection(("127.0.0.1", sim.port), timeout=PATIENCE)  # unused
    socks.append(idle)
    try:
        assert wait_until(lambda: sim.count("m") == 3 and sim.connections == 4), (
            sim.count("m"),
            sim.connections,
        )
        stopper = threading.Thread(target=sim.stop)
        stopper.start()
        stopper.join(PATIENCE)
        assert not stopper.is_alive(), "stop() waited on the hanging requests"
        assert sim.disconnects == 0  # a stop is not a client leaving
        answered = [i for i, sock in enumerate(socks) if sock.recv(10) != b""]
        assert not answered, f"connections {answered} got bytes instead of being closed"
        sim.stop()  # idempotent
    finally:
        for sock in socks:
            sock.close()
        sim.stop()


def test_reset_closes_mid_answer(sim):
    sim.script("m", fail="reset")
    with pytest.raises((http.client.IncompleteRead, ConnectionResetError)):
        post(sim, ask())


def test_drip_sends_slowly(sim):
    # each byte of the answer follows the one before by at least the drip: by any moment, at
    # most one byte per 0.05 s since the request went out can have arrived, however fast the
    # machine (a lower bound on time, so load can only make it truer)
    sim.script("m", drip=0.05)
    sent = time.monotonic()
    with raw_request(sim, ask()) as sock:
        data = b""
        while b"\r\n\r\n" not in data or len(data.split(b"\r\n\r\n", 1)[1]) < 5:
            chunk = sock.recv(65536)
            assert chunk, "the drip stopped"
            data += chunk
        elapsed = time.monotonic() - sent
        head, body = data.split(b"\r\n\r\n", 1)
        length = int(re.search(rb"Content-Length: (\d+)", head)[1])
        assert head.startswith(b"HTTP/1.1 200") and body.startswith(b'{"id"')
        assert len(body) <= elapsed / 0.05 + 1 and len(body) < length, (len(body), elapsed)
    assert sim.wait_disconnects(1, timeout=PATIENCE)


def test_a_rule_may_give_the_json_answer_by_what_was_asked(sim):
    """A simulated judge that marks by what it read: a JSON rule answers a request that asks
    for JSON; plain rules answer requests without response_format."""
    sim.script(
        "m",
        json={"mark": 7},
        json_rules=[
            {"contains": "no idea", "answer": {"mark": 1}},
            {"contains": "broken", "answer": "not json {"},
        ],
        rules=[{"contains": "no idea", "answer": "plain"}],
    )
    wants = {"response_format": {"type": "json_object"}}

    def said(text, **extra):
        return json.loads(post(sim, ask(text=text, **extra))[2])["choices"][0]["message"]["content"]

    assert json.loads(said("I have no idea", **wants)) == {"mark": 1}
    assert json.loads(said("It is shipped", **wants)) == {"mark": 7}
    assert said("this is broken", **wants) == "not json {"
    assert said("I have no idea") == "plain"
    with pytest.raises(ValueError, match="'answer': object or text"):
        sim.script("m", json_rules=[{"contains": "x", "answer": 3}])
    with pytest.raises(ValueError, match="rules"):
        sim.script("m", rules=[{"contains": "x", "answer": "a", "json": {}}])


def test_script_validates_and_replaces(sim):
    with pytest.raises(ValueError, match="unknown behaviour"):
        sim.script("m", latencyy=1)
    with pytest.raises(ValueError, match="unknown fail"):
        sim.script("m", fail="explode")
    with pytest.raises(ValueError, match="fail_every"):
        sim.script("m", fail_every=0)
    sim.script("new", answer="hello")
    assert json.loads(post(sim, ask("new"))[2])["choices"][0]["message"]["content"] == "hello"


def test_concurrent_requests_are_all_recorded(sim):
    statuses = []

    def worker():
        conn = http.client.HTTPConnection("127.0.0.1", sim.port, timeout=PATIENCE)
        try:
            for _ in range(25):
                statuses.append(post(sim, ask(), conn=conn)[0])
        finally:
            conn.close()

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(PATIENCE)
    assert not [t for t in threads if t.is_alive()], "a client thread is still waiting"
    assert statuses == [200] * 200
    assert sim.count("m") == 200 and len(sim.requests) == 200 and sim.connections == 8


def test_command_line_prints_url_and_stops_on_sigterm(tmp_path):
    models = tmp_path / "models.json"
    models.write_text(json.dumps({"cli-model": {"answer": "from the file"}}))
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "scripts" / "sim_upstream.py"), "--models", str(models)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:") and url.endswith("/v1")
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=PATIENCE)
        try:
            conn.request("POST", "/v1/chat/completions", json.dumps(ask("cli-model")))
            reply = json.loads(conn.getresponse().read())
        finally:
            conn.close()
        assert reply["choices"][0]["message"]["content"] == "from the file"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=PATIENCE) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()


def test_command_line_rejects_a_bad_models_file(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"m": {"fail": "explode"}}')
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "sim_upstream.py"), "--models", str(bad)],
        capture_output=True,
        text=True,
        timeout=PATIENCE,
    )
    assert done.returncode == 2 and "unknown fail" in done.stderr and done.stdout == ""


def test_max_output_refuses_a_larger_budget_and_states_its_cap(sim):
    sim.script("m", max_output=8192)
    assert post(sim, ask(max_tokens=8192))[0] == 200
    assert post(sim, ask())[0] == 200  # no budget asked: the model's own
    for param in ("max_tokens", "max_completion_tokens"):
        status, _, data = post(sim, ask(**{param: 100_000}))
        error = error_of(data)
        assert status == 400 and error["param"] == param
        assert "supports at most 8192 completion tokens" in error["message"]
    sim.script(
        "m",
        max_output=8192,
        message="max_tokens: 100000 > 8192, which is the maximum "
        "allowed number of output tokens for m",
    )
    assert "100000 > 8192" in error_of(post(sim, ask(max_tokens=100_000))[2])["message"]


def test_tools_and_structured_output_can_be_refused_and_are_listed():
    tool = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
    schema = {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}}
    with SimUpstream(
        {
            "plain": {"tools": False, "structured_output": False, "max_output": 512},
            "able": {"tools": True},
            "quiet": {},
        }
    ) as sim:
        status, _, data = post(sim, ask("plain", tools=[tool]))
        assert status == 400 and "does not support tools" in error_of(data)["message"]
        status, _, data = post(sim, ask("plain", response_format=schema))
        assert status == 400 and "json_schema" in error_of(data)["message"]
        assert post(sim, ask("plain", response_format={"type": "json_object"}))[0] == 200
        assert post(sim, ask("able", tools=[tool], response_format=schema))[0] == 200
        conn = http.client.HTTPConnection("127.0.0.1", sim.port, timeout=PATIENCE)
        try:
            conn.request("GET", "/v1/models")
            listed = {m["id"]: m for m in json.loads(conn.getresponse().read())["data"]}
        finally:
            conn.close()
    assert "tools" not in listed["plain"]["supported_parameters"]
    assert "response_format" not in listed["plain"]["supported_parameters"]
    assert listed["plain"]["top_provider"] == {"max_completion_tokens": 512}
    assert {"tools", "response_format"} <= set(listed["able"]["supported_parameters"])
    assert "supported_parameters" not in listed["quiet"]  # nothing scripted: nothing stated


def raw_exchange(sim, data: bytes) -> bytes:
    """Send ``data`` on a fresh connection and read until the simulator closes it."""
    with socket.create_connection(("127.0.0.1", sim.port), timeout=PATIENCE) as s:
        s.sendall(data)
        got = b""
        while chunk := s.recv(65536):
            got += chunk
    return got


def test_request_heads_are_read_as_http_server_reads_them(sim):
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()
    # field names in any case, the first of a repeated one; HTTP/1.0 closes after its answer
    head = (
        b"POST /v1/chat/completions HTTP/1.0\r\ncontent-LENGTH: %d\r\n"
        b"X-Seen: first\r\nx-seen: second\r\nAuthorization:  Bearer k \r\n\r\n" % len(body)
    )
    reply = raw_exchange(sim, head + body)
    assert reply.startswith(b"HTTP/1.1 200 ") and b'"object": "chat.completion"' in reply
    seen = sim.requests[-1]["headers"]
    assert seen["X-Seen"] == "first" and "x-seen" not in seen
    assert seen["Authorization"] == "Bearer k" and seen["content-LENGTH"] == str(len(body))
    # a client that asks first hears 100 Continue, then the answer
    head = (
        b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: %d\r\nExpect: 100-continue"
        b"\r\nConnection: close\r\n\r\n" % len(body)
    )
    reply = raw_exchange(sim, head + body)
    assert reply.startswith(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 ")
    # what http.server refuses is refused with its statuses (before a version is known, as
    # http.server does, without a status line: the error page says which)
    for request, status in (
        (b"GET /v1/models HTTP/1.x\r\n\r\n", b"400"),
        (b"GET /v1/models HTTP/2.0\r\n\r\n", b"505"),
        (b"GET /v1/models\r\n\r\n", b"400"),
        (b"GET /v1/models HTTP/1.1\r\n" + b"X-A: b\r\n" * 101 + b"\r\n", b"431"),
    ):
        assert b"Error code: " + status in raw_exchange(sim, request), request
