"""Delivery: seats are owed verdicts only once the caller had their panel's reply; abandoned and
undelivered panels are listed apart; verdicts by panel id and model alias (ledger, HTTP, CLI)."""

import json
import socket

import pytest

from conftest import PATIENCE, read_jsonl, seats_logged, set_limits, wait_until
from panelist.metrics import errors
from panelist.metrics.cli.main import main
from panelist.metrics.ledger.index import reply_hash
from panelist.metrics.ledger.ledger import Ledger

T0 = 1_750_000_000.0


@pytest.fixture
def runs(tmp_path):
    return tmp_path / "runs" / "gateway"


def write_panel(
    ledger,
    seats,
    *,
    awaits=True,
    delivered=None,
    finish=True,
    abandoned=False,
    reply="pick",
    merger=None,
    key="local",
    collection="bench/c",
):
    """Log one panel as the gateway does: its "seated" line, a seat line per seat, maybe a
    "delivered" line, then (``finish``) its calls.jsonl line.

    ``seats``: ``(alias, text, tool_calls)`` or ``(alias, text, tool_calls, status)``;
    ``delivered``: ``(content, tool_call_ids)``; ``merger``: ``(alias, text)``.
    Returns ``(panel id, [call ids])``."""
    pid = ledger.new_panel(T0)
    ledger.record_seated(
        pid, "general", [s[0] for s in seats], T0, collection=collection, awaits_delivery=awaits
    )
    public = []
    for i, (alias, text, tools, *rest) in enumerate(seats, 1):
        status = rest[0] if rest else ("tool_calls" if tools else "ok")
        seat = {
            "call": f"{pid}.member{i}",
            "seat": "member",
            "alias": alias,
            "status": status,
            "seconds": 0.1,
            "answer": text if status in ("ok", "tool_calls") else "",
            "error": "" if status in ("ok", "tool_calls") else "server_error: boom",
            "tokens": {},
            "finish_reason": "tool_calls" if tools else "stop",
        }
        if tools:
            seat["tool_calls"] = tools
        public.append(seat)
        ledger.record_seat(
            {
                "call": seat["call"],
                "panel": pid,
                "alias": alias,
                "seat": "member",
                "shape": "general",
                "seated": T0,
                "status": status,
                "seconds": 0.1,
                "tokens": {},
                "error": seat["error"],
                "key": key,
                "collection": collection,
                **({"tool_calls": tools} if tools else {}),
            }
        )
    record = {
        "panel": pid,
        "collection": collection,
        "shape": "general",
        "key": key,
        "started": T0,
        "seconds": 0.2,
        "estimate": 10,
        "reply": reply,
        "prompt": "user: q",
        "seats": [dict(s, served=s["alias"]) for s in public],
        "skipped": [],
        "abandoned": abandoned,
    }
    if merger:
        m_alias, m_text = merger
        ledger.record_seat(
            {
                "call": f"{pid}.merger",
                "panel": pid,
                "alias": m_alias,
                "seat": "merger",
                "shape": "general",
                "seated": T0,
                "status": "ok",
                "seconds": 0.1,
                "tokens": {},
                "error": "",
                "key": key,
                "collection": collection,
            }
        )
        record["merger"] = {
            "call": f"{pid}.merger",
            "seat": "merger",
            "alias": m_alias,
            "served": m_alias,
            "status": "ok",
            "seconds": 0.1,
            "answer": m_text,
            "error": "",
            "tokens": {},
        }
    if delivered is not None:
        ledger.record_delivered(pid, *delivered)
    if finish:
        ledger.record_panel(record)
    return pid, [s["call"] for s in public]


def owed_calls(ledger, key=None):
    return [r["call"] for r in ledger.pending(key=key, limit=1000)]


def apart(ledger, key=None):
    return {
        u["panel"]: (u["reason"], sorted(c["call"] for c in u["calls"]))
        for u in ledger.undelivered(key=key, limit=1000)
    }


def evidence(runs, kind):
    return [e for e in read_jsonl(runs / "evidence.jsonl") if e["kind"] == kind]


