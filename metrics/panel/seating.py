"""Seating: who sits on a panel, and why everyone else does not.

Every member sits, unless it cannot answer this request at all (retired, cooling down after a
rate limit, gone from the roster, lacking what the request needs, or a known window below the
prompt's estimate); then it is listed in ``skipped`` with why, and is not asked. A model left
out for its window alone is also noted in ``too_small`` with its window: the panel refuses a
prompt only when nobody could hold it, and then names the largest window, the size a client
has to trim to. Explorer seats rotate among the eligible models, to gather evidence on models
the collection does not have. Eligible means: not a member, not of a member's family, not of
an explorer already seated's family (while another family is left), not retired, not cooling
down, able to do what the request needs, and a known context window (the lower of the roster's
and one learned from an upstream error) no smaller than the prompt's estimate. A model with no
known window is never refused for size.

The rule, per shape, counted in turns (a shape's turn advances once per panel seated with it,
in the order of the evidence log, so every process counts alike):

1. A model with a seat still in flight in this gateway counts as just seated: it waits behind
   every model that has none. A model whose upstream hangs is asked once, not by every panel
   started while it hangs.
2. A model never seated for the shape comes first (ties: the weight below, then alias order).
3. Otherwise the largest claim sits: ``turns × weight``. ``turns`` is how many panels of the
   shape were seated since its last seat, counting that one (1: it sat in the latest);
   ``weight`` is ``(useful + 1) / (not_useful + 1)`` held between 1 and 2. Ties go to the
   longer wait, then the older seating time, then an order that reshuffles each time the tied
   models sit (models seated together would otherwise come back in alias order every round).

Verdicts can at most double a claim, and never shrink one below plain rotation: a model judged
useful comes back up to twice as often, a model judged not useful keeps its turn. That bounds
how long anyone waits, whatever the verdicts. With K candidates and E explorer seats, every
candidate sits at least once in any 2·⌈K/E⌉ consecutive panels of the shape (at most
⌊2(K−1)/E⌋ + 1 panels from one seat to the next); when candidates share a family, within 2K.
Why: a model that has waited j turns claims at least j; a rival seated i turns into that wait
claims at most 2(j − i), so it outranks the waiting model only while i ≤ j/2. In the second half
of any wait each rival sits at most once, E of them a panel, so that half lasts at most
(K − 1)/E panels. The bound counts panels in which the model is eligible and has no seat in
flight, with every explorer seat filled by this rule (no nominees) from the same candidates.

Counting turns rather than seconds keeps the bound whatever the traffic's timing: with
``seconds × weight``, panels arriving at ever longer intervals can keep a favoured model ahead
of the rest indefinitely. Seconds still break ties, and a model seated only before turns were
logged counts as having waited every turn.

A request may nominate models (``"with": [...]``): nominees take explorer seats before the
rotation does, under the same exclusions; a nominee that cannot sit is listed with why. A
request sits only with models that can do what it needs (``NEEDS``): images only with models
known to take them (unknown counts as cannot), tools and a json_schema response format with
any model the catalog does not say lacks them (unknown counts as can; a ticked flag wins).
A model left out for that alone is noted in ``lacking``.

A member always sits and waits for its endpoint's admission slot within its seat deadline; a
nominee or an explorer sits only when its endpoint has room now (``room``, from
``upstream.admission``), else it is listed as "endpoint at its limit". Room is asked only of a
model about to take a seat, so a long roster costs nothing more.

The collection's ``explorer_policy`` chooses how explorer seats are ordered: ``staleness``, the
rule above, or ``thompson`` (``explore.py``: the candidates likeliest to beat a member, with this
bound kept as a hard floor). Every seat says why it sat (``Seat.why``).

Every model left out of the panel is listed in ``skipped`` with why: each member and nominee,
and, when the collection has explorer seats, each roster model that did not take one (with no
explorer seats, the rest of the roster was never a candidate and is not listed). When a model
is clearly more useful than a member, the reply says so (``suggest``) rather than seating it
forever.

``SeatsInFlight`` is the gateway's memory of seats asked and not yet answered. Invariants: a
hold is taken in the same locked step that picks the panel (so two threads never pick the same
model because neither saw the other), each seat releases its alias once when it ends however
it ends, the panel releases what is left when it is logged, and a hold nobody releases lapses
a little after the panel's deadline.
"""

from __future__ import annotations

import random
import threading
import time
import zlib
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from typing import Callable, Iterable

