"""Suite tasks: one folder each, ``<root>/<id>/task.json`` plus optional ``fixtures/``.

A task is one of three kinds:

* ``claim``: a statement about some code; the key (``answer``) is ``true`` or ``false``.
* ``bug``: code with one seeded fault; the key is the line numbers of the faulty statement in
  the first attached file (any of them is a right answer).
* ``control``: the same code untouched; it has no key (only ``NO FAULT`` is right). A control
  is paired with the bug whose id it extends by ``-control`` (``bisect-insort`` and
  ``bisect-insort-control``); precision and recall are counted over such pairs.

Fields of ``task.json`` (our own set): ``id`` (the folder's name), ``title``, ``kind``,
``prompt``, ``attach`` (paths under ``fixtures/``, or under ``repo`` when given, which must lie in
the task's folder or a repository named with ``--repo``; each is appended to the prompt under a
``===== FILE: <path> =====`` header), ``answer``, ``why`` (never sent),
provenance ``source``, ``license``, ``created``, and ``draft`` (drafts run only when named).

The common field set other tools write is read too and mapped onto the kinds: ``shape``
(``claim``, or ``bug`` / ``review`` / ``fault``), ``must_find`` and ``must_not_claim`` clauses
(a string, ``{"any_of": [...]}``, ``{"regex": ..., "label": ...}``), ``score_in:
"first_line"``, ``min_answer_chars``, ``repo`` + ``attach``, and the ``-control`` id suffix.
Whatever cannot be mapped is refused with a message naming the field.

Invariants: a loaded ``Task`` is whole and valid (files read, key checked against its kind); its
``hash`` changes whenever anything a model sees or the key changes (so a rerun redoes edited
tasks), and never when ``why``, ``title`` or provenance change; a task reads only regular files
inside its own folder or a repository named on the command line, within the size caps
(``taskfiles``), and a task that names anything else does not load.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

from panelist.metrics.store import jsonwire
from panelist.metrics.errors import BadRequest
from panelist.suite import taskfiles
from panelist.suite.excerpt import file_lines

STARTER = Path(__file__).resolve().parent / "tasks"   # the pack that ships with the project
KINDS = ("claim", "bug", "control")
CONTROL_SUFFIX = "-control"
OWN_FIELDS = ("id", "title", "kind", "prompt", "attach", "answer", "why", "source", "license",
              "created", "draft")
COMMON_FIELDS = ("shape", "must_find", "must_not_claim", "score_in", "min_answer_chars", "repo")
CLAIM_SHAPES = ("claim",)
BUG_SHAPES = ("bug", "review", "fault")
ID_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,119}$")


class TaskInvalid(BadRequest):
    """Raised when a task folder cannot be loaded; the message names the folder and field."""

    def __init__(self, where: Path | str, fieldname: str, message: str):
        super().__init__(f"task {where}: field '{fieldname}': {message}", param=fieldname)
        self.field = fieldname
        self.folder = Path(where)


@dataclass(frozen=True)
class Attached:
    """One file a prompt carries: the path as the task names it, and its text."""

    path: str
    text: str


@dataclass(frozen=True)
class Task:
    id: str
    title: str
    kind: str                         # claim | bug | control
    prompt: str
    files: tuple[Attached, ...]
    answer: bool | tuple[int, ...] | None   # claim: bool; bug: faulty lines; control: None
    why: str = ""
    source: str = ""
    license: str = ""
    created: str = ""
    draft: bool = False
    min_answer_chars: int = 0         # from the common field set; 0 means no floor
    folder: Path | None = field(default=None, compare=False)

    @property
    def pair(self) -> str:
        """The bug/control pair this task belongs to: the id without ``-control``."""
        return self.id[:-len(CONTROL_SUFFIX)] if self.kind == "control" else self.id

    @property
    def hash(self) -> str:
        """A digest of everything a model sees and of the key."""
        files = [[f.path, hashlib.sha256(f.text.encode()).hexdigest()] for f in self.files]
        answer = list(self.answer) if isinstance(self.answer, tuple) else self.answer
        blob = jsonwire.dumps({"kind": self.kind, "prompt": self.prompt, "files": files,
                               "answer": answer, "min": self.min_answer_chars},
                              sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


def load_task(folder: str | Path, repos=()) -> Task:
    """The task in ``folder`` (which holds ``task.json``); raises ``TaskInvalid`` saying why.
    ``repos``: the repositories named on the command line, which a task's ``repo`` may point
    into (``taskfiles.repositories``)."""
    folder = Path(folder)
    try:
        raw = taskfiles.task_json(folder)
    except FileNotFoundError:
        raise TaskInvalid(folder, "task.json", "no task.json in this folder; write one or "
                          "remove the folder") from None
    except taskfiles.Refused as exc:
        raise TaskInvalid(folder, exc.field, exc.message) from None
    try:
        data = jsonwire.loads(raw)
    except ValueError as exc:
        raise TaskInvalid(folder, "task.json", f"not valid JSON ({exc}); fix the file") from None
    if not isinstance(data, dict):
        raise TaskInvalid(folder, "task.json", "must hold one JSON object")
    unknown = sorted(set(data) - set(OWN_FIELDS) - set(COMMON_FIELDS))
    if unknown:
        raise TaskInvalid(folder, unknown[0], "not a task field; use only: "
                          + ", ".join(OWN_FIELDS + COMMON_FIELDS))
    return _build(folder, data, tuple(repos))


def _build(folder: Path, data: dict, repos: tuple[Path, ...]) -> Task:
    def text(name: str, required: bool = False) -> str:
        value = data.get(name, "")
        if value is None:
            value = ""
        if not isinstance(value, str):
            raise TaskInvalid(folder, name, f"must be a string, not {type(value).__name__}")
        if required and not value.strip():
            raise TaskInvalid(folder, name, "is required and may not be empty")
        return value

    tid = text("id", required=True)
    if not ID_RE.match(tid):
        raise TaskInvalid(folder, "id", f"{tid!r} is not a task id: use lower-case letters, "
                          "digits, '.', '_' and '-' (up to 120), starting with a letter or digit")
    if tid != folder.name:
        raise TaskInvalid(folder, "id", f"{tid!r} differs from its folder's name "
                          f"{folder.name!r}; make them the same")
    draft = data.get("draft", False)
    if not isinstance(draft, bool):
        raise TaskInvalid(folder, "draft", "must be true or false")
    min_chars = data.get("min_answer_chars", 0)
    if isinstance(min_chars, bool) or not isinstance(min_chars, int) or min_chars < 0:
        raise TaskInvalid(folder, "min_answer_chars", "must be a whole number of characters, "
                          "0 or more")
    score_in = data.get("score_in", "first_line")
    if score_in != "first_line":
        raise TaskInvalid(folder, "score_in", f"{score_in!r} cannot be mapped: the suite scores "
                          "the answer's first line only; use \"first_line\" or leave it out")

    if "kind" in data:
        for name in ("shape", "must_find", "must_not_claim"):
            if name in data:
                raise TaskInvalid(folder, name, "a task with 'kind' gives its key in 'answer'; "
                                  f"drop '{name}' or drop 'kind' and 'answer'")
        kind = data["kind"]
        if kind not in KINDS:
            raise TaskInvalid(folder, "kind", f"{kind!r} is not a kind; use one of "
                              + ", ".join(KINDS))
        answer = _own_answer(folder, kind, data.get("answer"))
    else:
        if "answer" in data:
            raise TaskInvalid(folder, "answer", "give 'kind' with 'answer' (or 'shape' with "
                              "'must_find' / 'must_not_claim' instead of both)")
        kind, answer = _common_key(folder, tid, data)
    if kind == "control" and not tid.endswith(CONTROL_SUFFIX):
        raise TaskInvalid(folder, "id", f"a control's id ends in '{CONTROL_SUFFIX}' after its "
                          f"bug's id; rename it {tid + CONTROL_SUFFIX!r}")
    if kind != "control" and tid.endswith(CONTROL_SUFFIX):
        raise TaskInvalid(folder, "kind", f"an id ending in '{CONTROL_SUFFIX}' names a control; "
                          f"make the kind 'control' or rename the task")

    files = _attached(folder, data, repos)
    if kind in ("bug", "control") and not files:
        raise TaskInvalid(folder, "attach", f"a {kind} task needs the code to review: attach "
                          "at least one file")
    if kind == "bug":
        lines = len(file_lines(files[0].text))
        beyond = [n for n in answer if n > lines]
        if beyond:
            raise TaskInvalid(folder, "answer", f"line {beyond[0]} is past the end of "
                              f"{files[0].path} ({lines} lines); the key's lines are in the "
                              "first attached file")
    return Task(id=tid, title=text("title") or tid, kind=kind, prompt=text("prompt", True),
                files=files, answer=answer, why=text("why"), source=text("source"),
                license=text("license"), created=text("created"), draft=draft,
                min_answer_chars=min_chars, folder=folder)


def _own_answer(folder: Path, kind: str, answer):
    if kind == "claim":
        if not isinstance(answer, bool):
            raise TaskInvalid(folder, "answer", "a claim's key is true or false")
        return answer
    if kind == "control":
        if answer is not None:
            raise TaskInvalid(folder, "answer", "a control has no key: leave 'answer' out or "
                              "null (only NO FAULT is right)")
        return None
    return _lines(folder, "answer", answer)


def _lines(folder: Path, name: str, value) -> tuple[int, ...]:
    if isinstance(value, int) and not isinstance(value, bool):
        value = [value]
    if not isinstance(value, list) or not value or not all(
            isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in value):
        raise TaskInvalid(folder, name, "a bug's key is a list of line numbers (1 or more), "
                          "e.g. [41, 42] for a statement on two lines")
    return tuple(sorted(set(value)))


# -- the common field set ----------------------------------------------------------------------

_VERDICT = re.compile(r"^\s*(?:verdict\s*:\s*)?(true|false)\s*$", re.I)
_LINE_CLAUSE = re.compile(r"^\s*(?:fault\s*:\s*)?(?:lines?\s*)?(\d+)(?:\s*-\s*(\d+))?\s*$", re.I)


def _clauses(folder: Path, name: str, value) -> list[str]:
    """A clause list flattened to its strings; ``any_of`` alternatives are all kept."""
    if value is None:
        return []
    items = value if isinstance(value, list) else [value]
    out: list[str] = []
    for item in items:
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, dict) and set(item) == {"any_of"} \
                and isinstance(item["any_of"], list) \
                and all(isinstance(s, str) for s in item["any_of"]) and item["any_of"]:
            out.extend(item["any_of"])
        elif isinstance(item, dict) and "regex" in item:
            raise TaskInvalid(folder, name, "a regex clause cannot be mapped: the suite scores "
                              "one strict first line, never words; give the key as strings "
                              "('line 42', 'VERDICT: TRUE')")
        else:
            raise TaskInvalid(folder, name, "each clause is a string or {\"any_of\": [strings]}")
    return out


def _common_key(folder: Path, tid: str, data: dict):
    find = _clauses(folder, "must_find", data.get("must_find"))
    avoid = _clauses(folder, "must_not_claim", data.get("must_not_claim"))
    shape = data.get("shape")
    if tid.endswith(CONTROL_SUFFIX) and shape in (None, *BUG_SHAPES):
        if find:
            raise TaskInvalid(folder, "must_find", "a control (its id ends in "
                              f"'{CONTROL_SUFFIX}') has nothing to find; leave must_find out")
        return "control", None
    if shape in CLAIM_SHAPES:
        says = set()
        for name, clauses, flip in (("must_find", find, False), ("must_not_claim", avoid, True)):
            for clause in clauses:
                m = _VERDICT.match(clause)
                if not m:
                    raise TaskInvalid(folder, name, f"{clause!r} cannot be mapped: a claim's "
                                      "clause is 'VERDICT: TRUE' or 'VERDICT: FALSE'")
                says.add((m.group(1).lower() == "true") != flip)
        if len(says) != 1:
            raise TaskInvalid(folder, "must_find", "a claim needs one key: must_find "
                              "'VERDICT: TRUE' or 'VERDICT: FALSE' (or must_not_claim the "
                              "other), not " + ("both" if says else "neither"))
        return "claim", says.pop()
    if shape in BUG_SHAPES:
        lines: list[int] = []
        for clause in find:
            m = _LINE_CLAUSE.match(clause)
            if not m:
                raise TaskInvalid(folder, "must_find", f"{clause!r} cannot be mapped: a bug's "
                                  "clause names its faulty line ('line 42', 'lines 42-43')")
            lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
            if hi < lo or hi - lo > 200:
                raise TaskInvalid(folder, "must_find", f"{clause!r} is not a range of lines")
            lines.extend(range(lo, hi + 1))
        if not lines:
            raise TaskInvalid(folder, "must_find", "a bug task needs its faulty line in "
                              "must_find ('line 42'); a task without one is a control: give "
                              f"it an id ending in '{CONTROL_SUFFIX}'")
        return "bug", _lines(folder, "must_find", lines)
    if shape is None:
        raise TaskInvalid(folder, "shape", "say what the task is: 'kind' (claim, bug, control) "
                          "with 'answer', or 'shape' with must_find")
    raise TaskInvalid(folder, "shape", f"{shape!r} cannot be mapped; use one of "
                      + ", ".join(CLAIM_SHAPES + BUG_SHAPES))


# -- attached files ----------------------------------------------------------------------------

def _attached(folder: Path, data: dict, repos: tuple[Path, ...]) -> tuple[Attached, ...]:
    attach = data.get("attach", [])
    if isinstance(attach, str):
        attach = [attach]
    if not isinstance(attach, list) or not all(isinstance(a, str) and a for a in attach):
        raise TaskInvalid(folder, "attach", "a list of file paths")
    out = []
    try:
        source = taskfiles.source(folder, data.get("repo"), repos)
        budget = taskfiles.MAX_TOTAL
        for name in attach:
            blob = taskfiles.attached(source, name, budget)
            budget -= len(blob)
            try:
                text = blob.decode("utf-8")
            except UnicodeDecodeError:
                raise TaskInvalid(folder, "attach", f"{name!r} is not UTF-8 text") from None
            out.append(Attached(path=name, text=text))
    except taskfiles.Refused as exc:
        raise TaskInvalid(folder, exc.field, exc.message) from None
    return tuple(out)


# -- many tasks --------------------------------------------------------------------------------

def roots(home=None) -> list[Path]:
    """Where tasks are looked for: the starter pack, then the data folder's ``suite/tasks``
    (where grown tasks are written)."""
    found = [STARTER]
    if home is not None:
        found.append(home.grown_tasks)
    return found


def scan(*folders: Path, repos=()) -> tuple[list[Task], list[TaskInvalid]]:
    """Every task under the given roots, sorted by id, and every folder that failed to load
    (``repos`` as for ``load_task``); one broken folder never keeps the others out."""
    repos = tuple(repos)
    tasks: dict[str, Task] = {}
    problems: list[TaskInvalid] = []
    for root in folders:
        root = Path(root)
        if not root.is_dir():
            continue
        for sub in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
            try:
                task = load_task(sub, repos)
            except TaskInvalid as exc:
                problems.append(exc)
                continue
            if task.id in tasks:
                problems.append(TaskInvalid(sub, "id", f"{task.id!r} is also in "
                                            f"{tasks[task.id].folder}; rename one"))
                continue
            tasks[task.id] = task
    return sorted(tasks.values(), key=lambda t: t.id), problems


def select(tasks: list[Task], ids: list[str] | None = None,
           drafts: bool = False) -> list[Task]:
    """Exactly the tasks named by ``ids`` (drafts too), in that order; without ids, every task
    that is not a draft. An unknown id is refused, so a run never silently skips a task."""
    if ids:
        by_id = {t.id: t for t in tasks}
        unknown = [i for i in ids if i not in by_id]
        if unknown:
            raise BadRequest(f"unknown task {unknown[0]!r}; see 'panelist suite list' for the "
                             "task ids")
        return [by_id[i] for i in dict.fromkeys(ids)]
    return [t for t in tasks if drafts or not t.draft]


def load_tasks(*folders: Path, ids: list[str] | None = None,
               drafts: bool = False, repos=()) -> list[Task]:
    """``select`` over every task under ``folders`` (default: the starter pack); raises
    ``TaskInvalid`` for the first folder that fails to load."""
    tasks, problems = scan(*(folders or (STARTER,)), repos=repos)
    if problems:
        raise problems[0]
    return select(tasks, ids, drafts)
