"""Budgets: spend caps per gateway key and per collection, per UTC day and month, in the
currency of the models' prices (``CURRENCY``: the roster's default).

``config/budgets.json`` holds ``{"keys": {name: cap}, "collections": {name: cap}}``, each cap
``{"day", "month", "allow_unpriced"}`` (an amount or null). What was spent lives in
``runs/gateway/spend/<key|collection>-<name>``: 32 bytes, the UTC day number and its spend, the
month number (year × 12 + month − 1) and its spend, read and written under one ``flock``, so
every worker on the data folder counts into, and is judged by, the same figures. With a
database, the spend is its ``spend`` table's instead (``spenddb``), so every instance on it
counts into, and is judged by, the same figures too.

Invariants:

* A panel is judged before any seat is asked (``Panels.seat`` calls ``check`` before the seating
  is logged): when what was spent plus the least its seats can cost (the prompt's estimated
  tokens at each seated model's input price) would pass a cap, it is refused (429
  ``budget_exceeded``, with the cap, the spend and when the period resets).
* At ``WARN`` of a cap, explorers are the first seats given up: the members still sit.
* An unknown price is never taken as zero. Under a cap, a model with no price (or priced in
  another currency) does not sit unless its cap says ``allow_unpriced``: an unpriced explorer is
  left out, an unpriced member refuses the panel (403 ``budget_unpriced``).
* Spend is added when the panel is recorded, so panels already running when a cap is reached
  may pass it by what they cost (the check sees what ended, not what is in flight).
* Spend is added when the panel is recorded: each seat's (and the merger's) tokens at its
  model's prices; a seat that answered without counts is charged by estimate (what it was sent,
  what it wrote), never nothing. An allowed unpriced model adds nothing it could name.
"""

from __future__ import annotations

import calendar
import fcntl
import math
import os
import re
import struct
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

from panelist.metrics.errors import ConfigInvalid, Forbidden, TooManyRequests
from panelist.metrics.home import Home
from panelist.metrics.store import configfile

CURRENCY = "USD"
WARN = 0.9  # the share of a cap past which explorers are not seated
PER = 1_000_000  # roster prices are per million tokens
PERIODS = ("day", "month")
ADJECTIVE = {"day": "daily", "month": "monthly"}
_SLOT = struct.Struct("<qdqd")
_SAFE = re.compile(r"[^A-Za-z0-9._-]")


