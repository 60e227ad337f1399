"""What the upstream client's tests share (``test_client.py``, ``test_client_raw.py``): a client
that goes direct, the request they send, and a scripted server that answers with raw bytes.
"""

import socket
import threading
import time

import pytest

from panelist.metrics.upstream.client import Upstream

KEY = "sk-test-5f3a9c1e7b"


@pytest.fixture
def upstream():
    client = Upstream(proxies={})  # direct, whatever proxy the shell running the tests names
    yield client
    client.close()


def ask(model="m", text="Compare these two designs briefly"):
    return {"model": model, "messages": [{"role": "user", "content": text}]}


# -- replies as raw bytes: what real servers send, for the response reader -----------------------
COMPLETION = (
    b'{"id": "c1", "model": "raw", "choices": [{"index": 0, "message": {"role": '
    b'"assistant", "content": "raw answer"}, "finish_reason": "stop"}], "usage": '
    b'{"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}}'
)


def plain(body=COMPLETION, extra=b"", status=b"200 OK"):
    return b"HTTP/1.1 %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%s\r\n%s" % (
        status,
        len(body),
        extra,
        body,
    )


def chunked(body=COMPLETION, pieces=(7, 1, 40), trailer=b"X-Checksum: abc\r\n"):
    """A chunked body cut into the given sizes (the rest last), with chunk extensions."""
    out, at = [], 0
    for n in (*pieces, len(body)):
        piece = body[at : at + n]
        at += len(piece)
        if piece:
            out.append(b"%x;name=value;flag\r\n%s\r\n" % (len(piece), piece))
    head = (
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    return head + b"".join(out) + b"0 ; last\r\n" + trailer + b"\r\n"


class RawServer:
    """Answers each request (read to the end of its Content-Length body) with the next scripted
    reply: bytes sent as they are, in ``piece``-byte writes when given; then the connection is
    closed if the reply says so (``close``) or kept for the next request."""

    def __init__(self, *replies):
        self.replies = list(replies)
        self.connections = 0
        self.requests = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = "http://127.0.0.1:%d/v1" % self.listener.getsockname()[1]
        self.conns = []
        self.threads = []
        self.lock = threading.Lock()
        self.closing = False
        self.acceptor = threading.Thread(target=self._accept, daemon=True)
        self.acceptor.start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            with self.lock:
                if self.closing:
                    conn.close()
                    return
                self.connections += 1
                self.conns.append(conn)
                thread = threading.Thread(target=self._serve, args=(conn,), daemon=True)
                self.threads.append(thread)
            thread.start()

    def _serve(self, conn):
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        data = b""
        try:
            while self.replies:
                while b"\r\n\r\n" not in data:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    data += chunk
                head, _, data = data.partition(b"\r\n\r\n")
                length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
                while len(data) < length:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    data += chunk
                self.requests.append(data[:length])
                data = data[length:]
                reply = self.replies.pop(0)
                if callable(reply):
                    reply(conn)
                    continue
                reply, close, piece = reply if isinstance(reply, tuple) else (reply, False, 0)
                for at in range(0, len(reply), piece or len(reply) or 1):
                    conn.sendall(reply[at : at + (piece or len(reply))])
                    if piece:
                        time.sleep(0.001)
                if close:
                    conn.close()
                    return
        except OSError:
            pass

    def close(self):
        """Stop accepting, end every connection, and wait for every thread. A bare close() would
        leave the thread blocked in accept() and the port listening (Linux wakes accept() only on
        shutdown), so a later test's fresh connection could land on this dead server."""
        with self.lock:
            self.closing = True
        for sock in (self.listener, *self.conns):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # already closed by a reply, or never connected
        self.acceptor.join(timeout=10)
        for thread in self.threads:
            thread.join(timeout=10)
        self.listener.close()
        for conn in self.conns:
            conn.close()
        alive = [t for t in (self.acceptor, *self.threads) if t.is_alive()]
        assert not alive, f"{len(alive)} server threads still running after close"


@pytest.fixture
def raw():
    servers = []

    def start(*replies):
        servers.append(RawServer(*replies))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def raw_chat(upstream, server, timeout=5.0):
    return upstream.chat(server.url, KEY, ask("raw"), timeout=timeout)
