"""What a race is set to before it runs: its inputs, the verdict's margin, the candidates and
judges, the judging orders and jury weights, the earlier looks of its job, the rubric, the extra
tool calls that do not count and a scorer. ``Benchmark`` is a ``RaceSettings``: each setter
checks its value, refusing a wrong one with what to pass instead, and returns the benchmark,
so settings chain.

Invariants: the defaults are a race of no input yet, judged by the ceiling model in both orders
with equal weights, at the verdict's default margin, as a first look, with no rubric, no extra
tool call allowed and no scorer; the candidates and judges named are kept in order, without
repeats.
"""

from __future__ import annotations

from typing import Callable, Self

from panelist.metrics.race import checks, jobs, jury, tooldiff, verdict


class RaceSettings:
    """A race's settings, each with its setter; see the module docstring."""

    def __init__(self) -> None:
        self._inputs: list = []
        self._listed = False  # set_inputs: run() returns a list
        self._margin = verdict.MARGIN
        self._candidates: list[str] | None = None
        self._judges: list[str] | None = None
        self._orders = "both"
        self._jury_weights: str | None = None
        self._on_judged: Callable[[str], None] | None = None
        self._rubric: str | None = None
        self._allow = None  # tooldiff.check_allow: extra tool calls that do not count
        self._scorer: Callable[[object, object], float | None] | None = None
        self._earlier = jobs.Earlier(None)  # the job's earlier looks (none: a first race)

    def set_input(self, value) -> Self:
        """Race the job on this one input; ``run()`` returns what its reference returned."""
        self._inputs, self._listed = [value], False
        return self

    def set_inputs(self, values: list) -> Self:
        """Race the job on each of these inputs (one input says little about a job); the
        reference runs once per input and ``run()`` returns the list of what they returned."""
        if not isinstance(values, (list, tuple)) or not values:
            raise TypeError(
                "set_inputs takes a non-empty list of the job's inputs, one per "
                "item (set_input(x) takes a single one)"
            )
        self._inputs, self._listed = list(values), True
        return self

    def set_margin(self, points: float) -> Self:
        """How many points of 10 worse than the pinned model a model may be and still be good
        enough (default 1): the verdict's non-inferiority margin."""
        self._margin = verdict.check_margin(points)
        return self

    def set_candidates(self, aliases: list[str]) -> Self:
        if isinstance(aliases, str) or not all(isinstance(a, str) for a in aliases):
            raise TypeError("set_candidates takes a list of model aliases")
        self._candidates = list(dict.fromkeys(aliases))
        return self

    def set_judges(self, aliases: list[str]) -> Self:
        """Judge with these models instead of the ceiling model alone: a jury, of distinct
        families, none of a candidate's or the reference's (refused otherwise, at ``run``)."""
        if isinstance(aliases, str) or not aliases or not all(isinstance(a, str) for a in aliases):
            raise TypeError("set_judges takes a non-empty list of model aliases")
        self._judges = list(dict.fromkeys(aliases))
        return self

    def set_orders(self, orders: str) -> Self:
        """``"both"`` (default): every run is judged with the reference shown first and again
        with the candidate first; ``"random"``: once, in an order drawn per run (recorded)."""
        if orders not in jury.ORDERS:
            raise ValueError(f"orders must be one of {', '.join(jury.ORDERS)}, not {orders!r}")
        self._orders = orders
        return self

    def set_jury_weights(self, how: str | None) -> Self:
        """``"agreement"``: each judge counts in a run's pooled scores by its κ against people
        in its latest judge check of general work (else of every shape), floored at 0
        (``race.checks``); a judge never checked refuses the race. None: equal weights."""
        if how is not None and how not in checks.WEIGHTS:
            raise ValueError(
                f"jury weights must be one of {', '.join(checks.WEIGHTS)} or None, not {how!r}"
            )
        self._jury_weights = how
        return self

    def set_looks(self, earlier: "jobs.Earlier") -> Self:
        """Race this as a look of a job (``metrics.race.jobs``): its report holds the earlier
        looks' rows beside its own, and its verdict is tested at this look's share."""
        if not isinstance(earlier, jobs.Earlier):
            raise TypeError("set_looks takes a jobs.Earlier")
        self._earlier = earlier
        return self

    @property
    def earlier(self) -> "jobs.Earlier":
        """The job this race is a look of, and what it carries from the earlier looks."""
        return self._earlier

    def on_judged(self, fn: Callable[[str], None] | None) -> Self:
        """``fn(alias)`` hears each candidate run's judging end (judged, void or failed)."""
        self._on_judged = fn
        return self

    def set_rubric(self, text: str) -> Self:
        if not isinstance(text, str):
            raise TypeError("the rubric is plain text")
        self._rubric = text
        return self

    def set_allow_extra_tools(self, allow) -> Self:
        """Which calls to a tool the reference did not call do not count against accuracy:
        ``True`` (any), a list of tool names, or ``None`` (none: the default, since code cannot
        tell a harmless call from one that deletes an order)."""
        self._allow = tooldiff.check_allow(allow)
        return self

    def set_scorer(self, fn: Callable[[object, object], float | None]) -> Self:
        """``fn(reference_output, output) -> float in [0, 1]``, or None when the pair cannot be
        compared; the judge runs beside it either way."""
        if not callable(fn):
            raise TypeError("the scorer is a callable fn(reference_output, output)")
        self._scorer = fn
        return self