def day_of(t: float) -> int:
    return int(t // 86400)


def month_of(t: float) -> int:
    d = datetime.fromtimestamp(t, timezone.utc)
    return d.year * 12 + d.month - 1


def resets(period: str, t: float) -> str:
    """When ``period``'s spend starts again from zero, as UTC ISO."""
    if period == "day":
        at = (day_of(t) + 1) * 86400
    else:
        y, m = divmod(month_of(t) + 1, 12)
        at = calendar.timegm((y, m + 1, 1, 0, 0, 0))
    return datetime.fromtimestamp(at, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def amount(value, what: str) -> float | None:
    """A cap as given (None: no cap); refused unless a number of 0 or more."""
    if value is None:
        return None
    try:
        v = float(value)
    except (TypeError, ValueError):
        v = -1.0
    if isinstance(value, bool) or not math.isfinite(v) or v < 0:
        raise ConfigInvalid(
            f"{what} must be an amount of 0 or more in {CURRENCY} (e.g. 5 or "
            "2.50), or left out for no cap"
        )
    return v


class Spend:
    """The spend files of one data folder: add to them and read them, across processes."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self._lock = threading.Lock()

    def _path(self, subject: str) -> Path:
        return self.folder / _SAFE.sub("_", subject)

    def _update(self, subject: str, add: float, t: float) -> dict:
        day, month = day_of(t), month_of(t)
        self.folder.mkdir(parents=True, exist_ok=True)
        with self._lock:
            fd = os.open(self._path(subject), os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                raw = os.pread(fd, _SLOT.size, 0)
                d, ds, m, ms = _SLOT.unpack(raw) if len(raw) == _SLOT.size else (day, 0, month, 0)
                ds = ds if d == day else 0.0
                ms = ms if m == month else 0.0
                if add:
                    ds, ms = ds + add, ms + add
                    os.pwrite(fd, _SLOT.pack(day, ds, month, ms), 0)
            finally:
                os.close(fd)  # closing drops the flock
        return {"day": ds, "month": ms}

    def spent(self, subject: str, t: float | None = None) -> dict:
        """``{"day", "month"}``: what ``subject`` spent in the current UTC day and month."""
        return self._update(subject, 0.0, time.time() if t is None else t)

    def add(self, subject: str, value: float, t: float | None = None) -> dict:
        return self._update(subject, value, time.time() if t is None else t)

    def close(self) -> None:
        """Nothing is held open between calls: each opens, locks and closes its file."""


class Budgets:
    """The caps of one data folder and the spend counted against them."""

    def __init__(self, home: Home, spend=None):
        self.path = home.file("budgets.json")
        # ``Spend``, or ``spenddb.DatabaseSpend``: spent(subject, t), add(subject, amount, t)
        self.spend = spend if spend is not None else Spend(home.gateway_runs / "spend")
        self._caps = configfile.Cached(self.path, lambda doc: doc)

    @classmethod
    def of_home(cls, home: Home) -> "Budgets":
        """The caps of ``home`` with the spend every process on it shares: its database's when
        it has one (so caps hold across every instance on it), else its files'."""
        if not home.database:
            return cls(home)
        from panelist.metrics.panel.spenddb import DatabaseSpend

        return cls(home, DatabaseSpend(home.database))

    def close(self) -> None:
        self.spend.close()

    # -- the caps ------------------------------------------------------------------------------
    def caps(self, kind: str, name: str) -> dict | None:
        cap = (self._caps.get().get(kind + "s") or {}).get(name)
        return cap if cap and any(cap.get(p) is not None for p in PERIODS) else None

    def set(
        self,
        kind: str,
        name: str,
        *,
        day=None,
        month=None,
        allow_unpriced=None,
        by: str | None = None,
    ) -> dict:
        """Change ``name``'s caps (``kind``: key or collection): what is not given is kept, a
        period given as ``"none"`` loses its cap, a negative amount is refused."""
        new: dict = {}

        def change(doc):
            caps = doc.setdefault(kind + "s", {})
            old = dict(caps.get(name) or {})
            cap = dict(old)
            for period, value in (("day", day), ("month", month)):
                if value is not None:
                    cap[period] = (
                        None
                        if str(value).lower() == "none"
                        else amount(value, f"--budget-{period}")
                    )
            if allow_unpriced is not None:
                cap["allow_unpriced"] = bool(allow_unpriced)
            caps[name] = cap
            new.update(cap)
            return (f"{kind} {name} budget", old, cap) if cap != old else None

        configfile.update(self.path, change, by=by)
        return new

    def report(self, kind: str, name: str) -> dict | None:
        """A subject's caps with what was spent against each, for a page or a list."""
        cap = self.caps(kind, name)
        if cap is None:
            return None
        spent, now = self.spend.spent(f"{kind}-{name}"), time.time()
        return {
            p: {"cap": cap[p], "spent": round(spent[p], 6), "resets": resets(p, now)}
            for p in PERIODS
            if cap.get(p) is not None
        } | {"currency": CURRENCY, "allow_unpriced": bool(cap.get("allow_unpriced"))}

    # -- before and after a panel ---------------------------------------------------------------
    def _subjects(self, key: str, collection: str) -> list[tuple[str, str, dict]]:
        out = []
        for kind, name in (("key", key), ("collection", collection)):
            cap = self.caps(kind, name)
            if cap is not None:
                out.append((kind, name, cap))
        return out

    def check(self, key: str, collection: str, seating, estimate: int) -> None:
        """Refuse the seating, or give up its explorers, by the caps of ``key`` and
        ``collection`` (see the module's invariants). Edits ``seating.seats`` in place."""
        subjects = self._subjects(key, collection)
        if not subjects:
            return
        now = time.time()
        for kind, name, cap in subjects:
            if not cap.get("allow_unpriced"):
                unpriced = [s for s in seating.seats if not priced(s.model)]
                members = [s.model.alias for s in unpriced if s.seat != "explorer"]
                if members:
                    allow = (
                        f"panelist key budget {name} --allow-unpriced"
                        if kind == "key"
                        else f"panelist collection save {name} --members … --allow-unpriced"
                    )
                    raise Forbidden(
                        f"{kind} '{name}' has a spend cap and {', '.join(members)} has no price "
                        f"in {CURRENCY}, so what it costs cannot be counted; give it prices "
                        f"(`panelist model add … --price-in P --price-out P`), or allow "
                        f"unpriced models under this cap (`{allow}`)",
                        code="budget_unpriced",
                    )
                _drop(seating, unpriced, f"no price, under {kind} {name}'s spend cap")
            spent = self.spend.spent(f"{kind}-{name}", now)
            least = sum(estimate * s.model.price_in / PER for s in seating.seats if priced(s.model))
            for period in PERIODS:
                limit = cap.get(period)
                if limit is None:
                    continue
                if spent[period] >= limit or spent[period] + least > limit:
                    raise TooManyRequests(
                        f"{kind} '{name}' is at its {ADJECTIVE[period]} spend cap: spent "
                        f"{spent[period]:.4f} of {limit:.4f} {CURRENCY} (this panel would cost "
                        f"at least {least:.4f}); it resets at {resets(period, now)}",
                        code="budget_exceeded",
                        headers={"Retry-After": str(_until(period, now))},
                        details={
                            "budget": {
                                "subject": kind,
                                "name": name,
                                "period": period,
                                "cap": limit,
                                "spent": round(spent[period], 6),
                                "currency": CURRENCY,
                                "resets": resets(period, now),
                            }
                        },
                    )
                if spent[period] + least >= WARN * limit:
                    _drop(
                        seating,
                        [s for s in seating.seats if s.seat == "explorer"],
                        f"held back: {kind} {name} is near its {ADJECTIVE[period]} spend cap",
                    )

    def charge(self, key: str, collection: str, results, models: dict, estimate: int) -> float:
        """Add what a recorded panel's seats cost to its key's and collection's spend; the
        amount added."""
        subjects = self._subjects(key, collection)
        if not subjects:
            return 0.0
        total = sum(cost(models.get(r.alias), r, estimate) for r in results if r is not None)
        if total:
            for kind, name, _ in subjects:
                self.spend.add(f"{kind}-{name}", total)
        return total


def priced(model) -> bool:
    return (
        model is not None
        and model.price_in is not None
        and model.price_out is not None
        and model.currency == CURRENCY
    )


def cost(model, result, estimate: int) -> float:
    """One seat's cost: its upstream's counts at its prices; an answer without counts by
    estimate; a failure without counts nothing (an upstream that refused bills nothing)."""
    if not priced(model):
        return 0.0
    tokens = result.tokens or {}
    read, wrote = tokens.get("prompt"), tokens.get("completion")
    if not isinstance(read, int) or not isinstance(wrote, int):
        if result.status in ("error", "cancelled") and not tokens:
            return 0.0
        read = read if isinstance(read, int) else estimate
        wrote = wrote if isinstance(wrote, int) else math.ceil(len(result.answer or "") / 4)
    return (read * model.price_in + wrote * model.price_out) / PER


def _drop(seating, seats: list, why: str) -> None:
    """Give up ``seats`` (explorers) of a seating, each said in its skipped list."""
    for s in seats:
        seating.skip(s.seat, s.model.alias, why)
    seating.seats = [s for s in seating.seats if s not in seats]


def _until(period: str, t: float) -> int:
    at = datetime.strptime(resets(period, t), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    return max(1, math.ceil(at.timestamp() - t))
