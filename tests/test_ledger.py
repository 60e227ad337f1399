"""Ledger: real files in a temporary folder, real processes for the cross-process guarantees."""

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import PATIENCE, wait_until
from panelist.metrics import errors
from panelist.metrics.ledger.index import ModelState
from panelist.metrics.ledger.ledger import Ledger
from panelist.metrics.wire.errors import status_of

ROOT = Path(__file__).resolve().parent.parent
T0 = 1_750_000_000.0  # a fixed panel start time


def lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines()


def kinds(path: Path, kind: str) -> list[dict]:
    return [r for r in map(json.loads, lines(path)) if r.get("kind") == kind]


def seat(
    ledger: Ledger,
    panel: str,
    label: str,
    alias: str,
    shape: str = "general",
    *,
    status: str = "ok",
    key: str = "k1",
    seated: float = T0,
) -> str:
    call = f"{panel}.{label}"
    ledger.record_seat(
        {
            "call": call,
            "panel": panel,
            "alias": alias,
            "seat": label.rstrip("0123456789"),
            "shape": shape,
            "seated": seated,
            "status": status,
            "seconds": 1.5,
            "tokens": {"total": 10},
            "error": None if status == "ok" else "boom",
            "key": key,
        }
    )
    return call


def panel(
    ledger: Ledger,
    shape: str = "general",
    key: str = "k1",
    seats=(("member1", "sim-a"),),
    *,
    status: str = "ok",
    prompt: str = "why?",
    seated: float = T0,
) -> tuple[str, list]:
    """A whole panel: seat records, then its calls.jsonl line (seats without shape/key)."""
    pid = ledger.new_panel(seated)
    calls = [
        seat(ledger, pid, label, alias, shape, status=status, key=key, seated=seated)
        for label, alias in seats
    ]
    ledger.record_panel(
        {
            "panel": pid,
            "shape": shape,
            "key": key,
            "started": seated,
            "prompt": prompt,
            "seats": [
                {"call": c, "alias": a, "seat": lbl.rstrip("0123456789"), "status": status}
                for c, (lbl, a) in zip(calls, seats)
            ],
        }
    )
    return pid, calls


@pytest.fixture
def runs(tmp_path):
    return tmp_path / "runs" / "gateway"


# --------------------------------------------------------------------------- verdicts


def test_verdict_written_once_then_replaced(runs):
    with Ledger(runs) as ledger:
        pid, (call,) = panel(ledger, "review")
        assert pid.startswith("p") and call == f"{pid}.member1"

        first = ledger.record_verdict(call, useful=True, note="good", real=["a"], by="test")
        assert first["written"] and not first["replaced"]
        assert first["verdict"]["useful"] is True and first["verdict"]["note"] == "good"
        count = len(lines(runs / "evidence.jsonl"))

        again = ledger.record_verdict(call, useful=True, note="good", real=["a"], by="other")
        assert not again["written"] and not again["replaced"]
        assert again["verdict"]["by"] == "test"  # the verdict that stands
        assert len(lines(runs / "evidence.jsonl")) == count

        s = ledger.states(["sim-a"], "review")["sim-a"]
        assert (s.useful, s.not_useful) == (1, 0)

        # a different note is a different verdict, even with the same usefulness
        noted = ledger.record_verdict(call, useful=True, note="good, mostly", real=["a"])
        assert noted["written"] and noted["replaced"]
        s = ledger.states(["sim-a"], "review")["sim-a"]
        assert (s.useful, s.not_useful) == (1, 0)

        changed = ledger.record_verdict(call, useful=False, note="wrong", false=["a"])
        assert changed["written"] and changed["replaced"]
        s = ledger.states(["sim-a"], "review")["sim-a"]
        assert (s.useful, s.not_useful) == (0, 1)
        assert ledger.states(["sim-a"], "general")["sim-a"].not_useful == 0  # keyed by shape

        got = ledger.call(call)
        assert got["alias"] == "sim-a" and got["shape"] == "review" and got["panel"] == pid
        assert got["verdict"]["useful"] is False and got["verdict"]["false"] == ["a"]

        verdicts = kinds(runs / "evidence.jsonl", "verdict")
        assert len(verdicts) == 3
        for v in verdicts:
            assert v["v"] == 1 and v["ts"].endswith("Z") and len(v["ts"]) == 24
            assert (v["alias"], v["shape"]) == ("sim-a", "review")

        with pytest.raises(errors.NotFound) as exc:
            ledger.record_verdict("p20250101-999.member1", useful=True)
        assert "unknown call id 'p20250101-999.member1'" in exc.value.message
        assert status_of(exc.value) == 404
        assert ledger.call("p20250101-999.member1") is None
        assert ledger.call("nonsense") is None


