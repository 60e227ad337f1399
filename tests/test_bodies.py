"""The dashboard's static files' paths met with bad percent-encodings, control characters,
traversal and overlong names, over a real dashboard server and real sockets: a 400 or 404,
never a 500, and nothing from outside ``ui/``.
"""

import json
import re
import socket

from conftest import PATIENCE
from panelist.metrics.server import api
from panelist.metrics.server.dashboard import UI


# -- static paths ----------------------------------------------------------------------------------
BAD_SEGMENTS = ["%00", "a%00b.js", ".%00.", "%2e%2e%00", "%2e%2e", "%2e%2e/%2e%2e/README.md",
                "..%2f..%2fREADME.md", "%2e%2e%2f%2e%2e%2fmetrics%2fserver%2fapi.py",
                "%5c..%5c..%5cREADME.md", "%zz", "%", "%e", "%ff%fe", "%c0%ae%c0%ae/README.md",
                "%ed%a0%80", "%01%7f", "%0d%0aX-Injected:%201", "%2f", "~", "%20",
                "a" * 5000, "a/" * 3000, "%2e" * 2000]
TARGETS = [prefix + seg for seg in BAD_SEGMENTS
           for prefix in ("/css/", "/js/", "/vendor/", "/", "/api/")] + \
    ["/favicon.svg%00", "/index.html%00", "/login%00", "/%00", "/%2e%2e/README.md",
     "/js/%2e%2e/%2e%2e/README.md", "/vendor/../../README.md"]
# every GET route of the API with a path parameter, that parameter sent bad
TARGETS += [re.sub(r"\{\w+\}", seg, pattern, count=1) for pattern, actions in api.ROUTES
            if "{" in pattern and "GET" in actions for seg in ("%00", "%2e%2e", "%zz", "%0a")]


def get_raw(port: int, target: str) -> tuple[int, bytes]:
    """One GET with the target exactly as written (no client normalises it)."""
    with socket.create_connection(("127.0.0.1", port), timeout=PATIENCE) as s:
        s.sendall(f"GET {target} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close"
                  "\r\n\r\n".encode("latin-1"))
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


def test_static_paths_with_bad_encodings_or_traversal_are_a_400_or_404_never_500(dash):
    outside = (UI.parent / "README.md").read_bytes()[:200]   # nothing outside ui/ is served
    for target in TARGETS:
        status, body = get_raw(dash.server.port, target)
        assert status in (400, 404), (target[:80], status, body[:200])
        assert json.loads(body)["error"]["message"], (target[:80], body[:200])
        if target.startswith(("/css/", "/js/", "/vendor/")):   # a long name is not echoed whole
            assert len(body) < 2000, (target[:80], len(body))
        assert outside not in body, target[:80]
    status, body = get_raw(dash.server.port, "/css/app.css")
    assert status == 200 and body == (UI / "css" / "app.css").read_bytes()
    assert get_raw(dash.server.port, "/api/info")[0] == 200