from panelist.metrics.panel import explore
from panelist.metrics.roster.collection import Collection
from panelist.metrics.roster.roster import Model, RosterView


@dataclass
class Seat:
    seat: str  # member | explorer | nominee | merger
    number: int  # 1-based within its kind
    model: Model
    why: str = ""  # why it sat (``bench.seats[].why``): "member", "stale 3 d", …

    @property
    def label(self) -> str:
        return self.seat if self.seat == "merger" else f"{self.seat}{self.number}"


@dataclass
class Seating:
    seats: list[Seat]
    skipped: list[dict] = field(default_factory=list)
    # the models that could have sat but for the prompt's size, by alias: their windows (the
    # largest is the one a refusal names, so a client that trims to it gets a seat)
    too_small: dict[str, int] = field(default_factory=dict)
    # the models that could have sat but for a capability the request needs, by alias: which
    lacking: dict[str, str] = field(default_factory=dict)
    # set by the gateway once the seating is taken (see Panels.seat)
    panel: str | None = None  # the panel id reserved for it
    at: float | None = None  # epoch seconds: when it was seated, the panel's start
    hold: "Hold | None" = None  # its seats in flight, released as they end
    roster: RosterView | None = None  # the roster as it was seated from

    def skip(self, seat: str, alias: str, why: str) -> None:
        self.skipped.append({"seat": seat, "alias": alias, "why": why})


AT_LIMIT = "endpoint at its limit (no room for a call there now)"
MAX_WEIGHT = 2.0  # verdicts at most double a claim; the waiting bound in the docstring needs it


def weight(state) -> float:
    """``(useful + 1) / (not_useful + 1)`` held between 1 and ``MAX_WEIGHT``."""
    return min(MAX_WEIGHT, max(1.0, (state.useful + 1) / (state.not_useful + 1)))


def claim(state, alias: str, busy: bool = False) -> tuple:
    """Sort key, smallest first: no seat in flight before one in flight; never seated first
    (then alias order); then the largest ``turns × weight``, the longer wait, the older seating
    time, and last a shuffle that changes with every seating (see ``_shuffle``)."""
    w = weight(state)
    if state.last_seated is None:
        return (busy, 0, -w, 0, 0.0, 0, alias)
    # a hand-made state without a turn count is treated as seated in the latest panel
    turns = (state.waited or 0) + 1
    return (
        busy,
        1,
        -turns * w,
        -turns,
        state.last_seated,
        _shuffle(alias, state.last_seated),
        alias,
    )


def _shuffle(alias: str, seated: float) -> int:
    """A tie order for models that sat in the same panel: alias order would send the same one
    back first every round, giving it more seats than its equals. Hashing the alias with the
    seating time reorders them each time they sit, the same way in every process."""
    return zlib.crc32(f"{alias}@{seated!r}".encode())


def window_of(model: Model, state) -> int | None:
    """The lower of the roster's window and a learned one, or None when neither is known."""
    learned = state.window if state is not None else None
    if model.context and learned:
        return min(model.context, learned)
    return model.context or learned or None


# what a request may need of a model: the words a refusal uses for it, and the param it names
NEEDS = {
    "vision": ("take images", "messages"),
    "tools": ("call tools", "tools"),
    "structured_output": (
        "follow a json_schema response_format (structured output)",
        "response_format",
    ),
}


def lacking(model: Model, needs) -> str | None:
    """The first of ``needs`` (keys of ``NEEDS``) that ``model`` cannot be seated for, or None.
    Vision must be known (typed or listed): a blind model answers anyway, describing a picture
    it never got. Tools and structured output are assumed unless the catalog says the model
    lacks them (``Model.lacks``): most models have them, and a request for them is better
    answered by a model nobody described than refused."""
    for need in NEEDS:
        if need in needs and (not model.vision if need == "vision" else need in model.lacks):
            return need
    return None


def _lacks_why(model: Model, need: str) -> str:
    if need == "vision":
        return "does not take images (set --vision on the model if it does)"
    if need == "tools":
        return (
            "does not call tools, the catalog says (`panelist catalog show "
            f"{model.alias}`; set --tools on the model if it does)"
        )
    return (
        "has no structured output for a json_schema response_format, the catalog says "
        f"(`panelist catalog show {model.alias}`)"
    )


