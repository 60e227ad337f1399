"""The upstream client over in-process connections (as httpx's ``MockTransport``): the real
transport, HTTP/1.1 reader and protocol run, so every error is the one the real client raises,
but each connection's far end is a function of ours instead of a server.

    transport = FakeTransport(lambda req: (200, completion("hi")))
    panels = Panels(home, upstream=Upstream(transport=transport))

``answer(request)`` gets a ``FakeRequest`` (method, path, headers, JSON body) and returns
``(status, body)`` or ``(status, body, headers)``; it may raise ``ConnectionResetError`` to cut
the connection before any reply. A model named in ``refused`` gets its connection refused.
"""

import json
import socket
import threading
import time
from dataclasses import dataclass

from panelist.metrics.upstream.transport import Transport


@dataclass
class FakeRequest:
    method: str
    path: str
    headers: dict
    body: object

    @property
    def model(self):
        return self.body.get("model") if isinstance(self.body, dict) else None


def completion(text: str, model: str = "fake") -> dict:
    """An OpenAI chat completion answering ``text``."""
    return {
        "id": "fake-1",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


class FakeTransport(Transport):
    """``Transport`` whose connections are socket pairs answered by ``answer`` on a thread."""

    def __init__(self, answer, *, refuse_all: bool = False):
        super().__init__(proxies={})
        self.answer = answer
        self.refuse_all = refuse_all
        self.requests: list[FakeRequest] = []
        self._servers: list[threading.Thread] = []

    def _connect(self, origin, call) -> socket.socket:
        if self.refuse_all:
            raise ConnectionRefusedError(111, "Connection refused")
        ours, theirs = socket.socketpair()
        call.sock = ours
        ours.settimeout(max(call.deadline - time.monotonic(), 0.001))
        server = threading.Thread(
            target=self._serve, args=(theirs,), name="fake-upstream", daemon=True
        )
        self._servers.append(server)
        server.start()
        return ours

    def _serve(self, sock: socket.socket) -> None:
        with sock:
            buf = b""
            while True:
                while b"\r\n\r\n" not in buf:
                    chunk = sock.recv(65536)
                    if not chunk:
                        return
                    buf += chunk
                head, _, buf = buf.partition(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                headers = {
                    k.strip().lower(): v.strip()
                    for k, _, v in (line.partition(":") for line in lines[1:])
                }
                size = int(headers.get("content-length", 0))
                while len(buf) < size:
                    chunk = sock.recv(65536)
                    if not chunk:
                        return
                    buf += chunk
                raw, buf = buf[:size], buf[size:]
                request = FakeRequest(method, path, headers, json.loads(raw) if raw else None)
                self.requests.append(request)
                try:
                    status, body, *extra = self.answer(request)
                except ConnectionResetError:
                    return
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                fields = {"Content-Type": "application/json", **(extra[0] if extra else {})}
                reply = (
                    f"HTTP/1.1 {status} X\r\nContent-Length: {len(data)}\r\n"
                    + "".join(f"{k}: {v}\r\n" for k, v in fields.items())
                    + "\r\n"
                )
                try:
                    sock.sendall(reply.encode() + data)
                except OSError:
                    return

    def close(self) -> None:
        super().close()
        for server in self._servers:
            server.join(timeout=5)
