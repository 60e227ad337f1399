"""Reply modes end to end: streaming, merged replies, images, nominations, deadlines, pending."""

import base64
import json
import socket
import time

import openai
import pytest

from conftest import Gateway, read_jsonl
from panelist.gateway import make_gateway
from panelist.metrics.cli import main
from panelist.metrics.collection import Collections
from panelist.metrics.roster import Roster

PIXEL = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 40).decode()
DATA_URL = f"data:image/png;base64,{PIXEL}"
SIGNED_URL = "https://photos.example/chair.jpg?sig=s3cr3t-signature&exp=99"


def set_limits(home, **limits):
    path = home.file("gateway.json")
    path.write_text(json.dumps(dict(json.loads(path.read_text()), **limits)))


def chat(**extra):
    return {"model": "bench/trio", "messages": [{"role": "user", "content": "Review: x = 1/0"}],
            **extra}


def sse_events(gw, body, *, close_after=None):
    """Send a streaming request over a raw socket; return [(seconds, kind, payload)] where kind is
    'data' or 'comment', decoding HTTP/1.1 chunked framing by hand."""
    host, port = gw.server.server_address[:2]
    raw = json.dumps(body).encode()
    s = socket.create_connection((host, port), timeout=30)
    s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
              b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
              % (port, len(raw), raw))
    f = s.makefile("rb")
    t0 = time.monotonic()
    status = f.readline()
    headers = {}
    while (line := f.readline()) != b"\r\n":
        k, _, v = line.decode().partition(":")
        headers[k.strip().lower()] = v.strip()
    events, buffer = [], b""
    if close_after is not None:
        time.sleep(close_after)
        s.close()
        return status, headers, events
    while True:
        size = int(f.readline().strip(), 16)
        if size == 0:
            break
        buffer += f.read(size)
        f.read(2)
        while b"\n\n" in buffer:
            block, buffer = buffer.split(b"\n\n", 1)
            text = block.decode()
            at = time.monotonic() - t0
            if text.startswith(":"):
                events.append((at, "comment", text))
            elif text.startswith("data: "):
                payload = text[6:]
                events.append((at, "data", payload if payload == "[DONE]" else json.loads(payload)))
    s.close()
    return status, headers, events


@pytest.fixture()
def members_only(home):
    set_limits(home, max_explorers=0)
    return home


def test_stream_sends_each_seat_as_it_finishes(gateway, members_only, sim):
    sim.script("fast", latency=0.4)
    sim.script("mid", latency=0.0)
    sim.script("slow", latency=0.2)
    client = openai.OpenAI(base_url=gateway.url + "/v1", api_key="local", max_retries=0)
    chunks = list(client.chat.completions.create(**chat(stream=True)))
    sections = [c.choices[0].delta.content for c in chunks
                if c.choices and c.choices[0].delta.content]
    assert [s.split("·")[1].split()[0] for s in sections] == ["mid", "slow", "fast"]
    assert "## Seat 2: member · mid" in sections[0]  # numbered by seat, sent by finish
    final = chunks[-1]
    assert final.choices[0].finish_reason == "stop"
    bench = final.model_extra["bench"]
    assert [s["alias"] for s in bench["seats"]] == ["fast", "mid", "slow"]
    assert all(c.model_extra.get("bench") is None for c in chunks[:-1])


def test_stream_keep_alives_arrive_during_a_slow_seat(home, members_only, sim):
    sim.script("slow", latency=1.2)
    server = make_gateway(home, keepalive=0.2, env={})
    gw = Gateway(server)
    try:
        status, headers, events = sse_events(gw, chat(stream=True))
    finally:
        server.close()
    assert status.startswith(b"HTTP/1.1 200") and headers["content-type"] == "text/event-stream"
    data = [e for e in events if e[1] == "data"]
    slow_at = next(at for at, _, p in data if p != "[DONE]" and p["choices"]
                   and "slow" in (p["choices"][0]["delta"].get("content") or ""))
    fast_at = next(at for at, _, p in data if p != "[DONE]" and p["choices"]
                   and "fast" in (p["choices"][0]["delta"].get("content") or ""))
    comments = [at for at, kind, _ in events if kind == "comment" and fast_at < at < slow_at]
    assert len(comments) >= 3  # ~1 s of waiting at a 0.2 s keep-alive
    assert data[-1][2] == "[DONE]" and "bench" in data[-2][2]


