"""Health: ``panelist probe`` records a probe line per model; hard failures in a row retire a
model (from probes and gateway seats alike), a probe answer restores what health retired, never
what a person retired; transient failures never retire."""

import json

import pytest

from conftest import read_jsonl
from panelist.metrics.cli.main import main
from panelist.metrics.upkeep.health import Health
from panelist.metrics.ledger.ledger import Ledger
from panelist.metrics.roster.roster import Roster

ASK = {"model": "bench/trio", "messages": [{"role": "user", "content": "Review this."}]}


def probe(capsys, home, *aliases):
    code = main(["probe", *aliases, "--json", "--data", str(home.root)])
    out, err = capsys.readouterr()
    assert code == 0, err
    return {row["alias"]: row for row in json.loads(out)}


def evidence(home, kind):
    path = home.gateway_runs / "evidence.jsonl"
    return [r for r in read_jsonl(path) if r["kind"] == kind] if path.exists() else []


def alerts(home):
    path = home.root / "runs" / "alerts.jsonl"
    return read_jsonl(path) if path.exists() else []


def retired(home, alias):
    return Roster(home).view().models[alias].retired


def set_retire_after(home, n):
    home.file("gateway.json").write_text(json.dumps({"retire_after": n}))


def test_probe_records_one_line_per_model_and_no_seat(capsys, home, sim):
    rows = probe(capsys, home, "fast", "mid")
    assert [rows[a]["status"] for a in ("fast", "mid")] == ["ok", "ok"]
    lines = evidence(home, "probe")
    assert [(r["alias"], r["endpoint"], r["status"], r["error_kind"]) for r in lines] == [
        ("fast", "sim", "ok", ""),
        ("mid", "sim", "ok", ""),
    ]
    assert all(isinstance(r["seconds"], float) and r["ts"].endswith("Z") for r in lines)
    assert sim.count("fast") == 1 and sim.count("slow") == 0
    # probes are no seats: the ledger's stats and seating do not see them
    with Ledger(home.gateway_runs) as ledger:
        assert ledger.model_stats() == {}
    # no alias: every model on the roster
    assert set(probe(capsys, home)) == set(Roster(home).view().models)


def test_hard_failures_retire_and_a_probe_answer_restores(capsys, home, sim):
    sim.script("fast", fail="auth")
    for n in (1, 2):
        row = probe(capsys, home, "fast")["fast"]
        assert (row["status"], row["error_kind"], row["action"]) == ("error", "auth", "")
        assert not retired(home, "fast")
    assert alerts(home) == []
    row = probe(capsys, home, "fast")["fast"]
    assert (row["error_kind"], row["action"]) == ("auth", "retired")
    assert retired(home, "fast")
    [alert] = alerts(home)
    assert (alert["kind"], alert["subject"], alert["error_kind"]) == ("retired", "fast", "auth")
    assert "3 hard failures in a row" in alert["reason"]
    assert "then Probe on its model page (or `panelist probe fast`)" in alert["message"]
    changes = read_jsonl(home.file("changes.jsonl"))
    assert changes[-1]["by"] == "health" and changes[-1]["new"]["retired"] is True

    sim.script("fast", fail="auth")  # still failing: stays retired, no second alert
    assert probe(capsys, home, "fast")["fast"]["action"] == ""
    assert len(alerts(home)) == 1

    sim.script("fast")  # the upstream heals
    row = probe(capsys, home, "fast")["fast"]
    assert (row["status"], row["action"]) == ("ok", "restored")
    assert not retired(home, "fast")
    assert [a["kind"] for a in alerts(home)] == ["retired", "restored"]
    assert [r["status"] for r in evidence(home, "probe")] == ["error"] * 4 + ["ok"]


@pytest.mark.parametrize("fail", ["not_found", "gone"])
def test_a_model_not_found_or_gone_is_hard_too(capsys, home, sim, fail):
    set_retire_after(home, 1)
    sim.script("mid", fail=fail)
    row = probe(capsys, home, "mid")["mid"]
    assert (row["error_kind"], row["action"]) == ("not_found", "retired")
    assert retired(home, "mid")


def test_a_hand_retired_model_stays_retired(capsys, home, sim):
    Roster(home).retire("fast", by="cli")
    row = probe(capsys, home, "fast")["fast"]
    assert (row["status"], row["action"]) == ("ok", "")
    assert retired(home, "fast")
    assert alerts(home) == []


