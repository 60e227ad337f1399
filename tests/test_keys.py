"""Gateway keys: the store, the command, 401s that say which, names on calls, and requests a
minute shared through the data folder."""

import hashlib
import json
import os
from pathlib import Path

import pytest

from conftest import Gateway, read_jsonl
from panelist.gateway import make_gateway
from panelist.metrics.cli.main import main
from panelist.metrics.errors import ConfigInvalid, Conflict, NotFound, Unauthorized
from panelist.metrics.server.guard import Guard, Settings
from panelist.metrics.server.keys import SHAPE, Keys
from panelist.metrics.server.ratelimit import RateCounter

ADMIN = "admin-token-for-tests-0042"


@pytest.fixture()
def start(home):
    running = []

    def go(env=None):
        gw = Gateway(make_gateway(home, env=env or {}))
        running.append(gw)
        return gw

    try:
        yield go
    finally:
        for gw in running:
            gw.close()


def ask(gw, headers=None, model="bench/trio"):
    return gw.post(
        "/v1/chat/completions",
        {"model": model, "messages": [{"role": "user", "content": "hi"}]},
        headers=headers,
    )


def bearer(secret):
    return {"Authorization": f"Bearer {secret}"}


# -- the store ------------------------------------------------------------------------------------
def test_a_key_is_stored_only_as_its_digest(folder):
    keys = Keys(folder)
    secret, key = keys.create("app", collections="bench/trio", rpm=30)
    assert SHAPE.fullmatch(secret) and secret.startswith("pk_")
    assert key.collections == {"trio"} and key.rpm == 30 and key.hint == secret[-4:]
    assert "digest" not in key.public()
    stored = json.loads(folder.file("keys.json").read_text())["keys"]["app"]
    assert stored["digest"] == hashlib.sha256(secret.encode()).hexdigest()
    assert stored["hint"] == secret[-4:] and stored["collections"] == ["trio"]
    change = read_jsonl(folder.file("changes.jsonl"))[-1]
    assert change["what"] == "key app" and "digest" not in change["new"]
    for f in folder.root.rglob("*"):
        if f.is_file():
            assert secret.encode() not in f.read_bytes(), f
    assert keys.find(secret) == key
    assert keys.find(secret[:-1] + ("A" if secret[-1] != "A" else "B")) is None
    other = Keys(folder)  # as another process would: sees a revoke without a restart
    assert other.find(secret) is not None
    keys.revoke("app")
    assert other.find(secret) is None
    with pytest.raises(NotFound, match="unknown key 'app'"):
        keys.revoke("app")


@pytest.mark.parametrize(
    "kw, fragment",
    [
        ({"name": "local"}, "not 'local'"),
        ({"name": "dashboard"}, "or 'dashboard'"),
        ({"name": "Bad Name"}, "not valid"),
        ({"name": "ok", "rpm": 0}, "--rpm"),
        ({"name": "ok", "rpm": True}, "--rpm"),
        ({"name": "ok", "collections": ""}, "at least one collection"),
        ({"name": "ok", "collections": ["nope"], "known": ["trio"]}, "unknown collection"),
    ],
)
def test_key_create_refuses_bad_input(folder, kw, fragment):
    with pytest.raises(ConfigInvalid, match=fragment):
        Keys(folder).create(**kw)


def test_key_names_are_unique(folder):
    Keys(folder).create("app")
    with pytest.raises(Conflict, match="exists; revoke it first"):
        Keys(folder).create("app")


def test_key_command_shows_the_key_once(folder, capsys):
    d = str(folder.root)
    assert main(["key", "create", "ci", "--collections", "trio", "--rpm", "10", "--data", d]) == 0
    out, err = capsys.readouterr()
    secret = out.strip()
    assert SHAPE.fullmatch(secret) and "not shown again" in err
    assert main(["key", "list", "--data", d, "--json"]) == 0
    (listed,) = json.loads(capsys.readouterr().out)
    assert listed == {
        "name": "ci",
        "hint": secret[-4:],
        "collections": ["trio"],
        "rpm": 10,
        "races": True,
        "created": listed["created"],
    }
    assert main(["key", "list", "--data", d]) == 0
    out = capsys.readouterr().out
    assert "…" + secret[-4:] in out and secret not in out
    assert main(["key", "create", "x", "--collections", "nope", "--data", d]) == 1
    assert "unknown collection(s) nope" in capsys.readouterr().err
    assert main(["key", "revoke", "ci", "--data", d]) == 0
    assert main(["key", "revoke", "ci", "--data", d]) == 1


