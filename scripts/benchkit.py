"""What the benchmark scripts share: percentiles, a process's CPU and memory from ``/proc``, a
child process that prints where it listens (``Child``), and a keep-alive load client
(``Client``) that asks for panels, plain or streamed. It measures; it asserts nothing.
"""

from __future__ import annotations

import http.client
import json
import math
import os
import re
import resource
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parent.parent
TICKS = os.sysconf("SC_CLK_TCK")


# -- small helpers ------------------------------------------------------------------------------
def pct(values, q: float):
    """Nearest-rank percentile (q in 0..100) of a list; None when empty."""
    if not values:
        return None
    xs = sorted(values)
    return xs[max(0, min(len(xs) - 1, math.ceil(q / 100 * len(xs)) - 1))]


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def proc_cpu(pid: int) -> float:
    """CPU seconds (user + system) a process used so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def proc_mem(pid: int) -> dict:
    """VmHWM (peak RSS) and VmRSS of a process, in MB."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(("VmHWM:", "VmRSS:")):
                name, kb = line.split()[:2]
                out[name[:-1]] = round(int(kb) / 1024, 1)
    return out


def self_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


class Child:
    """A process of ours whose first stdout line says where it listens."""

    def __init__(self, name: str, argv: list[str], workdir: Path, env: dict | None = None):
        """``env``: the child's whole environment (None: this process's)."""
        self.name = name
        self.stderr_path = workdir / f"{name}.stderr"
        self.t_spawn = time.perf_counter()
        with open(self.stderr_path, "ab") as err:
            self.proc = subprocess.Popen(
                argv,
                stdout=subprocess.PIPE,
                stderr=err,
                stdin=subprocess.DEVNULL,
                cwd=ROOT,
                env=env,
            )
        assert self.proc.stdout is not None  # stdout=PIPE above
        self.stdout: IO[bytes] = self.proc.stdout
        self.pid = self.proc.pid
        self.first_line = self._first_line(timeout=300)
        self.t_line = time.perf_counter()

    def _first_line(self, timeout: float) -> str:
        ready, _, _ = select.select([self.stdout], [], [], timeout)
        line = self.stdout.readline().decode() if ready else ""
        if not line:
            self.stop()
            raise RuntimeError(
                f"{self.name} printed nothing; its stderr ({self.stderr_path}):\n"
                + self.stderr_tail()
            )
        return line.strip()

    def stderr_tail(self, n: int = 20) -> str:
        try:
            return "\n".join(self.stderr_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def stop(self) -> int | None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.stdout.close()
        return self.proc.returncode


def url_of(line: str) -> tuple[str, int]:
    m = re.search(r"http://([^/:\s]+):(\d+)", line)
    if not m:
        raise RuntimeError(f"no URL in {line!r}")
    return m.group(1), int(m.group(2))


# -- the load generator -------------------------------------------------------------------------
class Client:
    """One keep-alive connection that asks the gateway for panels."""

    def __init__(self, host: str, port: int, body: bytes):
        self.host, self.port = host, port
        # the guard answers only a loopback Host that names the port, and JSON-typed POSTs
        self.headers = {
            "Host": host_header(host, port),
            "Content-Type": "application/json",
            "Content-Length": str(len(body)),
        }
        self.body = body
        self.conn: http.client.HTTPConnection | None = None

    def _post(self) -> http.client.HTTPResponse:
        """Send the panel request on the kept connection (opened on first use); its response."""
        if self.conn is None:
            self.conn = http.client.HTTPConnection(self.host, self.port, timeout=120)
        self.conn.request("POST", "/v1/chat/completions", self.body, self.headers)
        return self.conn.getresponse()

    def panel(self) -> tuple[int, bytes, float]:
        """(status, body, seconds) of one panel; status 0 when the connection failed."""
        t0 = time.perf_counter()
        try:
            resp = self._post()
            data = resp.read()
            status = resp.status
            if resp.will_close:
                self.close()
        except (OSError, http.client.HTTPException) as exc:
            self.close()
            return 0, repr(exc).encode(), time.perf_counter() - t0
        return status, data, time.perf_counter() - t0

    def stream(self) -> dict:
        """One ``stream: true`` panel, read as it arrives (``read1``: at most one socket read,
        never waiting for the whole body). Times in seconds from just before the request is
        sent: ``head`` (status line and headers), ``role`` (the role-only first chunk),
        ``first_text`` (the first chunk whose delta.content holds a seat section), ``end``
        (``[DONE]``); ``bench`` from the final chunk; ``error`` when something went wrong."""
        out: dict[str, Any] = {
            "status": 0,
            "head": None,
            "role": None,
            "first_text": None,
            "end": None,
            "texts": 0,
            "bench": None,
            "error": "",
        }
        t0 = time.perf_counter()
        try:
            resp = self._post()
            out["head"] = time.perf_counter() - t0
            out["status"] = resp.status
            if resp.status != 200:
                out["error"] = resp.read()[:300].decode(errors="replace")
                self.close()
                return out
            buf = b""
            while out["end"] is None:
                data = resp.read1(65536)
                now = time.perf_counter() - t0
                if not data:
                    out["error"] = "the stream ended before [DONE]"
                    break
                buf += data
                while b"\n\n" in buf:
                    event, buf = buf.split(b"\n\n", 1)
                    self._event(event.decode(), now, out)
            resp.read()  # the terminating zero-length chunk, so the connection can be reused
            if resp.will_close:
                self.close()
        except (OSError, http.client.HTTPException, ValueError) as exc:
            self.close()
            out["error"] = repr(exc)
        return out

    @staticmethod
    def _event(event: str, now: float, out: dict) -> None:
        data = "".join(line[6:] for line in event.split("\n") if line.startswith("data: "))
        if not data:  # a ': seats still working' comment
            return
        if data == "[DONE]":
            out["end"] = now
            return
        chunk = json.loads(data)
        if "error" in chunk:
            out["error"] = json.dumps(chunk["error"])[:300]
            return
        delta = chunk["choices"][0]["delta"]
        if "role" in delta and out["role"] is None:
            out["role"] = now
        if "## Seat" in (delta.get("content") or ""):
            out["texts"] += 1
            if out["first_text"] is None:
                out["first_text"] = now
        if "bench" in chunk:
            out["bench"] = chunk["bench"]

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def host_header(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
