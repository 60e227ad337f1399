"""The ledger on PostgreSQL, in process: the same fold as on JSONL (a verdict replaces, pending
agrees), and each instance's snapshot spares a restart the replay of what it had folded."""

import time

from conftest import wait_until
from panelist.metrics.ledger.ledger import Ledger


def panel(ledger, aliases=("m1", "m2")) -> str:
    pid = ledger.new_panel()
    ledger.record_seated(pid, "code", list(aliases), time.time())
    for alias in aliases:
        ledger.record_seat(
            {
                "call": f"{pid}.{alias}",
                "alias": alias,
                "shape": "code",
                "status": "ok",
                "panel": pid,
                "seconds": 0.5,
            }
        )
    ledger.record_panel(
        {
            "panel": pid,
            "shape": "code",
            "seats": [{"call": f"{pid}.{a}", "alias": a, "status": "ok"} for a in aliases],
        }
    )
    return pid


def test_a_restart_loads_its_snapshot_and_folds_only_what_came_after(tmp_path, pg_url):
    with Ledger(tmp_path / "a", database=pg_url) as a:
        first = panel(a)
        assert a.record_verdict(f"{first}.m1", useful=True)["written"]
        assert not a.record_verdict(f"{first}.m1", useful=True)["written"]  # a repeat
        assert a.record_verdict(f"{first}.m1", useful=False)["replaced"]
        assert [p["call"] for p in a.pending()] == [f"{first}.m2"]
    with Ledger(tmp_path / "b", database=pg_url) as b:  # meanwhile, another instance
        second = panel(b)
    with Ledger(tmp_path / "a", database=pg_url) as a:
        assert a.from_snapshot
        assert a.replayed == 3  # the other's seating and two seats, nothing of its own
        assert a.verdict_of(f"{first}.m1")["useful"] is False
        assert sorted(p["call"] for p in a.pending()) == [
            f"{first}.m2",
            f"{second}.m1",
            f"{second}.m2",
        ]
        assert a.states(["m1"], "code")["m1"].not_useful == 1


def judge_all(ledger, seatings) -> list[str]:
    """Seat and judge ``[(alias, useful), ...]`` per panel; the panels' ids."""
    ids = []
    for seats in seatings:
        pid = ledger.new_panel()
        ids.append(pid)
        for alias, useful in seats:
            ledger.record_seat(
                {
                    "call": f"{pid}.{alias}",
                    "panel": pid,
                    "alias": alias,
                    "shape": "general",
                    "status": "ok",
                    "key": "local",
                }
            )
            ledger.record_verdict(f"{pid}.{alias}", useful=useful)
    return ids


def test_the_patterns_of_panel_outcomes_are_the_same_on_the_database_and_on_files(tmp_path, pg_url):
    seatings = (
        [[("fast", True), ("mid", False), ("slow", False)]] * 4
        + [[("mid", True), ("slow", False), ("fast", True)]] * 2
        + [[("fast", True)]]
    )
    found = {}
    for name, database in (("files", None), ("db", pg_url)):
        with Ledger(tmp_path / name, database=database) as ledger:
            first = judge_all(ledger, seatings)[0]
            # a replaced verdict moves its panel to another pattern, on both
            ledger.record_verdict(f"{first}.mid", useful=True)
            found[name] = (ledger.pairs("general"), ledger.patterns("general"))
    assert found["db"] == found["files"]
    assert found["db"][1] == {
        (("fast", "mid"), ("fast", "slow")): 3,
        (("fast", "slow"), ("mid", "slow")): 3,
    }
    with Ledger(tmp_path / "db", database=pg_url) as again:  # from its snapshot
        assert again.from_snapshot and again.patterns("general") == found["db"][1]
    with Ledger(tmp_path / "other", database=pg_url) as other:  # another instance
        assert other.patterns("general") == found["db"][1]


def test_ratings_and_collection_suggest_read_the_database(home, pg_url, monkeypatch, capsys):
    """With a database there is no evidence file beside the saved pairs: the command line's
    ratings come from the verdicts another instance wrote to the database."""
    import json

    from panelist.metrics.cli.main import main

    with Ledger(home.root / "elsewhere", database=pg_url) as other:
        for i in range(6):
            pid = other.new_panel()
            for alias, useful in (("fast", True), ("slow", False)):
                other.record_seat(
                    {
                        "call": f"{pid}.{alias}",
                        "panel": pid,
                        "alias": alias,
                        "shape": "general",
                        "status": "ok",
                        "key": "local",
                    }
                )
                other.record_verdict(f"{pid}.{alias}", useful=useful)
    monkeypatch.setenv("PANELIST_DATABASE_URL", pg_url)
    assert main(["--json", "ratings", "--data", str(home.root)]) == 0
    (general,) = json.loads(capsys.readouterr().out)["shapes"]
    assert [(m["alias"], m["wins"], m["losses"]) for m in general["models"]] == [
        ("fast", 6, 0),
        ("slow", 0, 6),
    ]
    assert general["clusters"] == {"verdicts": 6, "races": 0}  # six panels
    assert [m["clusters"] for m in general["models"]] == [6, 6]
    assert main(["--json", "collection", "suggest", "trio", "--data", str(home.root)]) == 0
    assert "suggest" in json.loads(capsys.readouterr().out)


def test_finished_panels_land_in_id_order_with_their_abandoned_evidence(tmp_path, pg_url):
    """Several finished panels written at once, one the caller left: another instance finds
    them newest first, and the left one's seat is no longer owed a verdict."""
    with Ledger(tmp_path / "a", database=pg_url) as a, Ledger(tmp_path / "b", database=pg_url) as b:
        # b has folded a first panel before the rest are written, so it follows them by id
        # (not a replay from the first id, which reads the panels table for abandoned ones)
        first = panel(a, ("m1",))
        # a follower reads up to the oldest transaction still open on the cluster (pgfollow),
        # so a write in flight elsewhere can hold the first panel back for a moment
        wait_until(lambda: [p["call"] for p in b.pending()] == [f"{first}.m1"])
        assert [p["call"] for p in b.pending()] == [f"{first}.m1"]
        ids = a.new_panels(3)
        for pid in ids:
            a.record_seated(pid, "code", ["m1"], time.time())
            a.record_seat(
                {
                    "call": f"{pid}.m1",
                    "alias": "m1",
                    "shape": "code",
                    "status": "ok",
                    "panel": pid,
                    "seconds": 0.1,
                }
            )
        a.record_panels(
            [
                {
                    "panel": pid,
                    "shape": "code",
                    "abandoned": pid == ids[1],
                    "seats": [{"call": f"{pid}.m1", "alias": "m1", "status": "ok"}],
                }
                for pid in ids
            ]
        )
        assert [p["panel"] for p in b.recent_panels(4)] == [*ids[::-1], first]
        assert b.panel(ids[1])["abandoned"] is True
        want = sorted([f"{first}.m1", f"{ids[0]}.m1", f"{ids[2]}.m1"])
        # b folds a's evidence when NOTIFY wakes it
        wait_until(lambda: sorted(p["call"] for p in b.pending()) == want)
        assert sorted(p["call"] for p in b.pending()) == want
        assert [(u["panel"], u["reason"]) for u in b.undelivered()] == [(ids[1], "abandoned")]
