"""The dashboard's console routes (``metrics.server.console``): grades (order, pin, ceiling),
starting a race and following it, running the suite and following it, importing a catalog
file. Each does what its CLI verb does, so each test checks the page's write against what the
CLI then reads, and each route's refusals name the field at fault.
"""

import json

from conftest import Gateway, wait_until
from panelist.metrics.cli.main import main
from panelist.metrics.roster.grades import Grades
from panelist.metrics.roster.roster import Roster
from panelist.serve import make_dashboard
from apikit import assert_error, changes, covers, new_changes


def _graded(home) -> None:
    """fast and x-one of grade general (fast pinned), mid the strong ceiling."""
    roster = Roster(home)
    for alias, grade in (("fast", "general"), ("x-one", "general"), ("mid", "strong")):
        roster.add_model(alias, "sim", family=alias, context=100_000, grade=grade)
    Grades(home).pin("general", "fast")
    Grades(home).pin("strong", "mid")


def _version(dash) -> str:
    status, listing, _ = dash.get("/api/grades")
    assert status == 200
    return listing["version"]


def _cli_grades(home, capsys) -> dict:
    capsys.readouterr()
    assert main(["grade", "list", "--json", "--data", str(home.root)]) == 0
    return json.loads(capsys.readouterr().out)


# -- grades ---------------------------------------------------------------------------------------
@covers("PUT", "/api/grades/order")
def test_reordering_the_grades_is_what_the_cli_lists(api, folder, capsys):
    _graded(folder)
    before = len(changes(folder))
    status, body, _ = api.request(
        "PUT",
        "/api/grades/order",
        {"version": _version(api), "order": ["light", "strong", "general"]},
    )
    assert status == 200, body
    assert [g["grade"] for g in body["grades"]] == ["light", "strong", "general"]
    assert body["unpinned"] == []
    listed = _cli_grades(folder, capsys)
    assert [g["grade"] for g in listed["grades"]] == ["light", "strong", "general"]
    # the ceiling follows the strongest pinned grade, now general
    assert listed["ceiling"]["alias"] == "fast"
    [change] = new_changes(folder, before)
    assert change["by"] == "dashboard" and change["what"] == "grade order"
    # a grade left out drops its pin, and says so
    status, body, _ = api.request(
        "PUT", "/api/grades/order", {"version": body["version"], "order": "light,general"}
    )
    assert status == 200 and body["unpinned"] == ["strong"]


def test_grade_order_refusals_name_the_field(api, folder):
    _graded(folder)
    version = _version(api)
    before = changes(folder)
    status, body, _ = api.request("PUT", "/api/grades/order", {"version": version})
    assert_error(status, body, 400, param="order", says="'order' is required")
    status, body, _ = api.request(
        "PUT", "/api/grades/order", {"version": version, "order": ["a", "a"]}
    )
    assert_error(status, body, 400, param="order", says="named twice")
    status, body, _ = api.request("PUT", "/api/grades/order", {"order": ["a"]})
    assert_error(status, body, 400, param="version")
    # a listing read before another change is stale
    Grades(folder).set_order(["light", "general", "strong", "extra"])
    status, body, _ = api.request(
        "PUT", "/api/grades/order", {"version": version, "order": ["general"]}
    )
    assert_error(status, body, 409, code="stale", says="reload")
    assert len(changes(folder)) == len(before) + 1  # only the CLI-side change above


@covers("PUT", "/api/grades/pin")
def test_pinning_a_model_to_a_grade(api, folder, capsys):
    _graded(folder)
    status, body, _ = api.request(
        "PUT", "/api/grades/pin", {"version": _version(api), "grade": "general", "alias": "x-one"}
    )
    assert status == 200, body
    assert body["was"] == "fast"
    general = next(g for g in body["grades"] if g["grade"] == "general")
    assert general["pinned"] == "x-one"
    listed = _cli_grades(folder, capsys)
    assert next(g for g in listed["grades"] if g["grade"] == "general")["pinned"] == "x-one"
    status, body, _ = api.request(
        "PUT", "/api/grades/pin", {"version": body["version"], "grade": "general", "clear": True}
    )
    assert status == 200 and body["was"] == "x-one"
    assert next(g for g in body["grades"] if g["grade"] == "general")["pinned"] is None


