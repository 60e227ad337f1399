"""A rate-limited model rests for the upstream's Retry-After, but never past max_cooldown; and
`panelist model restore` ends a cooldown and a retirement, leaving a record of both."""

import json
import time

from conftest import read_jsonl
from panelist.metrics.cli.main import main
from panelist.metrics.ledger.ledger import Ledger
from panelist.metrics.roster.roster import Roster

YEAR = 365 * 24 * 3600
ASK = {"model": "bench/trio", "messages": [{"role": "user", "content": "review this"}]}


def seat_of(body, alias):
    return [s for s in body["bench"]["seats"] if s["alias"] == alias]


def skipped(body, alias):
    return [s for s in body["bench"]["skipped"] if s["alias"] == alias]


def test_a_year_long_retry_after_is_capped_and_restore_ends_it(gateway, home, sim, capsys):
    sim.script("mid", fail="rate_limit", retry_after=YEAR)
    status, body, _ = gateway.post("/v1/chat/completions", ASK)
    assert status == 200 and seat_of(body, "mid")[0]["status"] == "error"
    (cool,) = [
        e for e in read_jsonl(home.gateway_runs / "evidence.jsonl") if e["kind"] == "cooldown"
    ]
    assert cool["alias"] == "mid" and cool["seconds"] == 3600
    sim.script("mid")  # the upstream is fine again; the model still rests
    status, body, _ = gateway.post("/v1/chat/completions", ASK)
    assert not seat_of(body, "mid") and "cooling down" in skipped(body, "mid")[0]["why"]

    code = main(["model", "restore", "mid", "--data", str(home.root)])
    out = capsys.readouterr().out
    assert code == 0 and "ended a cooldown" in out
    last = read_jsonl(home.gateway_runs / "evidence.jsonl")[-1]
    assert last["kind"] == "cooldown" and last["alias"] == "mid" and last["seconds"] == 0
    assert "restore" in last["reason"]
    status, body, _ = gateway.post("/v1/chat/completions", ASK)
    assert seat_of(body, "mid")[0]["status"] == "ok"


def test_max_cooldown_is_a_setting(gateway, home, sim):
    path = home.file("gateway.json")
    doc = json.loads(path.read_text())
    path.write_text(json.dumps(dict(doc, max_cooldown=5)))
    sim.script("slow", fail="rate_limit", retry_after=600)
    gateway.post("/v1/chat/completions", ASK)
    (cool,) = [
        e for e in read_jsonl(home.gateway_runs / "evidence.jsonl") if e["kind"] == "cooldown"
    ]
    assert cool["seconds"] == 5


def test_restore_brings_back_a_retired_model(folder, capsys):
    roster = Roster(folder)
    roster.add_model("x-one", "sim", family="x-one", context=100_000, retired=True)
    assert roster.view().models["x-one"].retired
    code = main(["model", "restore", "x-one", "--data", str(folder.root), "--json"])
    result = json.loads(capsys.readouterr().out)
    assert code == 0 and result == {"alias": "x-one", "cooldown_cleared": False, "unretired": True}
    assert not Roster(folder).view().models["x-one"].retired
    change = read_jsonl(folder.root / "config" / "changes.jsonl")[-1]
    assert change["what"] == "model x-one" and change["by"] == "cli"
    assert change["old"]["retired"] is True and change["new"]["retired"] is False


def test_restore_of_a_model_in_service_changes_nothing(folder, capsys):
    evidence = folder.gateway_runs / "evidence.jsonl"
    before = evidence.read_bytes() if evidence.exists() else b""
    assert main(["model", "restore", "fast", "--data", str(folder.root)]) == 0
    assert "nothing to do" in capsys.readouterr().out
    assert (evidence.read_bytes() if evidence.exists() else b"") == before
    assert main(["model", "restore", "nobody", "--data", str(folder.root)]) == 1
    assert "unknown model 'nobody'" in capsys.readouterr().err


def test_a_cooldown_of_zero_ends_one(tmp_path):
    with Ledger(tmp_path / "runs") as ledger:
        ledger.cool_down("m", 3600, "rate limit")
        assert ledger.states(["m"], "general")["m"].cooling_until > time.time()
        ledger.cool_down("m", 0, "restored")
        assert ledger.states(["m"], "general")["m"].cooling_until == 0.0
