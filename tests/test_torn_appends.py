"""A writer that dies in the middle of a big append: its torn line is never read, the next append
cuts it off, and whoever follows the log reads on as if it had never been written.

The tears are real ones. A child process appends a 16 MB record and is killed mid-write: by
SIGKILL as soon as the file grows (how the kernel leaves such a write: the chunks it copied stay,
the rest never comes), or, to tear it at a known byte every time, by the file size limit
(``RLIMIT_FSIZE``): the kernel cuts the write short there, and SIGXFSZ ends the process when it
asks to write the rest.
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import PATIENCE
from panelist.metrics.ledger.ledger import Ledger
from panelist.metrics.store import jsonl
from panelist.metrics.store.jsonl import Appender, Tail

ROOT = Path(__file__).resolve().parent.parent
BIG = 16 * 1024 * 1024  # the size of record that tore in the trial (12 to 18 MB)

# Appends one BIG record to argv[2] with the file size capped argv[3] bytes past its end: "die"
# restores SIGXFSZ's default action (Python ignores it), so the process dies mid-append;
# otherwise the write fails with EFBIG and the process lives on to tell what it saw.
CUT_SHORT = (
    r"""
import json, os, resource, signal, sys
sys.path.insert(0, sys.argv[1]); import _bootstrap  # noqa
from panelist.metrics.store.jsonl import Appender
path, keep, how = sys.argv[2], int(sys.argv[3]), sys.argv[4]
log = Appender(path)
resource.setrlimit(resource.RLIMIT_CORE, (0, resource.getrlimit(resource.RLIMIT_CORE)[1]))
if how == "die":
    signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
