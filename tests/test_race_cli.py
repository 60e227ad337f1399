"""The race without code from the command line and from Python: ``panelist race`` (jobs, tools
from a file, a set of inputs, progress on a terminal), the same report shape from the CLI, HTTP
and the Python API, and the example job; all on the simulated upstream."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from surfacekit import CANDIDATES, JUDGE_SAYS, PROMPT, book, finished, gateway, race_folder
from surfacekit import home, pinned, sim  # noqa: F401  (fixtures)
from conftest import read_jsonl
from panelist.metrics.cli.main import main
from panelist.metrics.race.benchmark import Benchmark

ROOT = Path(__file__).resolve().parent.parent


# -- the same report three ways --------------------------------------------------------------------
def shape(value):
    """The keys at every level (a list by its first element), values left out."""
    if isinstance(value, dict):
        return {k: shape(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):  # a tuple in Python is a list in JSON
        return [shape(value[0])] if value and isinstance(value[0], (dict, list)) else "list"
    return "value"


class PlainJob:
    grade = "general"

    def run(self, prompt, seat):
        return seat.chat([{"role": "user", "content": prompt}])


def test_the_cli_the_http_route_and_the_python_api_give_the_same_report_shape(pinned, capsys):
    bench = Benchmark(PlainJob, runs=2, home=pinned, admission=None)
    bench.set_input(PROMPT)
    bench.set_candidates(CANDIDATES)
    bench.run()
    from_python = bench.report().public()

    code = main(
        [
            "race",
            "--grade",
            "general",
            "--prompt",
            PROMPT,
            "--runs",
            "2",
            "--candidates",
            ",".join(CANDIDATES),
            "--data",
            str(pinned.root),
            "--json",
        ]
    )
    out, _ = capsys.readouterr()
    assert code == 0
    from_cli = json.loads(out)

    with gateway(pinned, grades=False) as server:  # the data folder's grades, as deployed
        status, started, _ = server.post(
            "/bench/race",
            {"grade": "general", "prompt": PROMPT, "runs": 2, "candidates": CANDIDATES},
        )
        assert status == 202
        from_http = finished(server, started["race"])["report"]

    assert len({from_python["race"], from_cli["race"], from_http["race"]}) == 3
    assert shape(from_python) == shape(from_cli) == shape(from_http)
    assert [(r["model"], r["run"]) for r in from_cli["rows"]] == [
        (r["model"], r["run"]) for r in from_http["rows"]
    ]


def test_http_and_python_reports_share_one_shape_by_an_injected_grade_book(home):
    bench = Benchmark(PlainJob, runs=2, home=home, grades=book(home), admission=None)
    bench.set_input(PROMPT)
    bench.set_candidates(CANDIDATES)
    bench.run()
    with gateway(home) as server:
        status, started, _ = server.post(
            "/bench/race",
            {"grade": "general", "prompt": PROMPT, "runs": 2, "candidates": CANDIDATES},
        )
        from_http = finished(server, started["race"])["report"]
    assert shape(bench.report().public()) == shape(from_http)


# -- panelist race ---------------------------------------------------------------------------------
def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_the_cli_refuses_bad_races_in_one_line(folder, tmp_path, capsys):
    d = str(folder.root)
    cases = [
        (["--grade", "general"], "nothing to race"),
        (["--grade", "general", "--prompt", "x", "--runs", "0"], "'runs'"),
        (["--grade", "general", "--prompt", "x", "--candidates", ","], "'candidates'"),
        (["--grade", "huge", "--prompt", "x"], "no model on the roster is of grade 'huge'"),
        (["--grade", "general", "--prompt", "x", "-f", str(tmp_path / "none.txt")], "cannot read"),
        (
            ["--grade", "general", "--prompt", "x", "--tools", str(tmp_path / "none.py")],
            "no tools file",
        ),
    ]
    empty = tmp_path / "empty.py"
    empty.write_text("x = 1\n")
    cases.append((["--grade", "general", "--prompt", "x", "--tools", str(empty)], "no TOOLS list"))
    broken = tmp_path / "broken.py"
    broken.write_text("TOOLS = [print]\n")
    cases.append((["--grade", "general", "--prompt", "x", "--tools", str(broken)], "is not a tool"))
    failing = tmp_path / "failing.py"
    failing.write_text("raise RuntimeError('no database')\n")
    cases.append(
        (
            ["--grade", "general", "--prompt", "x", "--tools", str(failing)],
            "RuntimeError: no database",
        )
    )
    lines = tmp_path / "inputs.jsonl"
    lines.write_text('"Where is order 1042?"\n{"question": "x"}\n')
    cases.append((["--grade", "general", "--prompt", "x", "--inputs", str(lines)], "not both"))
    cases.append((["--grade", "general", "--inputs", str(lines)], "line 2 is not an input"))
    lines_bad = tmp_path / "bad.jsonl"
    lines_bad.write_text('"fine"\nWhere is it?\n')
    cases.append((["--grade", "general", "--inputs", str(lines_bad)], "line 2 is not JSON"))
    blank = tmp_path / "blank.jsonl"
    blank.write_text("\n\n")
    cases.append((["--grade", "general", "--inputs", str(blank)], "holds no input"))
    cases.append((["--grade", "general", "--inputs", str(tmp_path / "none.jsonl")], "cannot read"))
    cases.append((["--grade", "general", "--prompt", "x", "--margin", "0"], "'margin'"))
    # a file that never ends is refused after a bounded read, never read until memory runs out
    cases.append((["--grade", "general", "-f", "/dev/zero"], "larger than 16 MiB (or never ends)"))
    cases.append((["--grade", "general", "--inputs", "/dev/zero"], "larger than 16 MiB"))
    cases.append((["--grade", "general", "-f", str(tmp_path)], "is a folder"))
    latin = tmp_path / "latin.txt"
    latin.write_bytes("caf\xe9".encode("latin-1"))
    cases.append((["--grade", "general", "-f", str(latin)], "is not UTF-8 text"))
    for args, words in cases:
        code, out, err = run(capsys, "race", *args, "--data", d)
        assert code == 1 and err.count("\n") == 1 and words in err, (args, err)
        assert err.startswith("panelist: error: ")


TOOLS_FILE = '''
from panelist.metrics.race import tool

@tool({"type": "object", "properties": {"number": {"type": "string"}}, "required": ["number"]})
def find_order(number):
    """Find an order by its number."""
    return {"order": number, "status": "shipped"}

def shipping_status(order_id):
    return {"order_id": order_id, "eta": "Monday"}

TOOLS = [find_order, (shipping_status, {"type": "object",
                                        "properties": {"order_id": {"type": "string"}}})]
'''


def test_the_cli_races_a_job_with_tools_from_a_file(pinned, sim, tmp_path, capsys):
    tools = tmp_path / "tools.py"
    tools.write_text(TOOLS_FILE)
    calls = [
        {"name": "find_order", "arguments": {"number": "1042"}},
        {"name": "shipping_status", "arguments": {"order_id": "o-1042"}},
    ]
    sim.script("pinned-gen", tool_calls=calls)
    sim.script("cheap-gen", tool_calls=calls[:1])  # skips the second tool
    prompt = tmp_path / "question.txt"
    prompt.write_text("Order 1042, please.")
    code, out, err = run(
        capsys,
        "race",
        "--grade",
        "general",
        "--prompt",
        "Hello.",
        "-f",
        str(prompt),
        "--candidates",
        "pinned-gen,cheap-gen",
        "--tools",
        str(tools),
        "--runs",
        "1",
        "--data",
        str(pinned.root),
    )
    assert code == 0, err
    assert "grade general · reference pinned-gen · judge judge-top" in out
    assert out.rstrip().splitlines()[-2].startswith("verdict: ")
    assert "\x1b[" not in err, "no progress drawn when stderr is not a terminal"
    race = out.split()[1]
    report = json.loads((race_folder(pinned) / f"{race}.json").read_text())
    assert report["task"] == "Hello.\n\nOrder 1042, please."
    events = report["reference"]["transcript"]["events"]
    used = [(e["tool"], e["returned"]) for e in events if e["kind"] == "tool"]
    assert used == [
        ("find_order", '{"order": "1042", "status": "shipped"}'),
        ("shipping_status", '{"eta": "Monday", "order_id": "o-1042"}'),
    ]
    pinned_row, cheap_row = report["rows"]
    assert pinned_row["tool_difference"] == {
        "skipped": [],
        "different": [],
        "extra": [],
        "new_tool": [],
        "equivalent": [],
        "unused": [],
        "allowed": [],
    }
    assert cheap_row["tool_difference"]["skipped"] == [
        {"tool": "shipping_status", "arguments": {"order_id": "o-1042"}, "reference_call": 2}
    ]
    assert cheap_row["accuracy"] == 4 and cheap_row["capped_from"] == 6


# a judge that marks down an answer that does not help, by its text; slow-gen gives it
DISCERNING = [
    {
        "contains": "I cannot help with orders",
        "answer": {"accuracy": 1, "shown_work": 0, "reason": "it does not answer the question"},
    }
]
QUESTIONS = [
    "Where is order 1042?",
    "Has order 1043 shipped?",
    "When does order 1044 arrive?",
    "Where is order 1045?",
    "Is order 1046 late?",
    "Can order 1047 be sent to my office?",
]
INPUT_LINES = [
    '"Where is order 1042?"',
    '{"prompt": "Has order 1043 shipped?"}',
    "",
    '"When does order 1044 arrive?"',
    '"Where is order 1045?"',
    '{"prompt": "Is order 1046 late?"}',
    '"Can order 1047 be sent to my office?"',
]
THREE = ["pinned-gen", "cheap-gen", "slow-gen"]


def discerning(sim):
    sim.script("judge-top", json=JUDGE_SAYS, json_rules=DISCERNING)
    sim.script("slow-gen", answer="I cannot help with orders.")


def test_the_cli_races_a_set_of_inputs_from_a_jsonl_file_to_a_verdict(
    pinned, sim, tmp_path, capsys
):
    discerning(sim)
    path = tmp_path / "inputs.jsonl"
    path.write_text("\n".join(INPUT_LINES) + "\n")
    code, out, err = run(
        capsys,
        "race",
        "--grade",
        "general",
        "--inputs",
        str(path),
        "--runs",
        "1",
        "--candidates",
        ",".join(THREE),
        "--data",
        str(pinned.root),
        "--json",
    )
    assert code == 0, err
    report = json.loads(out)
    assert report["inputs"] == QUESTIONS and report["task"] == QUESTIONS[0]
    assert [(r["input"], r["succeeded"]) for r in report["references"]] == [
        (i, True) for i in range(1, 7)
    ]
    assert sorted((r["model"], r["input"], r["run"]) for r in report["rows"]) == sorted(
        (m, i, 1) for m in THREE for i in range(1, 7)
    )
    said = report["verdict"]
    assert said["test"]["unit"] == "input" and said["test"]["margin"] == 1.0
    assert said["model"] == "cheap-gen" and said["state"] == "named"
    by = {c["model"]: c for c in said["candidates"]}
    assert by["slow-gen"]["result"] == "worse", "the cheapest, but it does not help"
    assert by["cheap-gen"]["measures"]["accuracy"]["n"] == 6, "an input is a unit"
    assert by["cheap-gen"]["p_holm"] <= said["test"]["level"]
    # each judgement read one input, and the reference of that input
    asked = [
        r["body"]["messages"][-1]["content"] for r in sim.requests if r["model"] == "judge-top"
    ]
    assert len(asked) == 36, "18 runs, each judged in both orders"
    for question in QUESTIONS:
        assert sum(question in a for a in asked) == 6, question


def test_a_race_over_http_takes_a_list_of_inputs(home, sim):
    discerning(sim)
    with gateway(home) as server:
        status, started, _ = server.post(
            "/bench/race",
            {
                "grade": "general",
                "inputs": QUESTIONS,
                "runs": 2,
                "candidates": THREE,
                "margin": 1.5,
            },
        )
        assert status == 202, started
        assert started["progress"]["runs"] == 3 * 6 * 2
        done = finished(server, started["race"])
    report = done["report"]
    assert report["inputs"] == QUESTIONS and report["verdict"]["test"]["margin"] == 1.5
    assert done["verdict"]["model"] == "cheap-gen"
    assert done["progress"]["reference"] == "done"
    assert done["progress"]["models"]["cheap-gen"] == {
        "runs": 12,
        "done": 12,
        "failed": 0,
        "judged": 12,
    }
    calls = read_jsonl(race_folder(home) / started["race"] / "calls.jsonl")
    assert sorted(c["input"] for c in calls if c["role"] == "reference") == list(range(1, 7))


def test_a_race_over_http_says_which_extra_tool_calls_it_allows(home, sim):
    with gateway(home) as server:
        status, started, _ = server.post(
            "/bench/race",
            {
                "grade": "general",
                "prompt": PROMPT,
                "candidates": ["cheap-gen"],
                "allow_extra_tools": ["find_order", "find_order", "shipping_status"],
            },
        )
        assert status == 202, started
        report = finished(server, started["race"])["report"]
    assert report["allow_extra_tools"] == ["find_order", "shipping_status"]
    assert report["rows"][0]["flags"] == [], "a plain answer holds nothing addressed to a judge"


def test_a_failed_reference_prints_the_report_then_exits_3(pinned, sim, capsys):
    sim.script("pinned-gen", fail="auth")
    code, out, err = run(
        capsys, "race", "--grade", "general", "--prompt", PROMPT, "--data", str(pinned.root)
    )
    assert code == 3
    assert "reference: FAILED" in out
    assert err.startswith("panelist: error: the reference run failed") and err.count("\n") == 1


def race_on_a_terminal(home, *extra):
    """``panelist race`` from the checkout with its stderr on a pseudo-terminal: (code, stdout,
    what the terminal showed)."""
    master, slave = pty.openpty()
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    proc = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "metrics" / "offload.py"),
            "race",
            "--grade",
            "general",
            "--prompt",
            PROMPT,
            "--runs",
            "2",
            "--candidates",
            "pinned-gen,cheap-gen",
            "--data",
            str(home.root),
            *extra,
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=slave,
        cwd=ROOT,
        env=env,
    )
    os.close(slave)
    shown = b""
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # the other end closed: the command ended
            break
        if not data:
            break
        shown += data
    os.close(master)
    out = proc.stdout.read().decode()
    proc.stdout.close()
    return proc.wait(timeout=60), out, shown.decode(errors="replace")


def test_progress_is_shown_on_a_terminal_per_model(pinned):
    code, out, shown = race_on_a_terminal(pinned)
    assert code == 0, shown
    race = out.split()[1]
    assert f"race {race} · grade general · judge judge-top" in shown
    assert "reference pinned-gen: done · 4/4 runs done, 4 judged" in shown
    assert "pinned-gen  2/2 runs done · 2 judged" in shown
    assert "cheap-gen   2/2 runs done · 2 judged" in shown
    assert "verdict:" in out and "\x1b" not in out, "stdout holds the report alone"


# -- the example -----------------------------------------------------------------------------------
@pytest.mark.slow
def test_the_order_agent_example_races_on_the_demo_roster_offline(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "examples" / "order_agent.py"),
            "--runs",
            "6",
            "--data",
            str(tmp_path / "data"),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.startswith("the reference answered: [simulated sim-steady] The tools said:")
    assert "grade general · reference sim-steady · judge sim-careful" in out
    assert "verdict: sim-vision: sim-vision is the cheapest model" in out
    path = Path(out.rstrip().splitlines()[-1].removeprefix("report: "))
    report = json.loads(path.read_text())
    rows = {(r["model"], r["run"]): r for r in report["rows"]}
    assert set(rows) == {
        (m, n) for m in ("sim-flaky", "sim-steady", "sim-vision") for n in range(1, 7)
    }
    flaky = rows[("sim-flaky", 1)]
    assert flaky["tool_difference"]["skipped"] == [
        {"tool": "shipping_status", "arguments": {"order_id": "ord-1042"}, "reference_call": 2}
    ]
    assert (flaky["accuracy"], flaky["score"]) == (3, 0.0), "the judge marked it down"
    said = {c["model"]: c for c in report["verdict"]["candidates"]}
    assert said["sim-flaky"]["result"] == "worse" and said["sim-vision"]["result"] == "good_enough"
    assert report["verdict"]["test"]["measures"] == ["accuracy", "score"], "the scorer took part"
    assert rows[("sim-vision", 1)]["score"] == 1.0 and rows[("sim-vision", 1)]["total"] == 9
