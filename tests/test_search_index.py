"""The panels' search index (``metrics/ledger/search.py``) over logs the ledger writes in a data
folder that starts no server: every combination of filters gives what a scan of the logs
would, time ranges are exact whatever the order of the panels' starts, lines of evidence that
come before their panel's line still count, and a torn last line waits until it is whole."""

import random

import pytest

from conftest import wait_until
from panelist.metrics.ledger.ledger import Ledger
from panelist.metrics.ledger.search import Filters, SearchIndex, text_query

T0 = 1_750_000_000.0
WORDS = "parser cache lock retry tokenizer writer client eviction ordering newline".split()
MODELS = ["m-a", "m-b", "m-c", "m-d", "m-e"]


@pytest.fixture
def runs(tmp_path):
    return tmp_path / "runs" / "gateway"


@pytest.fixture
def index(runs):
    ix = SearchIndex(runs)
    try:
        yield ix
    finally:
        ix.close()


def caught_up(index) -> bool:
    """Whether the index covers the logs (a long backlog is built in the background)."""
    return wait_until(lambda: index.catch_up()["complete"] and not index.building)


def seat(pid, label, alias, status, answer):
    return {
        "call": f"{pid}.{label}",
        "seat": label.rstrip("0123456789"),
        "alias": alias,
        "served": alias,
        "status": status,
        "seconds": 0.5,
        "answer": answer if status == "ok" else "",
        "error": "server_error: boom" if status == "error" else "",
        "tokens": {},
    }


def fill(ledger, n, rng, *, started=None):
    """``n`` panels of random collections, keys, models, statuses, words and starts; returns
    the records written (as calls.jsonl has them)."""
    ids = ledger.new_panels(n, T0)
    records, seats = [], []
    for i, pid in enumerate(ids):
        aliases = rng.sample(MODELS, 2)
        public = [
            seat(
                pid,
                f"member{j}",
                a,
                rng.choice(["ok", "ok", "ok", "error", "empty"]),
                " ".join(rng.sample(WORDS, 2)),
            )
            for j, a in enumerate(aliases, 1)
        ]
        record = {
            "panel": pid,
            "collection": rng.choice(["bench/a", "bench/b"]),
            "shape": "general",
            "key": rng.choice(["alice", "bob"]),
            "started": started(i) if started else T0 + i,
            "seconds": 1.0,
            "estimate": 10,
            "reply": "all",
            "skipped": [],
            "prompt": "user: " + " ".join(rng.sample(WORDS, 3)),
            "seats": public,
            "abandoned": rng.random() < 0.1,
        }
        records.append(record)
        seats += [
            {
                "call": s["call"],
                "panel": pid,
                "alias": s["alias"],
                "seat": "member",
                "shape": "general",
                "seated": record["started"],
                "status": s["status"],
                "seconds": 0.5,
                "tokens": {},
                "error": s["error"],
                "key": record["key"],
                "collection": record["collection"],
            }
            for s in public
        ]
    ledger.record_seats(seats)
    ledger.record_panels(records)
    return records


def scanned(records, judged, f: Filters, text=None):
    """What a scan of the records says matches, newest first."""
    out = []
    for r in records:
        seats = r["seats"]
        words = set((r["prompt"] + " " + " ".join(s["answer"] for s in seats)).split())
        if text and not all(w in words for w in text.split()):
            continue
        if f.collection and r["collection"] != f.collection or f.key and r["key"] != f.key:
            continue
        if f.model and f.model not in [s["alias"] for s in seats]:
            continue
        if f.status == "failed":
            failed = [
                s
                for s in seats
                if s["status"] in ("error", "empty") and (f.model is None or s["alias"] == f.model)
            ]
            if not failed:
                continue
        if f.status == "abandoned" and not r["abandoned"]:
            continue
        if f.status == "owed" and (
            r["abandoned"]
            or not any(s["status"] == "ok" and s["call"] not in judged for s in seats)
        ):
            continue
        if (
            f.since is not None
            and r["started"] < f.since
            or f.until is not None
            and r["started"] > f.until
        ):
            continue
        out.append(r["panel"])
    return sorted(out, key=lambda p: -int(p.rsplit("-", 1)[1]))


