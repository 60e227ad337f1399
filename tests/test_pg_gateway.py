"""Several gateway instances on one PostgreSQL (``PANELIST_DATABASE_URL``): real servers on
port 0, a real cluster (``pgcluster``), the simulated upstream. Each instance has its own data
folder (as a host would), the same roster, and the one database."""

import threading

import pytest

from conftest import PATIENCE, TEST_MODELS, Gateway, move_to, set_limits, wait_until
from gated import GatedUpstream
from panelist.gateway import make_gateway
from panelist.metrics.home import open_home
from panelist.metrics.roster.collection import Collections
from panelist.metrics.roster.roster import Roster
from panelist.metrics.store import pg


def make_home(path, sim, url):
    home = open_home(path, database=url)
    roster = Roster(home)
    roster.add_endpoint("sim", sim.url)
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


@pytest.fixture()
def pair(tmp_path, sim, pg_url):
    """Two gateways, A and B, on one database: ``(a, b, home_a, home_b)``."""
    homes = [make_home(tmp_path / name, sim, pg_url) for name in ("a", "b")]
    a = Gateway(make_gateway(homes[0], env={}))
    try:
        b = Gateway(make_gateway(homes[1], env={}))
    except BaseException:
        a.close()
        raise
    try:
        yield a, b, homes[0], homes[1]
    finally:
        b.close()
        a.close()


def ask(gw, content="Review: def add(a, b): return a - b"):
    return gw.post(
        "/v1/chat/completions",
        {"model": "bench/trio", "messages": [{"role": "user", "content": content}]},
    )


def explorers(body) -> list[str]:
    return [s["alias"] for s in body["bench"]["seats"] if s["seat"].startswith("explorer")]


def in_step(x, y):
    """Wait until instance ``y`` has folded every seating and verdict ``x`` has."""
    lx, ly = x.server.parts.panels.ledger, y.server.parts.panels.ledger

    def view(ledger):
        return {
            shape: {
                a: (st.last_seated, st.useful, st.not_useful)
                for a, st in ledger.states(TEST_MODELS, shape).items()
            }
            for shape in lx.shapes()
        }

    assert wait_until(lambda: view(lx) == view(ly)), "the other instance never caught up"


def count(url, sql):
    db = pg.Database(url)
    try:
        return db.execute(sql)[0][0]
    finally:
        db.close()


