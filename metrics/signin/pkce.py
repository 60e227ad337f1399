"""The proof key of one sign-in (RFC 7636) and its state.

The verifier is 64 characters of ``[A-Za-z0-9_-]`` (48 random bytes, URL-safe base64), inside
the 43-128 unreserved characters section 4.1 asks for; the challenge is BASE64URL(SHA256(verifier))
without padding (section 4.2, method S256, the only one we send: "plain" would put the verifier
itself in the browser's history). The state is separate random text, checked on the callback so
a redirect this sign-in did not start is refused.
"""

from __future__ import annotations

import base64
import hashlib
import secrets

METHOD = "S256"


def new_verifier() -> str:
    return secrets.token_urlsafe(48)


def challenge(verifier: str) -> str:
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).decode("ascii").rstrip("=")


def new_state() -> str:
    return secrets.token_urlsafe(24)
