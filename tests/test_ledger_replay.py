"""The ledger's queries give the same answers across a snapshot, a replay, a second ledger and
another process writing the folder; the gateway's panels fill them; the index file holds no more
than aggregates. The queries themselves are ``test_ledger_queries.py``."""

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ledgerkit import DAY, T0, everything, ok, panel
from ledgerkit import runs  # noqa: F401  (a fixture)
from panelist.metrics.ledger.ids import SLOT, panel_seq
from panelist.metrics.ledger.ledger import Ledger
from panelist.metrics.ledger.snapshot import SNAPSHOT_VERSION

ROOT = Path(__file__).resolve().parent.parent


# --------------------------------------------------------------------------- snapshot, replay


def busy_folder(ledger):
    """A log with every kind of record the queries fold."""
    calls = []
    for i in range(40):
        shape = ("general", "review", "vision")[i % 3]
        _, cs = panel(
            ledger,
            [
                ok("member1", f"sim-{'abc'[i % 3]}", 0.2 * (i + 1)),
                (
                    "member2",
                    "sim-d",
                    ("ok", "error", "empty")[i % 3],
                    3.0,
                    "timeout: slow" if i % 3 == 1 else "",
                ),
                ok("explorer1", f"sim-{'efg'[i % 3]}", 2.0),
            ],
            shape=shape,
            key=f"k{1 + i % 2}",
            collection=f"bench/c{i % 4}",
            seated=T0 - (i % 9) * DAY + i,
            finish=i % 7 != 3,
        )
        calls += cs
    for i, call in enumerate(calls[::4]):
        ledger.record_verdict(call, useful=i % 3 != 0, false=["x"] * (i % 4), note=f"n{i}")
    for call in calls[:12:4]:
        ledger.record_verdict(call, useful=True, false=["only one"], note="replaced")
    ledger.cool_down("sim-b", 60)
    ledger.learn_window("sim-c", 8000)
    for alias, status in (("sim-a", "ok"), ("sim-d", "error"), ("sim-e", "ok")):
        ledger.record_probe(
            {
                "call": f"probe.{alias}",
                "role": "probe",
                "alias": alias,
                "status": status,
                "error_kind": "" if status == "ok" else "auth",
                "error": "" if status == "ok" else "auth: refused",
                "seconds": 0.1,
            }
        )
    ledger.record_probe(
        {
            "call": "test.x",
            "role": "test",
            "alias": "",
            "status": "error",
            "error_kind": "connection",
            "error": "connection: refused",
        }
    )
    return calls


def test_snapshot_and_replay_give_the_same_answers(runs):
    with Ledger(runs) as ledger:
        busy_folder(ledger)
        before = everything(ledger)
        # a few extra looks, so the comparison covers every aggregate
        assert before["shapes"] == ["general", "review", "vision"]
        assert before["owed"] > 0 and before["collections"]["bench/c0"]["panels"] == 10
        assert sum(s["false_claims"] for s in before["all"].values()) > 0
        assert before["failing"]["sim-d"]["probe"] is True and "" not in before["probes"]
        assert before["probes"]["sim-a"]["status"] == "ok"
    records = len((runs / "evidence.jsonl").read_bytes().splitlines())
    snapshot = json.loads((runs / "index.json").read_text())
    assert snapshot["v"] == SNAPSHOT_VERSION and snapshot["stats"] and snapshot["days"]["seats"]

    with Ledger(runs) as reopened:
        assert reopened.from_snapshot and reopened.replayed == 0
        assert everything(reopened) == before
    (runs / "index.json").unlink()
    with Ledger(runs) as rebuilt:
        assert not rebuilt.from_snapshot and rebuilt.replayed == records
        assert everything(rebuilt) == before
    # a snapshot of the first layout (v1) lacks the aggregates: it is replayed, not trusted
    snapshot["v"] = 1
    (runs / "index.json").write_text(json.dumps(snapshot))
    with Ledger(runs) as old:
        assert not old.from_snapshot and everything(old) == before
    # a snapshot whose aggregates are damaged is replayed too
    snapshot = json.loads((runs / "index.json").read_text())
    snapshot["stats"]["shapes"][0][6] = [999, 1]  # a histogram bucket that does not exist
    (runs / "index.json").write_text(json.dumps(snapshot))
    with Ledger(runs) as damaged:
        assert not damaged.from_snapshot and everything(damaged) == before


