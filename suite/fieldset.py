"""The common field set other tools write for review tasks, mapped onto the suite's kinds.

Fields: ``shape`` (``claim``, or ``bug`` / ``review`` / ``fault``), ``must_find`` and
``must_not_claim`` clauses, ``score_in``, ``min_answer_chars`` and ``repo`` (the last three are
read by the loader, ``tasks``). A clause is a string (``line 42``, ``lines 42-43``,
``FAULT: line 42``, ``VERDICT: TRUE``), ``{"any_of": [strings]}`` (each alternative a right
answer), or ``{"regex": ..., "label": ...}``.

Invariants: the suite scores one strict first line (``answers``), so a clause is mapped onto
that line's forms, never onto words: a regex clause is the set of strict answers it accepts
(``FAULT: line N`` for the lines N of the first attached file, digits either side kept out so
``line 4`` never accepts ``line 41``; or exactly one of the verdicts), and one that accepts
none, both verdicts or lines more than ``MAX_KEY_SPAN`` apart is refused. Whatever cannot be
mapped is refused with every field at fault at once (``Unmapped.problems``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

FIELDS = ("shape", "must_find", "must_not_claim", "score_in", "min_answer_chars", "repo")
CLAIM_SHAPES = ("claim",)
BUG_SHAPES = ("bug", "review", "fault")

_VERDICT = re.compile(r"^\s*(?:verdict\s*:\s*)?(true|false)\s*$", re.I)
_LINE_CLAUSE = re.compile(r"^\s*(?:fault\s*:\s*)?(?:lines?\s*)?(\d+)(?:\s*-\s*(\d+))?\s*$", re.I)
MAX_KEY_SPAN = 200     # lines one clause may cover: a wider key would reward a vague answer


class Unmapped(Exception):
    """What of a task cannot be mapped: ``problems``, (field, message) each."""

    def __init__(self, fieldname: str, message: str, more=()):
        super().__init__(message)
        self.problems = [(fieldname, message), *more]


@dataclass(frozen=True)
class _Regex:
    """A ``{"regex": ..., "label": ...}`` clause: mapped by the strict answers it accepts."""

    pattern: re.Pattern
    label: str

    def accepts(self, answer: str) -> bool:
        return self.pattern.search(answer) is not None

    def __repr__(self) -> str:
        return repr(self.label or self.pattern.pattern)


def _clauses(name: str, value) -> list:
    """A clause list flattened to its strings and regexes; ``any_of`` alternatives are all
    kept."""
    if value is None:
        return []
    items = value if isinstance(value, list) else [value]
    out: list = []
    for item in items:
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, dict) and set(item) == {"any_of"} \
                and isinstance(item["any_of"], list) \
                and all(isinstance(s, str) for s in item["any_of"]) and item["any_of"]:
            out.extend(item["any_of"])
        elif isinstance(item, dict) and "regex" in item and set(item) <= {"regex", "label"} \
                and isinstance(item["regex"], str) and isinstance(item.get("label", ""), str):
            try:
                # digits either side are kept out, so "line 4" never accepts "line 41"
                pattern = re.compile(rf"(?<!\d)(?:{item['regex']})(?!\d)", re.I)
            except re.error as exc:
                raise Unmapped(name, f"{item['regex']!r} is not a regular "
                               f"expression ({exc}); fix it or give the key as a string "
                               "('line 42')") from None
            out.append(_Regex(pattern, item.get("label", "")))
        else:
            raise Unmapped(name, "each clause is a string, {\"any_of\": [strings]} "
                           "or {\"regex\": ..., \"label\": ...}")
    return out


def key(data: dict, total: int | None, *, control: bool = False,
        bug: bool = False) -> tuple[str, bool | list[int] | None]:
    """``(kind, answer)`` of a task given in the common field set: a claim's true or false, a
    bug's lines, a control's None. ``total``: the first attached file's lines (None without
    one), over which a regex clause is matched; ``control`` / ``bug``: whether the task's id
    ends in ``-control`` / ``-bug``. Raises ``Unmapped`` naming every field at fault."""
    problems: list[tuple[str, str]] = []
    find: list = []
    try:
        find = _clauses("must_find", data.get("must_find"))
    except Unmapped as exc:
        problems.extend(exc.problems)
    try:
        avoid = _clauses("must_not_claim", data.get("must_not_claim"))
    except Unmapped as exc:
        problems.extend(exc.problems)
    shape = data.get("shape")
    if shape is None and bug:
        shape = "bug"
    control = control and shape in (None, *BUG_SHAPES)
    if not control and shape is None:
        problems.append(("shape", "say what the task is: 'kind' (claim, bug, control) with "
                         "'answer', or 'shape' with must_find"))
    elif not control and shape not in CLAIM_SHAPES + BUG_SHAPES:
        problems.append(("shape", f"{shape!r} cannot be mapped; use one of "
                         + ", ".join(CLAIM_SHAPES + BUG_SHAPES)))
    if problems:
        raise Unmapped(*problems[0], more=problems[1:])
    if control:
        if find:
            raise Unmapped("must_find", "a control (its id ends in '-control') has nothing "
                           "to find; leave must_find out")
        return "control", None
    if shape in CLAIM_SHAPES:
        return "claim", _claim_key(find, avoid)
    return "bug", _bug_key(find, total)


def _claim_key(find: list, avoid: list) -> bool:
    says = set()
    for name, clauses, flip in (("must_find", find, False), ("must_not_claim", avoid, True)):
        for clause in clauses:
            if isinstance(clause, _Regex):
                accepted = {key for key in (True, False)
                            if clause.accepts(f"VERDICT: {str(key).upper()}")}
                if len(accepted) != 1:
                    raise Unmapped(name, f"the regex {clause!r} accepts "
                                   f"{'both verdicts' if accepted else 'neither verdict'} "
                                   "('VERDICT: TRUE', 'VERDICT: FALSE'); give the key as "
                                   "'VERDICT: TRUE' or 'VERDICT: FALSE'")
                says.add(accepted.pop() != flip)
                continue
            m = _VERDICT.match(clause)
            if not m:
                raise Unmapped(name, f"{clause!r} cannot be mapped: a claim's "
                               "clause is 'VERDICT: TRUE' or 'VERDICT: FALSE'")
            says.add((m.group(1).lower() == "true") != flip)
    if len(says) != 1:
        raise Unmapped("must_find", "a claim needs one key: must_find "
                       "'VERDICT: TRUE' or 'VERDICT: FALSE' (or must_not_claim the "
                       "other), not " + ("both" if says else "neither"))
    return says.pop()


def _bug_key(find: list, total: int | None) -> list[int]:
    lines: list[int] = []
    for clause in find:
        if isinstance(clause, _Regex):
            if total is None:
                raise Unmapped("must_find", f"the regex {clause!r} is matched "
                               "against the lines of the first attached file, and none was "
                               "read; attach it (see 'attach')")
            hit = [n for n in range(1, total + 1) if clause.accepts(f"FAULT: line {n}")]
            if not hit:
                raise Unmapped("must_find", f"the regex {clause!r} accepts no "
                               "answer 'FAULT: line N' for a line of the file; the suite "
                               "scores that strict first line, never words: give the "
                               "faulty line ('line 42')")
            if hit[-1] - hit[0] > MAX_KEY_SPAN:
                raise Unmapped("must_find", f"the regex {clause!r} accepts lines "
                               f"{hit[0]} to {hit[-1]}; name the faulty statement's lines "
                               "('lines 42-43')")
            lines.extend(hit)
            continue
        m = _LINE_CLAUSE.match(clause)
        if not m:
            raise Unmapped("must_find", f"{clause!r} cannot be mapped: a bug's "
                           "clause names its faulty line ('line 42', 'lines 42-43')")
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        if hi < lo or hi - lo > MAX_KEY_SPAN:
            raise Unmapped("must_find", f"{clause!r} is not a range of lines")
        lines.extend(range(lo, hi + 1))
    if not lines:
        raise Unmapped("must_find", "a bug task needs its faulty line in "
                       "must_find ('line 42'); a task without one is a control: give "
                       "it an id ending in '-control'")
    return sorted(set(lines))