# -- the ledger -------------------------------------------------------------------------------
def test_seats_are_owed_only_once_their_panel_is_delivered(runs):
    with Ledger(runs) as ledger:
        pid, calls = write_panel(ledger, [("a", "four", []), ("b", "five", [])], finish=False)
        # in flight and not delivered: owed nothing, and not abandoned either
        assert owed_calls(ledger) == [] and ledger.owed_count() == 0 and apart(ledger) == {}
        ledger.record_delivered(pid, "four", [])
        assert sorted(owed_calls(ledger)) == calls and ledger.owed_count() == 2
        assert ledger.owed_count("local") == 2 and apart(ledger) == {}
    (line,) = evidence(runs, "delivered")
    assert line["panel"] == pid and line["hash"] == reply_hash("four") and line["v"] == 1
    assert "four" not in json.dumps(line)  # only the hash of the reply is written
    seated = evidence(runs, "seated")[0]
    assert seated["awaits_delivery"] is True


def test_a_finished_panel_never_delivered_is_listed_apart(runs):
    with Ledger(runs) as ledger:
        pid, calls = write_panel(ledger, [("a", "four", []), ("b", "", [], "error")])
        assert owed_calls(ledger) == [] and ledger.owed_count() == 0
        assert apart(ledger) == {pid: ("undelivered", calls[:1])}  # the failed seat is not


def test_an_abandoned_panel_is_apart_until_a_delivered_line_says_otherwise(runs):
    with Ledger(runs) as ledger:
        pid, calls = write_panel(ledger, [("a", "four", [])], abandoned=True)
        assert [e["panel"] for e in evidence(runs, "abandoned")] == [pid]
        assert owed_calls(ledger) == [] and apart(ledger) == {pid: ("abandoned", calls)}
        # the caller had the reply after all (a pick reply sent, then the client left):
        # delivered wins, in either order
        ledger.record_delivered(pid, "four", [])
        assert owed_calls(ledger) == calls and ledger.owed_count() == 1 and apart(ledger) == {}
        other, more = write_panel(ledger, [("a", "six", [])], delivered=("six", []), abandoned=True)
        assert set(owed_calls(ledger)) == set(calls + more) and ledger.owed_count() == 2


def test_panels_seated_without_awaiting_delivery_are_owed_unless_abandoned(runs):
    with Ledger(runs) as ledger:
        kept, calls = write_panel(ledger, [("a", "four", []), ("b", "five", [])], awaits=False)
        left, gone = write_panel(ledger, [("a", "x", [])], awaits=False, abandoned=True)
        assert sorted(owed_calls(ledger)) == calls and ledger.owed_count() == 2
        assert apart(ledger) == {left: ("abandoned", gone)}
        # a verdict on an abandoned seat is still taken, and changes no owed count
        ledger.record_verdict(gone[0], useful=True)
        assert ledger.owed_count() == 2 and apart(ledger) == {}


