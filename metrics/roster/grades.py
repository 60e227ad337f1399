"""Grades: the quality tiers a job can ask for, weakest first, and the model each one is served by.

Stored in ``config/grades.json`` as ``{"order": [grade, ...], "pins": {grade: alias},
"ceiling": alias | null}``. Every model has a ``grade`` on the roster; this file orders the
grades and pins, per grade, the model the deployment uses (what a race takes as its reference).
The **ceiling**, the strongest model served (a race's judge), is ``ceiling`` when set, else the
pinned model of the strongest grade that has a pin.

Invariants, checked on every write (a write is atomic, under a lock, and logged in
``config/changes.jsonl`` like all config): the order names each grade once; a pin names a grade of
the order and a model of the roster that is of that grade and not retired; the ceiling names a
model of the roster that is not retired. A write given the ``version`` a listing showed
(``expect``) is refused (409 ``stale``) when the grades changed since. The roster can change afterwards (a pinned model
retired, removed or re-graded): reads keep returning what is stored and ``listing`` says what is
wrong with it, so nothing is changed behind the user's back.
"""

from __future__ import annotations

from panelist.metrics.store import configfile
from panelist.metrics.errors import ConfigInvalid, NotFound
from panelist.metrics.home import Home
from panelist.metrics.plaintext import first_control
from panelist.metrics.roster.roster import Roster, RosterView

# the grades the demo roster and the defaults use, weakest first
DEFAULT_ORDER = ("light", "general", "strong")
MAX_GRADE = 48
MAX_GRADES = 32


def check_grade(grade) -> str:
    if (
        not isinstance(grade, str)
        or not grade.strip()
        or len(grade.strip()) > MAX_GRADE
        or "," in grade
        or first_control(grade)
    ):
        raise ConfigInvalid(
            f"grade {grade!r} is not a grade name: use 1-{MAX_GRADE} characters, "
            "no comma or control character, e.g. general",
            param="grade",
        )
    return grade.strip()


def _parse(doc: dict) -> dict:
    order = doc.get("order", list(DEFAULT_ORDER))
    pins = doc.get("pins") or {}
    ceiling = doc.get("ceiling")
    if (
        not isinstance(order, list)
        or not all(isinstance(g, str) for g in order)
        or len(set(order)) != len(order)
    ):
        raise ConfigInvalid(
            "grades.json: 'order' must list each grade name once, weakest first; "
            "fix it or set it with `panelist grade order a,b,c`"
        )
    if not isinstance(pins, dict) or not all(isinstance(a, str) for a in pins.values()):
        raise ConfigInvalid(
            "grades.json: 'pins' must map a grade to a model alias; fix it or "
            "set pins with `panelist grade pin GRADE ALIAS`"
        )
    if ceiling is not None and not isinstance(ceiling, str):
        raise ConfigInvalid(
            "grades.json: 'ceiling' must be a model alias or null; fix it or set "
            "it with `panelist grade ceiling ALIAS`"
        )
    return {"order": order, "pins": pins, "ceiling": ceiling or None}


