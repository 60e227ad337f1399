"""What a caller reads when seats fail: each seat's error names its endpoint as the roster does,
never the upstream's host, port or URL (not even when the upstream's own words hold them), and
is never cut mid-word: a long upstream message is cut at a word with an ellipsis, and the part
that says what to do is always whole, in ``bench.seats``, the markdown, ``error.seats``, the
502's message, ``GET /bench/panels/<id>`` and the logs."""

import re
import socket

import openai
import pytest

from conftest import Gateway, logged, openai_client, read_jsonl, set_limits
from panelist.gateway import make_gateway
from panelist.metrics.plaintext import shorten
from panelist.metrics.roster.collection import Collections
from panelist.metrics.roster.roster import Roster
from panelist.metrics.upstream.transport import named

ASK = [{"role": "user", "content": "Review: x = 1/0"}]
# what each failure's error ends with: the part that says what to do, whole
ADVICE = {
    "lost": "or the endpoint URL may lack its /v1 prefix",
    "gone": "check that the server is running and the endpoint URL's port",
    "stuck": "raise the seat's timeout or seat a faster model",
}
# a word cut short: the upstream's words are all "alpha" (and the cut tests' "words")
CUT_WORD = re.compile(r"\b(?:a|al|alp|alph|w|wo|wor|word)…")


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture()
def broken(home, sim):
    """Three members that fail three ways, on endpoints named `north` (the simulator) and
    `south` (a port nobody listens on); the 404's words carry the upstream's URL."""
    roster = Roster(home)
    roster.add_endpoint("north", sim.url)
    gone = closed_port()
    roster.add_endpoint("south", f"http://127.0.0.1:{gone}/v1")
    roster.add_model("lost", "north", family="lost", context=100_000)
    roster.add_model("gone", "south", family="gone", context=100_000)
    roster.add_model("stuck", "north", family="stuck", context=100_000)
    sim.script(
        "lost",
        fail="not_found",
        message=f"no model here ({sim.url}/chat/completions on "
        f"{sim.url.split('/')[2]}); " + "alpha " * 120,
    )
    sim.script("stuck", fail="hang")
    set_limits(home, seat_timeout=1, max_explorers=0)
    view = roster.view()
    Collections(home).save(view, "broken", ["lost", "gone", "stuck"])
    Collections(home).save(view, "mixed", ["fast", "lost", "gone", "stuck"])
    sim_port = sim.url.split("/")[2].rsplit(":", 1)[1]
    return {"sim": sim_port, "gone": str(gone)}


def no_location(text: str, ports: dict) -> None:
    for port in ports.values():
        assert port not in text, f"port {port} reached the caller: {text}"
    assert "127.0.0.1" not in text and "http://" not in text, text


def whole(text: str) -> None:
    assert not CUT_WORD.search(text), f"a word cut short in: {text}"
    assert not text.endswith("…"), text


def check_seat_errors(seats: dict, ports: dict) -> None:
    for alias, endpoint in (("lost", "north"), ("gone", "south"), ("stuck", "north")):
        error = seats[alias]["error"]
        assert f"endpoint '{endpoint}'" in error, error
        assert error.endswith(ADVICE[alias]), error
        no_location(error, ports)
        whole(error)


def test_seat_errors_in_a_reply_name_the_endpoint_and_end_whole(gateway, home, broken):
    with openai_client(gateway) as client:
        reply = client.chat.completions.create(model="bench/mixed", messages=ASK)
    bench = reply.model_extra["bench"]
    seats = {s["alias"]: s for s in bench["seats"]}
    assert seats["fast"]["status"] == "ok"
    check_seat_errors(seats, broken)
    no_location(reply.choices[0].message.content, broken)  # the markdown's "> error: …" lines
    # the panel as its caller may read it back, and as the data folder keeps it
    status, panel, _ = gateway.get(f"/bench/panels/{bench['panel']}")
    assert status == 200
    check_seat_errors({s["alias"]: s for s in panel["seats"]}, broken)
    check_seat_errors({s["alias"]: s for s in logged(home)[0]["seats"]}, broken)
    evidence = [
        e for e in read_jsonl(home.gateway_runs / "evidence.jsonl") if e.get("kind") == "seat"
    ]
    check_seat_errors({e["alias"]: e for e in evidence}, broken)
    assert {e["alias"]: e["endpoint"] for e in evidence if e["alias"] != "fast"} == {
        "lost": "north",
        "gone": "south",
        "stuck": "north",
    }  # the roster maps name to URL


