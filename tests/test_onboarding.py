"""Onboarding: ``panelist model onboard`` takes models through register → probe → quick suite
run → ready, as a queue in ``runs/onboarding.jsonl`` that survives a kill -9 and resumes where
it stopped, worked by one process at a time (the CLI, or a server's worker).

Everything runs against the simulated upstream and real files; the kill -9 tests run the CLI as
a real subprocess whose probe or suite calls the simulator holds (or lets hang) while the test
kills it. What the simulator received is the proof that nothing was sent twice."""

import json
import os
import signal
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import pytest

from conftest import PATIENCE, Gateway, read_jsonl, wait_until
from panelist.gateway import make_gateway
from panelist.metrics.upkeep import onboarding_worker, onboarding_queue
from panelist.metrics.cli.main import main
from panelist.metrics.roster.roster import Roster

ROOT = Path(__file__).resolve().parent.parent
CLI = ROOT / "metrics" / "offload.py"
QUICK = onboarding_queue.QUICK_TASKS


def onboard(capsys, home, *args):
    code = main(["model", "onboard", *args, "--data", str(home.root)])
    out, err = capsys.readouterr()
    return code, out, err


def log(home) -> list[dict]:
    path = home.root / "runs" / "onboarding.jsonl"
    return read_jsonl(path) if path.exists() else []


def entries(home) -> dict[str, dict]:
    """The last entry of each alias, as the queue folds them."""
    return {e["alias"]: e for e in onboarding_queue.Queue(home).entries()}


def probes(home, alias) -> list[dict]:
    path = home.gateway_runs / "evidence.jsonl"
    return (
        [r for r in read_jsonl(path) if r["kind"] == "probe" and r["alias"] == alias]
        if path.exists()
        else []
    )


def samples(home, alias) -> list[dict]:
    path = home.suite_samples
    return [r for r in read_jsonl(path) if r.get("alias") == alias] if path.exists() else []


def alerts(home, kind="onboarded") -> list[dict]:
    path = home.root / "runs" / "alerts.jsonl"
    return [a for a in read_jsonl(path) if a["kind"] == kind] if path.exists() else []


def steps(home, alias) -> list[tuple[str, str]]:
    return [(r["step"], r["status"]) for r in log(home) if r["alias"] == alias and "step" in r]


def sent_twice(sim) -> list[tuple[str, str]]:
    """(model, prompt) pairs the simulator received more than once."""
    seen = Counter((r["model"], json.dumps(r["body"]["messages"])) for r in sim.requests)
    return [key for key, n in seen.items() if n > 1]


def calls(home, event) -> list[dict]:
    """The queue log's ``asking`` lines (written before a call goes out) or ``asked`` lines
    (how it ended)."""
    return [r for r in log(home) if r.get("event") == event]


def spawn(home, *args) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(CLI), "model", "onboard", *args, "--data", str(home.root)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.communicate(timeout=PATIENCE)


ALL_STEPS = [
    ("register", "started"),
    ("register", "done"),
    ("probe", "started"),
    ("probe", "done"),
    ("suite", "started"),
    ("suite", "done"),
    ("ready", "done"),
]


# -- the way through -------------------------------------------------------------------------------
def test_an_on_roster_model_and_a_discovered_one_end_ready(capsys, home, sim):
    sim.script("newcomer")
    code, out, err = onboard(capsys, home, "fast", "newcomer")
    assert code == 0, err
    assert "fast: ready" in out and "newcomer: registered (discovered, endpoint sim)" in out
    found = entries(home)
    for alias in ("fast", "newcomer"):
        e = found[alias]
        assert (e["status"], e["step"], e["endpoint"], e["error"]) == (
            "ready",
            "ready",
            "sim",
            None,
        )
        assert e["result"]["tasks"] == QUICK and e["result"]["scored"] == QUICK
        assert steps(home, alias) == ALL_STEPS
        assert [p["status"] for p in probes(home, alias)] == ["ok"]
        lines = samples(home, alias)
        assert len(lines) == QUICK and {s["outcome"] for s in lines} == {"scored"}
        assert {s["epoch"] for s in lines} == {1}
    # the discovered model was registered as `discover --add` does
    assert Roster(home).view().models["newcomer"].served == "newcomer"
    said = {a["subject"]: a for a in alerts(home)}
    assert set(said) == {"fast", "newcomer"}
    assert said["fast"]["entry"] == found["fast"]["id"]
    # the sim's default answer is no verdict: ready, but the entry says what the suite found
    assert found["fast"]["result"]["unparseable"] == 1.0
    assert "unparseable 100%" in said["fast"]["message"]
    # a later `suite run` counts them as done (the same samples, seating evidence)
    assert main(["suite", "run", "--model", "fast", "--json", "--data", str(home.root)]) == 0
    run = json.loads(capsys.readouterr().out)["run"]
    assert run["skipped"] == QUICK


