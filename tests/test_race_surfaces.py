"""The race without code: POST /bench/race and its reads (on the gateway and the dashboard), the
registry behind them, ``panelist race``, and the example job; all on the simulated upstream."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from conftest import Gateway, read_jsonl, wait_until
from panelist.gateway import make_gateway
from panelist.metrics.race import registry as race_registry
from panelist.metrics.cli.main import main
from panelist.metrics.errors import Unavailable
from panelist.metrics.roster.grades import Grades
from panelist.metrics.home import open_home
from panelist.metrics.race.benchmark import Benchmark, GradeBook
from panelist.metrics.roster.roster import Roster
from panelist.metrics.upstream.sim import SimUpstream

ROOT = Path(__file__).resolve().parent.parent
JUDGE_SAYS = {"accuracy": 6, "shown_work": 2, "reason": "the same facts as the reference"}
PROMPT = "Where is order 1042?"

# alias -> (grade, price in, price out); all served by one simulated endpoint
MODELS = {"pinned-gen": ("general", 2.0, 6.0), "cheap-gen": ("general", 0.5, 1.0),
          "slow-gen": ("general", 0.1, 0.2), "judge-top": ("strong", 5.0, 15.0)}
CANDIDATES = ["pinned-gen", "cheap-gen"]


@pytest.fixture()
def sim():
    with SimUpstream({"pinned-gen": {}, "cheap-gen": {}, "slow-gen": {"fail": "hang"},
                      "judge-top": {"json": JUDGE_SAYS}}) as s:
        yield s


@pytest.fixture()
def home(tmp_path, sim):
    home = open_home(tmp_path / "data")
    roster = Roster(home)
    roster.add_endpoint("sim", sim.url)
    for alias, (grade, p_in, p_out) in MODELS.items():
        roster.add_model(alias, "sim", family=alias, grade=grade, price_in=p_in, price_out=p_out,
                         tools=True)
    return home


def book(home) -> GradeBook:
    """The grade book a test races by when it does not use the data folder's grades."""
    return GradeBook.plain({"general": "pinned-gen", "strong": "judge-top"}, "judge-top",
                           Roster(home))


@pytest.fixture()
def pinned(home):
    """The data folder's own grades pin the reference and the judge, as a deployment does."""
    grades = Grades(home)
    grades.pin("general", "pinned-gen")
    grades.pin("strong", "judge-top")
    return home


def serve(make, home, *, env=None, grades=True, **races):
    """A server over ``home`` whose race registry races by ``book(home)`` (or, with
    ``grades=False``, by the data folder's grades)."""
    server = make(home, env=env or {})
    if grades or races:
        server.parts.races = race_registry.Races(
            home, upstream=server.panels.upstream, grades=book(home) if grades else None,
            admission=None, **races)
    return Gateway(server)


def dashboard(home, **kw):
    from panelist.serve import make_dashboard
    return serve(make_dashboard, home, **kw)


def gateway(home, **kw):
    return serve(make_gateway, home, **kw)


def finished(server, race):
    assert wait_until(lambda: server.get(f"/bench/race/{race}")[1]["status"] != "running"), (
        f"race {race} did not end")
    return server.get(f"/bench/race/{race}")[1]


def race_folder(home):
    return home.root / "runs" / "races"


