"""Finding panels: ``GET /api/panels`` with filters (text, model, collection, key, status, time),
through a real dashboard server over a data folder a real gateway writes, the simulator playing
the models; and the search index behind it (``metrics/ledger/search.py``): it follows panels
written after it was built, by another process too, is rebuilt when deleted or when its log is
replaced, and never makes a request wait while another writer holds it."""

import fcntl
import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote

import pytest

from conftest import PATIENCE, Client, Gateway, set_limits, wait_until
from panelist.gateway import make_gateway
from panelist.metrics.roster.collection import Collections
from panelist.metrics.roster.roster import Roster
from panelist.metrics.errors import ConfigInvalid
from panelist.metrics.server.keys import Keys

ROOT = Path(__file__).resolve().parent.parent
INDEX_FILES = ("search.sqlite", "search.sqlite-wal", "search.sqlite-shm")


def ask(client, collection, content, key=None):
    headers = {"Authorization": f"Bearer {key}"} if key else None
    status, body, _ = client.post(
        "/v1/chat/completions",
        {"model": collection, "messages": [{"role": "user", "content": content}]},
        headers=headers,
    )
    assert status == 200, body
    return body["bench"]


def found(dash, query: str) -> list[str]:
    """The panel ids a filtered list gives, once the index covers the logs."""
    body = listing(dash, query)
    return [p["panel"] for p in body["data"]]


def listing(dash, query: str) -> dict:
    def complete():
        status, body, _ = dash.get(f"/api/panels?{query}")
        assert status == 200, body
        complete.body = body
        return body.get("index", {"complete": True})["complete"]  # unfiltered: no index

    assert wait_until(complete), complete.body.get("index")
    return complete.body


