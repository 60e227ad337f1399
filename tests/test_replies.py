"""Reply modes end to end: streaming, merged replies, images, nominations, deadlines, pending."""

import base64
import json
import select
import socket

import openai
import pytest

from conftest import Gateway, PATIENCE, move_to, read_jsonl, seats_logged, set_limits, wait_until
from sse import RawStream
from panelist.gateway import make_gateway
from panelist.metrics.cli.main import main
from panelist.metrics.roster.collection import Collections
from panelist.metrics.roster.roster import Roster

PIXEL = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 40).decode()
DATA_URL = f"data:image/png;base64,{PIXEL}"
SIGNED_URL = "https://photos.example/chair.jpg?sig=s3cr3t-signature&exp=99"


def chat(**extra):
    return {
        "model": "bench/trio",
        "messages": [{"role": "user", "content": "Review: x = 1/0"}],
        **extra,
    }


class EventStream(RawStream):
    """A streaming chat request read one server-sent event at a time (``sse.RawStream``), as
    this file's tests read it: ``status`` is the raw status line, and ``next()`` gives
    ``("comment", text)`` or ``("data", payload)``. ``head=False`` leaves the head unread, so a
    test can first check that nothing arrived (``silent``)."""

    def __init__(self, gw, body, *, head: bool = True):
        super().__init__(gw.server, "/v1/chat/completions", body)
        if head:
            self.read_head()

    def silent(self) -> bool:
        """Whether nothing at all has arrived yet (no status line, no byte)."""
        return not select.select([self.sock], [], [], 0)[0]

    def read_head(self) -> None:
        self._read_head()

    @property
    def status(self) -> bytes:
        self._read_head()
        return self._status

    def next(self):
        kind, payload = super().next()
        return (kind, payload) if kind == "comment" else ("data", payload)


def content(event) -> str | None:
    """The text a data event adds to the answer, if any."""
    kind, payload = event
    if kind != "data" or payload == "[DONE]" or not payload["choices"]:
        return None
    return payload["choices"][0]["delta"].get("content") or None


def seat_of(section: str) -> str:
    """The alias a streamed section is about ("## Seat 2: member · mid …" -> "mid")."""
    return section.split("·")[1].split()[0]


@pytest.fixture()
def members_only(home):
    set_limits(home, max_explorers=0)
    return home


def test_stream_sends_each_seat_as_it_finishes(gateway, members_only, gated):
    # every member waits at a gate; each is let go only after the one before it was received,
    # so the order is the test's, and a section held back until the end could not pass
    move_to(members_only, gated, "fast", "mid", "slow")
    with openai.OpenAI(
        base_url=gateway.url + "/v1", api_key="local", max_retries=0, timeout=PATIENCE
    ) as client:
        stream = client.chat.completions.create(**chat(stream=True))  # opens at once
        chunks = iter(stream)
        seen, sections = [], []

        def next_section():
            for chunk in chunks:
                seen.append(chunk)
                if chunk.choices and chunk.choices[0].delta.content:
                    return chunk.choices[0].delta.content
            raise AssertionError("the stream ended before every seat was sent")

        for alias in ("mid", "slow", "fast"):
            gated.open(alias)
            sections.append(next_section())
            assert seat_of(sections[-1]) == alias, sections
        seen.extend(chunks)
        stream.close()
    assert "## Seat 2: member · mid" in sections[0]  # numbered by seat, sent by finish
    assert "## Seat 3: member · slow" in sections[1] and "## Seat 1: member · fast" in sections[2]
    final = seen[-1]
    assert final.choices[0].finish_reason == "stop"
    bench = final.model_extra["bench"]
    assert [s["alias"] for s in bench["seats"]] == ["fast", "mid", "slow"]
    early = [i for i, c in enumerate(seen[:-1]) if c.model_extra.get("bench") is not None]
    assert not early, f"chunks {early} carry bench before the final chunk"


