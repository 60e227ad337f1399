"""The search index after a restart with a long backlog (``metrics/ledger/search.py``): the
background build reads calls.jsonl from its end back, so the newest failure is found while
the oldest panels still wait, the state says how many panels are still to come, and once the
build ends the index answers what a build read front to back answers."""

import random
import threading

import pytest

from conftest import wait_until
from panelist.metrics.ledger.ledger import Ledger
from panelist.metrics.ledger.search import Filters, SearchIndex
from test_search_index import T0, seat

PATIENCE = 30.0


@pytest.fixture
def runs(tmp_path):
    return tmp_path / "runs" / "gateway"


def write(ledger, n, *, first, failing=(), alias="m-x"):
    """``n`` panels of two seats, ``alias`` and m-y, starting ``first`` seconds after T0;
    the panels at the positions in ``failing`` have ``alias`` fail. Returns their ids."""
    ids = ledger.new_panels(n, T0 + first)
    rng = random.Random(first)
    records, seats = [], []
    for i, pid in enumerate(ids):
        public = [
            seat(pid, "member1", alias, "error" if i in failing else "ok", "fine"),
            seat(pid, "member2", "m-y", "ok", " ".join(rng.sample(["a", "b", "c"], 2))),
        ]
        records.append(
            {
                "panel": pid,
                "collection": "bench/a",
                "shape": "general",
                "key": "alice",
                "started": T0 + first + i,
                "seconds": 1.0,
                "estimate": 10,
                "reply": "all",
                "skipped": [],
                "prompt": "user: review this change",
                "seats": public,
            }
        )
        seats += [
            {
                "call": s["call"],
                "panel": pid,
                "alias": s["alias"],
                "seat": "member",
                "shape": "general",
                "seated": T0 + first + i,
                "status": s["status"],
                "seconds": 0.5,
                "tokens": {},
                "error": s["error"],
                "key": "alice",
                "collection": "bench/a",
            }
            for s in public
        ]
        ledger.record_seats(seats)
        ledger.record_panels(records)
        records, seats = [], []
    return ids


class Held:
    """Holds a background build after its first committed batch until ``release``."""

    def __init__(self):
        self.reached = threading.Event()
        self.go = threading.Event()

    def __call__(self):
        self.reached.set()
        self.go.wait(PATIENCE)

    def release(self):
        self.go.set()


def test_after_a_restart_the_newest_failure_is_found_before_the_old_panels(runs):
    with Ledger(runs) as ledger:
        old = write(ledger, 30, first=0, failing=range(30))  # an old incident
    before = SearchIndex(runs)
    try:
        assert wait_until(lambda: before.catch_up()["complete"] and not before.building)
    finally:
        before.close()
    # while the server was down: many panels that answered, then one new failure
    with Ledger(runs) as ledger:
        quiet = write(ledger, 300, first=1000)
        [newest] = write(ledger, 1, first=5000, failing=[0])

    held = Held()
    index = SearchIndex(runs, inline_bytes=0, batch_panels=20, tail_bytes=64_000, on_batch=held)
    try:
        state = index.catch_up()
        assert not state["complete"] and state["behind_panels"] == 301
        assert held.reached.wait(PATIENCE)
        state = index.state()
        assert not state["complete"] and 0 < state["behind_panels"] < 301
        assert state["indexed"] + state["behind_panels"] == 331
        failures = index.model_seats("m-x", failed=True, limit=5)
        assert failures[0]["panel"] == newest, [f["panel"] for f in failures]
        assert index.find(Filters(model="m-x", status="failed"), limit=1).seqs == [
            int(newest.rsplit("-", 1)[1])
        ]
        # the newest panels come first: what is held of the backlog is its end
        page = index.find(Filters(model="m-y"), limit=400).seqs
        held_quiet = [p for p in quiet if int(p.rsplit("-", 1)[1]) in page]
        assert held_quiet and held_quiet == quiet[len(quiet) - len(held_quiet) :]
    finally:
        held.release()
    try:
        assert wait_until(lambda: index.catch_up()["complete"] and not index.building, PATIENCE)
        state = index.state()
        assert state["indexed"] == 331 and state["behind_panels"] == 0
        found = index.find(Filters(model="m-x", status="failed"), limit=100).seqs
        assert found == [int(p.rsplit("-", 1)[1]) for p in [newest, *old[::-1]]]
        everything = index.find(Filters(model="m-y"), limit=400).seqs
        assert len(everything) == 331 == len(set(everything))
    finally:
        index.close()


