"""Limits held across instances on one PostgreSQL: a key's requests a minute (``ratedb``) and an
endpoint's admission (``admitdb``: slots, rate log, pause). Each "instance" has its own data
folder, so nothing but the database can hold them together; a real cluster (``pgcluster``), real
gateways on port 0 and the simulated upstream, which counts the calls it works on at once."""

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from conftest import PATIENCE, TEST_MODELS, Gateway, set_limits, wait_until
from panelist.gateway import make_gateway
from panelist.metrics.errors import AtLimit, DatabaseUnreachable
from panelist.metrics.home import open_home
from panelist.metrics.roster.collection import Collections
from panelist.metrics.roster.roster import Roster
from panelist.metrics.server.keys import Keys
from panelist.metrics.server.ratedb import DatabaseRateCounter
from panelist.metrics.server.ratelimit import RateCounter
from panelist.metrics.upstream.admission import Admission
from panelist.metrics.upstream.admitdb import DatabaseStore

WORKER = Path(__file__).resolve().parent / "admission_worker.py"


def make_home(path, url, upstream=None):
    """A data folder on the database: endpoint ``ep`` (models ``m``, ``n``, never called), or
    with ``upstream`` the test models on endpoint ``sim`` there."""
    home = open_home(path, database=url)
    roster = Roster(home)
    if upstream is None:
        roster.add_endpoint("ep", "http://127.0.0.1:9/v1")
        roster.add_model("m", "ep")
        roster.add_model("n", "ep")
        return home
    roster.add_endpoint("sim", upstream)
    for alias in TEST_MODELS:
        roster.add_model(alias, "sim", family=alias, context=100_000)
    Collections(home).save(
        roster.view(),
        "trio",
        ["fast", "mid", "slow"],
        description="Three simulated reviewers",
        tags=["test"],
    )
    return home


def limit(homes, kind="endpoint", name="ep", **limits):
    for home in homes:  # every host is configured alike
        Roster(home).set_limits(kind, name, limits)


def configure(homes, limits=None, **gateway):
    """Edit the first instance's roster limits of ``sim`` (and its gateway.json) and wait until
    the others have the edit, which reaches them through the database."""
    first, others = homes[0], homes[1:]
    if limits:
        Roster(first).set_limits("endpoint", "sim", limits)
    if gateway:
        set_limits(first, **gateway)
    want = Roster(first).view().endpoint_limits.get("sim")
    for home in others:
        assert wait_until(
            lambda: (
                Roster(home).view().endpoint_limits.get("sim") == want
                and all(
                    json.loads(home.file("gateway.json").read_text()).get(k) == v
                    for k, v in gateway.items()
                )
            )
        ), "the edit never reached the other instance"


@pytest.fixture()
def instances(tmp_path, pg_url):
    """``make(n, window=60)``: n Admission objects, each on its own data folder and its own
    connections to the one database, as n hosts would be."""
    made = []

    def make(n, **kw):
        homes = [make_home(tmp_path / f"host{len(made) + i}", pg_url) for i in range(n)]
        for home in homes:
            made.append(Admission.of_home(home, **kw))
        return homes, made[-n:]

    yield make
    for a in made:
        a.close()


