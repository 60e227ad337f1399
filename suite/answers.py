"""The strict answer parser and scorer: the one place that decides what an answer says.

The answer's first non-empty line, once a leading reasoning block (``<think>…</think>``,
``<thinking>…</thinking>``, ``<reasoning>…</reasoning>``) and code-fence lines are set aside,
must be exactly one of (case and surrounding markdown emphasis aside, a final full stop
allowed)::

    VERDICT: TRUE
    VERDICT: FALSE
    FAULT: line N[, M …]       also "lines 12-13", "line 12 and line 14", "Line 0153"
    NO FAULT

Invariants:

* Anything else is *unparseable*: scored 0 and flagged, never counted as right. So is an answer
  that says a second, different verdict on a later line (a hedge: "VERDICT: TRUE" then
  "VERDICT: FALSE", or "FAULT: line 3" then "NO FAULT"), a reasoning block left open, an answer
  of the wrong form for its task (a claim answered with FAULT), and an answer shorter than the
  task's ``min_answer_chars``.
* Only the verdict line is read for numbers: a later line quoting "503" never becomes a line.
* A bug task is right when every line the answer names is a line of the faulty statement (the
  key lists them all); naming a wider range to cover the fault is wrong, so spraying lines
  never pays. A control is right only on ``NO FAULT``; a claim only on its key.
* Scoring never looks at the call: failures (status, timeout, empty) are classified by the
  runner from the call itself, never from words in an answer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_RANGE = 500  # lines one "lines a-b" may span before it is refused as unparseable

FLAGS = ("unparseable", "hedged", "open_reasoning", "wrong_form", "short")

_REASONING = re.compile(r"\A\s*<(think|thinking|reasoning)>(.*?)</\1>", re.S | re.I)
_OPEN_REASONING = re.compile(r"\A\s*<(think|thinking|reasoning)>", re.I)
_FENCE = re.compile(r"^\s*(```|~~~)[\w+.-]*\s*$")
_DECOR = " \t*_`>#"
_VERDICT = re.compile(r"verdict\s*:\s*(true|false)\.?", re.I)
_NO_FAULT = re.compile(r"no\s+fault\.?", re.I)
_FAULT = re.compile(r"fault\s*:\s*(.+?)\.?", re.I)
_SPEC = re.compile(r"(?:lines?\s*)?(\d{1,7})(?:\s*[-–]\s*(?:lines?\s*)?(\d{1,7}))?", re.I)
_SEP = re.compile(r"\s*(?:,|;|\band\b|&)\s*", re.I)


@dataclass(frozen=True)
class Parsed:
    """What an answer says: ``verdict`` is true | false | fault | no_fault, or None with a
    ``flag`` saying why it could not be read."""

    verdict: str | None
    lines: tuple[int, ...] = ()
    flag: str = ""

    @property
    def readable(self) -> bool:
        return self.verdict is not None


@dataclass(frozen=True)
class Scored:
    verdict: str | None
    lines: tuple[int, ...]
    right: bool
    flag: str  # "" when the answer was read, else one of FLAGS

    @property
    def score(self) -> int:
        return int(self.right)


def _bare(line: str) -> str:
    return line.strip().strip(_DECOR).strip()


def _read_line(line: str) -> Parsed | None:
    """The verdict one line states, or None when the line is not exactly one."""
    text = _bare(line)
    m = _VERDICT.fullmatch(text)
    if m:
        return Parsed(m.group(1).lower())
    if _NO_FAULT.fullmatch(text):
        return Parsed("no_fault")
    m = _FAULT.fullmatch(text)
    if not m:
        return None
    lines: set[int] = set()
    for part in _SEP.split(m.group(1).strip()):
        spec = _SPEC.fullmatch(part)
        if not spec:
            return None
        lo = int(spec.group(1))
        hi = int(spec.group(2)) if spec.group(2) else lo
        if lo < 1 or hi < lo or hi - lo >= MAX_RANGE:
            return None
        lines.update(range(lo, hi + 1))
    return Parsed("fault", tuple(sorted(lines))) if lines else None


def parse(text: str) -> Parsed:
    """Read an answer strictly (see the module docstring)."""
    body = text or ""
    m = _REASONING.match(body)
    if m:
        body = body[m.end() :]
    elif _OPEN_REASONING.match(body):
        return Parsed(None, flag="open_reasoning")
    lines = body.splitlines()
    for i, line in enumerate(lines):
        if line.strip() and not _FENCE.match(line):
            break
    else:
        return Parsed(None, flag="unparseable")
    first = _read_line(lines[i])
    if first is None:
        return Parsed(None, flag="unparseable")
    for line in lines[i + 1 :]:
        low = line.lower()  # a cheap test first: most explanation lines name no verdict word
        if "fault" in low or "verdict" in low:
            said = _read_line(line)
            if said is not None and said != first:
                return Parsed(None, flag="hedged")
    return first


def score(kind: str, answer, text: str, *, min_chars: int = 0) -> Scored:
    """Score ``text`` against a task's ``kind`` and key (``answer``)."""
    if min_chars and len((text or "").strip()) < min_chars:
        return Scored(None, (), False, "short")
    p = parse(text)
    if not p.readable:
        return Scored(None, (), False, p.flag)
    if kind == "claim":
        if p.verdict not in ("true", "false"):
            return Scored(p.verdict, p.lines, False, "wrong_form")
        return Scored(p.verdict, (), (p.verdict == "true") == answer, "")
    if p.verdict not in ("fault", "no_fault"):
        return Scored(p.verdict, (), False, "wrong_form")
    if kind == "control":
        return Scored(p.verdict, p.lines, p.verdict == "no_fault", "")
    right = p.verdict == "fault" and set(p.lines) <= set(answer)
    return Scored(p.verdict, p.lines, right, "")
