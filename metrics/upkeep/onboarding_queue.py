"""Onboarding: take models through register → probe → quick suite run → ready, as a queue.

The queue lives in ``runs/onboarding.jsonl``: an append-only log of step transitions, each line
``{"v", "ts", "entry", "alias", ...}``. A ``queued`` line opens an entry (an alias, the endpoint
it was asked for, the quick run's task cap); every later line names one step of it (``register``,
``probe``, ``suite``, ``ready``) and its status (``started``, ``done``, ``skipped``,
``failed``), or one call it sent (``asking`` before it went out, ``asked`` once it ended: see
``onboarding_calls``). The queue is rebuilt by folding the log, following its tail.
``onboarding_worker`` works it.

Invariants:

* Any process may enqueue; reading the queue and appending to it happen under one ``flock``
  (``runs/onboarding.enqueue.lock``), so an alias onboarded by two processes at once gets one
  entry. The folded state is the same in every process.
* An entry ends ``ready`` (with what the quick suite found) or ``failed`` (the step, the failure
  kind and what to do). A later onboard of an alias whose entry ended opens a new entry; one of
  an alias still in the queue returns the entry already there.
* Every call an entry sends is folded into its ``calls`` (by call id: what it was for, the
  tasks it asked, its outcome, None while unknown); none of it is shown by ``public``.
* What is registered is checked when it is enqueued: an alias already on the roster, or a model
  an endpoint serves outside it (registered as ``panelist discover --add`` does). Anything else
  is refused before it reaches the queue.
"""

from __future__ import annotations

import os
import secrets
import threading
import time

from panelist.metrics.store import configfile, jsonl, jsonwire
from panelist.metrics.errors import BadRequest, NotFound
from panelist.metrics.home import Home
from panelist.metrics.roster.roster import Roster

STEPS = ("register", "probe", "suite", "ready")
ENDED = ("ready", "failed")
FINISHED = ("done", "skipped")
QUICK_TASKS = 6  # tasks in the quick suite run, spread over the starter pack
MAX_TASKS = 100
PROBE_ATTEMPTS = 3  # a probe's call: the first try, one retry, one correction to a cap
TASK_ATTEMPTS = 4  # a quick-run prompt: the first try, two retries, one correction


def calls_of(models: int, tasks: int = QUICK_TASKS) -> tuple[int, int]:
    """``(planned, at_most)``: the upstream calls onboarding ``models`` makes, each answered at
    once (a probe and ``tasks`` quick-run prompts a model), and with every retry used."""
    return models * (1 + tasks), models * (PROBE_ATTEMPTS + tasks * TASK_ATTEMPTS)


HINTS = {
    "auth": "the endpoint refused the key: set the endpoint's key (see `panelist endpoint "
    "list`), then run `panelist model onboard {alias}` again",
    "not_found": "the endpoint does not serve that model: check its served id (`panelist model "
    "list`) or `panelist discover`, then run `panelist model onboard {alias}` again",
    "key_refused": "the endpoint's key variable is not one an endpoint may read: put the key in "
    "a PANELIST_KEY_ variable or list the name in config/key_envs.json (the "
    "error says which), then run `panelist model onboard {alias}` again",
    "register": "register it by hand with `panelist model add {alias} --endpoint E`, or pick a "
    "model `panelist discover` lists, then run `panelist model onboard {alias}` again",
    "interrupted": "run `panelist model onboard {alias}` again to send it a new probe (or "
    "`panelist probe {alias}` to see first whether it answers)",
}
HINT = (
    "the endpoint did not answer the probe ({kind}); check that it is up and run "
    "`panelist model onboard {alias}` again"
)


def hint(kind: str, alias: str) -> str:
    return HINTS.get(kind, HINT).format(kind=kind, alias=alias)