def test_stream_keep_alives_arrive_during_a_held_seat(home, members_only, gated):
    move_to(home, gated, "slow")  # fast and mid answer from the simulator at once
    with (
        Gateway(make_gateway(home, keepalive=0.2, env={})) as gw,
        EventStream(gw, chat(stream=True)) as stream,
    ):
        assert stream.status.startswith(b"HTTP/1.1 200")
        assert stream.headers["content-type"] == "text/event-stream; charset=utf-8"
        answered = set()
        while answered != {"fast", "mid"}:
            text = content(stream.next())
            if text:
                answered.add(seat_of(text))
        comments = 0
        while comments < 3:  # slow is held: only keep-alives can keep the stream going
            event = stream.next()
            assert content(event) is None, f"a section arrived while slow was held: {event}"
            comments += event[0] == "comment"
        gated.open("slow")
        rest = stream.rest()
    texts = [t for t in map(content, rest) if t]
    assert [seat_of(t) for t in texts] == ["slow"]
    assert rest[-1] == ("data", "[DONE]") and "bench" in rest[-2][1]


def test_a_refusal_before_the_stream_keeps_its_status(gateway):
    status, body, _ = gateway.post(
        "/v1/chat/completions", dict(chat(stream=True), model="bench/none")
    )
    assert status == 404 and "unknown collection" in body["error"]["message"]


def test_merged_reply_is_one_answer_with_every_seat_kept(gateway, home, sim):
    status, body, _ = gateway.post("/v1/chat/completions", chat(bench={"reply": "merged"}))
    assert status == 200
    bench = body["bench"]
    assert bench["reply"] == "merged" and len(bench["seats"]) == 5
    merger = bench["merger"]
    assert merger["call"] == bench["panel"] + ".merger" and merger["alias"] == "fast"
    assert body["choices"][0]["message"]["content"] == merger["answer"]
    # the merger saw the request (as the caller's message) and every seat's answer, labelled
    (asked,) = [r for r in sim.requests if "## The seats' answers" in json.dumps(r["body"])]
    seen = asked["body"]["messages"]
    assert "Review: x = 1/0" in seen[1]["content"] and seen[1]["role"] == "user"
    text = seen[-1]["content"]
    unseen = [s["alias"] for s in bench["seats"] if f"({s['alias']})" not in text]
    assert not unseen, f"the merger was not shown the answers of {unseen}"
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
    with socket.create_connection((host, port), timeout=PATIENCE) as s:
        s.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
            b"Content-Type: application/json\r\nContent-Length: 25000000\r\n\r\n{" % port
        )
        reply = s.makefile("rb").read()
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413")
    assert "URLs or smaller images" in json.loads(body)["error"]["message"]


def image_request(**extra):
    return chat(
        messages=[
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What is this chair?"},
                    {"type": "image_url", "image_url": {"url": DATA_URL}},
                    {"type": "image_url", "image_url": {"url": SIGNED_URL}},
                ],
            }
        ],
        **extra,
    )


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
    seat_requests = [
        r
        for r in sim.requests
        if r["model"] in ("fast", "x-two") and "## The seats" not in json.dumps(r["body"])
    ]
    changed = [r["model"] for r in seat_requests if r["body"]["messages"] != body["messages"]]
    assert seat_requests and not changed, f"messages were altered on the way to {changed}"
    merger_in = [
        json.dumps(r["body"]) for r in sim.requests if "## The seats" in json.dumps(r["body"])
    ]
    assert len(merger_in) == 1 and "[image: data URL," in merger_in[0]
    assert "[image: https://photos.example/chair.jpg?...]" in merger_in[0]
    assert_no_image_traces(home, *merger_in)
    assert "[image: data URL" in read_jsonl(home.gateway_runs / "calls.jsonl")[-1]["prompt"]


def test_an_upstream_echoing_the_image_leaves_no_trace(gateway, home, sim):
    roster = Roster(home)
    roster.add_model("fast", "sim", family="fast", vision=True)
    sim.script(
        "fast",
        vision=True,
        fail="server_error",
        message=f"bad input {DATA_URL[:200]} and {SIGNED_URL}",
    )
    status, reply, _ = gateway.post("/v1/chat/completions", image_request())
    assert status == 502  # its only seat failed
    (seat,) = reply["error"]["seats"]
    assert seat["status"] == "error" and "[image:" in seat["error"]
    assert_no_image_traces(home, json.dumps(reply))


