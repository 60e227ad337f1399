"""The dashboard's JSON API, continued (see ``test_api.py``): panels, calls, verdicts, evidence,
usage and the suite; keys; grades; races; the model page, its catalog facts and its probe.
"""

import json
import re

from conftest import DASHBOARD_TOKEN as TOKEN, Gateway, read_jsonl
from panelist.metrics.cli.main import main
from panelist.metrics.roster.grades import Grades
from panelist.metrics.roster.roster import Roster
from panelist.serve import make_dashboard
from apikit import (
    MODEL_KEYS,
    PANEL_KEYS,
    SEAT_KEYS,
    assert_error,
    ask,
    changes,
    covers,
    new_changes,
)


# -- panels, calls, verdicts, evidence -----------------------------------------------------------
@covers("GET", "/api/panels")
def test_panels_pages_and_polls(dash, home):
    status, empty, _ = dash.get("/api/panels")
    assert status == 200
    assert empty == {"data": [], "next": None, "latest": None, "owed": 0, "apart": []}
    benches = [ask(dash, content=f"Review number {i}") for i in range(3)]
    ids = [b["panel"] for b in benches]
    status, page, _ = dash.get("/api/panels?limit=2")
    assert status == 200 and set(page) == {"data", "next", "latest", "owed", "apart"}
    assert [p["panel"] for p in page["data"]] == ids[:0:-1]  # newest first
    assert page["latest"] == ids[-1] and page["next"] is not None
    ok_seats = sum(s["status"] == "ok" for b in benches for s in b["seats"])
    assert page["owed"] == ok_seats
    first = page["data"][0]
    assert set(first) == PANEL_KEYS and "prompt" not in first
    assert first["collection"] == "bench/trio" and first["abandoned"] is False
    assert [s["alias"] for s in first["seats"][:3]] == ["fast", "mid", "slow"]
    for seat in first["seats"]:
        assert set(seat) == SEAT_KEYS and seat["verdict"] is None
    status, rest, _ = dash.get(f"/api/panels?limit=2&before={page['next']}")
    assert status == 200 and [p["panel"] for p in rest["data"]] == [ids[0]]
    assert rest["next"] is None
    # a verdict shows on its seat and lowers what is owed
    call = first["seats"][0]["call"]
    dash.post("/api/verdict", {"call": call, "useful": False})
    _, page, _ = dash.get("/api/panels?limit=1")
    assert page["data"][0]["seats"][0]["verdict"] is False and page["owed"] == ok_seats - 1
    # the cursor poll: nothing after the newest, then the next panel once it finished
    status, poll, _ = dash.get(f"/api/panels?after={ids[-1]}")
    assert status == 200 and poll["data"] == [] and poll["next"] is not None
    newer = ask(dash, content="one more")["panel"]
    status, poll, _ = dash.get(f"/api/panels?after={poll['next']}")
    assert status == 200 and [p["panel"] for p in poll["data"]] == [newer]
    status, poll, _ = dash.get(f"/api/panels?after={ids[0]}")  # oldest first
    assert [p["panel"] for p in poll["data"]] == ids[1:] + [newer]
    status, poll, _ = dash.get("/api/panels?after=")  # an empty cursor: from the first panel
    assert [p["panel"] for p in poll["data"]] == ids + [newer]


def test_panels_refusals(api):
    for query, param in (
        ("limit=0", "limit"),
        ("limit=201", "limit"),
        ("limit=x", "limit"),
        ("before=yesterday", "before"),
        ("after=p1", "after"),
    ):
        status, body, _ = api.get(f"/api/panels?{query}")
        assert_error(status, body, 400, param=param, says=f"'{param}'")


