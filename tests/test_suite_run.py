"""Suite runs against the simulated upstream over real sockets: the samples JSONL, failures
classified from the call, resume, Ctrl-C, admission, the demo and the progress bar."""

import io
import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import PATIENCE, read_jsonl, wait_until
from panelist.metrics.seats import record as seatrecord
from panelist.metrics.offload import main
from panelist.metrics.roster.roster import Roster
from panelist.suite import answers, demo, report
from panelist.suite.progress import Bar, line
from panelist.suite.runner import SuiteRun
from panelist.suite.tasks import STARTER, scan
from test_seats import CountingAdmission

ROOT = Path(__file__).resolve().parent.parent
PACK = {t.id: t for t in scan(STARTER)[0]}
FOUR = [
    "std-bisect-left",
    "std-bisect-left-control",
    "claim-wilson-all-useful",
    "claim-costs-no-tokens",
]
# the seat record (metrics/seats/record.py) and the suite's own fields
SAMPLE_FIELDS = set(seatrecord.FIELDS) | {
    "run",
    "task",
    "task_hash",
    "task_kind",
    "pair",
    "epoch",
    "params",
    "params_key",
    "prompt_hash",
    "outcome",
    "failure",
    "verdict",
    "lines",
    "flag",
    "right",
    "score",
    "key",
}


def oracle_rules():
    """Rules that make a simulated model answer each of FOUR by its key."""
    out = []
    for tid in FOUR:
        t = PACK[tid]
        text = (
            ("VERDICT: TRUE" if t.answer else "VERDICT: FALSE")
            if t.kind == "claim"
            else (f"FAULT: line {t.answer[0]}" if t.kind == "bug" else "NO FAULT")
        )
        out.append({"contains": demo.marker(t, PACK), "answer": text + "\n(simulated)"})
    return out


def suite(home, aliases, **kw):
    view = Roster(home).view()
    kw.setdefault("admission", None)
    return SuiteRun(
        home,
        [PACK[t] for t in kw.pop("tasks", FOUR)],
        [view.models[a] for a in aliases],
        known=PACK,
        **kw,
    )


def samples(home):
    return read_jsonl(home.suite_samples)


def test_each_sample_is_one_whole_line_scored_with_failures_classified_from_the_call(sim, home):
    sim.script("mid", rules=oracle_rules())
    sim.script("fast", answer="NO FAULT")
    # words that sound like failures, in an answer that is fine: never read as a failure
    sim.script("slow", answer="NO FAULT\nThe service timed out with a 503 error; empty cache.")
    sim.script("x-one", fail="empty")
    sim.script("x-two", fail="auth")
    summary = suite(home, ["mid", "fast", "slow", "x-one", "x-two"], retries=0).run()
    assert (summary["planned"], summary["asked"], summary["skipped"]) == (20, 20, 0)
    assert (summary["scored"], summary["failed"], summary["interrupted"]) == (16, 4, False)

    lines = samples(home)
    assert len(lines) == 20 and all(set(s) == SAMPLE_FIELDS for s in lines)
    by = {(s["alias"], s["task"]): s for s in lines}
    assert {s["run"] for s in lines} == {summary["run"]}
    assert all(by[("mid", t)]["right"] and by[("mid", t)]["score"] == 1 for t in FOUR)
    bug = by[("mid", "std-bisect-left")]
    assert (bug["verdict"], bug["lines"], bug["task_hash"]) == (
        "fault",
        [88],
        PACK["std-bisect-left"].hash,
    )
    assert bug["tokens"]["total"] > 0 and bug["attempts"] == 1 and bug["endpoint"] == "sim"
    # the lazy model: right on the control, wrong on the bug, the wrong form for claims
    fast = {t: (by[("fast", t)]["right"], by[("fast", t)]["flag"]) for t in FOUR}
    assert fast == {
        "std-bisect-left": (False, ""),
        "std-bisect-left-control": (True, ""),
        "claim-wilson-all-useful": (False, "wrong_form"),
        "claim-costs-no-tokens": (False, "wrong_form"),
    }
    slow = by[("slow", "std-bisect-left-control")]
    assert (slow["outcome"], slow["failure"], slow["right"]) == ("scored", "", True)
    empty = by[("x-one", "std-bisect-left")]
    assert (empty["status"], empty["outcome"], empty["failure"], empty["score"]) == (
        "empty",
        "scored",
        "empty",
        0,
    )
    auth = by[("x-two", "std-bisect-left")]
    assert (auth["outcome"], auth["failure"], auth["right"]) == ("failed", "auth", False)

    doc = report.load(home)
    rows = {r["model"]: r for r in doc["models"]}
    assert rows["mid"]["accuracy"]["rate"] == 1.0 and rows["x-one"]["accuracy"]["rate"] == 0.0
    assert rows["x-one"]["failures"] == {"empty": 4}
    assert rows["x-two"]["samples"] == 0 and rows["x-two"]["unfinished"] == {"auth": 4}

    # what was sent: the files under their headers, never the key's reasons
    sent = [r["body"]["messages"][0]["content"] for r in sim.requests if r["model"] == "mid"]
    assert len(sent) == 4 and all("===== FILE: " in s for s in sent)
    assert not any(PACK[t].why and PACK[t].why in s for t in FOUR for s in sent)


