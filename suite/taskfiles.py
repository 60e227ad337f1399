"""The files a suite task may read: where they are looked up, and how they are read.

A task names files in three ways: its own ``task.json``, the paths in ``attach``, and ``repo``
(the repository those paths are under instead of ``fixtures/``: a name looked up among the
repositories named on the command line, falling back to ``fixtures/``; see ``source``). An
attached path that is not where the task's own folder would have it (``snapshot/route.py``
under ``fixtures/``) is read from the task's copy of it, ``fixtures/<its file name>``, if there
is one; a repository named on the command line is never second-guessed that way. Task
folders come from anywhere (a pack someone shared, a tool that writes the common field set),
and what they name is sent to every model asked, so each file is confined:

* It resolves, symlinks followed, inside one of the *roots*: the task's own folder, or a
  repository the user named on the command line (``--repo``). A path, ``~``, an absolute path or
  a link that leads anywhere else is refused before anything there is opened.
* It is a regular file: never a folder, device, fifo or socket (a fifo would block the loader,
  ``/dev/zero`` would never end).
* It holds at most ``MAX_FILE`` bytes (``MAX_TASK_JSON`` for ``task.json``), and one task's
  attached files together at most ``MAX_TOTAL``, so the files of one prompt stay within
  ``MAX_TOTAL`` whatever the task says. A read stops one byte past its cap: a file that grows
  while it is read costs no more than one that does not.

Where a task's attached files are looked up is decided by ``source`` alone, so that a new
reading of ``repo`` changes that one function.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from panelist.metrics.errors import BadRequest

MAX_FILE = 1_000_000  # bytes one attached file may hold
MAX_TOTAL = 2_000_000  # bytes one task's attached files may hold together
MAX_TASK_JSON = 256_000  # bytes of task.json (its prompt included)
# a final symlink swapped in after the checks is not followed, and a fifo never blocks the open
_OPEN = (
    os.O_RDONLY
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_BINARY", 0)
)


class Refused(Exception):
    """A file a task names may not be read; ``field`` is the task's field to blame."""

    def __init__(self, fieldname: str, message: str):
        super().__init__(message)
        self.field = fieldname
        self.message = message


class Unreadable(Exception):
    """Why a file cannot be read, worded to follow its name, and what an attached file's
    task should do instead."""

    def __init__(self, reason: str = "", fix: str = ""):
        super().__init__(reason)
        self.reason = reason
        self.fix = fix


class TooLarge(Unreadable):
    pass


@dataclass(frozen=True)
class Source:
    """Where a task's attached paths are looked up: ``base`` (symlinks resolved), the field
    that chose it, and how a message names it."""

    base: Path
    field: str  # "attach" (the task's fixtures/) or "repo"
    label: str
    missing: str = ""  # what a file that is not there should say, when it needs more
    copies: Path | None = None  # the task's fixtures/, where a missing file's copy may be


@dataclass(frozen=True)
class Read:
    """An attached file's bytes, and ``copy``: the copy read instead (``fixtures/route.py``)
    when the path the task names is not there, else ""."""

    blob: bytes
    copy: str = ""


def repositories(paths: Iterable[str | os.PathLike] | None) -> tuple[Path, ...]:
    """The repositories named on the command line, resolved; each must be a folder."""
    found = []
    for raw in paths or ():
        path = Path(os.path.realpath(Path(raw).expanduser()))
        if not path.is_dir():
            raise BadRequest(
                f"--repo {raw} is not a folder; name the repository a task's 'repo' points into"
            )
        found.append(path)
    return tuple(dict.fromkeys(found))


def _real(path: Path) -> Path:
    return Path(os.path.realpath(path))


def _inside(path: Path, root: Path) -> bool:
    return path == root or path.is_relative_to(root)


