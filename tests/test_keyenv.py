"""Which environment variables an endpoint may read its key from (``metrics/roster/keyenv.py``).

The value of an endpoint's key variable is sent as ``Authorization: Bearer`` to the endpoint's
URL, which whoever edits the roster chooses. A real listener on 127.0.0.1 records the header
every request brought: it must never see a secret the user did not mean for an endpoint (a
cloud credential, the admin token), whichever way the key is read (the dashboard's Test, a saved
endpoint's listing, a probe, a panel's seat, the catalog), and must see the key of a
``PANELIST_KEY_*`` variable or of a name the user listed by hand.
"""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from conftest import PATIENCE, read_jsonl, wait_until
from panelist.metrics.cli.main import main
from panelist.metrics.roster.collection import Collections
from panelist.metrics.roster.roster import Roster

AWS = "aws-secret-access-key-0123456789"
ADMIN = "the-admin-token-0123456789abcdef"
OWN = "sk-listener-key-0123456789"
LISTED = "sk-hand-listed-key-0123456789"
REFUSED = (
    "AWS_SECRET_ACCESS_KEY",
    "PANELIST_ADMIN_TOKEN",
    "OPENAI_API_KEY",
    "HOME",
    "PANELIST_KEY",
    "PANELIST_KEY_",
)
COMPLETION = {
    "id": "c1",
    "object": "chat.completion",
    "model": "m1",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "OK"}, "finish_reason": "stop"}
    ],
    "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
}


class Listener:
    """An OpenAI-compatible endpoint on 127.0.0.1 that answers every request and records the
    ``Authorization`` header (None when there was none) and the path of each."""

    def __init__(self):
        self.seen: list[tuple[str, str | None]] = []
        listener = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self, doc):
                listener.seen.append((self.path, self.headers.get("Authorization")))
                body = json.dumps(doc).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                self._answer({"object": "list", "data": [{"id": "m1", "object": "model"}]})

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self._answer(COMPLETION)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = False  # server_close joins them
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,))
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(PATIENCE)
        assert not self.thread.is_alive()

    @property
    def headers(self) -> list[str | None]:
        return [auth for _, auth in self.seen]


@pytest.fixture()
def listener():
    recorder = Listener()
    try:
        yield recorder
    finally:
        recorder.close()


@pytest.fixture()
def secrets(monkeypatch):
    """Secrets of the process that no endpoint is meant to read, and two that are."""
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", AWS)
    monkeypatch.setenv("PANELIST_ADMIN_TOKEN", ADMIN)  # the dashboard was built without it
    monkeypatch.setenv("OPENAI_API_KEY", LISTED)
    monkeypatch.setenv("PANELIST_KEY", "pk_gateway-key-of-the-cli-0123")
    monkeypatch.setenv("PANELIST_KEY_", "sk-no-endpoint-has-an-empty-name")
    monkeypatch.setenv("PANELIST_KEY_LISTENER", OWN)


def allow(home, *names) -> None:
    """What the user does by hand to let endpoints read ``names``."""
    home.file("key_envs.json").write_text(json.dumps({"v": 1, "allowed": list(names)}))


def assert_refused(status, body, name, *, says=()):
    assert status == 400, body
    err = body["error"]
    assert err["param"] == "key_env", body
    assert name in err["message"] and "key_envs.json" in err["message"], body
    for fragment in says:
        assert fragment in err["message"], body
    for secret in (AWS, ADMIN, OWN, LISTED):
        assert secret not in json.dumps(body)


def hand_edit_endpoint(home, name, url, key_env) -> None:
    """An endpoint written into roster.json by hand (or by an older Panelist), with a model."""
    path = home.file("roster.json")
    doc = json.loads(path.read_text())
    doc["endpoints"][name] = {"base_url": url, "key_env": key_env}
    doc["models"][f"{name}-m"] = {"endpoint": name, "served": "m1", "family": f"{name}-m"}
    path.write_text(json.dumps(doc))


# -- the dashboard's Test -------------------------------------------------------------------------
def test_a_test_never_sends_a_variable_not_meant_for_endpoint_keys(api, folder, listener, secrets):
    for name in REFUSED:
        for extra in ({}, {"model": "m1"}):
            status, body, _ = api.post(
                "/api/endpoints/test",
                {"name": "listener", "base_url": listener.url, "key_env": name, **extra},
            )
            assert_refused(status, body, name)
    status, body, _ = api.post(
        "/api/endpoints/test", {"base_url": listener.url, "key_env": "AWS_SECRET_ACCESS_KEY"}
    )
    assert_refused(status, body, "AWS_SECRET_ACCESS_KEY", says=("PANELIST_KEY_", "by hand"))
    assert listener.seen == []
    # the admin token is never read, even when the user lists it by hand
    allow(folder, "PANELIST_ADMIN_TOKEN")
    status, body, _ = api.post(
        "/api/endpoints/test",
        {"base_url": listener.url, "key_env": "PANELIST_ADMIN_TOKEN", "model": "m1"},
    )
    assert_refused(status, body, "PANELIST_ADMIN_TOKEN", says=("admin token", "never"))
    assert listener.seen == []


