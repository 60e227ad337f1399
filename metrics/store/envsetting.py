"""Numbers the environment sets for the server's settings (``seconds``, ``whole``): the one
reading of a ``PANELIST_*`` number, so every such variable is refused alike.

Invariants: an unset or empty variable is the default; anything else must be a number in the
setting's range (finite: NaN and infinity never are), else ``ConfigInvalid`` names the
variable, the range and what was given, so a wrong value stops the server at start.
"""

from __future__ import annotations

import math
from typing import Mapping

from panelist.metrics.errors import ConfigInvalid


def seconds(
    env: Mapping[str, str],
    name: str,
    default: float,
    *,
    low: float = 0.0,
    high: float | None = None,
    low_included: bool = False,
) -> float:
    """A number of seconds above ``low`` (or from it, with ``low_included``), at most ``high``."""
    raw = (env.get(name) or "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    above = value >= low if low_included else value > low
    if not (math.isfinite(value) and above and (high is None or value <= high)):
        span = f"from {low:g}" if low_included else f"above {low:g}"
        span += f" to {high:g}" if high is not None else ""
        raise ConfigInvalid(f"{name} must be a number of seconds {span}; got {raw!r}")
    return value


def whole(
    env: Mapping[str, str],
    name: str,
    default: int,
    *,
    low: int = 1,
    high: int | None = None,
    unit: str = "",
) -> int:
    """A whole number from ``low`` to ``high`` (of ``unit``, for the message)."""
    raw = (env.get(name) or "").strip()
    if not raw:
        return default
    if (
        not (raw.isascii() and raw.isdigit())
        or int(raw) < low
        or (high is not None and int(raw) > high)
    ):
        what = f"a whole number{' of ' + unit if unit else ''}"
        span = f"from {low} to {high}" if high is not None else f"of at least {low}"
        raise ConfigInvalid(f"{name} must be {what} {span}; got {raw!r}")
    return int(raw)