# -- over HTTP -------------------------------------------------------------------------------------
def test_a_race_started_over_http_finishes_and_is_listed(home, sim):
    with dashboard(home) as server:
        status, started, headers = server.post("/bench/race", {
            "grade": "general", "prompt": PROMPT, "runs": 2, "candidates": CANDIDATES,
            "system": "You answer questions about orders.", "rubric": "Names the status."})
        assert status == 202, started
        race = started["race"]
        assert headers["Location"] == f"/bench/race/{race}"
        assert (started["grade"], started["pinned"], started["ceiling"]) == (
            "general", "pinned-gen", "judge-top")
        assert started["candidates"] == CANDIDATES and started["progress"]["runs"] == 4

        done = finished(server, race)
        assert done["status"] == "done" and done["error"] is None
        report = done["report"]
        assert [(r["model"], r["run"]) for r in report["rows"]] == [
            (m, n) for n in (1, 2) for m in CANDIDATES]
        assert all(r["total"] == 8 for r in report["rows"]), "the judge's 6 + 2 on every run"
        assert done["progress"]["judged"] == 4
        assert done["progress"]["models"]["cheap-gen"] == {"runs": 2, "done": 2, "failed": 0,
                                                           "judged": 2}
        # the simulated judge gives every run the same marks: no model is named
        assert done["verdict"]["model"] is None
        assert "cannot tell the models apart" in done["verdict"]["why"]
        saved = json.loads((race_folder(home) / f"{race}.json").read_text())
        assert saved == report, "the report over HTTP is the one written to the data folder"
        asked = report["reference"]["transcript"]["events"][0]["messages"]
        assert asked == [{"role": "system", "content": "You answer questions about orders."},
                         {"role": "user", "content": PROMPT}]
        calls = read_jsonl(race_folder(home) / race / "calls.jsonl")
        assert {c["role"] for c in calls} == {"reference", "candidate", "judge"}
        assert all(c["race"] == race for c in calls)

        # the dashboard reads the same through its own API
        status, same, _ = server.get(f"/api/races/{race}")
        assert status == 200 and same == done
        # and each question a judge was asked, as the report links it
        prompt = report["rows"][0]["judgements"][0]["prompts"][0]
        status, kept, _ = server.get(f"/bench/race/{race}/{prompt}")
        assert status == 200 and kept["judged"] == report["rows"][0]["label"]
        assert kept["request"]["messages"][-1]["content"].count("<<<BEGIN") == 5

        status, second, _ = server.post("/bench/race", {"grade": "general", "prompt": "Again"})
        assert status == 202 and second["candidates"] == ["cheap-gen", "pinned-gen", "slow-gen"]
        server.server.parts.races.close(timeout=30)   # the hanging candidate: cancel it
        status, listed, _ = server.get("/bench/races")
        assert status == 200
        assert [r["race"] for r in listed["data"]] == [second["race"], race], "newest first"
        assert listed["data"][1] == {k: v for k, v in done.items() if k != "report"}
        status, page, _ = server.get("/bench/races?limit=1")
        assert [r["race"] for r in page["data"]] == [second["race"]] and page["next"] == second[
            "race"]
        status, rest, _ = server.get(f"/bench/races?limit=1&before={page['next']}")
        assert [r["race"] for r in rest["data"]] == [race] and rest["next"] is None
        status, api_listed, _ = server.get("/api/races")
        assert status == 200 and [r["race"] for r in api_listed["data"]] == [second["race"], race]