def test_recent_windows_and_outcomes_survive_a_snapshot_and_a_replay(runs):
    now = time.time()
    with Ledger(runs) as ledger:
        for i in range(30):
            panel(
                ledger,
                [
                    ok("member1", "sim-a", 0.5 + i / 10),
                    (
                        "member2",
                        "sim-b",
                        "error" if i % 3 else "ok",
                        2.0,
                        "timeout: slow" if i % 3 else "",
                    ),
                ],
                seated=now - i * 900,
            )
        before = {w: ledger.usage(w, now) for w in ("hour", "day", "week")}
        failing = ledger.failing(2, 5)
    assert before["hour"]["models"]["sim-a"]["seats"] == 4  # this slot and the eleven before
    assert before["day"]["models"]["sim-b"]["failed"] == 20
    assert set(failing) == {"sim-b"}
    with Ledger(runs) as reopened:
        assert reopened.from_snapshot and reopened.replayed == 0
        assert {w: reopened.usage(w, now) for w in before} == before
        assert reopened.failing(2, 5) == failing
        # a seat of a panel seated in a slot that has turned already still counts
        panel(reopened, [ok("member1", "sim-a", 1.0)], seated=now - 1200)
        for w in before:
            assert (
                reopened.usage(w, now)["models"]["sim-a"]["seats"]
                == before[w]["models"]["sim-a"]["seats"] + 1
            )
        # an hour on, the hour holds none of them; the day still holds every one
        later = reopened.usage("hour", now + 3600)["models"]
        assert "sim-a" not in later and reopened.usage("day", now + 3600)["models"]
    with Ledger(runs) as again:  # the late seat, as the snapshot has it
        assert again.usage("hour", now)["models"]["sim-a"]["seats"] == 5
        before = {w: again.usage(w, now) for w in before}
    (runs / "index.json").unlink()
    with Ledger(runs) as rebuilt:
        assert not rebuilt.from_snapshot
        assert {w: rebuilt.usage(w, now) for w in before} == before
        assert rebuilt.failing(2, 5) == failing


def test_a_second_ledger_agrees_after_refresh(runs):
    writer, reader = Ledger(runs), Ledger(runs)
    try:
        busy_folder(writer)
        assert everything(reader) == everything(writer)  # each query follows the tail first
        more = busy_folder(writer)
        reader.record_verdict(more[1], useful=False, false=["a", "b"], by="reader")
        assert everything(reader) == everything(writer)
    finally:
        writer.close()
        reader.close()


PANELS = r"""
import sys
from pathlib import Path
sys.path.insert(0, sys.argv[1]); import _bootstrap  # noqa
sys.path.insert(0, sys.argv[1] + "/tests")
from panelist.metrics.ledger.ledger import Ledger
from test_ledger_replay import busy_folder
with Ledger(Path(sys.argv[2]), snapshot_every=30) as ledger:
    busy_folder(ledger)
"""


