"""``panelist mcp``: the MCP server as agents reach it, a child process on stdin/stdout.

Driven two ways: by the ``mcp`` package's stdio client (as Claude Code and other clients do),
and by raw JSON-RPC lines over a pipe for the cases a well-behaved client never sends. Either
way the server runs from the checkout (``python metrics/offload.py mcp``), against a real
gateway on the simulated upstream, and every process a test starts is reaped by its end.
"""

import asyncio
import io
import json
import os
import queue
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from conftest import PATIENCE, Gateway, move_to, read_jsonl, wait_until
from panelist import __version__
from panelist.gateway import make_gateway
from panelist.metrics.cli import mcp as mcp_server
from panelist.metrics.server.keys import Keys

ROOT = Path(__file__).resolve().parent.parent

# every test here runs the MCP server as a process, or a gateway it calls
pytestmark = pytest.mark.slow
SERVER = [sys.executable, str(ROOT / "metrics" / "offload.py"), "mcp"]


def children() -> set[int]:
    """Processes whose parent is this one, zombies (exited, not reaped) included."""
    me = str(os.getpid())
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()  # after "pid (comm)"
        except (OSError, IndexError):
            continue
        if fields[1] == me:
            found.add(int(stat.parent.name))
    return found


@pytest.fixture()
def reaped():
    """Fails the test if a process it started is still running, or unreaped, at its end."""
    if not Path("/proc/self/stat").exists():
        yield
        return
    before = children()
    yield
    assert wait_until(lambda: children() <= before), (
        f"processes left behind: {sorted(children() - before)}"
    )


def session(env: dict, scenario, errlog: Path, args=()):
    """Run ``scenario(session, initialize_result)`` in a stdio session with the server."""
    params = StdioServerParameters(command=SERVER[0], args=[*SERVER[1:], *args], env=env)

    async def main():
        with errlog.open("w") as err:
            async with stdio_client(params, errlog=err) as (read, write):
                async with ClientSession(read, write) as s:
                    init = await asyncio.wait_for(s.initialize(), PATIENCE)
                    return await asyncio.wait_for(scenario(s, init), 4 * PATIENCE)

    return asyncio.run(main())


def text_of(result) -> str:
    return "\n".join(c.text for c in result.content)


# -- the mcp package's client ---------------------------------------------------------------------
def test_an_mcp_client_lists_asks_judges_and_sees_what_is_pending(gateway, home, tmp_path, reaped):
    async def scenario(s, init):
        tools = await s.list_tools()
        listed = await s.call_tool("list_collections", {})
        asked = await s.call_tool(
            "ask", {"collection": "trio", "prompt": "Review this diff", "system": "be brief"}
        )
        owed = await s.call_tool("pending", {"limit": 50})
        call = asked.structured_content["seats"][1]["call"]
        judged = await s.call_tool(
            "verdict",
            {"call": call, "useful": True, "note": "found the real bug", "real": ["off by one"]},
        )
        after = await s.call_tool("pending", {})
        return init, tools, listed, asked, owed, judged, after

    init, tools, listed, asked, owed, judged, after = session(
        {"PANELIST_URL": gateway.url + "/v1"}, scenario, tmp_path / "err.txt"
    )

    assert init.server_info.name == "panelist" and init.server_info.version == __version__
    assert init.protocol_version == "2025-11-25" and init.capabilities.tools is not None
    assert {t.name for t in tools.tools} == {"list_collections", "ask", "verdict", "pending"}
    assert all(t.input_schema["type"] == "object" for t in tools.tools)

    assert not listed.is_error
    (trio,) = listed.structured_content["collections"]
    assert trio["name"] == "bench/trio" and trio["members"] == ["fast", "mid", "slow"]
    assert trio["reply"] == "all" and trio["replies"] == ["all", "merged", "pick"]
    assert "bench/trio: Three simulated reviewers" in text_of(listed)

    # the answer, and every seat's call id as the gateway logged it
    assert not asked.is_error
    (panel,) = read_jsonl(home.gateway_runs / "calls.jsonl")
    data = asked.structured_content
    assert data["panel"] == panel["panel"] and data["reply"] == "all"
    assert [s["call"] for s in data["seats"]] == [s["call"] for s in panel["seats"]]
    assert len(data["seats"]) == 5 and {s["status"] for s in data["seats"]} == {"ok"}
    assert data["answer"].count("## Seat") == 5
    assert "system: be brief" in panel["prompt"]
    text = text_of(asked)
    assert text.startswith(data["answer"])
    assert all(f"call {s['call']} · {s['alias']}" in text for s in data["seats"])

    assert not owed.is_error
    assert {o["call"] for o in owed.structured_content["pending"]} == {
        s["call"] for s in data["seats"]
    }

    call = data["seats"][1]["call"]
    assert not judged.is_error and judged.structured_content["written"] is True
    assert text_of(judged) == f"recorded: {call} is useful"
    (v,) = [e for e in read_jsonl(home.gateway_runs / "evidence.jsonl") if e["kind"] == "verdict"]
    assert (v["call"], v["useful"], v["note"], v["real"], v["by"]) == (
        call,
        True,
        "found the real bug",
        ["off by one"],
        "local",
    )
    assert call not in {o["call"] for o in after.structured_content["pending"]}
    assert len(after.structured_content["pending"]) == 4
    assert "Traceback" not in (tmp_path / "err.txt").read_text()