@pytest.mark.parametrize("body, param, words", [
    ({"prompt": PROMPT}, "grade", "'grade' is required"),
    ({"grade": "general"}, "prompt", "'prompt' is required"),
    ({"grade": "general", "prompt": "   "}, "prompt", "'prompt' is required"),
    ({"grade": "general", "prompt": PROMPT, "runs": 0}, "runs", "from 1 to 100"),
    ({"grade": "general", "prompt": PROMPT, "runs": "2"}, "runs", "whole number"),
    ({"grade": "general", "prompt": PROMPT, "runs": True}, "runs", "whole number"),
    ({"grade": "general", "prompt": PROMPT, "runs": 101}, "runs", "from 1 to 100"),
    ({"grade": "general", "prompt": PROMPT, "inputs": [PROMPT]}, "inputs", "not both"),
    ({"grade": "general", "inputs": PROMPT}, "inputs", "non-empty list of texts"),
    ({"grade": "general", "inputs": []}, "inputs", "non-empty list of texts"),
    ({"grade": "general", "inputs": [PROMPT, 7]}, "inputs", "inputs[1] must be non-empty text"),
    ({"grade": "general", "inputs": [PROMPT, "  "]}, "inputs", "inputs[1]"),
    ({"grade": "general", "inputs": ["x"] * 1001}, "inputs", "over 1000"),
    ({"grade": "general", "prompt": PROMPT, "margin": 0}, "margin", "points of 10"),
    ({"grade": "general", "prompt": PROMPT, "margin": "1"}, "margin", "points of 10"),
    ({"grade": "general", "inputs": ["x"] * 101, "runs": 100, "candidates": ["cheap-gen"]},
     "runs", "is 10100 runs, over the 10000 one race may plan"),
    ({"grade": "general", "prompt": PROMPT, "candidates": "cheap-gen"}, "candidates",
     "list of model aliases"),
    ({"grade": "general", "prompt": PROMPT, "candidates": []}, "candidates", "leave it out"),
    ({"grade": "general", "prompt": PROMPT, "system": 7}, "system", "must be text"),
    ({"grade": "general", "prompt": PROMPT, "rubric": ["x"]}, "rubric", "must be text"),
    ({"grade": "general", "prompt": PROMPT, "model": "x"}, "model", "send only grade, prompt"),
    ({"grade": "general", "prompt": PROMPT, "tools": []}, "tools", "panelist race --tools"),
    ({"grade": "general", "prompt": PROMPT, "judges": "judge-top"}, "judges",
     "list of model aliases"),
    ({"grade": "general", "prompt": PROMPT, "judges": []}, "judges", "distinct families"),
    ({"grade": "general", "prompt": PROMPT, "judges": ["pinned-gen"]}, "judges",
     "name judges of other families"),
    ({"grade": "general", "prompt": PROMPT, "orders": "reversed"}, "orders",
     "one of both, random"),
    ({"grade": "general", "prompt": PROMPT, "allow_extra_tools": "yes"}, "allow_extra_tools",
     "or a list of tool names"),
    ({"grade": "general", "prompt": PROMPT, "allow_extra_tools": ["ok", "not ok"]},
     "allow_extra_tools", "or a list of tool names"),
])
def test_a_bad_race_request_is_a_400_naming_the_field(home, body, param, words):
    with gateway(home) as server:
        status, reply, _ = server.post("/bench/race", body)
        assert status == 400, reply
        assert reply["error"]["param"] == param and words in reply["error"]["message"]
    assert not race_folder(home).exists() or not any(race_folder(home).iterdir()), (
        "a refused race names no race and leaves no folder")


def test_unknown_grades_models_and_missing_pins_say_what_to_do(home):
    with gateway(home) as server:
        status, reply, _ = server.post("/bench/race", {"grade": "huge", "prompt": PROMPT})
        assert status == 404 and reply["error"]["param"] == "grade"
        message = reply["error"]["message"]
        assert "grade 'huge'" in message and "general, strong" in message and "--grade" in message

        status, reply, _ = server.post("/bench/race", {"grade": "general", "prompt": PROMPT,
                                                        "candidates": ["cheap-gen", "nobody"]})
        assert status == 404 and reply["error"]["param"] == "candidates"
        assert "nobody" in reply["error"]["message"] and "cheap-gen" not in \
            reply["error"]["message"].split(";")[0]

        status, reply, _ = server.post("/bench/race", {"grade": "general", "prompt": PROMPT,
                                                        "judges": ["judge-top", "nobody"]})
        assert status == 404 and reply["error"]["param"] == "judges"
        assert "unknown judge(s) nobody" in reply["error"]["message"]

        status, reply, _ = server.post("/bench", raw=b"[1]",
                                       headers={"Content-Type": "application/json"})
        assert status == 404
        status, reply, _ = server.post("/bench/race", raw=b"[1]",
                                       headers={"Content-Type": "application/json"})
        assert status == 400 and "JSON object" in reply["error"]["message"]

    bare = race_registry.Races(home, grades=GradeBook.plain({}, "judge-top", Roster(home)),
                               admission=None)
    with Gateway(make_gateway(home, env={})) as server:
        server.server.parts.races = bare
        status, reply, _ = server.post("/bench/race", {"grade": "general", "prompt": PROMPT})
        assert status == 404
        assert "panelist grade pin general ALIAS" in reply["error"]["message"]
        assert "cheap-gen, pinned-gen, slow-gen" in reply["error"]["message"]
    assert not race_folder(home).exists() or not any(race_folder(home).iterdir())