def test_a_panel_no_seat_answered_says_so_by_endpoint_name_in_whole_sentences(gateway, broken):
    with openai_client(gateway) as client, pytest.raises(openai.APIStatusError) as failed:
        client.chat.completions.create(model="bench/broken", messages=ASK)
    assert failed.value.status_code == 502
    error = failed.value.body
    message = error["message"]
    assert error["code"] == "all_seats_failed"
    no_location(message, broken)
    whole(message)
    for alias, endpoint in (("lost", "north"), ("gone", "south"), ("stuck", "north")):
        said = re.search(rf"member\d {alias}: (.*?)(?=; member\d |\); try again)", message)
        assert said, f"{alias} is not in: {message}"
        assert f"endpoint '{endpoint}'" in said.group(1)
        assert said.group(1).endswith(ADVICE[alias]), said.group(1)  # what to do, whole
    panel = failed.value.response.headers["X-Panelist-Panel"]
    assert message.endswith(f"GET /bench/panels/{panel}")
    check_seat_errors({s["alias"]: s for s in error["seats"]}, broken)


def test_a_streamed_panel_keeps_the_same_words(home, broken):
    with Gateway(make_gateway(home, env={})) as gw, openai_client(gw) as client:
        chunks = list(
            client.chat.completions.create(model="bench/mixed", messages=ASK, stream=True)
        )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    no_location(text, broken)
    bench = chunks[-1].model_extra["bench"]
    check_seat_errors({s["alias"]: s for s in bench["seats"]}, broken)


# -- the cut itself -------------------------------------------------------------------------------
def test_shorten_keeps_what_to_do_and_cuts_the_middle_at_a_word():
    said = "server_error: endpoint 'north' failed (500) " + "alpha " * 80 + "omega"
    text = f"{said}; try again later or seat another model"
    short = shorten(text, 200)
    assert len(short) <= 200 and short.endswith("; try again later or seat another model")
    assert short.startswith("server_error: endpoint 'north' failed (500) alpha")
    assert "alpha…;" in short and not CUT_WORD.search(short)
    assert shorten("short enough; do this", 200) == "short enough; do this"


def test_shorten_without_room_for_the_advice_cuts_at_a_sentence_or_a_word():
    assert (
        shorten("One sentence here. Another sentence that goes on and on.", 30)
        == "One sentence here. …"
    )
    cut = shorten("words " * 40, 50)
    assert len(cut) <= 50 and cut.endswith("words…") and not CUT_WORD.search(cut)
    assert shorten("x" * 80, 20) == "x" * 19 + "…"  # one long token: nothing else to cut at


# -- the wording: every way a message may show where an upstream is ------------------------------
@pytest.mark.parametrize(
    "base_url, text, said",
    [
        (
            "http://127.0.0.1:8000/v1",
            "upstream 127.0.0.1:8000 answered (404) no route http://127.0.0.1:8000/v1/chat/completions; "
            "check the parameters",
            "endpoint 'local' answered (404) no route endpoint 'local'; check the parameters",
        ),
        (
            "https://llm.internal.example/v1",
            "cannot resolve the host of upstream llm.internal.example:443 (Name or service not known); "
            "check the endpoint URL",
            "cannot resolve the host of endpoint 'local' (Name or service not known); check the "
            "endpoint URL",
        ),
        (
            "https://origin.example:8443/v1",
            "proxy 10.0.0.7:3128 would not open a tunnel to origin.example:8443 (403); check that the "
            "proxy lets you reach this host and port",
            "the proxy would not open a tunnel to endpoint 'local' (403); check that the proxy lets "
            "you reach this host and port",
        ),
        (
            "http://[::1]:9000/v1",
            "upstream [::1]:9000 via proxy [fd00::2]:3128 closed the connection mid-answer; try again",
            "endpoint 'local' via the proxy closed the connection mid-answer; try again",
        ),
        (
            "http://127.0.0.1:port/v1",
            "endpoint URL 'http://127.0.0.1:port/v1' cannot be parsed; write it like http://...",
            "endpoint URL 'endpoint 'local'' cannot be parsed; write it like http://...",
        ),
    ],
)
def test_named_leaves_no_address_of_the_upstream_or_its_proxy(base_url, text, said):
    assert named(text, base_url, "local") == said


def test_named_leaves_words_that_merely_contain_the_host_alone():
    text = "upstream sim:80 answered (500) the simulated server failed; try again later"
    assert (
        named(text, "http://sim/v1", "north")
        == "endpoint 'north' answered (500) the simulated server failed; try again later"
    )
