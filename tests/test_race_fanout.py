"""What one race request may cost (``metrics/server/fanout.py``, ``metrics/race/callcount.py``):
the reply that starts it says how many upstream calls it plans, the simulated upstream sees
exactly that many, each counts against its key's requests a minute, a race past the server's cap
or past its key's limit is refused before any call, and a key made with --no-races starts none."""

from __future__ import annotations

import json

import pytest

from conftest import wait_until
from panelist.metrics.cli.main import main
from panelist.metrics.server.keys import Keys
from surfacekit import CANDIDATES, PROMPT, gateway, race_folder
from surfacekit import home, sim  # noqa: F401  (the race tests' data folder and simulated models)

BODY = {"grade": "general", "prompt": PROMPT, "runs": 2, "candidates": CANDIDATES}
# one reference + 2 candidates × 2 runs + each of those 4 runs judged in both orders by one judge
PLANNED = 1 + 2 * 2 + 2 * 2 * 2
ALIASES = ("pinned-gen", "cheap-gen", "slow-gen", "judge-top")
KEYED = {"PANELIST_REQUIRE_KEYS": "1"}


def ended(server, race, headers=None) -> dict:
    def done():
        status, body, _ = server.get(f"/bench/race/{race}", headers=headers)
        assert status == 200, body
        return body["status"] != "running"

    assert wait_until(done), f"race {race} did not end"
    return server.get(f"/bench/race/{race}", headers=headers)[1]


def upstream_calls(sim) -> int:
    return sum(sim.count(a) for a in ALIASES)


def bearer(secret):
    return {"Authorization": f"Bearer {secret}"}


def test_the_count_said_before_a_race_is_the_count_the_upstream_sees(home, sim):
    secret, _ = Keys(home).create("wide", rpm=100)
    with gateway(home, env=KEYED) as server:
        status, started, _ = server.post("/bench/race", BODY, headers=bearer(secret))
        assert status == 202, started
        assert started["calls"]["planned"] == PLANNED
        assert started["calls"]["at_most"] >= PLANNED
        report = ended(server, started["race"], bearer(secret))
        assert report["status"] == "done", report
        assert upstream_calls(sim) == PLANNED


def test_a_key_limited_to_two_requests_a_minute_cannot_start_a_race_of_more_calls(home, sim):
    secret, _ = Keys(home).create("slow", rpm=2)
    with gateway(home, env=KEYED) as server:
        status, reply, _ = server.post("/bench/race", BODY, headers=bearer(secret))
        assert status == 403, reply
        assert reply["error"]["code"] == "over_key_limit"
        message = reply["error"]["message"]
        assert f"{PLANNED} upstream calls" in message and "2 a minute" in message
    assert upstream_calls(sim) == 0 and not race_folder(home).exists()


def test_each_planned_call_counts_against_the_key_so_a_second_race_waits(home, sim):
    secret, _ = Keys(home).create("some", rpm=PLANNED + 5)
    watcher, _ = Keys(home).create("watcher")  # follows the race without spending "some"
    with gateway(home, env=KEYED) as server:
        status, started, _ = server.post("/bench/race", BODY, headers=bearer(secret))
        assert status == 202, started
        ended(server, started["race"], bearer(watcher))
        other = dict(BODY, prompt="Where is order 1043?")
        status, reply, headers = server.post("/bench/race", other, headers=bearer(secret))
        assert status == 429, reply
        assert f"{PLANNED} upstream calls" in reply["error"]["message"]
        assert int(headers["Retry-After"]) >= 1
    assert upstream_calls(sim) == PLANNED


def test_a_race_over_the_servers_cap_is_refused_naming_its_count_and_the_cap(home, sim):
    with gateway(home, env={"PANELIST_MAX_REQUEST_CALLS": "20"}) as server:
        status, reply, _ = server.post("/bench/race", BODY)
        assert status == 400, reply
        assert reply["error"]["code"] == "too_many_calls"
        message = reply["error"]["message"]
        assert "over the 20 one request may make" in message
        assert f"({PLANNED} if every call answers at once)" in message
        assert upstream_calls(sim) == 0 and not race_folder(home).exists()
        # one candidate, one run: 4 calls planned, 20 at most (3 tries of each of the two
        # runs, 7 of each of the two judgements): within the cap
        status, started, _ = server.post(
            "/bench/race", dict(BODY, runs=1, candidates=["cheap-gen"])
        )
        assert status == 202, started
        assert started["calls"] == {"planned": 4, "at_most": 20}
        assert ended(server, started["race"])["status"] == "done"
    assert upstream_calls(sim) == 4


def test_a_key_made_with_no_races_starts_none(home, sim, capsys):
    assert main(["key", "create", "reader", "--no-races", "--data", str(home.root), "--json"]) == 0
    made = json.loads(capsys.readouterr().out)
    assert made["races"] is False
    with gateway(home, env=KEYED) as server:
        status, reply, _ = server.post("/bench/race", BODY, headers=bearer(made["key"]))
        assert status == 403 and reply["error"]["code"] == "races_not_allowed", reply
        assert "--no-races" in reply["error"]["message"]
    assert upstream_calls(sim) == 0


# -- the dashboard's suite run and race: the cap, the count said first --------------------------
SUITE_TASKS = ["claim-wilson-no-verdicts", "claim-costs-no-tokens"]


@pytest.mark.slow
def test_a_suite_run_says_its_calls_first_and_is_refused_over_the_cap(tmp_path):
    from conftest import Gateway, TEST_MODELS
    from panelist.metrics.home import open_home
    from panelist.metrics.roster.roster import Roster
    from panelist.metrics.upstream.sim import SimUpstream
    from panelist.serve import make_dashboard

    with SimUpstream({k: dict(v) for k, v in TEST_MODELS.items()}) as upstream:
        home = open_home(tmp_path / "data")
        roster = Roster(home)
        roster.add_endpoint("sim", upstream.url)
        for alias in ("fast", "mid"):
            roster.add_model(alias, "sim", family=alias, context=100_000)
        body = {"models": "fast,mid", "tasks": SUITE_TASKS}
        # 2 models × 2 tasks: 4 calls planned, 16 at most (three retries or corrections each)
        with Gateway(make_dashboard(home, env={"PANELIST_MAX_REQUEST_CALLS": "15"})) as dash:
            status, reply, _ = dash.post("/api/suite/run", body)
            assert status == 400 and reply["error"]["code"] == "too_many_calls", reply
            assert (
                "up to 16 upstream calls (4 if every call answers at once), over the 15"
                in reply["error"]["message"]
            )
            assert upstream.count("fast") + upstream.count("mid") == 0
        with Gateway(make_dashboard(home, env={"PANELIST_MAX_REQUEST_CALLS": "16"})) as dash:
            status, started, _ = dash.post("/api/suite/run", body)
            assert status == 202, started
            assert started["calls"] == {"planned": 4, "at_most": 16}

            def ended():
                return dash.get("/api/suite/run")[1]["status"] != "running"

            assert wait_until(ended)
            assert dash.get("/api/suite/run")[1]["status"] == "done"
        assert upstream.count("fast") + upstream.count("mid") == 4