def test_pin_refusals_name_the_field(api, folder):
    _graded(folder)
    version = _version(api)
    status, body, _ = api.request("PUT", "/api/grades/pin", {"version": version, "alias": "fast"})
    assert_error(status, body, 400, param="grade", says="'grade' is required")
    status, body, _ = api.request(
        "PUT", "/api/grades/pin", {"version": version, "grade": "general"}
    )
    assert_error(status, body, 400, param="alias", says="not both")
    status, body, _ = api.request(
        "PUT", "/api/grades/pin", {"version": version, "grade": "general", "alias": "mid"}
    )
    assert_error(status, body, 400, param="alias", says="of grade 'strong'")
    status, body, _ = api.request(
        "PUT", "/api/grades/pin", {"version": version, "grade": "nope", "alias": "fast"}
    )
    assert_error(status, body, 400, param="grade", says="unknown grade 'nope'")
    status, body, _ = api.request(
        "PUT", "/api/grades/pin", {"version": version, "grade": "general", "alias": "ghost"}
    )
    assert_error(status, body, 404, param="alias", says="unknown model 'ghost'")
    status, body, _ = api.request(
        "PUT",
        "/api/grades/pin",
        {"version": version, "grade": "general", "alias": "fast", "pin": True},
    )
    assert_error(status, body, 400, param="pin", says="unknown field")


@covers("PUT", "/api/grades/ceiling")
def test_setting_and_clearing_the_ceiling(api, folder, capsys):
    _graded(folder)
    status, body, _ = api.request(
        "PUT", "/api/grades/ceiling", {"version": _version(api), "alias": "x-one"}
    )
    assert status == 200, body
    assert body["ceiling"] == {"alias": "x-one", "set": True, "problem": None}
    assert _cli_grades(folder, capsys)["ceiling"]["alias"] == "x-one"
    status, body, _ = api.request(
        "PUT", "/api/grades/ceiling", {"version": body["version"], "clear": True}
    )
    assert status == 200 and body["ceiling"] == {"alias": "mid", "set": False, "problem": None}
    status, body, _ = api.request(
        "PUT", "/api/grades/ceiling", {"version": body["version"], "alias": "x-one", "clear": True}
    )
    assert_error(status, body, 400, param="alias", says="not both")
    status, body, _ = api.request(
        "PUT",
        "/api/grades/ceiling",
        {"version": body["version"] if "version" in body else _version(api), "alias": 7},
    )
    assert_error(status, body, 400, param="alias", says="got a number")


# -- races ----------------------------------------------------------------------------------------
def _finished(dash, race: str) -> dict:
    found = {}

    def ended():
        status, found["race"], _ = dash.get(f"/api/races/{race}")
        return status == 200 and found["race"]["status"] != "running"

    assert wait_until(ended), found
    return found["race"]


@covers("POST", "/api/races")
def test_starting_a_race_runs_it_in_the_background_to_its_report(dash, home):
    _graded(home)
    status, started, _ = dash.post(
        "/api/races",
        {
            "grade": "general",
            "prompt": "Review: def add(a, b): return a - b",
            "runs": 2,
            "judges": "mid",
        },
    )
    assert status == 202, started
    assert started["status"] == "running" and started["pinned"] == "fast"
    assert started["candidates"] == ["fast", "x-one"] and started["judges"] == ["mid"]
    done = _finished(dash, started["race"])
    assert done["status"] == "done", done
    assert done["progress"]["done"] == done["progress"]["runs"] == 4
    assert done["report"]["race"] == started["race"]
    saved = json.loads((home.races / f"{started['race']}.json").read_text())
    assert saved["race"] == started["race"] and len(saved["rows"]) == 4
    status, listed, _ = dash.get("/api/races")
    assert [r["race"] for r in listed["data"]] == [started["race"]]