def test_a_refusal_before_the_stream_keeps_its_status(gateway):
    status, body, _ = gateway.post("/v1/chat/completions", dict(chat(stream=True),
                                                                model="bench/none"))
    assert status == 404 and "unknown collection" in body["error"]["message"]


def test_merged_reply_is_one_answer_with_every_seat_kept(gateway, home, sim):
    status, body, _ = gateway.post("/v1/chat/completions", chat(bench={"reply": "merged"}))
    assert status == 200
    bench = body["bench"]
    assert bench["reply"] == "merged" and len(bench["seats"]) == 5
    merger = bench["merger"]
    assert merger["call"] == bench["panel"] + ".merger" and merger["alias"] == "fast"
    assert body["choices"][0]["message"]["content"] == merger["answer"]
    # the merger saw the request and every seat's answer, labelled
    (asked,) = [r for r in sim.requests if "## The seats' answers" in json.dumps(r["body"])]
    text = asked["body"]["messages"][1]["content"]
    assert "Review: x = 1/0" in text and all(f"({s['alias']})" in text for s in bench["seats"])
    status, got, _ = gateway.post("/bench/verdict", {"call": merger["call"], "useful": True})
    assert status == 200 and got["written"]
    record = read_jsonl(home.gateway_runs / "calls.jsonl")[-1]
    assert record["merger"]["call"] == merger["call"]


def test_merged_by_model_suffix_and_merger_choice(gateway, home, sim):
    view = Roster(home).view()
    Collections(home).save(view, "trio", ["fast", "mid", "slow"], merger="x-two")
    _, body, _ = gateway.post("/v1/chat/completions", chat(model="bench/trio:merged"))
    assert body["bench"]["merger"]["alias"] == "x-two"
    # no merger set: the member with the most useful verdicts for the shape merges
    Collections(home).save(view, "trio", ["fast", "mid", "slow"])
    slow_call = next(s["call"] for s in body["bench"]["seats"] if s["alias"] == "slow")
    gateway.post("/bench/verdict", {"call": slow_call, "useful": True})
    _, body, _ = gateway.post("/v1/chat/completions", chat(model="bench/trio:merged"))
    assert body["bench"]["merger"]["alias"] == "slow"


def test_merger_failure_returns_every_answer_with_a_note(gateway, home, sim):
    set_limits(home, max_explorers=0)
    Collections(home).save(Roster(home).view(), "trio", ["fast", "mid", "slow"], merger="x-two")
    sim.script("x-two", fail="server_error")
    _, body, _ = gateway.post("/v1/chat/completions", chat(bench={"reply": "merged"}))
    bench = body["bench"]
    assert "merger x-two failed" in bench["note"]
    content = body["choices"][0]["message"]["content"]
    assert content.startswith("> note:") and content.count("## Seat") == 3
    assert bench["merger"]["status"] == "error"


def test_merger_window_fallback_and_none_fits(gateway, home, sim):
    set_limits(home, max_explorers=0)
    roster = Roster(home)
    # fast fits the prompt (~10 tokens) but not the prompt plus three answers
    roster.add_model("fast", "sim", family="fast", context=40)
    _, body, _ = gateway.post("/v1/chat/completions", chat(bench={"reply": "merged"}))
    assert body["bench"]["merger"]["alias"] == "mid"
    for alias in ("mid", "slow"):
        roster.add_model(alias, "sim", family=alias, context=40)
    _, body, _ = gateway.post("/v1/chat/completions", chat(bench={"reply": "merged"}))
    assert "merger" not in body["bench"]
    assert "no merger could take" in body["bench"]["note"] and "window 40" in body["bench"]["note"]
    assert body["choices"][0]["message"]["content"].count("## Seat") == 3


def test_a_body_over_the_cap_is_a_413(gateway):
    host, port = gateway.server.server_address[:2]
    with socket.create_connection((host, port), timeout=10) as s:
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
                  b"Content-Type: application/json\r\nContent-Length: 25000000\r\n\r\n{" % port)
        reply = s.makefile("rb").read()
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413")
    assert "URLs or smaller images" in json.loads(body)["error"]["message"]


