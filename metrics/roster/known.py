"""The roster as seating sees it: what the user typed, with the gaps filled from the catalog.

A model's unset context window, output limit and prices, its vision and tools flags when
not ticked, and its family when none is typed, come from the catalog (an endpoint's listing, an imported file), so a model added by
``discover`` is refused for a prompt it cannot hold and sits for images its listing says it
sees, without anyone typing that. What the catalog says a model lacks (tools, structured
output) fills ``Model.lacks``, so seating leaves it out of requests that need it. Readers only:
edits go to ``Roster``, which keeps what was typed.

Invariants:
- A typed value always wins; the catalog only fills what the roster leaves unset (a ticked
  tools flag outweighs a listing that says no tools). A learned
  window (from a context-length error) lowers a catalog one, never a typed one: the gateway's
  own learned windows already lower any window at seating (``seating.window_of``). A learned
  max output (from a refused output budget) lowers any, a typed one too: the endpoint refused
  above it, and the seats core clamps budgets to ``max_output`` alone. A learned refusal of
  tools outweighs a listing that says tools, never a ticked tools flag.
- Prices are taken as a pair with their currency, never one typed and one listed.
- A catalog that cannot be read (a broken hand edit) fills nothing: seating goes on with what was
  typed, and stderr says so once per state of the file, never per request.
- One ``os.stat`` per file per call; the filled view is rebuilt only when the roster or the
  catalog changed, so seating stays O(1) in the catalog's size between edits.
"""

from __future__ import annotations

import dataclasses
import sys
import threading

from panelist.metrics.store import configfile
from panelist.metrics.roster.catalog import stored_entry, stored_learned
from panelist.metrics.errors import ConfigInvalid
from panelist.metrics.home import Home
from panelist.metrics.roster.family import stem
from panelist.metrics.roster.roster import Model, Roster, RosterView


# capabilities a model is seated without unless known to lack them (vision must be known to
# be there: seating.unfit)
LACKABLE = ("tools", "structured_output")


def _endpoints(doc: dict) -> dict:
    endpoints = doc.get("endpoints")
    return endpoints if isinstance(endpoints, dict) else {}


def filled(model: Model, stored: dict) -> Model:
    """``model`` with the gaps the catalog ``stored`` (its ``endpoints`` object) can fill."""
    facts = {k: v["value"] for k, v in stored_entry(stored, model.endpoint, model.served).items()}
    learned = {
        k: v["value"] for k, v in stored_learned(stored, model.endpoint, model.served).items()
    }
    if not facts and not learned:
        return model
    fill = {}
    if model.context is None:
        windows = [w for w in (facts.get("context"), learned.get("context")) if w]
        if windows:
            fill["context"] = min(windows)
    caps = [
        c
        for c in (
            model.max_output if model.max_output is not None else facts.get("max_output"),
            learned.get("max_output"),
        )
        if c
    ]
    if caps and min(caps) != model.max_output:
        fill["max_output"] = min(caps)
    for flag in ("vision", "tools"):
        if not getattr(model, flag) and facts.get(flag) is True and learned.get(flag) is not False:
            fill[flag] = True
    lacks = frozenset(
        cap
        for cap in LACKABLE
        if False in (facts.get(cap), learned.get(cap)) and not getattr(model, cap, False)
    )
    if lacks:
        fill["lacks"] = lacks
    # the catalog's family read by the one rule: a listing's "gpt-mini" (a size class) is "gpt"
    if not model.family_typed and facts.get("family") and stem(facts["family"]) != model.family:
        fill["family"] = stem(facts["family"])
    if (
        model.price_in is None
        and model.price_out is None
        and "price_in" in facts
        and "price_out" in facts
    ):
        fill.update(
            price_in=facts["price_in"],
            price_out=facts["price_out"],
            currency=facts.get("currency", model.currency),
        )
    return dataclasses.replace(model, **fill) if fill else model


def fill_view(view: RosterView, stored: dict) -> RosterView:
    if not stored:
        return view
    return dataclasses.replace(view, models={a: filled(m, stored) for a, m in view.models.items()})


class KnownRoster:
    """``view()`` reads like ``Roster.view()``, with the catalog's facts filled in."""

    def __init__(self, roster: Roster, home: Home):
        self.roster = roster
        self._catalog = configfile.Cached(home.file("catalog.json"), _endpoints)
        self._lock = threading.Lock()
        self._memo: tuple = (None, None, None)
        self._broken: str | None = None

    def _stored(self) -> dict:
        try:
            stored = self._catalog.get()
        except ConfigInvalid as exc:
            if exc.message != self._broken:
                self._broken = exc.message
                print(
                    f"panelist: the catalog is not read ({exc.message}); models are seated "
                    "on their typed facts until it is fixed",
                    file=sys.stderr,
                )
            return {}
        self._broken = None
        return stored

    def served_ids(self) -> list[str]:
        """Every served id the catalog lists on any endpoint, whether on the roster or not (a
        race masks them all in what its judge reads)."""
        return sorted(
            {
                served
                for by in self._stored().values()
                if isinstance(by, dict)
                for served in by
                if isinstance(served, str)
            }
        )

    def view(self) -> RosterView:
        view, stored = self.roster.view(), self._stored()
        memo = self._memo
        if memo[0] is view and memo[1] is stored:
            return memo[2]
        with self._lock:
            merged = fill_view(view, stored)
            self._memo = (view, stored, merged)
        return merged
