"""The code exchange: one POST of code + verifier to the provider's exchange URL; its reply
carries the key.

Invariants: the request goes to the provider's ``exchange_url`` only; a redirect is refused, not
followed, so neither the code nor the key it buys is ever sent elsewhere. The key is returned to
the caller and is part of no error: a failure names the provider, the HTTP status and the
provider's own short message (with the code and verifier cut out), never the reply's body
whole.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from urllib.parse import urlencode

from panelist.metrics.errors import (
    AuthFailed,
    UpstreamBadReply,
    UpstreamError,
    UpstreamServerError,
    UpstreamTimeout,
    UpstreamUnreachable,
)
from panelist.metrics.plaintext import visible

MAX_REPLY = 64 * 1024
MAX_KEY = 4096


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None  # a 3xx then surfaces as an HTTPError, refused below


def _said(raw: bytes, secrets: tuple[str, ...]) -> str:
    """The provider's own message from an error reply, short, with our secrets removed."""
    try:
        doc = json.loads(raw)
    except ValueError:
        doc = None
    text = ""
    if isinstance(doc, dict):
        err = doc.get("error")
        if isinstance(err, dict):
            err = err.get("message") or err.get("code")
        message = doc.get("message")
        text = err if isinstance(err, str) else message if isinstance(message, str) else ""
        desc = doc.get("error_description")
        if isinstance(desc, str):
            text = f"{text}: {desc}" if text else desc
    for secret in secrets:
        text = text.replace(secret, "***")
    return visible(text)[:200] or "no message"


def exchange(provider, code: str, verifier: str, *, timeout: float = 30.0) -> str:
    """The key ``provider`` (a ``providers.Provider``) issues for ``code``; an ``UpstreamError``
    saying what went wrong when it issues none."""
    fields = provider.fields
    body = {fields["code"]: code, fields["verifier"]: verifier, fields["method"]: "S256"}
    if provider.exchange_body == "json":
        data, kind = json.dumps(body).encode(), "application/json"
    else:
        data, kind = urlencode(body).encode(), "application/x-www-form-urlencoded"
    request = urllib.request.Request(
        provider.exchange_url,
        data=data,
        method="POST",
        headers={"Content-Type": kind, "Accept": "application/json"},
    )
    opener = urllib.request.build_opener(_NoRedirect)
    name = provider.name
    again = "nothing was stored; run the command again to sign in again"
    try:
        with opener.open(request, timeout=timeout) as reply:
            raw = reply.read(MAX_REPLY + 1)
    except urllib.error.HTTPError as exc:
        status = exc.code
        try:
            said = _said(exc.read(MAX_REPLY), (code, verifier))
        except OSError:
            said = "no message"
        finally:
            exc.close()
        message = f"{name} refused the sign-in code (HTTP {status}: {said}); {again}"
        if 300 <= status < 400:
            raise UpstreamBadReply(
                f"{name}'s exchange URL answered with a redirect (HTTP "
                f"{status}), which is not followed so the code goes nowhere "
                f"else; check exchange_url in providers.json; {again}",
                upstream_status=status,
            ) from None
        cls = (
            AuthFailed
            if status in (400, 401, 403)
            else UpstreamServerError
            if status >= 500
            else UpstreamError
        )
        raise cls(message, upstream_status=status) from None
    except TimeoutError:
        raise UpstreamTimeout(
            f"{name}'s exchange URL did not answer in {timeout:g} s; {again}"
        ) from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise UpstreamUnreachable(
            f"cannot reach {name}'s exchange URL {provider.exchange_url} ({reason}); {again}"
        ) from None
    if len(raw) > MAX_REPLY:
        raise UpstreamBadReply(
            f"{name}'s exchange reply is larger than {MAX_REPLY} bytes; {again}",
            upstream_status=200,
        )
    try:
        doc = json.loads(raw)
    except ValueError:
        raise UpstreamBadReply(
            f"{name}'s exchange reply is not JSON; {again}", upstream_status=200
        ) from None
    key = doc.get(fields["key"]) if isinstance(doc, dict) else None
    if not isinstance(key, str) or not key:
        raise UpstreamBadReply(
            f"{name}'s exchange reply has no '{fields['key']}' string; check "
            f"fields.key in providers.json; {again}",
            upstream_status=200,
        )
    if len(key) > MAX_KEY or not key.isprintable() or any(c.isspace() for c in key):
        raise UpstreamBadReply(
            f"{name}'s exchange reply holds a key that cannot be sent in a "
            f"header (spaces, control characters or too long); {again}",
            upstream_status=200,
        )
    return key
