"""Alerts: what changed in the roster without a person doing it, for a person to notice.

``runs/alerts.jsonl`` holds one line per alert: ``{"v", "ts", "kind", "subject", "message",
...}``, appended under the shared JSONL lock (``jsonl.Appender``), so the gateway, a probe and a
CLI command can raise alerts on one data folder at once. Kinds in use: ``retired`` and
``restored`` (a model by health), ``went_paid`` (a price rose from zero), ``failing`` and
``recovered`` (a model whose latest calls keep failing, and its return: ``upkeep.failing``),
``endpoint_failing`` and ``endpoint_recovered`` (every model of an endpoint failing with the
same endpoint-level cause, said once for the endpoint: ``upkeep.failing``).
An alert is never edited or removed; ``recent`` reads the newest from the file's end, so
showing them costs the same however long the file grows.
"""

from __future__ import annotations

import time
from itertools import islice

from panelist.metrics.store import jsonl
from panelist.metrics.home import Home

TAIL_BYTES = 256 * 1024  # how far back from the end ``recent`` reads


class Alerts:
    """The alerts of one data folder."""

    def __init__(self, home: Home):
        self.path = home.alerts_log
        self._appender: jsonl.Appender | None = None

    def raise_alert(self, kind: str, subject: str, message: str, **fields) -> dict:
        """Append one alert; ``subject`` is what it is about (a model alias, an endpoint)."""
        record = {
            "v": jsonl.SCHEMA,
            "ts": jsonl.utc_second(time.time()),
            "kind": kind,
            "subject": subject,
            "message": message,
            **fields,
        }
        if self._appender is None:
            self._appender = jsonl.Appender(self.path)
        self._appender.append(record)
        return record

    def recent(self, limit: int = 50) -> list[dict]:
        """The newest alerts first, at most ``limit``, read from the last ``TAIL_BYTES``."""
        return list(islice(jsonl.backward(self.path, within=TAIL_BYTES), max(0, limit)))

    def close(self) -> None:
        if self._appender is not None:
            self._appender.close()
            self._appender = None
