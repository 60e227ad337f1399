"""The ledger's two homes, one behaviour: every test here runs the same writes and the same
assertions on the JSONL files of a runs folder and on a PostgreSQL database (``ledger_at``), over
the ledger's public methods. The database runs are marked slow and skipped where PostgreSQL's
binaries are missing, unless ``PANELIST_REQUIRE_POSTGRES=1`` (the ``pg_url`` fixture's rule)."""

import time

import pytest

from panelist.metrics import errors
from panelist.metrics.ledger.ids import panel_seq
from panelist.metrics.ledger.ledger import Ledger

HOMES = ["files", pytest.param("postgres", marks=pytest.mark.slow)]
SEATED = time.time() - 3600  # an hour ago: inside today's usage window and the last 30 days


@pytest.fixture(params=HOMES)
def ledger_at(request, tmp_path):
    """``open(name)``: a ledger on this test's home, ``name`` its own runs folder (two names
    are two instances sharing one store, as two processes would); all closed after the test."""
    database = request.getfixturevalue("pg_url") if request.param == "postgres" else None
    store = tmp_path / "store"
    opened = []

    def open_ledger(name: str = "a") -> Ledger:
        runs = store if database is None else tmp_path / name  # files: the folder is the store
        ledger = Ledger(runs, database=database)
        opened.append(ledger)
        return ledger

    yield open_ledger
    for ledger in opened:
        ledger.close()


@pytest.fixture()
def ledger(ledger_at):
    return ledger_at()


def seat(ledger, pid, alias, *, key="k1", **extra):
    call = f"{pid}.{alias}"
    ledger.record_seat(
        {
            "call": call,
            "panel": pid,
            "alias": alias,
            "seat": "member",
            "shape": "code",
            "seated": SEATED,
            "status": "ok",
            "seconds": 1.5,
            "tokens": {"prompt": 10, "completion": 5},
            "error": "",
            "key": key,
            "collection": "bench/trio",
            **extra,
        }
    )
    return call


def finished(ledger, aliases=("fast", "mid"), *, key="k1", awaits_delivery=False, **seats):
    """A panel seated, its seats answered and the panel written; its id."""
    pid = ledger.new_panel()
    ledger.record_seated(
        pid, "code", list(aliases), SEATED, collection="bench/trio", awaits_delivery=awaits_delivery
    )
    for alias in aliases:
        seat(ledger, pid, alias, key=key, **seats.get(alias, {}))
    ledger.record_panel(
        {
            "panel": pid,
            "shape": "code",
            "collection": "bench/trio",
            "key": key,
            "seats": [{"call": f"{pid}.{a}", "alias": a, "status": "ok"} for a in aliases],
        }
    )
    return pid


def test_panel_ids_are_reserved_in_order_and_only_reserved_ones_are_written(ledger):
    first, (second, third) = ledger.new_panel(), ledger.new_panels(2)
    assert [panel_seq(p) for p in (second, third)] == [panel_seq(first) + 1, panel_seq(first) + 2]
    assert ledger.latest_panel() is None  # reserved, not yet written
    with pytest.raises(errors.BadRequest, match="not reserved"):
        ledger.record_panel({"panel": f"{first[:-2]}-999", "shape": "code"})
    with pytest.raises(errors.BadRequest, match="not a panel id"):
        ledger.record_panel({"panel": "nope", "shape": "code"})
    ledger.record_panel({"panel": second, "shape": "code", "seats": []})
    assert ledger.latest_panel() == second


def test_a_panel_and_its_seats_read_back_as_written(ledger):
    pid = finished(ledger)
    call = ledger.call(f"{pid}.fast")
    assert {k: call[k] for k in ("alias", "panel", "shape", "status", "seconds", "key")} == {
        "alias": "fast",
        "panel": pid,
        "shape": "code",
        "status": "ok",
        "seconds": 1.5,
        "key": "k1",
    }
    assert call["kind"] == "seat" and call.get("verdict") is None
    assert ledger.call(f"{pid}.nobody") is None
    record = ledger.panel(pid)
    assert [s["alias"] for s in record["seats"]] == ["fast", "mid"] and record["key"] == "k1"
    assert [p["panel"] for p in ledger.recent_panels()] == [pid]
    assert ledger.panel_call(pid, "mid") == f"{pid}.mid"
    with pytest.raises(errors.NotFound):
        ledger.panel_call(pid, "mid", key="k2")  # another key's panel is not found


