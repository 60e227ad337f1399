"""What a race knows of grades (``GradeBook``): the model pinned for a grade, the ceiling, the
callable candidates of a grade and the grades' order, over ``metrics.roster.grades`` or plain
values; and the models the roster can call, strongest first (``strongest``), which is who
judges when the ceiling may not.

Invariants: a candidate is callable (of its grade, not retired, its endpoint present); the
order is weakest grade first, as ``roster.grades`` keeps it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from panelist.metrics.home import Home
from panelist.metrics.roster.grades import DEFAULT_ORDER, Grades
from panelist.metrics.roster.roster import Model, Roster, RosterView


@dataclass(frozen=True)
class GradeBook:
    """What a race needs to know of grades, shaped as ``metrics.roster.grades.Grades`` offers it:
    the pinned alias of a grade, the ceiling alias, and the callable candidates of a grade."""

    pinned: Callable[[str], str | None]
    ceiling: Callable[[], str | None]
    candidates: Callable[[str], list[str]]
    # the grades, weakest first (who judges when the ceiling may not: the strongest other)
    order: Callable[[], list[str]] = lambda: list(DEFAULT_ORDER)

    @classmethod
    def of(cls, grades, roster: Roster) -> "GradeBook":
        """Over a ``Grades(home)`` (``.pinned(grade)``, ``.ceiling()``,
        ``.candidates(grade, roster_view)``)."""
        return cls(
            grades.pinned,
            grades.ceiling,
            lambda grade: list(grades.candidates(grade, roster.view())),
            getattr(grades, "order", lambda: list(DEFAULT_ORDER)),
        )

    @classmethod
    def plain(
        cls,
        pinned: dict[str, str],
        ceiling: str | None,
        roster: Roster,
        candidates: dict[str, list[str]] | None = None,
        order: list[str] | None = None,
    ) -> "GradeBook":
        """From plain values; candidates default to the roster's (see ``roster_candidates``),
        the grades' order to ``DEFAULT_ORDER``."""
        order = list(order or DEFAULT_ORDER)
        return cls(
            pinned.get,
            lambda: ceiling,
            (lambda g: list(candidates.get(g, [])))
            if candidates is not None
            else (lambda g: roster_candidates(roster.view(), g)),
            lambda: order,
        )

    @classmethod
    def of_home(cls, home: Home, roster: Roster) -> "GradeBook":
        return cls.of(Grades(home), roster)


def strongest(grades: GradeBook, view: RosterView) -> list[Model]:
    """The models the roster can call, strongest first: by grade, strongest grade first (the
    grades' order), its pinned model before the others (by alias)."""
    out: dict[str, Model] = {}
    for grade in reversed(list(grades.order())):
        pinned = grades.pinned(grade)
        for alias in [getattr(pinned, "alias", pinned), *sorted(roster_candidates(view, grade))]:
            m = view.models.get(alias) if alias else None
            if m is not None and not m.retired and m.endpoint in view.endpoints:
                out.setdefault(m.alias, m)
    return list(out.values())


def roster_candidates(view: RosterView, grade: str) -> list[str]:
    """Every callable model of ``grade``: of that grade, not retired, its endpoint present."""
    return [
        m.alias
        for m in view.models.values()
        if m.grade == grade and not m.retired and m.endpoint in view.endpoints
    ]