def source(folder: Path, repo, repos: Iterable[Path] = ()) -> Source:
    """Where ``folder``'s task finds its attached files.

    Without ``repo``: its ``fixtures/``. With one, ``repo`` is first a repository's name: the
    repository named on the command line (``repos``) whose path ends in it (``cpython``,
    ``python/cpython``), else whose folder is called as its last part. A name that matches
    none is a folder of the task's own, if there is one, else the task's ``fixtures/`` (a
    task shipped with copies of its files runs without the repository). Only a ``repo``
    written as a path (absolute, ``~``, ``.`` or ``..``) is a path: it must lie inside the
    task's folder or one of ``repos``."""
    home = _real(folder)
    if repo is None:
        return _fixtures(folder, home)
    if not isinstance(repo, str) or not repo.strip() or "\0" in repo:
        raise Refused("repo", "a repository's name (one named with --repo), or a folder path")
    repos = tuple(map(_real, repos))
    if not _path_like(repo):
        named = _named(repo, repos)
        if len(named) > 1:
            raise Refused(
                "repo",
                f"{repo!r} names {len(named)} of the repositories given with "
                f"--repo ({', '.join(map(str, named))}); name only the one meant",
            )
        if named:
            return Source(named[0], "repo", f"the repository {repo!r}")
        own = _real(folder / repo)
        if own.is_dir() and _inside(own, home):
            return Source(own, "repo", "the repo", copies=_copies(folder, home))
        found = _fixtures(folder, home)
        given = ", ".join(p.name for p in repos) or "none"
        called = repo.rstrip("/").split("/")[-1]
        return Source(
            found.base,
            "attach",
            "fixtures/",
            copies=found.copies,
            missing=f"the task's repo {repo!r} is none of the repositories named "
            f"with --repo ({given}), so its files are looked for in fixtures/: run "
            f"with --repo PATH (a repository called {called!r}), "
            "or copy the file into fixtures/",
        )
    base = _real(folder / Path(repo).expanduser())
    if not any(_inside(base, root) for root in (home, *repos)):
        raise Refused(
            "repo",
            f"{repo!r} is outside the task's folder and every repository "
            "named on the command line; if the task is meant to read it, run with "
            f"--repo {base}, or copy the files into the task's fixtures/",
        )
    if not base.is_dir():
        raise Refused(
            "repo",
            f"{repo!r} is not a folder; point it at the repository the attached files are in",
        )
    within = any(_inside(base, root) for root in repos)
    return Source(base, "repo", "the repo", copies=None if within else _copies(folder, home))


def _fixtures(folder: Path, home: Path) -> Source:
    base = _real(folder / "fixtures")
    if not _inside(base, home):
        raise Refused(
            "attach",
            "fixtures/ is a link out of the task's folder; make it a "
            "folder of its own and copy the files in",
        )
    return Source(base, "attach", "fixtures/", copies=base)


def _copies(folder: Path, home: Path) -> Path | None:
    """The task's fixtures/, where copies of its files are looked for; None when it leads out
    of the task's folder (then no copy is read from it)."""
    base = _real(folder / "fixtures")
    return base if _inside(base, home) else None


def _path_like(repo: str) -> bool:
    """Whether ``repo`` is written as a path rather than as a repository's name."""
    return (
        Path(repo).is_absolute()
        or repo.startswith("~")
        or "\\" in repo
        or any(part in (".", "..") for part in repo.split("/"))
    )


def _named(repo: str, repos: tuple[Path, ...]) -> list[Path]:
    """The repositories the name ``repo`` picks: those whose path ends in it, else those whose
    folder is called as its last part (an ``owner/name`` key and a clone called ``name``)."""
    parts = tuple(p for p in repo.split("/") if p)
    if not parts:
        return []
    ends = [r for r in repos if r.parts[-len(parts) :] == parts]
    return ends or [r for r in repos if r.name == parts[-1]]


