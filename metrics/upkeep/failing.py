"""Failing models: a model whose latest calls keep failing is marked ``failing``, and an alert
says when that starts and when it ends.

A model is failing when ``failing_after`` (N) of its last ``failing_of`` (M) calls failed
(``config/gateway.json``; 3 of 5 by default, M at most ``outcomes.KEPT``), counting its gateway
seats and its health probes in log order, or when its newest call was a failed probe (asked on
purpose, its failure is news at once); it has recovered when neither holds. Calls that ended
``cancelled``, ``at_limit`` or ``memory`` (no longer needed, never asked, or no room for the
answer in the server's memory budget) do not count. The mark is read
from the ledger's index (``Ledger.failing``), so ``GET /api/models`` shows it as soon as the
seat is logged; ``rule`` is the one reading of the setting.

Alerts ``failing`` and ``recovered`` (subject: the alias; ``failed``, ``of``, ``error_kind``)
are raised by the ``Watch`` a running gateway or dashboard keeps, every ``EVERY`` seconds: a
seat logged with no server running is alerted by the next server to start.

An endpoint failing as a whole is one alert, not one per model: ``endpoint_failing`` (subject:
the endpoint; ``models``, ``error_kind``) when two or more of its models are failing, all with
the same endpoint-level kind (``ENDPOINT_KINDS``: a refused key, an address that cannot be
reached, DNS or TLS, a payment), and none of its models' newest call answered;
``endpoint_recovered`` when that no longer holds. While it holds, its models raise no
``failing`` or ``recovered`` of their own (a model alerted before its endpoint was seen failing
keeps that alert, and its recovery is said once the endpoint's is).

Invariants:

* One alert per change, however many processes watch a data folder: the alert log itself is
  the record of what was said. A watch raises ``failing`` only for a model whose newest
  ``failing`` / ``recovered`` alert is not ``failing``, and ``recovered`` only for one whose
  newest is ``failing``; it decides and appends under ``runs/alerts-failing.lock``, after
  reading the log's tail again under it. A replay of the evidence raises nothing it already
  said: only the state now is compared, never the history.
* Only models on the roster are alerted; a watch that cannot look (a broken setting) says so
  once on stderr and looks again at its next turn.
"""

from __future__ import annotations

import sys
import threading

from panelist.metrics.alerts import Alerts
from panelist.metrics.errors import ConfigInvalid
from panelist.metrics.home import Home
from panelist.metrics.ledger.outcomes import KEPT
from panelist.metrics.store import configfile, jsonl

FAILING_AFTER = 3
FAILING_OF = 5
EVERY = 1.0  # seconds between a watch's looks
KINDS = ("failing", "recovered")
ENDPOINT_ALERTS = ("endpoint_failing", "endpoint_recovered")
# failure kinds that say the endpoint itself is wrong (its key, address, certificate, account),
# whichever of its models is asked; "connection" covers DNS and TLS failures too
ENDPOINT_KINDS = {
    "auth": "its key is refused",
    "connection": "it cannot be reached",
    "payment": "it asks for payment",
    "key_refused": "its key is refused",
}


def _rule_of(doc: dict) -> tuple[int, int]:
    n, m = doc.get("failing_after", FAILING_AFTER), doc.get("failing_of", FAILING_OF)
    for name, value in (("failing_of", m), ("failing_after", n)):
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= KEPT:
            raise ConfigInvalid(
                f"gateway.json: {name} must be a whole number from 1 to {KEPT} "
                f"(a model is failing when failing_after of its last failing_of "
                f"calls failed), not {value!r}"
            )
    if n > m:
        raise ConfigInvalid(
            f"gateway.json: failing_after ({n}) cannot be more than failing_of "
            f"({m}), the calls it is counted in"
        )
    return n, m


def rule(home: Home) -> tuple[int, int]:
    """``(failing_after, failing_of)`` from gateway.json, checked."""
    return _rule_of(configfile.read(home.file("gateway.json")))


def describe(alias: str, mark: dict) -> str:
    """Why ``alias`` is failing, in words, from its ``Ledger.failing`` entry."""
    if mark["probe"]:
        return f"{alias} is failing: its newest probe failed ({mark['kind']})"
    return (
        f"{alias} is failing: {mark['failed']} of its last {mark['of']} calls failed (the "
        f"newest failure: {mark['kind']})"
    )


def endpoints_down(models: dict, marks: dict, answering: set[str]) -> dict[str, dict]:
    """The endpoints failing as a whole (see the module docstring), from the roster's
    ``models`` (alias -> ``Model``), the failing marks and the aliases whose newest call
    answered: ``{endpoint: {"kind", "models": [its failing aliases]}}``."""
    served: dict[str, list[str]] = {}
    for alias, model in models.items():
        served.setdefault(model.endpoint, []).append(alias)
    down = {}
    for endpoint, aliases in served.items():
        failing = sorted(a for a in aliases if a in marks)
        kinds = {marks[a]["kind"] for a in failing}
        if (
            len(failing) >= 2
            and len(kinds) == 1
            and next(iter(kinds)) in ENDPOINT_KINDS
            and answering.isdisjoint(aliases)
        ):
            down[endpoint] = {"kind": kinds.pop(), "models": failing}
    return down


