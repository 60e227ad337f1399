"""A server's route called in process: the request goes through the server's whole handler
(parsing, gate, route, catch-all) over a socket pair, with no listener and no serving thread.

    status, headers, body = call(server, "POST", "/v1/chat/completions", {...})

The server is one ``make_gateway`` or ``make_dashboard`` built and never served. ``Caller`` makes
the same requests as the suite's ``conftest.Client`` (``get``, ``post``, ``request``), so a test
written against a served server runs in process unchanged.
"""

import http.client
import io
import json
import socket
import threading


class _Received:
    """What ``http.client.HTTPResponse`` needs of a socket: a file of the bytes that came."""

    def __init__(self, data: bytes):
        self._data = data

    def makefile(self, mode):
        return io.BytesIO(self._data)


def call(server, method: str, path: str, body=None, headers: dict | None = None):
    """``(status, headers, parsed JSON body or raw bytes)`` of one request to ``server``."""
    reply, data = exchange(server, method, path, body, headers)
    kind = reply.getheader("Content-Type") or ""
    return (
        reply.status,
        dict(reply.getheaders()),
        (json.loads(data) if "json" in kind and data else data),
    )


def exchange(server, method: str, path: str, body=None, headers: dict | None = None):
    """``(response, its body's bytes)`` of one request to ``server``: the response as
    ``http.client`` read it (``status``, ``headers`` whose names ignore case)."""
    raw = b"" if body is None else body if isinstance(body, bytes) else json.dumps(body).encode()
    fields = {"Host": f"127.0.0.1:{server.port}", "Connection": "close"}
    if body is not None:
        fields.update({"Content-Type": "application/json", "Content-Length": str(len(raw))})
    fields.update(headers or {})
    head = f"{method} {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in fields.items())
    ours, theirs = socket.socketpair()
    got = bytearray()

    def read() -> None:  # the reply may be larger than the pair's buffer: read while it is sent
        while chunk := ours.recv(65536):
            got.extend(chunk)

    reader = threading.Thread(target=read, name="inprocess-reply")
    reader.start()
    try:
        ours.sendall(head.encode() + b"\r\n" + raw)
        server.serve_connection(theirs)
    finally:
        reader.join()
        ours.close()
    reply = http.client.HTTPResponse(_Received(bytes(got)), method=method)
    reply.begin()
    return reply, reply.read()


class Caller:
    """Requests to a built, never served ``server`` in ``conftest.Client``'s terms: ``(status,
    JSON body or None, headers)``, the body always read as JSON as that client reads it."""

    def __init__(self, server):
        self.server = server
        self.url = server.url

    def request(self, method, path, body=None, *, raw: bytes | None = None, headers=None):
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        reply, got = exchange(self.server, method, path, data, headers)
        return reply.status, json.loads(got or b"null"), reply.headers

    def post(self, path, body=None, **kw):
        return self.request("POST", path, body, **kw)

    def get(self, path, **kw):
        return self.request("GET", path, **kw)
