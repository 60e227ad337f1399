"""Shape picking: a collection whose shape is ``auto`` has each prompt labelled by the roster's
decider model (played by the simulator, scripted with ``json``), within ``decider_budget``.
Each test asserts the reply's ``bench`` and the panel written to the call log."""

import json

import pytest

from conftest import PATIENCE, logged, read_jsonl, set_limits, wait_until
from panelist.metrics.cli.main import main
from panelist.metrics.roster.collection import Collections
from panelist.metrics.home import open_home
from panelist.metrics.roster.roster import Roster

CHAT = "/v1/chat/completions"


def run_cli_main(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def decider_asks(sim) -> list[dict]:
    """The requests the decider was sent (its response_format is named 'shape')."""
    return [
        r["body"]
        for r in sim.requests
        if (r["body"].get("response_format") or {}).get("json_schema", {}).get("name") == "shape"
    ]


@pytest.fixture()
def auto(home, sim):
    """``bench/auto`` (shape auto), a collection fixing the shape ``review``, and a decider."""
    sim.script("chooser", json={"shape": "review", "confidence": 0.9})
    roster = Roster(home)
    # of a member's family, so it is never seated as an explorer: its calls are the decider's
    roster.add_model("chooser", "sim", family="fast", context=100_000, decider=True)
    cols = Collections(home)
    cols.save(roster.view(), "auto", ["fast", "mid"], shape="auto")
    cols.save(roster.view(), "reviews", ["fast"], shape="review")
    return home


def ask(gateway, text="Please look over this diff", model="bench/auto"):
    status, body, _ = gateway.post(
        CHAT, {"model": model, "messages": [{"role": "user", "content": text}]}
    )
    assert status == 200, body
    return body["bench"]


def last_panel(home) -> dict:
    assert wait_until(lambda: logged(home))
    return logged(home)[-1]


def test_confident_decider_sets_the_shape(auto, sim, gateway):
    bench = ask(gateway)
    assert bench["shape"] == "review"
    assert "decider chooser labelled it" in bench["shape_by"]
    d = bench["decider"]
    assert d["status"] == "ok" and d["alias"] == "chooser" and d["shape"] == "review"
    assert d["confidence"] == 0.9 and d["call"].startswith("decide-")
    asked = decider_asks(sim)
    assert len(asked) == 1
    schema = asked[0]["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["shape"]["enum"] == ["general", "review"]
    record = last_panel(auto)
    assert record["shape"] == "review" and record["decider"] == d
    assert record["shape_by"] == bench["shape_by"]
    # the evidence log seats the panel under the label, so the ledger learns per shape
    seated = [
        r
        for r in read_jsonl(auto.gateway_runs / "evidence.jsonl")
        if r.get("panel") == record["panel"] and "aliases" in r
    ]
    assert [r["shape"] for r in seated] == ["review"]


def test_unsure_decider_means_general(auto, sim, gateway):
    sim.script("chooser", json={"shape": "review", "confidence": 0.3})
    bench = ask(gateway)
    assert bench["shape"] == "general" and "unsure" in bench["shape_by"]
    assert bench["decider"]["confidence"] == 0.3 and bench["decider"]["status"] == "ok"
    assert last_panel(auto)["shape"] == "general"


def test_failing_decider_means_general(auto, sim, gateway):
    sim.script("chooser", fail="server_error")
    bench = ask(gateway)
    assert bench["shape"] == "general" and "failed" in bench["shape_by"]
    assert bench["decider"]["status"] == "error" and bench["decider"]["shape"] is None
    assert all(s["status"] == "ok" for s in bench["seats"])
    record = last_panel(auto)
    assert record["shape"] == "general" and record["decider"]["status"] == "error"


@pytest.mark.parametrize(
    "answer",
    [
        '{"shape": "review"}',
        "not json",
        '{"shape": "poetry", "confidence": 0.99}',
        '{"shape": "review", "confidence": 1.5}',
        '{"shape": "review", "confidence": true}',
    ],
)
def test_an_answer_that_is_not_the_json_asked_for_means_general(auto, sim, gateway, answer):
    sim.script("chooser", json=answer)
    bench = ask(gateway)
    assert bench["shape"] == "general"
    assert bench["decider"]["status"] == "error"
    assert "unusable answer" in bench["decider"]["error"]


def test_slow_decider_is_given_up_at_the_budget(auto, sim, gateway):
    # the decider would take far longer than the test's own patience: the panel answers only
    # because the gateway stops waiting for it at the budget and cuts its connection
    sim.script("chooser", latency=PATIENCE * 4, json={"shape": "review", "confidence": 0.9})
    set_limits(auto, decider_budget=0.5)
    bench = ask(gateway)
    assert bench["shape"] == "general" and "failed" in bench["shape_by"]
    assert bench["decider"]["status"] == "error" and "timeout" in bench["decider"]["error"]
    assert all(s["status"] == "ok" for s in bench["seats"])
    assert sim.wait_disconnects(1, PATIENCE)  # the decider's call was cut, not waited for
    assert last_panel(auto)["decider"]["status"] == "error"


def test_same_prompt_asks_the_decider_once(auto, sim, gateway):
    first = ask(gateway, "the same prompt twice")
    second = ask(gateway, "the same prompt twice")
    assert len(decider_asks(sim)) == 1
    assert first["shape"] == second["shape"] == "review"
    assert second["decider"]["cached"] is True
    assert second["decider"]["call"] == first["decider"]["call"]
    ask(gateway, "another prompt")
    assert len(decider_asks(sim)) == 2


def test_failures_are_not_cached(auto, sim, gateway):
    sim.script("chooser", fail="server_error")
    assert ask(gateway, "ask me again")["shape"] == "general"
    sim.script("chooser", json={"shape": "review", "confidence": 0.8})
    assert ask(gateway, "ask me again")["shape"] == "review"
    assert len(decider_asks(sim)) == 2


def test_no_explorer_seats_means_nothing_is_asked(auto, sim, gateway):
    set_limits(auto, max_explorers=0)
    bench = ask(gateway)
    assert bench["shape"] == "general" and "no explorer seats" in bench["shape_by"]
    assert "decider" not in bench
    assert decider_asks(sim) == []
    record = last_panel(auto)
    assert record["shape"] == "general" and record["decider"] is None


def test_no_decider_on_the_roster_means_general(home, sim, gateway):
    Collections(home).save(Roster(home).view(), "auto", ["fast"], shape="auto")
    bench = ask(gateway)
    assert bench["shape"] == "general"
    assert "panelist model decider" in bench["shape_by"]
    assert decider_asks(sim) == []


def test_fixed_shapes_ask_nothing(auto, sim, gateway):
    bench = ask(gateway, model="bench/reviews")
    assert bench["shape"] == "review" and bench["shape_by"] == "set on the collection"
    assert decider_asks(sim) == [] and "decider" not in bench


def test_one_decider_at_a_time(tmp_path, capsys):
    d = str(tmp_path / "d")
    run_cli_main(capsys, "endpoint", "add", "local", "http://127.0.0.1:9/v1", "--data", d)
    run_cli_main(capsys, "model", "add", "one", "--endpoint", "local", "--decider", "--data", d)
    run_cli_main(capsys, "model", "add", "two", "--endpoint", "local", "--data", d)
    doc = json.loads(open_home(d).file("roster.json").read_text())
    assert doc["models"]["one"]["decider"] is True and "decider" not in doc["models"]["two"]
    code, out, _ = run_cli_main(capsys, "model", "decider", "two", "--data", d)
    assert code == 0 and "two is now the decider" in out
    doc = json.loads(open_home(d).file("roster.json").read_text())
    assert "decider" not in doc["models"]["one"] and doc["models"]["two"]["decider"] is True
    code, out, _ = run_cli_main(
        capsys, "model", "add", "three", "--endpoint", "local", "--decider", "--data", d
    )
    doc = json.loads(open_home(d).file("roster.json").read_text())
    assert [a for a, m in doc["models"].items() if m.get("decider")] == ["three"]
    code, _, err = run_cli_main(capsys, "model", "decider", "nobody", "--data", d)
    assert code != 0 and "unknown model 'nobody'" in err


def test_decider_budget_must_be_positive(folder):
    from panelist.metrics.errors import ConfigInvalid

    with pytest.raises(ConfigInvalid, match="decider_budget"):
        Collections(folder).set_limits({"decider_budget": 0})