def describe_endpoint(endpoint: str, down: dict) -> str:
    """Why ``endpoint`` is failing as a whole, in words, from its ``endpoints_down`` entry."""
    models = down["models"]
    named = ", ".join(models[:5]) + (f" and {len(models) - 5} more" if len(models) > 5 else "")
    return (
        f"endpoint {endpoint} is failing as a whole: {ENDPOINT_KINDS[down['kind']]} "
        f"({down['kind']}) for every model of it asked lately ({named})"
    )


class Watch:
    """Raises the ``failing`` and ``recovered`` alerts of one data folder; ``start`` runs it
    on a thread (a server), ``check`` looks once; ``close`` it after."""

    def __init__(self, home: Home, ledger, roster):
        self.home, self.ledger, self.roster = home, ledger, roster
        self.alerts = Alerts(home)
        self._rule = configfile.Cached(home.file("gateway.json"), _rule_of)
        self._decide = home.alerts_log.with_name("alerts-failing.lock")
        self._tail = jsonl.Tail(home.alerts_log)
        self._said: dict[str, str] = {}  # alias -> its newest failing / recovered alert
        self._said_endpoint: dict[str, str] = {}  # endpoint -> its newest endpoint alert
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def rule(self) -> tuple[int, int]:
        """The setting, re-read only when gateway.json changed."""
        return self._rule.get()

    def check(self) -> list[dict]:
        """Compare each model's mark with what the alert log last said of it; raise what
        changed. Returns the alerts raised."""
        n, m = self.rule()
        marks = self.ledger.failing(n, m)
        view = self.roster.view()
        aliases = view.models
        down = endpoints_down(aliases, marks, self.ledger.answering()) if marks else {}
        # a model of an endpoint failing as a whole is said with its endpoint, not alone
        alone = [a for a, model in aliases.items() if model.endpoint not in down]
        with self._lock:
            self._follow()
            if not self._changed(alone, marks) and not self._endpoints_changed(view, down):
                return []
            raised = []
            with configfile.flocked(self._decide):
                self._follow()  # another process may have said it meanwhile
                for endpoint in self._endpoints_changed(view, down):
                    raised.append(self._raise_endpoint(endpoint, down.get(endpoint)))
                for alias in self._changed(alone, marks):
                    raised.append(self._raise(alias, marks.get(alias), n, m))
            return raised

    def _changed(self, aliases, marks: dict) -> list[str]:
        return [a for a in aliases if (a in marks) != (self._said.get(a) == "failing")]

    def _endpoints_changed(self, view, down: dict) -> list[str]:
        return [
            e
            for e in view.endpoints
            if (e in down) != (self._said_endpoint.get(e) == "endpoint_failing")
        ]

    def _raise_endpoint(self, endpoint: str, down: dict | None) -> dict:
        if down is not None:
            record = self.alerts.raise_alert(
                "endpoint_failing",
                endpoint,
                f"{describe_endpoint(endpoint, down)}; open the "
                "endpoint's page and press Test to read its answer, then fix its key, address "
                "or certificate",
                endpoint=endpoint,
                models=down["models"],
                error_kind=down["kind"],
            )
        else:
            record = self.alerts.raise_alert(
                "endpoint_recovered",
                endpoint,
                f"endpoint {endpoint} is no longer failing as "
                "a whole: its models are judged one by one again",
                endpoint=endpoint,
            )
        self._said_endpoint[endpoint] = record["kind"]
        return record

    def _raise(self, alias: str, mark: dict | None, n: int, m: int) -> dict:
        if mark is not None:
            record = self.alerts.raise_alert(
                "failing",
                alias,
                f"{describe(alias, mark)}; its failed seats are listed on Panels, and "
                "Probe or Retire on its model page act on it",
                failed=mark["failed"],
                of=mark["of"],
                error_kind=mark["kind"],
                probe=mark["probe"],
            )
        else:
            record = self.alerts.raise_alert(
                "recovered",
                alias,
                f"{alias} answers again: fewer than {n} of its last {m} calls failed",
            )
        self._said[alias] = record["kind"]
        return record

    def _follow(self) -> None:
        for _, rec in self._tail.read():
            if not isinstance(rec.get("subject"), str):
                continue
            if rec.get("kind") in KINDS:
                self._said[rec["subject"]] = rec["kind"]
            elif rec.get("kind") in ENDPOINT_ALERTS:
                self._said_endpoint[rec["subject"]] = rec["kind"]

    # -- the thread -------------------------------------------------------------------------------
    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="failing-watch", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        said = None
        while not self._stop.wait(EVERY):
            try:
                self.check()
                said = None
            except Exception as exc:  # a broken setting: say it once, look again later
                if str(exc) != said:
                    said = str(exc)
                    print(f"panelist: failing models cannot be watched: {exc}", file=sys.stderr)

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self.alerts.close()