def test_a_merged_ask_gives_the_mergers_call_to_judge(gateway, home, tmp_path, reaped):
    async def scenario(s, _):
        asked = await s.call_tool(
            "ask", {"collection": "bench/trio", "prompt": "Sum it up", "reply": "merged"}
        )
        merger = asked.structured_content["merger"]["call"]
        judged = await s.call_tool("verdict", {"call": merger, "useful": False})
        return asked, judged

    asked, judged = session({"PANELIST_URL": gateway.url}, scenario, tmp_path / "err.txt")
    data = asked.structured_content
    (panel,) = read_jsonl(home.gateway_runs / "calls.jsonl")
    assert data["reply"] == panel["reply"] == "merged"
    assert data["merger"]["call"] == panel["merger"]["call"] == f"{panel['panel']}.merger"
    assert data["answer"] == panel["merger"]["answer"]
    assert f"call {data['merger']['call']}" in text_of(asked)
    assert text_of(judged) == f"recorded: {data['merger']['call']} is not useful"
    (v,) = [e for e in read_jsonl(home.gateway_runs / "evidence.jsonl") if e["kind"] == "verdict"]
    assert v["call"] == data["merger"]["call"] and v["useful"] is False


def test_gateway_refusals_are_tool_errors_that_say_what_to_do(gateway, home, sim, tmp_path, reaped):
    for alias in ("fast", "mid", "slow", "x-one", "x-two", "x-three"):
        sim.script(alias, fail="server_error")

    async def scenario(s, _):
        return (
            await s.call_tool("ask", {"collection": "nope", "prompt": "hi"}),
            await s.call_tool("ask", {"collection": "trio", "prompt": "hi"}),
            await s.call_tool("verdict", {"call": "p20000101-1.member1", "useful": True}),
            await s.call_tool("ask", {"collection": "trio"}),
            await s.call_tool("ask", {"collection": "trio", "prompt": "  "}),
            await s.call_tool("ask", {"collection": "trio", "prompt": "hi", "reply": "x"}),
            await s.call_tool("verdict", {"call": "p1.member1", "useful": "yes"}),
            await s.call_tool("pending", {"limit": 0}),
            await s.call_tool("pending", {"color": "red"}),
        )

    unknown, failed, no_call, no_prompt, empty, mode, useful, limit, extra = session(
        {"PANELIST_URL": gateway.url}, scenario, tmp_path / "err.txt", args=("--url", gateway.url)
    )
    for r in (unknown, failed, no_call, no_prompt, empty, mode, useful, limit, extra):
        assert r.is_error
    assert "(404)" in text_of(unknown) and "bench/trio" in text_of(unknown)
    # every seat failed: an error, with the seats and what to try next
    (panel,) = read_jsonl(home.gateway_runs / "calls.jsonl")
    assert "no seat of bench/trio answered" in text_of(failed) and "try again" in text_of(failed)
    assert all(f"call {s['call']}" in text_of(failed) for s in panel["seats"])
    assert "unknown call id" in text_of(no_call)
    assert text_of(no_prompt) == "'prompt' is missing: the question or task for the panel"
    assert "'prompt' is empty" in text_of(empty)
    assert "'reply' must be one of all, merged, pick" in text_of(mode)
    assert text_of(useful).startswith("'useful' must be true or false")
    assert text_of(limit) == "'limit' must be from 1 to 500"
    assert text_of(extra).startswith("unknown argument(s) color")
    assert len(read_jsonl(home.gateway_runs / "calls.jsonl")) == 1  # nothing else was asked