@pytest.mark.parametrize("probe_between", [True, False])
def test_a_model_restored_by_hand_then_retired_by_hand_is_not_restored(
    capsys, home, sim, probe_between
):
    set_retire_after(home, 1)
    sim.script("fast", fail="auth")
    assert probe(capsys, home, "fast")["fast"]["action"] == "retired"
    roster = Roster(home)
    roster.restore("fast", by="cli")
    if probe_between:
        probe(capsys, home, "mid")  # health sees the model back in service
    roster.retire("fast", by="cli")
    sim.script("fast")
    assert probe(capsys, home, "fast")["fast"]["action"] == ""
    assert retired(home, "fast")


def test_transient_failures_never_retire_nor_clear_a_run(capsys, home, sim):
    set_retire_after(home, 2)
    for fail in ("server_error", "rate_limit", "server_error", "rate_limit"):
        sim.script("fast", fail=fail, retry_after=0)
        row = probe(capsys, home, "fast")["fast"]
        assert row["status"] == "error" and row["action"] == ""
    assert {r["error_kind"] for r in evidence(home, "probe")} == {"server_error", "rate_limit"}
    assert not retired(home, "fast")
    # one hard failure, a transient one between, then another hard one: two in a row
    for fail in ("auth", "server_error", "auth"):
        sim.script("fast", fail=fail)
        row = probe(capsys, home, "fast")["fast"]
    assert row["action"] == "retired"
    assert alerts(home)[0]["reason"].startswith("2 hard failures in a row")


def test_an_answer_clears_the_run(capsys, home, sim):
    set_retire_after(home, 2)
    for fail in ("auth", None, "auth"):
        sim.script("fast", fail=fail)
        assert probe(capsys, home, "fast")["fast"]["action"] == ""
    assert not retired(home, "fast")


def test_gateway_seat_failures_count_with_probes(capsys, home, sim, gateway):
    probe(capsys, home, "slow")  # health starts counting here
    sim.script("fast", fail="auth")
    for _ in range(2):
        status, body, _ = gateway.post("/v1/chat/completions", ASK)
        assert status == 200, body
    seats = [r for r in evidence(home, "seat") if r["alias"] == "fast"]
    assert len(seats) == 2 and all(r["error"].startswith("auth:") for r in seats)
    assert not retired(home, "fast")
    row = probe(capsys, home, "fast")["fast"]
    assert row["action"] == "retired"
    assert alerts(home)[0]["reason"].startswith("3 hard failures in a row")


def test_each_line_is_counted_once_across_sweeps(home, sim):
    set_retire_after(home, 2)
    sim.script("fast", fail="auth")
    health = Health(home)
    try:
        assert health.probe(["fast"])[0].action == ""
        assert health.sweep() == {} and health.sweep() == {}
        assert not retired(home, "fast")
        assert health.probe(["fast"])[0].action == "retired"
    finally:
        health.close()


def test_bad_input_says_what_to_do(capsys, folder):
    code = main(["probe", "nobody", "--data", str(folder.root)])
    _, err = capsys.readouterr()
    assert code == 1 and "unknown model(s) nobody" in err and "panelist model list" in err
    set_retire_after(folder, 0)
    code = main(["probe", "fast", "--data", str(folder.root)])
    _, err = capsys.readouterr()
    assert code == 1 and "retire_after must be a whole number of 1 or more" in err
    code = main(["probe", "--timeout", "0", "--data", str(folder.root)])
    _, err = capsys.readouterr()
    assert code == 1 and "--timeout" in err
    assert evidence(folder, "probe") == []


def test_retire_and_restore_by_hand_are_alerts_too(capsys, home, gateway):
    d = str(home.root)
    assert (
        main(["model", "retire", "mid", "--reason", "answers in the wrong language", "--data", d])
        == 0
    )
    assert "retired mid" in capsys.readouterr().out
    assert retired(home, "mid")
    status, body, _ = gateway.post(
        "/v1/chat/completions",
        {"model": "bench/trio", "messages": [{"role": "user", "content": "hi"}]},
    )
    assert status == 200 and "mid" not in {s["alias"] for s in body["bench"]["seats"]}
    assert main(["model", "retire", "mid", "--data", d]) == 0  # already: nothing to do
    assert "retired already" in capsys.readouterr().out
    assert main(["model", "restore", "mid", "--data", d]) == 0
    capsys.readouterr()
    assert not retired(home, "mid")
    said = alerts(home)
    assert [(a["kind"], a["subject"], a["by"]) for a in said] == [
        ("retired", "mid", "cli"),
        ("restored", "mid", "cli"),
    ]
    assert said[0]["reason"] == "answers in the wrong language"
    assert "Restore on its model page (or `panelist model restore mid`)" in said[0]["message"]
    assert main(["model", "retire", "nobody", "--data", d]) == 1
    assert "unknown model 'nobody'" in capsys.readouterr().err
