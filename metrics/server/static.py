"""The dashboard's static files (``ui/``): read once each (and again when they change), served
with an ETag and revalidated on every use.

Invariants: only files inside ``ui/`` are served; a dot file, anything outside, and a path no
file system could name (a NUL or other control character, a name too long) are a 404, never
the app and never a 500. A refusal repeats at most ``SHOWN`` characters of the path.
"""

from __future__ import annotations

import hashlib
import mimetypes
import threading
from pathlib import Path

from panelist.metrics.errors import NotFound
from panelist.metrics.plaintext import first_control

TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".json": "application/json",
    ".md": "text/plain; charset=utf-8",
    ".png": "image/png",
}
SHOWN = 120  # characters of a path a 404 repeats


class StaticFiles:
    """The files of ``ui/``, read once each (and again when they change), with their ETags."""

    def __init__(self, root: Path):
        self.root = root.resolve()
        self._lock = threading.Lock()
        self._cache: dict[Path, tuple[tuple, bytes, str]] = {}

    def get(self, relative: str) -> tuple[bytes, str, str]:
        """``(content, content type, etag)``; NotFound for anything outside ``ui/`` or missing."""
        missing = NotFound(
            f"no file {relative[:SHOWN]!r}{'…' if len(relative) > SHOWN else ''} "
            "in the dashboard; its files are under /css/, /js/ and /vendor/"
        )
        if first_control(relative):  # no file of ours is named so; the OS refuses a NUL
            raise missing
        try:
            path = (self.root / relative).resolve()
            if not path.is_relative_to(self.root) or any(
                p.startswith(".") for p in path.parts[-1:]
            ):
                raise missing
            st = path.stat()
        except (OSError, ValueError, RuntimeError):  # too long, a loop of links, not a name
            raise missing from None
        if not path.is_file():
            raise missing
        stamp = (st.st_ino, st.st_size, st.st_mtime_ns)
        with self._lock:
            hit = self._cache.get(path)
        if hit is None or hit[0] != stamp:
            data = path.read_bytes()
            etag = '"' + hashlib.sha256(data).hexdigest()[:32] + '"'
            hit = (stamp, data, etag)
            with self._lock:
                self._cache[path] = hit
        kind = (
            TYPES.get(path.suffix)
            or mimetypes.guess_type(path.name)[0]
            or "application/octet-stream"
        )
        return hit[1], kind, hit[2]
