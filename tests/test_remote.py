"""The one client of a running gateway (``metrics/cli/remote.py``), as both of its users drive
it: ``panelist ask|verdict|pending --url`` and ``panelist mcp``. They must agree on proxies
(loopback is never proxied, other hosts follow the proxy variables) and on the key variable."""

import io
import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from conftest import PATIENCE, Gateway, read_jsonl
from panelist.gateway import make_gateway
from panelist.metrics.cli import mcp as mcp_server
from panelist.metrics.cli.main import main
from panelist.metrics.server.keys import Keys


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def free_port() -> int:
    """A loopback port just freed: nothing listens there."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def mcp_call(gateway: mcp_server.Remote, tool: str, args: dict | None = None) -> dict:
    """One tools/call through the MCP server, in process; its result."""
    request = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": tool, "arguments": args or {}},
    }
    wfile = io.BytesIO()
    mcp_server.Server(
        gateway, io.BytesIO(json.dumps(request).encode() + b"\n"), wfile, io.StringIO()
    ).serve()
    (reply,) = [json.loads(line) for line in wfile.getvalue().splitlines()]
    return reply["result"]


def text_of(result: dict) -> str:
    return "\n".join(c["text"] for c in result["content"])


@pytest.fixture()
def dead_proxy(monkeypatch) -> str:
    """HTTP_PROXY and HTTPS_PROXY (both spellings) name a proxy that is not running."""
    proxy = f"http://127.0.0.1:{free_port()}"
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.setenv(name, proxy)
    return proxy


class RecordingProxy:
    """An HTTP proxy on 127.0.0.1 that answers every request itself, as the gateway would, and
    records the request line and headers it was sent."""

    def __init__(self, answers: dict[str, dict]):
        self.seen: list[tuple[str, dict]] = []
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                proxy.seen.append((self.requestline, dict(self.headers)))
                path = self.path.split("://", 1)[-1].split("/", 1)[-1].split("?")[0]
                body = json.dumps(answers["/" + path]).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = False  # server_close joins them
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,))
        self.thread.start()

    def __enter__(self) -> "RecordingProxy":
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(PATIENCE)
        assert not self.thread.is_alive()


def test_ask_url_and_mcp_reach_a_loopback_gateway_past_a_dead_proxy(
    gateway, home, capsys, dead_proxy
):
    code, out, err = run(capsys, "ask", "trio", "hello", "--url", gateway.url + "/v1", "--json")
    assert code == 0, err
    call = json.loads(out)["bench"]["seats"][0]["call"]
    code, out, err = run(capsys, "verdict", call, "--useful", "--url", gateway.url, "--json")
    assert code == 0 and json.loads(out)["written"] is True, err
    port = gateway.url.rsplit(":", 1)[1]
    code, out, err = run(capsys, "pending", "--url", f"http://localhost:{port}", "--json")
    assert code == 0, err
    assert call not in {o["call"] for o in json.loads(out)} and len(json.loads(out)) == 4

    listed = mcp_call(mcp_server.connect(gateway.url + "/v1"), "list_collections")
    assert listed["isError"] is False, text_of(listed)
    assert [c["name"] for c in listed["structuredContent"]["collections"]] == ["bench/trio"]
    asked = mcp_call(
        mcp_server.connect(gateway.url), "ask", {"collection": "trio", "prompt": "hello again"}
    )
    assert asked["isError"] is False, text_of(asked)
    assert len(read_jsonl(home.gateway_runs / "calls.jsonl")) == 2


@pytest.mark.slow
def test_a_host_that_is_not_loopback_goes_through_the_proxy(capsys, monkeypatch):
    pending = {
        "data": [
            {
                "call": "p20260101-1.member1",
                "alias": "fast",
                "collection": "bench/trio",
                "ts": "2026-01-01T00:00:00Z",
            }
        ],
        "abandoned": [],
    }
    models = {
        "object": "list",
        "data": [{"id": "bench/trio", "description": "Three", "members": ["fast"], "reply": "all"}],
    }
    with RecordingProxy({"/bench/pending": pending, "/v1/models": models}) as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        monkeypatch.setenv("PANELIST_KEY", "pk_remote-secret")
        code, out, err = run(capsys, "pending", "--url", "http://gateway.test:8123/v1", "--json")
        assert code == 0, err
        assert json.loads(out) == pending["data"]
        listed = mcp_call(mcp_server.connect("http://gateway.test:8123"), "list_collections")
        assert listed["isError"] is False, text_of(listed)
        assert listed["structuredContent"]["collections"][0]["name"] == "bench/trio"
    (cli_line, cli_headers), (mcp_line, mcp_headers) = proxy.seen
    assert cli_line == "GET http://gateway.test:8123/bench/pending?limit=50 HTTP/1.1"
    assert mcp_line == "GET http://gateway.test:8123/v1/models HTTP/1.1"
    for headers in (cli_headers, mcp_headers):
        assert headers["Host"] == "gateway.test:8123"
        assert headers["Authorization"] == "Bearer pk_remote-secret"


def test_ask_url_and_mcp_read_the_same_key_variable(home, capsys, monkeypatch):
    secret, _ = Keys(home).create("agent")
    with Gateway(make_gateway(home, env={"PANELIST_REQUIRE_KEYS": "1"})) as gw:

        def both() -> tuple[tuple[int, str, str], dict]:
            return (
                run(capsys, "ask", "trio", "hi", "--url", gw.url, "--json"),
                mcp_call(mcp_server.connect(gw.url), "list_collections"),
            )

        (code, _, err), listed = both()
        assert code == 1 and "(401)" in err and "set PANELIST_KEY" in err
        assert listed["isError"] and "set PANELIST_KEY" in text_of(listed)

        monkeypatch.setenv("PANELIST_KEY", secret)
        (code, out, err), listed = both()
        assert code == 0 and json.loads(out)["bench"]["seats"], err
        assert listed["isError"] is False, text_of(listed)

        monkeypatch.delenv("PANELIST_KEY")  # the older name, as README says, still works
        monkeypatch.setenv("PANELIST_API_KEY", secret)
        (code, out, err), listed = both()
        assert code == 0 and listed["isError"] is False, err

        monkeypatch.setenv("PANELIST_KEY", secret[:-4] + "zzzz")  # it wins over the old name
        (code, out, err), listed = both()
        assert code == 1 and err.count("\n") == 1
        assert "the PANELIST_KEY given to this command was refused" in err
        assert listed["isError"]
        assert "the PANELIST_KEY given to this server was refused" in text_of(listed)
        for shown in (out, err, text_of(listed), json.dumps(listed)):
            assert secret[:-4] not in shown
    assert [c["key"] for c in read_jsonl(home.gateway_runs / "calls.jsonl")] == ["agent"] * 2


@pytest.mark.slow
def test_no_gateway_at_the_url_says_how_to_start_one(capsys, dead_proxy):
    port = free_port()
    for argv in (
        ["pending"],
        ["ask", "trio", "hi"],
        ["verdict", "p20260101-1.member1", "--useful"],
    ):
        code, out, err = run(capsys, *argv, "--url", f"http://127.0.0.1:{port}/v1")
        assert code == 1 and out == "" and err.count("\n") == 1
        assert f"no Panelist gateway is running at http://127.0.0.1:{port}" in err
        assert f"`panelist gateway --port {port}`" in err
    code, _, err = run(capsys, "pending", "--url", "http://user:pw@127.0.0.1:8123")
    assert code == 1 and "is not a gateway URL" in err and "user:pw" not in err
