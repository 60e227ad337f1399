"""A server's route called in process: the request goes through the server's whole handler
(parsing, gate, route, catch-all) over a socket pair, with no listener and no serving thread.

    status, headers, body = call(server, "POST", "/v1/chat/completions", {...})

The server is one ``make_gateway`` or ``make_dashboard`` built and never served.
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
    raw = b"" if body is None else body if isinstance(body, bytes) else json.dumps(body).encode()
    fields = {"Host": f"127.0.0.1:{server.port}", "Connection": "close"}
    if body is not None:
        fields.update({"Content-Type": "application/json", "Content-Length": str(len(raw))})
    fields.update(headers or {})
    head = f"{method} {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in fields.items())
    ours, theirs = socket.socketpair()
    got = bytearray()

    def read() -> None:   # the reply may be larger than the pair's buffer: read while it is sent
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
    data = reply.read()
    kind = reply.getheader("Content-Type") or ""
    return reply.status, dict(reply.getheaders()), (json.loads(data) if "json" in kind and data
                                                    else data)
