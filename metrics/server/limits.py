"""The bounds on what one request may make a server do (``Limits``), read once when the server
is built, from the environment:

    PANELIST_SEARCH_ROWS     rows one panel search may look at (default 50,000); past it
                             the search answers what it found with ``"partial": true``
    PANELIST_SEARCH_SECONDS  seconds one panel search may take (default 2); the same
    PANELIST_MAX_REQUEST_CALLS  upstream calls one request that fans out (a race) may make at
                             most, retries included (default 5,000); a request that could
                             make more is refused before it starts, naming both numbers

Invariants: a value is checked when the server is built, so a wrong one stops it at start with
a message naming the setting; an unset or empty value is the default.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Mapping

from panelist.metrics.ledger import searchplan
from panelist.metrics.store import envsetting

MAX_REQUEST_CALLS = 5_000


@dataclass(frozen=True)
class Limits:
    search_rows: int = searchplan.ROWS
    search_seconds: float = searchplan.SECONDS
    max_request_calls: int = MAX_REQUEST_CALLS

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> "Limits":
        env = os.environ if env is None else env
        return cls(
            search_rows=envsetting.whole(env, "PANELIST_SEARCH_ROWS", searchplan.ROWS),
            search_seconds=envsetting.seconds(env, "PANELIST_SEARCH_SECONDS", searchplan.SECONDS),
            max_request_calls=envsetting.whole(
                env, "PANELIST_MAX_REQUEST_CALLS", MAX_REQUEST_CALLS
            ),
        )