def test_a_rerun_skips_what_is_done_and_asks_again_what_failed_on_the_way(sim, home):
    sim.script("x-two", fail="server_error")
    first = suite(home, ["fast", "x-two"], retries=0).run()
    assert (first["scored"], first["failed"]) == (4, 4)
    asked = {m: sim.count(m) for m in ("fast", "x-two")}

    sim.script("x-two", answer="NO FAULT")
    again = suite(home, ["fast", "x-two"]).run()
    assert (again["planned"], again["skipped"], again["scored"]) == (4, 4, 4)
    assert sim.count("fast") == asked["fast"] and sim.count("x-two") == asked["x-two"] + 4

    nothing = suite(home, ["fast", "x-two"]).run()
    assert (nothing["planned"], nothing["skipped"], nothing["asked"]) == (0, 8, 0)

    more = suite(home, ["fast", "x-two"], epochs=2).run()
    assert (more["planned"], more["skipped"]) == (8, 8)
    new = [s for s in samples(home) if s["run"] == more["run"]]
    assert {s["epoch"] for s in new} == {2} and len(new) == 8
    rows = {r["model"]: r for r in report.load(home)["models"]}
    assert rows["x-two"]["epochs"] == 2 and rows["x-two"]["unfinished"] == {}
    assert rows["fast"]["samples"] == 8 and rows["fast"]["accuracy"]["tasks"] == 4


def test_an_edited_task_is_asked_again_and_replaces_its_old_samples(sim, home, tmp_path):
    folder = tmp_path / "tasks" / "c1"
    (folder / "fixtures").mkdir(parents=True)
    (folder / "fixtures" / "m.py").write_text("x = 1\n")
    doc = {
        "id": "c1",
        "kind": "claim",
        "prompt": "Claim: x is 1.",
        "attach": ["m.py"],
        "answer": True,
    }
    (folder / "task.json").write_text(json.dumps(doc))
    sim.script("fast", answer="VERDICT: TRUE")
    from panelist.suite.tasks import load_task

    view = Roster(home).view()
    SuiteRun(home, [load_task(folder)], [view.models["fast"]], admission=None).run()
    (folder / "task.json").write_text(json.dumps(dict(doc, answer=False)))
    edited = SuiteRun(home, [load_task(folder)], [view.models["fast"]], admission=None).run()
    assert edited["asked"] == 1
    (row,) = report.load(home)["models"]
    assert (row["samples"], row["claims"]["rate"]) == (1, 0.0)


def test_every_call_goes_through_admission(sim, home):
    admission = CountingAdmission(limit=1)
    summary = suite(home, ["fast", "mid"], admission=admission).run()
    assert summary["scored"] == 8
    assert admission.slots == 8 and admission.most == 1


def test_ctrl_c_loses_nothing_and_the_rerun_finishes_the_rest(sim, home):
    sim.script("fast", answer="NO FAULT")
    sim.script("slow", fail="hang")
    argv = [
        sys.executable,
        str(ROOT / "metrics" / "offload.py"),
        "suite",
        "run",
        "--data",
        str(home.root),
        "--model",
        "fast",
        "slow",
        "--task",
        *FOUR,
    ]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        path = home.suite_samples
        assert wait_until(
            lambda: path.exists() and len(read_jsonl(path)) >= 4 and sim.count("slow") >= 4
        )
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=PATIENCE)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, err
    assert "interrupted" in err and "again" in err
    raw = path.read_text()
    assert raw.endswith("\n")
    kept = [json.loads(x) for x in raw.splitlines()]  # every line whole
    done = {(s["alias"], s["task"]) for s in kept if s["outcome"] == "scored"}
    assert done == {("fast", t) for t in FOUR}
    assert all(s["failure"] == "cancelled" for s in kept if s["alias"] == "slow")

    sim.script("slow", answer="NO FAULT")
    code = main(
        [
            "suite",
            "run",
            "--data",
            str(home.root),
            "--model",
            "fast",
            "slow",
            "--task",
            *FOUR,
            "--json",
        ]
    )
    assert code == 0
    after = samples(home)
    rerun = [s for s in after if s not in kept]
    assert {(s["alias"], s["task"]) for s in rerun} == {("slow", t) for t in FOUR}
    assert all(s["outcome"] == "scored" for s in rerun)


