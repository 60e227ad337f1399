"""Files a command reads whole (a prompt, a race's inputs, a catalog to import), through one
bounded reader: a file that is too large, or never ends (``/dev/zero``, a pipe left open), is
refused with a message saying what to do, never read into memory until it runs out.

Invariants: at most ``limit + 1`` bytes are read; every failure is a ``BadRequest`` naming the
file (missing or unreadable, a folder, too large, not UTF-8), raised before the caller has any
of its contents.
"""

from __future__ import annotations

from pathlib import Path

from panelist.metrics.errors import BadRequest

MiB = 1 << 20
LIMIT = 16 * MiB  # as much as the gateway takes in one request body


def read_bytes(
    path: str | Path, *, limit: int = LIMIT, what: str = "file", param: str | None = None
) -> bytes:
    """The contents of ``path``, at most ``limit`` bytes; ``what`` names it in a refusal."""
    p = Path(path).expanduser()
    try:
        with open(p, "rb") as f:
            data = f.read(limit + 1)
    except IsADirectoryError:
        raise BadRequest(f"{p} is a folder; give the path of a {what}", param=param) from None
    except OSError as exc:
        raise BadRequest(f"cannot read {p}: {exc.strerror or exc}", param=param) from None
    if len(data) > limit:
        raise BadRequest(
            f"{p} is larger than {_size(limit)} (or never ends); give a {what} "
            f"under {_size(limit)}",
            param=param,
        )
    return data


def read_text(
    path: str | Path, *, limit: int = LIMIT, what: str = "file", param: str | None = None
) -> str:
    """``read_bytes`` as UTF-8 text."""
    data = read_bytes(path, limit=limit, what=what, param=param)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadRequest(
            f"{Path(path).expanduser()} is not UTF-8 text (byte {exc.start} is "
            f"not); give a {what} saved as UTF-8",
            param=param,
        ) from None


def _size(n: int) -> str:
    return f"{n // MiB} MiB" if n >= MiB else f"{n} bytes"
