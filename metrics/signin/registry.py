"""The sign-ins a dashboard server has started (``SignIns``): each waits for its callback on a
thread of its own, and the dashboard reads how it went by id.

Invariants: at most ``MAX_WAITING`` sign-ins wait at once, one per endpoint (each holds a
loopback port and a thread until its callback, its timeout or a cancel); a finished one is kept
for reading until ``KEEP`` newer ones push it out. What a sign-in shows is its id, endpoint,
provider, state, the auth URL while it waits, the error message or the result: never the key.
``close`` cancels every waiting sign-in and joins its thread.
"""

from __future__ import annotations

import secrets
import threading
import traceback
from collections import OrderedDict
from typing import Any

from panelist.metrics.errors import Cancelled, Conflict, NotFound, PanelistError
from panelist.metrics.home import Home
from panelist.metrics.signin.flow import SignIn

MAX_WAITING = 4
KEEP = 32


class _Job:
    def __init__(self, signin: SignIn, name: str):
        self.id = "s" + secrets.token_hex(8)
        self.signin = signin
        self.name = name
        self.state = "waiting"
        self.error: str | None = None
        self.result: dict | None = None
        self.thread = threading.Thread(target=self._run, name=f"signin-{self.id}", daemon=True)

    def _run(self) -> None:
        try:
            self.result = self.signin.finish()
            self.state = "done"
        except PanelistError as exc:
            self.error = exc.message
            self.state = "cancelled" if isinstance(exc, Cancelled) else "failed"
        except Exception as exc:  # noqa: BLE001 - a thread's failure must be readable by its id
            traceback.print_exc()
            self.error = (
                f"the sign-in failed unexpectedly ({type(exc).__name__}); nothing "
                "was stored; start it again"
            )
            self.state = "failed"

    def public(self) -> dict:
        shown: dict[str, Any] = {
            "id": self.id,
            "endpoint": self.name,
            "provider": self.signin.provider.name,
            "state": self.state,
            "error": self.error,
            "result": self.result,
        }
        if self.state == "waiting":
            shown.update(
                auth_url=self.signin.auth_url,
                port=self.signin.listener.port,
                timeout=self.signin.timeout,
            )
        return shown


class SignIns:
    """One server's sign-ins (see the module docstring)."""

    def __init__(self, home: Home):
        self.home = home
        self._lock = threading.Lock()
        self._jobs: OrderedDict[str, _Job] = OrderedDict()

    def start(
        self,
        name: str,
        provider: str,
        *,
        port: int = 0,
        timeout: float = 300.0,
        by: str | None = None,
    ) -> dict:
        with self._lock:
            waiting = [j for j in self._jobs.values() if j.state == "waiting"]
            if any(j.name == name for j in waiting):
                raise Conflict(
                    f"a sign-in for endpoint '{name}' is already waiting; finish it "
                    "in the browser, or cancel it first",
                    code="in_progress",
                )
            if len(waiting) >= MAX_WAITING:
                raise Conflict(
                    f"{MAX_WAITING} sign-ins are already waiting; finish or cancel one first",
                    code="in_progress",
                )
            job = _Job(SignIn(self.home, name, provider, port=port, timeout=timeout, by=by), name)
            self._jobs[job.id] = job
            while len(self._jobs) > KEEP:
                oldest = next((k for k, j in self._jobs.items() if j.state != "waiting"), None)
                if oldest is None:
                    break
                del self._jobs[oldest]
        job.thread.start()
        return job.public()

    def _job(self, job_id: str) -> _Job:
        with self._lock:
            job = self._jobs.get(job_id)
        if job is None:
            raise NotFound(
                f"no sign-in '{job_id}' on this server; start one with POST /api/endpoints/connect"
            )
        return job

    def get(self, job_id: str) -> dict:
        return self._job(job_id).public()

    def cancel(self, job_id: str) -> dict:
        job = self._job(job_id)
        job.signin.cancel()
        job.thread.join()
        return job.public()

    def close(self) -> None:
        with self._lock:
            jobs = list(self._jobs.values())
        for job in jobs:
            job.signin.cancel()
        for job in jobs:
            job.thread.join()
