"""Admission: calls at once and a minute per endpoint (and model), across processes on one data
folder; a learned Retry-After pauses an endpoint for everyone; waits end on cancel; the limits are
set with `panelist endpoint limit` / `model limit`.

The rate tests shorten the window an ``rpm`` counts over (``window=``, the same in every process)
so they take seconds; the rule checked is the same: admissions in any window never exceed rpm."""

import json
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from admission_worker import append, bump, calls
from conftest import PATIENCE, read_jsonl, wait_until
from panelist.metrics.upstream.admission import SEND_MARGIN, Admission
from panelist.metrics.cli.main import main
from panelist.metrics.errors import AtLimit, Cancelled, ConfigInvalid, NotFound
from panelist.metrics.home import open_home
from panelist.metrics.roster.roster import Roster
from panelist.metrics.wire.errors import status_of

WORKER = Path(__file__).resolve().parent / "admission_worker.py"


@pytest.fixture()
def folder(tmp_path):
    """A data folder with endpoint ``ep`` serving ``m`` and ``n``, and an unlimited ``free``."""
    home = open_home(tmp_path / "data")
    roster = Roster(home)
    roster.add_endpoint("ep", "http://127.0.0.1:9/v1")
    roster.add_endpoint("free", "http://127.0.0.1:9/v1")
    roster.add_model("m", "ep")
    roster.add_model("n", "ep")
    roster.add_model("f", "free")
    return home


@pytest.fixture()
def admissions(folder):
    """Builds ``Admission`` objects on the folder and closes them after the test."""
    made = []

    def make(**kw):
        made.append(Admission(folder, **kw))
        return made[-1]

    yield make
    for a in made:
        a.close()


def limit(home, kind="endpoint", name="ep", **limits):
    Roster(home).set_limits(kind, name, limits)


def in_thread(target, *args):
    """Run ``target`` on a thread; ``.error`` holds what it raised, ``.join()`` waits."""
    box = threading.Thread(target=lambda: _catch(box, target, *args))
    box.error = None
    box.start()
    return box


def _catch(box, target, *args):
    try:
        target(*args)
    except BaseException as exc:
        box.error = exc


def spans_a_window(times, rpm, window):
    """Whether every rpm + 1 consecutive admissions span at least a window: no window holds more
    than rpm of them."""
    times = sorted(times)
    return all(times[i + rpm] - times[i] >= window for i in range(len(times) - rpm))


