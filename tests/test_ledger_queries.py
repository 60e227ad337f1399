"""The ledger's query API: aggregates kept by the tail-following index, on real files in temporary
folders — model and collection stats, days, the owed queue, verdicts and panel pages. The same
answers across a snapshot, a replay, a second ledger and through the gateway are
``test_ledger_replay.py``."""

import json
import math
import time

import pytest

from ledgerkit import DAY, T0, everything, ok, panel, seat
from ledgerkit import runs  # noqa: F401  (a fixture)
from panelist.metrics import errors
from panelist.metrics.ledger.ids import ID_MARGIN, panel_seq
from panelist.metrics.ledger.index import KEEP_DAYS, failure_kind, hist_quantiles
from panelist.metrics.ledger.ledger import Ledger


# --------------------------------------------------------------------------- model_stats


def test_failure_kinds_are_the_first_word_or_the_status():
    assert failure_kind("ok", "") is None
    assert failure_kind("error", "timeout: the seat did not finish") == "timeout"
    assert failure_kind("error", "rate_limit: 429 from upstream") == "rate_limit"
    assert failure_kind("error", "internal: KeyError: 'x'") == "internal"
    assert failure_kind("error", "boom") == "other"
    assert failure_kind("error", "Traceback: nonsense") == "other"  # not a kind we raise
    assert failure_kind("error", None) == "other"
    assert failure_kind("empty", "upstream answered with no text") == "empty"
    assert failure_kind("cancelled", "cancelled: the panel no longer needs it") == "cancelled"
    assert failure_kind("tool_calls", "") is None


def test_histogram_quantiles_stay_near_the_true_ones():
    from panelist.metrics.ledger.histogram import RESOLUTION
    from panelist.metrics.ledger.index import HIST_BUCKETS, hist_bucket

    for values in (
        [0.1 * i for i in range(1, 101)],
        [0.002] * 10 + [30.0] * 90,
        [1.0, 2.0, 400.0],
        [0.0004],
    ):
        hist = [0] * HIST_BUCKETS
        for v in values:
            hist[hist_bucket(v)] += 1
        ordered = sorted(values)
        for q, got in zip((0.5, 0.95), hist_quantiles(hist, 0.5, 0.95)):
            true = ordered[math.ceil(q * len(ordered)) - 1]
            # within the buckets' resolution, and the millisecond the middle is rounded to
            assert abs(got - true) <= RESOLUTION * true + 0.0005 or (
                true < 0.001 and got == 0.001
            ), (q, got)
    assert hist_quantiles(None, 0.5) == [None]
    assert hist_quantiles([0] * HIST_BUCKETS, 0.5, 0.95) == [None, None]


def test_model_stats_per_shape_and_over_all_shapes(runs):
    with Ledger(runs) as ledger:
        assert ledger.model_stats() == {} and ledger.shapes() == []
        for i in range(1, 101):  # sim-a: answers from 0.1 s to 10 s, one a panel
            panel(ledger, [ok("member1", "sim-a", round(0.1 * i, 1))], seated=T0 + i)
        panel(
            ledger,
            [
                ("member1", "sim-a", "error", 120.0, "timeout: no answer in 120 s"),
                ("member2", "sim-b", "error", 0.2, "rate_limit: 429"),
                ("explorer1", "sim-c", "empty", 0.5, "answered with no text"),
            ],
            seated=T0 + 200,
        )
        panel(
            ledger,
            [
                ("member1", "sim-b", "error", 0.1, "boom"),
                ("member2", "sim-c", "cancelled", 0.3, "cancelled: caller left"),
                ok("explorer1", "sim-b", 4.0),
            ],
            shape="review",
            seated=T0 + 300,
        )
        general, review = ledger.model_stats("general"), ledger.model_stats("review")
        whole = ledger.model_stats()
        assert ledger.shapes() == ["general", "review"]

    a = general["sim-a"]
    assert (a["seats"], a["ok"], a["useful"], a["not_useful"], a["false_claims"]) == (
        101,
        100,
        0,
        0,
        0,
    )
    assert a["failures"] == {"timeout": 1}
    assert abs(a["p50"] - 5.0) <= 0.45 and abs(a["p95"] - 9.5) <= 0.86
    assert a["last_answer"] == pytest.approx(T0 + 100 + 10.0)  # start + seconds of the newest
    assert general["sim-b"]["failures"] == {"rate_limit": 1}
    assert general["sim-b"]["ok"] == 0 and general["sim-b"]["p50"] is None
    assert general["sim-b"]["last_answer"] is None
    assert general["sim-c"]["failures"] == {"empty": 1}
    assert set(general) == {"sim-a", "sim-b", "sim-c"}

    assert set(review) == {"sim-b", "sim-c"}
    assert review["sim-b"]["seats"] == 2 and review["sim-b"]["ok"] == 1
    assert review["sim-b"]["failures"] == {"other": 1}
    assert review["sim-b"]["p50"] == review["sim-b"]["p95"]
    assert abs(review["sim-b"]["p50"] - 4.0) <= 0.36
    assert review["sim-c"]["failures"] == {"cancelled": 1}

    b = whole["sim-b"]
    assert (b["seats"], b["ok"]) == (3, 1)
    assert b["failures"] == {"rate_limit": 1, "other": 1}
    assert b["last_answer"] == pytest.approx(T0 + 300 + 4.0)
    assert whole["sim-a"] == a  # one shape only: the same figures
    assert whole["sim-c"]["failures"] == {"empty": 1, "cancelled": 1}
    assert ledger.model_stats("vision") == {}