def test_the_suite_figures_count_right_answers(capsys, home, sim):
    sim.script("fast", answer="verdict: true")
    code, _, err = onboard(capsys, home, "fast", "--tasks", "2")
    assert code == 0, err
    result = entries(home)["fast"]["result"]
    lines = samples(home, "fast")
    assert len(lines) == 2 and result["tasks"] == result["scored"] == 2
    # a claim task reads "verdict: true"; the figures are the samples' own
    assert result["unparseable"] == sum(1 for s in lines if s["flag"]) / 2 < 1
    assert result["right"] == sum(s["right"] for s in lines)
    assert result["accuracy"] == result["right"] / 2


@pytest.mark.parametrize("fail,kind", [("auth", "auth"), ("not_found", "not_found")])
def test_a_failing_probe_ends_failed_with_its_kind_and_a_later_onboard_starts_again(
    capsys, home, sim, fail, kind
):
    sim.script("fast", fail=fail)
    code, out, _ = onboard(capsys, home, "fast")
    assert code == 3
    e = entries(home)["fast"]
    assert (e["status"], e["step"], e["error_kind"]) == ("failed", "probe", kind)
    assert "panelist model onboard fast" in e["hint"] and f"failed at probe ({kind})" in out
    assert steps(home, "fast")[-1] == ("probe", "failed")
    assert samples(home, "fast") == [] and alerts(home) == []
    first = e["id"]

    sim.script("fast")  # the upstream heals
    code, _, err = onboard(capsys, home, "fast")
    assert code == 0, err
    e = entries(home)["fast"]
    assert e["status"] == "ready" and e["id"] != first
    lines = probes(home, "fast")
    assert [p["error_kind"] for p in lines] == [kind, ""] and lines[-1]["status"] == "ok"


def test_what_cannot_be_onboarded_is_refused_before_the_queue(capsys, home, sim):
    code, _, err = onboard(capsys, home, "nobody-serves-this")
    assert code == 1
    assert "panelist model add" in err and "panelist discover" in err
    sim.script("twice")
    Roster(home).add_endpoint("sim2", sim.url)  # a second endpoint serving the same models
    code, _, err = onboard(capsys, home, "twice")
    assert code == 1 and "--endpoint" in err and "sim2" in err
    code, _, err = onboard(capsys, home, "fast", "--endpoint", "sim2")
    assert code == 1 and "on the roster at endpoint sim" in err
    code, _, err = onboard(capsys, home, "fast", "fast")
    assert code == 1 and "once" in err
    code, _, err = onboard(capsys, home, "fast", "--tasks", "0")
    assert code == 1 and "task cap" in err
    code, _, err = onboard(capsys, home, "--endpoint", "sim")
    assert code == 1 and "name them" in err
    assert log(home) == []
    # with the endpoint named, the one served twice is taken
    code, _, err = onboard(capsys, home, "twice", "--endpoint", "sim2", "--tasks", "1")
    assert code == 0, err
    assert Roster(home).view().models["twice"].endpoint == "sim2"


def test_no_suite_tasks_skips_the_suite_step(home, sim, tmp_path):
    queue = onboarding_queue.Queue(home)
    queue.enqueue(None, ["fast"])  # on the roster: no endpoint is asked
    worker = onboarding_worker.Worker(home, task_roots=[tmp_path / "no-tasks-here"])
    try:
        assert worker.work() is True
    finally:
        worker.close()
        queue.close()
    e = entries(home)["fast"]
    assert e["status"] == "ready" and e["result"] == {
        "suite": "skipped",
        "why": "no suite tasks were found",
    }
    assert ("suite", "skipped") in steps(home, "fast")
    assert samples(home, "fast") == [] and len(alerts(home)) == 1


def test_an_alias_still_in_the_queue_keeps_its_entry(home, sim):
    queue = onboarding_queue.Queue(home)
    try:
        [first] = queue.enqueue(None, ["fast"])
        [again] = queue.enqueue(None, ["fast"])
    finally:
        queue.close()
    assert first["new"] is True and again["new"] is False and again["id"] == first["id"]
    assert [r["event"] for r in log(home)] == ["queued"]