@covers("POST", "/api/races/{race}/again")
def test_racing_a_race_again_adds_a_look_to_its_job(dash, home):
    _graded(home)
    status, started, _ = dash.post(
        "/api/races",
        {
            "grade": "general",
            "prompt": "Review: def add(a, b): return a - b",
            "runs": 1,
            "judges": "mid",
        },
    )
    assert status == 202, started
    _finished(dash, started["race"])
    status, again, _ = dash.post(f"/api/races/{started['race']}/again", {"runs": 2})
    assert status == 202, again
    assert again["look"] == 2 and again["runs"] == 2 and again["race"] != started["race"]
    done = _finished(dash, again["race"])
    assert [lk["race"] for lk in done["report"]["looks"]] == [started["race"], again["race"]]
    assert len(done["report"]["rows"]) == 2 * 3, "two candidates, one run and then two"
    status, body, _ = dash.post(f"/api/races/{again['race']}/again", {"runs": "two"})
    assert_error(status, body, 400, param="runs", says="whole number")
    status, body, _ = dash.post(f"/api/races/{started['race']}/again", {})
    assert_error(status, body, 409, says="not the latest look")
    status, body, _ = dash.post("/api/races/r20260101-0a1b2c3d/again", {})
    assert_error(status, body, 404, says="unknown race")


def test_a_race_of_a_job_already_running_is_refused(home, gated):
    roster = Roster(home)
    roster.add_endpoint("gated", gated.url)
    for alias, grade in (("fast", "general"), ("mid", "strong")):
        roster.add_model(f"g-{alias}", "gated", served=alias, family=alias, grade=grade)
    Grades(home).pin("general", "g-fast")
    Grades(home).pin("strong", "g-mid")
    job = {"grade": "general", "prompt": "Review this"}
    with Gateway(make_dashboard(home, env={})) as dash:
        status, first, _ = dash.post("/api/races", job)
        assert status == 202, first
        status, body, _ = dash.post("/api/races", dict(job, runs=3))
        assert_error(status, body, 409, code="race_running", says=first["race"])
        # another job is another race
        status, other, _ = dash.post("/api/races", dict(job, prompt="Review that"))
        assert status == 202, other
        gated.open("fast", "mid")
        assert _finished(dash, first["race"])["status"] == "done"
        assert _finished(dash, other["race"])["status"] == "done"
        # once it ended, the same job may run again
        status, again, _ = dash.post("/api/races", job)
        assert status == 202, again
        assert _finished(dash, again["race"])["status"] == "done"


def test_a_job_racing_on_another_server_of_the_data_folder_is_refused(home, gated):
    roster = Roster(home)
    roster.add_endpoint("gated", gated.url)
    for alias, grade in (("fast", "general"), ("mid", "strong")):
        roster.add_model(f"g-{alias}", "gated", served=alias, family=alias, grade=grade)
    Grades(home).pin("general", "g-fast")
    Grades(home).pin("strong", "g-mid")
    job = {"grade": "general", "prompt": "Review this"}
    with (
        Gateway(make_dashboard(home, env={})) as one,
        Gateway(make_dashboard(home, env={})) as other,
    ):
        status, first, _ = one.post("/api/races", job)
        assert status == 202, first
        before = sorted(p.name for p in home.races.iterdir())
        status, body, _ = other.post("/api/races", job)
        assert_error(status, body, 409, code="race_running", says="another process")
        assert sorted(p.name for p in home.races.iterdir()) == before  # nothing named
        gated.open("fast", "mid")
        assert _finished(one, first["race"])["status"] == "done"
        status, again, _ = other.post("/api/races", job)
        assert status == 202, again
        assert _finished(other, again["race"])["status"] == "done"


def test_race_refusals_name_the_field(api, folder):
    _graded(folder)
    for body, param, says in (
        ({"prompt": "x"}, "grade", "'grade' is required"),
        ({"grade": "general"}, "prompt", "'prompt' is required"),
        ({"grade": "general", "prompt": "x", "runs": 0}, "runs", "from 1 to 100"),
        ({"grade": "general", "prompt": "x", "runs": "2"}, "runs", "got a string"),
        ({"grade": "general", "prompt": "x", "orders": "twice"}, "orders", "'both'"),
        ({"grade": "general", "prompt": "x", "tools": []}, "tools", "unknown field"),
        ({"grade": "nope", "prompt": "x"}, None, "nope"),
        ({"grade": "general", "prompt": "x", "judges": ["ghost"]}, None, "ghost"),
    ):
        status, reply, _ = api.post("/api/races", body)
        assert status in (400, 404), (body, reply)
        assert_error(status, reply, status, param=param, says=says)
    assert not folder.races.exists() or not list(folder.races.iterdir())


# -- the suite ------------------------------------------------------------------------------------
TASKS = ["claim-wilson-no-verdicts", "claim-costs-no-tokens"]