def test_unknown_races_are_404_and_a_bad_page_is_400(home):
    with gateway(home) as server:
        for path in ("/bench/race/r20260101-0a1b2c3d", "/bench/race/nothing",
                     "/bench/race/..%2F..%2Fconfig%2Froster", "/api/races/r20260101-0a1b2c3d"):
            status, reply, _ = server.get(path)
            assert status == 404, path
        status, reply, _ = server.get("/bench/race/r20260101-0a1b2c3d")
        assert "GET /bench/races" in reply["error"]["message"]
        for query in ("limit=0", "limit=201", "limit=x"):
            status, reply, _ = server.get(f"/bench/races?{query}")
            assert status == 400 and reply["error"]["param"] == "limit", query
        status, reply, _ = server.get("/bench/races?before=r20260101-0a1b2c3d")
        assert status == 400 and reply["error"]["param"] == "before"
        status, empty, _ = server.get("/bench/races")
        assert status == 200 and empty["data"] == [] and empty["next"] is None


def test_race_routes_take_gateway_keys_and_refuse_keys_limited_to_collections(home):
    from panelist.metrics.roster.collection import Collections
    from panelist.metrics.server.keys import Keys
    Collections(home).save(Roster(home).view(), "pair", ["cheap-gen", "pinned-gen"])
    narrow, _ = Keys(home).create("narrow", collections=["pair"], known=["pair"])
    wide, _ = Keys(home).create("wide")
    routes = (("POST", "/bench/race"), ("GET", "/bench/races"),
              ("GET", "/bench/race/r20260101-0a1b2c3d"),
              ("POST", "/bench/race/r20260101-0a1b2c3d/again"),
              ("GET", "/bench/race/r20260101-0a1b2c3d/judge/00001.json"))
    body = {"grade": "general", "prompt": PROMPT, "candidates": ["cheap-gen"]}
    with gateway(home, env={"PANELIST_REQUIRE_KEYS": "1"}) as server:
        for method, path in routes:
            status, reply, _ = server.request(method, path, body if method == "POST" else None)
            assert status == 401, (method, path, reply)
            status, reply, _ = server.request(method, path, body if method == "POST" else None,
                                              headers={"Authorization": f"Bearer {narrow}"})
            assert status == 403, (method, path, reply)
            assert "without --collections" in reply["error"]["message"]
        assert not race_folder(home).exists()
        status, started, _ = server.post("/bench/race", body,
                                         headers={"Authorization": f"Bearer {wide}"})
        assert status == 202
        status, listed, _ = server.request("GET", "/bench/races",
                                           headers={"Authorization": f"Bearer {wide}"})
        assert status == 200 and listed["data"][0]["race"] == started["race"]


def test_the_server_closes_cleanly_with_a_race_running(home, sim):
    server = gateway(home)
    try:
        status, started, _ = server.post("/bench/race", {
            "grade": "general", "prompt": PROMPT, "runs": 1,
            "candidates": ["cheap-gen", "slow-gen"]})
        assert status == 202
        race = started["race"]
        assert wait_until(lambda: sim.count("slow-gen") == 1), "the hanging call was not made"
        status, running, _ = server.get(f"/bench/race/{race}")
        assert running["status"] == "running" and running["report"] is None
        assert running["progress"]["reference"] == "done"
        registry = server.server.parts.races
    finally:
        server.close()   # returns: the race was cancelled and its thread joined

    assert not [t for t in threading.enumerate() if t.name == f"race-{race}"]
    assert sim.wait_disconnects(1, timeout=30), "the hanging call's connection was cut"
    cancelled = registry.get(race)
    assert cancelled["status"] == "cancelled" and "stopped" in cancelled["error"]
    slow = next(r for r in cancelled["report"]["rows"] if r["model"] == "slow-gen")
    assert slow["succeeded"] is False and "cancelled" in slow["error"]
    saved = json.loads((race_folder(home) / f"{race}.json").read_text())
    assert saved["race"] == race, "the cancelled race still wrote its report"
    with pytest.raises(Unavailable, match="stopping"):
        registry.start({"grade": "general", "prompt": PROMPT})


def test_races_beyond_the_limit_are_refused_until_one_ends(home, sim):
    with gateway(home, max_running=1) as server:
        status, first, _ = server.post("/bench/race", {"grade": "general", "prompt": PROMPT,
                                                        "candidates": ["slow-gen"]})
        assert status == 202
        status, reply, headers = server.post("/bench/race", {"grade": "general",
                                                              "prompt": PROMPT})
        assert status == 429 and reply["error"]["code"] == "too_many_races"
        assert headers["Retry-After"] and "GET /bench/races" in reply["error"]["message"]
        status, listed, _ = server.get("/bench/races")
        assert listed["running"] == 1 and [r["race"] for r in listed["data"]] == [first["race"]]


