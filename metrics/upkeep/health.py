"""Health: probe models, retire the ones that keep failing hard, restore them when they answer.

A probe is one tiny call per model, made through the seats core and admission like any seat (a
set of every probe: one at a time per endpoint, the endpoints at once), and recorded as its seat
record (role ``probe``) in a ``"probe"`` line of the gateway's evidence log
(``Ledger.record_probe``). The dashboard's endpoint Test (``ask_endpoint``) is logged the same way,
with role ``test``, and never counted.

Invariants:

* Hard failures are decided from the error kind alone (``HARD_KINDS``: the key refused, the
  model or URL not found), never from an upstream's words. Transient ones (rate limit, server
  error, connection, timeout) and every other kind never retire: they neither add to nor clear
  a model's run of hard failures. An answer (a probe's or a gateway seat's) clears it.
* Each model's run of consecutive hard failures is counted from probe lines AND gateway seat
  lines, each line once, O(1) per line: ``runs/health.json`` keeps the evidence log's inode, the
  byte offset counted up to, the run per alias and the models health retired. It is updated
  under its own ``flock``, so two probing processes never count a line twice. Without the file,
  counting starts at the log's current end (old failures are not held against a model).
* A model whose run reaches ``retire_after`` (``config/gateway.json``, default 3) is retired
  with the reason (``Roster.retire``, by ``health``) and a ``retired`` alert. A probe answer
  from a model health retired restores it (``service.restore``) with a ``restored`` alert. A
  model retired by a person is never restored by a probe: health only restores what it retired,
  and forgets a model once anyone has put it back in service.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

from panelist.metrics.seats import record as seatrecord
from panelist.metrics.upkeep import retirement
from panelist.metrics.store import configfile, jsonl, jsonwire
from panelist.metrics.alerts import Alerts
from panelist.metrics.errors import ConfigInvalid, NotFound, UpstreamError
from panelist.metrics.home import Home
from panelist.metrics.ledger.index import failure_kind
from panelist.metrics.ledger.ledger import Ledger
from panelist.metrics.roster.roster import Endpoint, Model, Roster
from panelist.metrics.seats import ANSWERED, CallFailed, SeatCall, SeatResult, Seats

HARD_KINDS = frozenset({"auth", "not_found"})
RETIRE_AFTER = 3
PROBE_MESSAGES = [{"role": "user", "content": "Reply with the single word OK."}]
PROBE_PARAMS = {"max_tokens": 8, "temperature": 0}
TEST_MESSAGES = [{"role": "user", "content": "Say OK."}]
TEST_PARAMS = {"max_tokens": 1}
BY = "health"
SCAN_BACK = 8 * 1024 * 1024


def retire_after(home: Home) -> int:
    """``retire_after`` from gateway.json: hard failures in a row that retire a model."""
    value = configfile.read(home.file("gateway.json")).get("retire_after", RETIRE_AFTER)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigInvalid(
            "gateway.json: retire_after must be a whole number of 1 or more "
            f"(hard failures in a row before a model is retired), not {value!r}"
        )
    return value


@dataclass
class Probe:
    """One probe's outcome and what health did about it ("retired", "restored" or "")."""

    alias: str
    endpoint: str
    status: str
    seconds: float
    error_kind: str = ""
    error: str = ""
    action: str = ""

    def public(self) -> dict:
        return dict(self.__dict__)


def _retired_by(changes: Path, alias: str) -> str | None:
    """Who made the newest change that retired ``alias``, read from the end of the roster's
    change log (at most ``SCAN_BACK`` bytes: restores are rare, the log only grows)."""
    what = f"model {alias}"
    for rec in jsonl.backward(changes, within=SCAN_BACK):
        if rec.get("what") != what:
            continue
        old, new = rec.get("old") or {}, rec.get("new") or {}
        if (
            isinstance(new, dict)
            and new.get("retired")
            and not (isinstance(old, dict) and old.get("retired"))
        ):
            return rec.get("by")
    return None


class ProbeLog:
    """The seats core's log for probes and endpoint tests: each result's seat record as a
    ``"probe"`` line of the evidence log. A call cut by ``cancel`` (a closing server) says
    nothing about its model, and is not written."""

    def __init__(self, ledger: Ledger, cancel: threading.Event | None = None):
        self.ledger, self.cancel = ledger, cancel

    def write(self, result: SeatResult) -> None:
        if self.cancel is not None and self.cancel.is_set() and not result.answered:
            return
        self.ledger.record_probe(seatrecord.fields(result))