def test_the_gateway_key_is_sent_and_never_shown(home, tmp_path, reaped):
    secret, _ = Keys(home).create("agent")
    with Gateway(make_gateway(home, env={"PANELIST_REQUIRE_KEYS": "1"})) as gw:

        async def scenario(s, _):
            return await s.call_tool("list_collections", {})

        keyless = session({"PANELIST_URL": gw.url}, scenario, tmp_path / "a.txt")
        keyed = session(
            {"PANELIST_URL": gw.url, "PANELIST_KEY": secret}, scenario, tmp_path / "b.txt"
        )
        wrong = session(
            {"PANELIST_URL": gw.url, "PANELIST_KEY": secret[:-4] + "zzzz"},
            scenario,
            tmp_path / "c.txt",
        )
    assert keyless.is_error and "(401)" in text_of(keyless)
    assert "set PANELIST_KEY" in text_of(keyless)
    assert not keyed.is_error and keyed.structured_content["collections"][0]["name"] == "bench/trio"
    assert wrong.is_error and "PANELIST_KEY given to this server was refused" in text_of(wrong)
    for shown in (
        text_of(keyless),
        text_of(keyed),
        text_of(wrong),
        json.dumps(keyed.structured_content),
    ):
        assert secret not in shown and secret[:-4] not in shown
    for log in ("a.txt", "b.txt", "c.txt"):
        text = (tmp_path / log).read_text()
        assert "with a gateway key" in text or log == "a.txt"
        assert secret[:-4] not in text and "Traceback" not in text


def test_a_proxy_in_the_environment_is_not_used_for_a_loopback_gateway(
    gateway, tmp_path, monkeypatch, reaped
):
    with socket.socket() as s:  # a port just freed: a proxy that is not running
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    for name in ("HTTP_PROXY", "HTTPS_PROXY"):
        monkeypatch.setenv(name, dead)

    async def scenario(s, _):
        return await s.call_tool("ask", {"collection": "trio", "prompt": "hi"})

    env = {name: os.environ[name] for name in ("HTTP_PROXY", "HTTPS_PROXY")}
    asked = session(dict(env, PANELIST_URL=gateway.url), scenario, tmp_path / "err.txt")
    assert not asked.is_error, text_of(asked)
    assert {s["status"] for s in asked.structured_content["seats"]} == {"ok"}


# -- raw JSON-RPC over a pipe ---------------------------------------------------------------------
def _not_json(name: str):
    raise ValueError(f"{name} is not JSON")


def strict(line: bytes):
    """``line`` parsed as strict JSON: ``NaN`` and ``Infinity``, which Python's decoder takes and
    its encoder writes, are refused as every other JSON peer refuses them."""
    return json.loads(line, parse_constant=_not_json)


def reader(stream) -> tuple[queue.Queue, threading.Thread]:
    """A thread putting each line of ``stream`` on a queue, then None at its end."""
    lines: queue.Queue = queue.Queue()

    def read():
        for line in stream:
            lines.put(line)
        lines.put(None)

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return lines, thread


