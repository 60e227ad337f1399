"""Provider sign-in end to end: ``panelist endpoint connect`` against a simulated provider
(``signinkit``) on real loopback sockets, with the test playing the user's browser.

Success stores the key in the key file (mode 0600, outside the data folder), creates the
endpoint and never shows the key; each failure says what went wrong and stores nothing."""

import json
import logging
import os
import stat
import threading
import webbrowser
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from panelist.metrics.cli.main import main
from panelist.metrics.home import open_home
from panelist.metrics.roster.roster import Roster
from signinkit import FakeProvider, get, sign_in

pytestmark = pytest.mark.slow


@pytest.fixture
def provider():
    p = FakeProvider()
    yield p
    p.close()


@pytest.fixture
def data(tmp_path, provider):
    home = open_home(tmp_path / "data")
    home.file("providers.json").write_text(
        json.dumps({"v": 1, "providers": {"sim": provider.entry()}})
    )
    return tmp_path / "data"


class Browser:
    """Stands in for ``webbrowser.open``: follows the auth URL on a thread of its own."""

    def __init__(self, tamper=None, before=None):
        self.tamper, self.before = tamper, before
        self.urls, self.pages, self._threads = [], [], []

    def __call__(self, url, *args, **kwargs):
        self.urls.append(url)

        def browse():
            if self.before:
                self.pages.append(self.before(url))
            self.pages.append(sign_in(url, self.tamper))

        t = threading.Thread(target=browse)
        t.start()
        self._threads.append(t)
        return True

    def join(self):
        for t in self._threads:
            t.join()


def connect(monkeypatch, capsys, data, *extra, browser=None, name="or1"):
    browser = browser or Browser()
    monkeypatch.setattr(webbrowser, "open", browser)
    code = main(["endpoint", "connect", name, "--provider", "sim", "--data", str(data), *extra])
    browser.join()
    got = capsys.readouterr()
    return code, got.out, got.err, browser


def key_file() -> Path:
    return Path(os.environ["PANELIST_KEY_FILE"])


def everything_written(data: Path) -> str:
    return "".join(p.read_text(errors="replace") for p in data.rglob("*") if p.is_file())


def assert_nothing_stored(data: Path, provider: FakeProvider):
    assert not key_file().exists()
    assert "or1" not in Roster(open_home(data)).view().endpoints
    for key in provider.issued:
        assert key not in everything_written(data)


def test_sign_in_stores_the_key_where_the_endpoint_reads_it_and_never_shows_it(
    monkeypatch, capsys, caplog, data, provider
):
    monkeypatch.delenv("PANELIST_KEY_OR1", raising=False)
    caplog.set_level(logging.DEBUG)
    code, out, err, browser = connect(monkeypatch, capsys, data)
    assert code == 0, err
    [key] = provider.issued
    assert browser.pages == [(200, browser.pages[0][1])] and "received" in browser.pages[0][1]
    stored = json.loads(key_file().read_text())
    assert stored["keys"] == {"PANELIST_KEY_OR1": key}
    assert stat.S_IMODE(key_file().stat().st_mode) == 0o600
    roster = Roster(open_home(data))
    ep = roster.view().endpoints["or1"]
    assert (ep.base_url, ep.key_env) == ("https://models.example/api/v1", "PANELIST_KEY_OR1")
    assert roster.api_key(ep) == key  # the one read of an endpoint's key finds it
    assert "PANELIST_KEY_OR1" in out and "signed in to sim" in out
    for text in (
        out,
        err,
        caplog.text,
        everything_written(data),
        *browser.urls,
        *(p[1] for p in browser.pages),
    ):
        assert key not in text
    # the auth URL carries an S256 challenge and a loopback callback, and never the verifier
    [url] = browser.urls
    q = {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}
    assert q["code_challenge_method"] == "S256"
    assert urlsplit(q["callback_url"]).hostname == "127.0.0.1"
    assert provider.exchanges[0]["code_verifier"] not in url
    assert 43 <= len(provider.exchanges[0]["code_verifier"]) <= 128


def test_json_output_names_the_variable_and_file_but_not_the_key(
    monkeypatch, capsys, data, provider
):
    code, out, err, _ = connect(monkeypatch, capsys, data, "--json")
    assert code == 0, err
    done = json.loads(out)
    assert done["key_env"] == "PANELIST_KEY_OR1" and done["key_file"] == str(key_file())
    assert provider.issued[0] not in out


def test_signing_in_again_updates_the_endpoint_and_keeps_its_key_variable(
    monkeypatch, capsys, data, provider
):
    assert (
        main(
            [
                "endpoint",
                "add",
                "or1",
                "http://127.0.0.1:9/v1",
                "--key-env",
                "PANELIST_KEY_MINE",
                "--data",
                str(data),
            ]
        )
        == 0
    )
    capsys.readouterr()
    code, _out, err, _ = connect(monkeypatch, capsys, data)
    assert code == 0, err
    ep = Roster(open_home(data)).view().endpoints["or1"]
    assert (ep.base_url, ep.key_env) == ("https://models.example/api/v1", "PANELIST_KEY_MINE")
    assert json.loads(key_file().read_text())["keys"] == {"PANELIST_KEY_MINE": provider.issued[0]}


def test_the_environment_wins_over_a_stored_key_and_the_result_says_so(
    monkeypatch, capsys, data, provider
):
    monkeypatch.setenv("PANELIST_KEY_OR1", "from-the-shell")
    code, out, err, _ = connect(monkeypatch, capsys, data)
    assert code == 0, err
    assert "set in this environment" in out
    roster = Roster(open_home(data))
    assert roster.api_key(roster.view().endpoints["or1"]) == "from-the-shell"