def test_races_are_read_back_after_a_restart(home):
    with gateway(home) as server:
        status, started, _ = server.post("/bench/race", {"grade": "general", "prompt": PROMPT,
                                                          "candidates": ["cheap-gen"]})
        done = finished(server, started["race"])
    unfinished = race_folder(home) / "r20200101-0000000a"
    unfinished.mkdir()
    (race_folder(home) / "r20200101-0000000b.json").write_text('{"race": "r2020')

    with Gateway(make_gateway(home, env={})) as again:   # a new server, its own registry
        status, read, _ = again.get(f"/bench/race/{started['race']}")
        assert status == 200 and read == done
        status, listed, _ = again.get("/bench/races")
        by = {r["race"]: r for r in listed["data"]}
        assert by["r20200101-0000000a"]["status"] == "unfinished"
        assert "another process" in by["r20200101-0000000a"]["error"]
        assert by["r20200101-0000000b"]["status"] == "unreadable"
        assert set(by["r20200101-0000000a"]) == set(by[started["race"]]), "one shape for all"
        status, broken, _ = again.get("/bench/race/r20200101-0000000b")
        assert status == 200 and broken["report"] is None


# -- the same report three ways --------------------------------------------------------------------
def shape(value):
    """The keys at every level (a list by its first element), values left out."""
    if isinstance(value, dict):
        return {k: shape(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):   # a tuple in Python is a list in JSON
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

    code = main(["race", "--grade", "general", "--prompt", PROMPT, "--runs", "2",
                 "--candidates", ",".join(CANDIDATES), "--data", str(pinned.root), "--json"])
    out, _ = capsys.readouterr()
    assert code == 0
    from_cli = json.loads(out)

    with gateway(pinned, grades=False) as server:   # the data folder's grades, as deployed
        status, started, _ = server.post("/bench/race", {
            "grade": "general", "prompt": PROMPT, "runs": 2, "candidates": CANDIDATES})
        assert status == 202
        from_http = finished(server, started["race"])["report"]

    assert len({from_python["race"], from_cli["race"], from_http["race"]}) == 3
    assert shape(from_python) == shape(from_cli) == shape(from_http)
    assert [(r["model"], r["run"]) for r in from_cli["rows"]] == \
        [(r["model"], r["run"]) for r in from_http["rows"]]


def test_http_and_python_reports_share_one_shape_by_an_injected_grade_book(home):
    bench = Benchmark(PlainJob, runs=2, home=home, grades=book(home), admission=None)
    bench.set_input(PROMPT)
    bench.set_candidates(CANDIDATES)
    bench.run()
    with gateway(home) as server:
        status, started, _ = server.post("/bench/race", {
            "grade": "general", "prompt": PROMPT, "runs": 2, "candidates": CANDIDATES})
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
        (["--grade", "general", "--prompt", "x", "-f", str(tmp_path / "none.txt")],
         "cannot read"),
        (["--grade", "general", "--prompt", "x", "--tools", str(tmp_path / "none.py")],
         "no tools file"),
    ]
    empty = tmp_path / "empty.py"
    empty.write_text("x = 1\n")
    cases.append((["--grade", "general", "--prompt", "x", "--tools", str(empty)], "no TOOLS list"))
    broken = tmp_path / "broken.py"
    broken.write_text("TOOLS = [print]\n")
    cases.append((["--grade", "general", "--prompt", "x", "--tools", str(broken)],
                  "is not a tool"))
    failing = tmp_path / "failing.py"
    failing.write_text("raise RuntimeError('no database')\n")
    cases.append((["--grade", "general", "--prompt", "x", "--tools", str(failing)],
                  "RuntimeError: no database"))
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
    cases.append((["--grade", "general", "--inputs", str(tmp_path / "none.jsonl")],
                  "cannot read"))
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
    calls = [{"name": "find_order", "arguments": {"number": "1042"}},
             {"name": "shipping_status", "arguments": {"order_id": "o-1042"}}]
    sim.script("pinned-gen", tool_calls=calls)
    sim.script("cheap-gen", tool_calls=calls[:1])   # skips the second tool
    prompt = tmp_path / "question.txt"
    prompt.write_text("Order 1042, please.")
    code, out, err = run(capsys, "race", "--grade", "general", "--prompt", "Hello.", "-f",
                         str(prompt), "--candidates", "pinned-gen,cheap-gen", "--tools",
                         str(tools), "--runs", "1", "--data", str(pinned.root))
    assert code == 0, err
    assert "grade general · reference pinned-gen · judge judge-top" in out
    assert out.rstrip().splitlines()[-2].startswith("verdict: ")
    assert "\x1b[" not in err, "no progress drawn when stderr is not a terminal"
    race = out.split()[1]
    report = json.loads((race_folder(pinned) / f"{race}.json").read_text())
    assert report["task"] == "Hello.\n\nOrder 1042, please."
    events = report["reference"]["transcript"]["events"]
    used = [(e["tool"], e["returned"]) for e in events if e["kind"] == "tool"]
    assert used == [("find_order", '{"order": "1042", "status": "shipped"}'),
                    ("shipping_status", '{"eta": "Monday", "order_id": "o-1042"}')]
    pinned_row, cheap_row = report["rows"]
    assert pinned_row["tool_difference"] == {"skipped": [], "different": [], "extra": [],
                                             "new_tool": [], "equivalent": [], "unused": [],
                                             "allowed": []}
    assert cheap_row["tool_difference"]["skipped"] == [
        {"tool": "shipping_status", "arguments": {"order_id": "o-1042"}, "reference_call": 2}]
    assert cheap_row["accuracy"] == 4 and cheap_row["capped_from"] == 6