def test_every_combination_of_filters_gives_what_a_scan_gives(runs, index):
    rng = random.Random(7)
    with Ledger(runs) as ledger:
        records = fill(ledger, 600, rng)
        judged = set()
        for r in rng.sample(records, 150):
            for s in r["seats"]:
                if s["status"] == "ok" and rng.random() < 0.7:
                    ledger.record_verdict(s["call"], useful=rng.random() < 0.5)
                    judged.add(s["call"])
    assert caught_up(index)
    combos = [
        {},
        {"collection": "bench/a"},
        {"key": "bob"},
        {"model": "m-c"},
        {"status": "failed"},
        {"status": "owed"},
        {"status": "abandoned"},
        {"model": "m-c", "status": "failed"},
        {"since": T0 + 100, "until": T0 + 350},
        {"collection": "bench/b", "key": "alice", "status": "owed"},
        {"model": "m-a", "since": T0 + 500},
    ]
    for text in (None, "parser", "cache lock", "newline tokenizer writer"):
        for combo in combos:
            f = Filters(text=text_query(text) if text else None, **combo)
            want = scanned(records, judged, f, text)
            got, cursor = [], None
            while True:  # every page, by cursor
                page, cursor, partial = index.find(f, before=cursor, limit=37)
                assert not partial
                got += [r["panel"] for r in records if int(r["panel"].rsplit("-", 1)[1]) in page]
                if cursor is None:
                    break
            assert sorted(got, key=lambda p: -int(p.rsplit("-", 1)[1])) == want, (text, combo)
            # and in seq order, newest first, each page
            page = index.find(f, limit=1000).seqs
            assert page == sorted(page, reverse=True)


def test_time_ranges_are_exact_whatever_the_order_of_the_starts(runs, index):
    rng = random.Random(3)
    starts = [T0 + rng.uniform(0, 10_000) for _ in range(3000)]  # over three blocks, shuffled
    with Ledger(runs) as ledger:
        records = fill(ledger, 3000, rng, started=lambda i: starts[i])
    assert caught_up(index)
    for since, until in (
        (T0 + 10, T0 + 20),
        (T0 + 5000, None),
        (None, T0 + 3),
        (T0 + 11_000, None),
        (T0 + 9_990, T0 + 10_000),
    ):
        f = Filters(since=since, until=until)
        page = index.find(f, limit=1000).seqs
        want = scanned(records, set(), f)
        assert [int(p.rsplit("-", 1)[1]) for p in want][:1000] == page


def test_evidence_before_its_panels_line_still_counts(runs, index):
    """A picked reply reaches its caller (and may be judged) before the panel's line is
    written; the index follows both logs on its own, in either order."""
    with Ledger(runs) as ledger:
        [pid] = ledger.new_panels(1, T0)
        ledger.record_seated(
            pid, "general", ["m-a", "m-b"], T0, collection="bench/a", awaits_delivery=True
        )
        for label, alias in (("member1", "m-a"), ("member2", "m-b")):
            ledger.record_seat(
                {
                    "call": f"{pid}.{label}",
                    "panel": pid,
                    "alias": alias,
                    "seat": "member",
                    "shape": "general",
                    "seated": T0,
                    "status": "ok",
                    "seconds": 0.1,
                    "tokens": {},
                    "error": "",
                    "key": "alice",
                    "collection": "bench/a",
                }
            )
        ledger.record_verdict(f"{pid}.member1", useful=True)
        assert index.catch_up()["complete"]
        assert index.find(Filters(status="owed"))[0] == []  # no panel line yet
        record = {
            "panel": pid,
            "collection": "bench/a",
            "shape": "general",
            "key": "alice",
            "started": T0,
            "seconds": 1.0,
            "estimate": 10,
            "reply": "pick",
            "prompt": "user: parser",
            "skipped": [],
            "abandoned": False,
            "seats": [
                seat(pid, "member1", "m-a", "ok", "x"),
                seat(pid, "member2", "m-b", "ok", "y"),
            ],
        }
        ledger.record_panel(record)
        index.catch_up()
        # awaiting delivery: nothing owed yet, though member2 has no verdict
        assert index.find(Filters(status="owed"))[0] == []
        ledger.record_delivered(pid, "x")
        index.catch_up()
        assert index.find(Filters(status="owed"))[0] == [0]
        ledger.record_verdict(f"{pid}.member2", useful=False)
        index.catch_up()
        assert index.find(Filters(status="owed"))[0] == []