def test_logs_from_before_delivery_lines(runs):
    """Logs written before this change: no "delivered" or "abandoned" lines, no marker on
    "seated" lines, and the caller's leaving only in calls.jsonl."""
    runs.mkdir(parents=True)
    ev, calls = [], []
    for seq, left in ((1, False), (2, True)):
        pid = f"p20250615-{seq}"
        ev.append(
            {
                "v": 1,
                "kind": "seated",
                "ts": "2025-06-15T15:06:40.000Z",
                "panel": pid,
                "shape": "general",
                "seated": T0,
                "aliases": ["a"],
                "collection": "bench/c",
            }
        )
        ev.append(
            {
                "v": 1,
                "kind": "seat",
                "ts": "2025-06-15T15:06:41.000Z",
                "call": f"{pid}.member1",
                "panel": pid,
                "alias": "a",
                "seat": "member",
                "shape": "general",
                "seated": T0,
                "status": "ok",
                "seconds": 1.0,
                "tokens": {},
                "error": "",
                "key": "local",
                "collection": "bench/c",
            }
        )
        calls.append(
            {
                "v": 1,
                "ts": "2025-06-15T15:06:42.000Z",
                "panel": pid,
                "collection": "bench/c",
                "shape": "general",
                "key": "local",
                "started": T0,
                "seconds": 1.0,
                "estimate": 3,
                "reply": "all",
                "prompt": 'user: say "abandoned":true',  # quoted: not the field
                "seats": [
                    {
                        "call": f"{pid}.member1",
                        "seat": "member",
                        "alias": "a",
                        "served": "a",
                        "status": "ok",
                        "seconds": 1.0,
                        "answer": "hi",
                        "error": "",
                        "tokens": {},
                    }
                ],
                "skipped": [],
                "abandoned": left,
            }
        )
    (runs / "evidence.jsonl").write_text("".join(json.dumps(e) + "\n" for e in ev))
    (runs / "calls.jsonl").write_text(
        "".join(json.dumps(c, separators=(",", ":")) + "\n" for c in calls)
    )
    for _ in range(2):  # replayed, then from its snapshot
        with Ledger(runs) as ledger:
            assert owed_calls(ledger) == ["p20250615-1.member1"] and ledger.owed_count() == 1
            assert apart(ledger) == {"p20250615-2": ("abandoned", ["p20250615-2.member1"])}
            assert ledger.panel_call("p20250615-1", "a") == "p20250615-1.member1"


def test_owed_counts_agree_with_pending_through_snapshot_replay_and_eviction(runs):
    def look(ledger):
        for key in (None, "k1", "k2"):
            assert ledger.owed_count(key) == len(owed_calls(ledger, key)), key
        return (sorted(owed_calls(ledger)), apart(ledger), ledger.owed_count("k1"))

    with Ledger(runs, recent_calls=9) as ledger:
        for i in range(8):
            pid, calls = write_panel(
                ledger,
                [("a", f"x{i}", []), ("b", f"y{i}", [])],
                key=f"k{i % 3}",
                awaits=i % 4 != 3,
                abandoned=i % 4 == 2,
                delivered=(f"x{i}", []) if i % 4 in (0, 2) and i != 2 else None,
            )
        before = look(ledger)
        assert before[0] and before[1]
    with Ledger(runs, recent_calls=9) as reopened:
        assert reopened.from_snapshot and look(reopened) == before
    (runs / "index.json").unlink()
    with Ledger(runs, recent_calls=9) as replayed:
        assert not replayed.from_snapshot and look(replayed) == before


def test_another_process_sees_delivery(runs):
    with Ledger(runs) as writer, Ledger(runs) as reader:
        pid, calls = write_panel(
            writer,
            [
                (
                    "a",
                    "four",
                    [
                        {
                            "id": "t1",
                            "type": "function",
                            "function": {"name": "f", "arguments": "{}"},
                        }
                    ],
                )
            ],
        )
        assert owed_calls(reader) == [] and reader.tool_call_owner("t1") == (pid, "a")
        writer.record_delivered(pid, None, ["t1"])
        assert owed_calls(reader) == calls and reader.owed_count() == 1


def test_verdict_by_panel_and_alias_in_the_ledger(runs):
    with Ledger(runs) as ledger:
        pid, calls = write_panel(
            ledger,
            [("a", "four", []), ("b", "five", [])],
            merger=("a", "both"),
            reply="merged",
            delivered=("both", []),
        )
        assert ledger.panel_call(pid, "b") == calls[1]
        assert ledger.panel_call(pid, "a") == calls[0]  # the seat, not its merger call
        assert ledger.panel_call(pid, "merger") == f"{pid}.merger"
        assert ledger.panel_call(pid, "member2") == calls[1]
        with pytest.raises(errors.NotFound, match=r"no seat of 'zed'.*a \(member1\)"):
            ledger.panel_call(pid, "zed")
        with pytest.raises(errors.BadRequest, match="not a panel id"):
            ledger.panel_call("p1", "a")
        with pytest.raises(errors.NotFound, match="unknown panel"):
            ledger.panel_call("p20250101-999", "a")
        with pytest.raises(errors.NotFound, match="unknown panel"):
            ledger.panel_call(pid, "a", key="someone-else")
        # a picked reply goes out before the panel ends: its answered seats are found anyway
        running, seats = write_panel(
            ledger, [("a", "four", []), ("b", "five", [])], finish=False, delivered=("four", [])
        )
        assert ledger.panel(running) is None and ledger.panel_call(running, "b") == seats[1]


