"""Suite tasks: one folder each, ``<root>/<id>/task.json`` plus optional ``fixtures/``.

A task is one of three kinds:

* ``claim``: a statement about some code; the key (``answer``) is ``true`` or ``false``.
* ``bug``: code with one seeded fault; the key is the line numbers of the faulty statement in
  the first attached file (any of them is a right answer).
* ``control``: the same code untouched; it has no key (only ``NO FAULT`` is right). A control
  is paired with the bug whose id it extends by ``-control`` (``bisect-insort`` and
  ``bisect-insort-control``), or whose ``-bug`` it replaces (``bisect-insort-bug`` and
  ``bisect-insort-control``); precision, recall and pairs are counted over such pairs, and a
  bug without a control is named in ``notices``.

Fields of ``task.json`` (our own set): ``id`` (the folder's name), ``title``, ``kind``,
``prompt``, ``attach`` (paths under ``fixtures/``, or under ``repo`` when given, which must lie in
the task's folder or a repository named with ``--repo``; each is appended to the prompt under a
``===== FILE: <path> =====`` header; a path not there is read from the task's copy
``fixtures/<its file name>`` if it has one, see ``taskfiles``), ``answer``, ``why`` (never
sent), provenance ``source``, ``license``, ``created`` (a date, ``2025-06-06``, with a time if
wished: ``2025-06-06 10:19:55``), ``draft`` (drafts run only when named), and ``focus``: the
lines each long attached file's excerpt must hold (``focus``: a line, a range or a list for the
first file, ``{"path": "120-134"}`` per file; without it a claim's focus is the lines its ``why``
cites). A bug or control may carry its code in the prompt instead of attaching it, each line
numbered as in its file (``  12| code``, see ``embedded``); the prompt is then sent as written
and the key's lines are those numbers.

The common field set other tools write is read too and mapped onto the kinds (``fieldset``):
``shape`` (``claim``, or ``bug`` / ``review`` / ``fault`` / ``seeded`` / ``rebench``),
``must_find`` and ``must_not_claim`` clauses (a string, ``{"any_of": [...]}``,
``{"regex": ..., "label": ...}``: a regex is mapped by the strict answers it accepts),
``score_in: "first_line"``, ``min_answer_chars``, ``repo`` + ``attach`` (``repo`` is a
repository's name, looked up among those named with ``--repo``; see ``taskfiles.source``),
provenance ``upstream`` and ``source_url``, and the ``-bug`` and ``-control`` id suffixes.
Whatever cannot be mapped is refused, every such field of a task in one message, so one round
of edits makes the task load.

Invariants: a loaded ``Task`` is whole and valid (files read, key checked against its kind and
against the lines the task shows); its ``hash`` changes whenever anything a model sees or the
key changes (so a rerun redoes edited tasks), and never when ``title`` or provenance change, nor
``why`` unless the lines it cites move a long file's excerpt; a task reads only regular files
inside its own folder or a repository named on the command line, within the size caps
(``taskfiles``), and a task that names anything else does not load.
"""

from __future__ import annotations

import hashlib
import re
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, cast

from panelist.metrics.store import jsonwire
from panelist.metrics.errors import BadRequest
from panelist.suite import embedded, fieldset, focus as focuses, taskfiles
from panelist.suite.excerpt import LONG, WINDOW, file_lines

STARTER = Path(__file__).resolve().parent / "tasks"  # the pack that ships with the project
KINDS = ("claim", "bug", "control")
CONTROL_SUFFIX = "-control"
BUG_SUFFIX = "-bug"
OWN_FIELDS = (
    "id",
    "title",
    "kind",
    "prompt",
    "attach",
    "answer",
    "why",
    "source",
    "license",
    "created",
    "draft",
    "focus",
)
COMMON_FIELDS = fieldset.FIELDS
ID_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,119}$")


