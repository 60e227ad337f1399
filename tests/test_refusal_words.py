"""How an upstream's refusal reads to a caller: its status and its own words as one aside,
"(HTTP 401: invalid api key)", set apart from the advice that follows. Over the simulated
upstream, through the upstream client."""

import pytest

from panelist.metrics.errors import AuthFailed, UpstreamServerError
from panelist.metrics.upstream.client import Upstream


@pytest.fixture()
def upstream():
    client = Upstream(proxies={})  # direct, whatever proxy the shell running the tests names
    yield client
    client.close()


def ask(model: str) -> dict:
    return {"model": model, "messages": [{"role": "user", "content": "Review: x = 1"}]}


@pytest.mark.parametrize(
    "fail, error, said",
    [
        (
            "auth",
            AuthFailed,
            "refused the API key (HTTP 401: invalid api key); check the endpoint's key",
        ),
        (
            "server_error",
            UpstreamServerError,
            "failed (HTTP 500: invalid api key); try again later",
        ),
    ],
)
def test_a_refusal_sets_the_status_and_the_upstreams_words_apart_from_the_advice(
    upstream, sim, fail, error, said
):
    sim.script("m", fail=fail, message="invalid api key")
    with pytest.raises(error) as caught:
        upstream.chat(sim.url, "sk-test-key", ask("m"), timeout=5.0)
    assert said in caught.value.message, caught.value.message
