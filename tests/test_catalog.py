"""Catalog and Discover: import a models.dev-layout file, refresh from endpoints' listings,
"went paid" alerts, and models served outside the roster (listed, then added)."""

import json
import socket
from pathlib import Path

import pytest

from conftest import read_jsonl
from panelist.metrics.cli.main import main
from panelist.metrics.home import open_home
from panelist.metrics.roster.roster import Roster
from panelist.metrics.upstream.sim import SimUpstream

SAMPLE = Path(__file__).resolve().parent / "data" / "models_dev_sample.json"


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}/v1"


@pytest.fixture()
def upstream():
    with SimUpstream(
        {
            "m-held": {"window": 8000},
            "m-open": {"window": 16000},
            "m-free": {"window": 32000, "price": [0, 0]},
            "m-paid": {"window": 64000, "price": [1.5, 6], "vision": True},
        }
    ) as s:
        yield s


@pytest.fixture()
def data(tmp_path, upstream):
    home = open_home(tmp_path / "data")
    Roster(home).add_endpoint("sim", upstream.url)
    return home


def catalog_file(home) -> dict:
    return json.loads((home.config / "catalog.json").read_text())


def show(capsys, home, alias) -> dict:
    code, out, err = run(capsys, "catalog", "show", alias, "--data", str(home.root), "--json")
    assert code == 0, err
    return json.loads(out)["facts"]


def test_import_fills_missing_facts_of_roster_models_and_typed_facts_win(data, capsys):
    roster = Roster(data)
    roster.add_model("big", "sim", served="acme-large", context=100_000)
    roster.add_model("mini", "sim", served="acme/acme-mini")  # as an aggregator serves it
    roster.add_model("seven", "sim", served="open-7b")
    roster.add_model("other", "sim", served="not-in-the-file")
    d = str(data.root)
    code, out, err = run(capsys, "catalog", "import", str(SAMPLE), "--data", d, "--json")
    assert code == 0, err
    done = json.loads(out)
    assert [m["alias"] for m in done["matched"]] == ["big", "mini", "seven"]
    assert done["unmatched"] == ["other"]

    big = show(capsys, data, "big")
    assert big["context"] == {"value": 100_000, "source": "typed", "at": None, "from": "roster"}
    assert big["max_output"]["value"] == 8192 and big["max_output"]["source"] == "imported"
    assert big["max_output"]["from"] == SAMPLE.name and big["max_output"]["at"]
    assert (big["vision"]["value"], big["tools"]["value"], big["structured_output"]["value"]) == (
        True,
        True,
        True,
    )
    assert (big["price_in"]["value"], big["price_out"]["value"], big["currency"]["value"]) == (
        3,
        15,
        "USD",
    )
    mini = show(capsys, data, "mini")
    assert mini["price_in"]["value"] == 0 and mini["vision"]["value"] is False
    seven = show(capsys, data, "seven")
    # a price that is not a number and a negative window are left unknown, not guessed
    assert "price_in" not in seven and "context" not in seven
    assert seven["price_out"]["value"] == 0.2 and seven["max_output"]["value"] == 2048
    assert show(capsys, data, "other") == {}

    stored = catalog_file(data)["endpoints"]["sim"]
    assert set(stored) == {"acme-large", "acme/acme-mini", "open-7b"}
    assert "context" not in stored["acme-large"]  # typed facts are never copied here
    (change,) = [
        c for c in read_jsonl(data.config / "changes.jsonl") if c["file"] == "catalog.json"
    ]
    assert change["what"] == f"catalog import {SAMPLE.name}"


def test_import_refuses_a_missing_or_foreign_file_with_what_to_do(data, capsys, tmp_path):
    d = str(data.root)
    code, _, err = run(capsys, "catalog", "import", str(tmp_path / "nope.json"), "--data", d)
    assert code == 1 and "no catalog file" in err and "models.dev-layout" in err
    (tmp_path / "list.json").write_text('[{"id": "x"}]')
    code, _, err = run(capsys, "catalog", "import", str(tmp_path / "list.json"), "--data", d)
    assert code == 1 and "not in the models.dev layout" in err
    (tmp_path / "bad.json").write_text("{not json")
    code, _, err = run(capsys, "catalog", "import", str(tmp_path / "bad.json"), "--data", d)
    assert code == 1 and "not valid JSON" in err
    # a file that never ends is refused after a bounded read
    code, _, err = run(capsys, "catalog", "import", "/dev/zero", "--data", d)
    assert code == 1 and "(or never ends)" in err
    assert not (data.config / "catalog.json").exists()


