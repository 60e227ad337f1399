"""Config edits on several dashboards sharing one PostgreSQL (``ConfigMirror.editing``): an edit
answered 200 is in the database before the answer, so it is never set aside later; the same
value edited on two instances gives one of them a 409; a database out of reach refuses the edit
(503) and leaves the file as it was. A hand edit saved from a stale buffer drops no other
instance's edit, or is set aside by name on ``/ready`` and in the alerts; and every instance's
changes land in ``config_changes``.

Each dashboard's own mirror thread is stopped (``quiet``) where a test needs an exact race: its
files then move only when an edit, or the test, turns the mirror."""

import json
import os
import threading

import pytest

from conftest import Gateway, wait_until
from panelist.metrics.roster.collection import Collections
from panelist.metrics.server.keys import Keys
from panelist.metrics.store import pg, pgschema
from test_pg_gateway import make_home


@pytest.fixture()
def dashes(tmp_path, sim, pg_url):
    """Two dashboards, A and B, each on its own data folder, on one database."""
    from panelist.serve import make_dashboard

    db = pg.Database(pg_url)
    try:
        pgschema.migrate(db)
    finally:
        db.close()
    homes = [make_home(tmp_path / name, sim, pg_url) for name in ("a", "b")]
    made = []
    try:
        for home in homes:
            made.append(Gateway(make_dashboard(home, env={"PANELIST_LOGIN_PAUSE": "0"})))
        yield made[0], made[1], homes[0], homes[1]
    finally:
        for d in made:
            d.close()


def mirror(d):
    return d.server.parts.config_mirror


def quiet(*ds):
    """Stop each dashboard's mirror thread: its files move only when turned by hand or by an
    edit of its own."""
    for d in ds:
        mirror(d).close()


def in_step(*ds):
    for _ in range(2):
        for d in ds:
            mirror(d).sync()


def collection(d, name):
    status, body, _ = d.get("/api/collections")
    assert status == 200, body
    return next((c for c in body["data"] if c["name"] == name), None)


def save(d, name, members, version):
    return d.request("PUT", f"/api/collections/{name}", {"version": version, "members": members})


def test_the_same_collection_saved_on_two_instances_gives_one_a_409(dashes):
    a, b, home_a, home_b = dashes
    quiet(a, b)
    in_step(a, b)
    version = collection(a, "trio")["version"]
    assert collection(b, "trio")["version"] == version
    status, body, _ = save(a, "trio", ["fast", "mid"], version)
    assert status == 200, body
    # B has not heard of A's save: its file still holds the version both read
    status, body, _ = save(b, "trio", ["mid", "slow"], version)
    assert status == 409, body
    assert body["error"]["code"] == "stale" and "reload" in body["error"]["message"]
    in_step(a, b)
    for home in (home_a, home_b):
        assert list(Collections(home).all()["trio"].members) == ["fast", "mid"]
        assert not list(home.config.glob("*.conflict-*"))


def test_an_edit_of_the_same_value_landing_first_elsewhere_is_refused_after_the_check(
    dashes, monkeypatch
):
    a, b, home_a, home_b = dashes
    quiet(a, b)
    in_step(a, b)
    version = collection(b, "trio")["version"]
    # B's edit passes its own check, then finds A's edit of the same members in the database:
    # A's lands between B's sync and B's push (run from inside B's edit)
    landed = {}
    original = Collections.save

    def save_then_race(self, *args, **kw):
        result = original(self, *args, **kw)
        if self.path.parent == home_b.config and not landed:
            landed["a"] = save(a, "trio", ["fast", "slow"], version)
        return result

    monkeypatch.setattr(Collections, "save", save_then_race)
    status, body, _ = save(b, "trio", ["mid", "slow"], version)
    monkeypatch.undo()
    assert landed["a"][0] == 200, landed
    assert status == 409 and body["error"]["code"] == "stale", body
    assert "collections/trio/members" in body["error"]["message"]
    in_step(a, b)
    for home in (home_a, home_b):
        assert list(Collections(home).all()["trio"].members) == ["fast", "slow"]
        assert not list(home.config.glob("*.conflict-*"))


