"""``Upstream.models``: what an endpoint serves, from its ``GET /models``."""

import pytest

from panelist.metrics.upstream.client import Upstream
from panelist.metrics.errors import UpstreamBadReply
from panelist.metrics.upstream.sim import SimUpstream


@pytest.fixture()
def sim():
    with SimUpstream({"a": {}, "b": {"require_key": "sk-right"}}) as s:
        yield s


@pytest.fixture()
def upstream():
    u = Upstream(proxies={})
    yield u
    u.close()


def test_models_lists_what_an_endpoint_serves(upstream, sim):
    assert sorted(e["id"] for e in upstream.models(sim.url, None, timeout=10)) == ["a", "b"]


def test_a_wrong_path_is_a_bad_reply_that_says_what_to_check(upstream, sim):
    with pytest.raises(UpstreamBadReply, match="/v1 prefix|model not found"):
        upstream.models(sim.url.removesuffix("/v1") + "/nowhere", None, timeout=10)
