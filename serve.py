"""The dashboard server: the static dashboard in ``ui/``, its JSON API under ``/api/``, and the
gateway's own routes, on one port (127.0.0.1:8122 by default).

    python serve.py [--demo] [--host H] [--port P] [--data DIR]   (same as `panelist serve`)

It stands on the gateway's server base (``gateway.GatewayServer``): the same connection limits,
guard and route table, with the gateway's routes added as they are, so one port can serve both.
Thin, like the gateway: the API's handlers are ``metrics.server.api`` functions over the domain.

Invariants:

* Every route passes a gate: ``/v1/`` and ``/bench/`` take gateway keys as on the gateway;
  ``/api/`` asks for the dashboard login when ``PANELIST_ADMIN_TOKEN`` is set; only the login
  page, ``/api/login``, ``/api/logout``, ``/health`` and the static files are open (they hold no
  data). A gateway key never opens the dashboard.
* Every reply carries a strict Content-Security-Policy (no inline script or style, nothing from
  another origin), ``X-Content-Type-Options: nosniff`` and ``Referrer-Policy: no-referrer``.
* Static files are served only from inside ``ui/``, with an ETag, revalidated on every use; an
  unknown path is a 404, never the app.
"""

from __future__ import annotations

import hashlib
import mimetypes
import sys
import threading
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

if not __package__:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import _bootstrap  # noqa: F401

from panelist.gateway import (ADMIN, OPEN, GatewayServer, Handler, Route,  # noqa: E402
                              panels_for)
from panelist.metrics.server import api
from panelist.metrics.upkeep import schedule  # noqa: E402
from panelist.metrics.errors import NotFound  # noqa: E402
from panelist.metrics.server.guard import WRITES, Settings  # noqa: E402
from panelist.metrics.home import Home, open_home  # noqa: E402
from panelist.metrics.panel.panel import Panels  # noqa: E402
from panelist.metrics.server.session import Sessions  # noqa: E402

UI = Path(__file__).resolve().parent / "ui"
DEFAULT_PORT = 8122
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self'; "
                               "img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
         ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml", ".json": "application/json",
         ".md": "text/plain; charset=utf-8", ".png": "image/png"}
PAGES = {"/": "index.html", "/index.html": "index.html", "/login": "login.html"}


class StaticFiles:
    """The files of ``ui/``, read once each (and again when they change), with their ETags."""

    def __init__(self, root: Path):
        self.root = root.resolve()
        self._lock = threading.Lock()
        self._cache: dict[Path, tuple[tuple, bytes, str]] = {}

    def get(self, relative: str) -> tuple[bytes, str, str]:
        """``(content, content type, etag)``; NotFound for anything outside ``ui/`` or missing."""
        path = (self.root / relative).resolve()
        if not path.is_relative_to(self.root) or any(p.startswith(".") for p in path.parts[-1:]):
            raise NotFound(f"no file {relative!r} in the dashboard")
        try:
            st = path.stat()
        except OSError:
            raise NotFound(f"no file {relative!r} in the dashboard") from None
        if not path.is_file():
            raise NotFound(f"no file {relative!r} in the dashboard")
        stamp = (st.st_ino, st.st_size, st.st_mtime_ns)
        with self._lock:
            hit = self._cache.get(path)
        if hit is None or hit[0] != stamp:
            data = path.read_bytes()
            etag = '"' + hashlib.sha256(data).hexdigest()[:32] + '"'
            hit = (stamp, data, etag)
            with self._lock:
                self._cache[path] = hit
        kind = TYPES.get(path.suffix) or mimetypes.guess_type(path.name)[0] or \
            "application/octet-stream"
        return hit[1], kind, hit[2]


def send_file(h: Handler, relative: str) -> None:
    data, kind, etag = h.server.static.get(relative)
    h._sent = True
    fresh = h.headers.get("If-None-Match") == etag
    h.send_response(304 if fresh else 200)
    h.send_header("ETag", etag)
    h.send_header("Cache-Control", "no-cache")   # revalidated on every use: never a stale app
    if not fresh:
        h.send_header("Content-Type", kind)
        h.send_header("Content-Length", str(len(data)))
    h.send_common()
    h.end_headers()
    if not fresh and h.command != "HEAD":
        h.wfile.write(data)


def get_page(h: Handler, params: dict) -> None:
    send_file(h, PAGES[urlsplit(h.path).path.rstrip("/") or "/"])


def get_asset(h: Handler, params: dict) -> None:
    folder = urlsplit(h.path).path.split("/")[1]
    send_file(h, f"{folder}/{params['rest']}")


def get_favicon(h: Handler, params: dict) -> None:
    send_file(h, "favicon.svg")