class Grades:
    """Reads and writes one data folder's ``config/grades.json``."""

    def __init__(self, home: Home):
        self.path = home.file("grades.json")
        self.roster = Roster(home)
        self._cache = configfile.Cached(self.path, _parse)

    # -- reading -------------------------------------------------------------------------------
    def order(self) -> list[str]:
        """The grades, weakest first."""
        return list(self._cache.get()["order"])

    def pinned(self, grade: str) -> str | None:
        """The alias pinned for ``grade`` (what the deployment uses), or None."""
        return self._cache.get()["pins"].get(grade)

    def ceiling(self) -> str | None:
        """The strongest model served: the one set, else the pin of the strongest pinned grade."""
        doc = self._cache.get()
        if doc["ceiling"]:
            return doc["ceiling"]
        for grade in reversed(doc["order"]):
            if doc["pins"].get(grade):
                return doc["pins"][grade]
        return None

    @staticmethod
    def candidates(grade: str, roster_view: RosterView) -> list[str]:
        """Every model of ``grade`` that can be called now: not retired, its endpoint on the
        roster (the view holds no model whose endpoint is gone). Alias order."""
        return sorted(
            a for a, m in roster_view.models.items() if m.grade == grade and not m.retired
        )

    def listing(self, view: RosterView | None = None) -> dict:
        """Everything ``grade list`` and the dashboard show: each grade weakest first with its pin,
        its models and what is wrong, the ceiling and how it was chosen, and grades models use
        that the order leaves out."""
        view = view or self.roster.view()
        doc = self._cache.get()
        grades = []
        for rank, grade in enumerate(doc["order"], 1):
            pin = doc["pins"].get(grade)
            grades.append(
                {
                    "grade": grade,
                    "rank": rank,
                    "pinned": pin,
                    "problem": _problem(view, pin, grade) if pin else None,
                    "models": self.candidates(grade, view),
                }
            )
        ceiling = self.ceiling()
        used = {m.grade for m in view.models.values() if m.grade}
        return {
            "grades": grades,
            "version": configfile.version_of(doc),
            "ceiling": {
                "alias": ceiling,
                "set": bool(doc["ceiling"]),
                "problem": _problem(view, ceiling) if ceiling else None,
            },
            "unordered": sorted(used - set(doc["order"])),
        }

    # -- writing -------------------------------------------------------------------------------
    def pin(
        self, grade: str, alias: str | None, *, by: str | None = None, expect: str | None = None
    ) -> str | None:
        """Pin ``alias`` for ``grade`` (None: unpin it); returns what was pinned before."""
        grade = check_grade(grade)
        _known(grade, self.order())
        if alias is not None:
            self._check_model(alias, grade)
        before = []

        def change(doc):
            current = _parse(doc)
            configfile.check_version("the grades", current, expect)
            _known(grade, current["order"])  # the order may have changed meanwhile
            pins = dict(current["pins"])
            old = pins.get(grade)
            before.append(old)
            if old == alias:
                return None
            if alias is None:
                pins.pop(grade, None)
            else:
                pins[grade] = alias
            doc.update(current, pins=pins)
            return f"grade {grade} pin", old, alias

        configfile.update(self.path, change, by=by)
        return before[0]

    def set_ceiling(
        self, alias: str | None, *, by: str | None = None, expect: str | None = None
    ) -> None:
        """Name the ceiling (None: back to the strongest grade's pin)."""
        if alias is not None:
            self._check_model(alias, None)

        def change(doc):
            current = _parse(doc)
            configfile.check_version("the grades", current, expect)
            old = current["ceiling"]
            if old == alias:
                return None
            doc.update(current, ceiling=alias)
            return "grade ceiling", old, alias

        configfile.update(self.path, change, by=by)

    def set_order(
        self, grades: list[str], *, by: str | None = None, expect: str | None = None
    ) -> list[str]:
        """Set the grades, weakest first; pins of grades left out are dropped (returned)."""
        grades = [check_grade(g) for g in grades]
        if not grades:
            raise ConfigInvalid(
                "give at least one grade, weakest first, e.g. light,general,strong", param="order"
            )
        if len(grades) > MAX_GRADES:
            raise ConfigInvalid(f"at most {MAX_GRADES} grades", param="order")
        twice = sorted({g for g in grades if grades.count(g) > 1})
        if twice:
            raise ConfigInvalid(
                f"grade(s) {', '.join(twice)} named twice; name each once", param="order"
            )
        dropped = []

        def change(doc):
            current = _parse(doc)
            configfile.check_version("the grades", current, expect)
            if current["order"] == grades:
                return None
            pins = {g: a for g, a in current["pins"].items() if g in grades}
            dropped.extend(sorted(set(current["pins"]) - set(pins)))
            old = {"order": current["order"], "pins": current["pins"]}
            doc.update(current, order=grades, pins=pins)
            return "grade order", old, {"order": grades, "pins": pins}

        configfile.update(self.path, change, by=by)
        return dropped

    def _check_model(self, alias: str, grade: str | None) -> None:
        view = self.roster.view()
        model = view.models.get(alias)
        if model is None:
            raise NotFound(f"unknown model '{alias}'; see `panelist model list`", param="alias")
        if model.retired:
            raise ConfigInvalid(
                f"model '{alias}' is retired; restore it first with "
                f"`panelist model restore {alias}`",
                param="alias",
            )
        if grade is not None and model.grade != grade:
            others = self.candidates(grade, view)
            has = f"is of grade '{model.grade}'" if model.grade else "has no grade"
            raise ConfigInvalid(
                f"model '{alias}' {has}, not '{grade}'; pin a model of grade "
                f"{grade} ({_names(others) if others else 'none on the roster'})"
                f" or set its grade with `panelist model add {alias} --grade "
                f"{grade} ...`",
                param="alias",
            )


def _known(grade: str, order: list[str]) -> None:
    if grade not in order:
        raise ConfigInvalid(
            f"unknown grade '{grade}'; the grades are {_names(order)}, weakest "
            "first (change them with `panelist grade order a,b,c`)",
            param="grade",
        )


def _names(items) -> str:
    return ", ".join(items) or "none"


def _problem(view: RosterView, alias: str, grade: str | None = None) -> str | None:
    """What makes a stored pin or ceiling unusable now, or None."""
    model = view.models.get(alias)
    if model is None:
        return "no longer on the roster (or its endpoint is gone)"
    if model.retired:
        return "retired"
    if grade is not None and model.grade != grade:
        return f"now of grade '{model.grade or '(none)'}'"
    return None
