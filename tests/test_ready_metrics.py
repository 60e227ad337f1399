"""``GET /ready`` (able to serve now) and ``GET /metrics`` (the Prometheus text format) on a
real gateway: what they answer, that a Prometheus parser reads every family, that the figures
follow the panels served and the verdicts given, and who may read them."""

import urllib.error
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from conftest import DASHBOARD_TOKEN, PATIENCE, Gateway
from panelist.gateway import make_gateway


def scrape(gw, headers=None) -> tuple[int, str, dict]:
    req = urllib.request.Request(gw.url + "/metrics", headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=PATIENCE) as resp:
            return resp.status, resp.read().decode(), dict(resp.headers)
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, exc.read().decode(), dict(exc.headers)


def families(text: str) -> dict:
    return {f.name: f for f in text_string_to_metric_families(text)}


def sample(fams, family, name, **labels):
    found = [
        s.value
        for s in fams[family].samples
        if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
    ]
    assert len(found) == 1, (family, name, labels, found)
    return found[0]


def ask(gw):
    status, body, _ = gw.post(
        "/v1/chat/completions",
        {
            "model": "bench/trio",
            "messages": [{"role": "user", "content": "Review: def add(a, b): return a - b"}],
        },
    )
    assert status == 200, body
    return body


def test_ready_says_every_check_passed(gateway):
    status, body, _ = gateway.get("/ready")
    assert status == 200 and body["ready"] is True
    assert body["checks"]["ledger"]["ok"] is True
    assert "config" not in body["checks"]  # no database: the files are the config


def test_metrics_follow_the_panels_and_verdicts(gateway):
    status, text, headers = scrape(gateway)
    assert status == 200 and headers["Content-Type"].startswith("text/plain; version=0.0.4")
    before = families(text)
    assert {
        "panelist_seats",
        "panelist_seat_seconds",
        "panelist_verdicts",
        "panelist_verdicts_owed",
        "panelist_index_lag_records",
        "panelist_worker_info",
    } <= set(before)
    body = ask(gateway)
    seats = {s["alias"]: s for s in body["bench"]["seats"]}
    useful = next(iter(seats.values()))
    status, verdict, _ = gateway.post("/bench/verdict", {"call": useful["call"], "useful": True})
    assert status == 200, verdict
    fams = families(scrape(gateway)[1])
    for alias in seats:
        assert (
            sample(fams, "panelist_seats", "panelist_seats_total", model=alias, status="answered")
            == 1
        )
        # the histogram's buckets are cumulative and end with every answered seat
        buckets = [
            s
            for s in fams["panelist_seat_seconds"].samples
            if s.name == "panelist_seat_seconds_bucket" and s.labels["model"] == alias
        ]
        counts = [s.value for s in buckets]
        assert counts == sorted(counts) and buckets[-1].labels["le"] == "+Inf"
        assert (
            counts[-1]
            == 1
            == sample(fams, "panelist_seat_seconds", "panelist_seat_seconds_count", model=alias)
        )
    assert (
        sample(fams, "panelist_verdicts", "panelist_verdicts", model=useful["alias"], useful="true")
        == 1
    )
    assert sample(fams, "panelist_verdicts_owed", "panelist_verdicts_owed") == len(seats) - 1
    for alias in seats:  # none of them found its endpoint full
        assert (
            sample(
                fams,
                "panelist_admission_refusals",
                "panelist_admission_refusals_total",
                model=alias,
            )
            == 0
        )
    # no database: no database figures
    assert not [name for name in fams if name.startswith("panelist_db_")]


def test_metrics_count_seats_refused_at_an_endpoints_limit(gateway, home):
    from conftest import set_limits
    from panelist.metrics.roster.roster import Roster

    Roster(home).set_limits("endpoint", "sim", {"max_concurrent": 1, "rpm": 1})
    set_limits(home, seat_timeout=1, max_explorers=0)
    status, body, _ = gateway.post(
        "/v1/chat/completions",
        {"model": "bench/trio", "messages": [{"role": "user", "content": "Review: x = 1"}]},
    )
    assert status == 200, body
    refused = [s["alias"] for s in body["bench"]["seats"] if s["status"] != "ok"]
    assert len(refused) == 2
    fams = families(scrape(gateway)[1])
    for s in body["bench"]["seats"]:
        assert sample(
            fams,
            "panelist_admission_refusals",
            "panelist_admission_refusals_total",
            model=s["alias"],
        ) == (1 if s["alias"] in refused else 0)
    assert (
        sample(fams, "panelist_admission_waiting", "panelist_admission_waiting", endpoint="sim")
        == 0
    )


def test_metrics_need_the_admin_token_once_one_is_set(home):
    with Gateway(make_gateway(home, env={"PANELIST_ADMIN_TOKEN": DASHBOARD_TOKEN})) as gw:
        status, text, headers = scrape(gw)
        assert status == 401 and "admin token" in text and DASHBOARD_TOKEN not in text
        assert headers["WWW-Authenticate"].startswith("Bearer")
        assert scrape(gw, {"Authorization": "Bearer not-the-token-at-all-000"})[0] == 401
        status, text, _ = scrape(gw, {"Authorization": f"Bearer {DASHBOARD_TOKEN}"})
        assert status == 200 and "panelist_seats_total" in text
        # readiness says nothing private: any prober may ask
        assert gw.get("/ready")[0] == 200