def test_the_last_verdict_wins_and_a_repeat_is_not_written(ledger):
    pid = finished(ledger)
    call = f"{pid}.mid"
    first = ledger.record_verdict(call, useful=False, note="wrong")
    repeat = ledger.record_verdict(call, useful=False, note="wrong")
    changed = ledger.record_verdict(call, useful=True)
    assert [(r["written"], r["replaced"]) for r in (first, repeat, changed)] == [
        (True, False),
        (False, False),
        (True, True),
    ]
    assert ledger.verdict_of(call)["useful"] is True and ledger.verdict_of(call)["note"] == ""
    assert ledger.call(call)["verdict"]["useful"] is True
    assert ledger.verdict_count() == 1
    with pytest.raises(errors.NotFound, match="unknown call id"):
        ledger.record_verdict(f"{pid}.nobody", useful=True)
    with pytest.raises(errors.BadRequest, match="true or false"):
        ledger.record_verdict(call, useful="yes")


def test_owed_verdicts_wait_for_delivery_and_leave_with_a_verdict(ledger):
    told = finished(ledger, key="k1")
    waiting = finished(ledger, key="k2", awaits_delivery=True)
    assert sorted(p["call"] for p in ledger.pending()) == [f"{told}.fast", f"{told}.mid"]
    assert [u["panel"] for u in ledger.undelivered()] == [waiting]
    assert ledger.undelivered()[0]["reason"] == "undelivered"
    ledger.record_delivered(waiting, "the merged reply")
    assert ledger.undelivered() == [] and ledger.delivered_panel("the merged reply") == waiting
    assert ledger.delivered_panel("another reply") is None
    assert ledger.owed_count() == 4 and ledger.owed_count("k2") == 2
    assert [p["call"] for p in ledger.pending(key="k2", limit=1)] == [f"{waiting}.mid"]
    assert [p["call"] for p in ledger.pending(key="k2", limit=1, oldest=True)] == [
        f"{waiting}.fast"
    ]
    ledger.record_verdict(f"{told}.fast", useful=True)
    assert ledger.owed_count("k1") == 1


def test_a_tool_call_id_names_the_seat_that_issued_it_once_only(ledger):
    pid = finished(
        ledger,
        fast={"tool_calls": [{"id": "call_a"}, {"id": "call_twice"}]},
        mid={"tool_calls": [{"id": "call_twice"}]},
    )
    assert ledger.tool_call_owner("call_a") == (pid, "fast")
    assert ledger.tool_call_owner("call_twice") is None  # two seats issued it
    assert ledger.tool_call_owner("call_never") is None and ledger.tool_call_owner(7) is None


def test_counts_per_model_shape_collection_key_and_day(ledger):
    pid = finished(
        ledger,
        ("fast", "mid", "slow"),
        slow={"status": "error", "error": "timeout: no answer in 60 s"},
    )
    ledger.record_verdict(f"{pid}.fast", useful=True)
    ledger.record_verdict(f"{pid}.mid", useful=False)
    stats = ledger.model_stats()
    assert {a: (s["seats"], s["ok"], s["useful"], s["not_useful"]) for a, s in stats.items()} == {
        "fast": (1, 1, 1, 0),
        "mid": (1, 1, 0, 1),
        "slow": (1, 0, 0, 0),
    }
    assert ledger.model_stats("code") == stats and ledger.model_stats("other") == {}
    assert ledger.model_shapes("fast") == {"code": stats["fast"]} and ledger.shapes() == ["code"]
    assert ledger.collection_stats() == {
        "bench/trio": {"panels": 1, "seats": 3, "useful": 1, "not_useful": 1}
    }
    usage = ledger.usage("day")["models"]
    assert {a: (u["seats"], u["answered"], u["prompt_tokens"]) for a, u in usage.items()} == {
        "fast": (1, 1, 10),
        "mid": (1, 1, 10),
        "slow": (1, 0, 10),
    }
    assert {a: sum(series) for a, series in ledger.buckets()["series"].items()} == {
        "fast": 1,
        "mid": 1,
        "slow": 1,
    }
    assert set(ledger.seat_totals()) == {"fast", "mid", "slow"}
    assert ledger.keys_last_used() == {"k1": pytest.approx(SEATED)}
    assert ledger.failing(1, 1) == {
        "slow": {"failed": 1, "of": 1, "kind": "timeout", "probe": False}
    }
    with pytest.raises(errors.BadRequest, match="failing needs"):
        ledger.failing(2, 1)


