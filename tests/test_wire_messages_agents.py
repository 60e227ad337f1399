"""What Anthropic's agent clients send to ``/v1/messages``: keys in either header."""


import anthropic
import pytest

from conftest import Gateway
from panelist.gateway import make_gateway
from panelist.metrics.server.keys import Keys

ASK = [{"role": "user", "content": "Where is order 42?"}]


# -- keys ----------------------------------------------------------------------------------------
def test_key_refusals_name_the_header_the_key_came_in(home, monkeypatch):
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    secret, _ = Keys(home).create("agent")
    unknown = "pk_" + "A" * 43
    with Gateway(make_gateway(home, env={"PANELIST_REQUIRE_KEYS": "1"})) as gw:
        said = {}
        # the package sends api_key as a bearer token; older ones, and other clients, send it
        # as x-api-key
        for name, how in (("x-api-key", "default_headers"), ("Authorization", "api_key")):
            for which, key in (("malformed", "sk-not-ours"), ("unknown", unknown)):
                given = {how: {"x-api-key": key} if how == "default_headers" else key}
                with anthropic.Anthropic(base_url=gw.url, max_retries=0, **given) as c:
                    with pytest.raises(anthropic.AuthenticationError) as caught:
                        c.messages.create(model="bench/trio", max_tokens=10, messages=ASK)
                error = caught.value.body["error"]
                assert error["type"] == "authentication_error"
                assert error["message"].startswith(which) and f"'{name}" in error["message"]
                said[name, which] = error["message"]
        assert "Authorization" not in said["x-api-key", "malformed"]
        assert "x-api-key: pk_" in said["x-api-key", "malformed"]
        assert "x-api-key" not in said["Authorization", "malformed"]
        assert "Authorization: Bearer pk_" in said["Authorization", "malformed"]
        assert "Authorization" not in said["x-api-key", "unknown"]
        # the same on OpenAI's routes, where the key came as a bearer token
        status, body, _ = gw.get("/v1/models", headers={"Authorization": "Bearer nope"})
        assert status == 401 and body["error"]["code"] == "malformed_key"
        assert "'Authorization: Bearer pk_'" in body["error"]["message"]
        status, body, _ = gw.get("/v1/models", headers={"x-api-key": " "})
        assert status == 401 and body["error"]["code"] == "missing_key"
        status, body, _ = gw.get("/v1/models", headers={"x-api-key": secret})
        assert status == 200
    assert not any(k in m for m in said.values() for k in ("sk-not-ours", unknown, secret))
