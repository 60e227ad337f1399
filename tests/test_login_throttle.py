"""Guessing the admin token: throttled per client address (the one a trusted proxy forwards, not
the proxy's), and slowed for all addresses together once many logins failed, while the right
token is slowed, never refused."""

import threading

import pytest

from conftest import DASHBOARD_TOKEN as TOKEN, Gateway
from panelist.metrics.errors import ConfigInvalid, TooManyRequests, Unauthorized
from panelist.metrics.server.session import WINDOW, Sessions
from panelist.serve import make_dashboard
from test_serve import error_of, fetch


class Clock:
    """A test's time: ``sleep`` moves it on at once, and remembers how long each wait was."""

    def __init__(self):
        self.now = 1000.0
        self.waits: list[float] = []
        self._lock = threading.Lock()

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        with self._lock:
            self.waits.append(round(seconds, 6))
            self.now += seconds


def sessions(clock, **kw):
    return Sessions(TOKEN, global_failures=3, pace=0.5, clock=clock, sleep=clock.sleep, **kw)


def guess(s: Sessions, address: str, token: str = "wrong-guess") -> str:
    try:
        s.login(token, address)
    except Unauthorized:
        return "wrong"
    except TooManyRequests:
        return "throttled"
    return "in"


def test_many_addresses_share_one_budget_then_every_check_waits_its_turn():
    clock = Clock()
    s = sessions(clock)
    assert [guess(s, f"10.0.0.{i}") for i in range(3)] == ["wrong"] * 3
    assert clock.waits == []  # within the budget: checked at once
    # past it, each check of each new address waits for the one before: one every 0.5 s
    assert [guess(s, f"10.0.1.{i}") for i in range(4)] == ["wrong"] * 4
    assert clock.waits == [0.5, 0.5, 0.5]  # the first paced check had nobody before it
    # the right token is checked first and gets in at once: guessing never slows the admin
    assert guess(s, "192.0.2.1", TOKEN) == "in"
    assert clock.waits == [0.5, 0.5, 0.5]
    # once the failures are a minute old, checks run at once again
    clock.now += WINDOW + 1
    assert guess(s, "10.0.2.1") == "wrong" and len(clock.waits) == 3


def test_the_right_token_gets_in_from_an_address_guessers_locked_out():
    clock = Clock()
    s = sessions(clock)
    nat = "198.51.100.7"  # the admin and a guesser behind one address
    assert [guess(s, nat) for _ in range(6)] == ["wrong"] * 5 + ["throttled"]
    assert guess(s, nat, TOKEN) == "in"
    # and its failures are forgiven: the address is checked afresh
    assert guess(s, nat) == "wrong"


def test_the_right_token_gets_in_while_every_waiting_place_is_taken():
    clock = Clock()
    held_now = threading.Semaphore(0)
    release = threading.Event()

    def held(seconds):  # every paced wrong answer waits here until the test lets them go
        held_now.release()
        release.wait(30)
        clock.sleep(seconds)

    s = Sessions(TOKEN, global_failures=1, pace=0.5, clock=clock, sleep=held)
    assert guess(s, "10.0.0.1") == "wrong"
    # the first paced check has nobody before it; the 64 after it wait their turns
    waiting = [threading.Thread(target=guess, args=(s, f"10.9.0.{i}")) for i in range(65)]
    for t in waiting:
        t.start()
    try:
        assert all(held_now.acquire(timeout=30) for _ in range(64))
        assert guess(s, "10.8.0.1") == "throttled"  # no place left for a wrong one to wait
        assert guess(s, "192.0.2.9", TOKEN) == "in"
    finally:
        release.set()
        for t in waiting:
            t.join(30)


def test_an_address_has_one_check_waiting_at_a_time():
    clock = Clock()
    entered, release = threading.Event(), threading.Event()

    def slow_sleep(seconds):  # the first paced check waits here until the test lets it go
        entered.set()
        release.wait(30)
        clock.sleep(seconds)

    s = Sessions(TOKEN, global_failures=1, pace=0.5, clock=clock, sleep=slow_sleep)
    assert guess(s, "10.0.0.1") == "wrong"
    assert guess(s, "10.0.0.2") == "wrong"  # the first paced check: nobody before it
    outcome = []
    waiting = threading.Thread(target=lambda: outcome.append(guess(s, "10.0.0.3")))
    waiting.start()
    assert entered.wait(30)
    assert guess(s, "10.0.0.3") == "throttled"  # its earlier check still waits its turn
    release.set()
    waiting.join(30)
    assert outcome == ["wrong"]


def test_behind_a_trusted_proxy_each_client_is_throttled_on_its_own(home):
    env = {
        "PANELIST_ADMIN_TOKEN": TOKEN,
        "PANELIST_TRUSTED_PROXIES": "127.0.0.1",
        "PANELIST_LOGIN_PAUSE": "0",
    }
    with Gateway(make_dashboard(home, env=env)) as dash:
        guesser = {"X-Forwarded-For": "198.51.100.7"}
        for _ in range(5):
            status, _, data = fetch(dash, "POST", "/api/login", {"token": "wrong"}, guesser)
            assert status == 401
        status, _, data = fetch(dash, "POST", "/api/login", {"token": "wrong"}, guesser)
        assert status == 429 and error_of(data)["code"] == "login_throttled"
        # the admin, behind the same proxy, is not locked out by the guesser
        status, headers, _ = fetch(
            dash,
            "POST",
            "/api/login",
            {"token": TOKEN},
            {"X-Forwarded-For": "203.0.113.9, 127.0.0.1"},
        )
        assert status == 200 and "panelist_session=" in headers["Set-Cookie"]


def test_a_forwarded_address_from_an_untrusted_peer_is_ignored(home):
    env = {"PANELIST_ADMIN_TOKEN": TOKEN, "PANELIST_LOGIN_PAUSE": "0"}
    with Gateway(make_dashboard(home, env=env)) as dash:
        for i in range(5):  # a guesser cannot dodge the limit by naming other addresses
            status, _, _ = fetch(
                dash,
                "POST",
                "/api/login",
                {"token": "wrong"},
                {"X-Forwarded-For": f"198.51.100.{i}"},
            )
            assert status == 401
        status, _, data = fetch(
            dash, "POST", "/api/login", {"token": "wrong"}, {"X-Forwarded-For": "198.51.100.99"}
        )
        assert status == 429


def test_a_trusted_proxy_setting_that_is_no_address_stops_the_server(folder):
    with pytest.raises(ConfigInvalid, match="PANELIST_TRUSTED_PROXIES"):
        make_dashboard(
            folder,
            env={"PANELIST_ADMIN_TOKEN": TOKEN, "PANELIST_TRUSTED_PROXIES": "proxy.internal"},
        )
