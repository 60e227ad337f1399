"""Roster validation and the data folder's promises: seeded once, no keys stored."""

import json

import pytest

from panelist.metrics.errors import ConfigInvalid, NotFound
from panelist.metrics.home import open_home
from panelist.metrics.roster.roster import Roster


def test_data_folder_is_seeded_from_defaults_without_clobbering(tmp_path):
    home = open_home(tmp_path / "d")
    assert json.loads(home.file("gateway.json").read_text())["max_calls"] == 5
    home.file("gateway.json").write_text('{"max_calls": 3}')
    open_home(tmp_path / "d")
    assert json.loads(home.file("gateway.json").read_text()) == {"max_calls": 3}


def test_panelist_home_is_the_default(tmp_path, monkeypatch):
    monkeypatch.setenv("PANELIST_HOME", str(tmp_path / "h"))
    assert open_home().root == (tmp_path / "h").resolve()


def test_endpoint_key_is_read_from_its_variable_and_never_stored(tmp_path, monkeypatch):
    home = open_home(tmp_path / "d")
    roster = Roster(home)
    ep = roster.add_endpoint("my-cloud", "https://api.example/v1")
    assert ep.key_env == "PANELIST_KEY_MY_CLOUD"
    monkeypatch.setenv("PANELIST_KEY_MY_CLOUD", "sk-secret-value-123")
    assert roster.api_key(roster.view().endpoints["my-cloud"]) == "sk-secret-value-123"
    for f in home.root.rglob("*"):
        if f.is_file():
            assert "sk-secret-value-123" not in f.read_text(errors="replace")


@pytest.mark.parametrize(
    "args, fragment",
    [
        (("Bad Name", "http://x/v1"), "endpoint name"),
        (("ok", "ftp://x"), "http://"),
        (("ok", "https://user:pw@x/v1"), "user:password"),
        (("ok", "https://x/v1", "1BAD"), "environment variable"),
    ],
)
def test_endpoint_validation(tmp_path, args, fragment):
    with pytest.raises(ConfigInvalid) as err:
        Roster(open_home(tmp_path)).add_endpoint(*args)
    assert fragment in err.value.message


@pytest.mark.parametrize(
    "kw, fragment",
    [
        (dict(alias="m", endpoint="nope"), "unknown endpoint"),
        (dict(alias="bench/x", endpoint="e"), "bench/"),
        (dict(alias="m", endpoint="e", context=0), "context window"),
        (dict(alias="m", endpoint="e", price_in=-1), "price in"),
        (dict(alias="m", endpoint="e", currency="dollars"), "currency"),
    ],
)
def test_model_validation(tmp_path, kw, fragment):
    roster = Roster(open_home(tmp_path))
    roster.add_endpoint("e", "http://127.0.0.1:1/v1")
    with pytest.raises(ConfigInvalid) as err:
        roster.add_model(kw.pop("alias"), kw.pop("endpoint"), **kw)
    assert fragment in err.value.message


def test_model_round_trip_and_endpoint_in_use(tmp_path):
    roster = Roster(open_home(tmp_path))
    roster.add_endpoint("e", "http://127.0.0.1:1/v1")
    m = roster.add_model(
        "m",
        "e",
        served="vendor/m-1",
        family="Fam",
        grade="strong",
        context=8000,
        vision=True,
        price_in=0.5,
        price_out=1.5,
        currency="eur",
    )
    got = roster.view().models["m"]
    assert got == m and got.family == "fam" and got.currency == "EUR" and got.vision
    with pytest.raises(ConfigInvalid, match="still serves m"):
        roster.remove_endpoint("e")
    roster.remove_model("m")
    with pytest.raises(NotFound):
        roster.remove_model("m")
    roster.remove_endpoint("e")


def test_a_models_public_fields_are_what_it_was_typed_with_and_decider_only_when_set():
    from panelist.metrics.roster.roster import Model

    plain = Model(
        "m",
        "local",
        "m-1",
        "fam",
        context=8000,
        price_in=0.5,
        lacks=frozenset({"tools"}),
        family_typed=False,
    )
    assert plain.public() == {
        "alias": "m",
        "endpoint": "local",
        "served": "m-1",
        "family": "fam",
        "grade": "",
        "context": 8000,
        "max_output": None,
        "vision": False,
        "tools": False,
        "price_in": 0.5,
        "price_out": None,
        "currency": "USD",
        "retired": False,
    }
    assert Model("d", "local", "d-1", "fam", decider=True).public()["decider"] is True
