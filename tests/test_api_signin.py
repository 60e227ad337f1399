"""The dashboard's provider sign-in routes (``metrics.server.signins``) over a real dashboard,
against the simulated provider of ``signinkit``, the test playing the browser: the key lands
where the endpoint reads it and no reply carries it; a refusal stores nothing."""

import json
import os
from pathlib import Path

import pytest
from apikit import assert_error, covers
from conftest import wait_until
from panelist.metrics.roster.roster import Roster
from signinkit import FakeProvider, sign_in

pytestmark = pytest.mark.slow


@pytest.fixture
def provider(home):
    p = FakeProvider()
    home.file("providers.json").write_text(
        json.dumps({"v": 1, "providers": {"sim-auth": p.entry()}})
    )
    yield p
    p.close()


def settled(dash, job_id) -> dict:
    seen = {}

    def done():
        status, body, _ = dash.get(f"/api/endpoints/connect/{job_id}")
        seen.update(body)
        return status == 200 and body["state"] != "waiting"

    assert wait_until(done)
    return seen


@covers("GET", "/api/providers")
def test_providers_lists_the_file(dash, provider):
    status, body, _ = dash.get("/api/providers")
    assert status == 200
    assert body == {"data": [{"name": "sim-auth", "base_url": "https://models.example/api/v1"}]}


@covers("POST", "/api/endpoints/connect")
@covers("GET", "/api/endpoints/connect/{id}")
def test_connect_signs_in_and_stores_the_key_without_showing_it(dash, home, provider, monkeypatch):
    monkeypatch.delenv("PANELIST_KEY_ROUTER", raising=False)
    status, started, _ = dash.post(
        "/api/endpoints/connect", {"name": "router", "provider": "sim-auth"}
    )
    assert status == 202 and started["state"] == "waiting"
    assert started["auth_url"].startswith(provider.url + "/auth?")
    page = sign_in(started["auth_url"])
    assert page[0] == 200
    done = settled(dash, started["id"])
    [key] = provider.issued
    assert done["state"] == "done" and done["error"] is None
    assert done["result"]["key_env"] == "PANELIST_KEY_ROUTER"
    assert key not in json.dumps(done)
    assert json.loads(Path(os.environ["PANELIST_KEY_FILE"]).read_text())["keys"] == {
        "PANELIST_KEY_ROUTER": key
    }
    status, listing, _ = dash.get("/api/endpoints")
    row = next(r for r in listing["data"] if r["name"] == "router")
    assert row["key_set"] is True and row["base_url"] == "https://models.example/api/v1"
    assert key not in json.dumps(listing)


@covers("DELETE", "/api/endpoints/connect/{id}")
def test_a_waiting_sign_in_can_be_cancelled_and_stores_nothing(dash, home, provider):
    status, started, _ = dash.post(
        "/api/endpoints/connect", {"name": "router", "provider": "sim-auth"}
    )
    assert status == 202
    status, body, _ = dash.request("DELETE", f"/api/endpoints/connect/{started['id']}")
    assert status == 200 and body["state"] == "cancelled" and "nothing was stored" in body["error"]
    assert "router" not in Roster(home).view().endpoints
    assert not Path(os.environ["PANELIST_KEY_FILE"]).exists()


def test_a_refused_exchange_is_read_back_as_failed(dash, home, provider):
    provider.fail = (500, b'{"error": {"message": "database down"}}')
    _status, started, _ = dash.post(
        "/api/endpoints/connect", {"name": "router", "provider": "sim-auth"}
    )
    sign_in(started["auth_url"])
    done = settled(dash, started["id"])
    assert done["state"] == "failed" and "HTTP 500: database down" in done["error"]
    assert "router" not in Roster(home).view().endpoints


def test_connect_refuses_an_unknown_provider_a_second_wait_and_an_unknown_id(dash, provider):
    status, body, _ = dash.post("/api/endpoints/connect", {"name": "router", "provider": "no"})
    assert_error(status, body, 404, says="no sign-in provider 'no'")
    status, first, _ = dash.post(
        "/api/endpoints/connect", {"name": "router", "provider": "sim-auth"}
    )
    status, body, _ = dash.post(
        "/api/endpoints/connect", {"name": "router", "provider": "sim-auth"}
    )
    assert_error(status, body, 409, says="already waiting")
    status, body, _ = dash.get("/api/endpoints/connect/s0")
    assert_error(status, body, 404, says="no sign-in 's0'")
    dash.request("DELETE", f"/api/endpoints/connect/{first['id']}")
