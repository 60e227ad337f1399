"""The one atomic file write: the whole new content goes to a temp file beside the target, which
then replaces it with ``os.replace``.

Invariants: a reader of ``path`` sees the old file or the new one, never a part of either; the
temp file's name is unique to the process and thread writing it, so two writers never share one
(each replaces the file whole, and the last one wins); a write that fails removes its temp file
and leaves the old file in place. Locking is the caller's: one that must not lose an update
holds a lock around read, change and write (``configfile.update``).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path


def write(path: Path, data: bytes | str, *, mode: int = 0o666, fsync: bool = True) -> None:
    """Replace ``path`` with ``data`` (text is written as UTF-8).

    ``mode``: the new file's permissions before the umask (``0o600`` for files that are only
    this user's, such as the ledger's snapshot). ``fsync``: flush the content to disk before
    the rename, so a crash leaves the old file or the whole new one; files that are rebuilt
    from others when lost (reports) pass False."""
    path = Path(path)
    if isinstance(data, str):
        data = data.encode("utf-8")
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        with open(fd, "wb") as f:
            f.write(data)
            if fsync:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
