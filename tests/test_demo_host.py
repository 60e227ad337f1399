"""The demo's simulated upstream is one per data folder: whatever a command does, a running demo
server keeps answering, and the roster's ``demo`` endpoint keeps its URL.

Every test runs real servers and real processes on 127.0.0.1 over one data folder: a demo
dashboard built in this process, ``panelist suite run --demo`` and ``panelist serve --demo`` as
subprocesses. What is checked is what a user sees: the demo collection answers through ``/v1``
(no seat refused), and ``config/roster.json`` names the same demo URL as before.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from conftest import PATIENCE, Gateway, wait_until
from panelist.metrics.offload import main
from panelist.metrics.home import open_home
from panelist.metrics.upkeep.demohost import DemoHost
from panelist.serve import make_dashboard
from panelist.suite import demo as suite_demo

ROOT = Path(__file__).resolve().parent.parent

# every test here starts demo servers or the command in processes of their own
pytestmark = pytest.mark.slow
OFFLOAD = str(ROOT / "metrics" / "offload.py")
TASKS = ["claim-costs-no-tokens", "claim-wilson-all-useful"]


def clean_env() -> dict:
    return {k: v for k, v in os.environ.items() if not k.startswith("PANELIST_")}


def demo_url(home) -> str:
    roster = json.loads(home.file("roster.json").read_text())
    return roster["endpoints"]["demo"]["base_url"]


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1].split("/")[0])


def ask_demo(gw) -> tuple[int, dict]:
    return gw.post(
        "/v1/chat/completions",
        {"model": "bench/demo", "messages": [{"role": "user", "content": "Say hello"}]},
    )[:2]


def answers(gw) -> bool:
    """Whether the demo collection answers, every member seat with an answer."""
    status, body = ask_demo(gw)
    if status != 200:
        return False
    members = [s for s in body["bench"]["seats"] if s["seat"] == "member"]
    return bool(members) and all(s["status"] == "ok" for s in members)


def simulators() -> int:
    return sum(1 for t in threading.enumerate() if t.name == "sim-upstream")


def test_a_suite_demo_run_leaves_a_running_demo_server_answering(tmp_path):
    home = open_home(tmp_path / "data")
    with Gateway(make_dashboard(home, env={}, demo=True)) as dash:
        url = demo_url(home)
        assert answers(dash)
        done = subprocess.run(
            [
                sys.executable,
                OFFLOAD,
                "suite",
                "run",
                "--demo",
                "--data",
                str(home.root),
                "--task",
                *TASKS,
                "--json",
            ],
            cwd=ROOT,
            env=clean_env(),
            capture_output=True,
            text=True,
            timeout=PATIENCE * 4,
        )
        assert done.returncode == 0, done.stderr
        run = json.loads(done.stdout)["run"]
        # every model of the demo roster is scripted (suite/demo.py's MODELS) and answers
        assert run["scored"] == len(TASKS) * len(suite_demo.MODELS) and run["failed"] == 0, run
        assert demo_url(home) == url  # the command rewired nothing the server uses
        status, body = ask_demo(dash)
        assert status == 200, body
        seats = [s for s in body["bench"]["seats"] if s["seat"] == "member"]
        assert [s["status"] for s in seats] == ["ok"] * 3, seats  # no connection refused


def test_a_suite_demo_run_first_hands_its_port_to_the_next_demo_server(tmp_path, capsys):
    home = open_home(tmp_path / "data")
    assert (
        main(["suite", "run", "--demo", "--data", str(home.root), "--task", *TASKS, "--json"]) == 0
    )
    capsys.readouterr()
    url = demo_url(home)
    assert simulators() == 0  # the run's simulators stopped with it
    with Gateway(make_dashboard(home, env={}, demo=True)) as dash:
        assert demo_url(home) == url  # the same port, served again
        assert answers(dash)


def test_two_demo_servers_share_one_simulator_and_the_second_takes_over(tmp_path):
    home = open_home(tmp_path / "data")
    first = Gateway(make_dashboard(home, env={}, demo=True))
    try:
        url = demo_url(home)
        with Gateway(make_dashboard(home, env={}, demo=True)) as second:
            assert demo_url(home) == url and simulators() == 1
            assert answers(second)
            first.close()
            # the first owner is gone: the second serves the demo on the same port
            assert wait_until(lambda: simulators() == 1)
            assert wait_until(lambda: answers(second))
            assert demo_url(home) == url
    finally:
        first.close()
    assert simulators() == 0


def test_a_killed_demo_server_is_taken_over_on_the_same_port(tmp_path):
    home = open_home(tmp_path / "data")
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "serve.py"), "--demo", "--port", "0", "--data", str(home.root)],
        cwd=ROOT,
        env=clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        said = proc.stdout.readline()
        assert said.startswith("panelist dashboard on "), (said, proc.stderr.read())
        url = demo_url(home)
        with Gateway(make_dashboard(home, env={}, demo=True)) as mine:
            assert simulators() == 0  # the subprocess serves the demo: none started here
            assert answers(mine)
            proc.send_signal(signal.SIGKILL)  # no clean close: the kernel frees its lock
            proc.wait(PATIENCE)
            assert wait_until(lambda: simulators() == 1)
            assert wait_until(lambda: answers(mine))
            assert demo_url(home) == url
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(PATIENCE)
        proc.stdout.close()
        proc.stderr.close()


def test_a_port_taken_meanwhile_moves_the_demo_and_says_so_in_the_roster(tmp_path):
    home = open_home(tmp_path / "data")
    host = DemoHost(home, watch=False)
    url = host.start()
    host.close()
    with socket.socket() as squatter:  # something else took the port while no demo ran
        squatter.bind(("127.0.0.1", port_of(url)))
        squatter.listen()
        with Gateway(make_dashboard(home, env={}, demo=True)) as dash:
            moved = demo_url(home)
            assert moved != url and answers(dash)
            record = json.loads(home.demo_sim.read_text())
            assert record["url"] == moved and record["pid"] == os.getpid()


def test_a_server_without_demo_keeps_serving_a_demo_its_roster_uses(tmp_path):
    home = open_home(tmp_path / "data")
    with Gateway(make_dashboard(home, env={}, demo=True)) as dash:
        url = demo_url(home)
        status, _, _ = dash.request("DELETE", "/api/models/sim-vision")
        assert status == 200
    assert simulators() == 0
    with Gateway(make_dashboard(home, env={})) as plain:  # no --demo: the roster still uses it
        assert wait_until(lambda: simulators() == 1)
        assert answers(plain) and demo_url(home) == url
        # only served: a model a person removed stays removed
        assert "sim-vision" not in json.loads(home.file("roster.json").read_text())["models"]
    with Gateway(make_dashboard(open_home(tmp_path / "other"), env={})):
        assert simulators() == 0  # a folder without the demo starts none