def run_all(target, args_list):
    """``target(*args)`` on one thread each; what each raised (None for none), in order."""
    errors = [None] * len(args_list)

    def one(i, args):
        try:
            target(*args)
        except BaseException as exc:
            errors[i] = exc

    threads = [threading.Thread(target=one, args=(i, a)) for i, a in enumerate(args_list)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(PATIENCE * 4)
    assert not any(t.is_alive() for t in threads), "a caller never came back"
    return errors


# -- admission --------------------------------------------------------------------------------
def test_the_data_folder_with_a_database_shares_admission_through_it(instances, pg_url):
    _, (a,) = instances(1)
    assert isinstance(a.store, DatabaseStore)
    plain = Admission.of_home(open_home(a.home.root.parent / "plain"))
    try:
        assert not isinstance(plain.store, DatabaseStore)
    finally:
        plain.close()


def test_max_concurrent_holds_across_instances(instances):
    homes, (a, b) = instances(2)
    limit(homes, max_concurrent=2)
    with a.slot("ep", "m", wait=0), b.slot("ep", "n", wait=0):
        for admission in (a, b):  # the two slots are the endpoint's, whoever holds them
            assert not admission.has_room("ep", "m")
            with pytest.raises(AtLimit) as refused:
                with admission.slot("ep", "m", wait=0):
                    pass
            assert "endpoint 'ep' is at its limit of 2 call(s) at once" in refused.value.message
        assert a.status("endpoint", "ep")["running"] == 2
        assert b.status("endpoint", "ep")["running"] == 2
    assert a.has_room("ep", "m") and b.status("endpoint", "ep")["running"] == 0


def test_many_callers_on_three_instances_never_exceed_the_slots(instances):
    homes, admissions = instances(3)
    limit(homes, max_concurrent=2)
    lock = threading.Lock()
    seen = {"running": 0, "peak": 0, "done": []}

    def call(admission, tag):
        with admission.slot("ep", "m", wait=PATIENCE * 3):
            with lock:
                seen["running"] += 1
                seen["peak"] = max(seen["peak"], seen["running"])
            threading.Event().wait(0.02)  # the "model call" holding the slot
            with lock:
                seen["running"] -= 1
                seen["done"].append(tag)

    args = [(adm, f"{i}-{j}") for i, adm in enumerate(admissions) for j in range(6)]
    assert run_all(call, args) == [None] * len(args)
    assert len(seen["done"]) == 18 and seen["peak"] <= 2


def test_rpm_holds_across_instances(instances):
    window = 1.0
    homes, (a, b) = instances(2, window=window)
    limit(homes, rpm=3)
    times, lock = [], threading.Lock()

    def call(admission):
        with admission.slot("ep", "m", wait=PATIENCE) as admitted:
            with lock:
                times.append(admitted.at)

    assert run_all(call, [(a,), (b,)] * 4) == [None] * 8
    # the times are the database's, the one clock the instances share: any rpm + 1 of them
    # span more than a window
    times.sort()
    assert len(times) == 8
    assert all(times[i + 3] - times[i] >= window for i in range(len(times) - 3)), times
    # a call that could not get in within its wait is refused at once, on either instance
    limit(homes, rpm=1)
    with pytest.raises(AtLimit) as refused:
        for admission in (a, b, a):
            with admission.slot("ep", "m", wait=0):
                pass
    assert "is at its limit of 1 call(s) a minute" in refused.value.message


def test_a_pause_learned_on_one_instance_holds_the_others(instances):
    homes, (a, b) = instances(2)
    limit(homes, max_concurrent=4)
    assert a.pause("ep", 30, "429 from upstream")
    assert not b.has_room("ep", "m")
    with pytest.raises(AtLimit) as refused:
        with b.slot("ep", "m", wait=1):
            pass
    assert "paused for" in refused.value.message and "429 from upstream" in refused.value.message
    assert b.status("endpoint", "ep")["paused"]["why"] == "429 from upstream"
    assert a.pause("ep", 1, "shorter")  # never shortens the pause under way
    assert b.status("endpoint", "ep")["paused"]["why"] == "429 from upstream"
    assert b.resume("ep") and not a.resume("ep")
    with a.slot("ep", "m", wait=0):
        pass


def run_worker(*args, lease=None):
    """The admission worker in a process of its own; ``lease``: its slots' lease period."""
    env = dict(os.environ)
    if lease is not None:
        env["PANELIST_LEASE_SECONDS"] = str(lease)
    return subprocess.Popen(
        [sys.executable, str(WORKER), *map(str, args)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )


def test_a_killed_instance_gives_its_slot_back(instances, pg_url, tmp_path):
    homes, (mine,) = instances(1)
    other_home = make_home(tmp_path / "other", pg_url)
    limit(homes + [other_home], max_concurrent=1)
    other = run_worker("hold", other_home.root, "ep", "m", pg_url, lease=1)
    try:
        assert other.stdout.readline().strip() == "held"
        assert not mine.has_room("ep", "m")
        with pytest.raises(AtLimit):
            with mine.slot("ep", "m", wait=0):
                pass
    finally:
        other.send_signal(signal.SIGKILL)
        other.wait(PATIENCE)
        other.stdin.close()
        other.stdout.close()
    # nobody renews its lease any more: the slot comes free one lease period (1 s) later
    with mine.slot("ep", "m", wait=PATIENCE) as admitted:
        assert admitted.endpoint == "ep"


def test_an_unreachable_database_admits_nothing_then_recovers(instances, pg_cluster):
    homes, (a,) = instances(1)
    limit(homes, max_concurrent=1)
    with a.slot("ep", "m", wait=0):
        pass
    pg_cluster.stop()
    try:
        assert not a.has_room("ep", "m")
        with pytest.raises(AtLimit) as down:  # what a seat reports: kind at_limit
            with a.slot("ep", "m", wait=0):
                pass
        assert down.value.message.startswith(
            "endpoint 'ep' admits no call while its limits "
            "cannot be counted: the database is unreachable"
        )
        assert down.value.headers["Retry-After"] == "2"
        assert a.pause("ep", 5, "429") is False  # not recorded, and nothing is admitted anyway
    finally:
        pg_cluster.start()
    with a.slot("ep", "m", wait=PATIENCE):
        assert a.status("endpoint", "ep")["running"] == 1
    assert a.status("endpoint", "ep")["running"] == 0


# -- a key's requests a minute ----------------------------------------------------------------
@pytest.fixture()
def counters(pg_url):
    made = [DatabaseRateCounter(pg_url) for _ in range(2)]
    yield made
    for c in made:
        c.close()


def test_rate_counts_on_the_database_judge_as_the_files_do(counters, tmp_path):
    files = RateCounter(tmp_path / "rate")
    try:
        base = 1_800_000_000 // 60 * 60  # a minute's start
        moments = [base + 10 + i for i in range(6)] + [
            base + 60 + 5,
            base + 60 + 6,
            base + 60 + 50,
            base + 60 + 51,
            base + 300,
        ]
        db = [counters[i % 2].admit("app", 4, now=t) for i, t in enumerate(moments)]
        ref = [files.admit("app", 4, now=t) for t in moments]
    finally:
        files.close()
    assert [w is None for w in db] == [w is None for w in ref]
    assert [w is None for w in db][:6] == [True] * 4 + [False] * 2
    assert db == pytest.approx(ref)  # the same Retry-After too


def test_a_key_rpm_holds_across_instances_under_concurrency(counters):
    at = 1_800_000_000 // 60 * 60 + 30
    results, lock = [], threading.Lock()

    def one(counter):
        got = counter.admit("busy", 5, now=at)
        with lock:
            results.append(got)

    assert run_all(one, [(counters[0],), (counters[1],)] * 10) == [None] * 20
    assert sum(1 for r in results if r is None) == 5
    assert all(r is None or r > 0 for r in results)


def test_an_unreachable_database_refuses_the_count(counters, pg_cluster):
    assert counters[0].admit("k", 10) is None
    pg_cluster.stop()
    try:
        with pytest.raises(DatabaseUnreachable) as down:
            counters[0].admit("k", 10)
        assert down.value.headers["Retry-After"] == "2"
    finally:
        pg_cluster.start()
    assert counters[0].admit("k", 10) is None and counters[1].admit("k", 10) is None


# -- two gateways on one database -------------------------------------------------------------
@pytest.fixture()
def gateways(tmp_path, sim, pg_url):
    """Two gateways, each on its own data folder (the same roster), one database and the one
    simulated upstream: ``(a, b, home_a, home_b)``."""
    homes = [make_home(tmp_path / name, pg_url, sim.url) for name in ("a", "b")]
    made = []

    def make(env=None):
        for home in homes:
            made.append(Gateway(make_gateway(home, env=dict(env or {}))))
        return made[0], made[1], homes[0], homes[1]

    yield make
    for gw in made:
        gw.close()


def test_two_gateways_never_send_more_at_once_than_the_endpoint_takes(gateways, sim):
    for alias in TEST_MODELS:  # calls that last, so that they overlap
        sim.script(alias, latency=0.05)
    a, b, home_a, home_b = gateways()
    configure([home_a, home_b], {"max_concurrent": 2})
    results, lock = [], threading.Lock()

    def client(gw, i):
        status, body, _ = gw.post(
            "/v1/chat/completions",
            {
                "model": "bench/trio",
                "messages": [{"role": "user", "content": f"Review #{i}: x = 1"}],
            },
        )
        with lock:
            results.append((status, [s["status"] for s in body["bench"]["seats"]]))

    assert run_all(client, [(gw, i) for i in range(4) for gw in (a, b)]) == [None] * 8
    assert [s for s, _ in results] == [200] * 8
    assert sim.peak_in_flight <= 2
    assert sum(st == "ok" for _, seats in results for st in seats) == len(sim.requests)
    assert len(sim.requests) >= 8


def test_two_gateways_share_a_keys_rpm(gateways):
    a, b, home_a, home_b = gateways({"PANELIST_REQUIRE_KEYS": "1"})
    secret, _ = Keys(home_a).create("app", rpm=5)
    # the key made on A reaches B through the database's config rows; until then B refuses it
    assert wait_until(lambda: Keys(home_b).find(secret) is not None), "B never got the key"
    auth = {"Authorization": f"Bearer {secret}"}
    statuses, lock = [], threading.Lock()

    def client(gw):
        for _ in range(3):
            status, _, headers = gw.get("/v1/models", headers=auth)
            with lock:
                statuses.append((status, headers.get("Retry-After")))

    assert run_all(client, [(a,), (b,), (a,), (b,)]) == [None] * 4
    assert sorted(s for s, _ in statuses) == [200] * 5 + [429] * 7
    assert all(int(after) >= 1 for s, after in statuses if s == 429)


def test_a_gateway_answers_503_while_its_database_is_down(gateways, pg_cluster):
    a, _, home_a, home_b = gateways({"PANELIST_REQUIRE_KEYS": "1"})
    secret, _ = Keys(home_a).create("app", rpm=100)
    auth = {"Authorization": f"Bearer {secret}"}
    assert a.get("/v1/models", headers=auth)[0] == 200
    pg_cluster.stop()
    try:
        status, body, headers = a.get("/v1/models", headers=auth)
        assert status == 503 and headers["Retry-After"] == "2"
        assert "the database is unreachable" in body["error"]["message"]
    finally:
        pg_cluster.start()
    # the first request after the restart is served: a dead pooled connection is replaced
    assert a.get("/v1/models", headers=auth)[0] == 200


def test_two_gateways_send_no_more_a_minute_than_the_endpoint_takes(gateways, sim):
    a, b, home_a, home_b = gateways()
    # a seat's wait ends long before the minute does
    configure([home_a, home_b], {"rpm": 3}, seat_timeout=2)
    statuses, errors = [], []
    for i, gw in enumerate((a, b, a, b)):
        status, body, headers = gw.post(
            "/v1/chat/completions",
            {
                "model": "bench/trio",
                "messages": [{"role": "user", "content": f"Review #{i}: x = 1"}],
            },
        )
        statuses.append(status)
        if status == 503:  # every seat at the endpoint's limit: the caller is told when
            assert body["error"]["code"] == "all_seats_at_limit"
            assert int(headers["Retry-After"]) >= 1
        seats = body["bench"]["seats"] if status == 200 else body["error"]["seats"]
        errors += [s["error"] for s in seats if s["status"] != "ok"]
    # three calls reach the provider in the minute, whichever instance sent them; every other
    # member fails at its limit, and every request is answered (a 503 with Retry-After when
    # none of its seats found room)
    assert len(sim.requests) == 3
    assert statuses[0] == 200 and set(statuses) <= {200, 503}
    assert errors and all(
        e.startswith("at_limit: endpoint 'sim' is at its limit of 3 call(s) a minute")
        for e in errors
    ), errors