def test_collections_made_at_once_on_two_instances_all_survive(dashes):
    a, b, home_a, home_b = dashes
    answers, lock = [], threading.Lock()

    def make(d, name):
        status, body, _ = d.post("/api/collections", {"name": name, "members": ["fast", "mid"]})
        with lock:
            answers.append((status, body))

    threads = [
        threading.Thread(target=make, args=(d, f"{tag}{i}"))
        for i in range(6)
        for d, tag in ((a, "on-a-"), (b, "on-b-"))
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [s for s, _ in answers] == [200] * 12, answers
    want = {f"{tag}{i}" for i in range(6) for tag in ("on-a-", "on-b-")}
    for home in (home_a, home_b):
        assert wait_until(lambda home=home: want <= set(Collections(home).all())), sorted(
            set(Collections(home).all())
        )
        assert not list(home.config.glob("*.conflict-*"))


def test_a_revoke_answered_200_holds_against_a_key_made_elsewhere(dashes):
    a, b, home_a, home_b = dashes
    status, made, _ = a.post("/api/keys", {"name": "old"})
    assert status == 200, made
    in_step(a, b)
    quiet(a, b)
    status, body, _ = a.request("DELETE", "/api/keys/old")
    assert status == 200, body
    status, new, _ = b.post("/api/keys", {"name": "new"})
    assert status == 200, new
    in_step(a, b)
    for home in (home_a, home_b):
        assert Keys(home).find(made["key"]) is None, "the revocation was undone"
        assert Keys(home).find(new["key"]) is not None


def test_an_edit_while_the_database_is_down_is_refused_and_not_made(dashes, pg_cluster):
    a, _, home_a, _ = dashes
    quiet(a)
    before = home_a.file("collections.json").read_bytes()
    pg_cluster.stop()
    try:
        status, body, headers = a.post(
            "/api/collections", {"name": "offline", "members": ["fast", "mid"]}
        )
    finally:
        pg_cluster.start()
    assert status == 503 and headers["Retry-After"], body
    assert "unreachable" in body["error"]["message"]
    assert home_a.file("collections.json").read_bytes() == before


def hand_edit(path, doc):
    """Save ``doc`` over ``path`` as an editor would: a new file, a later mtime."""
    text = json.dumps(doc, indent=2)
    st = path.stat()
    path.write_text(text)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))


def test_a_hand_edit_from_a_stale_buffer_keeps_the_other_hosts_edit(dashes):
    a, b, home_a, home_b = dashes
    quiet(a, b)
    in_step(a, b)
    path = home_b.file("collections.json")
    buffer = json.loads(path.read_text())  # B's editor opens the file
    status, _, _ = a.post("/api/collections", {"name": "from-a", "members": ["fast", "mid"]})
    assert status == 200
    in_step(a, b)  # B's file now holds from-a
    buffer["collections"]["trio"]["description"] = "edited by hand on B"
    hand_edit(path, buffer)  # saved from the buffer opened before
    in_step(a, b)
    for home in (home_a, home_b):
        found = Collections(home).all()
        assert "from-a" in found, "the stale buffer dropped the other host's edit"
        assert found["trio"].description == "edited by hand on B"


def test_a_stale_hand_edit_that_cannot_merge_is_named_on_ready_and_in_alerts(dashes):
    a, b, home_a, home_b = dashes
    quiet(a, b)
    in_step(a, b)
    path = home_b.file("collections.json")
    buffer = json.loads(path.read_text())
    version = collection(a, "trio")["version"]
    assert save(a, "trio", ["fast", "mid"], version)[0] == 200
    in_step(a, b)
    buffer["collections"]["trio"]["members"] = ["mid", "slow"]  # the value A changed
    hand_edit(path, buffer)
    in_step(a, b)
    (aside,) = [p.name for p in home_b.config.glob("collections.conflict-*.json")]
    assert json.loads((home_b.config / aside).read_text())["collections"]["trio"]["members"] == [
        "mid",
        "slow",
    ]
    status, ready, _ = b.get("/ready")
    assert ready["checks"]["config"]["conflicts"] == [aside]
    status, alerts, _ = b.get("/api/alerts")
    assert status == 200
    assert [x["subject"] for x in alerts["data"] if x["kind"] == "config_conflict"] == [aside]
    for home in (home_a, home_b):
        assert list(Collections(home).all()["trio"].members) == ["fast", "mid"]


def test_every_instance_writes_the_change_history(dashes, pg_url):
    a, b, _, _ = dashes
    assert a.post("/api/collections", {"name": "hist-a", "members": ["fast", "mid"]})[0] == 200
    assert b.post("/api/collections", {"name": "hist-b", "members": ["mid", "slow"]})[0] == 200
    db = pg.Database(pg_url)
    try:
        rows = db.execute("SELECT record FROM config_changes ORDER BY id")
    finally:
        db.close()
    whats = [r[0]["what"] for r in rows]
    assert "collection hist-a" in whats and "collection hist-b" in whats
    by = {r[0]["what"]: r[0]["instance"] for r in rows}
    assert by["collection hist-a"] != by["collection hist-b"]
