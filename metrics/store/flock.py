"""An exclusive ``flock`` taken without waiting: the one way a process on a data folder claims a
job (the demo's simulator, the dashboard's suite run, a race of one job) that no other process
may run at once. The lock belongs to the open file, so the kernel drops it however the holder
ends, even by SIGKILL; closing the descriptor lets go.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path


def try_hold(path: Path) -> int | None:
    """The descriptor holding ``path``'s lock (made with its folder if absent, this user's
    only), or None when another open file holds it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)  # not inherited by children
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    except BaseException:
        os.close(fd)
        raise
    return fd
