"""Collections and limits: validation on write, the explorer formula, refusals that teach."""

import json
import threading

import pytest

from panelist.metrics.roster.collection import Collections
from panelist.metrics.errors import BadRequest, ConfigInvalid, NotFound
from panelist.metrics.home import open_home
from panelist.metrics.roster.roster import Roster


@pytest.fixture()
def home(tmp_path):
    home = open_home(tmp_path / "data")
    roster = Roster(home)
    roster.add_endpoint("local", "http://127.0.0.1:9/v1")
    for alias in "abcdef":
        roster.add_model(alias, "local")
    return home


@pytest.mark.parametrize("members, explorers", [(1, 2), (2, 2), (3, 2), (4, 1), (5, 0)])
def test_explorer_formula(home, members, explorers):
    cols = Collections(home)
    c = cols.save(Roster(home).view(), "x", list("abcde"[:members]))
    assert c.explorers(cols.limits()) == explorers


def test_limits_come_from_gateway_json(home):
    path = home.file("gateway.json")
    path.write_text(json.dumps({"max_explorers": 1, "max_calls": 3}))
    cols = Collections(home)
    c = cols.save(Roster(home).view(), "x", ["a"])
    assert c.explorers(cols.limits()) == 1
    c = cols.save(Roster(home).view(), "y", ["a", "b", "c"])
    assert c.explorers(cols.limits()) == 0


@pytest.mark.parametrize(
    "limit, value", [("max_explorers", -1), ("max_calls", 0), ("seat_timeout", -5)]
)
def test_a_refused_limit_names_the_limit_not_a_file(home, limit, value):
    cols = Collections(home)
    with pytest.raises(ConfigInvalid) as refused:
        cols.set_limits({limit: value})
    assert refused.value.param == limit
    assert (
        refused.value.message.startswith(f"{limit} must be") and str(value) in refused.value.message
    )
    assert ".json" not in refused.value.message
    # read from the file, the same value names the file it is in
    home.file("gateway.json").write_text(json.dumps({limit: value}))
    with pytest.raises(ConfigInvalid, match=f"^gateway.json: {limit} must be"):
        Collections(home).limits()


@pytest.mark.parametrize(
    "kw, fragment",
    [
        (dict(name="Bad_Name", members=["a"]), "lower-case"),
        (dict(name="x", members=[]), "at least one member"),
        (dict(name="x", members=["a", "a"]), "repeat"),
        (dict(name="x", members=["zz"]), "unknown model"),
        (dict(name="x", members=list("abcdef")), "max_calls"),
        (dict(name="x", members=["a"], description="d" * 301), "300"),
        (dict(name="x", members=["a"], tags=[f"t{i}" for i in range(9)]), "at most 8"),
        (dict(name="x", members=["a"], tags=["Upper"]), "lower-case"),
        (dict(name="x", members=["a"], reply="some"), "all, merged, pick"),
        (dict(name="x", members=["a"], merger="zz"), "merger"),
        (dict(name="x", members=["a"], shape="Two Words"), "shape"),
    ],
)
def test_validation_says_what_is_wrong(home, kw, fragment):
    with pytest.raises(ConfigInvalid) as err:
        Collections(home).save(Roster(home).view(), kw.pop("name"), kw.pop("members"), **kw)
    assert fragment in err.value.message


def test_changes_are_logged_with_old_and_new(home):
    cols = Collections(home)
    cols.save(Roster(home).view(), "rev", ["a"], description="first")
    cols.save(Roster(home).view(), "rev", ["a"], description="first")  # no change, no line
    cols.save(Roster(home).view(), "rev", ["a", "b"], description="second")
    cols.remove("rev")
    lines = [json.loads(x) for x in home.file("changes.jsonl").read_text().splitlines()]
    mine = [x for x in lines if x["file"] == "collections.json"]
    assert [(x["old"] or {}).get("description") for x in mine] == [None, "first", "second"]
    assert [(x["new"] or {}).get("members") for x in mine] == [["a"], ["a", "b"], None]
    odd = [x for x in mine if not (x["by"] and x["ts"].endswith("Z") and x["v"] == 1)]
    assert not odd, f"change records without who, a UTC time or schema 1: {odd}"


def test_resolve_refuses_with_every_collection_listed(home):
    cols = Collections(home)
    cols.save(Roster(home).view(), "reviewers", ["a"], description="Find bugs", tags=["code"])
    cols.save(Roster(home).view(), "design", ["b"], description="Weigh designs")
    with pytest.raises(BadRequest) as err:
        cols.resolve(None)
    assert "bench/reviewers [code]: Find bugs" in err.value.message
    assert "bench/design: Weigh designs" in err.value.message
    with pytest.raises(NotFound) as err:
        cols.resolve("bench/nope")
    assert "unknown collection 'bench/nope'" in err.value.message
    assert "Find bugs" in err.value.message
    assert cols.resolve("bench/design:merged")[1] == "merged"


def test_concurrent_saves_lose_no_update(home):
    view = Roster(home).view()
    errors = []

    def save(i):
        try:
            Collections(home).save(view, f"c{i}", ["a"])
        except Exception as exc:  # pragma: no cover - surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=save, args=(i,)) for i in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert sorted(Collections(home).all()) == sorted(f"c{i}" for i in range(20))