def run_worker(*args):
    return subprocess.Popen(
        [sys.executable, str(WORKER), *map(str, args)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


# -- concurrency --------------------------------------------------------------------------------
def test_max_concurrent_is_held_within_a_process(folder, admissions, tmp_path):
    limit(folder, max_concurrent=2)
    out = tmp_path / "calls.jsonl"
    calls(str(folder.root), "ep", "m", 8, 60.0, out, "here")
    records = read_jsonl(out)
    assert len(records) == 8
    assert max(r["running"] for r in records) <= 2
    slots = sorted(p.name for p in (folder.root / "runs" / "admission" / "ep").iterdir())
    assert slots == ["slot-0", "slot-1"]  # no rate log without an rpm, no pause


def started(out):
    """Whether the other process has made its first call (so the two overlap)."""
    return out.exists() and out.stat().st_size > 0


@pytest.mark.slow
def test_max_concurrent_is_held_across_two_processes(folder, tmp_path):
    limit(folder, max_concurrent=2)
    out = tmp_path / "calls.jsonl"
    other = run_worker("calls", folder.root, "ep", "m", 6, 60, out, "there", 0.1)
    try:
        assert wait_until(lambda: started(out))
        calls(str(folder.root), "ep", "m", 6, 60.0, out, "here", 0.1)
    finally:
        assert other.wait(PATIENCE) == 0
    records = read_jsonl(out)
    assert sorted({r["tag"] for r in records}) == ["here", "there"] and len(records) == 12
    assert max(r["running"] for r in records) <= 2


@pytest.mark.slow
def test_a_killed_process_gives_its_slot_back(folder, admissions):
    limit(folder, max_concurrent=1)
    mine = admissions()
    other = run_worker("hold", folder.root, "ep", "m")
    try:
        assert other.stdout.readline().strip() == "held"
        assert not mine.has_room("ep", "m")
        with pytest.raises(AtLimit) as refused:
            with mine.slot("ep", "m", wait=0):
                pass
        assert "endpoint 'ep' is at its limit of 1 call(s) at once" in refused.value.message
        assert status_of(refused.value) == 503 and refused.value.headers["Retry-After"] == "1"
    finally:
        other.send_signal(signal.SIGKILL)
        other.wait(PATIENCE)
        other.stdin.close()
        other.stdout.close()
    with mine.slot("ep", "m", wait=PATIENCE) as admitted:
        assert admitted.endpoint == "ep" and admitted.model == "m"


def test_waiters_of_one_process_are_admitted_first_come_first_served(folder, admissions):
    limit(folder, max_concurrent=1)
    holder, mine = admissions(), admissions()
    order = []

    def call(name):
        with mine.slot("ep", "m", wait=PATIENCE):
            order.append(name)

    with holder.slot("ep", "m", wait=0):
        threads = []
        for i, name in enumerate("abc", 1):
            threads.append(in_thread(call, name))
            assert wait_until(lambda: mine.waiting("ep") == i)
    for t in threads:
        t.join()
        assert t.error is None
    assert order == ["a", "b", "c"]


def test_a_model_limit_holds_that_model_only(folder, admissions):
    limit(folder, "model", "m", max_concurrent=1)
    first, second = admissions(), admissions()
    with first.slot("ep", "m", wait=0):
        assert not second.has_room("ep", "m")
        with pytest.raises(AtLimit, match="model 'm' is at its limit"):
            with second.slot("ep", "m", wait=0):
                pass
        with second.slot("ep", "n", wait=0) as admitted:  # its endpoint has no limit
            assert admitted.waited >= 0
    assert (folder.root / "runs" / "admission" / "ep" / "models" / "m" / "slot-0").exists()


def test_an_unlimited_endpoint_touches_no_file(folder, admissions):
    adm = admissions()
    with adm.slot("free", "f", wait=0):
        assert adm.has_room("free", "f")
    assert adm.pause("free", 30, "429") is False
    assert not (folder.root / "runs" / "admission").exists()


# -- calls a minute -------------------------------------------------------------------------------
@pytest.mark.slow
def test_rpm_is_never_exceeded_in_any_window_across_two_processes(folder, tmp_path):
    limit(folder, rpm=3)
    window = 1.0
    out = tmp_path / "calls.jsonl"
    other = run_worker("calls", folder.root, "ep", "m", 4, window, out, "there")
    try:
        assert wait_until(lambda: started(out))
        calls(str(folder.root), "ep", "m", 4, window, out, "here")
    finally:
        assert other.wait(PATIENCE) == 0
    records = read_jsonl(out)
    assert sorted({r["tag"] for r in records}) == ["here", "there"] and len(records) == 8
    times = sorted(r["at"] for r in records)
    # the 4th call waited for the 1st to leave the window, the 7th for the 4th
    assert times[3] - times[0] >= window and times[6] - times[3] >= window
    assert spans_a_window(times, 3, window)


def test_a_call_that_cannot_fit_in_its_wait_is_refused_at_once(folder, admissions):
    limit(folder, rpm=1)
    adm = admissions(window=600.0)
    with adm.slot("ep", "m", wait=0):
        pass
    assert not adm.has_room("ep", "m")
    with pytest.raises(AtLimit) as refused:
        with adm.slot("ep", "m", wait=PATIENCE):
            pass
    assert "endpoint 'ep' is at its limit of 1 call(s) a minute" in refused.value.message
    # the window and the margin for sending (SEND_MARGIN), less the moment that passed
    span = 600 * (1 + SEND_MARGIN)
    assert span - 10 < refused.value.retry_after <= span


def test_a_changed_rpm_applies_to_the_calls_already_made(folder, admissions):
    limit(folder, rpm=2)
    adm = admissions(window=600.0)
    for _ in range(2):
        with adm.slot("ep", "m", wait=0):
            pass
    assert not adm.has_room("ep", "m")
    limit(folder, rpm=3)
    assert adm.has_room("ep", "m")
    limit(folder, rpm=1)
    assert not adm.has_room("ep", "m")
    limit(folder, rpm=3)  # lowering it forgot no call: one more fits, as before
    with adm.slot("ep", "m", wait=0):
        pass
    assert not adm.has_room("ep", "m")


# -- pauses and cancel ---------------------------------------------------------------------------
def test_a_retry_after_pause_is_seen_by_another_admission(folder, admissions):
    limit(folder, max_concurrent=4)
    learner, other = admissions(), admissions()
    assert other.has_room("ep", "m")
    assert learner.pause("ep", 600, "rate limited by the upstream (429)") is True
    assert learner.pause("ep", 5, "a shorter one") is True  # never shortens it
    assert not other.has_room("ep", "m")
    with pytest.raises(AtLimit) as refused:
        with other.slot("ep", "m", wait=PATIENCE):
            pass
    assert "endpoint 'ep' is at its limit: paused for" in refused.value.message
    assert "rate limited by the upstream (429)" in refused.value.message
    assert 590 < refused.value.retry_after <= 600
    stored = json.loads((folder.root / "runs" / "admission" / "ep" / "pause.json").read_text())
    assert stored["why"] == "rate limited by the upstream (429)" and stored["seconds"] == 600
    assert other.resume("ep") is True and other.has_room("ep", "m")


def test_a_short_pause_is_waited_out(folder, admissions):
    limit(folder, max_concurrent=4)
    learner, other = admissions(), admissions()
    learner.pause("ep", 0.3, "429")
    until = json.loads((folder.root / "runs" / "admission" / "ep" / "pause.json").read_text())[
        "until"
    ]
    with other.slot("ep", "m", wait=PATIENCE) as admitted:
        assert admitted.at >= until


def test_cancel_ends_a_wait_for_a_slot(folder, admissions):
    limit(folder, max_concurrent=1)
    holder, waiter = admissions(), admissions()
    cancel = threading.Event()

    def wait_for_slot():
        with waiter.slot("ep", "m", wait=PATIENCE, cancel=cancel):
            pass

    with holder.slot("ep", "m", wait=0):
        t = in_thread(wait_for_slot)
        assert wait_until(lambda: waiter.waiting("ep") == 1)
        cancel.set()
        t.join()
    assert isinstance(t.error, Cancelled) and "waiting for a slot" in t.error.message
    assert waiter.waiting("ep") == 0
    with waiter.slot("ep", "m", wait=0):  # it holds nothing it was waiting for
        pass


def test_cancel_ends_a_wait_for_the_rate_window(folder, admissions):
    limit(folder, rpm=1)
    adm = admissions(window=3600.0)
    with adm.slot("ep", "m", wait=0):
        pass
    cancel = threading.Event()

    def wait_for_window():
        with adm.slot("ep", "m", wait=7200, cancel=cancel):
            pass

    t = in_thread(wait_for_window)
    assert wait_until(lambda: adm.waiting("ep") == 1)
    cancel.set()
    t.join()
    assert isinstance(t.error, Cancelled)


# -- the limits on the roster and the CLI ---------------------------------------------------------
@pytest.mark.parametrize(
    "changes, fragment",
    [
        ({"rpm": 0}, "rpm must be a whole number of 1 or more, got 0"),
        ({"max_concurrent": -2}, "max_concurrent must be a whole number of 1 or more"),
        ({"max_concurrent": 2.5}, "max_concurrent must be a whole number"),
        ({"rpm": True}, "rpm must be a whole number"),
        ({"burst": 3}, "unknown limit(s) burst"),
    ],
)
def test_limits_are_validated_on_write(folder, changes, fragment):
    with pytest.raises(ConfigInvalid) as refused:
        Roster(folder).set_limits("endpoint", "ep", changes)
    assert fragment in refused.value.message
    assert not Roster(folder).view().endpoint_limits


def test_limits_survive_re_adding_their_endpoint_and_model(folder):
    roster = Roster(folder)
    roster.set_limits("endpoint", "ep", {"rpm": 60, "max_concurrent": 4})
    roster.set_limits("model", "m", {"rpm": 10})
    roster.add_endpoint("ep", "http://127.0.0.1:10/v1")
    roster.add_model("m", "ep", context=8000)
    view = roster.view()
    assert view.endpoint_limits["ep"].public() == {"max_concurrent": 4, "rpm": 60}
    assert view.model_limits["m"].public() == {"max_concurrent": None, "rpm": 10}
    with pytest.raises(NotFound, match="unknown model 'nobody'"):
        roster.set_limits("model", "nobody", {"rpm": 1})


def test_endpoint_limit_command_sets_shows_and_clears(folder, admissions, capsys):
    d = str(folder.root)
    assert (
        main(["endpoint", "limit", "ep", "--rpm", "60", "--max-concurrent", "4", "--data", d]) == 0
    )
    assert "endpoint ep: at most 4 call(s) at once, 60 call(s) a minute" in capsys.readouterr().out
    change = read_jsonl(folder.file("changes.jsonl"))[-1]
    assert change["what"] == "endpoint ep" and change["by"] == "cli"
    assert change["new"]["rpm"] == 60 and change["new"]["max_concurrent"] == 4
    assert "rpm" not in change["old"]
    admissions().pause("ep", 600, "429 from upstream")
    assert main(["endpoint", "limit", "ep", "--data", d, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["endpoint"] == "ep" and shown["rpm"] == 60 and shown["max_concurrent"] == 4
    assert shown["running"] == 0 and shown["paused"]["why"] == "429 from upstream"
    assert main(["endpoint", "limit", "ep", "--rpm", "0", "--data", d]) == 1
    assert "rpm must be a whole number of 1 or more" in capsys.readouterr().err
    assert main(["endpoint", "limit", "nope", "--rpm", "5", "--data", d]) == 1
    assert "unknown endpoint 'nope'" in capsys.readouterr().err
    assert main(["endpoint", "limit", "ep", "--clear", "--data", d]) == 0
    assert "endpoint ep: no limit" in capsys.readouterr().out
    assert not Roster(folder).view().endpoint_limits
    assert not (folder.root / "runs" / "admission" / "ep" / "pause.json").exists()
    assert main(["model", "limit", "m", "--max-concurrent", "2", "--data", d]) == 0
    assert "model m: at most 2 call(s) at once" in capsys.readouterr().out
    assert Roster(folder).view().model_limits["m"].max_concurrent == 2


def test_the_shared_counter_of_the_worker_counts(tmp_path):
    # the cross-process tests trust this counter: it must add and subtract exactly
    path = tmp_path / "n"
    assert [bump(path, +1), bump(path, +1), bump(path, -1)] == [1, 2, 1]
    append(tmp_path / "log", {"a": 1})
    assert read_jsonl(tmp_path / "log") == [{"a": 1}]
