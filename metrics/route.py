"""Seating: who sits on a panel, and why everyone else does not.

Every member sits, unless it cannot answer at all (retired, cooling down after a rate limit,
gone from the roster); then it is listed in ``skipped`` with why. Explorer seats go to the
eligible models with the least recent evidence for the request's shape, weighed by their
verdicts. Eligible means: not a member, not of a member's family, not of an explorer already
seated's family (while another family is left), not retired, not cooling down, and a known
context window (the lower of the roster's and one learned from an upstream error) no smaller
than the prompt's estimate. A model with no known window is never refused for size.

The rule (per shape, at timestamp precision):

1. A model never seated for the shape comes first (ties: alias order).
2. Otherwise its claim is ``age × (useful + 1) / (not_useful + 1)``, where ``age`` is the seconds
   since its last seat. Highest claim sits. A model whose answers were judged useful comes back
   sooner; one judged not useful waits longer, but never forever: its claim still grows with age,
   so the roster keeps getting fresh evidence on everyone.

A request may nominate models (``"with": [...]``): nominees take explorer seats before
staleness does, under the same exclusions; a nominee that cannot sit is listed with why.
A request with images seats only models that take images (unknown counts as cannot).

Every model left out of the panel is listed in ``skipped`` with why.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from panelist.metrics.collection import Collection
from panelist.metrics.roster import Model, RosterView


@dataclass
class Seat:
    seat: str           # member | explorer | nominee | merger
    number: int         # 1-based within its kind
    model: Model

    @property
    def label(self) -> str:
        return self.seat if self.seat == "merger" else f"{self.seat}{self.number}"


@dataclass
class Seating:
    seats: list[Seat]
    skipped: list[dict] = field(default_factory=list)

    def skip(self, seat: str, alias: str, why: str) -> None:
        self.skipped.append({"seat": seat, "alias": alias, "why": why})


def claim(state, now: float) -> tuple:
    """Sort key, smallest first: never-seated first, then the largest weighted age."""
    weight = (state.useful + 1) / (state.not_useful + 1)
    if state.last_seated is None:
        return (0, -weight)
    return (1, -max(0.0, now - state.last_seated) * weight)


def window_of(model: Model, state) -> int | None:
    known = [w for w in (model.context, state.window if state else None) if w]
    return min(known) if known else None


def why_not(model: Model, state, estimate: int, now: float, images: bool = False) -> str | None:
    """Why a model cannot answer this request at all, or None when it can."""
    if model.retired:
        return "retired"
    if images and not model.vision:
        # unknown counts as cannot: a blind model answers anyway, describing a picture it never got
        return "does not take images (set --vision on the model if it does)"
    if state is not None and state.cooling_until > now:
        return f"cooling down after a rate limit for {state.cooling_until - now:.0f} s more"
    window = window_of(model, state)
    if window is not None and window < estimate:
        return f"context window {window} tokens is below the prompt's estimate of {estimate}"
    return None


def seat_panel(collection: Collection, roster: RosterView, states: dict, *, explorers: int,
               estimate: int, images: bool = False, nominees=(),
               now: float | None = None) -> Seating:
    """Seat the members, then nominees, then fill what is left of ``explorers`` explorer seats by
    staleness. ``states`` maps every roster alias to its ledger state (last seat, verdicts,
    cooldown, learned window) for the request's shape. With ``images`` only models that take
    images sit."""
    now = time.time() if now is None else now
    seating = Seating(seats=[])
    member_families = set()
    for alias in collection.members:
        model = roster.models.get(alias)
        if model is None:
            seating.skip("member", alias, "no longer in the roster; fix the collection")
            continue
        member_families.add(model.family)
        reason = why_not(model, states.get(alias), estimate, now, images)
        if reason:
            seating.skip("member", alias, reason)
        else:
            seating.seats.append(Seat("member", len(seating.seats) + 1, model))

    def exclusion(model: Model) -> str | None:
        if model.family in member_families:
            return f"same family as a member ({model.family})"
        return why_not(model, states.get(model.alias), estimate, now, images)

    chosen: list[Model] = []
    families: set[str] = set()
    for alias in dict.fromkeys(nominees):  # a nominee named twice is asked once
        model = roster.models.get(alias)
        if model is None:
            seating.skip("nominee", alias, "not in the roster; see GET /v1/models or "
                         "`panelist model list`")
        elif alias in collection.members:
            seating.skip("nominee", alias, "already a member of this collection")
        elif reason := exclusion(model):
            seating.skip("nominee", alias, reason)
        elif len(chosen) >= explorers:
            seating.skip("nominee", alias, f"no explorer seat left ({explorers} on this "
                         "collection)")
        else:
            chosen.append(model)
            families.add(model.family)
            seating.seats.append(Seat("nominee", len(chosen), model))
    nominated = set(nominees)

    candidates = []
    for alias, model in roster.models.items():
        if alias in collection.members or alias in nominated:
            continue
        reason = exclusion(model)
        if reason:
            seating.skip("explorer", alias, reason)
            continue
        candidates.append(model)
    candidates.sort(key=lambda m: (claim(states[m.alias], now), m.alias))

    # first pass keeps explorer families distinct; the second fills what is left
    explorer_models: list[Model] = []
    for distinct in (True, False):
        for model in candidates:
            if len(chosen) >= explorers:
                break
            if model in chosen or (distinct and model.family in families):
                continue
            chosen.append(model)
            explorer_models.append(model)
            families.add(model.family)
    for i, model in enumerate(explorer_models, 1):
        seating.seats.append(Seat("explorer", i, model))
    for rank, model in enumerate(candidates, 1):
        if model not in chosen:
            why = ("no explorer seats on this collection" if explorers == 0 else
                   f"explorer seats went to models with older evidence (rank {rank})")
            seating.skip("explorer", model.alias, why)
    return seating