def test_false_claims_and_counts_follow_the_current_verdict(runs):
    with Ledger(runs, recent_calls=5) as ledger:
        _, (c1, c2) = panel(
            ledger,
            [ok("member1", "sim-a"), ok("member2", "sim-b")],
            shape="review",
            collection="bench/x",
        )
        ledger.record_verdict(c1, useful=False, false=["f1", "f2", "f3"], real=["r"])
        ledger.record_verdict(c2, useful=True, false=["f9"])

        def figures():
            st = ledger.model_stats("review")["sim-a"]
            return (
                st["useful"],
                st["not_useful"],
                st["false_claims"],
                ledger.model_stats()["sim-a"]["false_claims"],
                ledger.collection_stats()["bench/x"],
            )

        assert figures() == (0, 1, 3, 3, {"panels": 1, "seats": 2, "useful": 1, "not_useful": 1})
        ledger.record_verdict(c1, useful=False, false=["f1"])  # replaced: 3 claims become 1
        assert figures() == (0, 1, 1, 1, {"panels": 1, "seats": 2, "useful": 1, "not_useful": 1})
        ledger.record_verdict(c1, useful=True)  # now useful, no false claim
        assert figures() == (1, 0, 0, 0, {"panels": 1, "seats": 2, "useful": 2, "not_useful": 0})
        assert ledger.model_stats("review")["sim-b"]["false_claims"] == 1
        ledger.record_verdict(c1, useful=True)  # a repeat is not written, so nothing moves
        assert figures() == (1, 0, 0, 0, {"panels": 1, "seats": 2, "useful": 2, "not_useful": 0})

        # a call gone from the recent map is judged through its panel line, collection and all
        for _ in range(5):
            panel(ledger, [ok("member1", "sim-z")], collection="bench/y")
        ledger.refresh()
        assert c2 not in ledger._index.recent
        ledger.record_verdict(c2, useful=False, false=["a", "b"])
        assert figures()[-1] == {"panels": 1, "seats": 2, "useful": 1, "not_useful": 1}
        assert ledger.model_stats("review")["sim-b"]["false_claims"] == 2
        before = everything(ledger)
    verdicts = [
        json.loads(x)
        for x in (runs / "evidence.jsonl").read_text().splitlines()
        if '"kind":"verdict"' in x
    ]
    assert len(verdicts) == 5 and all(v["collection"] == "bench/x" for v in verdicts)
    (runs / "index.json").unlink()
    with Ledger(runs, recent_calls=5) as fresh:
        assert not fresh.from_snapshot and everything(fresh) == before