# -- 401 says which -------------------------------------------------------------------------------
def test_missing_malformed_and_unknown_keys_are_told_apart(start, home):
    gw = start({"PANELIST_REQUIRE_KEYS": "1"})
    secret, _ = Keys(home).create("app")
    cases = [
        ({}, "missing", 'Bearer realm="panelist"'),
        ({"Authorization": ""}, "missing", 'Bearer realm="panelist"'),
        ({"Authorization": f"Basic {secret}"}, "malformed", "invalid_token"),
        (bearer("sk-not-ours-at-all"), "malformed", "invalid_token"),
        (bearer(secret[:-1]), "malformed", "invalid_token"),
        (bearer(secret[:-1] + ("x" if secret[-1] != "x" else "y")), "unknown", "invalid_token"),
    ]
    for headers, which, challenge in cases:
        status, body, h = ask(gw, headers=headers)
        assert status == 401, headers
        assert (
            body["error"]["message"].startswith(which) and body["error"]["code"] == f"{which}_key"
        )
        assert body["error"]["type"] == "authentication_error"
        assert h["WWW-Authenticate"].startswith("Bearer") and challenge in h["WWW-Authenticate"]
        assert secret not in json.dumps(body) and secret[:-1] not in json.dumps(body)
    assert ask(gw, headers=bearer(secret))[0] == 200
    assert ask(gw, headers={"Authorization": f"bearer   {secret}  "})[0] == 200
    Keys(home).revoke("app")
    status, body, _ = ask(gw, headers=bearer(secret))
    assert status == 401 and body["error"]["code"] == "unknown_key"


def test_an_admin_token_requires_keys_and_is_not_one(start, home):
    gw = start({"PANELIST_ADMIN_TOKEN": ADMIN})
    assert ask(gw)[0] == 401
    assert ask(gw, headers=bearer(ADMIN))[0] == 401
    assert gw.get("/health")[0] == 200  # not a gateway route: no key


def test_local_mode_ignores_any_bearer(gateway, home):
    for headers in ({}, bearer("whatever"), {"Authorization": "Basic abc"}):
        assert ask(gateway, headers=headers)[0] == 200
    assert {c["key"] for c in read_jsonl(home.gateway_runs / "calls.jsonl")} == {"local"}


def test_the_keys_name_is_written_on_every_call(start, home):
    gw = start({"PANELIST_REQUIRE_KEYS": "1"})
    secret, _ = Keys(home).create("review-bot")
    status, reply, _ = ask(gw, headers=bearer(secret))
    assert status == 200
    call = reply["bench"]["seats"][0]["call"]
    status, _, _ = gw.post("/bench/verdict", {"call": call, "useful": True}, headers=bearer(secret))
    assert status == 200
    (panel,) = read_jsonl(home.gateway_runs / "calls.jsonl")
    assert panel["key"] == "review-bot"
    evidence = read_jsonl(home.gateway_runs / "evidence.jsonl")
    seats = [e for e in evidence if e["kind"] == "seat"]
    assert len(seats) == 5 and {s["key"] for s in seats} == {"review-bot"}
    (v,) = [e for e in evidence if e["kind"] == "verdict"]
    assert v["by"] == "review-bot"


