"""Webhooks: an alert raised on the data folder is POSTed to each hook that wants its kind, by
a sender that follows the alert log; a receiver that fails is retried and then given up with
the failure shown; a slow receiver holds up no panel; the URL's secret is never shown."""

import json
import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from apikit import covers
from conftest import wait_until
from panelist.metrics.alerts import Alerts
from panelist.metrics.cli.main import main
from panelist.metrics.upkeep import webhooks

SECRET = "T0AAA/B0BBB/s3cretXYZW"


class Receiver:
    """A real HTTP server on 127.0.0.1 that keeps each POSTed body; ``status`` is what it
    answers; with ``gate`` it waits for the gate to open before answering."""

    def __init__(self, status: int = 200, gate: threading.Event | None = None):
        self.bodies, self.paths = [], []
        self.arrived, self.answered = threading.Event(), threading.Event()
        me = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                data = self.rfile.read(int(self.headers["Content-Length"]))
                me.bodies.append(json.loads(data))
                me.paths.append(self.path)
                me.arrived.set()
                if gate is not None:
                    gate.wait()
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()
                me.answered.set()

            def log_message(self, *a):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_port}/hooks/{SECRET}"

    def close(self):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


@pytest.fixture()
def receiver():
    r = Receiver()
    yield r
    r.close()


def cli(capsys, home, *argv):
    code = main([*argv, "--data", str(home.root)])
    out, err = capsys.readouterr()
    return code, out, err


def raise_one(home, kind="failing", subject="slow", message="slow is failing: 3 of 3"):
    book = Alerts(home)
    try:
        return book.raise_alert(kind, subject, message)
    finally:
        book.close()


@pytest.mark.slow
def test_an_alert_reaches_the_receiver_as_json_and_as_slack_text(home, receiver, capsys):
    raise_one(home, "before", "x", "raised before any hook: not sent")
    code, out, _ = cli(capsys, home, "alerts", "webhook", "add", receiver.url)
    assert code == 0 and "w1" in out and SECRET not in out and "XYZW" in out
    cli(capsys, home, "alerts", "webhook", "add", receiver.url, "--slack", "--kind", "failing")
    cli(capsys, home, "alerts", "webhook", "add", receiver.url, "--kind", "went_paid")
    sender = webhooks.Sender(home, backoff=0)
    assert sender.check() == 0  # the history before the hooks is not replayed
    alert = raise_one(home)
    assert sender.check() == 2  # w1 (every kind) and w2 (failing); w3 wants went_paid only
    assert receiver.bodies == [
        {
            "kind": "failing",
            "model": "slow",
            "message": "slow is failing: 3 of 3",
            "ts": alert["ts"],
        },
        {"text": "[failing] slow is failing: 3 of 3"},
    ]
    assert receiver.paths == [f"/hooks/{SECRET}"] * 2
    assert sender.check() == 0 and len(receiver.bodies) == 2  # each alert is sent once

    code, out, _ = cli(capsys, home, "alerts", "webhook", "list")
    assert code == 0 and SECRET not in out and out.count("sent failing at") == 2
    assert "nothing sent yet" in out and "went_paid" in out
    code, out, _ = cli(capsys, home, "alerts", "webhook", "rm", "w2")
    assert code == 0
    # the whole URL is in the config file alone, which only its owner may read
    assert home.file("webhooks.json").stat().st_mode & 0o077 == 0
    assert SECRET not in home.file("changes.jsonl").read_text()
    assert SECRET not in (home.runs / "webhooks.json").read_text()
    code, out, _ = cli(capsys, home, "--json", "alerts", "webhook", "list")
    assert [h["id"] for h in json.loads(out)] == ["w1", "w3"]
    code, _, err = cli(capsys, home, "alerts", "webhook", "rm", "w2")
    assert code != 0 and "no webhook 'w2'" in err
    sender.close()


@pytest.mark.slow
def test_a_failing_receiver_is_retried_then_given_up_with_the_failure_shown(home, capsys, caplog):
    broken = Receiver(status=500)
    try:
        webhooks.Hooks(home).add(broken.url)
        sender = webhooks.Sender(home, tries=3, backoff=0)
        raise_one(home)
        with caplog.at_level(logging.WARNING, logger="panelist.webhooks"):
            assert sender.check() == 1
        assert len(broken.bodies) == 3
        code, out, _ = cli(capsys, home, "alerts", "webhook", "list")
        assert "FAILED failing" in out and "HTTP 500; gave up after 3 tries" in out
        assert "gave up after 3 tries" in caplog.text and SECRET not in caplog.text
        sender.close()
    finally:
        broken.close()


def test_an_unreachable_receiver_is_given_up_and_a_bad_url_refused(home, capsys):
    # a port nothing listens on: the connection is refused at once
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    webhooks.Hooks(home).add(f"http://127.0.0.1:{port}/x/{SECRET}")
    sender = webhooks.Sender(home, tries=2, backoff=0)
    raise_one(home)
    assert sender.check() == 1
    [row] = webhooks.Hooks(home).public()
    assert row["last"]["ok"] is False and "not reached" in row["last"]["error"]
    assert SECRET not in json.dumps(row)
    code, _, err = cli(capsys, home, "alerts", "webhook", "add", "ftp://x/y")
    assert code != 0 and "http:// or https://" in err


@pytest.mark.slow
def test_a_slow_receiver_does_not_hold_up_a_panel(home, dash):
    gate = threading.Event()
    slow = Receiver(gate=gate)
    try:
        webhooks.Hooks(home).add(slow.url)
        raise_one(home)
        assert slow.arrived.wait(10)  # the server's sender is inside the POST, held there
        status, body, _ = dash.post(
            "/v1/chat/completions",
            {"model": "bench/trio", "messages": [{"role": "user", "content": "Review this"}]},
        )
        assert status == 200, body
        assert not slow.answered.is_set()  # the panel answered while the receiver still waits
        gate.set()
        assert wait_until(
            lambda: (dash.get("/api/alerts/webhooks")[1]["data"][0]["last"] or {}).get("ok") is True
        )
    finally:
        gate.set()
        slow.close()


@pytest.mark.slow
@covers("GET", "/api/alerts/webhooks")
@covers("POST", "/api/alerts/webhooks")
@covers("POST", "/api/alerts/webhooks/test")
@covers("DELETE", "/api/alerts/webhooks/{hook}")
def test_the_api_adds_lists_tests_and_removes_without_showing_the_secret(dash, receiver):
    status, body, _ = dash.post(
        "/api/alerts/webhooks", {"url": receiver.url, "kinds": ["failing"], "slack": True}
    )
    assert status == 200 and body["id"] == "w1" and SECRET not in json.dumps(body), body
    status, body, _ = dash.post("/api/alerts/webhooks/test", {})
    assert status == 200 and body["data"][0]["ok"] is True, body
    assert receiver.bodies[-1]["text"].startswith("[test] ")
    status, body, _ = dash.get("/api/alerts/webhooks")
    assert (
        status == 200 and SECRET not in json.dumps(body) and body["data"][0]["kinds"] == ["failing"]
    )
    status, body, _ = dash.post("/api/alerts/webhooks", {"url": "not a url"})
    assert status == 400 and "http://" in body["error"]["message"], body
    status, body, _ = dash.request("DELETE", "/api/alerts/webhooks/w1")
    assert status == 200, body
    status, body, _ = dash.post("/api/alerts/webhooks/test", {})
    assert status == 404 and "webhook add" in body["error"]["message"], body
