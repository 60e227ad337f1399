"""What the dashboard adds to a server (``Dashboard``): its pages and static files, its JSON API
under ``/api/`` (``metrics.server.api``), the login and its gate, and the headers every reply
carries.

Invariants:

* Every route passes a gate: ``/api/`` asks for the dashboard login when ``PANELIST_ADMIN_TOKEN``
  is set; only the pages, the static files, ``/api/login`` and ``/api/logout`` are open (they
  hold no data). A gateway key never opens the dashboard. ``/api/ask`` runs a panel for the
  logged-in admin (``metrics.server.ask``) behind the same login.
* The ``/api/`` routes are ``metrics.server.api``'s, ``metrics.server.console``'s,
  ``metrics.server.judgechecks``'s and ``metrics.server.signins``'s; each
  takes at most ``API_BODY`` bytes but a handler that says more (``max_body``: an upload).
* With a database, a handler that edits the config (``api.edits_config``) runs under the config
  mirror's ``editing``: its 200 comes only once the edit is in the database.
* Every ``/api/`` write declares its body (``metrics.server.bodies``) and is refused when the
  server is built if it does not; the body is checked against it before the action runs.
* When gateway keys are required (``PANELIST_REQUIRE_KEYS=1``) the dashboard is never open: it
  refuses to be built without an admin token (``require_login``), since its API reads every
  key's prompts and makes keys, which would undo what requiring keys asked for.
* Every reply carries a strict Content-Security-Policy (no inline script or style, nothing from
  another origin), ``X-Content-Type-Options: nosniff`` and ``Referrer-Policy: no-referrer``.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from panelist.metrics.errors import ConfigInvalid
from panelist.metrics.server import (
    api,
    ask,
    bodies,
    budgetapi,
    catalogapi,
    console,
    endpointapi,
    hookapi,
    infoapi,
    judgechecks,
    keyapi,
    onboardapi,
    raceapi,
    reportapi,
    seriesapi,
    signins,
)
from panelist.metrics.server.bodies import NOTHING, Body, Text, takes
from panelist.metrics.server.guard import MIN_TOKEN, WRITES, Settings
from panelist.metrics.server.front.handler import Handler
from panelist.metrics.server.routing import ADMIN, OPEN, Route
from panelist.metrics.server.session import Sessions
from panelist.metrics.server.static import StaticFiles

UI = Path(__file__).resolve().parents[2] / "ui"  # the checkout's (or the package's) ui/
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self'; "
    "img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
PAGES = {"/": "index.html", "/index.html": "index.html", "/login": "login.html"}
ROUTES_HELP = (
    "the dashboard serves /, /api/… and the gateway's /v1/…, /bench/…, Ollama's "
    "/api/chat, /api/generate, /api/tags, /api/show and Gemini's /v1beta/…"
)
LOGIN_BODY = 4 * 1024  # a token in JSON: anything longer is not a login
API_BODY = 1024 * 1024  # the dashboard's writes: names, settings, a model's facts
LOGIN = Body(
    token=Text(required=True, hint="the value of PANELIST_ADMIN_TOKEN where the server was started")
)


def api_routes() -> dict[str, dict]:
    """The ``/api/`` routes by pattern: ``api``'s, the front page's (``infoapi``), the keys'
    (``keyapi``), the races' (``raceapi``), discovery and the catalog's (``catalogapi``),
    onboarding's (``onboardapi``), the reports' (``reportapi``), the console's (``console``),
    the judge checks' (``judgechecks``), the provider sign-ins' (``signins``), the webhooks'
    (``hookapi``), the spend caps' (``budgetapi``), the time axis (``seriesapi``) and an
    endpoint's health (``endpointapi``), a pattern two list answering the methods of each."""
    merged: dict[str, dict] = {}
    for pattern, actions in (
        api.ROUTES
        + infoapi.ROUTES
        + keyapi.ROUTES
        + raceapi.ROUTES
        + catalogapi.ROUTES
        + onboardapi.ROUTES
        + reportapi.ROUTES
        + console.ROUTES
        + judgechecks.ROUTES
        + signins.ROUTES
        + hookapi.ROUTES
        + budgetapi.ROUTES
        + seriesapi.ROUTES
        + endpointapi.ROUTES
    ):
        merged.setdefault(pattern, {}).update(actions)
    return merged


def read_body(h: Handler, body: Body) -> dict:
    """The request's body checked against the one its route declared (no body: ``{}``)."""
    return body.check(h.read_json() if h.server.guard.has_body(h.headers) else bodies.ABSENT)


def require_login(settings: Settings) -> None:
    """Refuse settings that require gateway keys and leave the dashboard open (no admin token)."""
    if settings.require_keys and settings.admin_token is None:
        raise ConfigInvalid(
            "refusing to start the dashboard: PANELIST_REQUIRE_KEYS=1 asks every gateway caller "
            "for a key, but without PANELIST_ADMIN_TOKEN the dashboard would be open to anyone "
            "who reaches it, to read every key's prompts and make keys. Set "
            f"PANELIST_ADMIN_TOKEN (at least {MIN_TOKEN} characters) to put the dashboard behind "
            "a login, or run `panelist gateway` to serve the gateway alone"
        )