@pytest.mark.slow
def test_refresh_reads_each_endpoints_listing_and_reports_one_it_cannot_read(data, capsys):
    roster = Roster(data)
    roster.add_endpoint("gone", closed_port_url())
    roster.add_model("paid", "sim", served="m-paid")
    roster.add_model("big", "sim", served="acme-large")
    d = str(data.root)
    code, out, err = run(capsys, "catalog", "import", str(SAMPLE), "--data", d)
    assert code == 0, err
    code, out, _ = run(capsys, "catalog", "refresh", "--data", d, "--json")
    done = json.loads(out)
    assert code == 1  # one endpoint was not read; the other was still refreshed
    assert done["refreshed"] == [{"endpoint": "sim", "models": 4, "with_facts": 4}]
    assert [f["endpoint"] for f in done["failed"]] == ["gone"] and done["went_paid"] == []
    paid = show(capsys, data, "paid")
    assert {k: (v["value"], v["source"]) for k, v in paid.items()} == {
        "context": (64000, "endpoint"),
        "vision": (True, "endpoint"),
        "price_in": (1.5, "endpoint"),
        "price_out": (6.0, "endpoint"),
        "currency": ("USD", "endpoint"),
    }
    assert paid["context"]["from"] == "GET /models"
    # models not on the roster are kept too, for discover
    assert catalog_file(data)["endpoints"]["sim"]["m-free"]["price_in"]["value"] == 0
    # an import after a refresh fills gaps only: it never overrides what the endpoint said
    sample = json.loads(SAMPLE.read_text())
    sample["acme"]["models"]["m-paid"] = dict(sample["acme"]["models"]["acme-large"], id="m-paid")
    other = Path(d) / "sample2.json"
    other.write_text(json.dumps(sample))
    code, _, err = run(capsys, "catalog", "import", str(other), "--data", d)
    assert code == 0, err
    again = show(capsys, data, "paid")
    assert again["context"]["value"] == 64000 and again["context"]["source"] == "endpoint"
    assert again["max_output"] == dict(again["max_output"], value=8192, source="imported")


@pytest.mark.slow
def test_a_price_rising_from_zero_raises_one_went_paid_alert(data, upstream, capsys):
    roster = Roster(data)
    roster.add_model("free", "sim", served="m-free")
    roster.add_model("typed-free", "sim", served="m-open", price_in=0, price_out=0)
    d = str(data.root)
    code, out, _ = run(capsys, "catalog", "refresh", "--data", d, "--json")
    assert code == 0 and json.loads(out)["went_paid"] == []
    code, out, _ = run(capsys, "alerts", "--data", d)
    assert code == 0 and out.strip() == "(none)"

    upstream.script("m-free", window=32000, price=[0, 2.5])
    upstream.script("m-open", window=16000, price=[0.25, 0.5])
    code, out, _ = run(capsys, "catalog", "refresh", "--data", d)
    assert code == 0
    assert "alert: free on sim is no longer free (price out 2.5 per million tokens)" in out
    assert "alert: typed-free on sim is no longer free" in out
    assert "Retire it, or set its price with Edit, on its model page" in out
    assert len(out.splitlines()) == 3  # one line for the endpoint, one per alert
    code, out, _ = run(capsys, "catalog", "refresh", "--data", d, "--json")
    assert code == 0 and json.loads(out)["went_paid"] == []  # raised once, not every refresh

    code, out, _ = run(capsys, "alerts", "--data", d, "--json")
    alerts = json.loads(out)
    assert [(a["kind"], a["subject"]) for a in alerts] == [
        ("went_paid", "typed-free"),
        ("went_paid", "free"),
    ]
    assert alerts[1]["price_out"] == 2.5 and "price_in" not in alerts[1]
    assert alerts[0]["price_in"] == 0.25 and alerts[0]["served"] == "m-open"
    on_disk = read_jsonl(data.root / "runs" / "alerts.jsonl")
    assert [a["subject"] for a in on_disk] == ["free", "typed-free"]
    assert show(capsys, data, "free")["price_out"]["value"] == 2.5
    # the typed price still wins in what the catalog shows; the alert says to update it
    assert show(capsys, data, "typed-free")["price_in"]["source"] == "typed"


@pytest.mark.slow
def test_discover_lists_only_models_not_on_the_roster_free_first(data, capsys):
    Roster(data).add_model("held-under-another-name", "sim", served="m-held")
    d = str(data.root)
    code, out, err = run(capsys, "discover", "--data", d, "--json")
    assert code == 0, err
    found = json.loads(out)
    assert [m["id"] for m in found["models"]] == ["m-free", "m-open", "m-paid"]
    assert [m["free"] for m in found["models"]] == [True, False, False]
    assert all(m["also_on_roster"] == [] for m in found["models"])
    assert found["models"][2]["facts"] == {
        "context": 64000,
        "price_in": 1.5,
        "price_out": 6.0,
        "currency": "USD",
        "vision": True,
    }
    code, out, _ = run(capsys, "discover", "--free", "--endpoint", "sim", "--data", d, "--json")
    assert [m["id"] for m in json.loads(out)["models"]] == ["m-free"]
    code, out, _ = run(capsys, "discover", "--data", d)
    assert code == 0 and out.splitlines()[0].split()[:3] == ["ENDPOINT", "ID", "FREE"]
    assert "m-held" not in out
    code, _, err = run(capsys, "discover", "--endpoint", "nope", "--data", d)
    assert code == 1 and "unknown endpoint 'nope'" in err
    code, _, err = run(capsys, "catalog", "refresh", "--endpoint", "nope", "--data", d)
    assert code == 1 and "unknown endpoint 'nope'; see `panelist endpoint list`" in err
    assert not (data.config / "catalog.json").exists()  # listing writes nothing


