"""What an upstream says, seen end to end: the gateway → the client → the simulated upstream, and
the JSONL the panel leaves behind. An upstream's text must never cost a panel or a log line, and
must never carry the endpoint's key to the caller or into the data folder."""

import json

from conftest import read_jsonl

SECRET = "sk-sim-echoed-7d41b09a"


def ask(gw, content="Review: def add(a, b): return a - b"):
    return gw.post(
        "/v1/chat/completions",
        {"model": "bench/trio", "messages": [{"role": "user", "content": content}]},
    )


def data_files(home):
    return [f for f in home.root.rglob("*") if f.is_file()]


def test_a_lone_surrogate_from_an_upstream_costs_no_panel_and_no_log_line(gateway, home, sim):
    sim.script("mid", answer="half a pair \ud800 then the rest")  # sent as the escape \ud800
    sim.script("slow", fail="server_error", message="broken \udfff message")
    status, body, _ = ask(gateway)
    assert status == 200, body
    seats = {s["alias"]: s for s in body["bench"]["seats"]}
    assert seats["mid"]["status"] == "ok"
    assert seats["mid"]["answer"] == "half a pair \ufffd then the rest"
    assert seats["slow"]["status"] == "error" and "broken \ufffd message" in seats["slow"]["error"]
    assert "half a pair \ufffd then the rest" in body["choices"][0]["message"]["content"]

    (panel,) = read_jsonl(home.gateway_runs / "calls.jsonl")
    assert panel["panel"] == body["bench"]["panel"]
    logged = {s["alias"]: s for s in panel["seats"]}
    assert set(logged) == set(seats), "every seat is in the panel's line"
    evidence = [e for e in read_jsonl(home.gateway_runs / "evidence.jsonl") if e["kind"] == "seat"]
    by_alias = {e["alias"]: e for e in evidence}
    assert by_alias["mid"]["status"] == "ok", "the seat that answered with a surrogate is logged"
    assert by_alias["slow"]["status"] == "error" and "\ufffd" in by_alias["slow"]["error"]
    for f in data_files(home):  # every file still reads as UTF-8
        f.read_bytes().decode("utf-8")


def test_an_upstream_that_echoes_its_key_in_an_answer_never_passes_it_on(
    gateway, home, sim, monkeypatch
):
    monkeypatch.setenv("PANELIST_KEY_SIM", SECRET)
    for alias in ("fast", "mid"):
        sim.script(alias, require_key=SECRET, echo_auth_answer=True)
    status, body, _ = ask(gateway)
    assert status == 200, body
    assert all(r["headers"].get("Authorization") == f"Bearer {SECRET}" for r in sim.requests), (
        "every seat sent the endpoint's key"
    )
    seats = {s["alias"]: s for s in body["bench"]["seats"]}
    for alias in ("fast", "mid"):
        assert seats[alias]["status"] == "ok"
        assert seats[alias]["answer"].endswith("Called with Authorization: Bearer [api key]."), (
            f"{alias}'s echo of the key was not replaced"
        )
    assert SECRET not in json.dumps(body)
    assert read_jsonl(home.gateway_runs / "calls.jsonl"), "the panel was logged"
    leaked = [str(f) for f in data_files(home) if SECRET.encode() in f.read_bytes()]
    assert not leaked, f"the key landed in {leaked}"
