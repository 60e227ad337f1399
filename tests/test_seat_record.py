"""One seat record: a panel's seat, a race's call, a suite sample, a probe and an endpoint Test
are each written as the same fields with a role (``metrics/seats/record.py``), and readers take the
shapes earlier versions wrote."""

import json
import threading
from pathlib import Path

from conftest import read_jsonl, wait_until
from panelist.metrics.seats import record as seatrecord
from panelist.metrics.panel.panel import Panels
from panelist.metrics.race.benchmark import Benchmark, GradeBook
from panelist.metrics.race.chatjob import ChatJob, ChatSpec
from panelist.metrics.roster.roster import Roster
from panelist.metrics.upkeep.health import Health
from panelist.metrics.upstream.admission import Admission
from panelist.suite import report, results
from panelist.suite.runner import SuiteRun
from panelist.suite.tasks import STARTER, scan

ASK = {"model": "bench/trio", "messages": [{"role": "user", "content": "Review: x"}]}
SEAT = set(seatrecord.FIELDS)
# how each value of a seat field looks, whoever wrote it
TYPES = {
    "v": int,
    "kind": str,
    "ts": str,
    "call": str,
    "role": str,
    "alias": str,
    "served": str,
    "endpoint": str,
    "status": str,
    "error_kind": str,
    "error": str,
    "answer": (str, type(None)),
    "tool_calls": list,
    "finish_reason": str,
    "tokens": dict,
    "seconds": (int, float),
    "waited": (int, float),
    "attempts": int,
    "clamped": (dict, type(None)),
}


def evidence(home, kind):
    return [e for e in read_jsonl(home.gateway_runs / "evidence.jsonl") if e["kind"] == kind]


def a_panel_seat(home):
    panels = Panels(home)
    try:
        panels.ask(ASK)
    finally:
        panels.close()
    return next(e for e in evidence(home, "seat") if e["role"] == "member")


def a_race_call(home):
    spec = ChatSpec(grade="general", prompt="Where is order 42?")
    grades = GradeBook.plain({"general": "fast"}, "mid", Roster(home), {"general": ["slow"]})
    bench = Benchmark(lambda: ChatJob(spec), home=home, grades=grades, admission=None)
    bench.set_input(spec.prompt)
    bench.run()
    calls = read_jsonl(Path(bench.report().calls_log))
    assert {c["role"] for c in calls} == {"reference", "candidate", "judge"}
    return next(c for c in calls if c["role"] == "candidate")


def a_suite_sample(home):
    task = scan(STARTER)[0][0]
    SuiteRun(
        home, [task], [Roster(home).view().models["fast"]], known={task.id: task}, admission=None
    ).run()
    (sample,) = read_jsonl(home.suite_samples)
    return sample


def a_probe(home):
    health = Health(home)
    try:
        health.probe(["fast"])
    finally:
        health.close()
    (probe,) = evidence(home, "probe")
    return probe


def test_a_panel_seat_a_race_call_a_suite_sample_and_a_probe_write_one_shape(home, sim):
    lines = {
        "seat": a_panel_seat(home),
        "call": a_race_call(home),
        "sample": a_suite_sample(home),
        "probe": a_probe(home),
    }
    roles = {}
    for kind, line in lines.items():
        assert line["kind"] == kind and line["v"] == 1 and line["ts"].endswith("Z")
        assert SEAT <= set(line), (kind, SEAT - set(line))
        for name, types in TYPES.items():
            assert isinstance(line[name], types), (kind, name, line[name])
        assert line["role"] in seatrecord.ROLES
        roles[kind] = line["role"]
        assert line["status"] == "ok" and line["error"] == "" and line["attempts"] == 1
        assert line["endpoint"] == "sim" and line["tokens"]["total"] > 0
    assert roles == {"seat": "member", "call": "candidate", "sample": "suite", "probe": "probe"}
    assert lines["seat"]["answer"] is None, "a seat's answer is kept in calls.jsonl only"
    assert lines["call"]["answer"] and lines["sample"]["answer"] and lines["probe"]["answer"]
    # the seat fields of each say the same things: the seat record is one
    assert {frozenset(k for k in line if k in SEAT) for line in lines.values()} == {frozenset(SEAT)}


def test_a_panels_line_holds_each_seat_as_its_record(home, sim):
    a_panel_seat(home)
    (panel,) = read_jsonl(home.gateway_runs / "calls.jsonl")
    for seat in panel["seats"]:
        assert set(seat) == SEAT - {"v", "kind", "ts"} | {"seat"}
        assert seat["role"] == seat["seat"] and seat["answer"]