def test_no_seat_that_can_see_is_a_400(gateway):
    status, body, _ = gateway.post("/v1/chat/completions", image_request())
    assert status == 400 and "take images" in body["error"]["message"]


def test_image_urls_must_be_https_or_data(gateway):
    body = chat(
        messages=[
            {
                "role": "user",
                "content": [{"type": "image_url", "image_url": {"url": "file:///etc/passwd"}}],
            }
        ]
    )
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
    set_limits(home, seat_timeout=3600, panel_timeout=0.6, max_explorers=0)
    sim.script("slow", fail="hang")  # never answers: only the panel's deadline can end the wait
    status, body, _ = gateway.post("/v1/chat/completions", chat())
    assert status == 200
    slow = next(s for s in body["bench"]["seats"] if s["alias"] == "slow")
    assert slow["status"] == "error" and "timeout" in slow["error"], slow
    assert sim.wait_disconnects(1, timeout=PATIENCE)  # the hanging call was hung up on, not left
    assert sim.count("slow") == 1


@pytest.mark.parametrize("stream", [False, True])
def test_caller_disconnect_cancels_the_seats(gateway, home, sim, stream):
    set_limits(home, max_explorers=0)
    sim.script("slow", fail="hang")
    host, port = gateway.server.server_address[:2]
    raw = json.dumps(chat(stream=stream)).encode()
    with socket.create_connection((host, port), timeout=PATIENCE) as s:
        s.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
            b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
            % (port, len(raw), raw)
        )
        # leave once fast and mid have answered and slow is waiting upstream
        assert wait_until(
            lambda: sim.count("slow") == 1 and seats_logged(home) == {"fast": "ok", "mid": "ok"}
        ), seats_logged(home)
    assert sim.wait_disconnects(1, timeout=PATIENCE)  # the upstream saw its connection close
    path = home.gateway_runs / "calls.jsonl"
    assert wait_until(lambda: path.exists() and read_jsonl(path)), "the panel was never logged"
    (record,) = read_jsonl(path)
    assert record["abandoned"] is True
    assert sorted(s["alias"] for s in record["seats"]) == ["fast", "mid", "slow"]  # each once
    assert {s["alias"]: s["status"] for s in record["seats"]} == {
        "fast": "ok",
        "mid": "ok",
        "slow": "cancelled",
    }
    assert seats_logged(home)["slow"] == "cancelled"


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


def test_merged_stream_opens_at_once_keeps_alive_through_the_merge_then_sends_it(
    home, members_only, gated
):
    Collections(home).save(Roster(home).view(), "trio", ["fast", "mid", "slow"], merger="x-two")
    move_to(home, gated, "x-two")  # the members answer at once; the merger waits at its gate
    with (
        Gateway(make_gateway(home, keepalive=0.2, env={})) as gw,
        EventStream(gw, chat(stream=True, bench={"reply": "merged"})) as stream,
    ):
        assert stream.status.startswith(b"HTTP/1.1 200")  # before the merge, before any seat
        assert stream.next()[1]["choices"][0]["delta"] == {"role": "assistant"}
        assert gated.wait_arrived("x-two"), "the merger was never asked"
        comments = 0
        while comments < 2:  # the merge is held: only keep-alives can come
            event = stream.next()
            assert event[0] == "comment", f"not a keep-alive while the merger was held: {event}"
            comments += 1
        gated.open("x-two")
        rest = stream.rest()
    texts = [t for t in map(content, rest) if t]
    assert len(texts) == 1 and texts[0].startswith("[gated x-two]"), texts  # one chunk: the merge
    assert rest[-1] == ("data", "[DONE]")
    assert rest[-2][1]["bench"]["merger"]["alias"] == "x-two"
