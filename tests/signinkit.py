"""A simulated sign-in provider for the sign-in tests, and a browser that follows its redirect.

The provider serves, on 127.0.0.1 port 0, ``GET /auth`` (the page a user signs in on: it issues
a code bound to the request's S256 challenge and redirects to the callback URL with the code
appended, as OpenRouter does) and ``POST /keys`` (the exchange, JSON or form-encoded: it refuses a code it did not
issue or already exchanged, and a verifier whose S256 digest is not the code's challenge, then
answers ``{"key": …}``). ``fail`` scripts an exchange failure: ``(status, body bytes)``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlencode, urlsplit


class FakeProvider:
    def __init__(self):
        self.codes: dict[str, str] = {}  # code → the challenge it was issued for
        self.used: set[str] = set()
        self.issued: list[str] = []  # keys handed out
        self.exchanges: list[dict] = []  # bodies the exchange received
        self.callbacks: list[str] = []  # callback URLs the auth page was given
        self.fail: tuple[int, bytes] | None = None
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                url = urlsplit(self.path)
                q = {k: v[0] for k, v in parse_qs(url.query).items()}
                if url.path != "/auth" or q.get("code_challenge_method") != "S256":
                    self.send_error(400)
                    return
                code = secrets.token_urlsafe(16)
                provider.codes[code] = q["code_challenge"]
                provider.callbacks.append(q["callback_url"])
                callback = q["callback_url"]
                sep = "&" if "?" in callback else "?"
                back = {"code": code}
                if "state" in q:  # a provider that hands its state parameter back
                    back["state"] = q["state"]
                self.send_response(302)
                self.send_header("Location", f"{callback}{sep}{urlencode(back)}")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_POST(self):
                raw = self.rfile.read(int(self.headers["Content-Length"]))
                if self.headers["Content-Type"] == "application/x-www-form-urlencoded":
                    body = {k: v[0] for k, v in parse_qs(raw.decode()).items()}
                else:
                    body = json.loads(raw)
                provider.exchanges.append(body)
                status, reply = provider.answer(body)
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()

    def answer(self, body: dict) -> tuple[int, bytes]:
        if self.fail is not None:
            return self.fail
        code, verifier = body.get("code"), body.get("code_verifier", "")
        if code in self.used:
            return 400, b'{"error": {"message": "this code was already exchanged"}}'
        if code not in self.codes:
            return 400, b'{"error": {"message": "unknown code"}}'
        self.used.add(code)
        digest = hashlib.sha256(verifier.encode()).digest()
        if base64.urlsafe_b64encode(digest).decode().rstrip("=") != self.codes[code]:
            return 403, b'{"error": {"message": "code_verifier does not match the challenge"}}'
        key = "sk-sim-" + secrets.token_hex(16)
        self.issued.append(key)
        return 200, json.dumps({"key": key}).encode()

    def entry(self, **over) -> dict:
        entry = {
            "auth_url": f"{self.url}/auth",
            "exchange_url": f"{self.url}/keys",
            "base_url": "https://models.example/api/v1",
            "exchange_body": "json",
            "fields": {
                "callback": "callback_url",
                "challenge": "code_challenge",
                "method": "code_challenge_method",
                "code": "code",
                "verifier": "code_verifier",
                "key": "key",
                "state": None,
            },
            "params": {},
        }
        entry.update(over)
        return entry

    def close(self):
        self.server.shutdown()
        self.server.server_close()
        self._thread.join()


class _Hold(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def get(url: str) -> tuple[int, str]:
    """GET ``url`` without following redirects: (status, body); Location in the body on 3xx."""
    opener = urllib.request.build_opener(_Hold)
    try:
        with opener.open(url, timeout=30) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        body = exc.headers.get("Location") or exc.read().decode()
        exc.close()
        return exc.code, body


def sign_in(auth_url: str, tamper=None) -> tuple[int, str]:
    """What a user's browser does: open the auth URL, follow its redirect to the callback
    (through ``tamper(location)`` when given); the callback's (status, body)."""
    status, location = get(auth_url)
    assert status == 302, (status, location)
    return get(tamper(location) if tamper else location)
