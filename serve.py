"""The dashboard server: the static dashboard in ``ui/``, its JSON API under ``/api/``, and the
gateway's own routes, on one port (127.0.0.1:8122 by default). An entry point: it builds a
server from ``metrics.server`` (the gateway's routes plus ``metrics.server.dashboard``'s) and
runs it.

    python serve.py [--demo] [--host H] [--port P] [--workers N] [--data DIR]
                                                             (same as `panelist serve`)

``/v1/`` and ``/bench/`` take gateway keys as on the gateway, and so do Ollama's and Gemini's
routes (``/api/chat``, ``/api/generate``, ``/api/tags``, ``/api/show``, ``/api/version`` and
``/v1beta/``: ``metrics.server.clientapis``); the rest of ``/api/`` asks for the dashboard
login when ``PANELIST_ADMIN_TOKEN`` is set, which ``PANELIST_REQUIRE_KEYS=1`` makes a must (the
server refuses to start without it); only the pages, the static files, ``/api/login``,
``/api/logout`` and ``/health`` are open.
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
from panelist.metrics.server.dashboard import (
    ROUTES_HELP,
    SECURITY_HEADERS,  # noqa: E402
    UI,
    Dashboard,
    require_login,
)
from panelist.metrics.server.guard import Settings  # noqa: E402
from panelist.metrics.server.parts import Parts  # noqa: E402
from panelist.metrics.server import clientapis  # noqa: E402
from panelist.metrics.server.routes import GATEWAY_ROUTES  # noqa: E402


def make_dashboard(
    data_dir,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    settings: Settings | None = None,
    env=None,
    demo: bool = False,
    panels: Panels | None = None,
    ui: Path = UI,
    **kw,
) -> Server:
    """Build (not start) a dashboard server over one data folder; ``serve_forever`` runs it.

    Settings come as for ``make_gateway`` (``settings``, else ``env``, else the process
    environment); ``demo`` starts the simulated roster now, as ``--demo`` does; ``kw`` are the
    server base's connection limits."""
    settings = settings or Settings.from_env(env)
    settings.check_bind(host)
    require_login(settings)  # settings that leave it open are refused before anything opens
    home = data_dir if isinstance(data_dir, Home) else open_home(data_dir)
    parts = Parts.of_home(home, panels, env)
    # holds nothing of its own: with a database its logins are the parts' table
    dashboard = Dashboard(settings, ui, sessions=parts.sessions)
    # ours to close when building fails; a caller's panels stay the caller's
    return build(
        parts,
        host,
        port,
        own_parts=panels is None,
        demo=demo,
        routes=[*GATEWAY_ROUTES, *clientapis.ROUTES, *dashboard.routes()],
        routes_help=ROUTES_HELP,
        settings=settings,
        admin_gate=dashboard.check_admin,
        common_headers=SECURITY_HEADERS,
        **kw,
    )


if __name__ == "__main__":
    from panelist.gateway import make_gateway
    from panelist.metrics.cli.main import Runtime, main
    from panelist.metrics.upstream.sim import SimUpstream

    sys.exit(main(["serve", *sys.argv[1:]], Runtime(make_gateway, make_dashboard, SimUpstream)))