def attached(src: Source, name: str, budget: int = MAX_TOTAL) -> Read:
    """The bytes of the attached path ``name`` under ``src`` (or of its copy in the task's
    ``fixtures/``, when ``name`` is not there and ``src`` allows copies); ``budget`` is what
    is left of the task's ``MAX_TOTAL``."""
    if "\0" in name:
        raise Refused("attach", f"{name!r} holds a NUL character; give a file's path")
    lexical = Path(os.path.normpath(src.base / name))
    target = _real(src.base / name)
    if Path(name).is_absolute() or not _inside(lexical, src.base):
        raise Refused("attach", f"{name!r} leaves {src.label}; give a path inside it")
    if not _inside(target, src.base):
        raise Refused(
            "attach", f"{name!r} is a link out of {src.label}; attach a copy of the file instead"
        )
    copy = ""
    if src.copies is not None and not os.path.lexists(src.base / name):
        spare = src.copies / Path(name).name
        if spare != lexical and os.path.lexists(spare):
            copy, target = f"fixtures/{Path(name).name}", _real(spare)
            if not _inside(target, src.copies):
                raise Refused(
                    "attach",
                    f"{name!r} is read from its copy {copy}, which is a "
                    "link out of fixtures/; make the copy a file of its own",
                )
    cap = min(MAX_FILE, max(budget, 0))
    try:
        return Read(read(target, cap), copy)
    except TooLarge:
        if cap == MAX_FILE:
            raise Refused(
                "attach",
                f"{name!r} is over {MAX_FILE:,} bytes, the most one "
                "attached file may hold; attach the module, not a bundle",
            ) from None
        raise Refused(
            "attach",
            f"{name!r} takes the task's attached files past "
            f"{MAX_TOTAL:,} bytes together; attach fewer or smaller files",
        ) from None
    except Unreadable as exc:
        fix = src.missing if src.missing and not os.path.lexists(target) else exc.fix
        if (
            src.copies is not None
            and not copy
            and not os.path.lexists(target)
            and Path(name).name != name
        ):
            fix += f", or put a copy of it in fixtures/{Path(name).name}"
        where = f"(read from its copy {copy})" if copy else f"under {src.label}"
        raise Refused("attach", f"{name!r} {where} {exc.reason}; {fix}") from None


def task_json(folder: Path) -> bytes:
    """The bytes of ``folder``'s task.json; raises ``Refused`` (field ``task.json``), or
    ``FileNotFoundError`` when there is none."""
    path = folder / "task.json"
    target = _real(path)
    if not _inside(target, _real(folder)):
        raise Refused("task.json", "is a link out of the task's folder; make it a file of its own")
    if not os.path.lexists(path):
        raise FileNotFoundError(path)
    try:
        return read(target, MAX_TASK_JSON)
    except TooLarge:
        raise Refused(
            "task.json",
            f"is over {MAX_TASK_JSON:,} bytes; keep the code in fixtures/, not in the prompt",
        ) from None
    except Unreadable as exc:
        raise Refused("task.json", f"{exc.reason}; write it as a plain file") from None


def read(path: Path, cap: int) -> bytes:
    """The bytes of the regular file at ``path`` (already resolved), at most ``cap``: a
    folder, device, fifo or socket is refused without being opened, and the read stops one
    byte past ``cap``."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise Unreadable("does not exist", "check the path") from None
    except OSError as exc:
        raise Unreadable(f"cannot be read ({exc.strerror})", "make it readable") from None
    _regular(st)
    if st.st_size > cap:
        raise TooLarge()
    try:
        fd = os.open(path, _OPEN)
    except OSError as exc:
        raise Unreadable(f"cannot be read ({exc.strerror})", "make it readable") from None
    with os.fdopen(fd, "rb") as f:
        _regular(os.fstat(fd))  # the same kind of file as was checked, not a swap
        try:
            blob = f.read(cap + 1)
        except OSError as exc:
            raise Unreadable(f"cannot be read ({exc.strerror})", "make it readable") from None
    if len(blob) > cap:
        raise TooLarge()
    return blob


def _regular(st: os.stat_result) -> None:
    if stat.S_ISDIR(st.st_mode):
        raise Unreadable("is a folder, not a file", "attach the files in it one by one")
    if not stat.S_ISREG(st.st_mode):
        raise Unreadable(
            "is not a regular file (a device, fifo or socket)", "attach a copy of a file instead"
        )