@covers("GET", "/api/panels/{panel}")
def test_panel_detail(dash, home):
    bench = ask(dash, content="Review: x = 1/0")
    call = bench["seats"][1]["call"]
    dash.post("/api/verdict", {"call": call, "useful": True, "note": "found it"})
    status, panel, _ = dash.get(f"/api/panels/{bench['panel']}")
    assert status == 200, panel
    record = next(
        r for r in read_jsonl(home.gateway_runs / "calls.jsonl") if r["panel"] == bench["panel"]
    )
    assert panel["prompt"] == record["prompt"] and panel["prompt"].endswith("Review: x = 1/0")
    assert [s["call"] for s in panel["seats"]] == [s["call"] for s in record["seats"]]
    verdicts = {s["call"]: s["verdict"] for s in panel["seats"]}
    assert verdicts[call]["useful"] is True and verdicts[call]["note"] == "found it"
    assert verdicts[call]["by"] == "dashboard"
    assert all(v is None for c, v in verdicts.items() if c != call)
    assert all(s["answer"] for s in panel["seats"] if s["status"] == "ok")
    status, body, _ = dash.get("/api/panels/p20200101-999")
    assert_error(status, body, 404, says="p20200101-999")


@covers("GET", "/api/calls/{call}")
def test_call_detail(dash, home):
    bench = ask(dash, content="Review: while True: pass")
    seat = bench["seats"][0]
    status, call, _ = dash.get(f"/api/calls/{seat['call']}")
    assert status == 200, call
    assert {
        "call",
        "panel",
        "alias",
        "seat",
        "status",
        "seconds",
        "error",
        "answer",
        "prompt",
        "verdict",
    } <= set(call)
    assert (call["call"], call["panel"], call["alias"], call["seat"]) == (
        seat["call"],
        bench["panel"],
        "fast",
        "member",
    )
    assert call["status"] == "ok" and not call["error"] and call["verdict"] is None
    assert call["prompt"].endswith("Review: while True: pass")
    assert call["answer"] == seat["answer"] and call["answer"]
    dash.post("/api/verdict", {"call": seat["call"], "useful": True, "real": ["a loop"]})
    _, call, _ = dash.get(f"/api/calls/{seat['call']}")
    assert set(call["verdict"]) == {"useful", "note", "real", "false", "by", "ts"}
    assert call["verdict"]["real"] == ["a loop"] and call["verdict"]["by"] == "dashboard"
    for unknown in (f"{bench['panel']}.member9", "p20200101-1.member1", "nonsense"):
        status, body, _ = dash.get(f"/api/calls/{unknown}")
        assert_error(status, body, 404, says=unknown)


@covers("GET", "/api/find")
def test_find(dash):
    bench = ask(dash)
    panel, call = bench["panel"], bench["seats"][2]["call"]
    status, body, _ = dash.get(f"/api/find?q={panel}")
    assert (status, body) == (200, {"panel": panel, "call": None})
    status, body, _ = dash.get(f"/api/find?q=%20{call}%20")
    assert (status, body) == (200, {"panel": panel, "call": call})
    status, body, _ = dash.get("/api/find?q=p20200101-4242")
    assert_error(status, body, 404, says="p20200101-4242")
    for query in ("", "?q=", "?q=hello"):
        status, body, _ = dash.get(f"/api/find{query}")
        assert_error(status, body, 400, param="q")


@covers("POST", "/api/verdict")
def test_verdict(dash, home):
    bench = ask(dash)
    call = bench["seats"][0]["call"]
    status, body, _ = dash.post(
        "/api/verdict",
        {"call": call, "useful": True, "note": "good", "real": ["off by one"], "false": []},
    )
    assert status == 200, body
    assert body["call"] == call and body["written"] is True and body["replaced"] is False
    assert body["verdict"]["by"] == "dashboard"
    (record,) = [
        e for e in read_jsonl(home.gateway_runs / "evidence.jsonl") if e["kind"] == "verdict"
    ]
    assert (record["call"], record["useful"], record["by"]) == (call, True, "dashboard")
    assert record["note"] == "good" and record["real"] == ["off by one"]
    assert record["panel"] == bench["panel"] and record["alias"] == "fast"
    status, body, _ = dash.post("/api/verdict", {"call": call, "useful": False})
    assert status == 200 and body["replaced"] is True
    status, body, _ = dash.post("/api/verdict", {"call": call, "useful": "yes"})
    assert_error(status, body, 400, param="useful")
    status, body, _ = dash.post("/api/verdict", {"useful": True})
    assert_error(status, body, 400, param="call")
    status, body, _ = dash.post("/api/verdict", {"call": call, "useful": True, "stars": 5})
    assert_error(status, body, 400, param="stars")
    status, body, _ = dash.post("/api/verdict", {"call": "p20200101-1.member1", "useful": True})
    assert_error(status, body, 404, says="p20200101-1.member1")
    verdicts = [
        e for e in read_jsonl(home.gateway_runs / "evidence.jsonl") if e["kind"] == "verdict"
    ]
    assert [(v["useful"], v["by"]) for v in verdicts] == [(True, "dashboard"), (False, "dashboard")]


