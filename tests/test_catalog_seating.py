"""The catalog at work: seating reads the facts an endpoint's listing states, and what upstream
failures teach (a window, a Retry-After) is kept in the catalog beside the typed facts."""

import json

import pytest

from conftest import Gateway, logged, wait_until
from panelist.gateway import make_gateway
from panelist.metrics.cli.main import main
from panelist.metrics.roster.collection import Collections
from panelist.metrics.home import open_home
from panelist.metrics.roster.roster import Roster
from panelist.metrics.upstream.sim import SimUpstream
from test_replies import DATA_URL


def cli(capsys, *argv) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def facts(capsys, home, alias) -> dict:
    code, out, err = cli(capsys, "catalog", "show", alias, "--data", str(home.root), "--json")
    assert code == 0, err
    return json.loads(out)["facts"]


def learned(capsys, home, alias, fact) -> dict:
    """The facts of ``alias`` once a learned ``fact`` is among them: a server writes what it
    learned behind the reply, on a thread of its own."""
    known: dict = {}

    def there() -> bool:
        known.clear()
        known.update(facts(capsys, home, alias))
        f = known.get(fact, {})
        return f.get("source") == "learned" or "learned" in f

    assert wait_until(there), f"nothing learned of {alias}'s {fact}"
    return known


def ask(gw, model, content):
    return gw.post(
        "/v1/chat/completions", {"model": model, "messages": [{"role": "user", "content": content}]}
    )


@pytest.fixture()
def listed():
    # nothing about these is typed on the roster: only the endpoint's listing states it
    with SimUpstream(
        {
            "small": {"window": 2000},
            "large": {"window": 200_000},
            "eye": {"vision": True, "window": 100_000},
            "blind": {"vision": False, "window": 100_000},
        }
    ) as s:
        yield s


@pytest.fixture()
def untyped(tmp_path, listed, capsys):
    home = open_home(tmp_path / "data")
    roster = Roster(home)
    roster.add_endpoint("sim", listed.url)
    for alias in ("small", "large", "eye", "blind"):
        roster.add_model(alias, "sim", family=alias)
    view = roster.view()
    Collections(home).save(view, "tiny", ["small"])
    Collections(home).save(view, "sight", ["eye", "blind"])
    code, _, err = cli(capsys, "catalog", "refresh", "--data", str(home.root))
    assert code == 0, err
    return home


@pytest.mark.slow
def test_a_window_only_the_listing_states_refuses_a_prompt_too_big_before_asking(untyped, listed):
    path = untyped.file("gateway.json")  # no explorer seat: only the member could sit
    path.write_text(json.dumps(dict(json.loads(path.read_text()), max_explorers=0)))
    with Gateway(make_gateway(untyped, env={})) as gw:
        status, body, _ = ask(gw, "bench/tiny", "word " * 3000)
        assert status == 400, body
        assert body["error"]["code"] == "context_length_exceeded"
        assert "small (2000 tokens)" in body["error"]["message"]
        assert listed.count("small") == 0
        status, listing, _ = gw.get("/v1/models/bench/tiny")
        assert status == 200 and listing["together"]["context_window"] == 2000


@pytest.mark.slow
def test_a_model_whose_listing_says_it_sees_sits_for_images(untyped, listed):
    content = [
        {"type": "text", "text": "What is this chair?"},
        {"type": "image_url", "image_url": {"url": DATA_URL}},
    ]
    with Gateway(make_gateway(untyped, env={})) as gw:
        status, body, _ = ask(gw, "bench/sight", content)
    assert status == 200, body
    assert [s["alias"] for s in body["bench"]["seats"]] == ["eye"]
    assert body["bench"]["skipped"][0]["alias"] == "blind"
    assert "images" in body["bench"]["skipped"][0]["why"]
    assert listed.count("eye") == 1 and listed.count("blind") == 0


@pytest.mark.slow
def test_a_typed_fact_still_wins_over_the_listing(untyped, listed):
    Roster(untyped).add_model("small", "sim", family="small", context=50_000)
    with Gateway(make_gateway(untyped, env={})) as gw:
        status, body, _ = ask(gw, "bench/tiny", "word " * 3000)
    # typed 50k: the gateway asks, and the upstream's own refusal is the seat's failure
    assert status == 200, body
    assert listed.count("small") == 1
    small = {s["alias"]: s for s in body["bench"]["seats"]}["small"]
    assert small["status"] == "error" and small["error"].startswith("context_length:")


def test_a_window_an_upstream_states_is_learned_beside_the_typed_one(gateway, home, sim, capsys):
    sim.script("fast", window=1000)
    status, body, _ = ask(gateway, "bench/trio", "word " * 1500)
    assert status == 200, body
    fast = {s["alias"]: s for s in body["bench"]["seats"]}["fast"]
    assert fast["status"] == "error" and fast["error"].startswith("context_length:")
    known = learned(capsys, home, "fast", "context")
    assert known["context"]["value"] == 100_000 and known["context"]["source"] == "typed"
    taught = known["context"]["learned"]
    assert taught["value"] == 1000 and taught["from"] == "context-length error"
    assert taught["at"]
    # what other models said is theirs: nothing learned for them
    assert "learned" not in facts(capsys, home, "mid")["context"]
    changes = [
        json.loads(line) for line in (home.config / "changes.jsonl").read_text().splitlines()
    ]
    assert any(
        c["what"] == "catalog learned context of sim:fast" and c["new"] == 1000 for c in changes
    )