def _suite_ended(dash) -> dict:
    found = {}

    def ended():
        status, found["run"], _ = dash.get("/api/suite/run")
        return status == 200 and found["run"]["status"] not in ("running",)

    assert wait_until(ended), found
    return found["run"]


@covers("POST", "/api/suite/run")
def test_running_the_suite_asks_each_task_of_each_model(dash, home, capsys):
    status, started, _ = dash.post("/api/suite/run", {"models": "fast,mid", "tasks": TASKS})
    assert status == 202, started
    assert started["status"] == "running"
    assert started["models"] == ["fast", "mid"] and started["tasks"] == TASKS
    done = _suite_ended(dash)
    assert done["status"] == "done", done
    assert done["summary"]["asked"] == 4 and done["progress"] == {"done": 4, "planned": 4}
    assert done["done"] == {"fast": 2, "mid": 2}
    # the CLI's report reads what the page's run wrote
    capsys.readouterr()
    assert main(["suite", "report", "--json", "--data", str(home.root)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert sorted(m["model"] for m in report["models"]) == ["fast", "mid"]
    # a rerun finishes what is left: nothing
    status, again, _ = dash.post("/api/suite/run", {"models": ["fast", "mid"], "tasks": TASKS})
    assert status == 202
    rerun = _suite_ended(dash)
    assert rerun["status"] == "done" and rerun["summary"]["asked"] == 0
    assert rerun["summary"]["skipped"] == 4


@covers("GET", "/api/suite/run")
def test_the_suite_run_state_before_any_run(api):
    status, body, _ = api.get("/api/suite/run")
    assert status == 200 and body == {"status": "none"}


def test_a_second_suite_run_while_one_runs_is_refused(home, gated):
    roster = Roster(home)
    roster.add_endpoint("gated", gated.url)
    roster.add_model("g-fast", "gated", served="fast", family="fast")
    with Gateway(make_dashboard(home, env={})) as dash:
        status, first, _ = dash.post("/api/suite/run", {"models": ["g-fast"], "tasks": TASKS})
        assert status == 202, first
        status, body, _ = dash.post("/api/suite/run", {"models": ["g-fast"]})
        assert_error(status, body, 409, code="suite_running")
        gated.open("fast", "mid")
        assert _suite_ended(dash)["status"] == "done"


def test_one_suite_run_per_data_folder_seen_alike_by_every_server_on_it(home, gated):
    """Two dashboards on one data folder (as two workers are): a run started on one is refused
    on the other, whose state reads the same run, to its end."""
    roster = Roster(home)
    roster.add_endpoint("gated", gated.url)
    roster.add_model("g-fast", "gated", served="fast", family="fast")
    with (
        Gateway(make_dashboard(home, env={})) as one,
        Gateway(make_dashboard(home, env={})) as other,
    ):
        status, first, _ = one.post("/api/suite/run", {"models": ["g-fast"], "tasks": TASKS})
        assert status == 202, first
        status, body, _ = other.post("/api/suite/run", {"models": ["g-fast"]})
        assert_error(status, body, 409, code="suite_running")
        assert gated.wait_arrived("fast")
        status, seen, _ = other.get("/api/suite/run")
        assert seen["status"] == "running" and seen["started"] == first["started"]
        gated.open("fast")
        done = _suite_ended(other)
        assert done["status"] == "done" and done["summary"]["asked"] == 2
        assert done["progress"] == {"done": 2, "planned": 2}
        assert _suite_ended(one) == done


def test_a_run_whose_process_went_reads_interrupted(home, dash):
    path = home.suite_run_state
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps(
            {
                "status": "running",
                "started": "2026-01-01T00:00:00Z",
                "models": ["fast"],
                "tasks": TASKS,
                "done": {"fast": 1},
                "totals": {"fast": 2},
                "summary": None,
                "error": None,
            }
        )
    )
    status, state, _ = dash.get("/api/suite/run")
    assert status == 200 and state["status"] == "interrupted"
    assert "stopped before it ended" in state["error"]
    assert state["progress"] == {"done": 1, "planned": 2}
    # nobody holds the run: a new one may start
    status, started, _ = dash.post("/api/suite/run", {"models": ["fast"], "tasks": TASKS[:1]})
    assert status == 202, started
    assert _suite_ended(dash)["status"] == "done"


def test_suite_refusals_name_the_field(api):
    for body, status_, param, says in (
        ({"epochs": 0}, 400, "epochs", "from 1 to 100"),
        ({"models": 3}, 400, "models", "got a number"),
        ({"demo": "yes"}, 400, "demo", "true or false"),
        ({"models": ["ghost"]}, 404, None, "'ghost' is not on the roster"),
        ({"tasks": ["fast"]}, 400, "models", "'models' is required"),
        ({"models": [], "tasks": TASKS}, 400, "models", "at least one model"),
        ({"models": " , ", "tasks": TASKS}, 400, "models", "at least one model"),
        ({"models": ["fast"], "tasks": ["no-such-task"]}, 400, None, "unknown task 'no-such-task'"),
    ):
        status, reply, _ = api.post("/api/suite/run", body)
        assert_error(status, reply, status_, param=param, says=says)
    status, state, _ = api.get("/api/suite/run")
    assert state == {"status": "none"}  # nothing refused was started


@covers("GET", "/api/suite/tasks")
def test_the_suite_tasks_a_run_can_ask(api):
    status, body, _ = api.get("/api/suite/tasks")
    assert status == 200 and body["problems"] == []
    ids = [t["id"] for t in body["data"]]
    assert set(TASKS) <= set(ids) and ids == sorted(ids)
    assert {t["kind"] for t in body["data"]} <= {"claim", "bug", "control"}


# -- the catalog ----------------------------------------------------------------------------------
CATALOG = {
    "prov": {
        "models": {
            "fast": {
                "limit": {"context": 64000, "output": 4000},
                "cost": {"input": 0.5, "output": 1.5},
                "tool_call": True,
                "modalities": {"input": ["text", "image"]},
            },
            "mid": {"limit": {"context": 32000}},
        }
    }
}


@covers("POST", "/api/catalog/import")
def test_importing_a_catalog_file_fills_what_the_roster_lacks(api, folder, capsys):
    before = len(changes(folder))
    status, body, _ = api.post(
        "/api/catalog/import", {"name": "models.json", "text": json.dumps(CATALOG)}
    )
    assert status == 200, body
    fast = next(m for m in body["matched"] if m["alias"] == "fast")
    # context is typed on the roster (100000): never overwritten, and said so
    assert fast["typed"] == ["context"] and "context" not in fast["added"]
    assert fast["added"] == ["currency", "max_output", "price_in", "price_out", "tools", "vision"]
    assert fast["changed"] == [] and fast["kept"] == []
    assert "slow" in body["unmatched"]
    [change] = new_changes(folder, before)
    assert change["what"] == "catalog import models.json"
    capsys.readouterr()
    assert main(["catalog", "show", "fast", "--json", "--data", str(folder.root)]) == 0
    facts = json.loads(capsys.readouterr().out)["facts"]
    assert facts["price_in"]["value"] == 0.5 and facts["price_in"]["source"] == "imported"
    assert facts["price_in"]["from"] == "models.json"
    # the same file again changes nothing; a new price is a change
    status, body, _ = api.post(
        "/api/catalog/import", {"name": "models.json", "text": json.dumps(CATALOG)}
    )
    fast = next(m for m in body["matched"] if m["alias"] == "fast")
    assert fast["added"] == [] and fast["changed"] == [] and "price_in" in fast["same"]
    CATALOG["prov"]["models"]["fast"]["cost"]["input"] = 0.75
    status, body, _ = api.post(
        "/api/catalog/import", {"name": "models.json", "text": json.dumps(CATALOG)}
    )
    assert next(m for m in body["matched"] if m["alias"] == "fast")["changed"] == ["price_in"]


def test_catalog_import_refusals_name_the_field(api, folder):
    before = changes(folder)
    for body, param, says in (
        ({"text": "{}"}, "name", "'name' is required"),
        ({"name": "a.json"}, "text", "'text' is required"),
        ({"name": "a.json", "text": "{nope"}, "text", "not valid JSON"),
        ({"name": "a.json", "text": "[1, 2]"}, "text", "models.dev layout"),
        ({"name": "a.json", "text": {"prov": {}}}, "text", "got an object"),
        ({"name": "a\u001b[31m.json", "text": "{}"}, "name", "control characters"),
    ):
        status, reply, _ = api.post("/api/catalog/import", body)
        assert_error(status, reply, 400, param=param, says=says)
    assert changes(folder) == before
