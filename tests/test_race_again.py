"""Racing a job again: ``POST /bench/race/{race}/again``, ``POST /api/races/{race}/again`` and
``panelist race --again`` add a look to the same job, whose report holds every look's runs and
shows each look; what may not be raced again is refused, as the other race routes refuse. All on
the simulated upstream."""

from __future__ import annotations

import json

import pytest

from panelist.metrics.errors import Conflict
from panelist.metrics.race import jobs, sequential
from panelist.metrics.race import registry as race_registry
from panelist.metrics.race.benchmark import GradeBook
from panelist.metrics.roster.roster import Roster
from surfacekit import CANDIDATES, PROMPT, dashboard, finished, gateway, race_folder

# the surfaces' fixtures: a simulated upstream, a data folder on it, its grades pinned
from surfacekit import home, pinned, sim  # noqa: F401
from test_race_cli import THREE, discerning, run

BODY = {"grade": "general", "prompt": PROMPT, "runs": 2, "candidates": CANDIDATES}


def test_race_again_adds_a_look_to_the_same_job_and_the_report_shows_each(home):
    with gateway(home) as server:
        status, first, _ = server.post("/bench/race", BODY)
        assert status == 202
        one = finished(server, first["race"])["report"]
        assert one["job"]["candidates"] == CANDIDATES and one["job"]["pinned"] == "pinned-gen"
        assert [lk["look"] for lk in one["looks"]] == [1]
        assert one["verdict"]["test"]["look"] == 1

        status, second, headers = server.post(f"/bench/race/{first['race']}/again", {})
        assert status == 202, second
        assert second["race"] != first["race"] and second["look"] == 2
        assert headers["Location"] == f"/bench/race/{second['race']}"
        done = finished(server, second["race"])
        report = done["report"]
        assert done["look"] == 2 and report["job"] == one["job"], "the same job"
        assert done["progress"]["done"] == 4, "its progress counts the runs this look ran"
        # every look's runs, the new look's numbered after the first's
        assert sorted(
            (r["model"], r["run"], r["look"], r["race"]) for r in report["rows"]
        ) == sorted(
            [(m, n, 1, first["race"]) for m in CANDIDATES for n in (1, 2)]
            + [(m, n, 2, second["race"]) for m in CANDIDATES for n in (3, 4)]
        )
        cheap = next(m for m in report["models"] if m["model"] == "cheap-gen")
        assert cheap["runs"] == 4
        looks = report["looks"]
        assert [(lk["look"], lk["race"], lk["runs"]) for lk in looks] == [
            (1, first["race"], 2),
            (2, second["race"], 2),
        ]
        levels = sequential.levels(0.05)
        assert looks[0]["level"] == pytest.approx(levels[0], abs=1e-6)
        assert looks[1]["level"] == pytest.approx(levels[1], abs=1e-6)
        assert report["verdict"]["test"]["look"] == 2
        assert report["verdict"]["test"]["level"] == pytest.approx(levels[1], abs=1e-6)

        # only the latest look carries the job on: the first may not branch a second look 2
        status, reply, _ = server.post(f"/bench/race/{first['race']}/again", {})
        assert status == 409 and reply["error"]["code"] == "job_moved_on"
        assert second["race"] in reply["error"]["message"]

        # a field that changes the job is refused: a changed job is a new job
        status, reply, _ = server.post(f"/bench/race/{second['race']}/again", {"margin": 2})
        assert status == 409 and reply["error"]["code"] == "job_changed"
        assert reply["error"]["param"] == "margin" and "new race" in reply["error"]["message"]
        status, reply, _ = server.post(f"/bench/race/{second['race']}/again", {"runs": 0})
        assert status == 400 and reply["error"]["param"] == "runs"

        # more runs this look: the job's evidence grows by them
        status, third, _ = server.post(f"/bench/race/{second['race']}/again", {"runs": 1})
        assert status == 202
        report = finished(server, third["race"])["report"]
        assert sorted({r["run"] for r in report["rows"]}) == [1, 2, 3, 4, 5]
        assert [lk["runs"] for lk in report["looks"]] == [2, 2, 1]
    saved = json.loads((race_folder(home) / f"{third['race']}.json").read_text())
    assert saved == report, "the accumulated report is the one written"