class TaskInvalid(BadRequest):
    """Raised when a task folder cannot be loaded; the message names the folder and every field
    that kept it out (``problems``: (field, message) each; ``field`` is the first)."""

    def __init__(
        self,
        where: Path | str,
        fieldname: str,
        message: str,
        more: tuple[tuple[str, str], ...] = (),
    ):
        self.problems = ((fieldname, message), *more)
        if more:
            said = "; ".join(f"field '{f}': {m}" for f, m in self.problems)
            text = f"task {where}: {len(self.problems)} fields cannot be loaded: {said}"
        else:
            text = f"task {where}: field '{fieldname}': {message}"
        super().__init__(text, param=fieldname)
        self.field = fieldname
        self.fields = tuple(dict.fromkeys(f for f, _ in self.problems))
        self.folder = Path(where)


class _Problems:
    """What keeps one task out, gathered over every field before the loader gives up."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.found: list[tuple[str, str]] = []

    def add(self, fieldname: str, message: str) -> None:
        self.found.append((fieldname, message))

    @contextmanager
    def check(self):
        """Run one independent check: a refusal is noted and the loader goes on."""
        try:
            yield
        except TaskInvalid as exc:
            self.found.extend(exc.problems)

    def __bool__(self) -> bool:
        return bool(self.found)

    def raise_any(self) -> None:
        if self.found:
            (first, said), *more = self.found
            raise TaskInvalid(self.folder, first, said, tuple(more))


@dataclass(frozen=True)
class Attached:
    """One file a prompt carries: the path as the task names it, and its text."""

    path: str
    text: str


def pair_of(tid: str, kind: str) -> str:
    """The bug/control pair a task of this id and kind belongs to: ``x``, ``x-bug`` and
    ``x-control`` are all the pair ``x`` (``x-bug-control`` too); a claim is its own."""
    if kind == "control" and tid.endswith(CONTROL_SUFFIX):
        tid = tid[: -len(CONTROL_SUFFIX)]
        kind = "bug"
    if kind == "bug" and tid.endswith(BUG_SUFFIX):
        tid = tid[: -len(BUG_SUFFIX)]
    return tid


@dataclass(frozen=True)
class Task:
    id: str
    title: str
    kind: str  # claim | bug | control
    prompt: str
    files: tuple[Attached, ...]
    answer: bool | tuple[int, ...] | None  # claim: bool; bug: faulty lines; control: None
    why: str = ""
    source: str = ""
    license: str = ""
    created: str = ""
    draft: bool = False
    min_answer_chars: int = 0  # from the common field set; 0 means no floor
    focus: focuses.Focus = ()  # its own focus lines, one entry per attached file
    upstream: str = ""  # provenance from the common field set, never sent
    source_url: str = ""
    folder: Path | None = field(default=None, compare=False)

    @property
    def pair(self) -> str:
        """The bug/control pair this task belongs to (``pair_of``)."""
        return pair_of(self.id, self.kind)

    @property
    def long_files(self) -> tuple[int, ...]:
        """The attached files (by position) a prompt shows as an excerpt, not whole."""
        return tuple(i for i, f in enumerate(self.files) if len(file_lines(f.text)) > LONG)

    @property
    def long(self) -> bool:
        """Whether a prompt shows an excerpt of some attached file rather than all of it."""
        return bool(self.long_files)

    @property
    def code(self) -> dict[int, str]:
        """The lines the key is read against, by number: the first attached file's, else the
        code the prompt carries (as the prompt shows it); empty without code."""
        if self.files:
            return dict(enumerate(file_lines(self.files[0].text), 1))
        return embedded.numbered(self.prompt)

    @property
    def lines(self) -> tuple[int, ...]:
        """A bug's key, its faulty lines; empty for a claim or a control."""
        return self.answer if isinstance(self.answer, tuple) else ()

    @property
    def hash(self) -> str:
        """A digest of everything a model sees and of the key."""
        files = [[f.path, hashlib.sha256(f.text.encode()).hexdigest()] for f in self.files]
        answer = list(self.answer) if isinstance(self.answer, tuple) else self.answer
        doc: dict[str, Any] = {
            "kind": self.kind,
            "prompt": self.prompt,
            "files": files,
            "answer": answer,
            "min": self.min_answer_chars,
        }
        # a focus counts only where it moves what the model sees: a long file's excerpt (the
        # first file's under "focus", as before focus was per file, so those hashes hold)
        shown = {i: self.focus[i] for i in self.long_files if i < len(self.focus) and self.focus[i]}
        if 0 in shown:
            doc["focus"] = list(shown.pop(0))
        if shown:
            doc["focus_files"] = {self.files[i].path: list(v) for i, v in shown.items()}
        blob = jsonwire.dumps(doc, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


def load_task(folder: str | Path, repos=()) -> Task:
    """The task in ``folder`` (which holds ``task.json``); raises ``TaskInvalid`` naming every
    field that cannot be loaded. ``repos``: the repositories named on the command line, which
    a task's ``repo`` names (``taskfiles.source``)."""
    folder = Path(folder)
    try:
        raw = taskfiles.task_json(folder)
    except FileNotFoundError:
        raise TaskInvalid(
            folder, "task.json", "no task.json in this folder; write one or remove the folder"
        ) from None
    except taskfiles.Refused as exc:
        raise TaskInvalid(folder, exc.field, exc.message) from None
    try:
        data = jsonwire.loads(raw)
    except ValueError as exc:
        raise TaskInvalid(folder, "task.json", f"not valid JSON ({exc}); fix the file") from None
    if not isinstance(data, dict):
        raise TaskInvalid(folder, "task.json", "must hold one JSON object")
    problems = _Problems(folder)
    for name in sorted(set(data) - set(OWN_FIELDS) - set(COMMON_FIELDS)):
        problems.add(
            name,
            "not a task field; use only: " + ", ".join(OWN_FIELDS + COMMON_FIELDS)
            if not problems
            else "not a task field either",
        )
    task = _build(folder, data, tuple(repos), problems)
    problems.raise_any()
    assert task is not None  # _build gives None only with a problem, which raise_any raised
    return task


def _build(folder: Path, data: dict, repos: tuple[Path, ...], problems: _Problems) -> Task | None:
    """The task ``data`` describes, or None; every problem found is added to ``problems``."""

    def text(name: str, required: bool = False) -> str:
        value = data.get(name, "")
        if value is None:
            value = ""
        if not isinstance(value, str):
            problems.add(name, f"must be a string, not {type(value).__name__}")
            return ""
        if required and not value.strip():
            problems.add(name, "is required and may not be empty")
        return value

    tid = text("id", required=True)
    if tid and not ID_RE.match(tid):
        problems.add(
            "id",
            f"{tid!r} is not a task id: use lower-case letters, digits, '.', '_' "
            "and '-' (up to 120), starting with a letter or digit",
        )
    elif tid and tid != folder.name:
        problems.add(
            "id", f"{tid!r} differs from its folder's name {folder.name!r}; make them the same"
        )
    draft = data.get("draft", False)
    if not isinstance(draft, bool):
        problems.add("draft", "must be true or false")
    min_chars = data.get("min_answer_chars", 0)
    if isinstance(min_chars, bool) or not isinstance(min_chars, int) or min_chars < 0:
        problems.add("min_answer_chars", "must be a whole number of characters, 0 or more")
    score_in = data.get("score_in", "first_line")
    if score_in != "first_line":
        problems.add(
            "score_in",
            f"{score_in!r} cannot be mapped: the suite scores the answer's "
            'first line only; use "first_line" or leave it out',
        )
    title, prompt, why = text("title"), text("prompt", True), text("why")
    source, license, created = text("source"), text("license"), text("created")
    upstream, source_url = text("upstream"), text("source_url")
    if created.strip() and not _when(created):
        problems.add(
            "created",
            f"{created!r} is not a date: write 2025-06-06, with a time if "
            "wished (2025-06-06 10:19:55)",
        )

    files = None
    with problems.check():
        files = _attached(folder, data, repos)
    # the line numbers the task shows of its code: its first file's, or its prompt's own
    shown = (
        range(1, len(file_lines(files[0].text)) + 1)
        if files
        else sorted(embedded.numbered(prompt)) or None
    )
    kind = answer = None
    with problems.check():
        kind, answer = _key(folder, tid, data, shown)
    if kind == "control" and not tid.endswith(CONTROL_SUFFIX):
        problems.add(
            "id",
            f"a control's id ends in '{CONTROL_SUFFIX}' after its bug's id; "
            f"rename it {tid + CONTROL_SUFFIX!r}",
        )
    if kind is not None and kind != "control" and tid.endswith(CONTROL_SUFFIX):
        problems.add(
            "kind",
            f"an id ending in '{CONTROL_SUFFIX}' names a control; make the kind "
            "'control' or rename the task",
        )

    if files is not None and kind in ("bug", "control") and not shown:
        problems.add(
            "attach",
            f"a {kind} task needs the code to review: attach at least one "
            "file, or number the code's lines in the prompt ('  12| code')",
        )
    if shown and kind == "bug" and answer:
        beyond = [n for n in answer if n not in shown]
        if beyond and files:
            problems.add(
                "answer" if "kind" in data else "must_find",
                f"line {beyond[0]} is past the end of {files[0].path} "
                f"({len(shown)} lines); the key's lines are in the first attached "
                "file",
            )
        elif beyond:
            problems.add(
                "answer" if "kind" in data else "must_find",
                f"line {beyond[0]} is not among the lines the prompt numbers "
                f"({shown[0]}-{shown[-1]}); the key names lines of the code shown",
            )
    focus: focuses.Focus = ()
    if files is not None and kind is not None:
        paths, texts = [f.path for f in files], [f.text for f in files]
        try:
            if data.get("focus") is not None:
                focus = focuses.given(data["focus"], paths, texts, kind=kind)
            elif kind == "claim":
                focus = focuses.cited(why, paths, texts)
            else:
                focus = focuses.none(paths)
        except focuses.Refused as exc:
            problems.add("focus", str(exc))
    if problems:
        return None
    return Task(
        id=tid,
        title=title or tid,
        kind=kind,
        prompt=prompt,
        files=files,
        answer=answer,
        why=why,
        source=source,
        license=license,
        created=created,
        draft=draft,
        min_answer_chars=min_chars,
        focus=focus,
        upstream=upstream,
        source_url=source_url,
        folder=folder,
    )


def _when(text: str) -> bool:
    """Whether ``text`` is a date, or a date and time (``2025-06-06 10:19:55``, ISO 8601)."""
    try:
        datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        return False
    return True


def _key(folder: Path, tid: str, data: dict, shown):
    """``(kind, answer)``: from ``kind`` and ``answer``, or from the common field set."""
    if "kind" in data:
        clash = [n for n in ("shape", "must_find", "must_not_claim") if n in data]
        if clash:
            raise TaskInvalid(
                folder,
                clash[0],
                "a task with 'kind' gives its key in 'answer'; "
                f"drop '{clash[0]}' or drop 'kind' and 'answer'",
            )
        kind = data["kind"]
        if kind not in KINDS:
            raise TaskInvalid(
                folder, "kind", f"{kind!r} is not a kind; use one of " + ", ".join(KINDS)
            )
        return kind, _own_answer(folder, kind, data.get("answer"))
    if "answer" in data:
        raise TaskInvalid(
            folder,
            "answer",
            "give 'kind' with 'answer' (or 'shape' with "
            "'must_find' / 'must_not_claim' instead of both)",
        )
    try:
        kind, answer = fieldset.key(
            data, shown, control=tid.endswith(CONTROL_SUFFIX), bug=tid.endswith(BUG_SUFFIX)
        )
    except fieldset.Unmapped as exc:
        (first, said), *more = exc.problems
        raise TaskInvalid(folder, first, said, tuple(more)) from None
    # key() gives a bug its lines as a list
    return kind, (
        _lines(folder, "must_find", list(cast(list[int], answer))) if kind == "bug" else answer
    )


def _own_answer(folder: Path, kind: str, answer):
    if kind == "claim":
        if not isinstance(answer, bool):
            raise TaskInvalid(folder, "answer", "a claim's key is true or false")
        return answer
    if kind == "control":
        if answer is not None:
            raise TaskInvalid(
                folder,
                "answer",
                "a control has no key: leave 'answer' out or null (only NO FAULT is right)",
            )
        return None
    return _lines(folder, "answer", answer)


def _lines(folder: Path, name: str, value) -> tuple[int, ...]:
    if isinstance(value, int) and not isinstance(value, bool):
        value = [value]
    if (
        not isinstance(value, list)
        or not value
        or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in value)
    ):
        raise TaskInvalid(
            folder,
            name,
            "a bug's key is a list of line numbers (1 or more), "
            "e.g. [41, 42] for a statement on two lines",
        )
    return tuple(sorted(set(value)))