# a judge that marks down an answer that does not help, by its text; slow-gen gives it
DISCERNING = [{"contains": "I cannot help with orders", "answer": {
    "accuracy": 1, "shown_work": 0, "reason": "it does not answer the question"}}]
QUESTIONS = ["Where is order 1042?", "Has order 1043 shipped?", "When does order 1044 arrive?",
             "Where is order 1045?", "Is order 1046 late?",
             "Can order 1047 be sent to my office?"]
INPUT_LINES = ['"Where is order 1042?"', '{"prompt": "Has order 1043 shipped?"}', "",
               '"When does order 1044 arrive?"', '"Where is order 1045?"',
               '{"prompt": "Is order 1046 late?"}', '"Can order 1047 be sent to my office?"']
THREE = ["pinned-gen", "cheap-gen", "slow-gen"]


def discerning(sim):
    sim.script("judge-top", json=JUDGE_SAYS, json_rules=DISCERNING)
    sim.script("slow-gen", answer="I cannot help with orders.")


def test_the_cli_races_a_set_of_inputs_from_a_jsonl_file_to_a_verdict(pinned, sim, tmp_path,
                                                                      capsys):
    discerning(sim)
    path = tmp_path / "inputs.jsonl"
    path.write_text("\n".join(INPUT_LINES) + "\n")
    code, out, err = run(capsys, "race", "--grade", "general", "--inputs", str(path),
                         "--runs", "1", "--candidates", ",".join(THREE), "--data",
                         str(pinned.root), "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["inputs"] == QUESTIONS and report["task"] == QUESTIONS[0]
    assert [(r["input"], r["succeeded"]) for r in report["references"]] == [
        (i, True) for i in range(1, 7)]
    assert sorted((r["model"], r["input"], r["run"]) for r in report["rows"]) == sorted(
        (m, i, 1) for m in THREE for i in range(1, 7))
    said = report["verdict"]
    assert said["test"]["unit"] == "input" and said["test"]["margin"] == 1.0
    assert said["model"] == "cheap-gen" and said["state"] == "named"
    by = {c["model"]: c for c in said["candidates"]}
    assert by["slow-gen"]["result"] == "worse", "the cheapest, but it does not help"
    assert by["cheap-gen"]["measures"]["accuracy"]["n"] == 6, "an input is a unit"
    assert by["cheap-gen"]["p_holm"] <= said["test"]["level"]
    # each judgement read one input, and the reference of that input
    asked = [r["body"]["messages"][-1]["content"] for r in sim.requests
             if r["model"] == "judge-top"]
    assert len(asked) == 36, "18 runs, each judged in both orders"
    for question in QUESTIONS:
        assert sum(question in a for a in asked) == 6, question


def test_a_race_over_http_takes_a_list_of_inputs(home, sim):
    discerning(sim)
    with gateway(home) as server:
        status, started, _ = server.post("/bench/race", {
            "grade": "general", "inputs": QUESTIONS, "runs": 2, "candidates": THREE,
            "margin": 1.5})
        assert status == 202, started
        assert started["progress"]["runs"] == 3 * 6 * 2
        done = finished(server, started["race"])
    report = done["report"]
    assert report["inputs"] == QUESTIONS and report["verdict"]["test"]["margin"] == 1.5
    assert done["verdict"]["model"] == "cheap-gen"
    assert done["progress"]["reference"] == "done"
    assert done["progress"]["models"]["cheap-gen"] == {"runs": 12, "done": 12, "failed": 0,
                                                       "judged": 12}
    calls = read_jsonl(race_folder(home) / started["race"] / "calls.jsonl")
    assert sorted(c["input"] for c in calls if c["role"] == "reference") == list(range(1, 7))


def test_a_race_over_http_says_which_extra_tool_calls_it_allows(home, sim):
    with gateway(home) as server:
        status, started, _ = server.post("/bench/race", {
            "grade": "general", "prompt": PROMPT, "candidates": ["cheap-gen"],
            "allow_extra_tools": ["find_order", "find_order", "shipping_status"]})
        assert status == 202, started
        report = finished(server, started["race"])["report"]
    assert report["allow_extra_tools"] == ["find_order", "shipping_status"]
    assert report["rows"][0]["flags"] == [], "a plain answer holds nothing addressed to a judge"


def test_a_failed_reference_prints_the_report_then_exits_3(pinned, sim, capsys):
    sim.script("pinned-gen", fail="auth")
    code, out, err = run(capsys, "race", "--grade", "general", "--prompt", PROMPT,
                         "--data", str(pinned.root))
    assert code == 3
    assert "reference: FAILED" in out
    assert err.startswith("panelist: error: the reference run failed") and err.count("\n") == 1


def race_on_a_terminal(home, *extra):
    """``panelist race`` from the checkout with its stderr on a pseudo-terminal: (code, stdout,
    what the terminal showed)."""
    master, slave = pty.openpty()
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "metrics" / "offload.py"), "race", "--grade", "general",
         "--prompt", PROMPT, "--runs", "2", "--candidates", "pinned-gen,cheap-gen", "--data",
         str(home.root), *extra],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave, cwd=ROOT, env=env)
    os.close(slave)
    shown = b""
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:   # the other end closed: the command ended
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
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "order_agent.py"), "--runs",
                           "6", "--data", str(tmp_path / "data")],
                          capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.startswith("the reference answered: [simulated sim-steady] The tools said:")
    assert "grade general · reference sim-steady · judge sim-careful" in out
    assert "verdict: sim-vision: sim-vision is the cheapest model" in out
    path = Path(out.rstrip().splitlines()[-1].removeprefix("report: "))
    report = json.loads(path.read_text())
    rows = {(r["model"], r["run"]): r for r in report["rows"]}
    assert set(rows) == {(m, n) for m in ("sim-flaky", "sim-steady", "sim-vision")
                         for n in range(1, 7)}
    flaky = rows[("sim-flaky", 1)]
    assert flaky["tool_difference"]["skipped"] == [
        {"tool": "shipping_status", "arguments": {"order_id": "ord-1042"},
         "reference_call": 2}]
    assert (flaky["accuracy"], flaky["score"]) == (3, 0.0), "the judge marked it down"
    said = {c["model"]: c for c in report["verdict"]["candidates"]}
    assert said["sim-flaky"]["result"] == "worse" and said["sim-vision"]["result"] == "good_enough"
    assert report["verdict"]["test"]["measures"] == ["accuracy", "score"], "the scorer took part"
    assert rows[("sim-vision", 1)]["score"] == 1.0 and rows[("sim-vision", 1)]["total"] == 9
