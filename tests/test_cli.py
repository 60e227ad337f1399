"""The ``panelist`` command: config verbs, ask and verdict on the data folder and over HTTP."""

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import read_jsonl
from panelist.metrics.cli.main import main

ROOT = Path(__file__).resolve().parent.parent


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_roster_and_collection_verbs(tmp_path, capsys):
    d = str(tmp_path / "d")
    code, out, _ = run(
        capsys, "endpoint", "add", "local", "http://127.0.0.1:9/v1", "--data", d, "--json"
    )
    assert code == 0 and json.loads(out)["key_env"] == "PANELIST_KEY_LOCAL"
    code, out, _ = run(
        capsys,
        "model",
        "add",
        "m1",
        "--endpoint",
        "local",
        "--served",
        "vendor/m1",
        "--context",
        "8192",
        "--vision",
        "--price-in",
        "0.5",
        "--data",
        d,
    )
    assert code == 0 and "m1" in out
    run(capsys, "model", "add", "m2", "--endpoint", "local", "--data", d)
    code, out, _ = run(
        capsys,
        "collection",
        "save",
        "pair",
        "--members",
        "m1,m2",
        "--description",
        "Two of them",
        "--tags",
        "a,b",
        "--data",
        d,
    )
    assert code == 0 and "2 explorer" in out
    code, out, _ = run(capsys, "--data", d, "--json", "collection", "list")
    (pair,) = json.loads(out)
    assert pair["id"] == "bench/pair" and pair["explorers"] == 2
    code, out, _ = run(capsys, "model", "list", "--data", d, "--json")
    assert {m["alias"] for m in json.loads(out)} == {"m1", "m2"}
    code, _, err = run(capsys, "model", "rm", "m1", "--data", d)
    assert code == 1 and "used by collection(s) pair" in err
    code, _, err = run(capsys, "collection", "save", "Bad!", "--members", "m1", "--data", d)
    assert code == 1 and err.count("\n") == 1 and "lower-case" in err
    code, out, err = run(capsys, "collection", "rm", "nope", "--data", d, "--json")
    assert code == 1 and json.loads(out)["error"]["message"].startswith("unknown collection")


def test_ask_and_verdict_on_the_data_folder(home, capsys):
    d = str(home.root)
    code, out, err = run(capsys, "ask", "trio", "Review this", "--data", d)
    assert code == 0
    assert out.count("## Seat") == 5
    calls = [line.split()[0] for line in err.splitlines()]
    odd = [c for c in calls if c.count(".") != 1]
    assert len(calls) == 5 and not odd, f"not call ids (panel.seat): {odd}"
    code, out, _ = run(
        capsys,
        "verdict",
        calls[0],
        "--useful",
        "--note",
        "found the real bug",
        "--real",
        "off by one",
        "--data",
        d,
    )
    assert code == 0 and "recorded" in out
    code, out, _ = run(
        capsys,
        "verdict",
        calls[0],
        "--useful",
        "--note",
        "found the real bug",
        "--real",
        "off by one",
        "--data",
        d,
        "--json",
    )
    assert json.loads(out)["written"] is False
    (v,) = [e for e in read_jsonl(home.gateway_runs / "evidence.jsonl") if e["kind"] == "verdict"]
    assert v["call"] == calls[0] and v["real"] == ["off by one"] and v["useful"] is True
    code, _, err = run(capsys, "verdict", "p20000101-1.member1", "--useful", "--data", d)
    assert code == 1 and "unknown call" in err


def test_ask_exits_non_zero_when_no_seat_answered(home, sim, capsys, tmp_path):
    for alias in ("fast", "mid", "slow", "x-one", "x-two", "x-three"):
        sim.script(alias, fail="server_error")
    prompt = tmp_path / "p.txt"
    prompt.write_text("the diff")
    code, out, err = run(
        capsys,
        "ask",
        "bench/trio",
        "-f",
        str(prompt),
        "--system",
        "be brief",
        "--data",
        str(home.root),
    )
    assert code == 3 and out.count("> error") == 5
    assert "system: be brief" in read_jsonl(home.gateway_runs / "calls.jsonl")[0]["prompt"]


def test_ask_refuses_a_prompt_file_that_never_ends(folder, capsys):
    code, out, err = run(capsys, "ask", "bench/trio", "-f", "/dev/zero", "--data", str(folder.root))
    assert code == 1 and "/dev/zero is larger than 16 MiB (or never ends)" in err and not out


def test_ask_and_verdict_against_a_running_gateway(gateway, home, capsys):
    code, out, err = run(capsys, "ask", "trio", "hello", "--url", gateway.url + "/v1", "--json")
    assert code == 0
    call = json.loads(out)["bench"]["seats"][2]["call"]
    code, out, _ = run(
        capsys,
        "verdict",
        call,
        "--not-useful",
        "--false",
        "claimed a race",
        "--url",
        gateway.url,
        "--json",
    )
    assert code == 0 and json.loads(out)["written"] is True
    code, _, err = run(capsys, "ask", "nope", "hello", "--url", gateway.url)
    assert code == 1 and "404" in err and "bench/trio" in err


def test_offload_script_records_a_verdict_from_a_checkout(home, capsys):
    run(capsys, "ask", "trio", "x", "--data", str(home.root))
    call = read_jsonl(home.gateway_runs / "calls.jsonl")[0]["seats"][0]["call"]
    env = dict(os.environ, PANELIST_HOME=str(home.root))
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "metrics" / "offload.py"),
            "verdict",
            call,
            "--useful",
            "--json",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["written"] is True


def test_a_command_line_lent_no_server_says_how_to_run_one(tmp_path, capsys):
    code, out, err = run(capsys, "gateway", "--port", "0", "--data", str(tmp_path))
    assert code == 1 and "cannot start the gateway" in err and "panelist" in err
    code, out, err = run(capsys, "suite", "run", "--demo", "--data", str(tmp_path))
    assert code == 1 and "cannot start the simulated demo models" in err
