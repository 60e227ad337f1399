"""Budgets: spend caps per gateway key and per collection. A panel that would pass a cap is
refused before any seat is asked (429 ``budget_exceeded`` with the cap, the spend and the
reset); explorers are given up first near a cap; an unpriced model never sits under a money cap
unless the cap allows it; the spend is counted once across processes. In process, over the
simulated upstream."""

import json
import threading

import pytest

from apikit import covers
from conftest import TEST_MODELS
from inprocess import call
from panelist.gateway import make_gateway
from panelist.metrics.cli.main import main
from panelist.metrics.panel.budgets import Budgets, Spend
from panelist.metrics.roster.roster import Roster

ASK = {"model": "bench/trio", "messages": [{"role": "user", "content": "Review: x = 1"}]}


def price(home, *aliases, price_in=1000.0, price_out=2000.0):
    roster = Roster(home)
    for alias in aliases or TEST_MODELS:
        roster.add_model(
            alias, "sim", family=alias, context=100_000, price_in=price_in, price_out=price_out
        )


def cli(capsys, home, *argv):
    code = main([*argv, "--data", str(home.root)])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture()
def keyed(home):
    server = make_gateway(home, env={"PANELIST_REQUIRE_KEYS": "1"})
    try:
        yield server
    finally:
        server.close()


@pytest.fixture()
def built(home):
    server = make_gateway(home, env={})
    try:
        yield server
    finally:
        server.close()


def asked(sim) -> int:
    return sum(sim.count(a) for a in TEST_MODELS)


def test_a_capped_key_is_refused_with_the_numbers_and_no_seat_is_asked(home, keyed, sim, capsys):
    price(home)
    code, secret, _ = cli(
        capsys, home, "key", "create", "app", "--budget-day", "5", "--budget-month", "100"
    )
    assert code == 0
    auth = {"Authorization": f"Bearer {secret.strip()}"}
    status, _, reply = call(keyed, "POST", "/v1/chat/completions", ASK, auth)
    assert status == 200, reply
    code, out, _ = cli(capsys, home, "--json", "key", "list")
    [row] = json.loads(out)
    spent = row["budget"]["day"]["spent"]
    assert spent > 0 and row["budget"]["month"]["spent"] == spent
    assert row["budget"]["day"]["cap"] == 5.0

    code, out, _ = cli(capsys, home, "key", "budget", "app", "--budget-day", str(spent))
    assert code == 0 and f"of {spent:.2f} USD this day" in out
    before = asked(sim)
    status, headers, reply = call(keyed, "POST", "/v1/chat/completions", ASK, auth)
    assert status == 429, reply
    err = reply["error"]
    assert err["code"] == "budget_exceeded"
    assert err["budget"]["cap"] == spent and err["budget"]["spent"] == pytest.approx(spent)
    assert err["budget"]["period"] == "day" and err["budget"]["resets"].endswith("T00:00:00Z")
    assert "key 'app' is at its daily spend cap" in err["message"]
    assert err["budget"]["resets"] in err["message"]
    assert int(headers["Retry-After"]) >= 1
    assert asked(sim) == before  # refused before any seat was asked

    # raised again, the cap lets it through
    cli(capsys, home, "key", "budget", "app", "--budget-day", "none")
    status, _, reply = call(keyed, "POST", "/v1/chat/completions", ASK, auth)
    assert status == 200, reply


def seats_of(reply) -> list[str]:
    return [s["seat"] for s in reply["bench"]["seats"]]


def test_explorers_are_dropped_first_near_a_collection_cap(home, built):
    price(home)
    status, _, reply = call(built, "POST", "/v1/chat/completions", ASK)
    assert status == 200 and "explorer" in seats_of(reply), reply
    budgets = Budgets(home)
    budgets.set("collection", "trio", day=1.0)
    budgets.spend.add("collection-trio", 0.95)  # 95% of the day's cap spent
    status, _, reply = call(built, "POST", "/v1/chat/completions", ASK)
    assert status == 200, reply
    assert seats_of(reply) == ["member", "member", "member"]
    held = [
        s["alias"]
        for s in reply["bench"]["skipped"]
        if s["why"] == "held back: collection trio is near its daily spend cap"
    ]
    assert len(held) == 2  # the two explorers the collection would have seated
    assert budgets.report("collection", "trio")["day"]["spent"] > 0.95  # this panel counted
    budgets.spend.add("collection-trio", 0.1)
    status, _, reply = call(built, "POST", "/v1/chat/completions", ASK)
    assert status == 429 and reply["error"]["budget"]["subject"] == "collection", reply


