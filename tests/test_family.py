"""A model's family when none is typed is the lineage its id names (``roster.family.stem``), or the
catalog's family read by the same rule; a typed family always wins. Today's default, the alias,
put ``gpt-4o`` and ``gpt-4o-mini`` in two families."""

import json

import pytest

from panelist.metrics.home import open_home
from panelist.metrics.roster.catalog import Catalog
from panelist.metrics.roster.family import stem
from panelist.metrics.roster.known import KnownRoster
from panelist.metrics.roster.roster import Roster


@pytest.mark.parametrize(
    "served, family",
    [
        ("gpt-4o", "gpt"),
        ("gpt-4o-mini", "gpt"),
        ("openai/gpt-4o-mini", "gpt"),
        ("gpt-4.1-nano", "gpt"),
        ("gpt-4o-2024-08-06", "gpt"),
        ("o3-mini", "gpt"),
        ("o1", "gpt"),
        ("claude-3-5-sonnet-20241022", "claude"),
        ("claude-sonnet-4-20250514", "claude"),
        ("anthropic/claude-3.5-haiku", "claude"),
        ("anthropic.claude-3-5-sonnet-20240620-v1:0", "claude"),
        ("claude-3-opus@20240229", "claude"),
        ("llama-3.1-8b", "llama"),
        ("llama-3.1-70b", "llama"),
        ("meta-llama/llama-3.1-8b-instruct", "llama"),
        ("llama3.1:70b", "llama"),
        ("meta.llama3-1-70b-instruct-v1:0", "llama"),
        ("accounts/fireworks/models/llama-v3p1-70b-instruct", "llama"),
        ("codellama-34b", "llama"),
        ("Qwen/Qwen2.5-72B-Instruct", "qwen"),
        ("qwen2.5:7b", "qwen"),
        ("qwq-32b", "qwen"),
        ("mistral-large-2407", "mistral"),
        ("mixtral-8x7b-instruct", "mistral"),
        ("gemini-1.5-pro", "gemini"),
        ("google/gemini-2.0-flash-001", "gemini"),
        ("gemma-2-9b-it", "gemma"),
        ("deepseek-chat", "deepseek"),
        ("deepseek-r1:14b", "deepseek"),
        ("phi-3-mini-4k", "phi"),
        ("a", "a"),
        ("x-one", "x"),
    ],
)
def test_the_stem_rule_puts_one_makers_line_in_one_family(served, family):
    assert stem(served) == family


def test_what_the_rule_finds_no_name_in_is_still_a_valid_family():
    assert stem("4o") == "4o"
    assert stem("My Model!") == "my"
    assert stem("???") == "model"


@pytest.fixture()
def home(tmp_path):
    home = open_home(tmp_path / "data")
    Roster(home).add_endpoint("ep", "http://127.0.0.1:9/v1")
    return home


def test_a_model_added_without_a_family_takes_its_ids_and_stores_none(home):
    roster = Roster(home)
    big = roster.add_model("big", "ep", served="gpt-4o")
    small = roster.add_model("small", "ep", served="openai/gpt-4o-mini")
    own = roster.add_model("own", "ep", served="gpt-4o-mini", family="Mine")
    view = roster.view()
    assert big.family == small.family == "gpt"
    assert view.models["big"] == big and view.models["small"] == small
    assert view.models["big"].family == view.models["small"].family == "gpt"
    assert view.models["own"].family == "mine" == own.family, "a typed family wins"
    stored = json.loads(roster.path.read_text())["models"]
    assert "family" not in stored["big"] and "family" not in stored["small"]
    assert stored["own"]["family"] == "mine"
    assert view.models["big"].public()["family"] == "gpt"
    assert "family_typed" not in view.models["big"].public()


def test_a_model_stored_with_a_family_keeps_it(home):
    roster = Roster(home)
    roster.add_model("kept", "ep", served="gpt-4o-mini", family="kept")
    assert roster.view().models["kept"].family == "kept"


def test_the_catalogs_family_is_read_by_the_same_rule_and_never_over_a_typed_one(home, tmp_path):
    roster = Roster(home)
    roster.add_model("opaque", "ep", served="deploy-7")
    roster.add_model("typed", "ep", served="deploy-8", family="house")
    catalog = tmp_path / "models.json"
    catalog.write_text(
        json.dumps(
            {
                "acme": {
                    "models": {
                        "deploy-7": {"id": "deploy-7", "family": "gpt-mini"},
                        "deploy-8": {"id": "deploy-8", "family": "claude-sonnet"},
                    }
                }
            }
        )
    )
    Catalog(home).import_file(catalog)
    assert roster.view().models["opaque"].family == "deploy", "the roster reads its id"
    known = KnownRoster(roster, home).view()
    assert known.models["opaque"].family == "gpt", "the catalog's size class is its line"
    assert known.models["typed"].family == "house"
    assert Catalog(home).facts("typed")["family"]["source"] == "typed"