def image_request(**extra):
    return chat(messages=[{"role": "user", "content": [
        {"type": "text", "text": "What is this chair?"},
        {"type": "image_url", "image_url": {"url": DATA_URL}},
        {"type": "image_url", "image_url": {"url": SIGNED_URL}}]}], **extra)


def assert_no_image_traces(home, *texts):
    everything = [p.read_text(errors="replace") for p in home.root.rglob("*.jsonl")] + list(texts)
    for text in everything:
        assert PIXEL[:64] not in text and "sig=s3cr3t" not in text and DATA_URL[:40] not in text


def test_images_go_only_to_models_that_see(gateway, home, sim):
    roster = Roster(home)
    for alias in ("fast", "x-two"):
        roster.add_model(alias, "sim", family=alias, vision=True)
        sim.script(alias, vision=True)
    body = image_request(bench={"reply": "merged"})
    status, reply, _ = gateway.post("/v1/chat/completions", body)
    assert status == 200
    bench = reply["bench"]
    assert [s["alias"] for s in bench["seats"]] == ["fast", "x-two"]
    assert bench["shape"] == "vision"
    skipped = {s["alias"]: s for s in bench["skipped"]}
    assert skipped["mid"]["seat"] == "member" and "images" in skipped["mid"]["why"]
    assert "images" in skipped["x-one"]["why"]
    # seats got the messages exactly as sent
    seat_requests = [r for r in sim.requests if r["model"] in ("fast", "x-two")
                     and "## The seats" not in json.dumps(r["body"])]
    assert all(r["body"]["messages"] == body["messages"] for r in seat_requests)
    merger_in = [json.dumps(r["body"]) for r in sim.requests
                 if "## The seats" in json.dumps(r["body"])]
    assert len(merger_in) == 1 and "[image: data URL," in merger_in[0]
    assert "[image: https://photos.example/chair.jpg?...]" in merger_in[0]
    assert_no_image_traces(home, *merger_in)
    assert "[image: data URL" in read_jsonl(home.gateway_runs / "calls.jsonl")[-1]["prompt"]


def test_an_upstream_echoing_the_image_leaves_no_trace(gateway, home, sim):
    roster = Roster(home)
    roster.add_model("fast", "sim", family="fast", vision=True)
    sim.script("fast", vision=True, fail="server_error",
               message=f"bad input {DATA_URL[:200]} and {SIGNED_URL}")
    status, reply, _ = gateway.post("/v1/chat/completions", image_request())
    assert status == 200
    (seat,) = reply["bench"]["seats"]
    assert seat["status"] == "error" and "[image:" in seat["error"]
    assert_no_image_traces(home, json.dumps(reply))


def test_no_seat_that_can_see_is_a_400(gateway):
    status, body, _ = gateway.post("/v1/chat/completions", image_request())
    assert status == 400 and "take images" in body["error"]["message"]


def test_image_urls_must_be_https_or_data(gateway):
    body = chat(messages=[{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "file:///etc/passwd"}}]}])
    status, reply, _ = gateway.post("/v1/chat/completions", body)
    assert status == 400 and reply["error"]["param"] == "messages[0].content[0].image_url.url"


def test_nominees_sit_before_staleness(gateway):
    _, body, _ = gateway.post("/v1/chat/completions", chat(**{"with": ["x-two"]}))
    seats = [(s["seat"], s["alias"]) for s in body["bench"]["seats"]]
    assert seats[3:] == [("nominee", "x-two"), ("explorer", "x-one")]
    assert body["bench"]["seats"][3]["call"].endswith(".nominee1")


def test_each_refused_nomination_is_listed_with_why(gateway, home, sim):
    roster = Roster(home)
    roster.add_model("cousin", "sim", family="fast")
    roster.add_model("old", "sim", family="old", retired=True)
    roster.add_model("tiny", "sim", family="tiny", context=2)
    sim.script("x-three", fail="rate_limit", retry_after=90)
    gateway.post("/v1/chat/completions", chat(**{"with": ["x-three"]}))  # x-three cools down
    names = ["ghost", "mid", "cousin", "old", "tiny", "x-three", "x-one", "x-two", "x-one"]
    _, body, _ = gateway.post("/v1/chat/completions", chat(**{"with": names}))
    why = {s["alias"]: s["why"] for s in body["bench"]["skipped"] if s["seat"] == "nominee"}
    assert "not in the roster" in why["ghost"]
    assert "already a member" in why["mid"]
    assert "family" in why["cousin"]
    assert why["old"] == "retired"
    assert "context window 2" in why["tiny"]
    assert "cooling down" in why["x-three"]
    assert [s["alias"] for s in body["bench"]["seats"][3:]] == ["x-one", "x-two"]
    status, body, _ = gateway.post("/v1/chat/completions", image_request(**{"with": ["x-one"]}))
    assert status == 400  # nobody can see; x-one cannot either