def test_states(runs):
    with Ledger(runs) as ledger:
        assert ledger.states(["sim-a"], "general")["sim-a"] == ModelState(None, 0, 0, 0.0, None)

        panel(ledger, "general", seats=(("member1", "sim-a"), ("explorer1", "sim-b")), seated=T0)
        panel(ledger, "general", seats=(("member1", "sim-a"),), seated=T0 + 10)
        panel(ledger, "review", seats=(("member1", "sim-a"),), seated=T0 + 5)
        # an older panel's seat appended late does not move last_seated back
        panel(ledger, "general", seats=(("member1", "sim-a"),), seated=T0 - 100)

        st = ledger.states(["sim-a", "sim-b", "sim-c"], "general", now=T0)
        assert st["sim-a"].last_seated == T0 + 10
        assert st["sim-b"].last_seated == T0
        assert st["sim-c"].last_seated is None
        assert ledger.states(["sim-a"], "review")["sim-a"].last_seated == T0 + 5

        now = time.time()
        ledger.cool_down("sim-b", 60, "429 from upstream")
        later = time.time()
        st = ledger.states(["sim-a", "sim-b"], "general", now=now)
        assert st["sim-a"].cooling_until == 0.0
        assert now + 60 <= st["sim-b"].cooling_until <= later + 60  # 60 s from the call
        assert ledger.states(["sim-b"], "general", now=now + 120)["sim-b"].cooling_until == 0.0
        ledger.cool_down("sim-b", 0)  # the latest cooldown wins: this one ends it
        assert ledger.states(["sim-b"], "general")["sim-b"].cooling_until == 0.0

        assert ledger.learn_window("sim-c", 32000) is True
        assert ledger.learn_window("sim-c", 64000) is False  # only ever lowered
        assert ledger.learn_window("sim-c", 32000) is False
        assert ledger.learn_window("sim-c", 16000) is True
        assert ledger.states(["sim-c"], "review")["sim-c"].window == 16000
        assert len(kinds(runs / "evidence.jsonl", "window")) == 2
        with pytest.raises(errors.BadRequest):
            ledger.learn_window("sim-c", 0)

        calls = [
            c
            for p, cs in [panel(ledger, "general", seats=(("member1", "sim-d"),)) for _ in range(5)]
            for c in cs
        ]
        for i, call in enumerate(calls):
            ledger.record_verdict(call, useful=i < 3)
        st = ledger.states(["sim-d"], "general")["sim-d"]
        assert (st.useful, st.not_useful) == (3, 2)


