"""The ledger on PostgreSQL, in process: the same fold as on JSONL (a verdict replaces, pending
agrees), and each instance's snapshot spares a restart the replay of what it had folded."""

import time

from panelist.metrics.ledger.ledger import Ledger


def panel(ledger, aliases=("m1", "m2")) -> str:
    pid = ledger.new_panel()
    ledger.record_seated(pid, "code", list(aliases), time.time())
    for alias in aliases:
        ledger.record_seat({"call": f"{pid}.{alias}", "alias": alias, "shape": "code",
                            "status": "ok", "panel": pid, "seconds": 0.5})
    ledger.record_panel({"panel": pid, "shape": "code", "seats": [
        {"call": f"{pid}.{a}", "alias": a, "status": "ok"} for a in aliases]})
    return pid


def test_a_restart_loads_its_snapshot_and_folds_only_what_came_after(tmp_path, pg_url):
    with Ledger(tmp_path / "a", database=pg_url) as a:
        first = panel(a)
        assert a.record_verdict(f"{first}.m1", useful=True)["written"]
        assert not a.record_verdict(f"{first}.m1", useful=True)["written"]   # a repeat
        assert a.record_verdict(f"{first}.m1", useful=False)["replaced"]
        assert [p["call"] for p in a.pending()] == [f"{first}.m2"]
    with Ledger(tmp_path / "b", database=pg_url) as b:   # meanwhile, another instance
        second = panel(b)
    with Ledger(tmp_path / "a", database=pg_url) as a:
        assert a.from_snapshot
        assert a.replayed == 3   # the other's seating and two seats, nothing of its own
        assert a.verdict_of(f"{first}.m1")["useful"] is False
        assert sorted(p["call"] for p in a.pending()) == [f"{first}.m2", f"{second}.m1",
                                                          f"{second}.m2"]
        assert a.states(["m1"], "code")["m1"].not_useful == 1