class Served:
    """``python gateway.py`` / ``python serve.py`` over a data folder, in a process of its own."""

    def __init__(self, entry: str, data: Path, env: dict | None = None):
        clean = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith("PANELIST_") and not k.lower().endswith("_proxy")
        }
        self.proc = subprocess.Popen(
            [sys.executable, str(ROOT / entry), "--data", str(data), "--port", "0"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=dict(clean, PYTHONUNBUFFERED="1", **(env or {})),
        )
        line = self.proc.stdout.readline()
        m = re.search(r"http://127\.0\.0\.1:(\d+)", line)
        if not m:
            self.proc.kill()
            raise AssertionError(f"{entry} did not start: {line}{self.proc.communicate()[1]}")
        self.client = Client(f"http://127.0.0.1:{m.group(1)}")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.proc.terminate()
        try:
            _, err = self.proc.communicate(timeout=PATIENCE)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
        assert "Traceback" not in err, err


@pytest.fixture()
def folder(home, sim):
    """Two collections, no explorers (so each panel seats exactly its members), two keys,
    and a model whose answers say words no prompt holds."""
    set_limits(home, max_explorers=0)
    Collections(home).save(
        Roster(home).view(), "duo", ["x-one", "x-two"], description="Two more simulated reviewers"
    )
    keys = Keys(home)
    secrets = {name: keys.create(name)[0] for name in ("alice", "bob")}
    sim.script(
        "fast",
        rules=[
            {"contains": "parser", "answer": "The zanzibar tokenizer drops the trailing newline."}
        ],
    )
    return secrets


@pytest.fixture()
def keyed(home, folder):
    """A gateway that asks for keys, on the same data folder as the dashboard."""
    with Gateway(make_gateway(home, env={"PANELIST_REQUIRE_KEYS": "1"})) as gw:
        yield gw


@pytest.fixture()
def panels(dash, keyed, folder, sim, home):
    """Five panels of every kind, by name: asked through the keyed gateway (two keys, two
    collections), one with a failed seat, one fully judged, one the caller left."""
    alice, bob = folder["alice"], folder["bob"]
    made = {
        "parser": ask(keyed, "bench/trio", "Review the parser module", alice),
        "cache": ask(keyed, "bench/duo", "Check the cache eviction policy", bob),
    }
    sim.script("x-two", fail="server_error")
    made["lock"] = ask(keyed, "bench/duo", "Review the lock ordering in the writer", alice)
    sim.script("x-two")
    made["retry"] = ask(keyed, "bench/trio", "Explain the retry path of the client", bob)
    for seat in made["retry"]["seats"]:
        status, body, _ = dash.post("/api/verdict", {"call": seat["call"], "useful": True})
        assert status == 200, body
    ids = {name: b["panel"] for name, b in made.items()}
    ids["left"] = abandon(dash, sim, home)
    return ids


def abandon(dash, sim, home) -> str:
    """A panel whose caller hung up before its slow seat ended."""
    sim.script("slow", latency=3600)
    body = json.dumps(
        {
            "model": "bench/trio",
            "messages": [{"role": "user", "content": "Walk away from the scheduler"}],
        }
    )
    port = dash.server.port
    with socket.create_connection(("127.0.0.1", port), timeout=PATIENCE) as s:
        s.sendall(
            (
                f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                "Content-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n{body}"
            ).encode()
        )
        assert wait_until(lambda: sim.count("slow") >= 1)
    assert sim.wait_disconnects(1, timeout=PATIENCE)
    calls = home.gateway_runs / "calls.jsonl"

    def abandoned():  # whole lines only: the gateway may be writing the next one right now
        return [
            r["panel"]
            for r in map(json.loads, calls.read_text().split("\n")[:-1])
            if r.get("abandoned")
        ]

    assert wait_until(abandoned)
    sim.script("slow", latency=0.05)
    return abandoned()[0]


# -- each filter, alone and together ------------------------------------------------------------
def test_each_filter_alone_and_together(dash, panels):
    p = panels
    newest_first = [p["left"], p["retry"], p["lock"], p["cache"], p["parser"]]
    assert found(dash, "status=") == newest_first  # an empty value is no filter
    assert found(dash, "collection=bench/duo") == [p["lock"], p["cache"]]
    assert found(dash, "collection=duo") == [p["lock"], p["cache"]]  # bench/ may be left out
    assert found(dash, "key=alice") == [p["lock"], p["parser"]]
    assert found(dash, "key=local") == [p["left"]]
    assert found(dash, "model=x-two") == [p["lock"], p["cache"]]
    assert found(dash, "model=fast") == [p["left"], p["retry"], p["parser"]]
    assert found(dash, "status=failed") == [p["lock"]]
    assert found(dash, "status=abandoned") == [p["left"]]
    assert found(dash, "status=owed") == [p["lock"], p["cache"], p["parser"]]
    # with a model, "failed" is that model's own seat
    assert found(dash, "model=x-two&status=failed") == [p["lock"]]
    assert found(dash, "model=x-one&status=failed") == []
    # combined: every filter holds
    assert found(dash, "collection=bench/duo&key=bob") == [p["cache"]]
    assert found(dash, "key=alice&status=owed&model=fast") == [p["parser"]]
    assert found(dash, "q=review&key=alice&collection=bench/trio") == [p["parser"]]
    assert found(dash, "q=review&status=failed") == [p["lock"]]
    # the time range: by each panel's start, inclusive, as epoch seconds, days or spans
    body = listing(dash, "status=")
    started = {x["panel"]: x["started"] for x in body["data"]}
    assert found(dash, f"since={started[p['lock']]}") == [p["left"], p["retry"], p["lock"]]
    assert found(dash, f"until={started[p['cache']]}") == [p["cache"], p["parser"]]
    assert found(dash, f"since={started[p['cache']]}&until={started[p['lock']]}&key=alice") == [
        p["lock"]
    ]
    assert found(dash, "since=1h") == newest_first
    assert found(dash, "until=2020-01-01") == []
    assert found(dash, "since=2020-01-01&until=2020-01-01") == []
    assert found(dash, "since=2020-01-01T00:00:00Z&model=mid") == [
        p["left"],
        p["retry"],
        p["parser"],
    ]
    # the filters come back as understood, and each panel as the unfiltered list has it
    body = listing(dash, "collection=duo&since=2020-01-01")
    assert body["filters"]["collection"] == "bench/duo"
    assert body["filters"]["since"] == 1577836800.0
    _, plain, _ = dash.get("/api/panels")
    assert body["data"] == [x for x in plain["data"] if x["panel"] in (p["lock"], p["cache"])]


def test_filtered_pages_go_on_by_cursor_and_the_poll_returns_only_matches(
    dash, panels, keyed, folder
):
    p = panels
    first = listing(dash, "model=fast&limit=2")
    assert [x["panel"] for x in first["data"]] == [p["left"], p["retry"]]
    assert first["next"] is not None and first["latest"] == p["left"]
    rest = listing(dash, f"model=fast&limit=2&before={first['next']}")
    assert [x["panel"] for x in rest["data"]] == [p["parser"]] and rest["next"] is None
    # the live poll of a filtered view: newer panels, oldest first, only those that match
    newer = [
        ask(keyed, "bench/duo", "Another cache question", folder["bob"])["panel"],
        ask(keyed, "bench/trio", "Another parser question", folder["alice"])["panel"],
    ]

    def poll():
        status, body, _ = dash.get(f"/api/panels?model=fast&after={first['latest']}")
        assert status == 200, body
        poll.body = body
        return [x["panel"] for x in body["data"]] == newer[1:]

    assert wait_until(poll), poll.body
    status, body, _ = dash.get(f"/api/panels?model=fast&after={poll.body['next']}")
    assert status == 200 and body["data"] == []


# -- the text --------------------------------------------------------------------------------
def test_text_search_finds_words_in_prompts_and_in_answers(dash, panels):
    p = panels
    assert found(dash, "q=parser") == [p["parser"]]
    assert found(dash, "q=PARSER") == [p["parser"]]  # case does not count
    assert found(dash, "q=review") == [p["lock"], p["parser"]]
    # a word only an answer holds
    body = listing(dash, "q=zanzibar")
    assert [x["panel"] for x in body["data"]] == [p["parser"]]
    match = body["data"][0]["match"]
    assert match["in"] == "answer" and match["call"] == f"{p['parser']}.member1"
    start, end = match["at"]
    assert match["text"][start:end].lower() == "zanzibar"
    # a prompt's word is found in the prompt, and the excerpt shows it
    match = listing(dash, "q=eviction")["data"][0]["match"]
    assert match["in"] == "prompt" and match["call"] is None
    assert match["text"][match["at"][0] : match["at"][1]] == "eviction"
    # words in any order; a phrase as written; a prefix
    assert found(dash, "q=ordering+lock") == [p["lock"]]
    assert found(dash, "q=%22lock+ordering%22") == [p["lock"]]
    assert found(dash, "q=%22ordering+lock%22") == []
    assert found(dash, "q=evict*") == [p["cache"]]
    assert found(dash, "q=retry+client") == [p["retry"]]
    assert found(dash, "q=retry+parser") == []
    # the list without text holds no excerpt, and no reply holds a whole prompt
    body = listing(dash, "key=bob")
    assert all("match" not in x and "prompt" not in x for x in body["data"])


SYNTAX = [
    ('"', None),
    ("*", None),
    ("\\", None),
    ("%", None),
    ('"unclosed phrase', False),
    ('parser"', True),
    ("(parser", True),
    ("parser)", True),
    ("^parser", True),
    ("-parser", True),
    ("'parser'", True),
    ("pars**", True),
    ("* parser", True),
    ("parser *", True),
    ("🦜 parser", True),
    ("a OR b", False),
    ("NOT parser", False),
    ("parser AND", False),
    ("prompt:parser", False),
    ("{prompt answers}: parser", False),
    ("NEAR(parser module)", False),
    ("parser + module", True),
    ("a\x00b", False),
    ("'; DROP TABLE panels; --", False),
]


def test_query_syntax_in_q_is_read_as_words(dash, panels):
    """Nothing typed is FTS5 syntax: punctuation separates words, and OR, NOT, AND or NEAR are
    words to find; a text with no word at all is refused, naming q. Never a 500."""
    for text, finds in SYNTAX:
        status, body, _ = dash.get(f"/api/panels?q={quote(text)}")
        if finds is None:
            assert status == 400 and body["error"]["param"] == "q", (text, body)
            assert "no word" in body["error"]["message"], (text, body)
            continue
        assert status == 200, (text, body)
        assert [x["panel"] for x in body["data"]] == ([panels["parser"]] if finds else []), text


def test_every_filter_is_checked_and_a_refusal_names_it(dash):
    for query, param, says in (
        ("status=lost", "status", "failed, owed, abandoned"),
        ("since=yesterday", "since", "24h"),
        ("until=2026-13-45", "until", "2026-01-31"),
        ("since=2026-02-01&until=2026-01-01", "until", "before"),
        ("q=" + "x" * 501, "q", "500"),
        ("q=***", "q", "no word"),
        ("q=" + "+".join(f"w{i}" for i in range(17)), "q", "16"),
        ("model=" + "m" * 201, "model", "200"),
        ("key=a%0Ab", "key", "printable"),
        ("sort=newest", "sort", "takes"),
        ("before=p20260101-5&after=p20260101-1", "after", "not both"),
        ("q=x&limit=0", "limit", "'limit'"),
        ("q=x&before=yesterday", "before", "'before'"),
    ):
        status, body, _ = dash.get(f"/api/panels?{query}")
        assert status == 400, (query, body)
        assert body["error"]["param"] == param and says in body["error"]["message"], body


# -- the index ---------------------------------------------------------------------------------
def test_the_index_follows_panels_a_gateway_process_writes_after_it_was_built(dash, home, folder):
    set_limits(home, max_explorers=0)
    assert found(dash, "q=parser") == []  # built, over empty logs
    with Served("gateway.py", home.root) as gw:
        first = ask(gw.client, "bench/trio", "Review the parser module")["panel"]
        assert found(dash, "q=parser") == [first]
        assert found(dash, "status=owed") == [first]
        later = ask(gw.client, "bench/duo", "Review the parser again")["panel"]
        assert found(dash, "q=parser") == [later, first]
        # a verdict the other process writes takes its panel out of what is owed
        for seat in ask_seats(dash, later):
            status, body, _ = gw.client.post(
                "/bench/verdict", {"call": seat["call"], "useful": False}
            )
            assert status == 200, body
        assert wait_until(lambda: found(dash, "status=owed") == [first])
    state = listing(dash, "q=parser")["index"]
    assert state == {
        "complete": True,
        "indexed": 2,
        "behind_bytes": 0,
        "behind_panels": 0,
        "building": False,
        "error": None,
        "rebuilding": False,
        "set_aside": None,
    }


def ask_seats(dash, panel):
    status, body, _ = dash.get(f"/api/panels/{panel}")
    assert status == 200, body
    return [s for s in body["seats"] if s["status"] == "ok"]


def test_the_index_is_rebuilt_when_deleted_and_is_private(dash, panels, home):
    runs = home.gateway_runs
    assert found(dash, "q=parser") == [panels["parser"]]
    for name in INDEX_FILES:
        path = runs / name
        if path.exists():
            assert path.stat().st_mode & 0o777 == 0o600, name
    for name in INDEX_FILES:
        (runs / name).unlink(missing_ok=True)
    assert found(dash, "q=parser") == [panels["parser"]]
    assert found(dash, "status=owed") == [panels["lock"], panels["cache"], panels["parser"]]
    assert (runs / "search.sqlite").stat().st_mode & 0o777 == 0o600
    # a file that is no database of ours is made anew
    for name in INDEX_FILES:
        (runs / name).unlink(missing_ok=True)
    (runs / "search.sqlite").write_bytes(b"not a database at all" * 100)
    assert found(dash, "q=cache") == [panels["cache"]]


def test_a_damaged_index_answers_200_is_set_aside_and_rebuilt(dash, keyed, folder, panels, home):
    runs = home.gateway_runs
    assert found(dash, "q=cache") == [panels["cache"]]
    path = runs / "search.sqlite"
    size = path.stat().st_size
    with open(path, "r+b") as f:  # every page but the header's, scribbled over
        f.seek(4096)
        f.write(bytes((i * 151 + 7) % 256 for i in range(size - 4096)))
    # the gateway goes on writing, so the index has pages to read and write again
    again = ask(keyed, "bench/duo", "Check the cache once more", folder["alice"])["panel"]
    status, body, _ = dash.get("/api/panels?q=cache")
    assert status == 200, body
    assert body["index"]["rebuilding"] or body["index"]["set_aside"], body["index"]
    assert found(dash, "q=cache") == [again, panels["cache"]]
    state = listing(dash, "q=cache")["index"]
    assert state["rebuilding"] is False and state["set_aside"].startswith("search.sqlite.damaged")
    assert (runs / state["set_aside"]).stat().st_size == size


def test_a_search_past_its_budget_answers_what_it_found_with_partial(dash, panels, home):
    """A budget made tiny (PANELIST_SEARCH_ROWS=1) runs out at once: 200 and ``partial``,
    with a ``next`` from which paging on finds what the default budget finds at once."""
    from panelist.serve import make_dashboard

    query = "/api/panels?q=review&collection=trio"
    want = found(dash, query.split("?")[1])
    assert want == [panels["parser"]]
    status, body, _ = dash.get(query)
    assert status == 200 and body["partial"] is False, body
    env = {"PANELIST_LOGIN_PAUSE": "0", "PANELIST_SEARCH_ROWS": "1"}
    with Gateway(make_dashboard(home, env=env)) as small:
        status, body, _ = small.get(query)
        assert status == 200, body
        assert body["partial"] is True and body["next"] is not None
        got, pages = [p["panel"] for p in body["data"]], 1
        while body["next"] is not None and pages < 100:  # paging on finds what was left
            status, body, _ = small.get(f"{query}&before={body['next']}")
            assert status == 200, body
            got += [p["panel"] for p in body["data"]]
            pages += 1
        assert got == want and body["next"] is None
    with pytest.raises(ConfigInvalid, match="PANELIST_SEARCH_ROWS"):
        make_dashboard(home, env={"PANELIST_SEARCH_ROWS": "lots"})


def test_the_index_is_rebuilt_when_its_log_is_replaced(dash, panels, home):
    assert found(dash, "q=cache") == [panels["cache"]]
    calls = home.gateway_runs / "calls.jsonl"
    first = calls.read_bytes().splitlines(keepends=True)[0]  # the parser panel's line
    replacement = calls.with_name("calls.new")
    replacement.write_bytes(first)
    os.replace(replacement, calls)
    assert found(dash, "q=cache") == []
    assert found(dash, "q=parser") == [panels["parser"]]
    assert listing(dash, "q=parser")["index"]["indexed"] == 1


def test_a_request_never_waits_for_another_writer(dash, panels, home):
    """While another process holds the index's lock, requests answer from what is indexed and
    say so; once it lets go, this process brings the index up to date by itself."""
    assert found(dash, "q=parser") == [panels["parser"]]
    runs = home.gateway_runs
    fd = os.open(runs / "search.lock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        for name in INDEX_FILES:
            (runs / name).unlink(missing_ok=True)
        status, body, _ = dash.get("/api/panels?q=parser")
        assert status == 200 and body["data"] == []
        assert body["index"]["complete"] is False and body["index"]["indexed"] == 0
        assert body["index"]["behind_bytes"] > 0
    finally:
        os.close(fd)
    assert found(dash, "q=parser") == [panels["parser"]]


def test_a_long_catch_up_runs_in_the_background(dash, panels):
    search = dash.server.parts.search
    search.inline_bytes = 0  # every backlog is long: the request only starts the build
    for name in INDEX_FILES:
        (search.dir / name).unlink(missing_ok=True)
    status, body, _ = dash.get("/api/panels?q=parser")
    assert status == 200 and body["index"]["complete"] is False
    assert found(dash, "q=parser") == [panels["parser"]]
    assert wait_until(lambda: not search.building)


def test_two_dashboards_on_one_folder_share_one_index(dash, home, folder):
    set_limits(home, max_explorers=0)
    with Served("serve.py", home.root) as other:
        made = [ask(dash, "bench/trio", f"Review the parser, take {i}")["panel"] for i in range(3)]
        for client in (dash, other.client):
            assert found(client, "q=parser") == made[::-1]
        made.append(ask(other.client, "bench/duo", "Review the parser once more")["panel"])
        for client in (other.client, dash):
            assert found(client, "q=parser") == made[::-1]
            assert listing(client, "q=parser")["index"]["indexed"] == 4
