"""The common field set other tools write for review tasks, mapped onto the suite's kinds.

Fields: ``shape`` (``claim``, or ``bug`` / ``review`` / ``fault`` / ``seeded`` / ``rebench``:
code that holds a fault or, for a control, does not), ``must_find`` and ``must_not_claim``
clauses, ``score_in``, ``min_answer_chars`` and ``repo`` (the last three are read by the
loader, ``tasks``), and provenance that is kept but never sent nor hashed: ``upstream`` (the
project the code comes from) and ``source_url``. A clause is a string (``line 42``,
``lines 42-43``, ``FAULT: line 42``, ``NO FAULT``, ``VERDICT: TRUE``),
``{"any_of": [strings]}`` (each alternative a right answer), or ``{"regex": ..., "label": ...}``.

Invariants: the suite scores one strict first line (``answers``), so a clause is mapped onto
that line's forms, never onto words: a regex clause is the set of strict answers it accepts
(``FAULT: line N`` for the lines N the task shows, digits either side kept out so ``line 4``
never accepts ``line 41``; ``NO FAULT``; or exactly one of the verdicts), and one that accepts
none, both verdicts, both ``NO FAULT`` and a line, or lines more than ``MAX_KEY_SPAN`` apart is
refused. ``must_find`` gives the key: a claim's verdict, a bug's lines, or ``NO FAULT`` for a
control. ``must_not_claim`` names answers that are wrong; the strict scorer counts every answer
but the key wrong already, so for a bug or control it only has to agree with the key (one that
rejects the key is refused), and for a claim it may give the key by naming the other verdict.
Whatever cannot be mapped is refused with every field at fault at once (``Unmapped.problems``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from typing import Sequence

FIELDS = (
    "shape",
    "must_find",
    "must_not_claim",
    "score_in",
    "min_answer_chars",
    "repo",
    "upstream",
    "source_url",
)
CLAIM_SHAPES = ("claim",)
BUG_SHAPES = ("bug", "review", "fault", "seeded", "rebench")

_VERDICT = re.compile(r"^\s*(?:verdict\s*:\s*)?(true|false)\s*$", re.I)
_LINE_CLAUSE = re.compile(r"^\s*(?:fault\s*:\s*)?(?:lines?\s*)?(\d+)(?:\s*-\s*(\d+))?\s*$", re.I)
_NO_FAULT = re.compile(r"^\s*no\s+fault\s*$", re.I)
NO_FAULT = "NO FAULT"
MAX_KEY_SPAN = 200  # lines one clause may cover: a wider key would reward a vague answer


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
        elif (
            isinstance(item, dict)
            and set(item) == {"any_of"}
            and isinstance(item["any_of"], list)
            and all(isinstance(s, str) for s in item["any_of"])
            and item["any_of"]
        ):
            out.extend(item["any_of"])
        elif (
            isinstance(item, dict)
            and "regex" in item
            and set(item) <= {"regex", "label"}
            and isinstance(item["regex"], str)
            and isinstance(item.get("label", ""), str)
        ):
            try:
                # digits either side are kept out, so "line 4" never accepts "line 41"
                pattern = re.compile(rf"(?<!\d)(?:{item['regex']})(?!\d)", re.I)
            except re.error as exc:
                raise Unmapped(
                    name,
                    f"{item['regex']!r} is not a regular "
                    f"expression ({exc}); fix it or give the key as a string "
                    "('line 42')",
                ) from None
            out.append(_Regex(pattern, item.get("label", "")))
        else:
            raise Unmapped(
                name,
                'each clause is a string, {"any_of": [strings]} or {"regex": ..., "label": ...}',
            )
    return out


def key(
    data: dict, lines: Sequence[int] | None, *, control: bool = False, bug: bool = False
) -> tuple[str, bool | list[int] | None]:
    """``(kind, answer)`` of a task given in the common field set: a claim's true or false, a
    bug's lines, a control's None. ``lines``: the line numbers the task shows of its code (the
    first attached file's, or those its prompt carries), over which a regex clause is matched;
    None without code. ``control`` / ``bug``: whether the task's id ends in ``-control`` /
    ``-bug``. Raises ``Unmapped`` naming every field at fault."""
    problems: list[tuple[str, str]] = []
    find: list = []
    avoid: list = []
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
        problems.append(
            (
                "shape",
                "say what the task is: 'kind' (claim, bug, control) with "
                "'answer', or 'shape' with must_find",
            )
        )
    elif not control and shape not in CLAIM_SHAPES + BUG_SHAPES:
        problems.append(
            (
                "shape",
                f"{shape!r} cannot be mapped; use one of " + ", ".join(CLAIM_SHAPES + BUG_SHAPES),
            )
        )
    if problems:
        raise Unmapped(*problems[0], more=problems[1:])
    if shape in CLAIM_SHAPES and not control:
        return "claim", _claim_key(find, avoid)
    found, clean = _fault_key("must_find", find, lines)
    if clean and found:
        raise Unmapped(
            "must_find",
            "names both a faulty line and NO FAULT; a bug's "
            "must_find names its faulty line, a control's says NO FAULT",
        )
    if control or clean:
        if found:
            raise Unmapped(
                "must_find",
                "a control (its id ends in '-control') has no faulty "
                "line to find; leave must_find out, or give 'NO FAULT'",
            )
        _agrees(avoid, lines, None)
        return "control", None
    if not found:
        raise Unmapped(
            "must_find",
            "a bug task needs its faulty line in must_find "
            "('line 42'); a task without one is a control: give it an id ending "
            "in '-control'",
        )
    _agrees(avoid, lines, found)
    return "bug", found


def _claim_key(find: list, avoid: list) -> bool:
    says = set()
    for name, clauses, flip in (("must_find", find, False), ("must_not_claim", avoid, True)):
        for clause in clauses:
            if isinstance(clause, _Regex):
                accepted = {
                    key for key in (True, False) if clause.accepts(f"VERDICT: {str(key).upper()}")
                }
                if len(accepted) != 1:
                    raise Unmapped(
                        name,
                        f"the regex {clause!r} accepts "
                        f"{'both verdicts' if accepted else 'neither verdict'} "
                        "('VERDICT: TRUE', 'VERDICT: FALSE'); give the key as "
                        "'VERDICT: TRUE' or 'VERDICT: FALSE'",
                    )
                says.add(accepted.pop() != flip)
                continue
            m = _VERDICT.match(clause)
            if not m:
                raise Unmapped(
                    name,
                    f"{clause!r} cannot be mapped: a claim's "
                    "clause is 'VERDICT: TRUE' or 'VERDICT: FALSE'",
                )
            says.add((m.group(1).lower() == "true") != flip)
    if len(says) != 1:
        raise Unmapped(
            "must_find",
            "a claim needs one key: must_find "
            "'VERDICT: TRUE' or 'VERDICT: FALSE' (or must_not_claim the "
            "other), not " + ("both" if says else "neither"),
        )
    return says.pop()


def _fault_key(name: str, clauses: list, lines: Sequence[int] | None) -> tuple[list[int], bool]:
    """What ``must_find`` of a bug shape says: the faulty lines it names, and whether it says
    ``NO FAULT`` (a control's key)."""
    found: list[int] = []
    clean = False
    for clause in clauses:
        if isinstance(clause, _Regex):
            says_clean = clause.accepts(NO_FAULT)
            if lines is None:
                if says_clean:
                    clean = True
                    continue
                raise Unmapped(
                    name,
                    f"the regex {clause!r} is matched against the lines of "
                    "the code the task shows, and it shows none; attach the file "
                    "(see 'attach') or number the code's lines in the prompt "
                    "('  12| code')",
                )
            hit = [n for n in lines if clause.accepts(f"FAULT: line {n}")]
            if says_clean and hit:
                raise Unmapped(
                    name,
                    f"the regex {clause!r} accepts both NO FAULT and "
                    f"'FAULT: line {hit[0]}'; make it name one answer",
                )
            if says_clean:
                clean = True
                continue
            if not hit:
                raise Unmapped(
                    name,
                    f"the regex {clause!r} accepts no answer "
                    "'FAULT: line N' for a line the task shows, nor NO FAULT; the "
                    "suite scores that strict first line, never words: give the "
                    "faulty line ('line 42')",
                )
            if hit[-1] - hit[0] > MAX_KEY_SPAN:
                raise Unmapped(
                    name,
                    f"the regex {clause!r} accepts lines {hit[0]} to "
                    f"{hit[-1]}; name the faulty statement's lines ('lines 42-43')",
                )
            found.extend(hit)
            continue
        if _NO_FAULT.match(clause):
            clean = True
            continue
        m = _LINE_CLAUSE.match(clause)
        if not m:
            raise Unmapped(
                name,
                f"{clause!r} cannot be mapped: a bug's clause names its "
                "faulty line ('line 42', 'lines 42-43'), a control's says "
                "'NO FAULT'",
            )
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        if hi < lo or hi - lo > MAX_KEY_SPAN:
            raise Unmapped(name, f"{clause!r} is not a range of lines")
        found.extend(range(lo, hi + 1))
    return sorted(set(found)), clean


def _agrees(avoid: list, lines: Sequence[int] | None, key: list[int] | None) -> None:
    """Refuse a ``must_not_claim`` of a bug shape that rejects the right answer: ``NO FAULT``
    for a control (``key`` None), a line of the key for a bug. A clause in words is not read
    (the strict scorer counts every answer but the key wrong already)."""
    for clause in avoid:
        if isinstance(clause, _Regex):
            rejects_clean = clause.accepts(NO_FAULT)
            rejected = [n for n in key or () if clause.accepts(f"FAULT: line {n}")]
        elif _NO_FAULT.match(clause):
            rejects_clean, rejected = True, []
        elif m := _LINE_CLAUSE.match(clause):
            lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
            rejects_clean, rejected = False, [n for n in key or () if lo <= n <= hi]
        else:
            continue
        if key is None and rejects_clean:
            raise Unmapped(
                "must_not_claim",
                f"{clause!r} rejects NO FAULT, the one right "
                "answer of a control; drop it, or make the task a bug",
            )
        if rejected:
            raise Unmapped(
                "must_not_claim",
                f"{clause!r} rejects 'FAULT: line "
                f"{rejected[0]}', a line must_find names; drop one of them",
            )