def test_a_test_sends_a_panelist_key_variable_and_a_name_listed_by_hand(
    dash, home, listener, secrets
):
    status, body, _ = dash.post(
        "/api/endpoints/test", {"name": "listener", "base_url": listener.url}
    )  # the default: PANELIST_KEY_LISTENER
    assert status == 200 and body["ok"] is True and body["models"] == ["m1"], body
    status, body, _ = dash.post(
        "/api/endpoints/test",
        {"base_url": listener.url, "key_env": "PANELIST_KEY_LISTENER", "model": "m1"},
    )
    assert status == 200 and body["ok"] is True, body
    assert listener.headers == [f"Bearer {OWN}"] * 2
    status, body, _ = dash.post(
        "/api/endpoints/test", {"base_url": listener.url, "key_env": "OPENAI_API_KEY"}
    )
    assert_refused(status, body, "OPENAI_API_KEY")
    allow(home, "OPENAI_API_KEY")  # read again on the next request: no restart
    for extra in ({}, {"model": "m1"}):
        status, body, _ = dash.post(
            "/api/endpoints/test", {"base_url": listener.url, "key_env": "OPENAI_API_KEY", **extra}
        )
        assert status == 200 and body["ok"] is True, body
    assert listener.headers == [f"Bearer {OWN}"] * 2 + [f"Bearer {LISTED}"] * 2


# -- saving, and endpoints saved before ----------------------------------------------------------
def test_saving_an_endpoint_with_a_refused_variable_is_refused(dash, home, listener, secrets):
    roster = home.file("roster.json").read_bytes()
    for name in REFUSED:
        status, body, _ = dash.post(
            "/api/endpoints",
            {"name": "leak", "base_url": listener.url, "key_env": name, "tested": True},
        )
        assert_refused(status, body, name)
    assert home.file("roster.json").read_bytes() == roster
    allow(home, "OPENAI_API_KEY", "PANELIST_ADMIN_TOKEN")
    status, body, _ = dash.post(
        "/api/endpoints",
        {
            "name": "leak",
            "base_url": listener.url,
            "key_env": "PANELIST_ADMIN_TOKEN",
            "tested": True,
        },
    )
    assert_refused(status, body, "PANELIST_ADMIN_TOKEN")
    assert listener.seen == []
    status, row, _ = dash.post(
        "/api/endpoints",
        {"name": "listed", "base_url": listener.url, "key_env": "OPENAI_API_KEY", "tested": True},
    )
    assert status == 200 and row["key_set"] is True and row["key_refused"] is None, row
    status, found, _ = dash.get("/api/endpoints/listed/discover")
    assert status == 200 and found["data"] == [{"served": "m1", "on_roster": False}], found
    assert listener.headers == [f"Bearer {LISTED}"]


def test_a_saved_endpoint_naming_a_refused_variable_is_never_sent_it(dash, home, listener, secrets):
    hand_edit_endpoint(home, "leak", listener.url, "AWS_SECRET_ACCESS_KEY")
    allow(home, "PANELIST_ADMIN_TOKEN")
    hand_edit_endpoint(home, "admin", listener.url, "PANELIST_ADMIN_TOKEN")
    Collections(home).save(Roster(home).view(), "leaky", ["leak-m", "admin-m"])
    status, listed, _ = dash.get("/api/endpoints")
    rows = {r["name"]: r for r in listed["data"]}
    for name, var in (("leak", "AWS_SECRET_ACCESS_KEY"), ("admin", "PANELIST_ADMIN_TOKEN")):
        assert rows[name]["key_set"] is False, rows[name]
        assert var in rows[name]["key_refused"], rows[name]
        # the endpoint's listing
        status, body, _ = dash.get(f"/api/endpoints/{name}/discover")
        assert status == 400 and var in body["error"]["message"], body
        assert "key_envs.json" in body["error"]["message"], body
        # a probe: the seat fails, saying how to allow the name, and retires nothing
        for _ in range(4):
            status, body, _ = dash.post(f"/api/models/{name}-m/probe")
            assert status == 200, body
            probe = body["probe"]
            assert (probe["status"], probe["error_kind"]) == ("error", "key_refused"), probe
            assert var in probe["error"] and "key_envs.json" in probe["error"], probe
        assert body["model"]["retired"] is False, body
    # a panel's seats
    status, body, _ = dash.post(
        "/v1/chat/completions",
        {"model": "bench/leaky", "messages": [{"role": "user", "content": "hi"}]},
    )
    assert status == 200, body  # the explorers on the simulator answered
    seats = {s["alias"]: s for s in body["bench"]["seats"]}
    for alias in ("leak-m", "admin-m"):
        assert seats[alias]["status"] == "error", seats[alias]
        assert seats[alias]["error"].startswith("key_refused: "), seats[alias]
        assert "key_envs.json" in seats[alias]["error"], seats[alias]
    # the catalog's refresh names the endpoints it could not read
    status, body, _ = dash.post("/api/catalog/refresh", {})
    assert status == 200, body
    failed = {f["endpoint"]: f["error"] for f in body["failed"]}
    assert "AWS_SECRET_ACCESS_KEY" in failed["leak"] and "PANELIST_ADMIN_TOKEN" in failed["admin"]
    assert listener.seen == []
    text = "".join(p.read_text() for p in home.root.rglob("*") if p.is_file())
    assert AWS not in text and ADMIN not in text
    lines = [
        (r["kind"], r["error_kind"])
        for r in read_jsonl(home.gateway_runs / "evidence.jsonl")
        if r.get("alias") in ("leak-m", "admin-m")
    ]
    assert sorted(lines) == [("probe", "key_refused")] * 8 + [("seat", "key_refused")] * 2