resource.setrlimit(resource.RLIMIT_FSIZE, (os.path.getsize(path) + keep,
                                           resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
try:
    log.append({"kind": "big", "text": "x" * %d})
except OSError as exc:
    print(json.dumps({"errno": exc.errno, "size": os.path.getsize(path)}))
"""
    % BIG
)


def cut_short(path: Path, keep: int, how: str = "die") -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", CUT_SHORT, str(ROOT), str(path), str(keep), how],
        capture_output=True,
        text=True,
        timeout=3 * PATIENCE,
    )


def whole_lines(path: Path) -> list[dict]:
    """Every line of the file as strict JSONL wants it: each one a JSON object, ending in "\\n"."""
    data = path.read_bytes()
    assert data == b"" or data.endswith(b"\n"), "the file ends in a torn line"
    return [json.loads(line) for line in data.split(b"\n")[:-1]]


@pytest.mark.slow
def test_a_write_cut_short_by_a_signal_is_never_read_and_the_next_append_cuts_it_off(tmp_path):
    path = tmp_path / "log.jsonl"
    log = Appender(path)
    try:
        log.append({"n": 1})
        first = path.stat().st_size
        following = Tail(path)
        assert [r for _, r in following.read()] == [{"n": 1}]

        done = cut_short(path, 3 * 1024 * 1024)
        assert done.returncode == -signal.SIGXFSZ, done.stderr
        torn = path.read_bytes()[first:]
        assert len(torn) == 3 * 1024 * 1024 and b"\n" not in torn  # a real tear, 3 MB of it
        assert torn.startswith(b'{"kind":"big","text":"xxx')

        # no reader sees it: not the follower, not a new one, not one reading backwards
        assert list(following.read()) == [] and following.offset == first
        assert [r for _, r in Tail(path).read()] == [{"n": 1}]
        assert list(jsonl.backward(path)) == [{"n": 1}]

        # the next append cuts it off: the file holds whole lines only, the new one right after
        assert log.append({"n": 2}) == first
        assert whole_lines(path) == [{"n": 1}, {"n": 2}]
        assert list(following.read()) == [(first, {"n": 2})]
        assert jsonl.read_line(path, first) == {"n": 2}
        assert list(jsonl.backward(path)) == [{"n": 2}, {"n": 1}]
    finally:
        log.close()


@pytest.mark.slow
def test_a_write_that_fails_midway_takes_back_its_torn_line_at_once(tmp_path):
    path = tmp_path / "log.jsonl"
    log = Appender(path)
    try:
        log.append({"n": 1})
        first = path.stat().st_size
        done = cut_short(path, 1024 * 1024, how="fail")  # EFBIG: the process lives on
        assert done.returncode == 0, done.stderr
        seen = json.loads(done.stdout)
        # the caller was told, and the part that made it to the file was taken back before
        assert (seen["errno"], seen["size"]) == (27, first)
        assert log.append({"n": 2}) == first
        assert whole_lines(path) == [{"n": 1}, {"n": 2}]
    finally:
        log.close()


def test_a_follower_reading_a_torn_tail_as_it_is_cut_off_misses_nothing(tmp_path):
    path = tmp_path / "log.jsonl"
    log = Appender(path)
    try:
        log.append({"n": 1})
        first = path.stat().st_size
        with open(path, "ab") as f:  # a dead writer's torn tail, longer than any read buffer
            f.write(b'{"n":"' + b"t" * 200_000)
        follower = Tail(path)
        reading = follower.read()
        assert next(reading) == (0, {"n": 1})  # paused with the torn tail partly buffered
        # meanwhile another writer cuts the tail off and appends over it
        assert log.append({"n": 2, "pad": "p" * 100_000}) == first
        assert list(reading) == []  # what it read of the torn tail it did not take for a line
        assert [(o, r["n"]) for o, r in follower.read()] == [(first, 2)]
    finally:
        log.close()


def seat(ledger: Ledger, alias: str) -> str:
    pid = ledger.new_panel()
    call = f"{pid}.member1"
    ledger.record_seat(
        {
            "call": call,
            "panel": pid,
            "alias": alias,
            "seat": "member",
            "shape": "general",
            "seated": 1000.0,
            "status": "ok",
            "seconds": 0.1,
            "tokens": None,
            "error": None,
            "key": "local",
        }
    )
    ledger.record_panel(
        {
            "panel": pid,
            "shape": "general",
            "key": "local",
            "seats": [{"call": call, "alias": alias, "seat": "member", "status": "ok"}],
        }
    )
    return call


# A ledger's process writing a big verdict note to evidence.jsonl, killed (SIGXFSZ) mid-write.
VOTER = (
    r"""
import os, resource, signal, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1]); import _bootstrap  # noqa
from panelist.metrics.ledger.ledger import Ledger
ledger = Ledger(Path(sys.argv[2]))
evidence = ledger.evidence_path
resource.setrlimit(resource.RLIMIT_CORE, (0, resource.getrlimit(resource.RLIMIT_CORE)[1]))
signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
resource.setrlimit(resource.RLIMIT_FSIZE, (os.path.getsize(evidence) + 2 * 1024 * 1024,
                                           resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
ledger.record_verdict(sys.argv[3], useful=True, note="n" * %d)
"""
    % BIG
)


@pytest.mark.slow
def test_the_ledger_index_follows_on_past_a_verdict_torn_by_a_crash(tmp_path):
    runs = tmp_path / "runs"
    with Ledger(runs) as ledger:
        call = seat(ledger, "sim-a")
        before = runs.joinpath("evidence.jsonl").stat().st_size
        done = subprocess.run(
            [sys.executable, "-c", VOTER, str(ROOT), str(runs), call],
            capture_output=True,
            text=True,
            timeout=3 * PATIENCE,
        )
        assert done.returncode == -signal.SIGXFSZ, done.stderr
        assert runs.joinpath("evidence.jsonl").stat().st_size == before + 2 * 1024 * 1024

        ledger.refresh()  # the torn verdict is not counted, and the follower is not stuck
        assert ledger.states(["sim-a"], "general")["sim-a"].useful == 0
        assert ledger.call(call)["verdict"] is None
        later = seat(ledger, "sim-b")
        got = ledger.record_verdict(call, useful=False, note="checked")
        assert got["written"] and not got["replaced"]
        assert ledger.record_verdict(later, useful=True)["written"]
        st = ledger.states(["sim-a", "sim-b"], "general")
        assert (st["sim-a"].not_useful, st["sim-a"].useful, st["sim-b"].useful) == (1, 0, 1)
    lines = whole_lines(runs / "evidence.jsonl")
    assert [r.get("note") for r in lines if r["kind"] == "verdict"] == ["checked", ""]
    (runs / "index.json").unlink()
    with Ledger(runs) as fresh:  # a replay from the start agrees
        assert fresh.states(["sim-a", "sim-b"], "general") == st
        assert fresh.call(call)["verdict"]["note"] == "checked"


def grown(path: Path, size: int, proc: subprocess.Popen) -> bool:
    """Wait until ``path`` is longer than ``size`` (a write is under way); False if ``proc``
    ended first or it never grew. Polled without a pause: a 16 MB write lasts milliseconds."""
    end = time.monotonic() + 3 * PATIENCE
    while time.monotonic() < end and proc.poll() is None:
        if path.stat().st_size > size:
            return True
    return False


# A gateway's ledger logging panels whose prompt is BIG, one after another, until it is killed.
PANELS = (
    r"""
import sys
from pathlib import Path
sys.path.insert(0, sys.argv[1]); import _bootstrap  # noqa
from panelist.metrics.ledger.ledger import Ledger
ledger = Ledger(Path(sys.argv[2]))
prompt = "user: " + "p" * %d
while True:
    ledger.record_panel({"panel": ledger.new_panel(), "shape": "general", "key": "local",
                         "prompt": prompt, "seats": []})
"""
    % BIG
)


@pytest.mark.slow
def test_a_panel_line_torn_by_sigkill_is_never_served_and_the_next_panel_is_whole(tmp_path):
    runs = tmp_path / "runs"
    calls = runs / "calls.jsonl"
    with Ledger(runs) as ledger:
        kept = seat(ledger, "sim-a")
    size = calls.stat().st_size
    torn = b""
    for _ in range(10):  # SIGKILL lands mid-write nearly every time; try again when it did not
        proc = subprocess.Popen(
            [sys.executable, "-c", PANELS, str(ROOT), str(runs)], stderr=subprocess.PIPE
        )
        try:
            grew = grown(calls, size, proc)
            proc.send_signal(signal.SIGKILL)
        finally:
            _, err = proc.communicate(timeout=PATIENCE)
        assert grew and proc.returncode == -signal.SIGKILL, err
        data = calls.read_bytes()
        size = len(data)
        torn = data[data.rfind(b"\n") + 1 :]
        if torn:
            break
    assert torn.startswith(b'{"v":1,'), "no write was torn in ten kills"
    assert len(torn) < BIG

    with Ledger(runs) as ledger:
        panels = ledger.recent_panels(100)
        assert all(len(p["prompt"]) == len("user: ") + BIG for p in panels[:-1])
        assert panels[-1]["seats"][0]["call"] == kept
        call = seat(ledger, "sim-b")
        assert ledger.recent_panels(1)[0]["seats"][0]["call"] == call
        assert ledger.panel(call.split(".")[0])["seats"][0]["alias"] == "sim-b"
        assert ledger.call(kept)["alias"] == "sim-a"
    logged = whole_lines(calls)  # the torn line is gone, not closed off as a line of its own
    assert [p["panel"] for p in logged] == [p["panel"] for p in reversed(panels)] + [
        call.split(".")[0]
    ]
    assert os.path.getsize(calls) == size - len(torn) + len(jsonl.dumps(logged[-1]))