def test_a_verdict_without_a_collection_is_not_uncounted_from_one(runs):
    """Verdict lines from before they named the collection count in no collection; a newer
    verdict replacing one must not take its count from the collection."""
    with Ledger(runs) as ledger:
        _, (call,) = panel(ledger, [ok("member1", "sim-a")], collection="bench/x")
        with open(runs / "evidence.jsonl", "a") as f:  # as an older gateway wrote it
            f.write(
                json.dumps(
                    {
                        "v": 1,
                        "kind": "verdict",
                        "ts": "2025-06-15T00:00:00.000Z",
                        "call": call,
                        "panel": call.split(".")[0],
                        "alias": "sim-a",
                        "shape": "general",
                        "useful": False,
                        "note": "",
                        "real": [],
                        "false": ["x"],
                        "by": "old",
                    }
                )
                + "\n"
            )
        assert ledger.collection_stats()["bench/x"]["not_useful"] == 0
        assert ledger.model_stats()["sim-a"]["false_claims"] == 1
        ledger.record_verdict(call, useful=True)
        assert ledger.collection_stats()["bench/x"] == {
            "panels": 1,
            "seats": 1,
            "useful": 1,
            "not_useful": 0,
        }
        assert ledger.model_stats()["sim-a"]["false_claims"] == 0
        assert (
            ledger.model_stats()["sim-a"]["useful"],
            ledger.model_stats()["sim-a"]["not_useful"],
        ) == (1, 0)


# --------------------------------------------------------------------------- collections, days


def test_collection_stats(runs):
    with Ledger(runs) as ledger:
        assert ledger.collection_stats() == {}
        for i in range(3):
            panel(
                ledger,
                [ok("member1", "sim-a"), ok("explorer1", f"sim-{i}")],
                collection="bench/one",
            )
        _, (c,) = panel(
            ledger,
            [("member1", "sim-a", "error", 1.0, "timeout: x")],
            collection="bench/two",
            merger="sim-m",
        )
        ledger.record_verdict(f"{c.split('.')[0]}.merger", useful=True)
        # a seating without a collection (an older gateway) counts no panel
        ledger.record_seated(ledger.new_panel(T0), "general", ["sim-a"], T0)
        assert ledger.collection_stats() == {
            "bench/one": {"panels": 3, "seats": 6, "useful": 0, "not_useful": 0},
            "bench/two": {"panels": 1, "seats": 2, "useful": 1, "not_useful": 0},
        }
        with pytest.raises(errors.BadRequest):
            ledger.record_seated(ledger.new_panel(T0), "general", ["sim-a"], T0, collection=3)