def test_panel_deadline_bounds_the_request(gateway, home, sim):
    set_limits(home, seat_timeout=30, panel_timeout=0.6, max_explorers=0)
    sim.script("slow", fail="hang")
    t0 = time.monotonic()
    _, body, _ = gateway.post("/v1/chat/completions", chat())
    assert time.monotonic() - t0 < 3
    slow = next(s for s in body["bench"]["seats"] if s["alias"] == "slow")
    assert slow["status"] == "error" and "timeout" in slow["error"]


@pytest.mark.parametrize("stream", [False, True])
def test_caller_disconnect_cancels_the_seats(gateway, home, sim, stream):
    set_limits(home, max_explorers=0)
    sim.script("slow", fail="hang")
    host, port = gateway.server.server_address[:2]
    raw = json.dumps(chat(stream=stream)).encode()
    s = socket.create_connection((host, port))
    s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
              b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
              % (port, len(raw), raw))
    deadline = time.monotonic() + 5
    while sim.count("slow") == 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.2)
    s.close()
    assert sim.wait_disconnects(1, timeout=5)  # the upstream saw its connection close
    path = home.gateway_runs / "calls.jsonl"
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    while time.monotonic() < deadline and not read_jsonl(path):
        time.sleep(0.05)
    (record,) = read_jsonl(path)
    assert record["abandoned"] is True
    assert sorted(s["alias"] for s in record["seats"]) == ["fast", "mid", "slow"]  # each once
    assert {s["alias"]: s["status"] for s in record["seats"]}["slow"] == "cancelled"


def test_pending_lists_owed_verdicts(gateway, home, sim, capsys):
    sim.script("mid", fail="server_error")
    _, body, _ = gateway.post("/v1/chat/completions", chat())
    status, owed, _ = gateway.get("/bench/pending")
    calls = {o["call"] for o in owed["data"]}
    answered = {s["call"] for s in body["bench"]["seats"] if s["status"] == "ok"}
    assert status == 200 and calls == answered  # the failed seat owes nothing
    judged = sorted(answered)[0]
    gateway.post("/bench/verdict", {"call": judged, "useful": False})
    _, owed, _ = gateway.get("/bench/pending?limit=2")
    assert len(owed["data"]) == 2 and judged not in {o["call"] for o in owed["data"]}
    assert gateway.get("/bench/pending?limit=x")[0] == 400
    assert main(["pending", "--data", str(home.root), "--json"]) == 0
    listed = {o["call"] for o in json.loads(capsys.readouterr().out)}
    assert listed == answered - {judged}
    assert main(["pending", "--url", gateway.url, "--json"]) == 0
    assert {o["call"] for o in json.loads(capsys.readouterr().out)} == listed


def test_merged_stream_keeps_alive_during_the_merge_then_sends_one_chunk(home, members_only, sim):
    Collections(home).save(Roster(home).view(), "trio", ["fast", "mid", "slow"], merger="x-two")
    sim.script("x-two", latency=1.0)
    server = make_gateway(home, keepalive=0.2, env={})
    gw = Gateway(server)
    try:
        _, _, events = sse_events(gw, chat(stream=True, bench={"reply": "merged"}))
    finally:
        server.close()
    data = [(at, p) for at, kind, p in events if kind == "data" and p != "[DONE]"]
    texts = [(at, p["choices"][0]["delta"].get("content")) for at, p in data if p["choices"]]
    (merged_at, merged), = [(at, t) for at, t in texts if t]
    assert merged.startswith("[simulated x-two]")  # one chunk: the merger's answer
    comments = [at for at, kind, _ in events if kind == "comment" and at < merged_at]
    assert len(comments) >= 3
    assert data[-1][1]["bench"]["merger"]["alias"] == "x-two"
