"""The instances ``bench_scale.py`` runs and how its load reaches them: ``Instance``, one gateway
process on its own data folder and the shared database, stopped, killed and started again on its
port; ``RoundRobin``, requests spread over the instances in turn.

Invariants: an instance started again listens on the port it had, and the CPU of its killed
processes still counts in ``cpu``; a connection kept from before a restart is never reused; a
request an instance refused, or that never left on a dead kept connection, moves to the next
instance, while one cut after it was sent is reported as status 0, never sent twice.
"""

from __future__ import annotations

import http.client
import itertools
import signal
import threading
import time
from pathlib import Path

from panelist.scripts.bench_gateway_rig import GATEWAY, PY
from panelist.scripts.benchkit import Child, host_header, proc_cpu, url_of


class Instance:
    """One gateway process on its own data folder; ``kill`` and ``start`` again on its port."""

    def __init__(self, name: str, data: Path, work: Path, url: str, env: dict):
        self.name, self.data, self.work, self.url, self.env = name, data, work, url, env
        self.port = 0
        self.child: Child | None = None
        self.cpu_gone = 0.0  # CPU seconds of the processes killed so far
        self.starts = 0

    def start(self) -> None:
        self.child = Child(
            self.name,
            [
                PY,
                str(GATEWAY),
                "--data",
                str(self.data),
                "--port",
                str(self.port),
                "--database",
                self.url,
            ],
            self.work,
            env=self.env,
        )
        self.port = url_of(self.child.first_line)[1]
        self.starts += 1

    def cpu(self) -> float:
        try:
            return self.cpu_gone + (proc_cpu(self.child.pid) if self.child else 0.0)
        except OSError:
            return self.cpu_gone

    def pause(self, on: bool) -> None:
        """SIGSTOP (``on``) or SIGCONT the instance's process."""
        if self.child is not None:
            self.child.proc.send_signal(signal.SIGSTOP if on else signal.SIGCONT)

    def kill(self) -> None:
        child, self.child = self.child, None
        if child is None:
            raise RuntimeError(f"{self.name} is not running")
        try:
            self.cpu_gone += proc_cpu(child.pid)
        except OSError:
            pass
        child.proc.send_signal(signal.SIGKILL)
        child.proc.wait()
        child.stdout.close()

    def stop(self) -> None:
        if self.child is not None:
            self.child.stop()
            self.child = None


class RoundRobin:
    """Requests spread over the instances in turn; one kept connection per thread and instance."""

    def __init__(self, instances: list[Instance], key: str):
        self.instances = instances
        self.key = key
        self.turn = itertools.count()
        self.local = threading.local()

    def _conn(self, inst: Instance) -> http.client.HTTPConnection:
        conns = self.local.__dict__.setdefault("conns", {})
        conn, starts = conns.get(inst.name, (None, 0))
        if conn is not None and starts != inst.starts:  # kept from before a restart: dead
            conn.close()
            conn = None
        if conn is None:
            conn = http.client.HTTPConnection("127.0.0.1", inst.port, timeout=120)
            conns[inst.name] = (conn, inst.starts)
        return conn

    def _drop(self, inst: Instance) -> None:
        conn, _ = self.local.__dict__.get("conns", {}).pop(inst.name, (None, 0))
        if conn is not None:
            conn.close()

    def send(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        *,
        key: str | None = None,
        at: int | None = None,
    ):
        """``(status, reply, instance index)``; status 0 when the request was cut (the
        instance died with it). A refused connection (an instance down) moves the request to
        the next instance; if every instance refuses, it waits a little and tries again."""
        first = next(self.turn) if at is None else at
        for attempt in itertools.count():
            i = (first + attempt) % len(self.instances)
            inst = self.instances[i]
            if inst.port == 0 or inst.child is None:
                if attempt and attempt % len(self.instances) == 0:
                    time.sleep(0.05)
                continue
            headers = {
                "Host": host_header("127.0.0.1", inst.port),
                "Authorization": f"Bearer {key or self.key}",
            }
            if body is not None:
                headers.update(
                    {"Content-Type": "application/json", "Content-Length": str(len(body))}
                )
            conn = self._conn(inst)
            sent = False
            try:
                conn.request(method, path, body, headers)
                sent = True
                resp = conn.getresponse()
                data = resp.read()
                if resp.will_close:
                    self._drop(inst)
                return resp.status, data, i
            except (OSError, http.client.HTTPException) as exc:  # refused, reset, cut short
                self._drop(inst)
                # refused, or a kept connection found dead before anything was sent: the
                # request never arrived, so it goes to the next instance
                if isinstance(exc, ConnectionRefusedError) or not sent:
                    if attempt and attempt % len(self.instances) == 0:
                        time.sleep(0.05)
                    continue
                return 0, repr(exc).encode(), i
        raise AssertionError("unreachable")