@covers("GET", "/api/evidence")
def test_evidence(dash, home, sim):
    sim.script("x-one", fail="server_error")
    bench = ask(dash)
    for seat in bench["seats"][:2]:
        dash.post(
            "/api/verdict",
            {
                "call": seat["call"],
                "useful": seat["alias"] == "fast",
                "false": [] if seat["alias"] == "fast" else ["a claim"],
            },
        )
    status, body, _ = dash.get("/api/evidence")
    assert status == 200 and set(body) >= {"data", "buckets"}
    rows = {(r["alias"], r["shape"]): r for r in body["data"]}  # every shape together
    fast, mid = rows[("fast", "all")], rows[("mid", "all")]
    for row in (fast, mid):
        assert {
            "alias",
            "shape",
            "useful",
            "not_useful",
            "interval",
            "false_claims",
            "seats",
            "p50",
            "p95",
            "failures",
        } <= set(row)
    assert (fast["useful"], fast["not_useful"], fast["seats"]) == (1, 0, 1)
    assert (mid["useful"], mid["not_useful"], mid["false_claims"]) == (0, 1, 1)
    assert mid["interval"][0] == 0.0 and fast["interval"][1] == 1.0
    assert fast["p50"] is not None and fast["p95"] >= fast["p50"]
    assert rows[("x-one", "all")]["failures"] == {"server_error": 1}
    buckets = body["buckets"]
    assert buckets["unit"] == "day" and isinstance(buckets["start"], (int, float))
    assert sum(buckets["series"]["fast"]) == 1 and len(buckets["series"]["fast"]) == 30
    status, same, _ = dash.get("/api/evidence?shape=all")
    assert status == 200 and same["data"] == body["data"]
    status, general, _ = dash.get("/api/evidence?shape=general")  # the only shape asked
    assert status == 200 and general["data"] == [dict(r, shape="general") for r in body["data"]]
    status, none, _ = dash.get("/api/evidence?shape=review")
    assert status == 200 and none["data"] == []


@covers("GET", "/api/ratings")
def test_ratings(dash, home):
    status, empty, _ = dash.get("/api/ratings")
    assert status == 200 and empty == {"data": [], "shapes": []}
    for _ in range(3):
        calls = {s["alias"]: s["call"] for s in ask(dash)["seats"]}
        for alias, useful in (("fast", True), ("mid", True), ("slow", False)):
            status, _, _ = dash.post("/api/verdict", {"call": calls[alias], "useful": useful})
            assert status == 200
    status, body, _ = dash.get("/api/ratings")
    assert status == 200 and body["shapes"] == ["general"]
    (general,) = body["data"]
    assert general["shape"] == "general" and general["comparisons"] == 6
    assert general["sources"] == {"verdicts": 6, "races": 0}
    assert general["refitting"] is False  # three models: fitted at once, never behind
    rows = {m["alias"]: m for m in general["models"]}
    assert [m["alias"] for m in general["models"]][-1] == "slow"
    assert (rows["fast"]["wins"], rows["fast"]["losses"]) == (3, 0)
    assert (rows["slow"]["wins"], rows["slow"]["losses"]) == (0, 6)
    assert rows["fast"]["rating"] == rows["mid"]["rating"] > rows["slow"]["rating"]
    for m in general["models"]:
        assert m["interval"][0] < m["rating"] < m["interval"][1]
    status, same, _ = dash.get("/api/ratings?shape=general")
    assert status == 200 and same == body
    status, none, _ = dash.get("/api/ratings?shape=review")
    assert status == 200 and none["data"][0]["models"] == [] and none["shapes"] == ["general"]
    status, bad, _ = dash.get("/api/ratings?shape=Not%20a%20shape")
    assert_error(status, bad, 400, param="shape", says="lower-case letters")


