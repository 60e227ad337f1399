"""A test upstream whose models answer only when the test opens their gate.

The simulated provider answers after a fixed latency, so a test that needs one seat to finish
before another would depend on how busy the machine is. Here every model has a gate (a
``threading.Event``): a chat request waits at its model's gate until the test opens it, so the
order in which seats finish is the order the test chooses, whatever the load.

Invariants: a request is recorded in ``arrived`` (arrival order) before it waits; an open gate
stays open (later requests answer at once); ``close()`` lets every waiting request go without an
answer, hangs up every connection and returns when every thread it started has ended.
"""

from __future__ import annotations

import itertools
import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class GatedUpstream:
    """An OpenAI-compatible chat completions server on 127.0.0.1, started at construction."""

    def __init__(self, models):
        self.gates = {model: threading.Event() for model in models}
        self.arrived: list[str] = []
        self._seen = threading.Condition()
        self._closing = threading.Event()
        self._open: set[socket.socket] = set()
        self._ids = itertools.count(1)
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.gated = self
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), name="gated-upstream"
        )
        self._thread.start()

    def open(self, *models: str) -> None:
        """Let the named models answer: whoever waits now, and every request from now on."""
        for model in models:
            self.gates[model].set()

    def wait_arrived(self, *models: str, timeout: float = 30.0) -> bool:
        """Wait until a request for each of ``models`` has arrived; False on timeout."""
        with self._seen:
            return self._seen.wait_for(lambda: all(m in self.arrived for m in models), timeout)

    def close(self) -> None:
        if self._closing.is_set():
            return
        self._closing.set()
        self._server.shutdown()
        with self._seen:
            for conn in self._open:  # wakes handlers waiting for a next request on keep-alive
                try:
                    conn.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        self._server.server_close()  # joins every handler thread (they are not daemons)
        self._thread.join()

    # -- called by the handler --------------------------------------------------------------------
    def _arrive(self, model: str) -> threading.Event | None:
        with self._seen:
            self.arrived.append(model)
            self._seen.notify_all()
        return self.gates.get(model)


class _Server(ThreadingHTTPServer):
    daemon_threads = False
    block_on_close = True
    gated: GatedUpstream

    def handle_error(self, request, client_address) -> None:
        pass  # a gateway hanging up on a held seat is what some tests do on purpose


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        with self.server.gated._seen:
            self.server.gated._open.add(self.connection)

    def finish(self) -> None:
        with self.server.gated._seen:
            self.server.gated._open.discard(self.connection)
        super().finish()

    def log_message(self, format, *args) -> None:
        pass

    def do_POST(self) -> None:
        gated = self.server.gated
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        model = body.get("model")
        gate = gated._arrive(model)
        if gate is None:
            return self._send(
                404,
                {
                    "error": {
                        "message": f"no gated model {model!r}",
                        "type": "invalid_request_error",
                        "param": None,
                        "code": "model_not_found",
                    }
                },
            )
        while not gate.wait(0.05):
            if gated._closing.is_set():
                self.close_connection = True
                return
        text = f"[gated {model}] answered when the test opened its gate."
        self._send(
            200,
            {
                "id": f"gated-{next(gated._ids)}",
                "object": "chat.completion",
                "created": 0,
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {"role": "assistant", "content": text},
                    }
                ],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            },
        )

    def _send(self, status: int, obj: dict) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
