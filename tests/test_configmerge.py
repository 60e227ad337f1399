"""Three-way merges of config documents (``store.configmerge``) and keys.json's own merge
(``server.keys.merge``): edits of different values combine, the same value edited two ways
clashes, and a revocation is final whatever the other side did."""

import pytest

from panelist.metrics.server.keys import Keys, merge as merge_keys
from panelist.metrics.store.configmerge import Clash, merge

BASE = {"collections": {"a": {"members": ["m1"]}, "b": {"members": ["m2"]}}, "v": 1}


def test_edits_of_different_entries_combine():
    ours = {"collections": {"a": {"members": ["m1", "m3"]}, "b": {"members": ["m2"]}}, "v": 1}
    theirs = {"collections": {"a": {"members": ["m1"]}, "c": {"members": ["m4"]}}, "v": 1}
    assert merge(BASE, ours, theirs) == {
        "collections": {"a": {"members": ["m1", "m3"]}, "c": {"members": ["m4"]}},
        "v": 1,
    }


def test_one_side_unchanged_takes_the_other_and_equal_edits_agree():
    edit = {"collections": {}, "v": 2}
    assert merge(BASE, BASE, edit) == edit and merge(BASE, edit, BASE) == edit
    assert merge(BASE, edit, edit) == edit


def test_the_same_value_edited_two_ways_clashes_and_names_it():
    ours = {**BASE, "collections": {**BASE["collections"], "a": {"members": ["x"]}}}
    theirs = {**BASE, "collections": {**BASE["collections"], "a": {"members": ["y"]}}}
    with pytest.raises(Clash) as caught:
        merge(BASE, ours, theirs)
    assert str(caught.value) == "collections/a/members"


KEY_A = {"digest": "a" * 64, "hint": "aaaa", "collections": None, "rpm": None, "created": "t0"}
KEY_B = {"digest": "b" * 64, "hint": "bbbb", "collections": None, "rpm": None, "created": "t1"}
GONE_A = {"hint": "aaaa", "created": "t0", "revoked": "t2"}


def test_a_revocation_survives_a_key_made_elsewhere_at_the_same_time():
    base = {"v": 1, "keys": {"a": KEY_A}}
    revoked_here = {"v": 1, "keys": {}, "revoked": {"a": GONE_A}}
    minted_there = {"v": 1, "keys": {"a": KEY_A, "b": KEY_B}}
    for ours, theirs in ((revoked_here, minted_there), (minted_there, revoked_here)):
        assert merge_keys(base, ours, theirs) == {
            "v": 1,
            "keys": {"b": KEY_B},
            "revoked": {"a": GONE_A},
        }


def test_a_revocation_wins_over_an_edit_of_the_same_key_and_without_a_base():
    changed = {"v": 1, "keys": {"a": {**KEY_A, "rpm": 5}}}
    revoked = {"v": 1, "keys": {}, "revoked": {"a": GONE_A}}
    base = {"v": 1, "keys": {"a": KEY_A}}
    assert merge_keys(base, changed, revoked)["keys"] == {}
    # an older copy that still holds the key, merged with no known base: still revoked
    assert merge_keys(None, base, revoked) == {"v": 1, "keys": {}, "revoked": {"a": GONE_A}}


def test_one_name_minted_as_two_keys_clashes():
    with pytest.raises(Clash):
        merge_keys(
            {"v": 1, "keys": {}}, {"v": 1, "keys": {"a": KEY_A}}, {"v": 1, "keys": {"a": {**KEY_B}}}
        )


def test_a_revoked_name_is_refused_even_if_a_file_still_lists_it(tmp_path):
    from panelist.metrics.home import open_home
    from panelist.metrics.store import configfile

    home = open_home(tmp_path)
    keys = Keys(home)
    secret, _ = keys.create("ci")
    assert keys.find(secret) is not None
    doc = configfile.read(keys.path)
    doc["revoked"] = {"ci": {"hint": secret[-4:], "created": "", "revoked": "now"}}
    configfile.write_atomic(keys.path, doc)  # "keys" still names it, as a bad merge could
    assert Keys(home).find(secret) is None
