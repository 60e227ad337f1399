"""The dashboard's Ask with chosen models (``POST /api/ask`` with ``models`` and ``explorers``),
in process: the dashboard is built over a data folder and never served, and its models are
played by ``FakeTransport``, which records every call the upstream saw."""

import pytest

from apikit import assert_error
from conftest import read_jsonl
from inprocess import Caller
from panelist.metrics.panel.panel import Panels
from panelist.metrics.upstream.client import Upstream
from panelist.serve import make_dashboard
from transport_fake import FakeTransport, completion

MESSAGES = [{"role": "user", "content": "Review x = 1"}]


@pytest.fixture()
def asker(folder):
    """The dashboard over ``folder`` (collection ``trio``: fast, mid, slow; x-one, x-two and
    x-three on the roster besides), and the transport its seats call through."""
    transport = FakeTransport(lambda req: (200, completion(f"{req.model} says fine")))
    panels = Panels(folder, upstream=Upstream(transport=transport))
    server = make_dashboard(folder, env={"PANELIST_LOGIN_PAUSE": "0"}, panels=panels)
    try:
        yield Caller(server), transport
    finally:
        server.close()
        panels.close()


def asked(transport) -> list[str]:
    return sorted(r.model for r in transport.requests)


def test_two_chosen_models_with_explorers_off_are_exactly_the_ones_asked(asker, folder):
    api, transport = asker
    status, body, _ = api.post(
        "/api/ask",
        {"model": "bench/trio", "messages": MESSAGES, "models": ["x-two", "slow"], "explorers": 0},
    )
    assert status == 200, body
    seats = body["bench"]["seats"]
    assert [(s["alias"], s["seat"]) for s in seats] == [("x-two", "member"), ("slow", "member")]
    assert all(s["status"] == "ok" for s in seats)
    assert asked(transport) == ["slow", "x-two"]
    assert "x-two says fine" in body["choices"][0]["message"]["content"]
    (line,) = read_jsonl(folder.gateway_runs / "calls.jsonl")
    assert sorted(s["alias"] for s in line["seats"]) == ["slow", "x-two"]


def test_chosen_models_still_sit_beside_explorers_unless_they_are_turned_off(asker):
    api, transport = asker
    status, body, _ = api.post(
        "/api/ask", {"model": "bench/trio", "messages": MESSAGES, "models": ["x-two", "slow"]}
    )
    assert status == 200, body
    roles = [s["seat"] for s in body["bench"]["seats"]]
    assert roles[:2] == ["member", "member"] and roles[2:] == ["explorer", "explorer"]
    assert len(asked(transport)) == 4


def test_explorers_off_alone_asks_only_the_collections_members(asker):
    api, transport = asker
    status, body, _ = api.post(
        "/api/ask", {"model": "bench/trio", "messages": MESSAGES, "explorers": 0}
    )
    assert status == 200, body
    assert [s["alias"] for s in body["bench"]["seats"]] == ["fast", "mid", "slow"]
    assert asked(transport) == ["fast", "mid", "slow"]


@pytest.mark.parametrize(
    "extra, says",
    [
        ({"models": ["fast"]}, "2 to 4 models"),
        ({"models": ["fast", "mid", "slow", "x-one", "x-two"]}, "at most 4 strings"),
        ({"models": ["fast", "fast"]}, "'fast' twice"),
        ({"models": ["fast", "nope"]}, "'nope', which is not on the roster"),
        ({"models": "fast,mid"}, "got a string"),
        ({"models": ["fast", 3]}, "item 2"),
    ],
)
def test_a_bad_choice_of_models_is_refused_before_anything_is_asked(asker, folder, extra, says):
    api, transport = asker
    status, body, _ = api.post("/api/ask", {"model": "bench/trio", "messages": MESSAGES, **extra})
    assert_error(status, body, 400, param="models", says=says)
    assert transport.requests == []
    calls = folder.gateway_runs / "calls.jsonl"
    assert not calls.exists() or read_jsonl(calls) == []


def test_an_unknown_model_is_named_with_what_to_do(asker):
    api, _ = asker
    status, body, _ = api.post(
        "/api/ask",
        {"model": "bench/trio", "messages": MESSAGES, "models": ["mid", "gone"], "explorers": 0},
    )
    assert_error(status, body, 400, param="models", says=("'gone'", "GET /api/models"))


@pytest.mark.parametrize(
    "explorers, says",
    [
        (1, "got a number above 0"),
        (-1, "got a number below 0"),
        (True, "got true"),
        ("0", "got a string"),
        (0.5, "got a number above 0"),
    ],
)
def test_explorers_takes_only_zero(asker, explorers, says):
    api, transport = asker
    status, body, _ = api.post(
        "/api/ask",
        {
            "model": "bench/trio",
            "messages": MESSAGES,
            "models": ["mid", "x-one"],
            "explorers": explorers,
        },
    )
    assert_error(status, body, 400, param="explorers", says=("'explorers' must be 0", says))
    assert transport.requests == []
