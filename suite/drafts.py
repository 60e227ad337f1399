"""Grown tasks on disk: one folder per task, written whole or not at all.

Where: ``DATA/suite/tasks/<id>/`` (the folder the suite loads beside its starter pack), or a
folder the caller names. Each folder holds ``task.json`` with the suite's own fields (``id``,
``title``, ``kind``, ``prompt``, ``attach``, ``answer``, ``why``, ``source``, ``license``,
``created``, ``draft``) and the attached files under ``fixtures/``.

Invariants: a task folder appears by one ``rename`` of a finished temporary folder, so a reader
never meets half a task; an existing folder is never overwritten, except by ``replace`` (a draft
whose key a newer verdict changed); ids are lower-case slugs the loader accepts, and a fixture's
path never leaves ``fixtures/``.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import time
from pathlib import Path, PurePosixPath

from panelist.metrics.store import jsonwire
from panelist.metrics.errors import BadRequest

FIELDS = (
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
)


def today() -> str:
    """The UTC date, as a task's ``created``."""
    return time.strftime("%Y-%m-%d", time.gmtime())


def slug(text: str, limit: int = 40) -> str:
    """``text`` as a piece of a task id: lower-case letters, digits and single dashes."""
    s = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return s[:limit].rstrip("-") or "x"


def safe_path(name: str) -> str | None:
    """``name`` as a relative POSIX path that stays inside a folder, or None if it cannot."""
    parts = [p for p in PurePosixPath(name.replace("\\", "/")).parts if p not in ("", ".")]
    if (
        not parts
        or parts[0] == "/"
        or ".." in parts
        or any(":" in p or any(ord(c) < 32 for c in p) for p in parts)
    ):
        return None
    return "/".join(parts)


def out_dir(home, out: str | os.PathLike | None) -> Path:
    """The folder to write tasks to: ``out`` if given, else the data folder's; made if new."""
    root = Path(out).expanduser() if out else home.grown_tasks
    if root.exists() and not root.is_dir():
        raise BadRequest(f"--out {root} is a file; name a folder for the tasks")
    root.mkdir(parents=True, exist_ok=True)
    return root


def exists(root: Path, task_id: str) -> bool:
    return (root / task_id / "task.json").is_file()


def read(root: Path, task_id: str) -> dict | None:
    """A written task's task.json, or None if it is missing or unreadable."""
    try:
        data = jsonwire.loads((root / task_id / "task.json").read_bytes())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def write(root: Path, task: dict, fixtures: dict[str, bytes], *, replace: bool = False) -> bool:
    """Write one task folder; False (nothing written) when it already exists and ``replace``
    is not set. ``fixtures`` maps each attached path to its bytes."""
    unknown = sorted(set(task) - set(FIELDS))
    if unknown:
        raise ValueError(f"not task fields: {', '.join(unknown)}")
    target = root / task["id"]
    if target.exists() and not replace:
        return False
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{task['id']}.", dir=root))
    try:
        tmp.chmod(0o755)  # mkdtemp's 0700 would make the task unreadable to anyone else
        for name, data in fixtures.items():
            path = tmp / "fixtures" / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        (tmp / "task.json").write_text(
            jsonwire.dumps(task, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
        )
        if target.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{task['id']}.old.", dir=root))
            os.replace(target, old / "task")
            os.rename(tmp, target)
            shutil.rmtree(old, ignore_errors=True)
        else:
            try:
                os.rename(tmp, target)
            except OSError:
                if target.exists():  # another writer finished the same task first
                    return False
                raise
        return True
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