def test_an_unpriced_model_is_refused_under_a_cap_unless_allowed(home, built, sim, capsys):
    price(home, "mid", "slow", "x-one", "x-two", "x-three")  # fast has no price
    code, _, _ = cli(
        capsys,
        home,
        "collection",
        "save",
        "trio",
        "--members",
        "fast,mid,slow",
        "--budget-day",
        "10",
    )
    assert code == 0
    status, _, reply = call(built, "POST", "/v1/chat/completions", ASK)
    assert status == 403 and reply["error"]["code"] == "budget_unpriced", reply
    assert "fast" in reply["error"]["message"] and "--allow-unpriced" in reply["error"]["message"]
    assert "daily" not in reply["error"]["message"]
    assert asked(sim) == 0
    code, out, _ = cli(
        capsys, home, "collection", "save", "trio", "--members", "fast,mid,slow", "--allow-unpriced"
    )
    assert code == 0 and "unpriced allowed" in out
    status, _, reply = call(built, "POST", "/v1/chat/completions", ASK)
    assert status == 200, reply


def test_a_bad_amount_is_refused_and_no_key_is_made(home, capsys):
    code, _, err = cli(capsys, home, "key", "create", "app", "--budget-day", "-1")
    assert code != 0 and "--budget-day must be an amount of 0 or more" in err
    code, out, _ = cli(capsys, home, "--json", "key", "list")
    assert json.loads(out) == []
    code, _, err = cli(capsys, home, "key", "budget", "ghost", "--budget-day", "1")
    assert code != 0 and "unknown key 'ghost'" in err


def test_spend_is_counted_once_across_writers(home):
    folders = [Spend(home.gateway_runs / "spend"), Spend(home.gateway_runs / "spend")]

    def add(spend):
        for _ in range(200):
            spend.add("key-app", 0.25)

    threads = [threading.Thread(target=add, args=(s,)) for s in folders]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert folders[0].spent("key-app") == {"day": 100.0, "month": 100.0}


@covers("GET", "/api/budgets")
@covers("PUT", "/api/budgets/{kind}/{name}")
def test_the_api_lists_spend_against_caps_and_changes_them(home, built):
    from panelist.serve import make_dashboard

    price(home)
    call(built, "POST", "/v1/chat/completions", ASK)  # uncapped: nothing is counted
    dash = make_dashboard(home, env={"PANELIST_LOGIN_PAUSE": "0"})
    try:
        status, _, body = call(dash, "PUT", "/api/budgets/collection/trio", {"day": 1.0})
        assert status == 200 and body["budget"]["day"]["cap"] == 1.0, body
        assert body["budget"]["day"]["spent"] == 0 and body["near_cap"] is False
        Budgets(home).spend.add("collection-trio", 0.9)
        status, _, body = call(dash, "GET", "/api/budgets")
        assert status == 200 and body["keys"] == []
        [trio] = body["collections"]
        assert trio["near_cap"] is True and trio["budget"]["day"]["spent"] == 0.9
        status, _, body = call(dash, "PUT", "/api/budgets/collection/trio", {"remove": ["day"]})
        assert status == 200 and body["budget"] is None, body
        status, _, body = call(dash, "PUT", "/api/budgets/collection/none", {"day": 1})
        assert status == 404 and "GET /api/budgets" in body["error"]["message"], body
        status, _, body = call(dash, "PUT", "/api/budgets/collection/trio", {"day": -1})
        assert status == 400 and "day" in body["error"]["message"], body
    finally:
        dash.close()