def test_an_endpoint_test_waits_for_admission_and_is_logged_as_a_test(dash, home, sim):
    Roster(home).set_limits("endpoint", "sim", {"max_concurrent": 1})
    inside = dash.server.panels.admission
    outside = Admission(home)  # another process on the same data folder
    box = {}
    try:
        with outside.slot("sim", "fast", wait=0):  # the endpoint's one slot is taken
            before = sim.count("mid")
            asking = threading.Thread(
                target=lambda: box.setdefault(
                    "reply",
                    dash.post(
                        "/api/endpoints/test", {"name": "sim", "base_url": sim.url, "model": "mid"}
                    ),
                )
            )
            asking.start()
            assert wait_until(lambda: inside.waiting("sim") == 1), "the Test never queued"
            assert sim.count("mid") == before, "nothing is sent while the endpoint is full"
        asking.join()
    finally:
        outside.close()
    status, body, _ = box["reply"]
    assert status == 200 and body["ok"] is True, body
    assert sim.count("mid") == before + 1
    (line,) = evidence(home, "probe")
    assert SEAT <= set(line) and line["role"] == "test"
    assert (line["served"], line["endpoint"], line["alias"], line["status"]) == (
        "mid",
        "sim",
        "",
        "ok",
    )
    assert line["waited"] > 0
    # health never counts a Test: its model is on no roster
    health = Health(home)
    try:
        assert health.sweep() == {}
    finally:
        health.close()


OLD_RACE = {
    "v": 1,
    "kind": "call",
    "ts": "2025-01-01T00:00:00.000Z",
    "label": "judge.x.1",
    "role": "judge",
    "alias": "top",
    "served": "top",
    "endpoint": "sim",
    "status": "ok",
    "text": '{"accuracy": 7, "shown_work": 3, "reason": "same"}',
    "tool_calls": [],
    "finish_reason": "stop",
    "tokens": {},
    "seconds": 0.1,
    "waited": 0.0,
    "attempts": 1,
    "error_kind": "",
    "error": "",
    "race": "r1",
    "run": 1,
    "judged": "candidate.cheap.run1",
}
OLD_SAMPLE = {
    "v": 1,
    "kind": "sample",
    "ts": "2025-01-01T00:00:00.000Z",
    "run": "s1",
    "task": "t1",
    "task_hash": "h",
    "task_kind": "claim",
    "pair": "t1",
    "epoch": 1,
    "model": "fast",
    "served": "fast",
    "endpoint": "sim",
    "params": {},
    "params_key": "p",
    "prompt_hash": "d",
    "status": "error",
    "error_kind": "timeout",
    "error": "no answer within 1 s",
    "outcome": "scored",
    "failure": "timeout",
    "raw": "",
    "verdict": None,
    "lines": [],
    "flag": "",
    "right": False,
    "score": 0,
    "tokens": {},
    "seconds": 1.0,
    "waited": 0.0,
    "attempts": 1,
}
OLD_PROBE = {
    "v": 1,
    "kind": "probe",
    "ts": "2025-01-01T00:00:00.000Z",
    "alias": "fast",
    "endpoint": "sim",
    "status": "error",
    "seconds": 0.2,
    "error_kind": "auth",
    "error": "the upstream refused the key (401)",
}


def test_lines_earlier_versions_wrote_read_in_the_one_shape():
    race = seatrecord.read(OLD_RACE)
    assert (race["call"], race["answer"]) == ("judge.x.1", OLD_RACE["text"])
    sample = seatrecord.read(OLD_SAMPLE)
    assert (sample["alias"], sample["answer"], sample["role"]) == ("fast", "", "suite")
    assert sample["error"] == "timeout: no answer within 1 s", "the kind first, as seats have it"
    probe = seatrecord.read(OLD_PROBE)
    assert probe["role"] == "probe" and probe["error"].startswith("auth: ")
    assert "call" not in probe, "a field the line never had stays absent"
    new = seatrecord.read(
        dict(
            OLD_PROBE,
            call="probe.fast",
            role="probe",
            served="fast",
            answer="",
            tool_calls=[],
            finish_reason="",
            tokens={},
            waited=0.0,
            attempts=1,
        )
    )
    assert new["error"] == OLD_PROBE["error"], "a whole record is taken as it is"


def test_the_readers_take_old_lines(tmp_path):
    """The suite's report reads lines of earlier versions (a race's progress is told by the race
    as each run's judging ends, never read back from its log)."""
    path = tmp_path / "samples.jsonl"
    path.write_text(json.dumps(OLD_SAMPLE) + "\n")
    (row,) = report.summarise(results.read(path))["models"]
    assert row["model"] == "fast" and row["samples"] == 1
