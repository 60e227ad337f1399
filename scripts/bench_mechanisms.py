"""Benchmark three of the project's own mechanisms against the standard library's way of doing
the same work, on the same bytes, in this process. It prints figures; it asserts nothing.

    python scripts/bench_mechanisms.py [--rounds N] [--json]

1. **Response reader**: one upstream reply (a 200 with eight header fields and a ~1.5 KB chat
   completion body) read from a socket pair by ``upstream.http11.Wire`` (head, then body) and by
   ``http.client.HTTPResponse`` (``begin`` then ``read``).
2. **Request head**: one gateway request head (a POST with nine header fields) parsed by the
   server's ``Handler.parse_request`` and by the one it overrides (``http.server``'s), each
   reading from an in-memory file, with nothing sent back.
3. **JSON encoding**: one seat's evidence line (a dict of about twenty fields) encoded by
   ``store.jsonwire.dumps`` (one encoder kept per set of options) and by ``json.dumps`` with the
   same options (a new encoder per call).

Each figure is the fastest of ``--rounds`` timed batches (default 15) of 2,000 operations, in
microseconds per operation, and the ratio of the two: the fastest batch is the one other work
on the machine disturbed least, so it is the steadiest figure on a busy machine. Only the CPU of the step itself is
measured: no thread, no network, no disk. Figures vary with the machine and its load.
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
import io
import json
import socket
import time
from typing import Any, Callable

from panelist.metrics.server.front.handler import Handler
from panelist.metrics.store import jsonwire
from panelist.metrics.upstream.http11 import Wire

BATCH = 2000
ANSWER = json.dumps(
    {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1764720000,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": "The loop ends one early. " * 50},
            }
        ],
        "usage": {"prompt_tokens": 412, "completion_tokens": 230, "total_tokens": 642},
    }
).encode()
REPLY = (
    b"HTTP/1.1 200 OK\r\ndate: Thu, 03 Dec 2026 18:00:00 GMT\r\n"
    b"content-type: application/json\r\ncontent-length: "
    + str(len(ANSWER)).encode()
    + b"\r\nconnection: keep-alive\r\nx-request-id: req_0123456789abcdef\r\n"
    b"openai-processing-ms: 412\r\ncache-control: no-cache\r\nserver: upstream\r\n\r\n" + ANSWER
)
HEAD = (
    b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:8123\r\n"
    b"Content-Type: application/json\r\nContent-Length: 640\r\nAccept: application/json\r\n"
    b"User-Agent: OpenAI/Python 1.55.0\r\nAuthorization: Bearer pk_0123456789abcdef\r\n"
    b"X-Stainless-Lang: python\r\nAccept-Encoding: gzip, deflate\r\n"
    b"Connection: keep-alive\r\n\r\n"
)
LINE = {
    "v": 1,
    "ts": "2026-12-03T18:00:00.123456Z",
    "type": "seat",
    "panel": "p20261203-42",
    "call": "p20261203-42.member2",
    "seat": "member2",
    "role": "member",
    "alias": "steady",
    "served": "vendor/steady-1",
    "endpoint": "cloud",
    "family": "steady",
    "collection": "reviewers",
    "shape": "review",
    "status": "ok",
    "seconds": 1.234,
    "error": None,
    "error_kind": None,
    "tokens": {"prompt_tokens": 412, "completion_tokens": 230, "total_tokens": 642},
    "key": "local",
    "finish_reason": "stop",
}


def per_op(step: Callable[[], object], rounds: int) -> float:
    """Microseconds per call of ``step`` in the fastest of ``rounds`` batches."""
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(BATCH):
            step()
        times.append((time.perf_counter() - start) / BATCH * 1e6)
    return min(times)


def readers(rounds: int) -> tuple[float, float]:
    ours_end, theirs_end = socket.socketpair()
    server, client = socket.socketpair()

    def ours() -> None:
        ours_end.sendall(REPLY)
        wire = Wire(theirs_end)
        body, _ = wire.body(wire.head())
        assert len(body) == len(ANSWER)

    def stdlib() -> None:
        server.sendall(REPLY)
        reply = http.client.HTTPResponse(client)
        reply.begin()
        assert len(reply.read()) == len(ANSWER)

    try:
        return per_op(ours, rounds), per_op(stdlib, rounds)
    finally:
        for s in (ours_end, theirs_end, server, client):
            s.close()


class _Quiet:
    """What both parsers need of a handler, and nothing sent anywhere."""

    default_request_version = "HTTP/0.9"
    protocol_version = "HTTP/1.1"

    def send_error(self, code, message=None, explain=None):
        raise AssertionError(f"refused: {code} {message}")


class _OurHead(_Quiet):
    parse_request = Handler.parse_request


# http.server's own parser, reached through the class ours overrides (only the server package
# imports http.server); found at run time, so its attributes are not known statically
_STDLIB: Any = next(c for c in Handler.__mro__[1:] if "parse_request" in vars(c))


class _StdlibHead(_Quiet):
    parse_request = _STDLIB.parse_request
    MessageClass = _STDLIB.MessageClass


def heads(rounds: int) -> tuple[float, float]:
    first, _, rest = HEAD.partition(b"\r\n")

    def run(kind: type) -> Callable[[], None]:
        def step() -> None:
            h = kind()
            h.raw_requestline = first + b"\r\n"
            h.rfile = io.BytesIO(rest + b"\r\n" if not rest.endswith(b"\r\n\r\n") else rest)
            h._consumed = 0
            assert h.parse_request()

        return step

    return per_op(run(_OurHead), rounds), per_op(run(_StdlibHead), rounds)


def encoders(rounds: int) -> tuple[float, float]:
    assert jsonwire.dumps(LINE, separators=(",", ":")) == json.dumps(
        LINE, ensure_ascii=False, separators=(",", ":")
    )
    return (
        per_op(lambda: jsonwire.dumps(LINE, separators=(",", ":")), rounds),
        per_op(lambda: json.dumps(LINE, ensure_ascii=False, separators=(",", ":")), rounds),
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15, help="timed batches per figure")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args()
    figures = {}
    for name, measure in (
        ("response reader", readers),
        ("request head", heads),
        ("JSON encoding", encoders),
    ):
        ours, stdlib = measure(args.rounds)
        figures[name] = {
            "ours_us": round(ours, 2),
            "stdlib_us": round(stdlib, 2),
            "stdlib_over_ours": round(stdlib / ours, 2),
        }
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    print(f"{'step':<18}{'ours µs':>10}{'stdlib µs':>12}{'stdlib / ours':>16}")
    for name, f in figures.items():
        print(
            f"{name:<18}{f['ours_us']:>10.2f}{f['stdlib_us']:>12.2f}{f['stdlib_over_ours']:>15.2f}x"
        )


if __name__ == "__main__":
    main()
