"""Names are checked whole (no trailing newline slips through), a collection saved as bench/NAME is
NAME, and free text that reaches a terminal holds no control characters."""

import json

import pytest

from conftest import read_jsonl
from panelist.metrics.store import configfile
from panelist.metrics.cli.main import main
from panelist.metrics.roster.collection import Collections
from panelist.metrics.errors import ConfigInvalid
from panelist.metrics.server.keys import Keys
from panelist.metrics.roster.roster import Roster


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    "make",
    [
        lambda home: Keys(home).create("app\n"),
        lambda home: Collections(home).save(Roster(home).view(), "dup\n", ["fast"]),
        lambda home: Collections(home).save(
            Roster(home).view(), "dup", ["fast"], tags=["a\x1b[0m"]
        ),
        lambda home: Collections(home).save(Roster(home).view(), "dup", ["fast"], shape="code\n"),
        lambda home: Roster(home).add_model("m\n", "sim"),
        lambda home: Roster(home).add_model("m", "sim", family="f\n"),
        lambda home: Roster(home).add_model("m", "sim", currency="USD\n"),
        lambda home: Roster(home).add_endpoint("e\n", "http://127.0.0.1:9/v1"),
        lambda home: Roster(home).add_endpoint("e", "http://127.0.0.1:9/v1", "VAR\n"),
        lambda home: Roster(home).add_endpoint("e", "http://127.0.0.1:9/v1\x1b[31m"),
    ],
    ids=[
        "key",
        "collection",
        "tag",
        "shape",
        "alias",
        "family",
        "currency",
        "endpoint",
        "key-env",
        "base-url",
    ],
)
def test_a_trailing_newline_or_control_character_is_refused(folder, make):
    with pytest.raises(ConfigInvalid):
        make(folder)


def test_a_model_name_with_a_newline_is_not_a_collection(gateway):
    status, body, _ = gateway.post(
        "/v1/chat/completions",
        {"model": "bench/trio\n", "messages": [{"role": "user", "content": "hi"}]},
    )
    assert status == 404 and "unknown collection" in body["error"]["message"]


def test_collection_save_with_the_prefix_stores_the_name(gateway, home, capsys):
    d = str(home.root)
    code, out, _ = run(
        capsys, "collection", "save", "bench/pair", "--members", "fast,mid", "--data", d
    )
    assert code == 0 and "saved bench/pair" in out
    stored = configfile.read(home.file("collections.json"))["collections"]
    assert "pair" in stored and "bench/pair" not in stored and "bench/bench/pair" not in stored
    status, body, _ = gateway.post(
        "/v1/chat/completions",
        {"model": "bench/pair", "messages": [{"role": "user", "content": "hi"}]},
    )
    assert status == 200 and body["model"] == "bench/pair"
    code, _, err = run(capsys, "key", "create", "scoped", "--collections", "pair", "--data", d)
    assert code == 0, err
    code, out, _ = run(capsys, "collection", "rm", "bench/pair", "--data", d)
    assert code == 0 and "pair" not in configfile.read(home.file("collections.json"))["collections"]


def test_descriptions_with_control_characters_are_refused(folder, capsys):
    code, _, err = run(
        capsys,
        "collection",
        "save",
        "pair",
        "--members",
        "fast,mid",
        "--description",
        "fine\x1b[2J\x1b[31mowned",
        "--data",
        str(folder.root),
    )
    assert code == 1 and "control character (U+001B)" in err


def test_collection_list_never_prints_an_escape_from_a_hand_edited_file(folder, capsys):
    path = folder.file("collections.json")
    doc = configfile.read(path)
    doc["collections"]["trio"]["description"] = "three\x1b[2Jreviewers"
    configfile.write_atomic(path, doc)
    code, out, _ = run(capsys, "collection", "list", "--data", str(folder.root))
    assert code == 0 and "\x1b" not in out and "three\\x1b[2Jreviewers" in out


def test_a_revoked_key_name_is_never_given_to_another_key(folder, capsys):
    d = str(folder.root)
    assert run(capsys, "key", "create", "alice", "--data", d)[0] == 0
    assert run(capsys, "key", "revoke", "alice", "--data", d)[0] == 0
    code, out, err = run(capsys, "key", "create", "alice", "--data", d)
    assert code == 1 and "never reused" in err and "alice-2" in err and out == ""
    code, out, _ = run(capsys, "key", "create", "alice-2", "--data", d, "--json")
    assert code == 0 and json.loads(out)["name"] == "alice-2"
    changes = read_jsonl(folder.root / "config" / "changes.jsonl")
    assert [c["what"] for c in changes if c["file"] == "keys.json"] == [
        "key alice",
        "key alice",
        "key alice-2",
    ]
