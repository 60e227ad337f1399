"""Races and suite samples on one PostgreSQL: what host A runs, host B lists, reads and counts.
Two data folders (one per host), one real database (``pgcluster``), the simulated upstream."""

from conftest import Gateway, wait_until
from test_pg_gateway import make_home
from panelist.gateway import make_gateway
from panelist.metrics.cli.main import main
from panelist.metrics.ledger.pairs import pairs_of
from panelist.metrics.ledger.pgcopy import export_folder
from panelist.metrics.ledger.suiteevidence import SuiteEvidence
from panelist.metrics.roster.grades import Grades
from panelist.metrics.roster.roster import Roster
from panelist.metrics.store import jsonl, jsonwire, pg
from panelist.suite import report

TASKS = ["claim-wilson-no-verdicts", "claim-costs-no-tokens"]


def graded(home):
    roster = Roster(home)
    for alias, grade in (("fast", "general"), ("x-one", "general"), ("mid", "strong")):
        roster.add_model(alias, "sim", family=alias, context=100_000, grade=grade)
    Grades(home).pin("general", "fast")
    Grades(home).pin("strong", "mid")


def test_a_race_run_on_one_host_is_listed_and_read_on_the_other(tmp_path, sim, pg_url):
    homes = [make_home(tmp_path / name, sim, pg_url) for name in ("a", "b")]
    for home in homes:
        graded(home)
    with Gateway(make_gateway(homes[0], env={})) as a, Gateway(make_gateway(homes[1], env={})) as b:
        status, started, _ = a.post(
            "/bench/race", {"grade": "general", "runs": 1, "prompt": "Review: def f(): return 1"}
        )
        assert status == 202, started
        race = started["race"]
        # B knows of it while it runs (or once it ended), with nothing in its own folder
        assert wait_until(lambda: race in [r["race"] for r in b.get("/bench/races")[1]["data"]])
        assert not (homes[1].races / f"{race}.json").exists()
        assert wait_until(lambda: b.get(f"/bench/race/{race}")[1]["status"] == "done")
        status, on_b, _ = b.get(f"/bench/race/{race}")
        status_a, on_a, _ = a.get(f"/bench/race/{race}")
        assert status == status_a == 200
        assert on_b["report"] == on_a["report"] and on_b["report"]["race"] == race
        assert on_b["verdict"] == on_a["verdict"]
        assert on_b["candidates"] == ["fast", "x-one"]
    db = pg.Database(pg_url)
    try:
        written = {r["source"]: r for r in export_folder(db, tmp_path / "exported")}
    finally:
        db.close()
    assert written[f"race_reports/{race}"]["records"] == 1
    # every call A logged in its race folder is in the database too
    calls_a = list(jsonl.Tail(homes[0].races / race / "calls.jsonl").read())
    assert calls_a and written[f"races/{race}"]["records"] == len(calls_a)
    exported = jsonwire.loads(
        (tmp_path / "exported" / "runs" / "races" / f"{race}.json").read_bytes()
    )
    assert exported == on_a["report"]


def test_suite_samples_written_by_one_host_count_on_the_other(
    tmp_path, sim, pg_url, capsys, monkeypatch
):
    homes = [make_home(tmp_path / name, sim, pg_url) for name in ("a", "b")]
    monkeypatch.setenv("PANELIST_DATABASE_URL", pg_url)
    evidence_b = SuiteEvidence.of_home(homes[1])
    try:
        assert evidence_b.record() == {}
        code = main(
            [
                "suite",
                "run",
                "--model",
                "fast",
                "--model",
                "mid",
                *[a for t in TASKS for a in ("--task", t)],
                "--data",
                str(homes[0].root),
            ]
        )
        out, err = capsys.readouterr()
        assert code == 0, (out, err)
        assert not homes[0].suite_samples.exists()  # in the database, not A's folder
        on_a, on_b = report.load(homes[0]), report.load(homes[1])
        assert [m["model"] for m in on_b["models"]] == ["fast", "mid"]
        assert [m["samples"] for m in on_b["models"]] == [2, 2]
        assert on_b["models"] == on_a["models"]
        # seating on B counts them (each claim task is one counted item per model)
        assert wait_until(lambda: sorted(evidence_b.record()) == ["fast", "mid"])
        assert [evidence_b.record()[m][1] for m in ("fast", "mid")] == [2, 2]
        # the ratings' units come from the same rows: each task's pairs counted together
        assert pairs_of(evidence_b.patterns()) == evidence_b.pairs()
        assert sum(evidence_b.patterns().values()) <= len(TASKS)
        # a rerun on B skips what A asked
        code = main(
            [
                "suite",
                "run",
                "--model",
                "fast",
                "--task",
                TASKS[0],
                "--json",
                "--data",
                str(homes[1].root),
            ]
        )
        out, err = capsys.readouterr()
        assert code == 0, (out, err)
        assert '"skipped": 1' in out and '"asked": 0' in out, out
    finally:
        evidence_b.close()
    db = pg.Database(pg_url)
    try:
        written = {r["source"]: r for r in export_folder(db, tmp_path / "exported")}
    finally:
        db.close()
    assert written["suite_samples"]["records"] == 4
    lines = list(jsonl.Tail(tmp_path / "exported" / "runs" / "suite" / "samples.jsonl").read())
    assert sorted({r["alias"] for _, r in lines}) == ["fast", "mid"]


def test_a_folders_races_imported_are_read_from_the_database(tmp_path, sim, pg_url, capsys):
    alone = make_home(tmp_path / "alone", sim, None)  # no database: the race stays in files
    graded(alone)
    with Gateway(make_gateway(alone, env={})) as gw:
        status, started, _ = gw.post(
            "/bench/race", {"grade": "general", "runs": 1, "prompt": "Review: def g(): return 2"}
        )
        assert status == 202, started
        race = started["race"]
        assert wait_until(lambda: gw.get(f"/bench/race/{race}")[1]["status"] == "done")
        local = gw.get(f"/bench/race/{race}")[1]
    code = main(["db", "import", "--from", str(alone.root), "--database", pg_url])
    out, err = capsys.readouterr()
    assert code == 0, (out, err)
    assert "race_reports: 1 record(s) in the file, 1 imported: ok" in out, out
    host = make_home(tmp_path / "host", sim, pg_url)
    graded(host)
    with Gateway(make_gateway(host, env={})) as gw:
        status, listed, _ = gw.get("/bench/races")
        assert status == 200 and [r["race"] for r in listed["data"]] == [race]
        status, got, _ = gw.get(f"/bench/race/{race}")
        assert status == 200 and got["report"] == local["report"]