def test_a_build_stopped_between_windows_goes_on_where_it_was(runs):
    with Ledger(runs) as ledger:
        ids = write(ledger, 200, first=0, failing=[199])
    held = Held()
    first = SearchIndex(runs, inline_bytes=0, tail_bytes=3000, on_batch=held)
    try:
        first.catch_up()
        assert held.reached.wait(PATIENCE)
    finally:
        held.release()
        first.close()  # stops after the batch it is in
    again = SearchIndex(runs)  # a request's catch-up reads around the window it finds
    try:
        assert wait_until(lambda: again.catch_up()["complete"] and not again.building)
        seqs = again.find(Filters(model="m-x"), limit=300).seqs
        assert seqs == [int(p.rsplit("-", 1)[1]) for p in ids[::-1]]
        assert again.state()["indexed"] == 200
    finally:
        again.close()


def test_the_model_page_lists_the_newest_failure_and_says_how_far_behind_it_is(folder, api):
    """Another process (here the test's own index) builds the index after a restart; the
    dashboard answers from what it has committed so far."""
    runs = folder.gateway_runs
    with Ledger(runs) as ledger:
        write(ledger, 20, first=0, failing=range(20), alias="fast")
    status, page, _ = api.get("/api/models/fast")
    assert status == 200 and page["index"]["complete"], page["index"]
    with Ledger(runs) as ledger:
        write(ledger, 200, first=1000, alias="fast")
        [newest] = write(ledger, 1, first=5000, failing=[0], alias="fast")

    held = Held()
    builder = SearchIndex(runs, inline_bytes=0, batch_panels=20, tail_bytes=4000, on_batch=held)
    try:
        builder.catch_up()
        assert held.reached.wait(PATIENCE)
        status, page, _ = api.get("/api/models/fast")
        assert status == 200, page
        assert page["failures"][0]["panel"] == newest
        assert page["failures"][0]["kind"] == "server_error"
        index = page["index"]
        assert not index["complete"] and 0 < index["behind_panels"] < 201, index
        assert index["behind_panels"] == builder.state()["behind_panels"]
        status, listed, _ = api.get("/api/panels?model=fast&status=failed&limit=1")
        assert [p["panel"] for p in listed["data"]] == [newest]
        assert listed["index"]["behind_panels"] == index["behind_panels"]
    finally:
        held.release()
        builder.close()
    assert wait_until(lambda: api.get("/api/models/fast")[1]["index"]["complete"], PATIENCE)
    status, page, _ = api.get("/api/models/fast")
    assert page["index"]["behind_panels"] == 0 and page["failures"][0]["panel"] == newest


def test_the_count_of_finished_panels_follows_panels_idx_as_it_changes(tmp_path):
    """Slots fill in (0, then an offset), new ones are added, and the file is replaced: each
    count equals a count of the whole file, though only what changed is read again."""
    from array import array

    from panelist.metrics.ledger.ids import FinishedCount

    path = tmp_path / "panels.idx"
    count = FinishedCount(path)
    assert count() is None
    rng = random.Random(7)
    slots = array("Q", [0] * 10)
    for _ in range(40):
        for _ in range(rng.randrange(0, 30)):
            slots.append(0 if rng.random() < 0.3 else rng.randrange(1, 1 << 40))
        for i in rng.sample(range(len(slots)), min(len(slots), 5)):
            slots[i] = slots[i] or rng.randrange(1, 1 << 40)  # a panel ends; never back to 0
        path.write_bytes(slots.tobytes() + b"\0" * rng.randrange(0, 8))  # a half-made slot
        assert count() == len(slots) - slots.count(0)
    path.unlink()
    path.write_bytes(array("Q", [5, 0, 7]).tobytes())  # another file: counted from the start
    assert count() == 2