def test_list_and_an_empty_resume(capsys, home, sim):
    code, out, _ = onboard(capsys, home)
    assert code == 0 and "empty" in out
    onboard(capsys, home, "fast", "--tasks", "1")
    code, out, _ = onboard(capsys, home, "--list", "--json")
    rows = json.loads(out)
    assert code == 0 and [(r["alias"], r["status"]) for r in rows] == [("fast", "ready")]
    code, _, err = onboard(capsys, home, "--list", "fast")
    assert code == 1 and "--list" in err


# -- kill -9 and resume ----------------------------------------------------------------------------
HELD = 2  # suite answers the simulator gives before it holds the rest


def _kill_during_the_suite(home, sim) -> tuple[int, set]:
    """Start `onboard fast` in a subprocess, kill -9 it once the suite step started, some
    samples are written and the rest are held; returns (scored before the kill, their tasks)."""
    sim.script("fast", hold_after=1 + HELD)  # the probe, then HELD suite answers
    proc = spawn(home, "fast")
    try:
        assert wait_until(
            lambda: (
                ("suite", "started") in steps(home, "fast")
                and len(samples(home, "fast")) >= HELD
                and sim.held.get("fast", 0) == QUICK - HELD
            )
        ), (steps(home, "fast"), samples(home, "fast"), sim.held)
        proc.send_signal(signal.SIGKILL)
        proc.wait(PATIENCE)
    finally:
        stop(proc)
    done = samples(home, "fast")
    assert len(done) == HELD
    assert entries(home)["fast"]["status"] == "running"
    assert onboarding_queue.Queue(home).holder() is None  # kill -9 let the lock go
    assert wait_until(lambda: sim.held.get("fast", 0) == 0)  # the held calls saw it go
    sim.release("fast")
    return len(done), {s["task"] for s in done}


def _assert_resumed(home, sim, before: int) -> None:
    e = entries(home)["fast"]
    assert e["status"] == "ready", e
    assert len(probes(home, "fast")) == 1  # the probe was not sent again
    assert sent_twice(sim) == []  # nor was any prompt
    lines = samples(home, "fast")
    keys = Counter((s["task"], s["epoch"]) for s in lines)
    assert len(keys) == before and set(keys.values()) == {1}, keys
    # the prompts in flight at the kill were sent, their outcome is unknown: never sent
    # again, they are reported as cut short and left for `suite run` to ask
    cut = QUICK - before
    assert (e["result"]["scored"], e["result"]["interrupted"], e["result"]["unfinished"]) == (
        before,
        cut,
        cut,
    )
    assert [r["outcome"] for r in calls(home, "asked")].count("interrupted") == cut
    assert steps(home, "fast").count(("probe", "started")) == 1
    assert steps(home, "fast").count(("suite", "started")) == 2  # cut short, then resumed
    [said] = alerts(home)
    assert f"{cut} cut short" in said["message"]
    assert "Run the suite on the Evidence page" in said["message"]  # the button, first


def test_onboarding_resumes_after_kill_9_from_the_cli(capsys, home, sim):
    before, _ = _kill_during_the_suite(home, sim)
    asked = sim.count("fast")
    code, out, err = onboard(capsys, home)  # no alias: resume the queue
    assert code == 0, err
    assert "fast: ready" in out and f"{QUICK - before} cut short" in out
    _assert_resumed(home, sim, before)
    assert sim.count("fast") == asked  # nothing was asked again


def test_onboarding_resumes_after_kill_9_in_a_server_started_on_the_folder(home, sim):
    before, _ = _kill_during_the_suite(home, sim)
    asked = sim.count("fast")
    with Gateway(make_gateway(home, env={})):
        assert wait_until(lambda: entries(home)["fast"]["status"] == "ready")
    _assert_resumed(home, sim, before)
    assert sim.count("fast") == asked


def test_a_probe_in_flight_at_kill_9_is_never_sent_again(capsys, home, sim):
    sim.script("fast", fail="hang")
    proc = spawn(home, "fast", "mid", "--tasks", "2")
    try:
        assert wait_until(lambda: sim.count("fast") == 1), sim.count("fast")
        # the probe's intent reached the queue log before the probe reached the simulator
        assert [(r["alias"], r["for"]) for r in calls(home, "asking")] == [("fast", "probe")]
        proc.send_signal(signal.SIGKILL)
        proc.wait(PATIENCE)
    finally:
        stop(proc)
    assert sim.wait_disconnects(1, PATIENCE)  # the hanging probe saw its client go
    sim.script("fast")  # it answers now: a probe sent again would be answered, and counted
    code, out, err = onboard(capsys, home)  # resume the queue
    assert code == 3, (out, err)
    found = entries(home)
    fast = found["fast"]
    assert (fast["status"], fast["step"], fast["error_kind"]) == ("failed", "probe", "interrupted")
    assert "outcome is unknown" in fast["error"]
    assert "panelist model onboard fast" in fast["hint"]
    assert "fast: failed at probe (interrupted)" in out
    assert sim.count("fast") == 1 and probes(home, "fast") == []
    [cut] = [r for r in calls(home, "asked") if r["alias"] == "fast"]
    assert cut["outcome"] == "interrupted"
    # the next model was onboarded as if nothing happened, each of its calls sent once
    assert found["mid"]["status"] == "ready" and found["mid"]["result"]["scored"] == 2
    assert sim.count("mid") == 1 + 2 and sent_twice(sim) == []
    # a new probe is the user's decision: onboarding the model again opens a new entry
    code, out, err = onboard(capsys, home, "fast", "--tasks", "1")
    assert code == 0, err
    assert entries(home)["fast"]["status"] == "ready" and sim.count("fast") == 1 + 2