@pytest.mark.slow
def test_another_process_writes_and_this_ledger_follows(runs):
    with Ledger(runs) as ledger:
        busy_folder(ledger)
        mine = everything(ledger)
        proc = subprocess.run(
            [sys.executable, "-c", PANELS, str(ROOT), str(runs)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr
        theirs = everything(ledger)
        assert theirs != mine
        assert theirs["collections"]["bench/c0"]["panels"] == 20
    (runs / "index.json").unlink()
    with Ledger(runs) as fresh:
        assert everything(fresh) == theirs


def test_many_threads_fold_once(runs):
    ledger = Ledger(runs, snapshot_every=40)

    def work(n):
        for i in range(30):
            _, (call,) = panel(
                ledger, [ok("member1", f"sim-{n}", 0.5)], key=f"k{n}", collection="bench/t"
            )
            ledger.model_stats()
            ledger.record_verdict(call, useful=i % 2 == 0, false=["x"])
            ledger.panels_page(None, 5)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stats = ledger.model_stats()
    assert (
        all(
            (s["seats"], s["useful"], s["not_useful"], s["false_claims"]) == (30, 15, 15, 30)
            for s in stats.values()
        )
        and len(stats) == 6
    )
    assert ledger.collection_stats()["bench/t"] == {
        "panels": 180,
        "seats": 180,
        "useful": 90,
        "not_useful": 90,
    }
    assert ledger.owed_count() == 0
    before = everything(ledger, now=T0)
    ledger.close()
    (runs / "index.json").unlink()
    with Ledger(runs) as fresh:
        assert everything(fresh, now=T0) == before


# --------------------------------------------------------------------------- through the gateway


def ask(gw, collection="bench/trio", content="Review: x = 1/0"):
    status, body, _ = gw.post(
        "/v1/chat/completions",
        {"model": collection, "messages": [{"role": "user", "content": content}]},
    )
    assert status == 200, body
    return body["bench"]


def test_gateway_panels_fill_the_queries(gateway, home, sim):
    sim.script("slow", fail="server_error")
    sim.script("mid", fail="empty")
    first = ask(gateway)
    ledger = gateway.server.panels.ledger
    assert ledger.latest_panel() == first["panel"]
    sim.script("slow", fail=None)
    sim.script("mid", fail=None)
    second = ask(gateway)
    fast_call = next(s["call"] for s in second["seats"] if s["alias"] == "fast")
    status, body, _ = gateway.post(
        "/bench/verdict", {"call": fast_call, "useful": False, "false": ["claim one", "claim two"]}
    )
    assert status == 200, body

    evidence = [
        json.loads(x) for x in (home.gateway_runs / "evidence.jsonl").read_text().splitlines()
    ]
    seatings = [e for e in evidence if e["kind"] == "seated"]
    assert [(e["panel"], e["collection"]) for e in seatings] == [
        (first["panel"], "bench/trio"),
        (second["panel"], "bench/trio"),
    ]
    (verdict,) = [e for e in evidence if e["kind"] == "verdict"]
    assert verdict["collection"] == "bench/trio" and verdict["false"] == ["claim one", "claim two"]

    stats = ledger.model_stats("general")
    assert stats["slow"]["failures"] == {"server_error": 1} and stats["slow"]["ok"] == 1
    assert stats["mid"]["failures"] == {"empty": 1} and stats["mid"]["seats"] == 2
    assert stats["fast"]["ok"] == 2 and stats["fast"]["not_useful"] == 1
    assert stats["fast"]["false_claims"] == 2 and stats["fast"]["p50"] is not None
    assert ledger.model_stats() == stats and ledger.shapes() == ["general"]
    assert ledger.collection_stats() == {
        "bench/trio": {
            "panels": 2,
            "seats": len(first["seats"]) + len(second["seats"]),
            "useful": 0,
            "not_useful": 1,
        }
    }
    oks = sum(s["status"] == "ok" for s in first["seats"] + second["seats"])
    assert ledger.owed_count() == oks - 1 == ledger.owed_count("local")
    assert ledger.verdict_of(fast_call)["false"] == ["claim one", "claim two"]

    page, nxt = ledger.panels_page(None, 50)
    assert [p["panel"] for p in page] == [second["panel"], first["panel"]] and nxt is None
    chips = {s["call"]: (s["status"], s["verdict"]) for s in page[0]["seats"]}
    assert chips[fast_call] == ("ok", False)
    assert [s["call"] for s in page[1]["seats"]] == [s["call"] for s in first["seats"]]
    assert [s["status"] for s in page[1]["seats"]] == [s["status"] for s in first["seats"]]
    assert page[0]["key"] == "local" and page[0]["reply"] == "all"
    after, cursor = ledger.panels_after(panel_seq(first["panel"]), 50)
    assert [p["panel"] for p in after] == [second["panel"]]
    assert cursor == panel_seq(second["panel"])
    today = ledger.buckets(1)["series"]
    assert today["fast"] == [2]


def test_the_index_file_holds_no_more_than_aggregates(runs):
    """Sizes stay O(models x shapes): many panels of few models leave the aggregates small."""
    with Ledger(runs, recent_calls=10) as ledger:
        for i in range(300):
            panel(ledger, [ok("member1", "sim-a", 0.01 * i), ok("member2", "sim-b")], seated=T0 + i)
    snap = json.loads((runs / "index.json").read_text())
    assert len(snap["stats"]["shapes"]) == 2 and len(snap["stats"]["aliases"]) == 2
    assert all(len(row[6]) <= 2 * 90 for row in snap["stats"]["shapes"])
    assert len(snap["recent"]["calls"]) == 10
    assert os.path.getsize(runs / "panels.idx") == 300 * SLOT