# -- attached files ----------------------------------------------------------------------------


def _attached(folder: Path, data: dict, repos: tuple[Path, ...]) -> tuple[Attached, ...]:
    attach = data.get("attach", [])
    if isinstance(attach, str):
        attach = [attach]
    if not isinstance(attach, list) or not all(isinstance(a, str) and a for a in attach):
        raise TaskInvalid(folder, "attach", "a list of file paths")
    out = []
    copied: dict[str, str] = {}  # a copy in fixtures/ -> the attached path read from it
    try:
        source = taskfiles.source(folder, data.get("repo"), repos)
        budget = taskfiles.MAX_TOTAL
        for name in attach:
            got = taskfiles.attached(source, name, budget)
            if got.copy and copied.setdefault(got.copy, name) != name:
                raise TaskInvalid(
                    folder,
                    "attach",
                    f"{copied[got.copy]!r} and {name!r} would "
                    f"both be read from {got.copy}; give each its own file",
                )
            budget -= len(got.blob)
            try:
                text = got.blob.decode("utf-8")
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


def given_roots(paths) -> list[Path]:
    """The task folders a user named (``--tasks FOLDER``), each a folder of task folders
    (``FOLDER/<id>/task.json``), checked; these are read instead of ``roots``."""
    found = []
    for raw in paths or ():
        path = Path(raw).expanduser()
        if not path.is_dir():
            raise BadRequest(
                f"--tasks {raw} is not a folder; name the folder that holds the "
                "task folders (each with its task.json)",
                param="tasks",
            )
        if (path / "task.json").exists():
            raise BadRequest(
                f"--tasks {raw} is one task's folder; name the folder that holds "
                f"it ({path.resolve().parent}), and --task {path.name} to ask "
                "only this one",
                param="tasks",
            )
        found.append(path)
    return list(dict.fromkeys(found))


