"""Benchmark the wire formats beside chat. It prints figures; it asserts nothing.

    python scripts/bench_wire.py [--requests N]

1. The adapters' own cost, in-process: translating a typical request (system prompt, a few
   turns, a tool) into a chat body and a three-seat reply back, and making a stream's events,
   per format, in microseconds (median of many runs).
2. Added latency end to end, concurrency 1, three 0 ms seats on the simulated upstream: client
   time minus the slowest seat's own ``seconds`` (from ``bench``), p50 and p95, for
   ``/v1/chat/completions``, ``/v1/responses`` and ``/v1/messages``, plain and streamed. The
   gateway and the simulator run in this process (one GIL), so compare the formats with each
   other rather than with ``bench_gateway.py``'s figures.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if not __package__:
    sys.path.insert(0, str(ROOT))
    import _bootstrap  # noqa: E401,E702,F401

import argparse
import http.client
import json
import statistics
import tempfile
import threading
import time

from panelist.gateway import make_gateway
from panelist.metrics.wire import messages, responses
from panelist.metrics.roster.collection import Collections
from panelist.metrics.home import open_home
from panelist.metrics.roster.roster import Roster
from panelist.metrics.upstream.sim import SimUpstream

PROMPT = "Review this function for bugs: " + "def f(x): return 1 / x  # " * 20
SCHEMA = {"type": "object", "properties": {"number": {"type": "string"}}, "required": ["number"]}
MESSAGES = {
    "model": "bench/trio",
    "max_tokens": 512,
    "system": "You review code.",
    "tools": [{"name": "lookup", "description": "Look up", "input_schema": SCHEMA}],
    "messages": [
        {"role": "user", "content": PROMPT},
        {"role": "assistant", "content": [{"type": "text", "text": "Looking."}]},
        {"role": "user", "content": [{"type": "text", "text": "And now?"}]},
    ],
}
RESPONSES = {
    "model": "bench/trio",
    "instructions": "You review code.",
    "max_output_tokens": 512,
    "tools": [{"type": "function", "name": "lookup", "parameters": SCHEMA}],
    "input": [
        {"role": "user", "content": PROMPT},
        {"role": "assistant", "content": [{"type": "output_text", "text": "Looking."}]},
        {"role": "user", "content": "And now?"},
    ],
}
CHAT = {
    "model": "bench/trio",
    "max_tokens": 512,
    "messages": [
        {"role": "system", "content": "You review code."},
        {"role": "user", "content": PROMPT},
        {"role": "assistant", "content": "Looking."},
        {"role": "user", "content": "And now?"},
    ],
}


def a_reply() -> dict:
    """A three-seat all-mode reply as the panel makes it (about 2 KB of markdown)."""
    seats = [
        {
            "call": f"p1.member{i}",
            "seat": "member",
            "alias": f"m{i}",
            "status": "ok",
            "seconds": 0.01,
            "answer": "An answer. " * 40,
            "error": "",
            "tokens": {},
        }
        for i in (1, 2, 3)
    ]
    return {
        "id": "chatcmpl-p1",
        "object": "chat.completion",
        "created": 1,
        "model": "bench/trio",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": "## Seat\n\n" + "An answer. " * 120},
            }
        ],
        "usage": {"prompt_tokens": 300, "completion_tokens": 120, "total_tokens": 420},
        "bench": {"panel": "p1", "seats": seats},
    }


def micro(fn, runs: int = 2000) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e6


def adapters() -> None:
    reply = a_reply()
    print("1. adapter cost (median µs): request -> chat body, reply -> format, stream events")
    print(
        f"   messages:  {micro(lambda: messages.to_chat(MESSAGES)):7.1f}"
        f"  {micro(lambda: messages.from_chat(reply, 'p1')):7.1f}"
        f"  {micro(lambda: messages.Events('p1', 'bench/trio').closing(reply)):7.1f}"
    )
    print(
        f"   responses: {micro(lambda: responses.to_chat(RESPONSES)):7.1f}"
        f"  {micro(lambda: responses.from_chat(reply, RESPONSES, 'p1')):7.1f}"
        f"  {micro(lambda: responses.Events(RESPONSES, 'p1', 'bench/trio', 1).closing(reply)):7.1f}"
    )  # noqa: E501


def ask(conn, port: int, path: str, body: dict) -> tuple[float, float]:
    """Client seconds for one request, and the slowest seat's own seconds."""
    raw = json.dumps(body).encode()
    t0 = time.perf_counter()
    conn.request(
        "POST", path, raw, {"Host": f"127.0.0.1:{port}", "Content-Type": "application/json"}
    )
    resp = conn.getresponse()
    data = resp.read()
    spent = time.perf_counter() - t0
    if resp.status != 200:
        raise RuntimeError(f"{path}: {resp.status} {data[:200]!r}")
    text = data.decode()
    if body.get("stream"):  # the bench object rides on the last event that carries one
        marker = text.rindex('"bench": ')
        bench = json.JSONDecoder().raw_decode(text, marker + len('"bench": '))[0]
    else:
        bench = json.loads(text)["bench"]
    return spent, max(s["seconds"] for s in bench["seats"])


def end_to_end(requests: int) -> None:
    with SimUpstream({"m1": {}, "m2": {}, "m3": {}}) as sim, tempfile.TemporaryDirectory() as tmp:
        home = open_home(Path(tmp) / "data")
        roster = Roster(home)
        roster.add_endpoint("sim", sim.url)
        for alias in ("m1", "m2", "m3"):
            roster.add_model(alias, "sim", family=alias, context=100_000)
        Collections(home).save(roster.view(), "trio", ["m1", "m2", "m3"])
        path = home.file("gateway.json")
        path.write_text(json.dumps(dict(json.loads(path.read_text()), max_explorers=0)))
        server = make_gateway(home, env={})
        thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
        thread.start()
        try:
            conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
            cases = [
                ("chat", "/v1/chat/completions", CHAT),
                ("responses", "/v1/responses", RESPONSES),
                ("messages", "/v1/messages", MESSAGES),
            ]
            print(
                f"2. added latency, concurrency 1, three 0 ms seats, {requests} requests each "
                "(ms: p50 / p95)"
            )
            for stream in (False, True):
                for name, route, body in cases:
                    body = dict(body, stream=stream)
                    for _ in range(10):  # warm-up
                        ask(conn, server.port, route, body)
                    added = sorted(
                        spent - seat
                        for spent, seat in (
                            ask(conn, server.port, route, body) for _ in range(requests)
                        )
                    )
                    p50 = added[len(added) // 2] * 1000
                    p95 = added[int(len(added) * 0.95)] * 1000
                    print(
                        f"   {name:10s} {'stream' if stream else 'plain ':6s} "
                        f"{p50:6.2f} / {p95:6.2f}"
                    )
            conn.close()
        finally:
            server.close()
            thread.join(10)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200)
    args = parser.parse_args(argv)
    adapters()
    end_to_end(args.requests)
    return 0


if __name__ == "__main__":
    sys.exit(main())