def test_a_torn_last_line_waits_until_it_is_whole(runs, index):
    with Ledger(runs) as ledger:
        fill(ledger, 2, random.Random(1))
    assert index.catch_up()["complete"] and index.state()["indexed"] == 2
    calls = runs / "calls.jsonl"
    line = calls.read_bytes().splitlines(keepends=True)[-1]
    whole = line.replace(b'-1"', b'-2"').replace(b"-1.", b"-2.")
    with open(calls, "ab") as f:
        f.write(whole[:40])  # a writer killed mid-line
    state = index.catch_up()
    assert state["indexed"] == 2
    with open(calls, "ab") as f:
        f.write(whole[40:])
    assert wait_until(lambda: index.catch_up()["indexed"] == 3)


# -- a damaged file ------------------------------------------------------------------------------
def _scribble(path, rng, *, where: str):
    """Damage the index file as a failing disk or a stray write would, header left intact."""
    size = path.stat().st_size
    with open(path, "r+b") as f:
        if where == "middle":  # random bytes over pages in the middle
            for _ in range(20):
                f.seek(rng.randrange(4096, size - 512))
                f.write(rng.randbytes(512))
        elif where == "zeros":  # whole pages of zeros
            f.seek(4096 * 3)
            f.write(bytes(4096 * 8))
        elif where == "tail":  # the last pages overwritten
            f.seek(size - 4096 * 4)
            f.write(rng.randbytes(4096 * 4))


FILTERS = [
    Filters(text=text_query("parser")),
    Filters(key="alice", status="failed"),
    Filters(text=text_query("cache lock"), collection="bench/b"),
    Filters(model="m-c"),
]


@pytest.mark.parametrize("where", ["middle", "zeros", "tail"])
def test_a_damaged_file_is_set_aside_searches_answer_and_the_rebuild_answers_the_same(runs, where):
    with Ledger(runs) as ledger:
        fill(ledger, 3000, random.Random(11))
    first = SearchIndex(runs)
    try:
        assert caught_up(first)
        before = [first.find(f, limit=40) for f in FILTERS]
    finally:
        first.close()
    path = runs / "search.sqlite"
    _scribble(path, random.Random(5), where=where)
    damaged = path.read_bytes()

    index = SearchIndex(runs)  # a restart: the damage is found on open, or on the first read
    try:
        with Ledger(runs) as ledger:  # and the gateway goes on writing
            fill(ledger, 1, random.Random(12))
        for f in FILTERS:
            state = index.catch_up()  # never raises: answers from what is rebuilt so far
            index.find(f, limit=40)
        assert state["rebuilding"] or state["set_aside"], state
        assert caught_up(index)
        state = index.state()
        assert state["rebuilding"] is False and state["indexed"] == 3001
        aside = runs / state["set_aside"]
        assert state["set_aside"].startswith("search.sqlite.damaged-")
        assert aside.read_bytes() == damaged  # kept as it was found, never deleted
        # the same as before, below the panel written since
        assert [index.find(f, before=3000, limit=40) for f in FILTERS] == before
    finally:
        index.close()


def test_a_file_that_is_not_a_database_is_set_aside_too(runs, index):
    with Ledger(runs) as ledger:
        fill(ledger, 20, random.Random(3))
    runs.mkdir(parents=True, exist_ok=True)
    (runs / "search.sqlite").write_bytes(b"not a database at all\n" * 400)
    assert caught_up(index)
    state = index.state()
    assert state["indexed"] == 20 and state["set_aside"]
    assert (runs / state["set_aside"]).read_bytes() == b"not a database at all\n" * 400


# -- the budget --------------------------------------------------------------------------------
def test_a_search_whose_budget_runs_out_says_partial_and_paging_on_passes_over_nothing(runs):
    rng = random.Random(21)
    with Ledger(runs) as ledger:
        records = fill(ledger, 3000, rng)
    # a text and a filter that each match many panels and rarely the same one: a long walk
    f = Filters(text=text_query("newline ordering eviction"), key="bob", status="abandoned")
    whole = SearchIndex(runs)
    try:
        assert caught_up(whole)
        want = whole.find(f, limit=100_000)
        assert not want.partial
    finally:
        whole.close()
    assert want.seqs == [
        int(p.rsplit("-", 1)[1]) for p in scanned(records, set(), f, "newline ordering eviction")
    ]
    small = SearchIndex(runs, budget_rows=50)
    try:
        first = small.find(f, limit=100_000)
        assert first.partial and first.next is not None
        got, page, pages = [], first, 1
        while True:
            got += page.seqs
            if page.next is None:
                break
            page = small.find(f, before=page.next, limit=100_000)
            pages += 1
            assert pages < 10_000
        assert got == want.seqs and pages > 1
    finally:
        small.close()
