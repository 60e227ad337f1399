"""The gateway: an OpenAI-compatible HTTP front for panels. An entry point: it builds a server
from ``metrics.server`` and runs it.

    python gateway.py [--host H] [--port P] [--workers N] [--demo] [--data DIR]
                                                             (same as `panelist gateway`)

Routes (``metrics.server.routes``): ``GET /v1/models``, ``POST /v1/chat/completions``
(``stream: true`` for server-sent events), ``POST /v1/responses`` (OpenAI's Responses format),
``POST /v1/messages`` (Anthropic's Messages format), ``POST /bench/verdict``, ``GET
/bench/pending``, ``GET /bench/panels/<panel id>``, the races under ``/bench/race``, ``GET
/health``, and Ollama's and Gemini's routes (``metrics.server.clientapis``). Every error
is OpenAI's error shape (Anthropic's on ``/v1/messages``, Ollama's and Google's on theirs)
with the right status; anything unexpected is a 500 carrying a request id, with the traceback
on stderr. What a connection may cost is bounded as ``metrics.server.front.base`` describes.
"""

from __future__ import annotations

import sys
from pathlib import Path

if not __package__:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import _bootstrap  # noqa: F401

from panelist.metrics.home import Home, open_home  # noqa: E402
from panelist.metrics.panel.panel import Panels  # noqa: E402
from panelist.metrics.server.front.base import Server, build  # noqa: E402
from panelist.metrics.server.front.connection import (
    BODY_HOLD,
    BODY_TIMEOUT,  # noqa: E402
    HEAD_TIMEOUT,
    MAX_CONNECTIONS,
)
from panelist.metrics.server.guard import Settings  # noqa: E402
from panelist.metrics.server.parts import Parts  # noqa: E402
from panelist.metrics.server.front.pool import IDLE_THREAD  # noqa: E402
from panelist.metrics.server import clientapis  # noqa: E402
from panelist.metrics.server.routes import GATEWAY_ROUTES, ROUTES_HELP  # noqa: E402
from panelist.metrics.server.front.workers import Role  # noqa: E402


def make_gateway(
    data_dir,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    panels: Panels | None = None,
    keepalive: float = 10.0,
    settings: Settings | None = None,
    env=None,
    client_timeout: float = 60.0,
    head_timeout: float = HEAD_TIMEOUT,
    body_timeout: float = BODY_TIMEOUT,
    body_hold: float = BODY_HOLD,
    max_connections: int = MAX_CONNECTIONS,
    max_pending: int | None = None,
    max_in_flight: int | None = None,
    thread_idle: float = IDLE_THREAD,
    demo: bool = False,
    role: Role = Role(),
) -> Server:
    """Build (not start) a gateway over one data folder; call ``serve_forever`` to run it.

    Who may call comes from ``settings``, else from ``env`` (a mapping), else from the process
    environment, read now: a bad setting, or a non-loopback ``host`` without an admin token,
    raises ConfigInvalid before anything is opened. The timeouts, ``body_hold`` (seconds a
    small body is awaited before its request takes a thread), ``max_connections`` and
    ``max_pending`` (default: as many as ``max_connections``) bound what connections may cost,
    ``max_in_flight`` (bytes; default: ``PANELIST_MAX_INFLIGHT_MB``) what their bodies may hold
    in memory, ``thread_idle`` how long a connection thread waits for its next connection
    before it ends; tests pass small ones. ``demo`` serves the demo roster now, as ``--demo``
    does (the data folder's one simulator, see ``metrics.upkeep.demohost``). ``role``: which of
    several workers on one port this is (``metrics.server.front.workers``)."""
    settings = settings or Settings.from_env(env)
    settings.check_bind(host)
    home = data_dir if isinstance(data_dir, Home) else open_home(data_dir)
    parts = Parts.of_home(home, panels, env)
    # ours to close when building fails; a caller's panels stay the caller's
    return build(
        parts,
        host,
        port,
        own_parts=panels is None,
        demo=demo,
        routes=(*GATEWAY_ROUTES, *clientapis.ROUTES),
        routes_help=f"the gateway serves {ROUTES_HELP}, {clientapis.ROUTES_HELP}",
        settings=settings,
        keepalive=keepalive,
        client_timeout=client_timeout,
        head_timeout=head_timeout,
        body_timeout=body_timeout,
        body_hold=body_hold,
        max_connections=max_connections,
        max_pending=max_pending,
        max_in_flight=max_in_flight,
        thread_idle=thread_idle,
        role=role,
    )


if __name__ == "__main__":
    from panelist.metrics.cli.main import Runtime, main
    from panelist.metrics.upstream.sim import SimUpstream

    sys.exit(
        main(["gateway", *sys.argv[1:]], Runtime(make_gateway=make_gateway, simulator=SimUpstream))
    )