def unfit(
    model: Model, state, estimate: int, now: float, images: bool = False, needs=frozenset()
) -> tuple[str, str] | None:
    """``(kind, why)`` a model cannot answer this request at all, or None when it can. Kinds:
    ``retired``, ``capability`` (of ``needs``; ``images`` adds vision), ``cooling``, ``window``
    (checked in that order, so a model refused for its window would sit with a shorter
    prompt, and one refused for a capability is never refused for anything else)."""
    if model.retired:
        return "retired", "retired"
    need = lacking(model, set(needs) | ({"vision"} if images else set()))
    if need:
        return "capability", _lacks_why(model, need)
    if state is not None and state.cooling_until > now:
        return "cooling", (
            f"cooling down after a rate limit for {state.cooling_until - now:.0f} s more"
        )
    window = window_of(model, state)
    if window is not None and window < estimate:
        return "window", (
            f"context window {window} tokens is below the prompt's estimate of {estimate}"
        )
    return None


def why_not(
    model: Model, state, estimate: int, now: float, images: bool = False, needs=frozenset()
) -> str | None:
    """Why a model cannot answer this request at all, or None when it can."""
    found = unfit(model, state, estimate, now, images, needs)
    return found[1] if found else None


def seat_panel(
    collection: Collection,
    roster: RosterView,
    states: dict,
    *,
    explorers: int,
    estimate: int,
    images: bool = False,
    needs=frozenset(),
    nominees=(),
    busy=frozenset(),
    now: float | None = None,
    room: Callable[[Model], bool] | None = None,
    rng: random.Random | None = None,
) -> Seating:
    """Seat the members, then nominees, then fill what is left of ``explorers`` explorer seats by
    the rotation. ``states`` maps every roster alias to its ledger state (last seat, turns
    waited, verdicts, cooldown, learned window) for the request's shape; ``busy`` holds the
    aliases with a seat in flight. Only models that can do what the request ``needs`` (keys
    of ``NEEDS``; ``images`` adds vision) sit (``lacking``).
    ``room(model)``: whether its endpoint admits a call now (None: always). The collection's
    ``explorer_policy`` orders the candidates (``explore.py``); ``rng`` makes the draws of
    ``thompson`` (None: a fresh one)."""
    now = time.time() if now is None else now
    needs = set(needs) | ({"vision"} if images else set())
    seating = Seating(seats=[])
    member_families = set()

    def fits(model: Model) -> str | None:
        """Why ``model`` cannot sit, or None; one refused only for its window or for a
        capability is noted."""
        found = unfit(model, states.get(model.alias), estimate, now, needs=needs)
        if found is None:
            return None
        if found[0] == "window":
            window = window_of(model, states.get(model.alias))
            assert window is not None  # unfit refuses for the window only when one is known
            seating.too_small[model.alias] = window
        elif found[0] == "capability":
            missing = lacking(model, needs)
            assert missing is not None  # unfit refuses for a capability the model lacks
            seating.lacking[model.alias] = missing
        return found[1]

    for alias in collection.members:
        model = roster.models.get(alias)
        if model is None:
            seating.skip("member", alias, "no longer in the roster; fix the collection")
            continue
        member_families.add(model.family)
        reason = fits(model)
        if reason:
            seating.skip("member", alias, reason)
        else:
            seating.seats.append(Seat("member", len(seating.seats) + 1, model, "member"))

    def exclusion(model: Model) -> str | None:
        if model.family in member_families:
            return f"same family as a member ({model.family})"
        if explorers == 0:  # no seat to take: its size is no reason it did not sit
            return why_not(model, states.get(model.alias), estimate, now, needs=needs)
        return fits(model)

    chosen: list[Model] = []
    taken: set[str] = set()  # chosen aliases: a set, as the roster may be long
    families: set[str] = set()
    for alias in dict.fromkeys(nominees):  # a nominee named twice is asked once
        model = roster.models.get(alias)
        if model is None:
            seating.skip(
                "nominee", alias, "not in the roster; see GET /v1/models or `panelist model list`"
            )
        elif alias in collection.members:
            seating.skip("nominee", alias, "already a member of this collection")
        elif reason := exclusion(model):
            seating.skip("nominee", alias, reason)
        elif len(chosen) >= explorers:
            seating.skip(
                "nominee", alias, f"no explorer seat left ({explorers} on this collection)"
            )
        elif room is not None and not room(model):
            seating.skip("nominee", alias, AT_LIMIT)
        else:
            chosen.append(model)
            taken.add(alias)
            families.add(model.family)
            seating.seats.append(Seat("nominee", len(chosen), model, "nominated by the request"))
    nominated = set(nominees)
    if explorers == 0:  # no seat to fill: the rest of the roster was never a candidate, and
        return seating  # listing each model as skipped would only bury the skips that matter

    candidates = []
    for alias, model in roster.models.items():
        if alias in collection.members or alias in nominated:
            continue
        reason = exclusion(model)
        if reason:
            seating.skip("explorer", alias, reason)
            continue
        candidates.append(model)
    if collection.explorer_policy == explore.THOMPSON:
        members = [
            (s.label, states.get(s.model.alias)) for s in seating.seats if s.seat == "member"
        ]
        candidates, why = explore.thompson_order(
            candidates, states, members, explorers, busy, rng or random.Random(), now
        )
        lost = "explorer seats went to candidates due or likelier to beat a member"
    else:
        candidates.sort(key=lambda m: claim(states[m.alias], m.alias, m.alias in busy))

        def why(alias: str) -> str:
            return explore.stale_why(states.get(alias), now)

        lost = "explorer seats went to models with older evidence"

    # first pass keeps explorer families distinct; the second fills what is left
    explorer_models: list[Model] = []
    at_limit: set[str] = set()
    for distinct in (True, False):
        for model in candidates:
            if len(chosen) >= explorers:
                break
            if (
                model.alias in taken
                or model.alias in at_limit
                or (distinct and model.family in families)
            ):
                continue
            if room is not None and not room(model):
                at_limit.add(model.alias)
                continue
            chosen.append(model)
            taken.add(model.alias)
            explorer_models.append(model)
            families.add(model.family)
    for i, model in enumerate(explorer_models, 1):
        seating.seats.append(Seat("explorer", i, model, why(model.alias)))
    for rank, model in enumerate(candidates, 1):
        if model.alias not in taken:
            if model.alias in at_limit:
                reason = AT_LIMIT
            elif model.alias in busy:
                reason = "still answering another panel's seat; explorer seats went to others"
            else:
                reason = f"{lost} (rank {rank})"
            seating.skip("explorer", model.alias, reason)
    return seating


