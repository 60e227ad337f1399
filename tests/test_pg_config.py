"""Config kept in step through the database (``store.pgconfig``) never drops an edit in silence:
two edits of one file merge, a key revocation is final however it races (an edit elsewhere,
an instance stopped, a restart), and an edit of the very value another instance changed is
set aside by name. The mirrors here are turned by hand (``sync``), so every race is exact."""

import json

import pytest

from panelist.metrics.home import open_home
from panelist.metrics.roster.collection import Collections
from panelist.metrics.roster.roster import Roster
from panelist.metrics.server import keys as keys_file
from panelist.metrics.server.keys import Keys
from panelist.metrics.store import pg, pgschema
from panelist.metrics.store.pgconfig import ConfigMirror


def make_home(path, url):
    home = open_home(path, database=url)
    roster = Roster(home)
    roster.add_endpoint("sim", "http://127.0.0.1:9")
    for alias in ("m1", "m2", "m3"):
        roster.add_model(alias, "sim", family=alias, context=100_000)
    return home


class Host:
    """One instance's data folder and its config mirror, turned by hand."""

    def __init__(self, path, url):
        self.home = make_home(path, url)
        self.url = url
        self.mirror = None
        self.start()

    def start(self):
        self.mirror = ConfigMirror(
            pg.Database(self.url, application="test-config"),
            self.home.config,
            merges={"keys.json": keys_file.merge},
        )
        self.mirror.sync()

    def stop(self):
        self.mirror.close()
        self.mirror.db.close()

    def sync(self):
        self.mirror.sync()

    def keys(self):
        return Keys(self.home)


@pytest.fixture()
def hosts(tmp_path, pg_url):
    db = pg.Database(pg_url)
    try:
        pgschema.migrate(db)
    finally:
        db.close()
    a = Host(tmp_path / "a", pg_url)
    b = Host(tmp_path / "b", pg_url)
    try:
        a.sync()
        b.sync()
        a.sync()
        yield a, b
    finally:
        for h in (a, b):
            h.stop()


def in_step(*hosts):
    for _ in range(2):
        for h in hosts:
            h.sync()


@pytest.mark.parametrize("revoke_lands_first", [True, False])
def test_a_revocation_racing_a_new_key_elsewhere_holds_on_both(hosts, revoke_lands_first):
    a, b = hosts
    old, _ = a.keys().create("old")
    in_step(a, b)
    assert b.keys().find(old) is not None
    # from the same version: A revokes, B makes a key
    a.keys().revoke("old")
    new, _ = b.keys().create("new")
    first, second = (a, b) if revoke_lands_first else (b, a)
    first.sync()
    second.sync()
    in_step(a, b)
    for h in (a, b):
        assert h.keys().find(old) is None, "the revocation was undone"
        assert h.keys().find(new) is not None, "the new key was dropped"
    assert not list(a.home.config.glob("*.conflict-*")) + list(b.home.config.glob("*.conflict-*"))


@pytest.mark.parametrize("edited_elsewhere_meanwhile", [False, True])
def test_a_revocation_made_while_an_instance_is_stopped_survives_its_start(
    hosts, edited_elsewhere_meanwhile
):
    a, b = hosts
    secret, _ = a.keys().create("k5")
    in_step(a, b)
    a.stop()
    # `panelist key revoke k5` on A's host while its server is down (or cannot reach the database)
    a.keys().revoke("k5")
    if edited_elsewhere_meanwhile:
        b.keys().create("other")
        b.sync()
    a.start()
    in_step(a, b)
    for h in (a, b):
        assert h.keys().find(secret) is None, "the database's older copy brought k5 back"
    assert ("other" in {k.name for k in a.keys().all()}) == edited_elsewhere_meanwhile


def test_saves_of_different_collections_at_once_are_all_kept(hosts):
    a, b = hosts
    for i, h in enumerate((a, b)):
        Collections(h.home).save(Roster(h.home).view(), f"made-on-{'ab'[i]}", ["m1", "m2"])
    a.sync()
    b.sync()
    in_step(a, b)
    for h in (a, b):
        assert {"made-on-a", "made-on-b"} <= set(Collections(h.home).all())


def test_one_value_edited_two_ways_is_set_aside_by_name(hosts, capsys):
    a, b = hosts
    Collections(a.home).save(Roster(a.home).view(), "shared", ["m1", "m2"])
    in_step(a, b)
    Collections(a.home).save(Roster(a.home).view(), "shared", ["m1", "m3"])
    Collections(b.home).save(Roster(b.home).view(), "shared", ["m2", "m3"])
    a.sync()
    b.sync()
    in_step(a, b)
    aside = list(b.home.config.glob("collections.conflict-*.json"))
    assert len(aside) == 1
    kept = json.loads(aside[0].read_text())
    assert kept["collections"]["shared"]["members"] == ["m2", "m3"]
    err = capsys.readouterr().err
    assert (
        "collections.json" in err and "collections/shared/members" in err and str(aside[0]) in err
    )
    for h in (a, b):
        assert list(Collections(h.home).all()["shared"].members) == ["m1", "m3"]


def test_a_config_file_deleted_on_one_host_is_written_back(hosts):
    a, b = hosts
    Collections(a.home).save(Roster(a.home).view(), "kept", ["m1", "m2"])
    in_step(a, b)
    (b.home.config / "collections.json").unlink()
    in_step(a, b)
    for h in (a, b):
        assert "kept" in Collections(h.home).all()


def test_an_edit_from_a_version_the_database_lacks_is_set_aside(hosts, capsys):
    a, b = hosts
    a.stop()
    Collections(a.home).save(Roster(a.home).view(), "offline", ["m1", "m2"])
    # as if the database had been replaced by one that never held the version A last saw
    state = a.home.config / ".mirror.json"
    doc = json.loads(state.read_text())
    doc["in_step"]["collections.json"]["version"] = 999
    state.write_text(json.dumps(doc))
    a.start()
    aside = list(a.home.config.glob("collections.conflict-*.json"))
    assert len(aside) == 1 and "offline" in json.loads(aside[0].read_text())["collections"]
    assert "does not hold" in capsys.readouterr().err
    assert "offline" not in Collections(a.home).all()


def test_spend_caps_set_on_one_instance_hold_on_the_other(hosts):
    from panelist.metrics.panel.budgets import Budgets

    a, b = hosts
    Budgets(a.home).set("key", "app", day=5, month=60)
    in_step(a, b)
    assert Budgets(b.home).caps("key", "app") == {"day": 5.0, "month": 60.0}