def ask_endpoint(
    seats: Seats, ledger: Ledger, endpoint: Endpoint, served: str, *, timeout: float
) -> SeatResult:
    """The dashboard's Test of an endpoint not (yet) on the roster: one tiny chat with its
    ``served`` model, through admission like a probe and logged like one (role ``test``, no
    alias: health never counts it). Returns the answered result; raises the error the call
    ended with (the upstream's own, when it was one)."""
    call = SeatCall(
        label=f"test.{endpoint.name}",
        role="test",
        model=Model(alias="", endpoint=endpoint.name, served=served, family=""),
        messages=TEST_MESSAGES,
        params=dict(TEST_PARAMS),
        timeout=timeout,
        wait_in_timeout=True,
        endpoint=endpoint,
    )
    # nothing is learned of a model on no roster, and its Retry-After pauses no endpoint (the
    # URL tried may not be that of the endpoint of the same name)
    (result,) = seats.run(
        [call], timeout=timeout, log=ProbeLog(ledger), learn=lambda model, exc: None, max_pause=0
    )
    if result.answered:
        return result
    if isinstance(result.raised, UpstreamError):
        raise result.raised
    raise CallFailed(result)


class Health:
    """Health of one data folder's roster; ``close`` it after. In a server, give it the
    server's seats and ledger (``of``): a ledger of its own would load the index again."""

    @classmethod
    def of(cls, panels) -> "Health":
        return cls(panels.home, seats=panels.seats, ledger=panels.ledger)

    def __init__(
        self,
        home: Home,
        *,
        seats: Seats | None = None,
        admission=None,
        ledger: Ledger | None = None,
    ):
        self.home = home
        self.roster = Roster(home)
        self._own_ledger = ledger is None
        self.ledger = ledger if ledger is not None else Ledger.of_home(home)
        self.alerts = Alerts(home)
        self.state_path = home.health_state
        self._own_seats = seats is None
        if seats is None:
            from panelist.metrics.upstream.admission import Admission

            self._admission = admission if admission is not None else Admission.of_home(home)
            seats = Seats(self.roster, admission=self._admission, thread_name="probe")
        else:
            self._admission = None
        self.seats = seats
        self._lock = threading.Lock()

    # -- probing -----------------------------------------------------------------------------------
    def probe(
        self,
        aliases: list[str] | None = None,
        *,
        timeout: float = 30.0,
        wait: float = 30.0,
        dry_run: bool = False,
        cancel: threading.Event | None = None,
    ) -> list[Probe]:
        """Probe ``aliases`` (default: every model on the roster, retired ones included, since a
        probe is how they come back), one at a time per endpoint and the endpoints at once; then
        count and act on what was logged. Probes come back in the order of ``aliases``.
        ``dry_run``: log nothing and change nothing; each probe's action says what would be
        done (``would_retire`` / ``would_restore``) from the runs counted so far. ``cancel``
        (a closing server): the probes in flight are cut and neither they nor the models not
        yet probed are logged or returned; a cut probe says nothing about the model."""
        models = self.roster.view().models
        names = list(models) if not aliases else list(dict.fromkeys(aliases))
        unknown = [a for a in names if a not in models]
        if unknown:
            raise NotFound(f"unknown model(s) {', '.join(unknown)}; see `panelist model list`")
        actions = {} if dry_run else self.sweep()  # so these probes are counted after
        calls = [
            SeatCall(
                label=f"probe.{alias}",
                role="probe",
                model=models[alias],
                messages=PROBE_MESSAGES,
                params=dict(PROBE_PARAMS),
                timeout=timeout,
                wait=wait,
            )
            for alias in names
        ]
        # one probe at a time per endpoint, the endpoints at once; each by its own wait+timeout
        ended = self.seats.run(
            calls, cancel=cancel, parallel=1, log=None if dry_run else ProbeLog(self.ledger, cancel)
        )
        probes = []
        for alias, r in zip(names, ended):
            if cancel is not None and cancel.is_set() and not r.answered:
                continue  # cut, or never begun: it says nothing about the model
            probes.append(
                Probe(
                    alias,
                    models[alias].endpoint,
                    "ok" if r.answered else r.status,
                    r.seconds,
                    r.error_kind,
                    r.error,
                )
            )
        actions.update(self._would(probes, models) if dry_run else self.sweep())
        for p in probes:
            p.action = actions.get(p.alias, "")
        return probes

    def _would(self, probes: list[Probe], models: dict) -> dict[str, str]:
        """What counting these probes would do, read from the state without writing it."""
        limit = retire_after(self.home)
        with self._lock, self._locked():
            state = self._load()
        out = {}
        for p in probes:
            if p.status == "ok":
                if p.alias in state["retired"] and models[p.alias].retired:
                    out[p.alias] = "would_restore"
            elif (
                (p.error_kind or p.status) in HARD_KINDS
                and not models[p.alias].retired
                and state["runs"].get(p.alias, 0) + 1 >= limit
            ):
                out[p.alias] = "would_retire"
        return out

    # -- counting ----------------------------------------------------------------------------------
    def sweep(self) -> dict[str, str]:
        """Count the evidence lines appended since the last sweep; retire and restore as they
        say. Returns {alias: "retired" | "restored"} for what this sweep changed."""
        limit = retire_after(self.home)
        with self._lock, self._locked():
            state = self._load()
            views = self.roster.view().models
            # a model anyone put back in service is no longer health's to restore
            state["retired"] = {
                a: why for a, why in state["retired"].items() if a in views and views[a].retired
            }
            actions: dict[str, str] = {}
            tail = self.ledger.evidence_after(state["offset"])
            for _, rec in tail.read():
                self._count(rec, state, limit, actions)
            state["offset"] = tail.offset
            self._save(state)
        return actions

    def _count(self, rec: dict, state: dict, limit: int, actions: dict) -> None:
        kind, alias = rec.get("kind"), rec.get("alias")
        if kind not in ("probe", "seat") or not isinstance(alias, str):
            return
        if kind == "probe" and rec.get("role", "probe") != "probe":
            return  # an endpoint's Test: its model is on no roster
        status = rec.get("status")
        if kind == "probe":
            failed = None if status in ANSWERED else (rec.get("error_kind") or status)
        else:
            failed = failure_kind(status, rec.get("error"))
        runs = state["runs"]
        if failed is None:
            runs.pop(alias, None)
            if kind == "probe" and alias in state["retired"]:
                self._restore(alias, state, actions)
            return
        if failed not in HARD_KINDS:
            return  # transient or unclear: says nothing about whether the model is there
        runs[alias] = runs.get(alias, 0) + 1
        if runs[alias] >= limit:
            self._retire(alias, failed, runs[alias], state, actions)

    def _retire(self, alias: str, kind: str, run: int, state: dict, actions: dict) -> None:
        reason = f"{run} hard failures in a row, the last one '{kind}'"
        try:
            changed = retirement.retire(
                self.roster,
                self.alerts,
                alias,
                by=BY,
                reason=reason,
                error_kind=kind,
                message=f"{alias} was retired: {reason}; fix its endpoint's key or served id, "
                f"then Probe on its model page (or `panelist probe {alias}`) "
                "restores it once it answers",
            )
        except NotFound:
            return  # removed from the roster meanwhile
        if not changed:
            return  # already retired, by health or by hand: nothing to take over
        state["retired"][alias] = reason
        actions[alias] = "retired"

    def _restore(self, alias: str, state: dict, actions: dict) -> None:
        reason = state["retired"].pop(alias)
        if _retired_by(self.roster.path.with_name("changes.jsonl"), alias) != BY:
            return  # put back and retired again by a person since: theirs to restore
        try:
            retirement.restore(
                self.roster,
                self.ledger,
                alias,
                by=BY,
                alerts=self.alerts,
                message=f"{alias} answered a probe and is back in service",
                reason=reason,
            )
        except NotFound:
            return  # removed from the roster meanwhile
        actions[alias] = "restored"

    # -- the state file ----------------------------------------------------------------------------
    def _locked(self):
        return configfile.flocked(self.state_path.with_name("health.lock"))

    def _load(self) -> dict:
        ino, size = self.ledger.evidence_end()
        fresh = {"ino": ino, "offset": size, "runs": {}, "retired": {}}
        try:
            data = jsonwire.loads(self.state_path.read_bytes())
        except (FileNotFoundError, ValueError):
            return fresh
        if (
            not isinstance(data, dict)
            or not isinstance(data.get("runs"), dict)
            or not isinstance(data.get("retired"), dict)
            or not isinstance(data.get("offset"), int)
        ):
            return fresh
        if data.get("ino") != ino or data["offset"] > size:
            # another evidence log: its lines were never counted, but what health retired stays
            return dict(fresh, offset=0, retired=data["retired"])
        return data

    def _save(self, state: dict) -> None:
        configfile.write_atomic(self.state_path, state)

    def close(self) -> None:
        if self._own_seats:
            self.seats.close()
            if self._admission is not None:
                self._admission.close()
        if self._own_ledger:
            self.ledger.close()
        self.alerts.close()
