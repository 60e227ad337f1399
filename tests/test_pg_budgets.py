"""Spend caps held across instances on one PostgreSQL: what a key or collection spent is counted
in the database (``spenddb``), so a cap reached through one instance refuses on every other.
Each "instance" has its own data folder, so nothing but the database holds them together; a
real cluster (``pgcluster``), gateways run in process and the simulated upstream."""

import threading

from conftest import TEST_MODELS
from inprocess import call
from panelist.gateway import make_gateway
from panelist.metrics.panel.budgets import Budgets
from panelist.metrics.panel.spenddb import DatabaseSpend
from panelist.metrics.roster.roster import Roster
from test_pg_limits import make_home

ASK = {"model": "bench/trio", "messages": [{"role": "user", "content": "Review: x = 1"}]}


def priced_home(path, url, upstream):
    home = make_home(path, url, upstream)
    roster = Roster(home)
    for alias in TEST_MODELS:
        roster.add_model(
            alias, "sim", family=alias, context=100_000, price_in=1000.0, price_out=2000.0
        )
    return home


def test_additions_from_many_instances_at_once_are_all_counted(pg_url):
    spends = [DatabaseSpend(pg_url) for _ in range(3)]
    try:

        def add(spend):
            for _ in range(20):
                spend.add("key-app", 0.25, 1_000_000.0)

        threads = [threading.Thread(target=add, args=(s,)) for s in spends for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for spend in spends:  # 3 instances × 2 threads × 20 additions of 0.25
            assert spend.spent("key-app", 1_000_000.0) == {"day": 30.0, "month": 30.0}
        # another day of the same month: the day starts from zero, the month goes on
        assert spends[0].spent("key-app", 1_000_000.0 + 86_400) == {"day": 0.0, "month": 30.0}
        assert spends[1].spent("key-other", 1_000_000.0) == {"day": 0.0, "month": 0.0}
    finally:
        for s in spends:
            s.close()


def test_a_cap_reached_through_one_instance_refuses_on_the_other(tmp_path, pg_url, sim):
    homes = [priced_home(tmp_path / f"host{i}", pg_url, sim.url) for i in range(2)]
    for home in homes:  # every host is configured alike
        Budgets(home).set("collection", "trio", day="1000")
    first, second = (make_gateway(home, env={}) for home in homes)
    try:
        status, _, reply = call(first, "POST", "/v1/chat/completions", ASK)
        assert status == 200, reply
        spent = first.parts.panels.budgets.report("collection", "trio")["day"]["spent"]
        assert spent > 0
        # the second instance never asked a seat, yet sees what the first spent
        assert second.parts.panels.budgets.report("collection", "trio")["day"]["spent"] == spent
        assert not list((homes[1].gateway_runs / "spend").glob("*")), "no spend file is made"
        for home in homes:
            Budgets(home).set("collection", "trio", day=str(spent))
        before = sum(sim.count(a) for a in TEST_MODELS)
        status, _, reply = call(second, "POST", "/v1/chat/completions", ASK)
        assert status == 429, reply
        assert reply["error"]["code"] == "budget_exceeded"
        assert reply["error"]["budget"]["spent"] == spent
        assert sum(sim.count(a) for a in TEST_MODELS) == before, "no seat was asked"
    finally:
        first.close()
        second.close()


def test_spend_added_while_the_database_is_down_is_counted_once_it_is_back(pg_url, pg_cluster):
    spend = DatabaseSpend(pg_url)
    try:
        spend.add("collection-trio", 1.5, 1_000_000.0)
        pg_cluster.stop()
        try:
            # the panel it charges was answered: adding never fails it, the amount is kept
            spend.add("collection-trio", 2.0, 1_000_000.0)
        finally:
            pg_cluster.start()
        assert spend.spent("collection-trio", 1_000_000.0) == {"day": 3.5, "month": 3.5}
        other = DatabaseSpend(pg_url)
        try:  # stored, not only remembered by the instance that kept it
            assert other.spent("collection-trio", 1_000_000.0) == {"day": 3.5, "month": 3.5}
        finally:
            other.close()
    finally:
        spend.close()