def scan(*folders: Path, repos=()) -> tuple[list[Task], list[TaskInvalid]]:
    """Every task under the given roots, sorted by id, and every folder that failed to load
    (``repos`` as for ``load_task``); one broken folder never keeps the others out."""
    repos = tuple(repos)
    tasks: dict[str, Task] = {}
    problems: list[TaskInvalid] = []
    for root in folders:
        root = Path(root)
        try:
            subs = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
        except OSError:
            continue  # no such root (no grown tasks yet), or one that cannot be listed
        for sub in subs:
            try:
                task = load_task(sub, repos)
            except TaskInvalid as exc:
                problems.append(exc)
                continue
            except (OSError, ValueError, RecursionError) as exc:
                # whatever else goes wrong in one folder is that folder's problem only
                problems.append(
                    TaskInvalid(
                        sub, "task.json", f"cannot be loaded ({exc}); fix or remove the folder"
                    )
                )
                continue
            if task.id in tasks:
                problems.append(
                    TaskInvalid(
                        sub, "id", f"{task.id!r} is also in {tasks[task.id].folder}; rename one"
                    )
                )
                continue
            tasks[task.id] = task
    found = sorted(tasks.values(), key=lambda t: t.id)
    bugs: dict[str, Task] = {}
    kept = []
    for task in found:  # "x" and "x-bug" would both claim the control "x-control"
        other = bugs.get(task.pair) if task.kind == "bug" else None
        if other is not None:
            problems.append(
                TaskInvalid(
                    task.folder or task.id,
                    "id",
                    f"{task.id!r} and "
                    f"{other.id!r} are both bugs of the pair {task.pair!r} "
                    f"(its control is {task.pair + CONTROL_SUFFIX!r}); "
                    "rename one",
                )
            )
            continue
        if task.kind == "bug":
            bugs[task.pair] = task
        kept.append(task)
    return kept, problems