def api_action(fn):
    """An ``metrics.server.api`` handler as a route action: the request in, JSON out."""
    def action(h: Handler, params: dict) -> None:
        server: DashboardServer = h.server
        body = h.read_json() if h.command in WRITES and server.guard.has_body(h.headers) \
            else None
        query = {k: v[0] for k, v in
                 parse_qs(urlsplit(h.path).query, keep_blank_values=True).items()}
        req = api.ApiRequest(method=h.command, params=params, query=query, body=body,
                             panels=server.panels, who="dashboard", base_url=h.base_url(),
                             start_demo=server.start_demo,
                             token_required=server.sessions.required)
        result = fn(req)
        h.send_json(getattr(result, "status", 200), result)   # api.Accepted is 202
    return action


def post_login(h: Handler, params: dict) -> None:
    server: DashboardServer = h.server
    body = h.read_json()
    token = body.get("token") if isinstance(body, dict) else None
    sid = server.sessions.login(token, h.client_address[0])
    # behind an https public URL the browser must never send the session in the clear
    secure = (server.guard.settings.public_url or "").startswith("https://")
    h.send_json(200, {"ok": True}, {"Set-Cookie": server.sessions.cookie(sid, secure=secure)})


def post_logout(h: Handler, params: dict) -> None:
    server: DashboardServer = h.server
    if server.guard.has_body(h.headers):
        h.read_json()
    server.sessions.logout(Sessions.from_cookie(h.headers.get("Cookie")))
    h.send_json(200, {"ok": True}, {"Set-Cookie": Sessions.cleared()})


def dashboard_routes() -> list[Route]:
    routes = [Route(path, {"GET": get_page}, gate=OPEN) for path in PAGES]
    routes += [Route(f"/{folder}/*", {"GET": get_asset}, gate=OPEN)
               for folder in ("css", "js", "vendor")]
    routes += [Route("/favicon.svg", {"GET": get_favicon}, gate=OPEN),
               Route("/api/login", {"POST": post_login}, gate=OPEN),
               Route("/api/logout", {"POST": post_logout}, gate=OPEN)]
    routes += [Route(pattern, {m: api_action(fn) for m, fn in actions.items()}, gate=ADMIN)
               for pattern, actions in api.ROUTES]
    return routes


class DashboardServer(GatewayServer):
    """The gateway's server with the dashboard's routes, login and headers added."""

    def __init__(self, panels: Panels, host: str, port: int, *, settings: Settings,
                 ui: Path = UI, **kw):
        super().__init__(panels, host, port, settings=settings, **kw)
        self.sessions = Sessions(settings.admin_token)
        self.static = StaticFiles(ui)
        self.common_headers = dict(SECURITY_HEADERS)
        self.routes_help = "the dashboard serves /, /api/… and the gateway's /v1/… and /bench/…"
        for route in dashboard_routes():
            self.add_route(route)
        self._sim = None
        self._sim_lock = threading.Lock()

    def check_admin(self, h: Handler) -> None:
        self.sessions.check(Sessions.from_cookie(h.headers.get("Cookie")))

    def start_demo(self) -> str:
        """Start the simulated upstream the demo roster calls (once); its base URL."""
        from panelist.metrics.upstream.sim import SimUpstream
        with self._sim_lock:
            if self._sim is None:
                self._sim = SimUpstream(keep_requests=1000).start()   # a long demo stays small
            return self._sim.url

    def close(self) -> None:
        super().close()
        with self._sim_lock:
            if self._sim is not None:
                self._sim.stop()
                self._sim = None


def make_dashboard(data_dir, host: str = "127.0.0.1", port: int = 0, *,
                   settings: Settings | None = None, env=None, demo: bool = False,
                   panels: Panels | None = None, **kw) -> DashboardServer:
    """Build (not start) a dashboard server over one data folder; ``serve_forever`` runs it.

    Settings come as for ``make_gateway`` (``settings``, else ``env``, else the process
    environment); ``demo`` starts the simulated roster now, as ``--demo`` does."""
    settings = settings or Settings.from_env(env)
    settings.check_bind(host)
    home = data_dir if isinstance(data_dir, Home) else open_home(data_dir)
    schedule.settings(home)   # a broken schedule is refused before the panels open
    server = DashboardServer(panels or panels_for(home, env), host, port, settings=settings,
                             **kw)
    if demo:
        from panelist.metrics.roster import demo as demo_roster
        try:
            demo_roster.install(home, server.start_demo())
        except BaseException:
            server.close()
            raise
    return server


if __name__ == "__main__":
    from panelist.gateway import make_gateway
    from panelist.metrics.cli.main import Runtime, main
    from panelist.metrics.upstream.sim import SimUpstream
    sys.exit(main(["serve", *sys.argv[1:]], Runtime(make_gateway, make_dashboard, SimUpstream)))
