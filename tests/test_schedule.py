"""Scheduled work: the gateway's own thread runs probes and catalog refreshes as
``config/schedule.json`` says; a restart neither repeats nor skips a run, ``log-only`` changes
nothing but says what it would change, ``off`` runs nothing, and closing joins the thread."""

import json
import threading
import time

import pytest

from conftest import PATIENCE, Gateway, read_jsonl, wait_until
from panelist.gateway import make_gateway
from panelist.metrics.panel.panel import Panels
from panelist.metrics.roster.catalog import Catalog
from panelist.metrics.cli.main import main
from panelist.metrics.errors import ConfigInvalid
from panelist.metrics.roster.roster import Roster
from panelist.metrics.upkeep.schedule import SETTINGS_EVERY, Book, Scheduler, settings

HOUR = 3600


def run(capsys, home, *argv):
    code = main([*argv, "--data", str(home.root)])
    out, err = capsys.readouterr()
    return code, out, err


def set_job(capsys, home, job, mode, every=HOUR):
    code, _, err = run(capsys, home, "schedule", "set", job, "--mode", mode, "--every", str(every))
    assert code == 0, err


def one_pass(home):
    """Start a gateway, let its scheduler make one pass over the jobs, close it."""
    with Gateway(make_gateway(home, env={})) as gw:
        assert gw.server.parts.schedule.wait_passes(1, PATIENCE)
    assert not gw.server.parts.schedule._thread.is_alive()  # close joined it
    return gw


def runs(home):
    path = home.root / "runs" / "schedule.jsonl"
    return read_jsonl(path) if path.exists() else []


def schedule_threads():
    return [t for t in threading.enumerate() if t.name == "schedule"]


def test_a_restart_neither_repeats_nor_skips_a_run(capsys, home, sim):
    sim.script("fast", window=64000)
    set_job(capsys, home, "catalog_refresh", "run")
    one_pass(home)  # never ran: due at once
    assert [(r["job"], r["mode"], r["status"]) for r in runs(home)] == [
        ("catalog_refresh", "run", "ok")
    ]
    assert Catalog(home).stored_facts("sim", "fast")["context"]["value"] == 64000
    one_pass(home)  # the next run is an hour away: a restart does not repeat it
    assert len(runs(home)) == 1
    # the hour passed while no server was up: the next start runs it, once
    path = home.root / "runs" / "schedule.json"
    state = json.loads(path.read_text())
    state["catalog_refresh"]["next"] -= 2 * HOUR
    path.write_text(json.dumps(state))
    one_pass(home)
    one_pass(home)
    assert [r["job"] for r in runs(home)] == ["catalog_refresh", "catalog_refresh"]
    assert not schedule_threads()


def test_log_only_says_what_would_change_and_changes_nothing(capsys, home, sim):
    home.file("gateway.json").write_text(json.dumps({"retire_after": 1}))
    sim.script("fast", fail="auth")
    sim.script("mid", window=64000)
    set_job(capsys, home, "probe", "log-only")
    set_job(capsys, home, "catalog_refresh", "log-only")
    one_pass(home)
    assert sorted((r["job"], r["mode"], r["status"]) for r in runs(home)) == [
        ("catalog_refresh", "log-only", "ok"),
        ("probe", "log-only", "ok"),
    ]
    # nothing changed: no probe lines, nobody retired, no fact stored
    evidence = home.gateway_runs / "evidence.jsonl"
    assert not evidence.exists() or not [r for r in read_jsonl(evidence) if r["kind"] == "probe"]
    assert not Roster(home).view().models["fast"].retired
    assert Catalog(home).stored() == {}
    # ... but it was said, as alerts
    said = {a["job"]: a for a in read_jsonl(home.root / "runs" / "alerts.jsonl")}
    assert set(said) == {"probe", "catalog_refresh"}
    assert said["probe"]["would"] == {"fast": "would_retire"}
    assert "would retire fast" in said["probe"]["message"]
    assert {"endpoint": "sim", "served": "mid", "fact": "context", "value": 64000} in said[
        "catalog_refresh"
    ]["would_fill"]
    assert "mid context" in said["catalog_refresh"]["message"]


def test_a_probe_job_in_run_mode_retires(capsys, home, sim):
    home.file("gateway.json").write_text(json.dumps({"retire_after": 1}))
    sim.script("fast", fail="auth")
    set_job(capsys, home, "probe", "run")
    one_pass(home)
    [line] = runs(home)
    assert (line["job"], line["mode"], line["did"]) == ("probe", "run", {"fast": "retired"})
    assert Roster(home).view().models["fast"].retired


@pytest.mark.parametrize("explicit", [False, True])
def test_off_runs_nothing(capsys, home, sim, explicit):
    if explicit:
        set_job(capsys, home, "probe", "off", 1)
        set_job(capsys, home, "catalog_refresh", "off", 1)
    one_pass(home)
    assert runs(home) == [] and not (home.root / "runs" / "schedule.json").exists()
    assert sim.count("fast") == 0


def test_two_claims_of_one_due_time_give_one_run(folder):
    a, b = Book(folder), Book(folder)
    assert a.claim("probe", HOUR, 1000.0) is True
    assert b.claim("probe", HOUR, 1000.0) is False
    assert b.claim("probe", HOUR, 1000.0 + HOUR) is True