def test_race_again_answers_404_for_an_unknown_race_and_409_while_it_runs(home, sim):
    with gateway(home) as server:
        for race in ("r20260101-0a1b2c3d", "nothing"):
            status, reply, _ = server.post(f"/bench/race/{race}/again", {})
            assert status == 404 and "GET /bench/races" in reply["error"]["message"]
        status, started, _ = server.post(
            "/bench/race",
            {"grade": "general", "prompt": PROMPT, "runs": 1, "candidates": ["slow-gen"]},
        )
        assert status == 202
        status, reply, _ = server.post(f"/bench/race/{started['race']}/again", {})
        assert status == 409 and reply["error"]["code"] == "race_running"
        assert "once it has" in reply["error"]["message"]
        server.server.parts.races.close(timeout=30)  # the hanging candidate: cancel it


def test_race_again_is_refused_when_the_grades_pin_changed(home):
    with gateway(home) as server:
        status, first, _ = server.post("/bench/race", BODY)
        finished(server, first["race"])
        # the grade is now pinned to another model: the same request is another job
        server.server.parts.races.close()
        server.server.parts.races = race_registry.Races(
            home,
            upstream=server.server.panels.upstream,
            admission=None,
            grades=GradeBook.plain(
                {"general": "cheap-gen", "strong": "judge-top"}, "judge-top", Roster(home)
            ),
        )
        status, reply, _ = server.post(f"/bench/race/{first['race']}/again", {})
        assert status == 409 and reply["error"]["code"] == "job_changed"
        assert "pinned was 'pinned-gen', is now 'cheap-gen'" in reply["error"]["message"]


def test_the_dashboard_races_again_through_its_api(home):
    with dashboard(home) as server:
        status, first, _ = server.post("/api/races", dict(BODY, runs=1))
        assert status == 202
        finished(server, first["race"])
        status, again, _ = server.post(f"/api/races/{first['race']}/again", {"runs": 2})
        assert status == 202 and again["look"] == 2
        report = finished(server, again["race"])["report"]
        assert [lk["runs"] for lk in report["looks"]] == [1, 2]
        status, reply, _ = server.post("/api/races/r20260101-0a1b2c3d/again", {})
        assert status == 404 and "unknown race" in reply["error"]["message"]


def test_the_cli_races_a_job_again_and_its_table_shows_each_look(pinned, sim, capsys):
    discerning(sim)  # the judge marks slow-gen down, so the verdict has a test to show
    code, out, err = run(
        capsys,
        "race",
        "--grade",
        "general",
        "--prompt",
        PROMPT,
        "--candidates",
        ",".join(THREE),
        "--data",
        str(pinned.root),
        "--json",
    )
    assert code == 0, err
    first = json.loads(out)
    assert first["runs"] == 3, "three runs by default: the fewest that measure a spread"
    code, out, err = run(
        capsys, "race", "--again", first["race"], "--runs", "2", "--data", str(pinned.root)
    )
    assert code == 0, err
    assert f"look 1: race {first['race']} added 3 run(s) · tested at 1.48%" in out
    assert "added 2 run(s) · tested at 1.14%" in out
    assert "look 2 of 5 of this job, tested at 1.14%" in out
    # an option that would change the job is refused in one line
    code, out, err = run(
        capsys, "race", "--again", first["race"], "--margin", "2", "--data", str(pinned.root)
    )
    assert code != 0 and "--margin would change it" in err
    code, out, err = run(
        capsys, "race", "--again", "r20260101-0a1b2c3d", "--data", str(pinned.root)
    )
    assert code != 0 and "unknown race" in err


def test_a_new_race_of_a_job_raced_before_warns_that_it_starts_the_budget_over(pinned, capsys):
    argv = [
        "race",
        "--grade",
        "general",
        "--prompt",
        PROMPT,
        "--runs",
        "1",
        "--candidates",
        ",".join(CANDIDATES),
        "--data",
        str(pinned.root),
        "--json",
    ]
    code, out, _ = run(capsys, *argv)
    assert code == 0
    first = json.loads(out)
    assert not any("raced before" in w for w in first["warnings"])
    code, out, _ = run(capsys, *argv)
    assert code == 0
    second = json.loads(out)
    assert any(f"race {first['race']}, look 1" in w and "--again" in w for w in second["warnings"])


def test_a_job_is_raced_again_at_most_five_looks():
    looks = [{"look": k, "race": f"r20260101-0000000{k}", "runs": 3} for k in range(1, 6)]
    report = {"race": "r20260101-00000005", "job": {"grade": "general"}, "looks": looks, "rows": []}
    with pytest.raises(Conflict, match="last of the 5") as caught:
        jobs.after(report)
    assert caught.value.code == "looks_spent"
    with pytest.raises(Conflict, match="kept no job it can race again"):
        jobs.after({"race": "r20260101-00000001", "rows": []})
    carried = jobs.after(dict(report, looks=looks[:2], rows=[{"run": 6}]))
    assert carried.look == 3 and carried.runs == 6