@pytest.mark.slow
def test_discover_add_registers_the_models_with_their_listed_facts(data, upstream, capsys):
    Roster(data).add_model("held", "sim", served="m-held")
    d = str(data.root)
    code, out, err = run(capsys, "discover", "--add", "m-paid", "m-free", "--data", d, "--json")
    assert code == 0, err
    assert [a["alias"] for a in json.loads(out)["added"]] == ["m-paid", "m-free"]
    models = Roster(data).view().models
    assert (models["m-paid"].endpoint, models["m-paid"].served) == ("sim", "m-paid")
    assert show(capsys, data, "m-paid")["price_out"] == dict(
        show(capsys, data, "m-paid")["price_out"], value=6.0, source="endpoint"
    )
    code, out, _ = run(capsys, "discover", "--data", d, "--json")
    assert [m["id"] for m in json.loads(out)["models"]] == ["m-open"]
    added = [c for c in read_jsonl(data.config / "changes.jsonl") if c["by"] == "discover"]
    assert [c["what"] for c in added] == ["model m-paid", "model m-free"]

    code, _, err = run(capsys, "discover", "--add", "m-held", "--data", d)
    assert code == 1 and "not a model any endpoint serves outside the roster" in err
    code, _, err = run(capsys, "discover", "--add", "m-open", "m-open", "--data", d)
    assert code == 1 and "named once" in err
    with SimUpstream({"m-open": {}}) as twin:
        Roster(data).add_endpoint("twin", twin.url)
        code, _, err = run(capsys, "discover", "--add", "m-open", "--data", d)
        assert code == 1 and "served by sim, twin; pick one with --endpoint" in err
        code, out, err = run(
            capsys, "discover", "--add", "m-open", "--endpoint", "twin", "--data", d
        )
        assert code == 0 and "added m-open → twin" in out
    assert Roster(data).view().models["m-open"].endpoint == "twin"


@pytest.mark.slow
def test_a_hand_edited_catalog_with_junk_entries_is_read_and_repaired(data, capsys):
    Roster(data).add_model("paid", "sim", served="m-paid")
    (data.config / "catalog.json").write_text(
        json.dumps(
            {
                "endpoints": {
                    "sim": {"m-paid": {"context": 5, "vision": {"no": "value"}}, "m-free": []}
                }
            }
        )
    )
    d = str(data.root)
    assert show(capsys, data, "paid") == {}  # nothing stored there is a fact
    code, out, _ = run(capsys, "discover", "--data", d, "--json")
    assert code == 0 and [m["id"] for m in json.loads(out)["models"]][0] == "m-free"
    code, _, err = run(capsys, "catalog", "refresh", "--data", d)
    assert code == 0, err
    assert show(capsys, data, "paid")["context"]["value"] == 64000
    assert catalog_file(data)["endpoints"]["sim"]["m-free"]["price_in"]["value"] == 0


@pytest.mark.slow
def test_discover_marks_a_model_the_roster_serves_from_another_endpoint(data, upstream, capsys):
    with SimUpstream({"m-open": {"window": 16000}}) as mirror:
        Roster(data).add_endpoint("mirror", mirror.url)
        Roster(data).add_model("open-here", "mirror", served="m-open")
        code, out, err = run(capsys, "discover", "--data", str(data.root), "--json")
        assert code == 0, err
        found = {(m["endpoint"], m["id"]): m for m in json.loads(out)["models"]}
        # served by the mirror on the roster: not listed there, listed on sim as a second way
        assert ("mirror", "m-open") not in found
        assert found[("sim", "m-open")]["also_on_roster"] == ["open-here"]
        assert found[("sim", "m-free")]["also_on_roster"] == []
        code, out, _ = run(capsys, "discover", "--data", str(data.root))
        line = next(x for x in out.splitlines() if "m-open" in x)
        assert line.split()[-1] == "open-here"


@pytest.mark.slow
def test_discover_add_picks_an_alias_that_is_free_and_valid(data, upstream, capsys):
    upstream.script("vendor model v2", window=4000)  # a served id no alias can hold as it is
    with SimUpstream({"m-open": {"window": 16000}}) as mirror:
        Roster(data).add_endpoint("mirror", mirror.url)
        Roster(data).add_model("m-open", "mirror")  # the served id is taken as an alias
        d = str(data.root)
        code, out, err = run(
            capsys,
            "discover",
            "--add",
            "m-open",
            "vendor model v2",
            "--endpoint",
            "sim",
            "--data",
            d,
            "--json",
        )
        assert code == 0, err
        added = {a["served"]: a["alias"] for a in json.loads(out)["added"]}
        assert added == {"m-open": "sim/m-open", "vendor model v2": "vendor-model-v2"}
        view = Roster(data).view()
        assert (view.models["sim/m-open"].endpoint, view.models["sim/m-open"].served) == (
            "sim",
            "m-open",
        )
        assert view.models["m-open"].endpoint == "mirror"  # untouched
        assert view.models["vendor-model-v2"].served == "vendor model v2"