def test_panel_ids_never_collide_across_instances(pair, pg_url):
    a, b, _, _ = pair
    results, lock = [], threading.Lock()

    def client(gw, n):
        for i in range(n):
            status, body, _ = ask(gw, f"Review #{i}: x = 1")
            with lock:
                results.append((status, body.get("bench", {}).get("panel")))

    threads = [threading.Thread(target=client, args=(gw, 6)) for gw in (a, b, a, b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(PATIENCE * 4)
    assert not any(t.is_alive() for t in threads)
    assert [s for s, _ in results] == [200] * 24
    ids = [p for _, p in results]
    assert len(set(ids)) == 24
    # every answered panel is logged once, and both instances find every one of them
    assert count(pg_url, "SELECT count(*) FROM panels") == 24
    for gw in (a, b):
        for panel in ids:
            status, got, _ = gw.get(f"/bench/panels/{panel}")
            assert status == 200 and got["panel"] == panel


def test_a_verdict_on_one_instance_moves_seating_on_the_other(pair):
    a, b, home_a, home_b = pair
    for home in (home_a, home_b):
        set_limits(home, max_explorers=1)
    seen = []
    for gw, other in ((a, b), (b, a), (a, b)):
        seen.append(explorers(ask(gw)[1]))
        # the other instance hears of it within a second: the next seating waits for that,
        # as a caller's next panel would come later than that anyway
        in_step(gw, other)
    # seating on each instance counts the other's seats: three panels, three explorers
    assert sorted(x for s in seen for x in s) == ["x-one", "x-three", "x-two"]
    for home in (home_a, home_b):
        set_limits(home, max_explorers=3, max_calls=6)
    _, body, _ = ask(b)
    assert sorted(explorers(body)) == ["x-one", "x-three", "x-two"]
    call = next(s["call"] for s in body["bench"]["seats"] if s["alias"] == "x-three")
    status, got, _ = a.post("/bench/verdict", {"call": call, "useful": True})
    assert status == 200 and got["written"]
    ledger_b = b.server.parts.panels.ledger
    shape = ledger_b.call(call)["shape"]
    assert wait_until(lambda: ledger_b.states(["x-three"], shape)["x-three"].useful == 1), (
        "the verdict given through A never reached B's seating"
    )
    status, got, _ = b.get("/bench/pending")
    owed = [o["call"] for o in got["data"]]
    assert status == 200 and call not in owed
    assert any(c.startswith(body["bench"]["panel"]) for c in owed)  # its panel's other seats
    for home in (home_a, home_b):
        set_limits(home, max_explorers=1, max_calls=5)
    # the useful verdict doubles x-three's claim over the two seated with it, on B too
    assert explorers(ask(b)[1]) == ["x-three"]


def test_unreachable_database_is_a_503_then_recovers(pair, pg_cluster, pg_url):
    a, b, _, _ = pair
    status, body, _ = ask(a)
    assert status == 200
    pg_cluster.stop()
    status, body, headers = ask(a)
    assert status == 503, body
    assert "database is unreachable" in body["error"]["message"]
    assert (
        "127.0.0.1" not in body["error"]["message"] and "postgres" not in body["error"]["message"]
    )
    assert int(headers["Retry-After"]) >= 1
    status, body, headers = b.post(
        "/bench/verdict", {"call": "p20200101-1.member1", "useful": True}
    )
    assert status == 503 and "database is unreachable" in body["error"]["message"]
    # alive, not ready: a balancer sends its traffic elsewhere until the database is back
    assert a.get("/health")[0] == 200
    status, body, headers = a.get("/ready")
    assert status == 503 and body["ready"] is False and headers["Retry-After"] == "2"
    assert body["checks"]["ledger"]["ok"] is False
    assert "database is unreachable" in body["checks"]["ledger"]["why"]
    assert "127.0.0.1" not in str(body)
    pg_cluster.start()
    assert wait_until(lambda: a.get("/ready")[0] == 200)
    assert a.get("/ready")[1]["checks"]["config"]["ok"] is True
    # the same instances answer again, without a restart
    assert wait_until(lambda: ask(a)[0] == 200)
    status, body, _ = ask(b)
    assert status == 200
    # nothing half-written: every panel row has its seats' evidence
    panels = count(pg_url, "SELECT count(*) FROM panels")
    seated = count(pg_url, "SELECT count(DISTINCT panel) FROM evidence WHERE kind = 'seated'")
    assert panels >= 3 and seated >= panels


def test_records_written_while_an_instance_was_away_are_seen(
    pair, pg_cluster, tmp_path, sim, pg_url
):
    a, b, _, _ = pair
    _, body, _ = ask(a)
    call = body["bench"]["seats"][0]["call"]
    # the database restarts: B's listener loses its connection (and any notification sent
    # meanwhile), so it must look for itself once it is back
    pg_cluster.stop()
    pg_cluster.start()
    assert wait_until(lambda: ask(a)[0] == 200)
    status, got, _ = a.post("/bench/verdict", {"call": call, "useful": False, "note": "no"})
    assert status == 200 and got["written"]
    assert wait_until(lambda: b.get(f"/bench/panels/{body['bench']['panel']}")[0] == 200)
    ledger_b = b.server.parts.panels.ledger
    assert wait_until(lambda: (ledger_b.verdict_of(call) or {}).get("useful") is False)
    # an instance that was not running at all catches up from the tables when it starts
    b.close()
    _, later, _ = ask(a)
    status, _, _ = a.post(
        "/bench/verdict", {"call": later["bench"]["seats"][0]["call"], "useful": True}
    )
    assert status == 200
    with Gateway(make_gateway(make_home(tmp_path / "c", sim, pg_url), env={})) as c:
        status, got, _ = c.get(f"/bench/panels/{later['bench']['panel']}")
        assert status == 200
        ledger_c = c.server.parts.panels.ledger
        assert ledger_c.verdict_of(later["bench"]["seats"][0]["call"])["useful"] is True
        assert ledger_c.verdict_of(call)["useful"] is False


def test_config_edits_on_one_instance_reach_the_other(pair):
    a, b, home_a, home_b = pair
    roster_a = Roster(home_a)
    Collections(home_a).save(roster_a.view(), "pair", ["fast", "x-one"], description="made on A")
    # B serves the collection made through A, without anyone touching B's files
    assert wait_until(lambda: "pair" in Collections(home_b).all())
    status, body, _ = b.post(
        "/v1/chat/completions",
        {"model": "bench/pair", "messages": [{"role": "user", "content": "Review: y = 2"}]},
    )
    assert status == 200 and {s["alias"] for s in body["bench"]["seats"]} >= {"fast", "x-one"}
    # and an edit through B comes back to A
    Collections(home_b).remove("pair")
    assert wait_until(lambda: "pair" not in Collections(home_a).all())
    status, body, _ = a.post(
        "/v1/chat/completions",
        {"model": "bench/pair", "messages": [{"role": "user", "content": "Review: y = 2"}]},
    )
    assert status == 404


def test_a_seat_line_lost_to_a_cut_database_is_written_with_its_panel(
    tmp_path, sim, pg_cluster, pg_url, caplog
):
    home = make_home(tmp_path / "solo", sim, pg_url)
    gated = GatedUpstream(["fast", "mid"])
    try:
        move_to(home, gated, "fast", "mid")
        Collections(home).save(Roster(home).view(), "pair", ["fast", "mid"])
        set_limits(home, max_explorers=0)
        with Gateway(make_gateway(home, env={})) as gw:
            box = {}
            asking = threading.Thread(
                target=lambda: box.setdefault(
                    "reply",
                    gw.post(
                        "/v1/chat/completions",
                        {
                            "model": "bench/pair",
                            "messages": [{"role": "user", "content": "Review: y = 2"}],
                        },
                    ),
                )
            )
            asking.start()
            assert gated.wait_arrived("fast", "mid")
            pg_cluster.stop()
            with caplog.at_level("WARNING", logger="panelist.database"):
                gated.open("fast")  # its line meets the database gone
                assert wait_until(lambda: "unreachable" in caplog.text)
            pg_cluster.start()
            gated.open("mid")
            asking.join()
            status, body, _ = box["reply"]
            assert status == 200, body
            panel = body["bench"]["panel"]
            calls = sorted(s["call"] for s in body["bench"]["seats"])
        stored = count(
            pg_url,
            "SELECT count(*) FROM evidence WHERE record->>'kind' = 'seat' "
            f"AND record->>'panel' = '{panel}'",
        )
        assert stored == len(calls) == 2
    finally:
        gated.close()