def bug_of(task: Task, known: dict[str, Task]) -> Task | None:
    """The bug of ``task``'s pair among ``known`` (by id): the task itself for a bug."""
    if task.kind == "bug":
        return task
    if task.kind != "control":
        return None
    for tid in (task.pair, task.pair + BUG_SUFFIX):
        bug = known.get(tid)
        if bug is not None and bug.kind == "bug" and bug.pair == task.pair:
            return bug
    return None


def control_of(task: Task, known: dict[str, Task]) -> Task | None:
    """The control of ``task``'s pair among ``known`` (by id): the task itself for a control."""
    if task.kind == "control":
        return task
    if task.kind != "bug":
        return None
    for tid in (task.pair + CONTROL_SUFFIX, task.id + CONTROL_SUFFIX):
        control = known.get(tid)
        if control is not None and control.kind == "control" and control.pair == task.pair:
            return control
    return None


def focus_of(task: Task, known: dict[str, Task]) -> focuses.Focus:
    """The lines each attached file's excerpt must hold, one entry per file: a claim's own
    focus; for a bug its key in the first file and its own focus in the others; for a control
    its bug's (file by file, by path; its first file's is the bug's key, whatever the path),
    so both halves of a pair show the same windows."""
    if task.kind == "claim":
        return task.focus
    bug = bug_of(task, known)
    if bug is None or not task.files:
        return focuses.none([f.path for f in task.files])
    own = (bug.lines, *bug.focus[1:])
    if task.kind == "bug":
        return own
    by_path = {f.path: lines for f, lines in zip(bug.files[1:], own[1:])}
    return (bug.lines, *(by_path.get(f.path, ()) for f in task.files[1:]))