class SeatsInFlight:
    """Seats asked and not yet answered, per alias, for one gateway (see the module's
    invariants). Costs O(1) per seat, plus pruning lapsed holds when any are left over."""

    def __init__(self):
        self._lock = threading.Lock()
        self._busy: Counter[str] = Counter()
        self._holds: OrderedDict[int, Hold] = OrderedDict()  # oldest first
        self._next = 0

    def hold(self, aliases: Iterable[str], seconds: float) -> "Hold":
        """Count each alias as in flight until released, or for ``seconds`` at most."""
        with self._lock:
            self._next += 1
            hold = Hold(self, self._next, list(aliases), time.monotonic() + seconds)
            self._holds[hold.key] = hold
            self._busy.update(hold.aliases)
        return hold

    def busy(self) -> frozenset[str]:
        """The aliases with at least one seat in flight."""
        with self._lock:
            self._lapse(time.monotonic())
            return frozenset(self._busy)

    def counts(self) -> dict[str, int]:
        """Seats in flight per alias (empty when nothing is being asked)."""
        with self._lock:
            self._lapse(time.monotonic())
            return dict(self._busy)

    def _lapse(self, now: float) -> None:
        # holds are made with the same timeout, so the oldest lapse first; a hold with a
        # longer timeout at the front only delays the pruning of those behind it
        while self._holds:
            hold = next(iter(self._holds.values()))
            if hold.until > now:
                return
            self._drop(hold, list(hold.aliases))

    def _drop(self, hold: "Hold", aliases: list[str]) -> None:
        """Release ``aliases`` (each once) from ``hold``; caller holds ``_lock``."""
        for alias in aliases:
            if alias in hold.aliases:
                hold.aliases.remove(alias)
                self._busy[alias] -= 1
                if self._busy[alias] <= 0:
                    del self._busy[alias]
        if not hold.aliases:
            self._holds.pop(hold.key, None)


class Hold:
    """One panel's seats in flight. Releasing twice, or after the hold lapsed, does nothing."""

    def __init__(self, flight: SeatsInFlight, key: int, aliases: list[str], until: float):
        self.flight, self.key, self.aliases, self.until = flight, key, aliases, until

    def release(self, alias: str) -> None:
        """One seat of ``alias`` ended (answered, failed, cancelled or given up)."""
        with self.flight._lock:
            self.flight._drop(self, [alias])

    def release_all(self) -> None:
        """The panel is done: whatever it still holds ends with it."""
        with self.flight._lock:
            self.flight._drop(self, list(self.aliases))
