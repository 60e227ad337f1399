"""The live suite report: read from where it stopped, always equal to the report built from the
whole samples file, whatever was appended (reruns, new task versions, failures made good)."""

import json
import random

from conftest import Gateway, read_jsonl
from panelist.serve import make_dashboard
from panelist.suite import report, results
from panelist.suite.livereport import LiveReport

TASKS = [
    ("b1", "bug", "p1"),
    ("b1-control", "control", "p1"),
    ("b2", "bug", "p2"),
    ("b2-control", "control", "p2"),
    ("c1", "claim", "c1"),
    ("c2", "claim", "c2"),
]
FAILURES = ["rate_limit", "timeout", "server_error"]


def sample(rng: random.Random, versions: dict) -> dict:
    task, kind, pair = rng.choice(TASKS)
    if rng.random() < 0.05:  # the task was edited: a new version from here on
        versions[task] = f"h{rng.randrange(1000)}"
    s = {
        "kind": "sample",
        "task": task,
        "task_hash": versions.setdefault(task, "h0"),
        "task_kind": kind,
        "pair": pair,
        "model": rng.choice(["m1", "m2", "m3"]),
        "epoch": rng.randint(1, 3),
        "params_key": "p",
        "raw": "x" * rng.randrange(200),
        "tokens": {"total": rng.randrange(500)},
        "seconds": rng.random(),
        "waited": 0.0,
    }
    if rng.random() < 0.2:
        s.update(outcome="failed", failure=rng.choice(FAILURES))
    else:
        verdict = rng.choice(["fault", "no_fault", None])
        s.update(
            outcome="scored",
            right=rng.random() < 0.6,
            verdict=verdict,
            flag=None if verdict else "unparseable",
        )
    return s


def without_time(doc: dict) -> dict:
    return {k: v for k, v in doc.items() if k not in ("built", "samples")}


def test_the_live_report_equals_the_whole_files_report_after_every_append(tmp_path):
    path = tmp_path / "samples.jsonl"
    rng, versions = random.Random(7), {}
    live = LiveReport(path)
    assert without_time(live.doc()) == without_time(report.summarise([]))
    for _ in range(40):
        with open(path, "a") as f:
            for _ in range(rng.randrange(1, 30)):
                f.write(json.dumps(sample(rng, versions)) + "\n")
        assert without_time(live.doc()) == without_time(report.summarise(results.read(path)))
    # a torn last line is not read until it is whole
    whole = path.read_text()
    with open(path, "a") as f:
        f.write(json.dumps(sample(rng, versions))[:40])
    assert without_time(live.doc()) == without_time(report.summarise(results.read(path)))
    # replaced (a new suite folder): read again from its start
    path.write_text("".join(whole.splitlines(keepends=True)[:5]))
    assert without_time(live.doc()) == without_time(report.summarise(results.read(path)))


def test_the_dashboards_suite_report_follows_a_run_as_it_appends(home):
    path = home.suite_samples
    path.parent.mkdir(parents=True, exist_ok=True)
    rng, versions = random.Random(11), {}
    with Gateway(make_dashboard(home, env={})) as dash:
        for _ in range(3):
            with open(path, "a") as f:
                for _ in range(20):
                    f.write(json.dumps(sample(rng, versions)) + "\n")
            status, body, _ = dash.get("/api/suite")
            assert status == 200
            whole = report.summarise(read_jsonl(path))
            assert body["data"] == whole["models"] and body["tasks"] == whole["tasks"]