def test_the_time_axis_per_model_key_and_gateway_and_who_answers_now(ledger):
    finished(
        ledger,
        ("fast", "mid", "slow"),
        key="k1",
        fast={"endpoint": "e1"},
        mid={"endpoint": "e1"},
        slow={"status": "error", "error": "auth: (401) invalid api key", "endpoint": "e2"},
    )
    finished(ledger, ("fast",), key="k2", fast={"endpoint": "e1"})

    def seats(**asked) -> list[int]:
        return [b["seats"] for b in ledger.series("day", **asked)["buckets"] if b["seats"]]

    assert seats(aliases=["fast"]) == [2] and seats(aliases=["fast", "mid", "slow"]) == [4]
    assert seats(key="k1") == [3] and seats(key="k2") == [1] and seats() == [4]
    assert seats(endpoint="e1") == [3] and seats(endpoint="e2") == [1]
    day = ledger.series("day", aliases=["fast", "slow"])
    assert (day["total"]["answered"], day["total"]["failed"]) == (2, 1)
    assert day["total"]["p50"] == pytest.approx(1.5, rel=0.05) and day["width"] == 3600
    assert ledger.answering() == {"fast", "mid"}


def test_cooldowns_windows_and_probes_reach_the_models_state(ledger):
    finished(ledger, ("fast", "mid", "slow"))
    ledger.cool_down("slow", 600, "rate limited")
    assert ledger.learn_window("mid", 5000) is True
    assert ledger.learn_window("mid", 6000) is False  # only a lower window is news
    with pytest.raises(errors.BadRequest, match="positive integer"):
        ledger.learn_window("mid", 0)
    ledger.record_probe(
        {
            "call": "probe.1",
            "alias": "fast",
            "status": "error",
            "error_kind": "timeout",
            "seconds": 0.1,
            "error": "timeout: no answer in 5 s",
        }
    )
    states = ledger.states(["fast", "mid", "slow"], "code")
    assert states["slow"].cooling_until > time.time() + 500
    assert states["fast"].cooling_until == 0.0 and states["mid"].window == 5000
    assert states["fast"].last_seated == pytest.approx(SEATED)
    assert ledger.probes()["fast"]["error_kind"] == "timeout"
    assert ledger.failing(1, 1)["fast"]["probe"] is True
    ledger.cool_down("slow", 0)  # 0 ends it
    assert ledger.states(["slow"], "code")["slow"].cooling_until <= time.time()


def test_verdicts_on_one_panel_make_pairs_and_patterns(ledger):
    stamp = ledger.patterns_stamp("general")
    for _ in range(2):
        pid = finished(ledger, ("fast", "mid", "slow"))
        for alias, useful in (("fast", True), ("mid", False), ("slow", False)):
            ledger.record_verdict(f"{pid}.{alias}", useful=useful)
    assert ledger.pairs("code") == {("fast", "mid"): 2, ("fast", "slow"): 2}
    assert sum(ledger.patterns("code").values()) == 2 and len(ledger.patterns("code")) == 1
    assert ledger.paired_shapes() == ["code"]
    assert ledger.patterns_stamp("code") != stamp
    judged = ledger.judged_panels("code")
    assert [(shape, sorted((a, u) for _, a, u in seats)) for _, shape, seats in judged] == [
        ("code", [("fast", True), ("mid", False), ("slow", False)])
    ] * 2


def test_pages_of_panels_newest_first_and_after_a_point(ledger):
    pids = [finished(ledger) for _ in range(3)]
    page, cursor = ledger.panels_page(None, 2)
    assert [p["panel"] for p in page] == pids[:0:-1]
    rest, end = ledger.panels_page(cursor, 2)
    assert [p["panel"] for p in rest] == pids[:1] and end is None
    after, last = ledger.panels_after(panel_seq(pids[0]), 10, wait=0)
    assert [p["panel"] for p in after] == pids[1:] and last == panel_seq(pids[2])
    summaries = ledger.panel_summaries([panel_seq(p) for p in pids])
    assert [s["panel"] for s in summaries] == pids
    assert [s["alias"] for s in summaries[0]["seats"]] == ["fast", "mid"]


def test_evidence_after_a_point_is_what_was_written_since(ledger):
    finished(ledger)
    end = ledger.evidence_end()[1]
    pid = finished(ledger, ("slow",))
    lines = [record for _, record in ledger.evidence_after(end).read()]
    assert [(r["kind"], r.get("alias")) for r in lines] == [("seated", None), ("seat", "slow")]
    assert lines[0]["panel"] == pid


def test_another_instance_sees_every_write_and_a_reopened_one_keeps_what_it_folded(ledger_at):
    a, b = ledger_at("a"), ledger_at("b")
    pid = finished(a)
    a.record_verdict(f"{pid}.fast", useful=True)
    assert b.verdict_of(f"{pid}.fast")["useful"] is True  # read through its tail refresh
    assert b.panel(pid)["seats"] and b.owed_count() == 1
    later = finished(b, ("slow",))
    a.close()
    again = ledger_at("a")
    assert again.from_snapshot
    assert again.panel(later) is not None and again.verdict_of(f"{pid}.fast")["useful"] is True
    assert again.owed_count() == 2
