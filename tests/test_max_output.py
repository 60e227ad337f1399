"""A seat is never asked for more tokens than its model may write: ``max_tokens`` (and
``max_completion_tokens``, and the Messages API's ``max_tokens`` after translation) is clamped
per seat to the model's known max output (typed, listed by its endpoint, or learned from a
refusal), and the seat's record says so."""

import json

import pytest

from conftest import Gateway, read_jsonl, set_limits, wait_until
from panelist.gateway import make_gateway
from panelist.metrics.cli.main import main
from panelist.metrics.errors import OutputCapExceeded
from panelist.metrics.home import open_home
from panelist.metrics.roster.catalog import Catalog
from panelist.metrics.roster.collection import Collections
from panelist.metrics.roster.roster import Roster
from panelist.metrics.upstream.client import Upstream
from panelist.metrics.upstream.sim import SimUpstream

PROMPT = "Review this function for off-by-one errors."


def budgets(sim, model: str, param: str = "max_tokens") -> list:
    """The budgets ``model`` was sent, in the order its requests came."""
    return [r["body"].get(param) for r in sim.requests if r["model"] == model]


def ask(gateway, model="bench/pair", **params):
    return gateway.post(
        "/v1/chat/completions",
        {"model": model, "messages": [{"role": "user", "content": PROMPT}], **params},
    )


def seat_of(body, alias):
    return next(s for s in body["bench"]["seats"] if s["alias"] == alias)


def evidence_of(home, alias) -> list[dict]:
    return [
        e
        for e in read_jsonl(home.gateway_runs / "evidence.jsonl")
        if e["kind"] == "seat" and e["alias"] == alias
    ]


@pytest.fixture()
def pair(home):
    set_limits(home, max_explorers=0)
    Collections(home).save(Roster(home).view(), "pair", ["fast", "mid"])
    return home


def test_a_typed_max_output_clamps_the_budget_before_asking(gateway, pair, sim):
    Roster(pair).add_model("fast", "sim", family="fast", context=100_000, max_output=4096)
    sim.script("fast", max_output=4096)
    status, body, _ = ask(gateway, max_tokens=100_000)
    assert status == 200, body
    assert budgets(sim, "fast") == [4096]  # asked once, within its cap
    assert budgets(sim, "mid") == [100_000]  # no cap known: sent as asked
    assert seat_of(body, "fast")["clamped"] == {
        "param": "max_tokens",
        "asked": 100_000,
        "sent": 4096,
    }
    assert "clamped" not in seat_of(body, "mid")
    [fast], [mid] = evidence_of(pair, "fast"), evidence_of(pair, "mid")
    assert fast["clamped"] == {"param": "max_tokens", "asked": 100_000, "sent": 4096}
    assert mid["clamped"] is None
    # a budget within the cap goes as asked, and max_completion_tokens is clamped the same way
    ask(gateway, max_tokens=1000)
    ask(gateway, max_completion_tokens=50_000)
    assert budgets(sim, "fast")[1:] == [1000, None]
    assert budgets(sim, "fast", "max_completion_tokens")[1:] == [None, 4096]


def test_a_refused_budget_is_learned_then_clamped_before_asking(gateway, pair, sim):
    sim.script(
        "fast",
        max_output=8192,
        message="max_tokens: 100000 > 8192, which is the "
        "maximum allowed number of output tokens for fast",
    )
    status, body, _ = ask(gateway, max_tokens=100_000)
    # the refusal stated the cap: the seat is asked again within it, in the same panel
    assert status == 200, body
    assert budgets(sim, "fast") == [100_000, 8192]
    seat = seat_of(body, "fast")
    assert seat["status"] == "ok" and seat["clamped"]["sent"] == 8192
    # and the catalog keeps it, so the next panel asks within the cap at once
    catalog = Catalog(pair)
    assert wait_until(
        lambda: catalog.facts("fast").get("max_output", {}).get("source") == "learned"
    ), catalog.facts("fast")
    assert catalog.facts("fast")["max_output"]["value"] == 8192
    status, body, _ = ask(gateway, max_tokens=100_000)
    assert status == 200 and budgets(sim, "fast") == [100_000, 8192, 8192]
    assert seat_of(body, "fast")["clamped"] == {
        "param": "max_tokens",
        "asked": 100_000,
        "sent": 8192,
    }
    # the second panel's seat was asked once; the first's record says it took two attempts
    first, second = evidence_of(pair, "fast")
    assert (first["attempts"], second["attempts"]) == (2, 1)


@pytest.mark.slow
def test_a_listed_max_output_clamps_a_messages_request(tmp_path):
    """The Messages API requires ``max_tokens``, and agents send large ones: a model whose
    endpoint lists a lower cap is asked within it (nothing typed on the roster)."""
    anthropic = pytest.importorskip("anthropic")
    with SimUpstream({"small": {"max_output": 2048}}) as sim:
        home = open_home(tmp_path / "data")
        roster = Roster(home)
        roster.add_endpoint("sim", sim.url)
        roster.add_model("small", "sim", family="small")
        Collections(home).save(roster.view(), "solo", ["small"])
        assert main(["catalog", "refresh", "--data", str(home.root)]) == 0
        with Gateway(make_gateway(home, env={})) as gw:
            client = anthropic.Anthropic(base_url=gw.url, api_key="local", max_retries=0)
            try:
                message = client.messages.create(
                    model="bench/solo:pick",
                    max_tokens=16_000,
                    messages=[{"role": "user", "content": PROMPT}],
                )
            finally:
                client.close()
        assert message.content[0].text.startswith("[simulated small]")
        assert budgets(sim, "small") == [2048]


@pytest.mark.parametrize(
    "said, cap",
    [
        (
            "max_tokens: 100000 > 64000, which is the maximum allowed number of output tokens for "
            "claude-sonnet-4",
            64000,
        ),
        (
            "max_tokens is too large: 100000. This model supports at most 16384 completion tokens, "
            "whereas you provided 100000.",
            16384,
        ),
        ("Invalid max_tokens value, the valid range of max_tokens is [1, 8192]", 8192),
        (
            "`max_tokens` must be less than or equal to `32768`, the maximum value for `max_tokens` is "
            "less than the `context_window` for this model",
            32768,
        ),
    ],
)
@pytest.mark.slow
def test_a_refusal_that_states_the_cap_is_read_as_one(said, cap):
    with SimUpstream({"m": {"max_output": 10, "message": said}}) as sim:
        upstream = Upstream()
        try:
            with pytest.raises(OutputCapExceeded) as caught:
                upstream.chat(
                    sim.url,
                    None,
                    {
                        "model": "m",
                        "max_tokens": 100_000,
                        "messages": [{"role": "user", "content": "hi"}],
                    },
                    timeout=30,
                )
        finally:
            upstream.close()
    assert caught.value.max_output == cap
    assert caught.value.kind == "max_output"
    assert json.dumps(said[:40])[1:-1] in caught.value.message