@covers("GET", "/api/usage")
def test_usage(dash, home, sim):
    sim.script("x-one", fail="server_error")
    ask(dash)
    status, body, _ = dash.get("/api/usage")  # the day, when no window is named
    assert status == 200 and body["window"] == "day"
    assert set(body) == {"window", "windows", "since", "until", "data", "total"}
    rows = {r["alias"]: r for r in body["data"]}
    assert set(rows["fast"]) == {
        "alias",
        "seats",
        "answered",
        "failed",
        "error_rate",
        "p50",
        "p95",
        "prompt_tokens",
        "completion_tokens",
        "uncounted",
        "spend",
    }
    assert rows["fast"]["error_rate"] == 0.0 and rows["x-one"]["error_rate"] == 1.0
    assert rows["fast"]["spend"] is None  # the test roster has no prices
    assert body["total"]["seats"] == sum(r["seats"] for r in body["data"])
    for window in ("hour", "week"):
        status, other, _ = dash.get(f"/api/usage?window={window}")
        assert status == 200 and other["data"] == body["data"]


@covers("GET", "/api/suite")
def test_suite_results(dash, home, sim):
    from panelist.suite import results
    from panelist.suite.runner import SuiteRun
    from panelist.suite.tasks import STARTER, load_tasks

    status, body, _ = dash.get("/api/suite")
    assert (status, body["data"], body["tasks"]) == (200, [], 0)
    sim.script("fast", answer="NO FAULT")
    view = Roster(home).view()
    tasks = load_tasks(STARTER, ids=["std-bisect-left", "std-bisect-left-control"])
    SuiteRun(home, tasks, [view.models["fast"]], admission=None).run()
    status, body, _ = dash.get("/api/suite")
    assert status == 200 and body["tasks"] == 2
    (row,) = body["data"]
    assert row["model"] == "fast" and row["samples"] == 2
    assert row["accuracy"] == {
        "rate": 0.5,
        "interval": row["accuracy"]["interval"],
        "hits": 1,
        "n": 2,
        "tasks": 2,
    }
    assert row["pairs"]["rate"] == 0.0 and row["recall"]["rate"] == 0.0
    # the same report as one built from the whole file, and the same again while nothing changes
    from panelist.suite import report

    assert body["data"] == report.summarise(results.read(home.suite_samples))["models"]
    status, again, _ = dash.get("/api/suite")
    assert again == body


# -- keys ----------------------------------------------------------------------------------------
@covers("GET", "/api/keys")
def test_list_keys(api):
    status, body, _ = api.get("/api/keys")
    assert (status, body) == (200, {"data": []})
    api.post("/api/keys", {"name": "ci", "collections": ["trio"], "rpm": 60})
    status, body, _ = api.get("/api/keys")
    (key,) = body["data"]
    assert set(key) == {"name", "hint", "collections", "rpm", "races", "created", "last_used"}
    assert key["races"] is True  # a key may start races unless made with --no-races
    assert (key["name"], key["collections"], key["rpm"], key["last_used"]) == (
        "ci",
        ["trio"],
        60,
        None,
    )