def test_panel_ids_unique_across_threads(runs):
    with Ledger(runs) as ledger:
        got: list[str] = []

        def reserve():
            got.extend(ledger.new_panel(T0) for _ in range(200))

        threads = [threading.Thread(target=reserve) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(set(got)) == 1600
        strays = [p for p in got if not p.startswith("p20250615-")]
        assert not strays, f"panel ids not of the panel's day: {strays[:10]}"
        assert os.path.getsize(runs / "panels.idx") == 1600 * 8
        assert ledger.panel(got[0]) is None  # reserved, not finished


# --------------------------------------------------------------------------- processes

WRITER = r"""
import json, sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[1]); import _bootstrap  # noqa
from panelist.metrics.ledger.ledger import Ledger

runs, name, other, go = Path(sys.argv[2]), sys.argv[3], sys.argv[4], Path(sys.argv[5])
ledger = Ledger(runs, snapshot_every=700)
Path(sys.argv[6]).touch()   # ready: the race starts when every writer is
while not go.exists():
    time.sleep(0.001)
mine = []
for i in range(1000):
    pid = ledger.new_panel()
    seats = []
    for label in ("member1", "explorer1"):
        call = f"{pid}.{label}"
        ledger.record_seat({"call": call, "panel": pid, "alias": f"{name}-{label}",
                            "seat": label[:-1], "shape": "general", "seated": 1000.0 + i,
                            "status": "ok", "seconds": 0.1, "tokens": None, "error": None,
                            "key": name})
        seats.append({"call": call, "alias": f"{name}-{label}", "seat": label[:-1], "status": "ok"})
        mine.append(call)
    ledger.record_panel({"panel": pid, "shape": "general", "key": name, "seats": seats})
    if i % 10 == 0:
        ledger.record_verdict(seats[0]["call"], useful=(i % 20 == 0))
(runs / f"done-{name}").touch()
while not (runs / f"done-{other}").exists():
    time.sleep(0.001)
ledger.refresh()
st = ledger.states([f"{other}-member1", f"{other}-explorer1"], "general")
out = {"mine": mine, "other": {a: [s.last_seated, s.useful, s.not_useful] for a, s in st.items()},
       "pending_other": len(ledger.pending(key=other, limit=5000))}
ledger.close()
print(json.dumps(out))
"""


def spawn(script: str, *args) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", script, str(ROOT), *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(proc: subprocess.Popen) -> str:
    try:
        out, err = proc.communicate(timeout=3 * PATIENCE)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    assert proc.returncode == 0, err
    return out


def start_together(procs: list, ready: list[Path], go: Path) -> list[str]:
    """Let ``procs`` go at once, when each has said it is ready; their stdout, in order."""
    try:
        assert wait_until(
            lambda: all(r.exists() for r in ready) or any(p.poll() is not None for p in procs)
        ), "a process never got ready"
    finally:
        go.touch()  # also releases the ready ones if another failed, so none is left waiting
    return [finish(p) for p in procs]


@pytest.mark.slow
def test_two_processes_append_concurrently(runs, tmp_path):
    runs.mkdir(parents=True)
    go = tmp_path / "go"
    ready = [tmp_path / "ready-x", tmp_path / "ready-y"]
    procs = [
        spawn(WRITER, runs, "x", "y", go, ready[0]),
        spawn(WRITER, runs, "y", "x", go, ready[1]),
    ]
    results = dict(zip("xy", map(json.loads, start_together(procs, ready, go))))

    evidence = [json.loads(line) for line in lines(runs / "evidence.jsonl")]
    calls = [json.loads(line) for line in lines(runs / "calls.jsonl")]
    seats = [r for r in evidence if r["kind"] == "seat"]
    assert len(seats) == 4000 and len(calls) == 2000
    assert len(kinds(runs / "evidence.jsonl", "verdict")) == 200
    assert len({r["call"] for r in seats}) == 4000
    assert len({r["panel"] for r in calls}) == 2000
    assert os.path.getsize(runs / "panels.idx") == 2000 * 8

    for name, other in ("xy", "yx"):
        # each saw all of the other's seats and verdicts (1000 panels; a verdict every 10th)
        assert results[name]["other"][f"{other}-member1"] == [1999.0, 50, 50]
        assert results[name]["other"][f"{other}-explorer1"] == [1999.0, 0, 0]
        assert results[name]["pending_other"] == 2000 - 100
        assert len(results[name]["mine"]) == 2000

    with Ledger(runs) as ledger:
        assert ledger.from_snapshot
        for name in "xy":
            st = ledger.states([f"{name}-member1"], "general")[f"{name}-member1"]
            assert (st.useful, st.not_useful) == (50, 50)
        for r in calls:  # every slot points at its own line
            assert ledger.panel(r["panel"]) == r


VOTER = r"""
import json, sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[1]); import _bootstrap  # noqa
from panelist.metrics.ledger.ledger import Ledger

ledger = Ledger(Path(sys.argv[2]))
go = Path(sys.argv[4])
Path(sys.argv[5]).touch()   # ready: the race starts when every voter is
while not go.exists():
    pass
result = ledger.record_verdict(sys.argv[3], useful=True, note="same", real=["x"], by="race")
ledger.close()
print(json.dumps(result))
"""


@pytest.mark.slow
def test_same_verdict_from_two_processes_written_once(runs, tmp_path):
    with Ledger(runs) as ledger:
        calls = [panel(ledger)[1][0] for _ in range(3)]
    for round_, call in enumerate(calls):
        go = tmp_path / f"go{round_}"
        ready = [tmp_path / f"ready{round_}-{i}" for i in range(3)]
        procs = [spawn(VOTER, runs, call, go, r) for r in ready]
        results = [json.loads(out) for out in start_together(procs, ready, go)]
        assert sorted(r["written"] for r in results) == [False, False, True]
        notes = [r["verdict"]["note"] for r in results]
        assert notes == ["same"] * 3, f"a voter saw another verdict stand: {notes}"
    assert len(kinds(runs / "evidence.jsonl", "verdict")) == 3
    with Ledger(runs) as ledger:
        assert ledger.states(["sim-a"], "general")["sim-a"].useful == 3


# --------------------------------------------------------------------------- snapshot


def fill(ledger: Ledger) -> list[str]:
    calls = []
    for i in range(30):
        shape = ("general", "review")[i % 2]
        _, cs = panel(
            ledger,
            shape,
            key=f"k{i % 3}",
            seats=(("member1", f"sim-{'abc'[i % 3]}"), ("explorer1", "sim-d")),
            seated=T0 + i,
        )
        calls += cs
    for i, call in enumerate(calls[:20]):
        ledger.record_verdict(call, useful=i % 3 != 0, note=f"n{i}")
    ledger.record_verdict(calls[0], useful=True, note="changed")
    ledger.cool_down("sim-b", 3600)
    ledger.learn_window("sim-c", 8000)
    return calls


def answers(ledger: Ledger, calls: list[str]):
    aliases = ["sim-a", "sim-b", "sim-c", "sim-d"]
    return (
        {s: ledger.states(aliases, s, now=T0) for s in ("general", "review")},
        [ledger.call(c) for c in calls],
        ledger.pending(limit=100),
    )


def test_snapshot_load_and_rebuild(runs):
    with Ledger(runs) as ledger:
        calls = fill(ledger)
        before = answers(ledger, calls)
    records = len(lines(runs / "evidence.jsonl"))

    with Ledger(runs) as reopened:
        assert reopened.from_snapshot and reopened.replayed == 0
        assert answers(reopened, calls) == before

    (runs / "index.json").unlink()
    with Ledger(runs) as rebuilt:
        assert not rebuilt.from_snapshot and rebuilt.replayed == records
        assert answers(rebuilt, calls) == before
    assert (runs / "index.json").exists()  # a rebuild leaves a snapshot behind

    (runs / "index.json").write_text('{"v": 1, "ino": ')  # torn
    with Ledger(runs) as corrupt:
        assert not corrupt.from_snapshot and corrupt.replayed == records
        assert answers(corrupt, calls) == before

    # same content in a new file (another inode): the snapshot is not for this file
    copy = runs / "evidence.copy"
    copy.write_bytes((runs / "evidence.jsonl").read_bytes())
    os.replace(copy, runs / "evidence.jsonl")
    with Ledger(runs) as moved:
        assert not moved.from_snapshot and moved.replayed == records
        assert answers(moved, calls) == before


def test_snapshot_then_tail_and_periodic_snapshots(runs):
    with Ledger(runs) as ledger:
        calls = fill(ledger)
    with Ledger(runs, snapshot_every=10) as writer:
        with Ledger(runs) as reader:  # open while the writer appends: sees it through the tail
            assert reader.from_snapshot and reader.replayed == 0
            offset = json.loads((runs / "index.json").read_text())["offset"]
            for _ in range(12):
                panel(writer, seats=(("member1", "sim-a"),), seated=T0 + 500)
            writer.refresh()  # 12 records folded: past snapshot_every, so a snapshot is written
            assert json.loads((runs / "index.json").read_text())["offset"] > offset
            assert reader.states(["sim-a"], "general")["sim-a"].last_seated == T0 + 500
        # the writer has not closed (as after a crash): the next start replays only what the
        # snapshot missed
        panel(writer, seats=(("member1", "sim-e"),), seated=T0 + 600)
        with Ledger(runs) as again:
            assert again.from_snapshot and 1 <= again.replayed < 10
            assert again.states(["sim-e"], "general")["sim-e"].last_seated == T0 + 600
            assert again.call(calls[0])["verdict"]["note"] == "changed"


def test_evidence_replaced_under_a_running_ledger(runs):
    with Ledger(runs) as ledger:
        calls = fill(ledger)
        before = answers(ledger, calls)
        copy = runs / "evidence.copy"
        copy.write_bytes((runs / "evidence.jsonl").read_bytes())
        os.replace(copy, runs / "evidence.jsonl")
        assert answers(ledger, calls) == before  # re-read from 0, not counted twice


# --------------------------------------------------------------------------- torn lines


def test_torn_last_line_is_skipped(runs):
    with Ledger(runs) as ledger:
        _, (early,) = panel(ledger, seats=(("member1", "sim-a"),))
        with open(runs / "evidence.jsonl", "ab") as f:
            f.write(b'{"v":1,"kind":"seat","call":"p2025')  # a writer died mid-line
        with open(runs / "calls.jsonl", "ab") as f:
            f.write(b'{"v":1,"panel":"p2025')
        assert ledger.states(["sim-a"], "general")["sim-a"].last_seated == T0
        assert len(ledger.recent_panels(10)) == 1
        _, (late,) = panel(ledger, seats=(("member1", "sim-b"),), seated=T0 + 1)
        ledger.record_verdict(late, useful=True)
        ledger.record_verdict(early, useful=False)

        st = ledger.states(["sim-a", "sim-b"], "general")
        assert (st["sim-a"].last_seated, st["sim-a"].not_useful) == (T0, 1)
        assert (st["sim-b"].last_seated, st["sim-b"].useful) == (T0 + 1, 1)
        assert ledger.call(late)["verdict"]["useful"] is True
        assert [p["seats"][0]["call"] for p in ledger.recent_panels(10)] == [late, early]
    # the next append cut each torn line off: whole lines only, and a fresh replay agrees
    for name, torn in (("evidence.jsonl", b'"call":"p2025'), ("calls.jsonl", b'"panel":"p2025')):
        data = (runs / name).read_bytes()
        assert data.endswith(b"\n") and torn + b"\n" not in data and torn + b"{" not in data
        assert all(json.loads(line) for line in data.split(b"\n")[:-1])
    (runs / "index.json").unlink()
    with Ledger(runs) as fresh:
        assert fresh.states(["sim-a", "sim-b"], "general") == st
        assert fresh.call(early)["verdict"]["useful"] is False


# --------------------------------------------------------------------------- lookups


def test_old_call_found_through_panels_idx(runs):
    with Ledger(runs, recent_calls=10) as ledger:
        pid, (old, _) = panel(
            ledger, "review", key="alice", seats=(("member1", "sim-a"), ("explorer1", "sim-b"))
        )
        for _ in range(20):
            panel(ledger)
        assert old not in ledger._index.recent  # evicted: the lookup below must use panels.idx
        got = ledger.call(old)
        assert got["alias"] == "sim-a" and got["panel"] == pid
        assert (got["shape"], got["key"]) == ("review", "alice")  # from the panel's top level
        assert got["verdict"] is None

        result = ledger.record_verdict(old, useful=True, note="late")
        assert result["written"]
        assert ledger.states(["sim-a"], "review")["sim-a"].useful == 1
        assert ledger.call(old)["verdict"]["note"] == "late"
        assert ledger.panel(pid)["seats"][0]["call"] == old
        assert ledger.panel("p20250101-99999") is None
        assert ledger.panel(pid.replace("p2025", "p1999")) is None  # right slot, wrong panel
        assert ledger.call(f"{pid}.merger") is None


def test_recent_panels_and_pending(runs):
    with Ledger(runs) as ledger:
        made = []
        for i in range(120):  # ~1.2 kB lines: the backwards read crosses 64 kB blocks
            status = "error" if i % 5 == 4 else "ok"
            made.append(
                panel(
                    ledger,
                    key=f"k{i % 2}",
                    status=status,
                    prompt="x" * 1200 + str(i),
                    seats=(("member1", "sim-a"),),
                )
            )
        newest = [p for p, _ in reversed(made)]
        assert [r["panel"] for r in ledger.recent_panels(5)] == newest[:5]
        assert [r["panel"] for r in ledger.recent_panels(1000)] == newest
        assert ledger.recent_panels(0) == []

        ok_calls = [cs[0] for i, (_, cs) in enumerate(made) if i % 5 != 4]
        for call in ok_calls[:10]:
            ledger.record_verdict(call, useful=True)
        waiting = list(reversed(ok_calls[10:]))
        assert [r["call"] for r in ledger.pending(limit=1000)] == waiting
        assert [r["call"] for r in ledger.pending(limit=3)] == waiting[:3]
        mine = ledger.pending(key="k1", limit=1000)
        strays = [r for r in mine if r["key"] != "k1" or r["status"] != "ok"]
        assert mine and not strays, f"pending for k1 lists another key's or failed calls: {strays}"
        assert len(mine) + len(ledger.pending(key="k0", limit=1000)) == len(waiting)


def test_empty_folder(runs):
    with Ledger(runs) as ledger:
        assert ledger.recent_panels() == [] and ledger.pending() == []
        assert ledger.call("p20250101-0.member1") is None
        with pytest.raises(errors.BadRequest):
            ledger.record_panel({"panel": "p20250101-0"})  # never reserved
        with pytest.raises(errors.BadRequest):
            ledger.record_seat({"call": "x", "alias": "sim-a"})


def test_bulk_path_writes_the_same_lines(tmp_path):
    def normal(path: Path) -> list[dict]:
        return [{k: v for k, v in json.loads(line).items() if k != "ts"} for line in lines(path)]

    with Ledger(tmp_path / "one") as one, Ledger(tmp_path / "bulk") as bulk:
        pids = [one.new_panel(T0) for _ in range(3)]
        assert bulk.new_panels(3, T0) == pids
        seats = [
            {
                "call": f"{p}.member1",
                "panel": p,
                "alias": "sim-é",
                "seat": "member",
                "shape": "general",
                "seated": T0,
                "status": "ok",
                "seconds": 1.0,
                "tokens": None,
                "error": None,
                "key": "k",
            }
            for p in pids
        ]
        panels = [
            {"panel": p, "shape": "general", "seats": [{"call": f"{p}.member1"}]} for p in pids
        ]
        for s in seats:
            one.record_seat(s)
        for p in panels:
            one.record_panel(p)
        bulk.record_seats(seats)
        bulk.record_panels(panels)
        for name in ("evidence.jsonl", "calls.jsonl"):
            assert normal(tmp_path / "one" / name) == normal(tmp_path / "bulk" / name)
        assert (tmp_path / "one" / "panels.idx").read_bytes() == (
            tmp_path / "bulk" / "panels.idx"
        ).read_bytes()
        assert bulk.call(f"{pids[2]}.member1")["alias"] == "sim-é"
        assert {**bulk.panel(pids[1]), "ts": ""} == {**one.panel(pids[1]), "ts": ""}


def test_a_panel_s_whole_seat_lines_land_as_made_and_bad_ones_are_refused(runs):
    from panelist.metrics.seats import record as seatrecord
    from panelist.metrics.seats import SeatResult

    with Ledger(runs) as ledger:
        pid = ledger.new_panel(T0)
        result = SeatResult(
            call=f"{pid}.member1",
            seat="member",
            alias="sim-a",
            served="sim-a",
            status="ok",
            seconds=0.5,
            tokens={"total": 7},
        )
        made = seatrecord.line(
            result,
            "seat",
            answer=False,
            panel=pid,
            shape="general",
            seated=T0,
            key="k1",
            collection="bench/x",
        )
        ledger.record_seat_lines([made])
        (written,) = kinds(runs / "evidence.jsonl", "seat")
        assert written == made  # the line as made: no field dropped, none added
        assert ledger.call(f"{pid}.member1")["alias"] == "sim-a"
        assert ledger.states(["sim-a"], "general")["sim-a"].last_seated == T0
        for broken, why in (
            ({**made, "kind": "probe"}, "kind 'seat'"),
            ({k: v for k, v in made.items() if k != "seated"}, "'seated'"),
            ({**made, "alias": ""}, "'alias'"),
            ({**made, "shape": None}, "'shape'"),
        ):
            with pytest.raises(errors.BadRequest, match=why):
                ledger.record_seat_lines([made, broken])
        # a refused batch writes nothing of itself, not even its good lines
        assert len(kinds(runs / "evidence.jsonl", "seat")) == 1


def test_a_live_ledger_answers_as_a_replay_of_the_file_does(runs):
    """A gateway's seated, seat and delivered lines, with another writer's lines and other kinds
    between them, folded as they come: every query answers as a ledger that read the whole
    file at once does."""

    def view(ledger):
        return (
            ledger.states(["sim-a", "sim-b"], "general"),
            ledger.pending(limit=100),
            ledger.owed_count(),
            ledger.model_stats(),
            ledger.collection_stats(),
            ledger.usage("day", now=t0 + 100),
            ledger.buckets(now=t0 + 100),
        )

    t0 = time.time() - 60  # recent: the usage windows count these seats
    with Ledger(runs) as mine, Ledger(runs) as other:
        for i in range(6):
            pid = mine.new_panel(t0 + i)
            mine.record_seated(
                pid,
                "general",
                ["sim-a", "sim-b"],
                t0 + i,
                collection="bench/x",
                awaits_delivery=True,
            )
            if i % 2:  # another process's line between two of ours
                seat(other, other.new_panel(t0 + i), "member1", "sim-b", seated=t0 + i)
            if i == 3:  # another kind between two panels
                mine.cool_down("sim-b", 60, "rate limited")
            lines = [
                {
                    "v": 1,
                    "kind": "seat",
                    "ts": "",
                    "call": f"{pid}.member{n}",
                    "role": "member",
                    "alias": alias,
                    "status": "ok",
                    "tool_calls": [{"id": f"t-{i}"}],
                    "tokens": {"prompt": 3, "completion": 4},
                    "seconds": 0.5,
                    "panel": pid,
                    "shape": "general",
                    "seated": t0 + i,
                    "key": "k1",
                    "collection": "bench/x",
                }
                for n, alias in ((1, "sim-a"), (2, "sim-b"))
            ]
            mine.record_seat_lines(lines)
            mine.record_delivered(pid, "the reply", [f"t-{i}"])
            mine.refresh()
        with Ledger(runs) as fresh:  # replays the file
            assert view(mine) == view(fresh)
        # 12 delivered seats of ours, 3 of the other writer (no seating: owed at once)
        assert mine.owed_count() == 15 and mine.states(["sim-b"], "general")["sim-b"].cooling_until


def test_many_threads(runs):
    with Ledger(runs, snapshot_every=50) as ledger:  # snapshots get written while threads work
        st = work_in_threads(ledger)
    (runs / "index.json").unlink()
    with Ledger(runs) as fresh:
        assert fresh.states(list(st), "general") == st


def work_in_threads(ledger: Ledger) -> dict:
    def work(n: int):
        for i in range(100):
            _, (call,) = panel(ledger, seats=(("member1", f"sim-{n}"),))
            ledger.states([f"sim-{n}", "sim-0"], "general")
            ledger.record_verdict(call, useful=i % 4 != 0)
            ledger.learn_window("sim-0", 100_000 - n * 100 - i)
            ledger.call(call)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(3 * PATIENCE)
    assert not [t for t in threads if t.is_alive()], "a worker thread is still running"
    st = ledger.states([f"sim-{n}" for n in range(8)], "general")
    off = {
        a: (s.useful, s.not_useful) for a, s in st.items() if (s.useful, s.not_useful) != (75, 25)
    }
    assert not off, f"verdict counts other than (75, 25): {off}"
    assert st["sim-0"].window == 100_000 - 700 - 99
    assert len(ledger.pending(limit=10_000)) == 0
    return st