def notices(tasks: list[Task]) -> list[dict]:
    """What loads but would mislead a report, ``{"task": id, "message": ...}`` each: a bug
    without a control or a control without its bug (that pair cannot be scored, nor precision
    and recall counted on it), and each attached file over ``LONG`` lines without focus lines
    (its excerpt may miss what decides the task), named."""
    known = {t.id: t for t in tasks}
    out = []
    for task in tasks:
        if task.kind == "bug" and control_of(task, known) is None:
            out.append(
                {
                    "task": task.id,
                    "message": (
                        f"bug {task.id} has no control: pairs, precision and recall leave it out; "
                        f"add {task.pair + CONTROL_SUFFIX!r} (the same files untouched)"
                    ),
                }
            )
        elif task.kind == "control" and bug_of(task, known) is None:
            out.append(
                {
                    "task": task.id,
                    "message": (
                        f"control {task.id} has no bug: pairs, precision and recall leave it out; "
                        f"add its bug {task.pair!r} or {task.pair + BUG_SUFFIX!r}"
                    ),
                }
            )
            continue  # without its bug, no focus to follow: that is the news
        focus = focus_of(task, known)
        for i in task.long_files:
            if i < len(focus) and focus[i]:
                continue
            path = task.files[i].path
            name = path.rsplit("/", 1)[-1]
            first = i == 0 and task.kind == "claim"
            example = '"120-134"' if first and len(task.files) == 1 else f'{{"{path}": "120-134"}}'
            cite = "'line 142'" if first and len(task.files) == 1 else f"'{name}:142'"
            out.append(
                {
                    "task": task.id,
                    "message": (
                        f"{task.kind} {task.id}: {path} is over {LONG} lines and has no focus lines: "
                        f"its excerpt of {WINDOW} lines may miss what decides the task; give 'focus' "
                        f"(the deciding lines: {example}), or cite them in 'why' ({cite})"
                    ),
                }
            )
    return out


def select(tasks: list[Task], ids: list[str] | None = None, drafts: bool = False) -> list[Task]:
    """Exactly the tasks named by ``ids`` (drafts too), in that order; without ids, every task
    that is not a draft. An unknown id is refused, so a run never silently skips a task."""
    if ids:
        by_id = {t.id: t for t in tasks}
        unknown = [i for i in ids if i not in by_id]
        if unknown:
            raise BadRequest(
                f"unknown task {unknown[0]!r}; see 'panelist suite list' for the task ids"
            )
        return [by_id[i] for i in dict.fromkeys(ids)]
    return [t for t in tasks if drafts or not t.draft]


def load_tasks(
    *folders: Path, ids: list[str] | None = None, drafts: bool = False, repos=()
) -> list[Task]:
    """``select`` over every task under ``folders`` (default: the starter pack); raises
    ``TaskInvalid`` for the first folder that fails to load."""
    tasks, problems = scan(*(folders or (STARTER,)), repos=repos)
    if problems:
        raise problems[0]
    return select(tasks, ids, drafts)