# -- over HTTP and the command line -----------------------------------------------------------
def chat(**extra):
    return {
        "model": "bench/trio",
        "messages": [{"role": "user", "content": "Review x = 1"}],
        **extra,
    }


def test_a_panel_the_caller_left_is_not_owed_but_listed_apart(gateway, dash, home, sim):
    set_limits(home, max_explorers=0)
    sim.script("slow", fail="hang")
    host, port = gateway.server.server_address[:2]
    raw = json.dumps(chat()).encode()
    with socket.create_connection((host, port), timeout=PATIENCE) as s:
        s.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
            b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
            % (port, len(raw), raw)
        )
        # leave once fast and mid have answered and slow is waiting upstream
        assert wait_until(
            lambda: sim.count("slow") == 1 and seats_logged(home) == {"fast": "ok", "mid": "ok"}
        ), seats_logged(home)
    path = home.gateway_runs / "calls.jsonl"
    assert wait_until(lambda: path.exists() and read_jsonl(path)), "the panel was never logged"
    (record,) = read_jsonl(path)
    assert record["abandoned"] is True
    answered = sorted(s["call"] for s in record["seats"] if s["status"] == "ok")
    assert len(answered) == 2

    status, body, _ = gateway.get("/bench/pending")
    assert status == 200 and body["data"] == []
    (left,) = body["abandoned"]
    assert left["panel"] == record["panel"] and left["reason"] == "abandoned"
    assert sorted(c["call"] for c in left["calls"]) == answered
    assert {c["alias"] for c in left["calls"]} == {"fast", "mid"}
    (line,) = [
        e for e in read_jsonl(home.gateway_runs / "evidence.jsonl") if e["kind"] == "abandoned"
    ]
    assert line["panel"] == record["panel"]
    # the dashboard's owed counts agree
    status, info, _ = dash.get("/api/panels")
    assert status == 200 and info["owed"] == 0

    # a panel the caller did get is owed as before
    sim.script("slow", latency=0)
    status, reply, _ = gateway.post("/v1/chat/completions", chat())
    assert status == 200
    status, body, _ = gateway.get("/bench/pending")
    assert sorted(o["call"] for o in body["data"]) == sorted(
        s["call"] for s in reply["bench"]["seats"]
    )
    assert [p["panel"] for p in body["abandoned"]] == [record["panel"]]
    assert dash.get("/api/panels")[1]["owed"] == 3


def test_pending_over_http_follows_another_process(gateway, home):
    with Ledger(home.gateway_runs) as other:
        pid, calls = write_panel(
            other, [("fast", "four", []), ("mid", "five", [])], collection="bench/trio"
        )
        status, body, _ = gateway.get("/bench/pending")
        assert body["data"] == [] and body["abandoned"][0]["reason"] == "undelivered"
        other.record_delivered(pid, "four", [])
        status, body, _ = gateway.get("/bench/pending")
        assert sorted(o["call"] for o in body["data"]) == calls and body["abandoned"] == []


def test_pending_names_the_seat_each_call_sat_in(gateway, home):
    status, reply, _ = gateway.post("/v1/chat/completions", chat())
    assert status == 200
    seated = {s["call"]: s["seat"] for s in reply["bench"]["seats"] if s["status"] == "ok"}
    status, body, _ = gateway.get("/bench/pending")
    assert {o["call"]: o["seat"] for o in body["data"]} == seated
    assert set(seated.values()) <= {"member", "explorer"} and None not in seated.values()


