"""Another process on the same data folder, for the admission tests (and the routine both sides run).

    python tests/admission_worker.py hold DATA ENDPOINT MODEL [DATABASE_URL]
        takes one slot (through the database when a URL is given), prints "held", and keeps
        it until killed or its stdin closes
    python tests/admission_worker.py calls DATA ENDPOINT MODEL N WINDOW OUT TAG [WORK]
        makes N calls at once through admission (see ``calls``) and exits 0

Each call, once admitted, adds itself to a counter shared by every process (a file under
``flock``), appends ``{"tag", "at", "running"}`` to OUT, works a moment and leaves the counter: the
largest ``running`` seen is how many calls ever held a slot at once, whichever process made them.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import _bootstrap  # noqa: E402,F401

from panelist.metrics.upstream.admission import Admission  # noqa: E402
from panelist.metrics.home import open_home  # noqa: E402

WORK = 0.02  # seconds a call holds its slot by default: its "model call"


def bump(path: Path, delta: int) -> int:
    """Add ``delta`` to the number in ``path`` under an exclusive lock; return the new number."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        n = int(os.pread(fd, 32, 0) or b"0") + delta
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(n).encode(), 0)
        return n
    finally:
        os.close(fd)


def append(path: Path, record: dict) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, (json.dumps(record) + "\n").encode())
    finally:
        os.close(fd)


def calls(
    data: str,
    endpoint: str,
    model: str,
    n: int,
    window: float,
    out: Path,
    tag: str,
    work: float = WORK,
) -> None:
    """``n`` threads, each making one call through admission with a generous wait."""
    out = Path(out)
    counter = out.with_name(out.name + ".running")
    admission = Admission(open_home(data), window=window)
    errors = []

    def one() -> None:
        try:
            with admission.slot(endpoint, model, wait=120) as admitted:
                running = bump(counter, +1)
                append(out, {"tag": tag, "at": admitted.at, "running": running})
                time.sleep(work)
                bump(counter, -1)
        except Exception as exc:  # reported by the caller, which counts the records
            errors.append(exc)

    threads = [threading.Thread(target=one) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    admission.close()
    if errors:
        raise errors[0]


def hold(data: str, endpoint: str, model: str, database: str | None = None) -> None:
    admission = Admission.of_home(open_home(data, database=database))
    with admission.slot(endpoint, model, wait=120):
        print("held", flush=True)
        sys.stdin.read()  # until the test closes our stdin, or kills us


if __name__ == "__main__":
    mode, data, endpoint, model, *rest = sys.argv[1:]
    if mode == "hold":
        hold(data, endpoint, model, *rest)
    else:
        n, window, out, tag, *work = rest
        calls(
            data,
            endpoint,
            model,
            int(n),
            float(window),
            Path(out),
            tag,
            float(work[0]) if work else WORK,
        )