def test_the_cli_sends_panelist_api_key(start, home, capsys, monkeypatch):
    gw = start({"PANELIST_REQUIRE_KEYS": "1"})
    secret, _ = Keys(home).create("cli")
    assert main(["ask", "trio", "hello", "--url", gw.url + "/v1"]) == 1
    assert "401" in capsys.readouterr().err
    monkeypatch.setenv("PANELIST_API_KEY", secret)
    assert main(["ask", "trio", "hello", "--url", gw.url + "/v1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["bench"]["seats"]
    assert read_jsonl(home.gateway_runs / "calls.jsonl")[-1]["key"] == "cli"


# -- requests a minute ----------------------------------------------------------------------------
def test_a_key_over_its_rate_gets_429_with_retry_after(start, home):
    gw = start({"PANELIST_REQUIRE_KEYS": "1"})
    slow, _ = Keys(home).create("slow", rpm=3)
    free, _ = Keys(home).create("free")
    assert [gw.get("/v1/models", headers=bearer(slow))[0] for _ in range(3)] == [200] * 3
    status, body, h = gw.get("/v1/models", headers=bearer(slow))
    assert status == 429 and body["error"]["type"] == "rate_limit_error"
    assert 1 <= int(h["Retry-After"]) <= 120
    assert f"retry in {h['Retry-After']} s" in body["error"]["message"]
    assert ask(gw, headers=bearer(slow))[0] == 429  # every gateway route counts
    assert gw.get("/v1/models", headers=bearer(free))[0] == 200  # others are not held up


@pytest.fixture()
def rates(tmp_path):
    counter = RateCounter(tmp_path)
    try:
        yield counter
    finally:
        counter.close()


def test_the_sliding_minute(rates):
    t0 = 6_000_000 * 60.0  # the start of a minute
    assert [rates.admit("k", 3, now=t0 + i) for i in range(3)] == [None] * 3
    wait = rates.admit("k", 3, now=t0 + 10)
    # nothing more fits until the first of the three is 60 s old
    assert wait == pytest.approx(50)
    assert rates.admit("k", 3, now=t0 + 10) == pytest.approx(50)  # refusals do not count
    assert rates.admit("k", 3, now=t0 + 59.5) == pytest.approx(0.5)
    assert rates.admit("k", 3, now=t0 + 60) is None
    assert rates.admit("k", 3, now=t0 + 60.5) == pytest.approx(0.5)  # the second is next
    assert rates.admit("k", 3, now=t0 + 600) is None  # long idle: a fresh start
    assert RateCounter.retry_after(0.2) == "1" and RateCounter.retry_after(70) == "70"


def test_no_60_seconds_hold_more_than_the_limit_across_a_minute_edge(rates):
    t0 = 6_000_000 * 60.0
    # the whole limit in the last second of one minute...
    assert [rates.admit("k", 20, now=t0 + 59 + i / 40) for i in range(20)] == [None] * 20
    # ...leaves no room in the next minute until those are 60 s old
    later = [t0 + 60 + s for s in range(59)]
    assert all(rates.admit("k", 20, now=t) is not None for t in later)
    assert rates.admit("k", 20, now=t0 + 119.01) is None


def test_a_changed_limit_keeps_the_admissions_of_the_window(rates):
    t0 = 6_000_000 * 60.0
    assert [rates.admit("k", 5, now=t0 + i) for i in range(5)] == [None] * 5
    # lowered to 3: the newest three of the window are kept, so nothing fits until t0+2 ages
    assert rates.admit("k", 3, now=t0 + 10) == pytest.approx(52)
    # raised to 6: the five of the window count, one more fits
    assert rates.admit("k", 6, now=t0 + 10) is None
    assert rates.admit("k", 6, now=t0 + 11) == pytest.approx(49)


def test_the_count_is_shared_by_counters_on_one_folder(tmp_path, rates):
    other = RateCounter(tmp_path)
    try:
        t = 6_000_000 * 60.0
        admitted = [c.admit("k", 5, now=t) is None for c in (rates, other) * 5]
        assert admitted.count(True) == 5
    finally:
        other.close()


def open_in(folder) -> int:
    """How many descriptors this process holds open on files in ``folder``."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # closed meanwhile, by this listing or another thread
            continue
        count += Path(target).parent == Path(folder)
    return count


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc to count descriptors")
def test_the_rate_check_keeps_one_descriptor_per_key(rates):
    """What keeps the check on every keyed request cheap: the counter's file is opened once per
    key and kept, never reopened per request (its speed is scripts/bench_keys.py's to measure)."""
    assert open_in(rates.folder) == 0
    admitted = [rates.admit("k", 10**6) for _ in range(500)]
    assert open_in(rates.folder) == 1
    refused = [i for i, wait in enumerate(admitted) if wait is not None]
    assert not refused, f"requests {refused[:10]} were refused far below the limit"
    rates.admit("other", 10**6)
    assert open_in(rates.folder) == 2
    rates.close()
    assert open_in(rates.folder) == 0


def test_the_keys_file_is_reread_only_when_it_changes(folder):
    """Each lookup costs one stat: the file is parsed again only when its inode, size or mtime
    changes, so a key made or revoked elsewhere counts at once and no request pays a parse."""
    keys = Keys(folder)
    secret, _ = keys.create("app")
    assert keys.find(secret).name == "app"
    path = folder.file("keys.json")
    stamp = os.stat(path)
    original = path.read_bytes()
    # the same size and mtime with other bytes: a lookup that parsed the file again would fail
    path.write_bytes(b" " * len(original))
    os.utime(path, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    assert [keys.find(secret).name for _ in range(3)] == ["app"] * 3
    # a real change (here: revoked by another process) is seen by the next lookup
    other = Keys(folder)
    path.write_bytes(original)
    other.revoke("app")
    assert keys.find(secret) is None


def test_guard_checks_answer_alike_every_time(folder):
    """The guard on every request: the same headers get the same caller, request after request,
    and a near-miss key is refused as unknown each time (lookups are by digest)."""
    secret, _ = Keys(folder).create("app", rpm=10**6)
    guard = Guard.for_server(
        Settings(require_keys=True), folder, port=8123, bound="127.0.0.1", max_body=1
    )
    try:
        headers = {
            "Host": "127.0.0.1:8123",
            "Authorization": f"Bearer {secret}",
            "Content-Type": "application/json",
            "Content-Length": "1",
        }
        callers = set()
        for _ in range(200):
            guard.screen("POST", "/v1/chat/completions", headers)
            callers.add(guard.identify("/v1/chat/completions", headers).name)
            guard.check_body("POST", headers)
        assert callers == {"app"}
        near = dict(
            headers, Authorization=f"Bearer {secret[:-1]}{'x' if secret[-1] != 'x' else 'y'}"
        )
        codes = set()
        for _ in range(3):
            with pytest.raises(Unauthorized) as refused:
                guard.identify("/v1/chat/completions", near)
            codes.add(refused.value.code)
        assert codes == {"unknown_key"}
    finally:
        guard.close()


# -- secrets stay secret --------------------------------------------------------------------------
def test_no_secret_reaches_the_data_folder_or_stderr(start, home, sim, monkeypatch, capfd):
    upstream = "sk-upstream-very-secret-7731"
    monkeypatch.setenv("PANELIST_KEY_SIM", upstream)
    sim.script("mid", require_key="something-else", echo_auth=True)  # an upstream 401 echoing it
    gw = start({"PANELIST_ADMIN_TOKEN": ADMIN})
    secret, _ = Keys(home).create("app")
    near = secret[:-1] + ("x" if secret[-1] != "x" else "y")
    replies = [
        ask(gw, headers=bearer(secret)),
        ask(gw, headers=bearer(near)),
        ask(gw, headers=bearer(ADMIN)),
        ask(gw, headers={"Authorization": secret}),
        gw.post("/bench/verdict", raw=b"{", headers=bearer(secret)),
        gw.get("/v1/nothing", headers=bearer(secret)),
    ]
    assert replies[0][0] == 200
    home.file("collections.json").write_text('{"collections": {"x": {"members": 5}}}')
    replies.append(gw.get("/v1/models", headers=bearer(secret)))  # a 500, traceback on stderr
    assert replies[-1][0] == 500
    captured = capfd.readouterr()
    for s in (secret, near, ADMIN, upstream):
        assert s not in json.dumps([r[1] for r in replies])
        assert s not in captured.out and s not in captured.err
        for f in home.root.rglob("*"):
            if f.is_file():
                assert s.encode() not in f.read_bytes(), (s, f)
