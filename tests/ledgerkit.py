"""What the ledger query tests share (``test_ledger_queries.py``, ``test_ledger_replay.py``): a
gateway folder in a temporary directory, seat and panel lines written as the gateway writes them,
and every query's answer at once, for comparing two views of one folder."""

import pytest

T0 = 1_750_000_000.0  # 2025-06-15 15:06:40 UTC
DAY = 86400


@pytest.fixture
def runs(tmp_path):
    return tmp_path / "runs" / "gateway"


def seat(
    ledger,
    pid,
    label,
    alias,
    *,
    shape="general",
    status="ok",
    seconds=1.0,
    error="",
    key="k1",
    collection="bench/c",
    seated=T0,
):
    call = f"{pid}.{label}"
    ledger.record_seat(
        {
            "call": call,
            "panel": pid,
            "alias": alias,
            "seat": label.rstrip("0123456789"),
            "shape": shape,
            "seated": seated,
            "status": status,
            "seconds": seconds,
            "tokens": {},
            "error": error,
            "key": key,
            "collection": collection,
        }
    )
    return call


def panel(
    ledger,
    seats,
    *,
    shape="general",
    key="k1",
    collection="bench/c",
    seated=T0,
    finish=True,
    merger=None,
    abandoned=False,
):
    """A panel as the gateway writes it: "seated" line, seat lines, then (if ``finish``) its
    calls.jsonl line. ``seats``: (label, alias, status, seconds, error) tuples."""
    pid = ledger.new_panel(seated)
    ledger.record_seated(pid, shape, [s[1] for s in seats], seated, collection=collection)
    public = []
    for label, alias, status, seconds, error in seats:
        call = seat(
            ledger,
            pid,
            label,
            alias,
            shape=shape,
            status=status,
            seconds=seconds,
            error=error,
            key=key,
            collection=collection,
            seated=seated,
        )
        public.append(
            {
                "call": call,
                "seat": label.rstrip("0123456789"),
                "alias": alias,
                "status": status,
                "seconds": seconds,
                "answer": "secret answer",
                "error": error,
                "tokens": {},
                "served": alias,
            }
        )
    record = {
        "panel": pid,
        "collection": collection,
        "shape": shape,
        "key": key,
        "started": seated,
        "seconds": 2.5,
        "estimate": 10,
        "reply": "all",
        "prompt": "the prompt",
        "seats": public,
        "skipped": [],
        "abandoned": abandoned,
    }
    if merger is not None:
        call = seat(
            ledger,
            pid,
            "merger",
            merger,
            shape=shape,
            key=key,
            collection=collection,
            seated=seated,
        )
        record["merger"] = {
            "call": call,
            "seat": "merger",
            "alias": merger,
            "status": "ok",
            "seconds": 1.0,
            "answer": "merged",
            "error": "",
            "tokens": {},
            "served": merger,
        }
    if finish:
        ledger.record_panel(record)
    return pid, [p["call"] for p in public]


def ok(label, alias, seconds=1.0):
    return (label, alias, "ok", seconds, "")


def everything(ledger, now=T0):
    """Every query's answer, for comparing two views of one folder."""
    page, nxt = ledger.panels_page(None, 1000)
    after, cursor = ledger.panels_after(None, 1000, now=now)
    return {
        "all": ledger.model_stats(),
        "shapes": ledger.shapes(),
        "by_shape": {s: ledger.model_stats(s) for s in ledger.shapes()},
        "collections": ledger.collection_stats(),
        "buckets": ledger.buckets(60, now=now),
        "owed": ledger.owed_count(),
        "owed_k2": ledger.owed_count("k2"),
        "queue": [r["call"] for r in ledger.pending(limit=10_000, oldest=True)],
        "page": page,
        "next": nxt,
        "after": after,
        "cursor": cursor,
        "latest": ledger.latest_panel(),
        "failing": ledger.failing(1, 3),
        "probes": ledger.probes(),
        "usage": {w: ledger.usage(w, now=now + 600) for w in ("hour", "day", "week")},
    }
