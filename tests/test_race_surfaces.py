"""The race without code over HTTP: POST /bench/race and its reads (on the gateway and the
dashboard) and the registry behind them, on the simulated upstream. ``panelist race``, the Python
API and the example job are ``test_race_cli.py``."""

from __future__ import annotations

import json
import threading

import pytest

from surfacekit import CANDIDATES, PROMPT, dashboard, finished, gateway, race_folder
from surfacekit import home, sim  # noqa: F401  (fixtures)
from conftest import Gateway, read_jsonl, wait_until
from panelist.gateway import make_gateway
from panelist.metrics.race import registry as race_registry
from panelist.metrics.errors import Unavailable
from panelist.metrics.race.benchmark import GradeBook
from panelist.metrics.roster.roster import Roster


# -- over HTTP -------------------------------------------------------------------------------------
def test_a_race_started_over_http_finishes_and_is_listed(home, sim):
    with dashboard(home) as server:
        status, started, headers = server.post(
            "/bench/race",
            {
                "grade": "general",
                "prompt": PROMPT,
                "runs": 2,
                "candidates": CANDIDATES,
                "system": "You answer questions about orders.",
                "rubric": "Names the status.",
            },
        )
        assert status == 202, started
        race = started["race"]
        assert headers["Location"] == f"/bench/race/{race}"
        assert (started["grade"], started["pinned"], started["ceiling"]) == (
            "general",
            "pinned-gen",
            "judge-top",
        )
        assert started["candidates"] == CANDIDATES and started["progress"]["runs"] == 4

        done = finished(server, race)
        assert done["status"] == "done" and done["error"] is None
        report = done["report"]
        assert [(r["model"], r["run"]) for r in report["rows"]] == [
            (m, n) for n in (1, 2) for m in CANDIDATES
        ]
        assert all(r["total"] == 8 for r in report["rows"]), "the judge's 6 + 2 on every run"
        assert done["progress"]["judged"] == 4
        assert done["progress"]["models"]["cheap-gen"] == {
            "runs": 2,
            "done": 2,
            "failed": 0,
            "judged": 2,
        }
        # the simulated judge gives every run the same marks: no model is named
        assert done["verdict"]["model"] is None
        assert "cannot tell the models apart" in done["verdict"]["why"]
        saved = json.loads((race_folder(home) / f"{race}.json").read_text())
        assert saved == report, "the report over HTTP is the one written to the data folder"
        asked = report["reference"]["transcript"]["events"][0]["messages"]
        assert asked == [
            {"role": "system", "content": "You answer questions about orders."},
            {"role": "user", "content": PROMPT},
        ]
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
        server.server.parts.races.close(timeout=30)  # the hanging candidate: cancel it
        status, listed, _ = server.get("/bench/races")
        assert status == 200
        assert [r["race"] for r in listed["data"]] == [second["race"], race], "newest first"
        assert listed["data"][1] == {k: v for k, v in done.items() if k != "report"}
        status, page, _ = server.get("/bench/races?limit=1")
        assert [r["race"] for r in page["data"]] == [second["race"]] and page["next"] == second[
            "race"
        ]
        status, rest, _ = server.get(f"/bench/races?limit=1&before={page['next']}")
        assert [r["race"] for r in rest["data"]] == [race] and rest["next"] is None
        status, api_listed, _ = server.get("/api/races")
        assert status == 200 and [r["race"] for r in api_listed["data"]] == [second["race"], race]


@pytest.mark.parametrize(
    "body, param, words",
    [
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
        (
            {"grade": "general", "inputs": ["x"] * 101, "runs": 100, "candidates": ["cheap-gen"]},
            "runs",
            "is 10100 runs, over the 10000 one race may plan",
        ),
        (
            {"grade": "general", "prompt": PROMPT, "candidates": "cheap-gen"},
            "candidates",
            "list of model aliases",
        ),
        ({"grade": "general", "prompt": PROMPT, "candidates": []}, "candidates", "leave it out"),
        ({"grade": "general", "prompt": PROMPT, "system": 7}, "system", "must be text"),
        ({"grade": "general", "prompt": PROMPT, "rubric": ["x"]}, "rubric", "must be text"),
        ({"grade": "general", "prompt": PROMPT, "model": "x"}, "model", "send only grade, prompt"),
        ({"grade": "general", "prompt": PROMPT, "tools": []}, "tools", "panelist race --tools"),
        (
            {"grade": "general", "prompt": PROMPT, "judges": "judge-top"},
            "judges",
            "list of model aliases",
        ),
        ({"grade": "general", "prompt": PROMPT, "judges": []}, "judges", "distinct families"),
        (
            {"grade": "general", "prompt": PROMPT, "judges": ["pinned-gen"]},
            "judges",
            "name judges of other families",
        ),
        (
            {"grade": "general", "prompt": PROMPT, "orders": "reversed"},
            "orders",
            "one of both, random",
        ),
        (
            {"grade": "general", "prompt": PROMPT, "allow_extra_tools": "yes"},
            "allow_extra_tools",
            "or a list of tool names",
        ),
        (
            {"grade": "general", "prompt": PROMPT, "allow_extra_tools": ["ok", "not ok"]},
            "allow_extra_tools",
            "or a list of tool names",
        ),
    ],
)
def test_a_bad_race_request_is_a_400_naming_the_field(home, body, param, words):
    with gateway(home) as server:
        status, reply, _ = server.post("/bench/race", body)
        assert status == 400, reply
        assert reply["error"]["param"] == param and words in reply["error"]["message"]
    assert not race_folder(home).exists() or not any(race_folder(home).iterdir()), (
        "a refused race names no race and leaves no folder"
    )