def test_a_server_closed_mid_probe_does_not_probe_again_when_it_starts(home, sim):
    sim.script("fast", fail="hang")
    queue = onboarding_queue.Queue(home)
    try:
        queue.enqueue(None, ["fast"], tasks=1)
    finally:
        queue.close()
    with Gateway(make_gateway(home, env={})):
        assert wait_until(lambda: sim.count("fast") == 1)
    # closing the server cut the probe: it was sent, and nobody read its answer
    assert entries(home)["fast"]["status"] == "running"
    sim.script("fast")
    with Gateway(make_gateway(home, env={})):
        assert wait_until(lambda: entries(home)["fast"]["status"] == "failed")
    e = entries(home)["fast"]
    assert (e["step"], e["error_kind"]) == ("probe", "interrupted")
    assert sim.count("fast") == 1


def test_a_clean_run_writes_each_call_before_it_goes_and_after_it_ends(capsys, home, sim):
    code, out, err = onboard(capsys, home, "fast")
    assert code == 0, err
    lines = log(home)
    asking = calls(home, "asking")
    asked = {r["call"]: r for r in calls(home, "asked")}
    # one intent per request the simulator received: the probe, then the quick run's prompts
    assert len(asking) == sim.count("fast") == 1 + QUICK
    assert len({r["call"] for r in asking}) == len(asking)
    assert [r["for"] for r in asking] == ["probe"] + ["suite"] * QUICK
    [started] = [r for r in lines if (r.get("step"), r.get("status")) == ("suite", "started")]
    assert sorted(r["tasks"][0] for r in asking[1:]) == sorted(started["tasks"])
    assert all(len(r["tasks"]) == 1 for r in asking[1:])
    for r in asking:  # each outcome known, and written after its intent
        assert asked[r["call"]]["outcome"] == "answered"
        assert lines.index(r) < lines.index(asked[r["call"]])
    # and nothing else changed: the same steps, the same figures, nothing sent twice
    assert steps(home, "fast") == ALL_STEPS
    result = entries(home)["fast"]["result"]
    assert (result["scored"], result["unfinished"], result["interrupted"]) == (QUICK, 0, 0)
    assert sent_twice(sim) == [] and "cut short" not in out


def test_a_second_process_finds_the_queue_worked_and_follows_it(home, sim):
    sim.script("fast", hold_after=1 + HELD)
    first = spawn(home, "fast")
    second = None
    try:
        assert wait_until(lambda: sim.held.get("fast", 0) == QUICK - HELD)
        holder = onboarding_queue.Queue(home).holder()
        assert holder is not None and holder["pid"] == first.pid
        # in this process: the queue is held, so a worker here does not work it
        onboarding_queue.Queue(home).enqueue(None, ["mid"], tasks=1)
        worker = onboarding_worker.Worker(home)
        try:
            assert worker.work() is False
        finally:
            worker.close()
        second = spawn(home, "slow", "--tasks", "1")
        said = second.stdout.readline() + second.stdout.readline()
        assert "slow: queued" in said and f"worked by process {first.pid}" in said, said
        assert entries(home)["mid"]["status"] == "queued"
        assert entries(home)["slow"]["status"] == "queued"
        assert sim.count("mid") == 0 and sim.count("slow") == 0
        sim.release("fast")
        out, err = second.communicate(timeout=PATIENCE)
        assert second.returncode == 0, err
        assert "slow: ready" in out
        first_out, err = first.communicate(timeout=PATIENCE)
        assert first.returncode == 0, err
    finally:
        stop(first)
        if second is not None:
            stop(second)
    found = entries(home)
    assert {a: found[a]["status"] for a in ("fast", "mid", "slow")} == {
        "fast": "ready",
        "mid": "ready",
        "slow": "ready",
    }
    # every step was worked by the first process alone
    assert {r["pid"] for r in log(home) if "step" in r} == {first.pid}
    assert all(len(probes(home, a)) == 1 for a in ("fast", "mid", "slow"))