def spread(tasks: list, n: int) -> list:
    """``n`` of ``tasks`` spread evenly over the list (all of them when there are no more)."""
    if len(tasks) <= n:
        return list(tasks)
    return [tasks[i * len(tasks) // n] for i in range(n)]


class Queue:
    """The onboarding queue of one data folder, folded from its log (``refresh`` to follow)."""

    def __init__(self, home: Home):
        self.home = home
        self.path = home.onboarding_log
        self.lock_path = self.path.with_name("onboarding.lock")
        self._tail = jsonl.Tail(self.path)
        self._entries: dict[str, dict] = {}
        self._mu = threading.Lock()
        self._appender: jsonl.Appender | None = None

    # -- reading -----------------------------------------------------------------------------------
    def refresh(self) -> None:
        with self._mu:
            for _, rec in self._tail.read():
                self._fold(rec)

    def _fold(self, rec: dict) -> None:
        eid, ts = rec.get("entry"), rec.get("ts")
        if not isinstance(eid, str):
            return
        if rec.get("event") == "queued":
            self._entries[eid] = {
                "id": eid,
                "alias": rec.get("alias"),
                "endpoint": rec.get("endpoint"),
                "tasks": rec.get("tasks", QUICK_TASKS),
                "step": STEPS[0],
                "status": "queued",
                "queued": ts,
                "started": None,
                "updated": ts,
                "result": None,
                "error": None,
                "error_kind": None,
                "hint": None,
                "steps": {},
                "detail": {},
                "calls": {},
            }
            return
        if rec.get("event") in ("asking", "asked"):
            self._fold_call(rec)
            return
        entry, step, status = self._entries.get(eid), rec.get("step"), rec.get("status")
        if entry is None or step not in STEPS or entry["status"] in ENDED:
            return
        entry["step"], entry["updated"] = step, ts
        entry["steps"][step] = status
        detail = {
            k: v
            for k, v in rec.items()
            if k not in ("v", "ts", "entry", "alias", "step", "status", "pid")
        }
        if status == "started":
            entry["status"] = "running"
            entry["started"] = entry["started"] or ts
            entry["detail"].setdefault(step, detail)  # the first start's choices are kept
            return
        entry["detail"][step] = dict(entry["detail"].get(step, {}), **detail)
        if step == "register" and rec.get("endpoint"):
            entry["endpoint"] = rec["endpoint"]
        if step == "register" and isinstance(rec.get("registered_as"), str):
            entry["alias"] = rec["registered_as"]  # a served id an alias cannot hold as it is
        if status == "failed":
            entry.update(
                status="failed",
                error=rec.get("error"),
                error_kind=rec.get("error_kind"),
                hint=rec.get("hint"),
            )
        elif step == "ready" and status == "done":
            entry.update(status="ready", result=rec.get("result"))

    def _fold_call(self, rec: dict) -> None:
        entry, call = self._entries.get(rec["entry"]), rec.get("call")
        if entry is None or not isinstance(call, str):
            return
        calls = entry["calls"]
        if rec["event"] == "asking":
            tasks = rec.get("tasks")
            calls.setdefault(
                call,
                {
                    "call": call,
                    "for": rec.get("for"),
                    "tasks": tasks if isinstance(tasks, list) else None,
                    "outcome": None,
                    "error_kind": "",
                    "seconds": None,
                },
            )
        elif call in calls and calls[call]["outcome"] in (None, "interrupted"):
            # a call's own outcome replaces an `interrupted` a later process wrote for it
            calls[call].update(
                outcome=rec.get("outcome"),
                error_kind=rec.get("error_kind", ""),
                seconds=rec.get("seconds"),
            )

    def entries(self) -> list[dict]:
        """Every entry, oldest first (copies: the fold goes on)."""
        self.refresh()
        with self._mu:
            return [public(e) for e in self._entries.values()]

    def entry(self, eid: str) -> dict:
        with self._mu:
            return self._entries[eid]

    def pending(self) -> list[str]:
        """Ids of the entries not ended, in the order they were enqueued."""
        self.refresh()
        with self._mu:
            return [e["id"] for e in self._entries.values() if e["status"] not in ENDED]

    def ended(self, eid: str) -> bool:
        with self._mu:
            return self._entries[eid]["status"] in ENDED

    def holder(self) -> dict | None:
        """Who works the queue now, as its lock file says (a dead holder's note is ignored)."""
        try:
            note = jsonwire.loads(self.lock_path.read_bytes() or b"null")
        except (FileNotFoundError, ValueError):
            return None
        if not isinstance(note, dict) or not isinstance(note.get("pid"), int):
            return None
        try:
            os.kill(note["pid"], 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass
        return note

    # -- writing -----------------------------------------------------------------------------------
    def append(self, *records: dict, sync: bool = False) -> None:
        """Append ``records`` in one locked write; ``sync``: flushed to disk before returning
        (a call's intent must outlive a power cut that would let it be sent again)."""
        with self._mu:
            if self._appender is None:
                self._appender = jsonl.Appender(self.path)
        now = jsonl.utc_second(time.time())
        self._appender.append(*({"v": jsonl.SCHEMA, "ts": now, **r} for r in records))
        if sync:
            fd = os.open(self.path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        self.refresh()

    def enqueue(
        self, upstream, aliases, endpoint: str | None = None, *, tasks: int = QUICK_TASKS
    ) -> list[dict]:
        """Check ``aliases`` and put each in the queue (an alias already there keeps its entry);
        returns their entries, each with ``new`` saying whether this call queued it."""
        plan = check(self.home, upstream, aliases, endpoint)
        if isinstance(tasks, bool) or not isinstance(tasks, int) or not 1 <= tasks <= MAX_TASKS:
            raise BadRequest(
                f"the quick run's task cap must be a whole number from 1 to {MAX_TASKS}"
            )
        with self._enqueuing():  # two processes onboarding one alias open one entry
            self.refresh()
            with self._mu:
                waiting = {
                    e["alias"]: e["id"] for e in self._entries.values() if e["status"] not in ENDED
                }
            lines, ids = [], []
            for alias, where in plan:
                if alias in waiting:
                    ids.append((waiting[alias], False))
                    continue
                eid = f"o{time.strftime('%Y%m%d', time.gmtime())}-{secrets.token_hex(4)}"
                lines.append(
                    {
                        "entry": eid,
                        "alias": alias,
                        "endpoint": where,
                        "event": "queued",
                        "tasks": tasks,
                    }
                )
                ids.append((eid, True))
            if lines:
                self.append(*lines)
        with self._mu:
            return [dict(public(self._entries[eid]), new=new) for eid, new in ids]

    def _enqueuing(self):
        """An exclusive ``flock`` held from reading the queue to appending to it (not the
        worker's lock, which is held for whole runs)."""
        return configfile.flocked(self.path.with_name("onboarding.enqueue.lock"))

    def close(self) -> None:
        if self._appender is not None:
            self._appender.close()
            self._appender = None


def public(entry: dict) -> dict:
    """An entry as the API and the CLI show it (``step_status``: where its step stands)."""
    return {
        **{
            k: entry[k]
            for k in (
                "id",
                "alias",
                "endpoint",
                "step",
                "status",
                "queued",
                "started",
                "updated",
                "result",
                "error",
                "error_kind",
                "hint",
            )
        },
        "step_status": entry["steps"].get(entry["step"], ""),
    }


def check(home: Home, upstream, aliases, endpoint: str | None) -> list[tuple[str, str | None]]:
    """``[(alias, endpoint)]`` for models that can be onboarded, or the error saying why not."""
    if (
        not isinstance(aliases, list)
        or not aliases
        or not all(isinstance(a, str) and a for a in aliases)
    ):
        raise BadRequest(
            "name the models to onboard: a list of one or more aliases", param="aliases"
        )
    if len(set(aliases)) != len(aliases):
        raise BadRequest("each model to onboard must be named once", param="aliases")
    if endpoint is not None and (not isinstance(endpoint, str) or not endpoint):
        raise BadRequest(
            "the endpoint must be a non-empty name; see `panelist endpoint list`", param="endpoint"
        )
    view = Roster(home).view()
    if endpoint is not None and endpoint not in view.endpoints:
        raise NotFound(f"unknown endpoint '{endpoint}'; see `panelist endpoint list`")
    plan: dict[str, str | None] = {}
    for alias in aliases:
        model = view.models.get(alias)
        if model is None:
            continue
        if endpoint is not None and model.endpoint != endpoint:
            raise BadRequest(
                f"'{alias}' is on the roster at endpoint {model.endpoint}, not "
                f"{endpoint}; onboard it without an endpoint",
                param="endpoint",
            )
        plan[alias] = model.endpoint
    outside = [a for a in aliases if a not in plan]
    if outside:
        from panelist.metrics.roster import discover
        from panelist.metrics.roster.catalog import Catalog

        found = discover.find(Catalog(home), upstream, endpoint)
        unread = "".join(
            f"; {f['endpoint']} could not be read ({f['error']})" for f in found["failed"]
        )
        for alias in outside:
            rows = [r for r in found["models"] if r["id"] == alias]
            if not rows:
                where = f"endpoint {endpoint}" if endpoint else "any endpoint"
                raise NotFound(
                    f"'{alias}' is neither on the roster nor a model {where} serves "
                    f"outside it{unread}; register it with `panelist model add "
                    f"{alias} --endpoint E`, or onboard a model `panelist discover` "
                    "lists"
                )
            if len(rows) > 1:
                raise BadRequest(
                    f"'{alias}' is served by "
                    f"{', '.join(r['endpoint'] for r in rows)}; pick one with "
                    "--endpoint",
                    param="endpoint",
                )
            plan[alias] = rows[0]["endpoint"]
    return [(a, plan[a]) for a in aliases]


def describe(result: dict) -> str:
    """One line of what the quick suite found."""

    def pct(x):
        return "n/a" if x is None else f"{x * 100:.0f}%"

    said = (
        f"suite accuracy {pct(result.get('accuracy'))} ({result.get('right', 0)}/"
        f"{result.get('scored', 0)}), unparseable {pct(result.get('unparseable'))}"
    )
    if result.get("unparseable") == 1:
        said += " (no answer could be read: check the model follows the task's answer form)"
    elif result.get("scored") and not result.get("right"):
        # onboarded means it answers, not that it is good: say so where "ready" would mislead
        said += " (no task answered right: read its answers before putting it in a collection)"
    if result.get("unfinished"):
        cut = result.get("interrupted") or 0
        why = (
            f" ({cut} cut short: sent as the process working the queue stopped, so their "
            "answers are unknown, and onboarding never sends a prompt twice)"
            if cut
            else ""
        )
        said += (
            f"; {result['unfinished']} task(s) not scored yet{why}: Run the suite on the "
            "Evidence page (or `panelist suite run --model ...`) asks them"
        )
    return said