def test_buckets_count_seats_per_day_and_forget_old_days(runs):
    now = T0
    today = int(now // DAY)
    with Ledger(runs) as ledger:
        assert ledger.buckets(7, now=now) == {
            "unit": "day",
            "start": (today - 6) * DAY,
            "days": 7,
            "series": {},
        }
        for back, alias, n in (
            (0, "sim-a", 3),
            (1, "sim-a", 1),
            (6, "sim-b", 2),
            (7, "sim-b", 5),
            (40, "sim-c", 1),
        ):
            for _ in range(n):
                panel(ledger, [ok("member1", alias)], seated=now - back * DAY)
        week = ledger.buckets(7, now=now)
        assert week["series"] == {"sim-a": [0, 0, 0, 0, 0, 1, 3], "sim-b": [2, 0, 0, 0, 0, 0, 0]}
        assert ledger.buckets(60, now=now)["series"]["sim-c"][60 - 41] == 1
        # a seat dated a week past this machine's clock (a broken clock elsewhere) is not
        # counted and moves nothing
        ahead = time.time() + 7 * DAY
        panel(ledger, [ok("member1", "sim-x")], seated=ahead)
        assert ledger.buckets(60, now=ahead)["series"] == {}
        assert ledger.buckets(7, now=now)["series"] == week["series"]
        # ... but a seat from a day after `now` is, and so is one KEEP_DAYS after it, which
        # drops the old days
        panel(ledger, [ok("member1", "sim-d")], seated=T0 + 1 * DAY)
        later = now + KEEP_DAYS * DAY
        with open(runs / "evidence.jsonl", "a") as f:  # written by a process whose clock is later
            f.write(
                json.dumps(
                    {
                        "v": 1,
                        "kind": "seat",
                        "ts": "x",
                        "call": "p1.member1",
                        "alias": "sim-e",
                        "shape": "general",
                        "seated": later,
                        "status": "ok",
                    }
                )
                + "\n"
            )
        assert ledger.buckets(60, now=now + DAY)["series"] == {"sim-d": [0] * 59 + [1]}
        assert ledger.buckets(60, now=later)["series"] == {"sim-e": [0] * 59 + [1]}
        assert len(ledger._index.days) <= KEEP_DAYS
        for bad in (0, 61, "7", True):
            with pytest.raises(errors.BadRequest):
                ledger.buckets(bad)


# --------------------------------------------------------------------------- owed, verdict_of


def test_owed_count_matches_pending_through_verdicts_and_eviction(runs):
    with Ledger(runs, recent_calls=8) as ledger:

        def check():
            for key in (None, "k1", "k2", "nobody"):
                assert ledger.owed_count(key) == len(ledger.pending(key=key, limit=10_000)), key

        assert ledger.owed_count() == 0
        calls = []
        for i in range(4):
            _, cs = panel(
                ledger,
                [ok("member1", "sim-a"), ("member2", "sim-b", "error", 1.0, "timeout: x")],
                key=f"k{1 + i % 2}",
            )
            calls += cs
        assert ledger.owed_count() == 4 and ledger.owed_count("k2") == 2
        check()
        ledger.record_verdict(calls[0], useful=True)
        assert ledger.owed_count() == 3 and ledger.owed_count("k1") == 1
        ledger.record_verdict(calls[0], useful=False, note="changed my mind")  # a replacement
        assert ledger.owed_count() == 3
        check()
        # evictions: eight more seats push the first eight out of the recent map
        for i in range(4):
            panel(ledger, [ok("member1", "sim-c"), ok("member2", "sim-d")], key="k2")
        assert ledger.owed_count() == 8 and ledger.owed_count("k1") == 0
        check()
        # a verdict on an evicted call changes nothing owed; one on a recent call does
        ledger.record_verdict(calls[2], useful=True)
        assert ledger.owed_count() == 8
        recent = ledger.pending(limit=1)[0]["call"]
        ledger.record_verdict(recent, useful=True)
        assert ledger.owed_count() == 7
        check()
        # the same seat line twice (a hand copy) is still one seat owed
        line = (runs / "evidence.jsonl").read_text().splitlines()[-4]
        assert '"kind":"seat"' in line
        with open(runs / "evidence.jsonl", "a") as f:
            f.write(line + "\n")
        check()
        before = ledger.owed_count(), ledger.owed_count("k2")
    with Ledger(runs, recent_calls=8) as reopened:
        assert (
            reopened.from_snapshot and (reopened.owed_count(), reopened.owed_count("k2")) == before
        )
    (runs / "index.json").unlink()
    with Ledger(runs, recent_calls=8) as replayed:
        assert (replayed.owed_count(), replayed.owed_count("k2")) == before


def test_the_owed_queue_leads_with_the_oldest_owed_past_many_judged(runs):
    with Ledger(runs) as ledger:

        def queue(limit=10_000, key=None):
            return [r["call"] for r in ledger.pending(limit=limit, oldest=True, key=key)]

        calls = []
        for i in range(60):
            calls += panel(
                ledger, [ok("member1", "sim-a"), ok("member2", "sim-b")], key=f"k{1 + i % 2}"
            )[1]
        for call in calls[:108]:  # the oldest 90% judged
            ledger.record_verdict(call, useful=True)
        assert queue(limit=3) == calls[108:111]
        assert queue() == calls[108:] and ledger.owed_count() == 12
        # panel i has calls 2i and 2i+1, and the odd panels are k2's
        assert queue(key="k2") == [c for i, c in enumerate(calls) if i >= 108 and i // 2 % 2]
        # judged: off the queue; the next oldest leads
        ledger.record_verdict(calls[108], useful=False)
        assert queue(limit=1) == [calls[109]]
        # a panel that waits for its delivery joins the queue when delivered, behind the
        # panels delivered before it
        pid = ledger.new_panel(T0)
        ledger.record_seated(pid, "general", ["sim-a"], T0, awaits_delivery=True)
        late = seat(ledger, pid, "member1", "sim-a")
        (after,) = panel(ledger, [ok("member1", "sim-c")])[1]
        assert queue()[-1] == after and late not in queue()
        ledger.record_delivered(pid, "the reply")
        assert queue()[-2:] == [after, late]
        # an abandoned panel's seats leave it
        left = panel(ledger, [ok("member1", "sim-a"), ok("member2", "sim-b")], abandoned=True)[1]
        assert not set(left) & set(queue())
        kept = queue()
        assert len(kept) == ledger.owed_count() == 13
    with Ledger(runs) as reopened:  # the snapshot keeps the queue's order
        assert (
            reopened.from_snapshot
            and [r["call"] for r in reopened.pending(limit=10_000, oldest=True)] == kept
        )
    snapshot = json.loads((runs / "index.json").read_text())
    assert [snapshot["recent"]["calls"][i] for i in snapshot["owed"]] == kept
    snapshot["v"] = 5  # before the queue was kept: replayed
    (runs / "index.json").write_text(json.dumps(snapshot))
    with Ledger(runs) as old:
        assert not old.from_snapshot
        assert [r["call"] for r in old.pending(limit=10_000, oldest=True)] == kept


def test_verdict_of(runs):
    with Ledger(runs) as ledger:
        _, (call,) = panel(ledger, [ok("member1", "sim-a")])
        assert ledger.verdict_of(call) is None
        assert ledger.verdict_of("p20250101-9.member1") is None and ledger.verdict_of(5) is None
        ledger.record_verdict(call, useful=False, note="wrong", real=["r"], false=["f"], by="me")
        got = ledger.verdict_of(call)
        assert {k: got[k] for k in ("useful", "note", "real", "false", "by")} == {
            "useful": False,
            "note": "wrong",
            "real": ["r"],
            "false": ["f"],
            "by": "me",
        }
        assert got["ts"].endswith("Z")
        ledger.record_verdict(call, useful=True, by="you")
        assert ledger.verdict_of(call)["useful"] is True and ledger.verdict_of(call)["by"] == "you"


# --------------------------------------------------------------------------- panel pages


def summary_keys():
    return {
        "panel",
        "collection",
        "key",
        "started",
        "seconds",
        "shape",
        "reply",
        "seats",
        "merger",
        "abandoned",
    }


def test_panels_page_newest_first_across_in_flight_slots(runs):
    with Ledger(runs) as ledger:
        assert ledger.panels_page(None, 10) == ([], None) and ledger.latest_panel() is None
        done, flying = [], []
        for i in range(25):
            pid, calls = panel(
                ledger,
                [ok("member1", "sim-a"), ok("member2", "sim-b")],
                finish=i % 5 != 2,
                key=f"k{i}",
                merger="sim-m" if i == 0 else None,
                abandoned=i == 1,
            )
            (done if i % 5 != 2 else flying).append((pid, calls))
        ledger.record_verdict(done[-1][1][0], useful=True)
        ledger.record_verdict(done[-1][1][1], useful=False)
        newest = [pid for pid, _ in reversed(done)]
        assert ledger.latest_panel() == newest[0]

        got, cursor = [], None
        while True:
            page, nxt = ledger.panels_page(cursor, 7)
            got += page
            if nxt is None:
                break
            assert nxt == panel_seq(page[-1]["panel"])
            cursor = nxt
        assert [p["panel"] for p in got] == newest  # every finished one once; in flight skipped
        assert all(set(p) == summary_keys() for p in got)
        top = got[0]
        assert top["seats"] == [
            {
                "call": done[-1][1][0],
                "seat": "member",
                "alias": "sim-a",
                "status": "ok",
                "seconds": 1.0,
                "verdict": True,
            },
            {
                "call": done[-1][1][1],
                "seat": "member",
                "alias": "sim-b",
                "status": "ok",
                "seconds": 1.0,
                "verdict": False,
            },
        ]
        assert (top["collection"], top["shape"], top["reply"], top["key"]) == (
            "bench/c",
            "general",
            "all",
            "k24",
        )
        assert top["merger"] is None and top["abandoned"] is False
        assert "secret answer" not in json.dumps(got) and "the prompt" not in json.dumps(got)
        first, second = got[-1], got[-2]
        assert first["merger"]["alias"] == "sim-m" and first["merger"]["verdict"] is None
        assert second["abandoned"] is True

        page, nxt = ledger.panels_page(None, len(newest))
        assert [p["panel"] for p in page] == newest and nxt is None
        page, nxt = ledger.panels_page(panel_seq(newest[3]), 2)
        assert [p["panel"] for p in page] == newest[4:6]
        assert ledger.panels_page(0, 5) == ([], None)
        assert ledger.panels_page(10**9, 1)[0][0]["panel"] == newest[0]
        for bad in ((None, 0), (None, 1001), (None, "5"), ("7", 5), (True, 5)):
            with pytest.raises(errors.BadRequest):
                ledger.panels_page(*bad)

        # a panel in flight shows once it is finished
        pid, calls = flying[-1]
        ledger.record_panel(
            {
                "panel": pid,
                "collection": "bench/c",
                "shape": "general",
                "seats": [{"call": c, "status": "ok"} for c in calls],
            }
        )
        page, _ = ledger.panels_page(None, 50)
        assert pid in [p["panel"] for p in page]


def test_panels_page_passes_over_a_rebuilt_counters_margin(runs):
    with Ledger(runs) as ledger:
        old = [panel(ledger, [ok("member1", "sim-a")])[0] for _ in range(3)]
    (runs / "panels.idx").unlink()
    with Ledger(runs) as ledger:  # the counter is rebuilt ID_MARGIN past the logged panels
        new = [panel(ledger, [ok("member1", "sim-a")])[0] for _ in range(2)]
        assert panel_seq(new[0]) == 3 + ID_MARGIN
        page, nxt = ledger.panels_page(None, 4)
        assert [p["panel"] for p in page] == new[::-1] + old[:0:-1]
        page, nxt = ledger.panels_page(nxt, 4)
        assert [p["panel"] for p in page] == old[:1] and nxt is None
        after, cursor = ledger.panels_after(panel_seq(old[-1]), 10)
        assert [p["panel"] for p in after] == new and cursor == panel_seq(new[-1])


def test_panels_after_waits_for_a_panel_in_flight(runs):
    with Ledger(runs) as ledger:
        first, _ = panel(ledger, [ok("member1", "sim-a")], seated=T0)
        slow, slow_calls = panel(ledger, [ok("member1", "sim-a")], seated=T0, finish=False)
        quick = [panel(ledger, [ok("member1", "sim-b")], seated=T0)[0] for _ in range(3)]

        got, cursor = ledger.panels_after(None, 50, now=T0 + 10)
        assert [p["panel"] for p in got] == [first] + quick
        assert cursor == panel_seq(slow) - 1  # held just below the panel still in flight
        got, cursor = ledger.panels_after(cursor, 50, now=T0 + 10)
        assert [p["panel"] for p in got] == quick and cursor == panel_seq(slow) - 1

        ledger.record_panel(
            {
                "panel": slow,
                "collection": "bench/c",
                "shape": "general",
                "seats": [{"call": slow_calls[0], "status": "ok"}],
            }
        )
        got, cursor = ledger.panels_after(cursor, 50, now=T0 + 20)
        assert [p["panel"] for p in got] == [slow] + quick and cursor == panel_seq(quick[-1])
        assert ledger.panels_after(cursor, 50, now=T0 + 20) == ([], cursor)

        # reserved and not yet seated (the gateway is between the two steps): held as well
        reserved = ledger.new_panel(T0)
        assert ledger.panels_after(cursor, 50, now=T0 + 30) == ([], panel_seq(reserved) - 1)
        # once a later panel is seated, an unseated slot below it was given up: skipped
        last, _ = panel(ledger, [ok("member1", "sim-c")], seated=T0)
        got, moved = ledger.panels_after(cursor, 50, now=T0 + 30)
        assert [p["panel"] for p in got] == [last] and moved == panel_seq(last)
        stuck, _ = panel(ledger, [ok("member1", "sim-c")], seated=T0, finish=False)
        got, held = ledger.panels_after(cursor, 50, now=T0 + 30)
        assert [p["panel"] for p in got] == [last] and held == panel_seq(stuck) - 1
        # a seating older than `wait` is taken for a crashed process: passed over
        got, passed = ledger.panels_after(cursor, 50, now=T0 + 601)
        assert [p["panel"] for p in got] == [last] and passed == panel_seq(stuck)
        # a full page never holds: the poll always moves on
        got, nxt = ledger.panels_after(panel_seq(first), 1, now=T0 + 10)
        assert [p["panel"] for p in got] == [slow] and nxt == panel_seq(slow)
        assert ledger.panels_after(10**9, 5) == ([], 10**9)