@pytest.mark.slow
def test_the_demo_answers_offline_and_the_report_shows_differences(tmp_path, capsys):
    subset = [
        "std-bisect-left",
        "std-bisect-left-control",
        "std-string-capwords",
        "std-string-capwords-control",
        "claim-costs-no-tokens",
        "claim-wilson-all-useful",
    ]
    data = str(tmp_path / "d")
    code = main(["suite", "run", "--demo", "--data", data, "--task", *subset, "--json"])
    out, _ = capsys.readouterr()
    assert code == 0
    body = json.loads(out)
    assert body["run"]["scored"] == len(subset) * len(demo.MODELS) and body["run"]["failed"] == 0
    lines = read_jsonl(tmp_path / "d" / "runs" / "suite" / "samples.jsonl")
    hedged = sorted(t for t in PACK if PACK[t].kind == "claim")[0]
    for s in lines:  # each answer is what the demo scripts for that model and task
        text = demo.answer(
            s["alias"],
            PACK[s["task"]],
            PACK,
            hedge=s["alias"] == "sim-flaky" and s["task"] == hedged,
        )
        assert s["answer"] == text and "simulated" in s["answer"]
        t = PACK[s["task"]]
        assert s["right"] == answers.score(t.kind, t.answer, text).right
    rows = {r["model"]: r for r in body["report"]["models"]}
    assert set(rows) == set(demo.MODELS)
    assert rows["sim-swift"]["pairs"]["rate"] == 0.0
    assert rows["sim-flaky"]["flags"] == {"hedged": 1}
    assert len({r["accuracy"]["rate"] for r in rows.values()}) > 1

    code = main(["suite", "report", "--data", data])
    out, _ = capsys.readouterr()
    assert code == 0 and "sim-careful" in out and "PAIRS" in out and "%" in out


@pytest.mark.slow
def test_every_model_of_the_demo_roster_answers_a_demo_run_sim_vision_too(tmp_path, capsys):
    data = str(tmp_path / "d")
    code = main(
        [
            "suite",
            "run",
            "--demo",
            "--data",
            data,
            "--model",
            "sim-vision",
            "--task",
            "claim-costs-no-tokens",
            "claim-wilson-all-useful",
            "--json",
        ]
    )
    out, _ = capsys.readouterr()
    assert code == 0, out
    body = json.loads(out)
    assert body["run"]["scored"] == 2 and body["run"]["failed"] == 0, body["run"]
    lines = read_jsonl(tmp_path / "d" / "runs" / "suite" / "samples.jsonl")
    assert {s["alias"] for s in lines} == {"sim-vision"}
    assert all("simulated answer of sim-vision" in s["answer"] for s in lines)


def test_cli_refuses_unknown_models_tasks_and_epochs(folder, capsys):
    d = str(folder.root)
    for argv, says in (
        (["--model", "nobody"], "not on the roster"),
        (["--task", "no-such-task"], "panelist suite list"),
        (["--epochs", "0"], "--epochs"),
    ):
        assert main(["suite", "run", "--data", d, *argv]) == 1
        _, err = capsys.readouterr()
        assert says in err
    assert not folder.suite_samples.exists()
    assert main(["suite", "list", "--data", d, "--json"]) == 0
    listed = json.loads(capsys.readouterr()[0])
    assert {r["id"] for r in listed["data"]} == set(PACK) and listed["problems"] == []


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_the_progress_bar_draws_on_a_terminal_only():
    assert (
        line(3, 8, {"a": [2, 4], "b": [1, 4]}, 6.0)
        == "suite 3/8 [######----------] a 2/4 b 1/4 · 10s left"
    )
    assert line(8, 8, {"a": [4, 4]}, 75.0).endswith("· 1m15s")
    tty, pipe = Terminal(), io.StringIO()
    for stream in (tty, pipe):
        bar = Bar(stream, {"a": 4, "b": 4})
        bar.update({"a": 1}, force=True)
        bar.close()
    assert "suite 1/8" in tty.getvalue() and "a 1/4 b 0/4" in tty.getvalue()
    assert pipe.getvalue() == ""
    narrow = line(1, 200, {f"model-{i}": [0, 20] for i in range(10)}, 1.0, width=60)
    assert len(narrow) < 60 and narrow.endswith("left")


def test_an_endpoints_key_never_lands_in_the_samples(sim, home, monkeypatch):
    monkeypatch.setenv("PANELIST_KEY_SIM", "sk-suite-secret-0123456789")
    sim.script("fast", answer="NO FAULT", echo_auth_answer=True)
    sim.script("mid", fail="auth", echo_auth=True)
    summary = suite(home, ["fast", "mid"], retries=0).run()
    assert (summary["scored"], summary["failed"]) == (4, 4)
    assert any("Authorization" in s["answer"] for s in samples(home))
    report.load(home)
    for path in home.suite_runs.iterdir():
        assert "sk-suite-secret" not in path.read_text(), path.name
