"""Which route answers a path, and the gate every request to it passes.

A route declares its gate; there is no default, so no route is open by accident. A path no
route serves passes the gate its prefix would have (``gate_of``), so a 404 never tells a caller
without a key what exists.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

from panelist.metrics.server.guard import Guard

OPEN, KEYS, ADMIN = "open", "keys", "admin"  # the gates a route may declare


class Route:
    """One path pattern, its actions by method, and the gate every request to it passes.

    ``{name}`` matches one path segment (given to the action percent-decoded, in ``params``);
    a trailing ``*`` matches the rest of the path (``params["rest"]``). The gate is required:
    ``keys`` (gateway keys, when keys are required), ``admin`` (the dashboard's login, when an
    admin token is set) or ``open`` (answered for anyone; only what reveals nothing).
    ``max_body``: the most body bytes its requests may send (None: the server's cap), refused
    before any of the body is read. ``refusal_pause``: seconds a refusal (a 4xx) on this route
    waits before it is sent, the connection held meanwhile by the heads thread rather than a
    handler thread (``Server.answer_later``): a client that waits for its answer before it
    tries again can only try so often, and costs nothing while it waits."""

    __slots__ = ("pattern", "actions", "gate", "max_body", "refusal_pause", "_regex")

    def __init__(
        self,
        pattern: str,
        actions: dict,
        *,
        gate: str,
        max_body: int | None = None,
        refusal_pause: float = 0.0,
    ):
        if gate not in (OPEN, KEYS, ADMIN):
            raise ValueError(f"unknown gate {gate!r} for {pattern}")
        self.pattern, self.actions, self.gate = pattern, actions, gate
        self.max_body = max_body
        self.refusal_pause = refusal_pause
        regex = re.escape(pattern.removesuffix("*"))
        regex = re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>[^/]+)", regex)
        self._regex = re.compile(regex + ("(?P<rest>.*)" if pattern.endswith("*") else ""))

    def match(self, path: str) -> dict | None:
        m = self._regex.fullmatch(path)
        return None if m is None else {k: unquote(v) for k, v in m.groupdict().items()}


def gate_of(path: str) -> str:
    """The gate of a path no route serves: that of the routes under its prefix."""
    return KEYS if Guard.gated(path) else ADMIN


class Routes:
    """A server's route table: exact paths looked up at once, patterns tried in the order added."""

    def __init__(self, routes=()):
        self.exact: dict[str, Route] = {}
        self.patterns: list[Route] = []
        for route in routes:
            self.add(route)

    def add(self, route: Route) -> None:
        if "{" in route.pattern or route.pattern.endswith("*"):
            self.patterns.append(route)
        else:
            self.exact[route.pattern] = route

    def match(self, path: str) -> tuple[Route | None, dict]:
        route = self.exact.get(path)
        if route is not None:
            return route, {}
        for route in self.patterns:
            params = route.match(path)
            if params is not None:
                return route, params
        return None, {}