def test_unknown_grades_models_and_missing_pins_say_what_to_do(home):
    with gateway(home) as server:
        status, reply, _ = server.post("/bench/race", {"grade": "huge", "prompt": PROMPT})
        assert status == 404 and reply["error"]["param"] == "grade"
        message = reply["error"]["message"]
        assert "grade 'huge'" in message and "general, strong" in message and "--grade" in message

        status, reply, _ = server.post(
            "/bench/race",
            {"grade": "general", "prompt": PROMPT, "candidates": ["cheap-gen", "nobody"]},
        )
        assert status == 404 and reply["error"]["param"] == "candidates"
        assert (
            "nobody" in reply["error"]["message"]
            and "cheap-gen" not in reply["error"]["message"].split(";")[0]
        )

        status, reply, _ = server.post(
            "/bench/race", {"grade": "general", "prompt": PROMPT, "judges": ["judge-top", "nobody"]}
        )
        assert status == 404 and reply["error"]["param"] == "judges"
        assert "unknown judge(s) nobody" in reply["error"]["message"]

        status, reply, _ = server.post(
            "/bench", raw=b"[1]", headers={"Content-Type": "application/json"}
        )
        assert status == 404
        status, reply, _ = server.post(
            "/bench/race", raw=b"[1]", headers={"Content-Type": "application/json"}
        )
        assert status == 400 and "JSON object" in reply["error"]["message"]

    bare = race_registry.Races(
        home, grades=GradeBook.plain({}, "judge-top", Roster(home)), admission=None
    )
    with Gateway(make_gateway(home, env={})) as server:
        server.server.parts.races = bare
        status, reply, _ = server.post("/bench/race", {"grade": "general", "prompt": PROMPT})
        assert status == 404
        assert "panelist grade pin general ALIAS" in reply["error"]["message"]
        assert "cheap-gen, pinned-gen, slow-gen" in reply["error"]["message"]
    assert not race_folder(home).exists() or not any(race_folder(home).iterdir())


def test_unknown_races_are_404_and_a_bad_page_is_400(home):
    with gateway(home) as server:
        for path in (
            "/bench/race/r20260101-0a1b2c3d",
            "/bench/race/nothing",
            "/bench/race/..%2F..%2Fconfig%2Froster",
            "/api/races/r20260101-0a1b2c3d",
        ):
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
    routes = (
        ("POST", "/bench/race"),
        ("GET", "/bench/races"),
        ("GET", "/bench/race/r20260101-0a1b2c3d"),
        ("POST", "/bench/race/r20260101-0a1b2c3d/again"),
        ("GET", "/bench/race/r20260101-0a1b2c3d/judge/00001.json"),
    )
    body = {"grade": "general", "prompt": PROMPT, "candidates": ["cheap-gen"]}
    with gateway(home, env={"PANELIST_REQUIRE_KEYS": "1"}) as server:
        for method, path in routes:
            status, reply, _ = server.request(method, path, body if method == "POST" else None)
            assert status == 401, (method, path, reply)
            status, reply, _ = server.request(
                method,
                path,
                body if method == "POST" else None,
                headers={"Authorization": f"Bearer {narrow}"},
            )
            assert status == 403, (method, path, reply)
            assert "without --collections" in reply["error"]["message"]
        assert not race_folder(home).exists()
        status, started, _ = server.post(
            "/bench/race", body, headers={"Authorization": f"Bearer {wide}"}
        )
        assert status == 202
        status, listed, _ = server.request(
            "GET", "/bench/races", headers={"Authorization": f"Bearer {wide}"}
        )
        assert status == 200 and listed["data"][0]["race"] == started["race"]


def test_the_server_closes_cleanly_with_a_race_running(home, sim):
    server = gateway(home)
    try:
        status, started, _ = server.post(
            "/bench/race",
            {
                "grade": "general",
                "prompt": PROMPT,
                "runs": 1,
                "candidates": ["cheap-gen", "slow-gen"],
            },
        )
        assert status == 202
        race = started["race"]
        assert wait_until(lambda: sim.count("slow-gen") == 1), "the hanging call was not made"
        status, running, _ = server.get(f"/bench/race/{race}")
        assert running["status"] == "running" and running["report"] is None
        assert running["progress"]["reference"] == "done"
        registry = server.server.parts.races
    finally:
        server.close()  # returns: the race was cancelled and its thread joined

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
        status, first, _ = server.post(
            "/bench/race", {"grade": "general", "prompt": PROMPT, "candidates": ["slow-gen"]}
        )
        assert status == 202
        status, reply, headers = server.post("/bench/race", {"grade": "general", "prompt": PROMPT})
        assert status == 429 and reply["error"]["code"] == "too_many_races"
        assert headers["Retry-After"] and "GET /bench/races" in reply["error"]["message"]
        status, listed, _ = server.get("/bench/races")
        assert listed["running"] == 1 and [r["race"] for r in listed["data"]] == [first["race"]]


def test_races_are_read_back_after_a_restart(home):
    with gateway(home) as server:
        status, started, _ = server.post(
            "/bench/race", {"grade": "general", "prompt": PROMPT, "candidates": ["cheap-gen"]}
        )
        done = finished(server, started["race"])
    unfinished = race_folder(home) / "r20200101-0000000a"
    unfinished.mkdir()
    (race_folder(home) / "r20200101-0000000b.json").write_text('{"race": "r2020')

    with Gateway(make_gateway(home, env={})) as again:  # a new server, its own registry
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