def test_a_learned_window_only_goes_down(gateway, home, sim, capsys):
    sim.script("fast", window=1000)
    ask(gateway, "bench/trio", "word " * 1500)
    sim.script("fast", window=1200)  # a larger window stated later does not raise it
    # the gateway now knows 1000 and refuses the member before asking, so ask the upstream
    # through a model seated on the same served id under another alias
    Roster(home).add_model("fast-too", "sim", served="fast", family="fast-too")
    Collections(home).save(Roster(home).view(), "again", ["fast-too"])
    ask(gateway, "bench/again", "word " * 1500)
    assert learned(capsys, home, "fast", "context")["context"]["learned"]["value"] == 1000
    assert learned(capsys, home, "fast-too", "context")["context"]["value"] == 1000


def test_a_retry_after_is_learned(gateway, home, sim, capsys):
    sim.script("mid", fail="rate_limit", retry_after=7)
    status, body, _ = ask(gateway, "bench/trio", "hello")
    assert status == 200, body
    known = learned(capsys, home, "mid", "retry_after")
    assert known["retry_after"] == {
        "value": 7,
        "source": "learned",
        "from": "429 Retry-After",
        "at": known["retry_after"]["at"],
    }
    assert known["retry_after"]["at"]


def test_a_broken_catalog_leaves_seating_on_the_typed_facts(gateway, home, capfd):
    (home.config / "catalog.json").write_text("{not json")
    status, body, _ = ask(gateway, "bench/trio", "hello")
    assert status == 200, body
    assert {s["alias"] for s in body["bench"]["seats"]} >= {"fast", "mid", "slow"}
    assert "the catalog is not read" in capfd.readouterr().err
    assert logged(home)


def test_catalog_show_lists_a_learned_window_under_the_typed_one(gateway, home, sim, capsys):
    sim.script("fast", window=1000)
    ask(gateway, "bench/trio", "word " * 1500)
    learned(capsys, home, "fast", "context")
    code, out, err = cli(capsys, "catalog", "show", "fast", "--data", str(home.root))
    assert code == 0, err
    rows = [line.split() for line in out.splitlines() if line.startswith("context")]
    assert [r[:3] for r in rows] == [["context", "100000", "typed"], ["context", "1000", "learned"]]


def test_a_suite_run_teaches_the_catalog_too(home, sim, capsys):
    sim.script("x-two", window=300)  # every review task is longer than that
    code, out, err = cli(
        capsys,
        "suite",
        "run",
        "--model",
        "x-two",
        "--task",
        "claim-wilson-no-verdicts",
        "--data",
        str(home.root),
    )
    known = facts(capsys, home, "x-two")
    assert known["context"]["learned"]["value"] == 300, (code, out, err)


def test_what_a_server_learned_is_written_before_it_closes(home, sim, capsys):
    sim.script("mid", fail="rate_limit", retry_after=9)
    with Gateway(make_gateway(home, env={})) as gw:
        status, body, _ = ask(gw, "bench/trio", "hello")
        assert status == 200, body
    # closed: whatever was still queued for the catalog was written first
    assert facts(capsys, home, "mid")["retry_after"]["value"] == 9


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "lookup_order",
            "parameters": {"type": "object", "properties": {"number": {"type": "string"}}},
        },
    }
]


def test_a_refusal_of_tools_is_learned_and_the_model_is_not_seated_for_tools_again(
    gateway, home, sim, capsys
):
    sim.script("fast", tools=False)  # a 400 "… does not support tools", as Ollama words it
    with_tools = {
        "model": "bench/trio:pick",
        "tools": TOOLS,
        "messages": [{"role": "user", "content": "Where is order 7?"}],
    }
    status, body, _ = gateway.post("/v1/chat/completions", with_tools)
    assert status == 200, body
    fast = {s["alias"]: s for s in body["bench"]["seats"]}["fast"]
    assert fast["status"] == "error" and "does not support tools" in fast["error"]
    known = learned(capsys, home, "fast", "tools")
    assert known["tools"]["value"] is False and known["tools"]["source"] == "learned"
    assert known["tools"]["from"] == "tools refusal (400)" and known["tools"]["at"]
    assert "tools" not in facts(capsys, home, "mid")  # the others said nothing of the kind
    code, out, err = cli(capsys, "catalog", "show", "fast", "--data", str(home.root))
    assert [line.split()[:3] for line in out.splitlines() if line.startswith("tools")] == [
        ["tools", "False", "learned"]
    ]
    status, body, _ = gateway.post("/v1/chat/completions", with_tools)
    assert status == 200, body
    assert "fast" not in {s["alias"] for s in body["bench"]["seats"]}
    skipped = {s["alias"]: s for s in body["bench"]["skipped"]}
    assert "tools" in skipped["fast"]["why"]
    asked = sum(1 for r in sim.requests if r["model"] == "fast")
    # a request without tools still seats it
    status, body, _ = ask(gateway, "bench/trio", "Review: x = 1/0")
    assert status == 200 and "fast" in {s["alias"] for s in body["bench"]["seats"]}
    assert sum(1 for r in sim.requests if r["model"] == "fast") == asked + 1