@covers("POST", "/api/keys")
def test_create_key_shows_it_once_and_never_stores_it(api, folder):
    n = len(changes(folder))
    status, body, _ = api.post("/api/keys", {"name": "laptop"})
    assert status == 200, body
    secret = body["key"]
    assert re.fullmatch(r"pk_[A-Za-z0-9_-]{43}", secret)
    assert body["name"] == "laptop" and body["hint"] == secret[-4:]
    assert body["collections"] is None and body["rpm"] is None
    (change,) = new_changes(folder, n)
    assert change["by"] == "dashboard" and change["what"] == "key laptop"
    _, listed, _ = api.get("/api/keys")
    assert secret not in json.dumps(listed) and "key" not in listed["data"][0]
    leaks = [
        str(p) for p in folder.root.rglob("*") if p.is_file() if secret.encode() in p.read_bytes()
    ]
    assert leaks == [], f"the key was written to {leaks}"
    status, body, _ = api.post("/api/keys", {"name": "laptop"})
    assert_error(status, body, 409, code="exists", says="laptop")
    status, body, _ = api.post("/api/keys", {"name": "Bad Name"})
    assert_error(status, body, 400, says="key name")
    status, body, _ = api.post("/api/keys", {"name": "k2", "collections": ["nope"]})
    assert_error(status, body, 400, says="nope")
    status, body, _ = api.post("/api/keys", {"name": "k2", "rpm": 0})
    assert_error(status, body, 400, says="rpm")
    status, body, _ = api.post("/api/keys", {"name": "k2", "scope": "all"})
    assert_error(status, body, 400, param="scope")
    assert len(changes(folder)) == n + 1


@covers("DELETE", "/api/keys/{name}")
def test_revoke_key(api, folder):
    api.post("/api/keys", {"name": "old"})
    n = len(changes(folder))
    status, body, _ = api.request("DELETE", "/api/keys/old")
    assert (status, body) == (200, {"revoked": "old"})
    (change,) = new_changes(folder, n)
    assert change["by"] == "dashboard" and change["what"] == "key old" and change["new"] is None
    _, listed, _ = api.get("/api/keys")
    assert listed["data"] == []
    status, body, _ = api.request("DELETE", "/api/keys/old")
    assert_error(status, body, 404, says="old")
    # a revoked name is never handed out again
    status, body, _ = api.post("/api/keys", {"name": "old"})
    assert_error(status, body, 409, code="exists", says="old")


def test_a_key_that_made_a_call_shows_when(home):
    # keys required: the dashboard needs its admin token (it refuses to start open)
    env = {"PANELIST_REQUIRE_KEYS": "1", "PANELIST_ADMIN_TOKEN": TOKEN}
    with Gateway(make_dashboard(home, env=env)) as dash:
        _, _, headers = dash.post("/api/login", {"token": TOKEN})
        login = {"Cookie": headers["Set-Cookie"].split(";")[0]}
        status, body, _ = dash.post(
            "/v1/chat/completions",
            {"model": "bench/trio", "messages": [{"role": "user", "content": "hi"}]},
        )
        assert_error(status, body, 401, code="missing_key")
        _, made, _ = dash.post("/api/keys", {"name": "robot"}, headers=login)
        dash.post("/api/keys", {"name": "idle"}, headers=login)
        bench = ask(dash, headers={"Authorization": f"Bearer {made['key']}"})
        assert bench["seats"]
        status, listed, _ = dash.get("/api/keys", headers=login)
        assert status == 200
        used = {k["name"]: k["last_used"] for k in listed["data"]}
        assert used["idle"] is None and isinstance(used["robot"], float)
        calls = read_jsonl(home.gateway_runs / "calls.jsonl")
        assert [c["key"] for c in calls] == ["robot"]
        # the revoked key calls no more
        dash.request("DELETE", "/api/keys/robot", headers=login)
        status, body, _ = dash.post(
            "/v1/chat/completions",
            {"model": "bench/trio", "messages": [{"role": "user", "content": "hi"}]},
            headers={"Authorization": f"Bearer {made['key']}"},
        )
        assert_error(status, body, 401, code="unknown_key")


# -- grades -------------------------------------------------------------------------------------
@covers("GET", "/api/grades")
def test_api_grades_lists_them_for_the_overview(api, folder):
    roster = Roster(folder)
    roster.add_model("big", "sim", family="big", grade="strong")
    Grades(folder).pin("strong", "big")
    status, body, _ = api.get("/api/grades")
    assert status == 200
    assert [g["grade"] for g in body["grades"]] == ["light", "general", "strong"]
    (strong,) = [g for g in body["grades"] if g["grade"] == "strong"]
    assert strong == {
        "grade": "strong",
        "rank": 3,
        "pinned": "big",
        "problem": None,
        "models": ["big"],
    }
    assert body["ceiling"] == {"alias": "big", "set": False, "problem": None}