def test_show_and_bad_settings_say_what_to_do(capsys, folder):
    code, out, err = run(capsys, folder, "schedule", "set", "probe", "--mode", "sometimes")
    assert code != 0 and "--mode must be one of off, log-only, run" in err
    code, out, err = run(capsys, folder, "schedule", "set", "probe", "--every", "0")
    assert code != 0 and "--every" in err
    code, out, err = run(capsys, folder, "schedule", "set", "nightly", "--mode", "run")
    assert code != 0 and "unknown job 'nightly'" in err
    set_job(capsys, folder, "probe", "log-only", 600)
    code, out, err = run(capsys, folder, "schedule", "show", "--json")
    assert code == 0, err
    rows = {r["job"]: r for r in json.loads(out)}
    assert rows["probe"] == {"job": "probe", "mode": "log-only", "every": 600, "next": "due now"}
    assert rows["catalog_refresh"]["mode"] == "off"
    # a hand-edited file is refused when the server starts, naming the field
    folder.file("schedule.json").write_text(
        json.dumps({"jobs": {"probe": {"mode": "run", "every": "hourly"}}})
    )
    with pytest.raises(ConfigInvalid, match="jobs.probe.every"):
        make_gateway(folder, env={})
    assert not schedule_threads()


class FakeClock:
    """A clock that moves only when the test moves it (``advance``): the scheduler's waits end
    at once when their deadline is passed, and no test waits on real time."""

    def __init__(self, start: float):
        self.t = start
        self._moved = threading.Condition()

    def now(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        with self._moved:
            self.t += seconds
            self._moved.notify_all()

    def wait(self, event: threading.Event, until: float) -> bool:
        with self._moved:
            while not event.is_set() and self.t < until:
                # a set Event cannot notify this condition, so close is seen within 50 ms
                self._moved.wait(0.05)
        return event.is_set()


def tick(sched, clock):
    """Move the clock past the scheduler's longest wait and let its next pass finish."""
    done = sched.passes
    clock.advance(SETTINGS_EVERY)
    assert sched.wait_passes(done + 1, PATIENCE)


def test_a_setting_changed_while_the_server_runs_is_taken_up(capsys, home, sim):
    """The scheduler a server runs (here over the server's panels, on a clock the test moves)
    takes up each edit of its settings at its next look, without a restart."""
    sim.script("fast", window=64000)
    clock = FakeClock(time.time())
    panels = Panels(home)
    sched = Scheduler(home, panels, jobs=settings(home), clock=clock).start()
    try:
        assert sched.wait_passes(1, PATIENCE)
        assert runs(home) == []
        set_job(capsys, home, "catalog_refresh", "run")  # no restart
        tick(sched, clock)
        assert len(runs(home)) == 1
        assert Catalog(home).stored_facts("sim", "fast")["context"]["value"] == 64000
        # an interval shortened after a run: due at the last run plus the new interval
        set_job(capsys, home, "catalog_refresh", "run", every=1)
        tick(sched, clock)
        assert len(runs(home)) >= 2
        # a broken edit keeps the last good settings and says so once
        home.file("schedule.json").write_text("{broken")
        done = len(runs(home))
        tick(sched, clock)
        tick(sched, clock)
        assert len(runs(home)) >= done + 2
        said = [
            a for a in read_jsonl(home.root / "runs" / "alerts.jsonl") if a["kind"] == "schedule"
        ]
        assert len(said) == 1 and said[0]["subject"] == "settings"
        assert "schedule.json is not valid JSON" in said[0]["message"]
        set_job_off = {"jobs": {"catalog_refresh": {"mode": "off"}}}
        home.file("schedule.json").write_text(json.dumps(set_job_off))
        tick(sched, clock)
        tick(sched, clock)
        stopped = len(runs(home))
        tick(sched, clock)
        tick(sched, clock)
        assert len(runs(home)) == stopped
    finally:
        sched.close()
        panels.close()
    assert not schedule_threads()


def test_a_server_built_and_never_served_runs_no_job(capsys, home, sim):
    set_job(capsys, home, "catalog_refresh", "run")
    server = make_gateway(home, env={})
    server.close()
    assert runs(home) == [] and not schedule_threads()


def test_closing_the_server_cuts_a_scheduled_probe_and_logs_nothing_of_it(capsys, home, sim):
    sim.script("fast", fail="hang")  # the first model probed never answers
    set_job(capsys, home, "probe", "run")
    gw = Gateway(make_gateway(home, env={}))
    try:
        assert wait_until(lambda: sim.count("fast") >= 1)  # the probe is in flight
    finally:
        gw.close()
    assert not schedule_threads()
    evidence = home.gateway_runs / "evidence.jsonl"
    probes = [r for r in read_jsonl(evidence) if r["kind"] == "probe"] if evidence.exists() else []
    assert probes == [], "a probe cut by the close says nothing about the model"
    assert sim.count("mid") == 0  # and the models after it were not probed
    [line] = runs(home)
    assert (line["job"], line["status"], line["probed"]) == ("probe", "ok", 0)
