"""Small things agents read: who a panel skipped, what a model takes, how long a seat has run.

With explorers off the rest of the roster is not listed as skipped (it was never a candidate);
Anthropic's ``models.retrieve`` reads a collection's shared window as ``max_input_tokens``; a
seat still running behind a picked reply shows the seconds it has run so far, in ``bench`` and in
the MCP tool's text."""

import anthropic

from conftest import PATIENCE, set_limits
from panelist.metrics.cli import mcp as mcp_server

ASK = {"model": "bench/trio", "messages": [{"role": "user", "content": "Review: x = 1/0"}]}


def test_with_explorers_off_the_rest_of_the_roster_is_not_listed_as_skipped(gateway, home):
    set_limits(home, max_explorers=0)
    status, body, _ = gateway.post("/v1/chat/completions", ASK)
    assert status == 200, body
    assert {s["alias"] for s in body["bench"]["seats"]} == {"fast", "mid", "slow"}
    assert body["bench"]["skipped"] == []
    set_limits(home, max_explorers=2)  # with seats to fill, those left out say why
    status, body, _ = gateway.post("/v1/chat/completions", ASK)
    (skipped,) = body["bench"]["skipped"]  # three explorer candidates, two seats
    assert skipped["alias"].startswith("x-") and "older evidence" in skipped["why"]


def test_anthropic_models_retrieve_reads_the_shared_window(gateway, home):
    with anthropic.Anthropic(base_url=gateway.url, api_key="local", max_retries=0) as client:
        model = client.models.retrieve("bench/trio:pick")
    assert model.id == "bench/trio:pick" and model.type == "model"
    assert model.max_input_tokens == 100_000  # every member's window (conftest's roster)
    assert model.display_name == "bench/trio:pick"


def test_a_seat_running_behind_a_pick_shows_how_long_it_has_run(gateway, sim):
    assert gateway.post("/v1/chat/completions", ASK)[0] == 200
    sim.script("slow", latency=0.05, hold_after=1)  # its next call waits for the test
    try:
        text, data = mcp_server.ask(
            mcp_server.connect(gateway.url, {}),
            {"collection": "trio", "prompt": "Review: y = 2/0", "reply": "pick"},
        )
        assert sim.wait_held("slow", 1, PATIENCE)
    finally:
        sim.release("slow")
    (slow,) = [s for s in data["seats"] if s["alias"] == "slow"]
    assert slow["status"] == "running" and slow["seconds"] > 0
    assert slow["seconds"] == data["seconds"]  # it ran from the panel's start to the reply
    (line,) = [line for line in text.splitlines() if "slow (member)" in line]
    assert line.endswith(f"running · {slow['seconds']:.2f} s so far")
