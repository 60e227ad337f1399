"""The dashboard's provider sign-in (``metrics.signin``), behind the admin login like every
``/api/`` route:

    GET    /api/providers                 the providers of config/providers.json
    POST   /api/endpoints/connect         {name, provider, port?, timeout?} → the sign-in, with
                                          the auth_url to open (202: it waits for the callback)
    GET    /api/endpoints/connect/{id}    how it went: waiting, done, failed or cancelled
    DELETE /api/endpoints/connect/{id}    cancel it

The callback comes to a loopback listener of the server's own machine (never the dashboard's
port), so the browser that signs in must run on that machine. No reply carries the key.
"""

from __future__ import annotations

from panelist.metrics.server.api import Accepted, ApiRequest
from panelist.metrics.server.bodies import NOTHING, Body, Number, Text, Whole, takes
from panelist.metrics.signin.flow import MAX_TIMEOUT
from panelist.metrics.signin.providers import Providers


def list_providers(req: ApiRequest) -> dict:
    known = Providers(req.parts.home).all()
    return {
        "data": [
            {"name": p.name, "base_url": p.base_url}
            for p in sorted(known.values(), key=lambda p: p.name)
        ]
    }


@takes(
    Body(
        name=Text(
            200,
            nonempty=True,
            required=True,
            hint="the endpoint's name: lower-case letters, digits, '-' or '_'",
        ),
        provider=Text(64, nonempty=True, required=True, hint="a provider of GET /api/providers"),
        port=Whole(0, 65535, hint="the loopback port for the callback; 0 for any free one"),
        timeout=Number(1, MAX_TIMEOUT, hint="seconds to wait for the sign-in"),
    )
)
def start(req: ApiRequest) -> dict:
    body = req.body
    return Accepted(
        req.parts.signins.start(
            body["name"],
            body["provider"],
            port=body.get("port") or 0,
            timeout=body.get("timeout") or 300.0,
            by=req.who,
        )
    )


def status(req: ApiRequest) -> dict:
    return req.parts.signins.get(req.params["id"])


@takes(NOTHING)
def cancel(req: ApiRequest) -> dict:
    return req.parts.signins.cancel(req.params["id"])


ROUTES = [
    ("/api/providers", {"GET": list_providers}),
    ("/api/endpoints/connect", {"POST": start}),
    ("/api/endpoints/connect/{id}", {"GET": status, "DELETE": cancel}),
]
