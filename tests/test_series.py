"""``GET /api/series``: seats, failures and answer-time quantiles per time bucket for a model, an
endpoint, a gateway key and the whole gateway, called in process over a data folder whose seats
are written through the ledger's own write path (``test_usage.write_seats``'s shape)."""

import time

import pytest

from panelist.metrics.ledger.histogram import RESOLUTION
from panelist.metrics.roster.roster import Roster
from panelist.metrics.server.keys import Keys
from panelist.serve import make_dashboard
from inprocess import Caller
from apikit import covers
from test_usage import write_seats

HOUR = 3600.0


def write(home, alias, seconds, *, seated, status="ok", key="team-a", endpoint="sim"):
    """One panel per entry of ``seconds`` for ``alias``, started at ``seated``."""
    write_seats(home, alias, seconds, seated=seated, status=status, key=key, endpoint=endpoint)


def series(api, query: str) -> dict:
    status, body, _ = api.get(f"/api/series?{query}")
    assert status == 200, body
    return body


def start_of_hour(now: float) -> float:
    return now // HOUR * HOUR


@covers("GET", "/api/series")
def test_a_models_day_has_a_bucket_per_hour_with_its_own_quantiles(api, folder):
    now = time.time()
    this_hour = start_of_hour(now)
    write(folder, "fast", [2.45] * 20, seated=this_hour - 3 * HOUR + 10)
    write(folder, "fast", [2.75] * 19, seated=this_hour - HOUR + 10)
    write(folder, "fast", [9.0], seated=this_hour - HOUR + 20, status="error")
    body = series(api, "model=fast&window=day")
    assert body["width"] == 3600 and body["window"] == "day" and body["scope"] == "model"
    buckets = body["buckets"]
    # the newest bucket holds now (the next hour, if it turned since `now` was read)
    assert len(buckets) == 24 and buckets[-1]["start"] in (this_hour, this_hour + HOUR)
    by_start = {b["start"]: b for b in buckets}
    early, late = by_start[this_hour - 3 * HOUR], by_start[this_hour - HOUR]
    assert early["seats"] == 20 and early["failed"] == 0 and early["error_rate"] == 0
    assert late["seats"] == 20 and late["failed"] == 1 and late["error_rate"] == 0.05
    # each bucket its own quantile, read apart although a tenth apart
    assert abs(early["p50"] - 2.45) <= RESOLUTION * 2.45 + 0.001
    assert abs(late["p95"] - 2.75) <= RESOLUTION * 2.75 + 0.001
    assert early["p50"] < late["p50"]
    # a bucket without an answer has no quantile, not a zero
    empty = by_start[this_hour - 2 * HOUR]
    assert empty["seats"] == 0 and empty["p50"] is None and empty["p95"] is None
    assert empty["error_rate"] is None
    total = body["total"]
    assert total["seats"] == 40 and total["failed"] == 1 and total["answered"] == 39
    assert "p95" in body["quantiles"]


def test_the_window_switch_changes_the_buckets(api, folder):
    write(folder, "fast", [1.0] * 3, seated=time.time() - 60)
    hour, week = series(api, "model=fast&window=hour"), series(api, "model=fast&window=week")
    assert (len(hour["buckets"]), hour["width"]) == (12, 300)
    assert (len(week["buckets"]), week["width"]) == (7, 86400)
    assert sum(b["seats"] for b in hour["buckets"]) == week["buckets"][-1]["seats"] == 3


def test_an_endpoint_counts_the_seats_served_through_it(api, folder):
    Roster(folder).add_endpoint("other", "http://127.0.0.1:9/v1")
    Roster(folder).add_model("elsewhere", "other", family="elsewhere", context=100_000)
    now = time.time() - 30
    write(folder, "fast", [1.0] * 4, seated=now)
    write(folder, "mid", [3.0] * 2, seated=now, status="error")
    write(folder, "elsewhere", [1.0] * 5, seated=now, endpoint="other")
    body = series(api, "endpoint=sim&window=hour")
    assert "fast" in body["models"] and "elsewhere" not in body["models"]
    total = body["total"]
    assert (total["seats"], total["failed"], total["answered"]) == (6, 2, 4)
    assert sum(b["seats"] for b in body["buckets"]) == 6
    assert series(api, "endpoint=other&window=hour")["total"]["seats"] == 5
    assert series(api, "model=fast&window=hour")["total"]["seats"] == 4
    # seats a model made through another endpoint (before it moved) count for that endpoint
    write(folder, "fast", [1.0] * 2, seated=now, endpoint="other")
    assert series(api, "endpoint=other&window=hour")["total"]["seats"] == 7
    assert series(api, "endpoint=sim&window=hour")["total"]["seats"] == 6
    assert series(api, "model=fast&window=hour")["total"]["seats"] == 6


def test_a_key_and_the_whole_gateway(api, folder):
    Keys(folder).create("team-a")
    Keys(folder).create("team-b")
    now = time.time() - 30
    write(folder, "fast", [1.0] * 4, seated=now, key="team-a")
    write(folder, "mid", [2.0] * 3, seated=now, key="team-b")
    assert series(api, "key=team-a&window=hour")["total"]["seats"] == 4
    assert series(api, "key=team-b&window=day")["total"]["seats"] == 3
    everything = series(api, "all=1&window=hour")
    assert everything["scope"] == "all" and everything["total"]["seats"] == 7


def test_the_key_and_gateway_slots_survive_a_snapshot(folder):
    Keys(folder).create("team-a")
    write(folder, "fast", [1.0] * 4, seated=time.time() - 30, key="team-a")
    for _ in range(2):  # each server opens from the snapshot the writer (or the last) saved
        server = make_dashboard(folder, env={})
        try:
            ledger = server.parts.panels.ledger
            assert ledger.from_snapshot is True and ledger.replayed == 0
            api = Caller(server)
            assert series(api, "key=team-a&window=hour")["total"]["seats"] == 4
            assert series(api, "all=1&window=week")["total"]["seats"] == 4
        finally:
            server.close()


@pytest.mark.parametrize(
    "query, status, words",
    [
        ("window=day", 400, "exactly one of model=ALIAS"),
        ("model=fast&key=team-a", 400, "model and key"),
        ("model=fast&window=month", 400, "'window' must be one of hour, day, week"),
        ("model=nobody", 404, "unknown model 'nobody'"),
        ("endpoint=nowhere", 404, "GET /api/endpoints"),
        ("key=nobody", 404, "unknown gateway key 'nobody'"),
        ("all=yes", 400, "all=1"),
    ],
)
def test_a_bad_question_says_what_to_send(api, query, status, words):
    got, body, _ = api.get(f"/api/series?{query}")
    assert got == status, body
    assert words in body["error"]["message"], body
