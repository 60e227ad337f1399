"""A task's focus: the lines of each attached file that its excerpt must hold.

A file over ``excerpt.LONG`` lines is shown as an excerpt (``excerpt``), so the lines that
decide a task must be named, file by file. A task's own focus (``Task.focus``) has one entry
per attached file, in ``attach`` order, each a sorted tuple of that file's line numbers (empty
when none is named). It comes from the task's ``focus`` field, or for a claim without one from
the lines its ``why`` cites:

* ``focus`` as a line (``142``), a range (``"120-134"``) or a list of them names lines of the
  first attached file; as an object it names lines per file, keyed by the attached path or, if
  no other attached file shares it, its file name: ``{"route.py": "120-134", "gateway.py": 40}``.
* ``why`` cites ``line 142``, ``lines 120-134`` or ``L142`` in the first file, and
  ``route.py:142`` in the attached file of that path or file name (a file not attached is
  never cited).

Invariants: every line named lies in its file; one file's focus spans at most ``WINDOW`` lines
(a wider ``focus`` is refused; ``why`` citations too far apart leave that file without a focus).
What a bug's excerpt holds in its first file is its key, and a control's excerpts follow its
bug's (``prompts.focus_of``), so only a claim names its first file's focus and a control none.
"""

from __future__ import annotations

import re

from panelist.suite.excerpt import WINDOW, file_lines

Focus = tuple[tuple[int, ...], ...]

_LINES = re.compile(r"^\s*(?:lines?\s*)?(\d{1,7})(?:\s*[-–]\s*(\d{1,7}))?\s*$", re.I)
# where a why cites a line: "line 142", "lines 120-134", "L142", "L120-L134", "m.py:142"
_CITED = re.compile(
    r"(?:\blines?\s+|\bL|(?<![\w./-])([\w./-]*[\w.]):)(\d{1,7})"
    r"(?:\s*[-–]\s*L?(\d{1,7}))?\b",
    re.I,
)
HOW = (
    'a line of the file (142), a range ("120-134"), or a list of them; per file, an object '
    'keyed by the attached path: {"route.py": "120-134"}'
)


class Refused(ValueError):
    """A ``focus`` that cannot be shown; the message says what to give instead."""


def none(paths: list[str]) -> Focus:
    return tuple(() for _ in paths)


def index_of(name: str, paths: list[str]) -> int | None:
    """The attached file ``name`` means: its path, else the one file of that file name."""
    if name in paths:
        return paths.index(name)
    named = [i for i, p in enumerate(paths) if p.rsplit("/", 1)[-1] == name.rsplit("/", 1)[-1]]
    return named[0] if len(named) == 1 else None


def cited(why: str, paths: list[str], texts: list[str]) -> Focus:
    """The lines ``why`` cites, per attached file; a file whose cited lines lie too far apart
    for one excerpt gets none."""
    found: list[list[int]] = [[] for _ in paths]
    for m in _CITED.finditer(why or ""):
        name, lo = m.group(1), int(m.group(2))
        hi = int(m.group(3) or lo)
        i = 0 if name is None else index_of(name, paths)
        if i is None or not paths:
            continue
        found[i].extend([lo, hi] if lo <= hi else [lo])
    out = []
    for lines, text in zip(found, texts):
        total = len(file_lines(text))
        lines = sorted({n for n in lines if 1 <= n <= total})
        out.append(tuple(lines) if lines and lines[-1] - lines[0] < WINDOW else ())
    return tuple(out)


def given(value, paths: list[str], texts: list[str], *, kind: str) -> Focus:
    """The focus a task's ``focus`` field names, per attached file; raises ``Refused``."""
    if kind == "control":
        raise Refused(
            "a control's excerpts follow its bug's (the same lines, so both halves of "
            "the pair show the same window); name the focus on the bug and drop it "
            "here"
        )
    if not paths:
        raise Refused(
            "names lines of the attached files, and the task attaches none; attach "
            "the file or drop 'focus'"
        )
    per_file: dict[int, object] = {}
    if isinstance(value, dict) and value:
        for name, lines in value.items():
            i = index_of(name, paths)
            if i is None:
                raise Refused(
                    f"{name!r} is none of the attached files ("
                    + ", ".join(paths)
                    + "); key each focus by an attached path"
                )
            per_file[i] = lines
    else:
        per_file[0] = value
    if kind == "bug" and 0 in per_file:
        raise Refused(
            "only a claim names the focus of its first file: a bug's excerpt there "
            "holds its faulty lines; drop it, or name other attached files' focus as "
            f'{{"{paths[-1]}": "120-134"}}'
        )
    out: list[tuple[int, ...]] = [()] * len(paths)
    for i, lines in per_file.items():
        out[i] = _lines(lines, paths[i], len(file_lines(texts[i])))
    return tuple(out)


def _lines(value, path: str, total: int) -> tuple[int, ...]:
    lines: list[int] = []
    for item in value if isinstance(value, list) and value else [value]:
        if isinstance(item, int) and not isinstance(item, bool):
            lo = hi = item
        elif isinstance(item, str) and (m := _LINES.match(item)):
            lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        else:
            raise Refused(f"{item!r} is not {HOW}")
        if lo < 1 or hi < lo:
            raise Refused(f"{item!r} is not {HOW}")
        if hi > total:
            raise Refused(f"line {hi} is past the end of {path} ({total} lines)")
        lines.extend(range(lo, hi + 1))
    lines = sorted(set(lines))
    if lines[-1] - lines[0] >= WINDOW:
        raise Refused(
            f"lines {lines[0]}-{lines[-1]} of {path} are more than an excerpt shows "
            f"({WINDOW} lines); name the lines that decide the task"
        )
    return tuple(lines)