# -- the server's worker and the API ---------------------------------------------------------------
def test_get_and_post_onboarding(dash, home, sim):
    status, body, _ = dash.get("/api/onboarding")
    assert status == 200 and body == {"data": [], "worker": None}
    sim.script("newcomer")
    status, body, _ = dash.post("/api/onboarding", {"aliases": ["newcomer"], "endpoint": "sim"})
    assert status == 202, body
    [e] = body["enqueued"]
    assert (e["alias"], e["endpoint"], e["new"]) == ("newcomer", "sim", True)
    assert wait_until(lambda: dash.get("/api/onboarding")[1]["data"][0]["status"] == "ready")
    status, body, _ = dash.get("/api/onboarding")
    [row] = body["data"]
    assert row["id"] == e["id"] and row["step"] == "ready" and row["result"]["tasks"] == QUICK
    assert row["started"] and row["updated"] and row["error"] is None
    assert steps(home, "newcomer") == ALL_STEPS
    assert len(probes(home, "newcomer")) == 1 and len(samples(home, "newcomer")) == QUICK
    assert [a["subject"] for a in alerts(home)] == ["newcomer"]


def test_post_onboarding_refusals(dash, home, sim):
    cases = [
        (None, 400, "aliases"),
        ([], 400, None),
        ({"aliases": "fast"}, 400, "aliases"),
        ({"aliases": []}, 400, "aliases"),
        ({"aliases": ["fast", 3]}, 400, "aliases"),
        ({"aliases": ["fast"], "tasks": 2}, 400, "tasks"),
        ({"aliases": ["fast"], "endpoint": ""}, 400, "endpoint"),
        ({"aliases": ["fast"], "endpoint": "ghost"}, 404, None),
        ({"aliases": ["nobody-serves-this"]}, 404, None),
    ]
    for body, status_expected, param in cases:
        status, reply, _ = dash.request("POST", "/api/onboarding", {} if body is None else body)
        assert status == status_expected, (body, reply)
        if param is not None:
            assert reply["error"]["param"] == param, reply
        assert reply["error"]["message"]
    status, reply, _ = dash.post("/api/onboarding", {"aliases": ["nobody-serves-this"]})
    assert "panelist model add" in reply["error"]["message"]
    assert log(home) == []


def test_a_server_picks_up_what_was_queued_while_it_was_down(home, sim):
    onboarding_queue.Queue(home).enqueue(None, ["fast"], tasks=1)
    assert entries(home)["fast"]["status"] == "queued"
    with Gateway(make_gateway(home, env={})):
        assert wait_until(lambda: entries(home)["fast"]["status"] == "ready")
    assert {r["pid"] for r in log(home) if "step" in r} == {os.getpid()}


def test_eight_writers_onboarding_one_alias_at_once_open_one_entry(folder):
    results, start = [], threading.Barrier(8)

    def enqueue():
        queue = onboarding_queue.Queue(folder)
        try:
            start.wait()
            results.append(queue.enqueue(None, ["fast"])[0])
        finally:
            queue.close()

    threads = [threading.Thread(target=enqueue) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({e["id"] for e in results}) == 1
    assert sum(e["new"] for e in results) == 1
    assert len([r for r in log(folder) if r.get("event") == "queued"]) == 1


def test_a_served_id_no_alias_can_hold_is_onboarded_under_the_alias_it_was_given(capsys, home, sim):
    sim.script("vendor model v2")
    code, out, err = onboard(capsys, home, "vendor model v2", "--tasks", "1")
    assert code == 0, err
    e = entries(home)["vendor-model-v2"]
    assert (e["status"], e["endpoint"]) == ("ready", "sim")
    assert Roster(home).view().models["vendor-model-v2"].served == "vendor model v2"
    assert [p["status"] for p in probes(home, "vendor-model-v2")] == ["ok"]
    assert len(samples(home, "vendor-model-v2")) == 1


def test_a_model_onboarded_with_no_task_right_is_said_to_be_so():
    from panelist.metrics.upkeep.onboarding_queue import describe

    nothing = describe({"tasks": 3, "scored": 3, "right": 0, "accuracy": 0.0, "unparseable": 0.0})
    assert "0% (0/3)" in nothing and "no task answered right" in nothing
    some = describe({"tasks": 3, "scored": 3, "right": 2, "accuracy": 2 / 3, "unparseable": 0.0})
    assert "no task answered right" not in some