def test_a_request_for_another_path_is_refused_and_the_listener_keeps_waiting(
    monkeypatch, capsys, data, provider
):
    def favicon(url):
        callback = parse_qs(urlsplit(url).query)["callback_url"][0]
        return get(callback.replace("/callback", "/favicon.ico").split("?")[0])

    code, _out, err, browser = connect(monkeypatch, capsys, data, browser=Browser(before=favicon))
    assert code == 0, err
    assert browser.pages[0][0] == 404 and browser.pages[1][0] == 200
    assert json.loads(key_file().read_text())["keys"]["PANELIST_KEY_OR1"] == provider.issued[0]


def test_a_callback_with_a_wrong_state_ends_the_sign_in_and_stores_nothing(
    monkeypatch, capsys, data, provider
):
    def forge(location):
        return location.replace("state=", "state=forged")

    code, _out, err, browser = connect(monkeypatch, capsys, data, browser=Browser(tamper=forge))
    assert code == 1
    assert "state this sign-in did not send" in err and "run the command again" in err
    assert browser.pages[0][0] == 400
    assert provider.exchanges == []  # the code was never sent anywhere
    assert_nothing_stored(data, provider)


def test_a_code_issued_for_another_challenge_fails_the_verifier_check(
    monkeypatch, capsys, data, provider
):
    def swap(location):  # the code the provider issued is rebound to a stranger's challenge
        code = parse_qs(urlsplit(location).query)["code"][0]
        provider.codes[code] = "x" * 43
        return location

    code, _out, err, _ = connect(monkeypatch, capsys, data, browser=Browser(tamper=swap))
    assert code == 1
    assert "sim refused the sign-in code (HTTP 403: code_verifier does not match" in err
    assert "nothing was stored" in err
    assert provider.exchanges[0]["code_verifier"] not in err
    assert_nothing_stored(data, provider)


def test_a_replayed_code_is_refused_and_stores_nothing(monkeypatch, capsys, data, provider):
    first = Browser()
    assert connect(monkeypatch, capsys, data, browser=first, name="first")[0] == 0
    [old_code] = provider.used
    key_file().unlink()

    def replay(location):
        fresh = parse_qs(urlsplit(location).query)["code"][0]
        return location.replace(f"code={fresh}", f"code={old_code}")

    code, _out, err, _ = connect(monkeypatch, capsys, data, browser=Browser(tamper=replay))
    assert code == 1
    assert "HTTP 400: this code was already exchanged" in err
    assert_nothing_stored(data, provider)


def test_no_callback_before_the_timeout_is_a_clear_error(monkeypatch, capsys, data, provider):
    code, _out, err, browser = connect(
        monkeypatch, capsys, data, "--no-browser", "--timeout", "0.2"
    )
    assert code == 1
    assert browser.urls == []  # --no-browser: printed, not opened
    assert "http://127.0.0.1:" in err and "/auth?" in err
    assert "no sign-in came back from sim in time" in err and "--timeout" in err
    assert_nothing_stored(data, provider)


@pytest.mark.parametrize(
    "status, body, says",
    [
        (500, b'{"error": {"message": "database down"}}', "HTTP 500: database down"),
        (401, b'{"error": "invalid_client"}', "HTTP 401: invalid_client"),
        (404, b"<html>no</html>", "HTTP 404: no message"),
        (200, b"<html>not json</html>", "reply is not JSON"),
        (200, b'{"token": "sk-elsewhere"}', "reply has no 'key' string"),
        (200, b'{"key": "two words"}', "cannot be sent in a header"),
    ],
)
def test_a_provider_error_is_named_and_stores_nothing(
    monkeypatch, capsys, data, provider, status, body, says
):
    provider.fail = (status, body)
    code, _out, err, _ = connect(monkeypatch, capsys, data)
    assert code == 1
    assert says in err and "nothing was stored" in err, err
    assert_nothing_stored(data, provider)


def test_the_provider_saying_no_ends_the_sign_in(monkeypatch, capsys, data, provider):
    def deny(location):
        fresh = parse_qs(urlsplit(location).query)["code"][0]
        return location.replace(f"code={fresh}", "error=access_denied")

    code, _out, err, _ = connect(monkeypatch, capsys, data, browser=Browser(tamper=deny))
    assert code == 1 and "sim did not sign you in: it answered 'access_denied'" in err
    assert provider.exchanges == []
    assert_nothing_stored(data, provider)


def test_the_listener_binds_loopback_only_and_a_taken_port_is_a_clear_error(
    monkeypatch, capsys, data, provider
):
    from panelist.metrics.signin.listener import Listener

    first = Listener(0)
    try:
        assert first._sock.getsockname()[0] == "127.0.0.1"
        code, _out, err, _ = connect(monkeypatch, capsys, data, "--port", str(first.port))
        assert code == 1
        assert f"cannot listen on 127.0.0.1:{first.port}" in err and "--port" in err
    finally:
        first.close()
    assert_nothing_stored(data, provider)


def test_a_provider_with_its_own_state_parameter_and_a_form_exchange(
    monkeypatch, capsys, data, provider
):
    entry = provider.entry(exchange_body="form")
    entry["fields"]["state"] = "state"
    (data / "config" / "providers.json").write_text(
        json.dumps({"v": 1, "providers": {"sim": entry}})
    )
    code, _out, err, _ = connect(monkeypatch, capsys, data)
    assert code == 0, err
    assert "?" not in provider.callbacks[0]  # the state went as the provider's parameter
    assert provider.exchanges[0]["code_challenge_method"] == "S256"
    assert json.loads(key_file().read_text())["keys"]["PANELIST_KEY_OR1"] == provider.issued[0]