# -- races ----------------------------------------------------------------------------------------
class _Ask:
    grade = "general"

    def run(self, prompt, seat):
        return seat.chat([{"role": "user", "content": prompt}])


def _race(home) -> str:
    """One race run to its end on this data folder (fast is the reference, mid the judge)."""
    from panelist.metrics.race.benchmark import Benchmark, GradeBook
    from panelist.metrics.roster.roster import Roster

    bench = Benchmark(
        _Ask,
        home=home,
        admission=None,
        grades=GradeBook.plain({"general": "fast"}, "mid", Roster(home)),
    )
    bench.set_input("Review: def add(a, b): return a - b").set_candidates(["x-one", "x-two"])
    bench.run()
    return bench.report().race


@covers("GET", "/api/races")
def test_list_races(dash, home):
    status, empty, _ = dash.get("/api/races")
    assert status == 200 and empty["data"] == [] and empty["next"] is None
    first, second = _race(home), _race(home)
    status, listed, _ = dash.get("/api/races?limit=1")
    assert status == 200 and [r["race"] for r in listed["data"]] == [second]
    assert listed["next"] == second and listed["running"] == 0
    (row,) = listed["data"]
    assert set(row) == {
        "race",
        "status",
        "grade",
        "pinned",
        "ceiling",
        "judges",
        "runs",
        "look",
        "candidates",
        "started",
        "seconds",
        "progress",
        "verdict",
        "judge_failures",
        "voided",
        "voids_to_confirm",
        "error",
    }
    assert row["judges"] == ["mid"] and row["look"] == 1, "a first race: its job's first look"
    assert (row["voided"], row["voids_to_confirm"]) == (0, [])
    assert (row["status"], row["pinned"], row["ceiling"]) == ("done", "fast", "mid")
    status, rest, _ = dash.get(f"/api/races?before={second}")
    assert [r["race"] for r in rest["data"]] == [first]
    status, body, _ = dash.get("/api/races?limit=0")
    assert_error(status, body, 400, param="limit")


@covers("GET", "/api/races/{race}")
def test_get_race(dash, home):
    race = _race(home)
    status, found, _ = dash.get(f"/api/races/{race}")
    assert status == 200 and found["status"] == "done"
    saved = json.loads((home.root / "runs" / "races" / f"{race}.json").read_text())
    assert found["report"] == saved
    assert [(r["model"], r["run"]) for r in found["report"]["rows"]] == [("x-one", 1), ("x-two", 1)]
    status, body, _ = dash.get("/api/races/r20200101-00000000")
    assert_error(status, body, 404, says="GET /bench/races")


@covers("GET", "/api/races/{race}/judge/{name}")
def test_get_a_judge_prompt_a_race_kept(dash, home, sim):
    race = _race(home)
    status, found, _ = dash.get(f"/api/races/{race}")
    prompt = found["report"]["rows"][0]["judgements"][0]["prompts"][0]
    status, kept, _ = dash.get(f"/api/races/{race}/{prompt}")
    assert status == 200 and kept["race"] == race and kept["judge"] == "mid"
    sent = [
        {k: v for k, v in r["body"].items() if k != "stream"}
        for r in sim.requests
        if r["model"] == "mid"
    ]
    assert kept["request"] in sent, "the question exactly as the judge received it"
    for bad in (
        "r20200101-00000000/judge/00001.json",
        f"{race}/judge/..%2Fcalls.jsonl",
        f"{race}/judge/99999.json",
    ):
        status, body, _ = dash.get(f"/api/races/{bad}")
        assert_error(status, body, 404, says="judge")