def test_onboarding_a_model_of_such_an_endpoint_fails_saying_how_to_allow_it(
    dash, home, listener, secrets
):
    hand_edit_endpoint(home, "leak", listener.url, "AWS_SECRET_ACCESS_KEY")
    # a served id looked up in the endpoint's listing: that endpoint is named unreadable
    status, body, _ = dash.post("/api/onboarding", {"aliases": ["m1"], "endpoint": "leak"})
    assert status == 404 and "AWS_SECRET_ACCESS_KEY" in body["error"]["message"], body
    status, body, _ = dash.post("/api/onboarding", {"aliases": ["leak-m"]})
    assert status == 202, body

    def ended():
        return dash.get("/api/onboarding")[1]["data"][0]["status"] in ("ready", "failed")

    assert wait_until(ended)
    entry = dash.get("/api/onboarding")[1]["data"][0]
    assert (entry["status"], entry["error_kind"]) == ("failed", "key_refused"), entry
    assert "key_envs.json" in entry["error"] and "key_envs.json" in entry["hint"], entry
    assert listener.seen == []


def test_a_saved_endpoint_named_by_hand_is_sent_its_key(dash, home, listener, secrets):
    hand_edit_endpoint(home, "listed", listener.url, "OPENAI_API_KEY")
    status, body, _ = dash.post("/api/models/listed-m/probe")
    assert body["probe"]["error_kind"] == "key_refused", body
    assert listener.seen == []
    allow(home, "OPENAI_API_KEY")
    status, body, _ = dash.post("/api/models/listed-m/probe")
    assert status == 200 and body["probe"]["status"] == "ok", body
    assert listener.headers == [f"Bearer {LISTED}"]


# -- the command line and the file ----------------------------------------------------------------
def test_endpoint_add_refuses_a_variable_not_meant_for_endpoint_keys(folder, capsys, listener):
    d = str(folder.root)
    roster = folder.file("roster.json").read_bytes()
    for name in ("AWS_SECRET_ACCESS_KEY", "PANELIST_ADMIN_TOKEN"):
        code = main(["endpoint", "add", "cloud", listener.url, "--key-env", name, "--data", d])
        out, err = capsys.readouterr()
        assert code == 1 and out == "", out
        assert err.startswith("panelist: error: ") and err.count("\n") == 1, err
        assert name in err and "key_envs.json" in err, err
    assert folder.file("roster.json").read_bytes() == roster
    allow(folder, "OPENAI_API_KEY")
    code = main(
        [
            "endpoint",
            "add",
            "cloud",
            listener.url,
            "--key-env",
            "OPENAI_API_KEY",
            "--data",
            d,
            "--json",
        ]
    )
    out, err = capsys.readouterr()
    assert code == 0 and json.loads(out)["key_env"] == "OPENAI_API_KEY", err


def test_a_broken_list_refuses_every_name_it_would_allow_and_says_why(
    dash, home, listener, secrets
):
    for broken, says in (
        ("{not json", "not valid JSON"),
        (json.dumps({"allowed": "OPENAI_API_KEY"}), "list"),
        (json.dumps({"allowed": ["OPENAI API KEY"]}), "OPENAI API KEY"),
    ):
        home.file("key_envs.json").write_text(broken)
        status, body, _ = dash.post(
            "/api/endpoints/test", {"base_url": listener.url, "key_env": "OPENAI_API_KEY"}
        )
        assert_refused(status, body, "OPENAI_API_KEY", says=(says,))
        # a PANELIST_KEY_ variable needs no list
        status, body, _ = dash.post(
            "/api/endpoints/test", {"base_url": listener.url, "key_env": "PANELIST_KEY_LISTENER"}
        )
        assert status == 200 and body["ok"] is True, body
    assert listener.headers == [f"Bearer {OWN}"] * 3


def test_a_new_data_folder_starts_with_an_empty_list_nothing_writes(folder):
    doc = json.loads(folder.file("key_envs.json").read_text())
    assert doc["allowed"] == []