def test_verdict_by_panel_and_alias_over_http(gateway, home):
    status, reply, _ = gateway.post("/v1/chat/completions", chat())
    assert status == 200
    pid = reply["bench"]["panel"]
    mid = next(s["call"] for s in reply["bench"]["seats"] if s["alias"] == "mid")
    status, body, _ = gateway.post(
        "/bench/verdict", {"panel": pid, "alias": "mid", "useful": True, "note": "right"}
    )
    assert status == 200 and body["call"] == mid and body["written"] is True
    (line,) = [
        e for e in read_jsonl(home.gateway_runs / "evidence.jsonl") if e["kind"] == "verdict"
    ]
    assert line["call"] == mid and line["alias"] == "mid" and line["useful"] is True

    for sent, code, words in (
        ({"panel": pid, "alias": "nobody"}, 404, "no seat of 'nobody'"),
        ({"panel": "p20250101-99999", "alias": "mid"}, 404, "unknown panel"),
        ({"panel": "bench/trio", "alias": "mid"}, 400, "not a panel id"),
        ({"panel": pid}, 400, "'alias' must name the model"),
        ({"alias": "mid"}, 400, "'panel' must be a panel id"),
        ({"panel": pid, "alias": "mid", "call": mid}, 400, "not both"),
        ({}, 400, "or send 'panel'"),
    ):
        status, body, _ = gateway.post("/bench/verdict", dict(sent, useful=False))
        assert status == code and words in body["error"]["message"], (sent, body)


def test_verdict_on_the_merger_by_panel(gateway, home):
    status, reply, _ = gateway.post("/v1/chat/completions", chat(model="bench/trio:merged"))
    assert status == 200 and reply["bench"]["merger"]["status"] == "ok"
    pid = reply["bench"]["panel"]
    status, body, _ = gateway.post(
        "/bench/verdict", {"panel": pid, "alias": "merger", "useful": True}
    )
    assert status == 200 and body["call"] == f"{pid}.merger"


def test_verdict_and_pending_on_the_command_line(gateway, home, capsys):
    d = str(home.root)
    set_limits(home, max_explorers=0)
    status, reply, _ = gateway.post("/v1/chat/completions", chat())
    pid = reply["bench"]["panel"]
    slow = next(s["call"] for s in reply["bench"]["seats"] if s["alias"] == "slow")
    assert main(["verdict", "--panel", pid, "--alias", "slow", "--useful", "--data", d]) == 0
    assert f"recorded {slow} useful" in capsys.readouterr().out
    fast = next(s["call"] for s in reply["bench"]["seats"] if s["alias"] == "fast")
    assert (
        main(["verdict", "--panel", pid, "--alias", "fast", "--not-useful", "--url", gateway.url])
        == 0
    )
    assert f"recorded {fast} not useful" in capsys.readouterr().out
    judged = {
        e["call"]: e["useful"]
        for e in read_jsonl(home.gateway_runs / "evidence.jsonl")
        if e["kind"] == "verdict"
    }
    assert judged == {slow: True, fast: False}

    assert main(["verdict", "--panel", pid, "--useful", "--data", d]) == 1
    assert "--panel P --alias A" in capsys.readouterr().err
    assert main(["verdict", slow, "--panel", pid, "--alias", "x", "--useful", "--data", d]) == 1
    assert "not both" in capsys.readouterr().err
    assert main(["verdict", "--panel", pid, "--alias", "zed", "--useful", "--data", d]) == 1
    assert "no seat of 'zed'" in capsys.readouterr().err

    with Ledger(home.gateway_runs) as other:
        left, calls = write_panel(
            other, [("fast", "four", [])], abandoned=True, collection="bench/trio"
        )
    for where in (["--data", d], ["--url", gateway.url]):
        assert main(["pending", "--json", *where]) == 0
        owed = json.loads(capsys.readouterr().out)
        assert [o["call"] for o in owed] == [
            next(s["call"] for s in reply["bench"]["seats"] if s["alias"] == "mid")
        ]
        assert main(["pending", *where]) == 0
        assert "not owed: 1 panel(s)" in capsys.readouterr().err
        assert main(["pending", "--abandoned", "--json", *where]) == 0
        (shown,) = json.loads(capsys.readouterr().out)
        assert shown["panel"] == left and shown["reason"] == "abandoned"
        assert [c["call"] for c in shown["calls"]] == calls
        assert main(["pending", "--abandoned", *where]) == 0
        assert left in capsys.readouterr().out
