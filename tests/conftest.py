import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import _bootstrap  # noqa: E402,F401  (the checkout imports itself as ``panelist``)

import json  # noqa: E402
import threading  # noqa: E402
import urllib.error  # noqa: E402
import urllib.request  # noqa: E402

import pytest  # noqa: E402

from panelist.gateway import make_gateway  # noqa: E402
from panelist.metrics.collection import Collections  # noqa: E402
from panelist.metrics.home import open_home  # noqa: E402
from panelist.metrics.roster import Roster  # noqa: E402
from panelist.scripts.sim_upstream import SimUpstream  # noqa: E402

# A small roster the end-to-end tests share: three members of different speed, and explorer
# candidates of distinct families.
TEST_MODELS = {
    "fast": {"latency": 0.0}, "mid": {"latency": 0.02}, "slow": {"latency": 0.05},
    "x-one": {"latency": 0.0}, "x-two": {"latency": 0.0}, "x-three": {"latency": 0.0},
}


@pytest.fixture()
def sim():
    with SimUpstream({k: dict(v) for k, v in TEST_MODELS.items()}) as s:
        yield s


@pytest.fixture()
def home(tmp_path, sim):
    home = open_home(tmp_path / "data")
    roster = Roster(home)
    roster.add_endpoint("sim", sim.url)
    for alias in TEST_MODELS:
        roster.add_model(alias, "sim", family=alias, context=100_000)
    Collections(home).save(roster.view(), "trio", ["fast", "mid", "slow"],
                           description="Three simulated reviewers", tags=["test", "code"])
    return home


class Gateway:
    def __init__(self, server):
        self.server = server
        self.url = server.url
        self.thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def request(self, method, path, body=None, *, raw: bytes | None = None, headers=None):
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        hdrs = {"Content-Type": "application/json"} if data is not None else {}
        hdrs.update(headers or {})
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=hdrs)
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                return resp.status, json.loads(resp.read() or b"null"), resp.headers
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read() or b"null"), exc.headers

    def post(self, path, body=None, **kw):
        return self.request("POST", path, body, **kw)

    def get(self, path, **kw):
        return self.request("GET", path, **kw)


@pytest.fixture()
def gateway(home):
    server = make_gateway(home, env={})  # local mode, whatever the shell running the tests says
    gw = Gateway(server)
    yield gw
    server.close()


def read_jsonl(path):
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