class Dashboard:
    """The dashboard's sessions and files, and the routes that use them."""

    def __init__(self, settings: Settings, ui: Path = UI, *, sessions=None):
        """``sessions``: where the logins are kept when not in this process or its group (the
        server's parts' ``sessions``: with a database, its table)."""
        require_login(settings)
        self.sessions = Sessions(settings.admin_token, shared=settings.sessions, table=sessions)
        self.static = StaticFiles(ui)
        self._secure = (settings.public_url or "").startswith("https://")
        self._login_pause = settings.login_pause

    def check_admin(self, h: Handler) -> None:
        """The admin gate: a live session cookie, when an admin token is set."""
        self.sessions.check(Sessions.from_cookie(h.headers.get("Cookie")))

    def routes(self) -> list[Route]:
        routes = [Route(path, {"GET": self.get_page}, gate=OPEN) for path in PAGES]
        routes += [
            Route(f"/{folder}/*", {"GET": self.get_asset}, gate=OPEN)
            for folder in ("css", "js", "vendor")
        ]
        routes += [
            Route("/favicon.svg", {"GET": self.get_favicon}, gate=OPEN),
            Route(
                "/api/login",
                {"POST": self.post_login},
                gate=OPEN,
                max_body=LOGIN_BODY,
                refusal_pause=self._login_pause,
            ),
            Route("/api/logout", {"POST": self.post_logout}, gate=OPEN, max_body=LOGIN_BODY),
            Route("/api/session", {"GET": self.get_session}, gate=OPEN),
            # a panel's body may be as large as /v1 takes: the server's cap
            Route("/api/ask", {"POST": ask.post_ask}, gate=ADMIN),
        ]
        routes += [
            Route(
                pattern,
                {m: self.api_action(fn) for m, fn in actions.items()},
                gate=ADMIN,
                max_body=max(getattr(fn, "max_body", API_BODY) for fn in actions.values()),
            )
            for pattern, actions in api_routes().items()
        ]
        for route in routes:  # no write takes a body nobody described
            for method, action in route.actions.items():
                if (
                    method in WRITES
                    and route.pattern.startswith("/api/")
                    and bodies.declared(action) is None
                ):
                    raise ValueError(
                        f"{method} {route.pattern} declares no body: give its "
                        "handler @takes(Body(...)) from metrics.server.bodies"
                    )
        return routes

    def send_file(self, h: Handler, relative: str) -> None:
        h.send_cached(*self.static.get(relative))

    def get_page(self, h: Handler, params: dict) -> None:
        path = urlsplit(h.path).path.rstrip("/") or "/"
        # a browser already logged in has nothing to do on the form: to the dashboard
        if (
            PAGES[path] == "login.html"
            and self.sessions.required
            and self.sessions.valid(Sessions.from_cookie(h.headers.get("Cookie")))
        ):
            h.send_bytes(303, b"", "text/plain", {"Location": "/", "Cache-Control": "no-store"})
            return
        self.send_file(h, PAGES[path])

    def get_session(self, h: Handler, params: dict) -> None:
        """Whether this browser must log in first: asked before any gated call, so a visit
        without a session goes to the login page without a refused request on the way."""
        live = self.sessions.valid(Sessions.from_cookie(h.headers.get("Cookie")))
        h.send_json(
            200,
            {"token_required": self.sessions.required, "logged_in": live},
            {"Cache-Control": "no-store"},
        )

    def get_asset(self, h: Handler, params: dict) -> None:
        folder = urlsplit(h.path).path.split("/")[1]
        self.send_file(h, f"{folder}/{params['rest']}")

    def get_favicon(self, h: Handler, params: dict) -> None:
        self.send_file(h, "favicon.svg")

    def api_action(self, fn):
        """A ``metrics.server.api`` handler as a route action: the request in, JSON out."""
        declared = bodies.declared(fn)

        def action(h: Handler, params: dict) -> None:
            server = h.server
            # checked before the handler touches anything; a read takes no body
            body = read_body(h, declared) if h.command in WRITES else None
            query = {
                k: v[0] for k, v in parse_qs(urlsplit(h.path).query, keep_blank_values=True).items()
            }
            req = api.ApiRequest(
                method=h.command,
                params=params,
                query=query,
                body=body,
                parts=server.parts,
                who="dashboard",
                base_url=h.base_url(),
                token_required=self.sessions.required,
            )
            mirror = server.parts.config_mirror
            if mirror is not None and getattr(fn, "edits_config", False):
                with mirror.editing():  # in the database before it is answered
                    result = fn(req)
            else:
                result = fn(req)
            h.send_json(getattr(result, "status", 200), result)  # api.Accepted is 202

        if declared is not None:
            takes(declared)(action)
        return action

    @takes(LOGIN)
    def post_login(self, h: Handler, params: dict) -> None:
        # a malformed body is refused here and costs no guess: it could not hold the token
        token = read_body(h, LOGIN)["token"]
        sid = self.sessions.login(
            token, h.server.guard.client_address(h.client_address[0], h.headers)
        )
        # behind an https public URL the browser must never send the session in the clear
        h.send_json(
            200, {"ok": True}, {"Set-Cookie": self.sessions.cookie(sid, secure=self._secure)}
        )

    @takes(NOTHING)
    def post_logout(self, h: Handler, params: dict) -> None:
        read_body(h, NOTHING)
        self.sessions.logout(Sessions.from_cookie(h.headers.get("Cookie")))
        h.send_json(200, {"ok": True}, {"Set-Cookie": Sessions.cleared()})