@covers("GET", "/api/models/{alias}")
def test_a_model_page_reads_one_model(dash, home):
    """The model page's data (its parts are tested in test_model_page.py)."""
    bench = ask(dash)
    status, page, _ = dash.get("/api/models/fast")
    assert status == 200, page
    assert set(page) == {
        "alias",
        "model",
        "facts",
        "collections",
        "shapes",
        "latency",
        "panels",
        "failures",
        "suite",
        "races",
        "alerts",
        "index",
    }
    assert set(page["model"]) == MODEL_KEYS and page["collections"] == ["trio"]
    assert bench["panel"] in [p["panel"] for p in page["panels"]] or not page["index"]["complete"]
    status, body, _ = dash.get("/api/models/nobody")
    assert_error(status, body, 404, says="unknown model 'nobody'")


@covers("GET", "/api/models/{alias}/catalog")
def test_a_model_row_shows_what_the_catalog_fills_apart_from_what_is_typed(dash, home, sim):
    sim.script("x-one", window=9000, price=[0.5, 2], vision=True)
    Roster(home).add_model("x-one", "sim", family="x-one")  # nothing typed
    assert main(["catalog", "refresh", "--data", str(home.root)]) == 0
    status, body, _ = dash.get("/api/models")
    row = {r["alias"]: r for r in body["data"]}["x-one"]
    assert (row["context"], row["vision"], row["price_in"]) == (None, False, None)
    assert row["known"] == {
        "context": 9000,
        "vision": True,
        "price_in": 0.5,
        "price_out": 2.0,
        "currency": "USD",
    }
    assert row["window"] == 9000
    # a typed fact is not repeated under known
    fast = {r["alias"]: r for r in body["data"]}["fast"]
    assert "context" not in fast["known"]
    # where each fact came from
    status, body, _ = dash.get("/api/models/x-one/catalog")
    assert status == 200 and body["alias"] == "x-one"
    facts = body["facts"]
    assert facts["context"]["value"] == 9000 and facts["context"]["source"] == "endpoint"
    assert facts["context"]["from"] == "GET /models" and facts["context"]["at"]
    status, body, _ = dash.get("/api/models/fast/catalog")
    assert body["facts"]["context"] == {
        "value": 100_000,
        "source": "typed",
        "at": None,
        "from": "roster",
    }
    status, body, _ = dash.get("/api/models/ghost/catalog")
    assert_error(status, body, 404, says="ghost")


@covers("POST", "/api/models/{alias}/probe")
def test_probe_a_model_from_the_dashboard(dash, home, sim):
    status, body, _ = dash.post("/api/models/fast/probe")
    assert status == 200, body
    assert (body["probe"]["alias"], body["probe"]["status"]) == ("fast", "ok")
    assert body["model"]["alias"] == "fast"
    lines = [r for r in read_jsonl(home.gateway_runs / "evidence.jsonl") if r["kind"] == "probe"]
    assert [(r["alias"], r["status"]) for r in lines] == [("fast", "ok")]
    # a hard failure counts as any probe's: here one retires it
    home.file("gateway.json").write_text(json.dumps({"retire_after": 1}))
    sim.script("mid", fail="auth")
    status, body, _ = dash.post("/api/models/mid/probe")
    assert status == 200, body
    assert (body["probe"]["error_kind"], body["probe"]["action"]) == ("auth", "retired")
    assert body["model"]["retired"] is True and body["model"]["status"] == "retired"
    assert [a["kind"] for a in read_jsonl(home.root / "runs" / "alerts.jsonl")] == ["retired"]
    status, body, _ = dash.post("/api/models/ghost/probe")
    assert_error(status, body, 404, says="ghost")


@covers("POST", "/api/catalog/refresh")
def test_refresh_the_catalog_from_the_dashboard(dash, home, sim):
    sim.script("x-one", window=9000)
    status, body, _ = dash.post("/api/catalog/refresh")
    assert status == 200, body
    assert body["refreshed"] == [{"endpoint": "sim", "models": 6, "with_facts": 1}]
    assert body["failed"] == [] and body["went_paid"] == []
    from panelist.metrics.roster.catalog import Catalog

    stored = Catalog(home).stored_facts("sim", "x-one")["context"]
    assert (stored["value"], stored["source"]) == (9000, "endpoint")