def send(stream, message) -> None:
    stream.write((message if isinstance(message, bytes) else json.dumps(message).encode()) + b"\n")
    stream.flush()


class Raw:
    """The server as a child process, spoken to line by line; reaped when the block ends."""

    def __init__(self, env: dict, args=()):
        clean = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith("PANELIST_") and not k.lower().endswith("_proxy")
        }
        self.proc = subprocess.Popen(
            [*SERVER, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(clean, **env),
        )
        self.lines, self.reader = reader(self.proc.stdout)
        self.err = ""

    def send(self, message) -> None:
        send(self.proc.stdin, message)

    def recv(self) -> dict:
        line = self.lines.get(timeout=PATIENCE)
        assert line is not None, "the server closed stdout"
        assert line.endswith(b"\n") and b"\n" not in line[:-1]
        return strict(line)

    def request(self, rid, method, params=None) -> dict:
        self.send(
            {
                "jsonrpc": "2.0",
                "id": rid,
                "method": method,
                **({} if params is None else {"params": params}),
            }
        )
        reply = self.recv()
        assert reply["jsonrpc"] == "2.0" and reply["id"] == rid, reply
        return reply

    def finish(self) -> list[dict]:
        """Close stdin; return whatever else the server wrote before it exited (status 0)."""
        self.proc.stdin.close()
        rest = []
        while (line := self.lines.get(timeout=PATIENCE)) is not None:
            rest.append(strict(line))
        assert self.proc.wait(PATIENCE) == 0
        self.err = self.proc.stderr.read().decode()
        return rest

    def __enter__(self) -> "Raw":
        return self

    def __exit__(self, *exc) -> None:
        if self.proc.returncode is None:
            self.proc.kill()
            self.proc.wait(PATIENCE)
        self.reader.join(PATIENCE)
        for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            f.close()


def test_initialize_answers_the_clients_revision_or_the_latest(reaped):
    with Raw({"PANELIST_URL": "http://127.0.0.1:9"}) as raw:
        info = {"capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}
        old = raw.request(1, "initialize", dict(info, protocolVersion="2025-03-26"))["result"]
        new = raw.request(2, "initialize", dict(info, protocolVersion="2099-01-01"))["result"]
        raw.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert raw.request(3, "ping")["result"] == {}  # the notification got no reply
        assert raw.finish() == []
    assert old["protocolVersion"] == "2025-03-26"
    assert new["protocolVersion"] == "2025-11-25"
    assert new["capabilities"] == {"tools": {}}
    assert new["serverInfo"]["name"] == "panelist" and new["serverInfo"]["version"] == __version__
    assert "Traceback" not in raw.err


def test_protocol_errors_have_their_codes(reaped):
    with Raw({"PANELIST_URL": "http://127.0.0.1:9"}) as raw:
        unknown = raw.request(1, "resources/list")
        raw.send({"jsonrpc": "2.0", "method": "notifications/whatever"})  # no reply
        raw.send(
            {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}
        )
        no_version = raw.request(2, "initialize", {"capabilities": {}})
        params_list = raw.request(3, "tools/list", [1, 2])
        no_name = raw.request(4, "tools/call", {"arguments": {}})
        no_tool = raw.request(5, "tools/call", {"name": "delete_everything"})
        bad_args = raw.request(6, "tools/call", {"name": "ask", "arguments": ["trio", "hi"]})
        raw.send(b"{not json")
        parse = raw.recv()
        raw.send(b"\xff\xfe")
        not_utf8 = raw.recv()
        raw.send(json.dumps([{"jsonrpc": "2.0", "id": 7, "method": "ping"}]).encode())
        batch = raw.recv()
        raw.send({"id": 8, "method": "ping"})
        no_jsonrpc = raw.recv()
        raw.send({"jsonrpc": "2.0", "id": None, "method": "ping"})
        null_id = raw.recv()
        raw.send({"jsonrpc": "2.0", "id": 9, "result": {}})  # a reply: nothing to answer
        assert raw.request(10, "ping")["result"] == {}
        assert raw.finish() == []
    assert unknown["error"]["code"] == -32601 and "tools/call" in unknown["error"]["message"]
    for reply in (no_version, params_list, no_name, no_tool, bad_args):
        assert reply["error"]["code"] == -32602, reply
    assert "protocolVersion" in no_version["error"]["message"]
    assert "unknown tool 'delete_everything'" in no_tool["error"]["message"]
    assert "list_collections, ask, verdict, pending" in no_tool["error"]["message"]
    assert (parse["id"], parse["error"]["code"]) == (None, -32700)
    assert (not_utf8["id"], not_utf8["error"]["code"]) == (None, -32700)
    assert (batch["id"], batch["error"]["code"]) == (None, -32600)
    assert (no_jsonrpc["id"], no_jsonrpc["error"]["code"]) == (8, -32600)
    assert (null_id["id"], null_id["error"]["code"]) == (None, -32600)
    assert "Traceback" not in raw.err


def test_ids_json_cannot_carry_are_refused_and_stdout_stays_strict_json(reaped):
    with Raw({"PANELIST_URL": "http://127.0.0.1:9"}) as raw:
        # not JSON at all, though Python's decoder takes them: a parse error, as for any non-JSON
        not_json = []
        for literal in (b"NaN", b"Infinity", b"-Infinity"):
            raw.send(b'{"jsonrpc": "2.0", "id": ' + literal + b', "method": "ping"}')
            not_json.append(raw.recv())
        raw.send(
            b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": '
            b'{"name": "pending", "arguments": {"limit": NaN}}}'
        )
        in_params = raw.recv()
        # JSON, but no number a peer can hold: not a request
        overflow = []
        for literal in (b"1e400", b"-1e400"):
            raw.send(
                b'{"jsonrpc": "2.0", "id": ' + literal + b', "method": "tools/call", '
                b'"params": {"name": "pending"}}'
            )
            overflow.append(raw.recv())
        raw.send(b'{"jsonrpc": "2.0", "id": 1e400, "result": {}}')  # a "reply" with one: none
        # finite numbers are ids, fractional ones too (answered with the same value)
        assert raw.request(2.5, "ping")["result"] == {}
        assert raw.request(-0.0, "ping")["result"] == {}
        assert raw.request(1e300, "ping")["result"] == {}
        assert raw.request(10**30, "ping")["result"] == {}
        assert raw.finish() == []
    for reply in not_json + [in_params]:
        assert reply["id"] is None and reply["error"]["code"] == -32700, reply
    assert [r["error"]["message"].split(" is not")[0] for r in not_json] == [
        "not JSON (NaN",
        "not JSON (Infinity",
        "not JSON (-Infinity",
    ]
    assert "send a finite number" in not_json[0]["error"]["message"]
    for reply in overflow:
        assert reply["id"] is None and reply["error"]["code"] == -32600, reply
        assert "'id' must be text or a finite number" in reply["error"]["message"]
    assert "Traceback" not in raw.err


def threads_of(pid: int) -> int:
    """How many threads the process ``pid`` runs, as the kernel counts them."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    raise AssertionError(f"no Threads line in /proc/{pid}/status")


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="threads counted in /proc")
def test_two_thousand_calls_at_once_run_a_bounded_few_and_each_gets_one_reply(home, gated, reaped):
    move_to(home, gated, "fast", "mid", "slow")
    calls, sent = 4, 2000
    taken = calls + mcp_server.MAX_WAITING  # running, and waiting for a free worker
    ask = {"name": "ask", "arguments": {"collection": "trio", "prompt": "hold on"}}
    with (
        Gateway(make_gateway(home, env={})) as gw,
        Raw({"PANELIST_URL": gw.url}, args=("--calls", str(calls))) as raw,
    ):
        assert raw.request(0, "ping")["result"] == {}
        idle = threads_of(raw.proc.pid)
        seen = [idle]
        stop = threading.Event()

        def sample():  # from outside the process, while its calls are under way
            while not stop.wait(0.005):
                seen.append(threads_of(raw.proc.pid))

        sampler = threading.Thread(target=sample)
        sampler.start()
        try:
            raw.proc.stdin.write(
                b"".join(
                    json.dumps(
                        {
                            "jsonrpc": "2.0",
                            "id": i,
                            "method": "tools/call",
                            "params": dict(ask, _meta={"progressToken": i}) if i % 2 else ask,
                        }
                    ).encode()
                    + b"\n"
                    for i in range(1, sent + 1)
                )
            )
            raw.proc.stdin.flush()
            # refused at once while the gate is shut; a thread a call would show here first
            assert wait_until(lambda: raw.lines.qsize() >= sent - taken or max(seen) > calls + 3)
            assert max(seen) <= calls + 3, f"{max(seen)} threads for {calls} calls at once"
            busy = [raw.recv() for _ in range(sent - taken)]
            assert gated.wait_arrived("fast", "mid", "slow")
            assert raw.request("ping", "ping")["result"] == {}  # the session still answers
        finally:
            stop.set()
            sampler.join()
        raw.proc.stdin.close()  # the end of stdin: what was taken is still answered
        gated.open("fast", "mid", "slow")
        rest = []
        while (line := raw.lines.get(timeout=PATIENCE)) is not None:
            rest.append(strict(line))
        assert raw.proc.wait(PATIENCE) == 0
        raw.err = raw.proc.stderr.read().decode()
    # the main thread, the workers and the progress clock: never a thread a call
    assert calls + 1 <= max(seen) <= calls + 3, f"{max(seen)} threads for {calls} calls at once"
    replies = [r for r in busy + rest if "id" in r]
    assert sorted(r["id"] for r in replies) == list(range(1, sent + 1))  # one reply each
    assert all(r.get("method") == "notifications/progress" for r in rest if "id" not in r)
    refused = [r for r in replies if "error" in r]
    assert len(refused) == sent - taken
    assert {r["error"]["code"] for r in refused} == {-32000}
    assert "busy" in refused[0]["error"]["message"] and "retry" in refused[0]["error"]["message"]
    answered = [r for r in replies if "result" in r]
    assert len(answered) == taken
    assert all(r["result"]["isError"] is False for r in answered)
    assert len(read_jsonl(home.gateway_runs / "calls.jsonl")) == taken
    assert "Traceback" not in raw.err


def test_a_gateway_that_is_not_running_gets_the_command_to_start_it(reaped):
    with socket.socket() as s:  # a port just freed: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with Raw({"PANELIST_URL": f"http://127.0.0.1:{port}/v1"}) as raw:
        for rid, (tool, args) in enumerate(
            [
                ("list_collections", {}),
                ("pending", {}),
                ("ask", {"collection": "trio", "prompt": "hi"}),
                ("verdict", {"call": "p1.member1", "useful": True}),
            ]
        ):
            reply = raw.request(rid, "tools/call", {"name": tool, "arguments": args})["result"]
            assert reply["isError"] is True, tool
            (content,) = reply["content"]
            assert content["type"] == "text"
            assert f"no Panelist gateway is running at http://127.0.0.1:{port}" in content["text"]
            assert f"`panelist gateway --port {port}`" in content["text"]
        raw.finish()
    assert "Traceback" not in raw.err


def test_ping_is_answered_while_a_panel_thinks(home, gated, reaped):
    move_to(home, gated, "fast", "mid", "slow")
    with Gateway(make_gateway(home, env={})) as gw, Raw({"PANELIST_URL": gw.url}) as raw:
        raw.send(
            {
                "jsonrpc": "2.0",
                "id": "ask-1",
                "method": "tools/call",
                "params": {"name": "ask", "arguments": {"collection": "trio", "prompt": "hold on"}},
            }
        )
        assert gated.wait_arrived("fast", "mid", "slow")  # the panel is under way
        assert raw.request("ping-2", "ping")["result"] == {}
        assert raw.request(3, "tools/call", {"name": "pending"})["result"]["isError"] is False
        gated.open("fast", "mid", "slow")
        asked = raw.recv()
        assert asked["id"] == "ask-1" and asked["result"]["isError"] is False
        assert raw.finish() == []
    seats = asked["result"]["structuredContent"]["seats"]
    assert {s["alias"] for s in seats} >= {"fast", "mid", "slow"}
    assert {s["status"] for s in seats} == {"ok"}


def test_stdin_closing_mid_call_still_gets_the_call_answered(home, gated, reaped):
    move_to(home, gated, "fast", "mid", "slow")
    with Gateway(make_gateway(home, env={})) as gw, Raw({"PANELIST_URL": gw.url}) as raw:
        raw.send(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {"name": "ask", "arguments": {"collection": "trio", "prompt": "x"}},
            }
        )
        assert gated.wait_arrived("fast", "mid", "slow")
        raw.proc.stdin.close()
        gated.open("fast", "mid", "slow")
        rest = []
        while (line := raw.lines.get(timeout=PATIENCE)) is not None:
            rest.append(json.loads(line))
        assert raw.proc.wait(PATIENCE) == 0
    (answer,) = rest
    assert answer["id"] == 1 and answer["result"]["isError"] is False


def test_a_url_that_is_not_a_gateway_url_stops_the_command(tmp_path, reaped):
    for url in (
        "ftp://127.0.0.1:8123",
        "http://user:pw@127.0.0.1:8123",
        "127.0.0.1:8123",
        "http://127.0.0.1:port",
    ):
        done = subprocess.run(
            SERVER + ["--url", url],
            capture_output=True,
            text=True,
            timeout=PATIENCE,
            stdin=subprocess.DEVNULL,
            env={k: v for k, v in os.environ.items() if not k.startswith("PANELIST_")},
        )
        assert done.returncode == 1 and done.stdout == ""
        assert done.stderr.count("\n") == 1 and "is not a gateway URL" in done.stderr
        assert "user:pw" not in done.stderr


def test_a_long_call_reports_progress_until_its_reply_and_never_after(home, gated):
    move_to(home, gated, "fast", "mid", "slow")
    r_in, w_in = os.pipe()
    r_out, w_out = os.pipe()
    with (
        Gateway(make_gateway(home, env={})) as gw,
        os.fdopen(r_in, "rb") as rfile,
        os.fdopen(w_in, "wb") as to_server,
        os.fdopen(w_out, "wb") as wfile,
        os.fdopen(r_out, "rb") as from_server,
    ):
        server = mcp_server.Server(
            mcp_server.connect(gw.url, {}), rfile, wfile, io.StringIO(), progress_every=0.01
        )
        serving = threading.Thread(target=server.serve)
        serving.start()
        lines, reading = reader(from_server)
        send(
            to_server,
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {
                    "name": "ask",
                    "_meta": {"progressToken": "t-1"},
                    "arguments": {"collection": "trio", "prompt": "x"},
                },
            },
        )
        assert gated.wait_arrived("fast", "mid", "slow")
        heard = [json.loads(lines.get(timeout=PATIENCE)) for _ in range(2)]
        gated.open("fast", "mid", "slow")
        while "id" not in heard[-1]:
            heard.append(json.loads(lines.get(timeout=PATIENCE)))
        to_server.close()  # end of stdin: the server returns
        serving.join(PATIENCE)
        assert not serving.is_alive()
        wfile.close()  # the server's end of its stdout: whatever it wrote after is still read
        reading.join(PATIENCE)
        after = []
        while (line := lines.get(timeout=PATIENCE)) is not None:
            after.append(line)
    *progress, reply = heard
    assert reply["id"] == 1 and reply["result"]["isError"] is False
    assert len(progress) >= 2 and after == []
    assert {p["method"] for p in progress} == {"notifications/progress"}
    assert {p["params"]["progressToken"] for p in progress} == {"t-1"}
    ticks = [p["params"]["progress"] for p in progress]
    assert ticks == sorted(set(ticks))  # growing with every notification


def test_a_call_waiting_for_a_worker_hears_progress_until_its_reply(home, gated):
    move_to(home, gated, "fast", "mid", "slow")
    r_in, w_in = os.pipe()
    r_out, w_out = os.pipe()
    with (
        Gateway(make_gateway(home, env={})) as gw,
        os.fdopen(r_in, "rb") as rfile,
        os.fdopen(w_in, "wb") as to_server,
        os.fdopen(w_out, "wb") as wfile,
        os.fdopen(r_out, "rb") as from_server,
    ):
        server = mcp_server.Server(
            mcp_server.connect(gw.url, {}),
            rfile,
            wfile,
            io.StringIO(),
            progress_every=0.01,
            calls=1,
        )
        serving = threading.Thread(target=server.serve)
        serving.start()
        lines, reading = reader(from_server)
        ask = {"name": "ask", "arguments": {"collection": "trio", "prompt": "x"}}
        send(to_server, {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": ask})
        assert gated.wait_arrived("fast", "mid", "slow")  # the one worker is busy with it
        send(
            to_server,
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": dict(ask, _meta={"progressToken": "second"}),
            },
        )
        heard = [strict(lines.get(timeout=PATIENCE)) for _ in range(2)]
        gated.open("fast", "mid", "slow")
        to_server.close()  # the end of stdin: both calls are still answered
        serving.join(PATIENCE)
        assert not serving.is_alive()
        wfile.close()
        reading.join(PATIENCE)
        while (line := lines.get(timeout=PATIENCE)) is not None:
            heard.append(strict(line))
    replies = [m for m in heard if "id" in m]
    assert sorted(r["id"] for r in replies) == [1, 2]
    assert all(r["result"]["isError"] is False for r in replies)
    last = heard.index(next(r for r in replies if r["id"] == 2))
    progress = [m for m in heard if "id" not in m]
    assert all(heard.index(p) < last for p in progress)  # none after the reply
    assert {p["params"]["progressToken"] for p in progress} == {"second"}
    assert "ask waiting for one of 1 running calls" in progress[0]["params"]["message"]
    ticks = [p["params"]["progress"] for p in progress]
    assert ticks == sorted(set(ticks))


def test_calls_at_once_must_be_a_small_whole_number(reaped):
    for given in ("0", "65", "many"):
        done = subprocess.run(
            SERVER + ["--calls", given],
            capture_output=True,
            text=True,
            timeout=PATIENCE,
            stdin=subprocess.DEVNULL,
        )
        assert done.returncode == 2 and done.stdout == ""
        assert "give a whole number from 1 to 64" in done.stderr


def test_a_reply_json_cannot_carry_becomes_an_internal_error_not_a_broken_line(reaped):
    from http.server import BaseHTTPRequestHandler, HTTPServer

    class NotQuiteAGateway(BaseHTTPRequestHandler):
        def do_GET(self):  # Python's encoder writes NaN; a gateway of another make might too
            body = b'{"data": [{"id": "bench/odd", "together": {"context_window": NaN}}]}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    with HTTPServer(("127.0.0.1", 0), NotQuiteAGateway) as odd:
        serving = threading.Thread(target=odd.serve_forever, args=(0.05,))
        serving.start()
        try:
            with Raw({"PANELIST_URL": f"http://127.0.0.1:{odd.server_port}"}) as raw:
                reply = raw.request(1, "tools/call", {"name": "list_collections"})
                assert raw.request(2, "ping")["result"] == {}
                assert raw.finish() == []
        finally:
            odd.shutdown()
            serving.join(PATIENCE)
    assert reply["error"]["code"] == -32603 and "writing the reply" in reply["error"]["message"]
    assert "Out of range float values are not JSON compliant" in raw.err
