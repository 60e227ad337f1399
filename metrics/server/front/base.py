"""The server base both servers are composed from (``Server``): connection limits, request
deadlines, routing through a route table, each route's gate and the catch-all. A server is
*built* (routes registered, its parts handed in), never subclassed, so a test can run two.

What a connection may cost is bounded (``metrics.server.front.connection`` holds the rules):

* a new connection gets a thread only once its first head has arrived: until then ``Heads``
  holds it on one thread, at most ``max_pending`` of them (a newcomer past that closes the one
  waiting longest). At most ``max_connections`` connections have a thread; when complete heads
  find them all taken, one connection is closed for each head waiting: first those whose next
  head has been arriving the longest or whose body has stalled (``Wire.stalled``), then those
  idle longest between requests, then those whose body has been arriving the longest. One busy
  answering never is, nor one whose head has arrived whole (read, or waiting to be). The
  listener itself never waits.
* when every thread is taken, ``GET /health`` is answered from a reserve of ``HEALTH_RESERVE``
  threads of its own, one request per connection, so neither slow clients nor a pool busy with
  long panels keep it out.
* request bodies hold a share of one byte budget while they are read and answered
  (``metrics.server.front.memory``), so trickled or parallel big bodies cannot exhaust memory.
* a connection given a thread is handed to the ``Pool`` of connection threads, kept from one
  connection to the next, so admitting one never waits for a thread to start. Each handled
  socket has a ``Wire`` in ``_wires`` from being handed over until its thread is done with it,
  so the table counts exactly the connections that hold (or are about to hold) a thread. Only
  the heads thread adds to it (``admit``) and drops from it (``_drop``), under the server's
  lock; phases move under each connection's own lock (``begin_work``, ``Wire.turn``), so a
  connection being answered is never dropped, and one dropped first never turns busy.

Stopping (``drain``, then ``close``): the listener takes what the kernel already queued for it,
then closes; connections that have sent nothing, or sit between requests, are hung up (nothing
was asked of them); every request that began is answered, its reply saying ``Connection:
close``. Only then do the parts close. A server that is one of several workers on a port
(``Role``) binds with ``SO_REUSEPORT``, so the kernel spreads new connections among them.
"""

from __future__ import annotations

import socket
import sys
import threading
import time
from http.server import ThreadingHTTPServer
from typing import Callable, Iterable, cast

from panelist.metrics.errors import NotFound
from panelist.metrics.server.front.connection import (
    BODY,
    BODY_TIMEOUT,
    BUSY,
    HEAD,
    HEAD_TIMEOUT,
    BODY_HOLD,
    IDLE,
    MAX_BODY,
    MAX_CONNECTIONS,
    Wire,
    close_quietly,
    ends_head,
    has_input,
)
from panelist.metrics.server.guard import Guard, Settings
from panelist.metrics.server.front.handler import Handler
from panelist.metrics.server.front.heads import Heads
from panelist.metrics.server.front.memory import GRANT_FACTOR, InFlight, keep_heap_small
from panelist.metrics.server.parts import Parts
from panelist.metrics.server.front.pool import IDLE_THREAD, Pool
from panelist.metrics.server.routing import ADMIN, KEYS, Route, Routes
from panelist.metrics.server.front.workers import Role, check_reuse_port

HEALTH_RESERVE = 4  # threads that answer only /health, beyond max_connections
# connections handed to threads that have not yet run: past this many, the process is busy
# and further ones wait in ``Heads`` (without a thread) rather than compete for the GIL
ADMIT_AHEAD = 4
_DROP_ORDER = {HEAD: 0, IDLE: 1, BODY: 2}  # which kind of connection goes first for a newcomer
_PEEK = 8192  # bytes of an idle connection's input looked at for a whole head (a handler's read)


def no_admin(h: Handler) -> None:
    """The admin gate of a server with no admin routes (the gateway): none may pass."""
    raise NotFound(f"no route {h.command} {h.path}; {h.server.routes_help}")


class Server(ThreadingHTTPServer):
    """A threaded HTTP server over one ``Parts``, answering the routes it was built with."""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256  # bursts of concurrent panels queue instead of being refused

    def __init__(
        self,
        parts: Parts,
        host: str,
        port: int,
        *,
        routes: Iterable[Route],
        routes_help: str,
        settings: Settings | None = None,
        admin_gate: Callable[[Handler], None] = no_admin,
        common_headers: dict[str, str] | None = None,
        keepalive: float = 10.0,
        client_timeout: float = 60.0,
        head_timeout: float = HEAD_TIMEOUT,
        body_timeout: float = BODY_TIMEOUT,
        body_hold: float = BODY_HOLD,
        max_connections: int = MAX_CONNECTIONS,
        max_pending: int | None = None,
        max_body: int = MAX_BODY,
        max_in_flight: int | None = None,
        thread_idle: float = IDLE_THREAD,
        role: Role = Role(),
    ):
        if max_connections < 1 or (max_pending is not None and max_pending < 1):
            raise ValueError("max_connections and max_pending must be at least 1")
        self.parts = parts
        self.keepalive = keepalive  # seconds between SSE comments while seats are working
        # seconds one read or write may block, and a kept connection may wait for its next request
        self.client_timeout = client_timeout
        self.head_timeout = head_timeout  # seconds a request head may take to arrive, in all
        self.body_timeout = body_timeout  # seconds a body may take, plus 1 s per MIN_BODY_RATE
        self.body_hold = body_hold  # seconds a small body is awaited before it takes a thread
        settings = settings or Settings()
        # seconds a streamed answer may pause between tokens (None: gateway.json's limit)
        self.stall_timeout = settings.stall_timeout
        if max_in_flight is None:
            max_in_flight = settings.max_in_flight_mb * 2**20
        self.max_body = min(max_body, max_in_flight // GRANT_FACTOR)
        self.in_flight = InFlight(max_in_flight)
        keep_heap_small()
        self.max_connections = max_connections  # connections with a thread
        # connections still sending their first head, and complete ones waiting for a thread
        self.max_pending = max_pending or max_connections
        _fit_descriptors(self)
        # a thread for every connection the limits let in, /health's reserve included
        self._pool = Pool(
            self.max_connections + HEALTH_RESERVE,
            idle=thread_idle,
            name="gateway-conn",
            busy_at=ADMIT_AHEAD,
            on_begun=lambda: self._heads.wake(),
        )
        self._wires: dict[socket.socket, Wire] = {}
        self._room = threading.Lock()
        self._leaving = 0  # dropped wires whose threads have not ended yet
        self._reserved = 0  # wires answering /health from the reserve
        self._heads = Heads(self)
        self._answering_later: set = set()  # connections whose answer the heads thread sends
        self._serving = False
        self.draining = False  # stopping: each connection ends after the reply it is owed
        self.started = threading.Event()  # set once serving, its helper threads running
        self.role = role
        # several workers bind the one port; the kernel spreads connections among them
        self.allow_reuse_port = role.count > 1
        self.routes = Routes(routes)
        self.routes_help = routes_help
        self.common_headers = dict(common_headers or {})
        self._admin_gate = admin_gate
        settings.check_bind(host)  # refused before the port is taken
        check_reuse_port(role.count)
        super().__init__((host, port), Handler)
        # a TCP server's address is (host, port, ...) with a text host
        self.host, self.port = cast(tuple[str, int], self.server_address[:2])
        self.guard = Guard.for_server(
            settings, parts.home, port=self.port, bound=host, max_body=self.max_body
        )

    @property
    def panels(self):
        return self.parts.panels

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def admit_caller(self, h: Handler, gate: str, path: str) -> None:
        """Pass a request through its route's gate (401 / 429), setting ``h.caller``."""
        if gate == KEYS:
            h.caller = self.guard.identify(path, h.headers)
        elif gate == ADMIN:
            self._admin_gate(h)

    # -- connections ----------------------------------------------------------------------------
    def serve_forever(self, poll_interval=0.5):
        self._serving = True  # before the loop starts, so close() knows to stop it
        if not self._heads.is_alive() and not self._heads.ident:
            self._heads.start()
        self._pool.start()
        self.parts.start(schedule=self.role.runs_schedule)
        self.started.set()
        super().serve_forever(poll_interval)

    def process_request(self, request, client_address):
        """The listener's part: hand the new connection over; it never waits here."""
        self._heads.add(request, client_address)

    def admit(
        self, request, client_address, head: bytes, reserve: bool = False, waiting: int = 1
    ) -> bool:
        """Give a connection whose head arrived a thread, if one of ``max_connections`` is free;
        else drop idle or slow ones to free it (the heads thread retries when one has gone):
        as many as there are ``waiting`` heads (this one among them) beyond those already
        leaving, so a queue of heads is served in parallel, not one drop at a time.
        ``reserve``: a /health request, given a free thread, else a reserve thread (for this
        one request), else False without dropping anyone."""
        with self._room:
            full = len(self._wires) - self._reserved >= self.max_connections
            reserve = reserve and full
            if reserve:
                if self._reserved >= HEALTH_RESERVE:
                    return False
                self._reserved += 1
            elif full:  # one taken back for each head waiting, not one at a time
                self._drop(waiting - self._leaving)
                return False
            wire = Wire(request, self.client_timeout, self.head_timeout, head, room=self._room)
            wire.reserve = reserve
            self._wires[request] = wire
        try:  # a thread of the pool, never one started here: the heads thread does not wait
            self._pool.submit(self.process_request_thread, request, client_address)
        except RuntimeError:  # closing: no thread will take it
            self._release(request)
            self.shutdown_request(request)
        return True

    @property
    def saturated(self) -> bool:
        """Whether connections already handed to threads are still waiting to run: giving
        more now would only have more threads compete for the interpreter."""
        return self._pool.busy

    def _drop(self, n: int) -> None:
        """Drop up to ``n`` connections, in this order: those whose next head has been arriving
        the longest (a whole head comes in one packet, so a slow one is most likely a trickler)
        or whose body has come slower than the minimum rate for a while (``Wire.stalled``),
        then those idle longest between requests, then those whose body has been arriving the
        longest (a body sent at once is read in moments; one still arriving after the others
        is a trickler's or a slow link's). Never one whose head is in whole, not yet begun
        only because its thread has not run yet, nor an idle one whose next head is waiting
        whole to be read: each is about to be answered. Called with ``_room`` held."""
        if n <= 0:
            return
        now = time.monotonic()
        ranked = []
        for w in self._wires.values():
            if w.phase == BUSY or w.dropped or w.reserve or (w.phase == HEAD and w.whole):
                continue
            order = 0 if w.stalled(now) else _DROP_ORDER[w.phase]
            if w.phase == IDLE:
                # its thread may not have run since bytes came: what waits in the socket says
                # whether a next head is arriving (dropped as one) or is whole (kept)
                coming = _next_head(w)
                if coming:
                    continue
                if coming is False:
                    order = _DROP_ORDER[HEAD]
            ranked.append((order, w.since, w))
        ranked.sort(key=lambda r: (r[0], r[1]))
        for _, _, victim in ranked:
            if n <= 0:
                return
            if victim.drop():  # False: it turned busy meanwhile, and is kept
                self._leaving += 1
                n -= 1

    def process_request_thread(self, request, client_address):
        try:
            super().process_request_thread(request, client_address)  # closes the socket
        finally:
            self._release(request)

    def _release(self, request) -> None:
        with self._room:
            wire = self._wires.pop(request, None)
            if wire is not None and wire.dropped:
                self._leaving -= 1
            if wire is not None and wire.reserve:
                self._reserved -= 1
        self._heads.wake()  # a thread is free: a waiting head may have it

    def shutdown_request(self, request) -> None:
        if request in self._answering_later:  # the heads thread sends its answer, then closes
            self._answering_later.discard(request)
            return
        close_quietly(request)

    @property
    def answers_waiting(self) -> int:
        """Answers the heads thread holds to send later (refusals a route pauses)."""
        return self._heads.answers_waiting

    def answer_later(self, request, data: bytes, pause: float) -> bool:
        """Have the heads thread send ``data``, a whole reply, on ``request`` in ``pause``
        seconds and then close it; the handler's thread is free meanwhile. False (the caller
        sends it now) while the server drains or when the heads thread holds as many as it
        may."""
        if self.draining or not self._heads.answer_later(request, data, pause):
            return False
        self._answering_later.add(request)
        return True

    def idle_now(self) -> None:
        """A handler waits for its connection's next request: a complete head waiting for a
        thread may have this one."""
        if self._heads.waiting:
            self._heads.wake()

    def wire_of(self, request) -> Wire:
        return self._wires[request]

    # The phase changes below take the connection's own lock (``Wire.state``), never the
    # server's: every request makes them, and one lock that hundreds of threads take several
    # times a request each queued them all behind whichever holder the interpreter had paused.
    def begin_work(self, wire: Wire) -> bool:
        """Mark a connection busy now its head is read; False if it was taken back first (its
        read side is then shut, so a reply still goes out and the connection closes)."""
        if not wire.turn(BUSY):
            return False
        wire.no_deadline()
        return True

    def begin_body(self, wire: Wire, grace: float, left: int) -> None:
        """A route reads its body, ``left`` bytes of it still to come from the socket: the
        connection may be taken back until it has (``Late``)."""
        wire.expect_body(grace, left)
        wire.turn(BODY)  # last: whoever sees BODY sees its deadline set

    def end_body(self, wire: Wire) -> None:
        """The body was read (or its reading failed): the connection is busy again. If it was
        taken back while its body came, its reply still goes out and the connection then
        closes."""
        with wire.state:
            wire.phase = BUSY
        wire.no_deadline()

    def handle_error(self, request, client_address):
        if not isinstance(sys.exc_info()[1], OSError):  # a client going away is no news
            super().handle_error(request, client_address)

    def serve_connection(self, sock: socket.socket, address=("127.0.0.1", 0)) -> None:
        """Answer one connection on the calling thread, as a handler thread would, with no
        listener and no serving: a route called in process (a test's client, say)."""
        with self._room:
            self._wires[sock] = Wire(sock, self.client_timeout, self.head_timeout, room=self._room)
        try:
            self.finish_request(sock, address)
        finally:
            self._release(sock)
            self.shutdown_request(sock)

    def drain(self, timeout: float, hurry: threading.Event | None = None) -> int:
        """Stop taking connections and let every request that began be answered: at most
        ``timeout`` seconds, or until ``hurry`` is set. Call it once ``serve_forever`` has
        returned; ``close`` follows. Returns how many connections were still being answered
        when the wait ended (0: nothing was cut)."""
        self.draining = True
        try:  # what the kernel queued for this listener is ours to answer, not to reset
            self.socket.setblocking(False)
            while True:
                request, address = self.socket.accept()
                self.process_request(request, address)
        except OSError:  # nothing left to accept (or the listener is already closed)
            pass
        self.server_close()
        self._heads.quiet_down()
        end = time.monotonic() + timeout
        hurry = hurry or threading.Event()
        while True:
            with self._room:
                # again each time: a handler may have gone to wait for a next request just
                # before it could see that the server drains
                for wire in self._wires.values():
                    if wire.phase == IDLE and not wire.dropped:
                        wire.drop()
                left = len(self._wires)
            if not (left or self._heads.busy) or time.monotonic() >= end or hurry.wait(0.02):
                return left

    def close(self) -> None:
        """Stop serving (if it ever started: ``shutdown`` would wait forever otherwise), hang up
        every connection not busy with a request, and close the parts; always returns."""
        if self._serving:
            self.shutdown()
        self.server_close()
        self._heads.stop()  # closes every connection still sending its first head
        self._pool.close()  # idle threads end; busy ones once their connection is done
        with self._room:  # connections between requests end now, not after client_timeout
            for wire in self._wires.values():
                if wire.phase != BUSY and not wire.dropped:
                    wire.drop()
        self.parts.close()
        self.guard.close()


def _next_head(wire: Wire) -> bool | None:
    """What waits unread in an idle connection (its handler reads it under the lock the caller
    holds): None when nothing came, True when a next request head is whole (it is about to be
    answered), False when a head has begun arriving (or the client closed its end): as
    droppable as any head still arriving."""
    try:
        if not has_input(wire.sock):
            return None
        return ends_head(wire.sock.recv(_PEEK, socket.MSG_PEEK))
    except (OSError, ValueError):  # closed meanwhile: nothing to spare
        return None


def build(
    parts: Parts, host: str, port: int, *, own_parts: bool, demo: bool = False, **kw
) -> Server:
    """A ``Server`` over ``parts`` (``kw`` as ``Server`` takes them), serving the demo roster now
    when ``demo``. If building fails, ``parts`` are closed when they are ours (``own_parts``), the
    server when the demo fails to start: nothing outlives a refused start."""
    try:
        server = Server(parts, host, port, **kw)
    except BaseException:
        if own_parts:
            parts.close()
        raise
    if demo:
        try:
            parts.start_demo()
        except BaseException:
            server.close()
            raise
    return server


def _fit_descriptors(server: "Server") -> None:
    """Make room in the process's file-descriptor limit for every connection the limits allow:
    raise the soft limit toward the hard one, and if that is not enough, allow fewer pending
    and served connections. Out of descriptors, ``accept`` would fail in a busy loop and seats
    could not reach their upstreams."""
    try:
        import resource
    except ImportError:  # not a Unix: the limit is the system's business
        return
    # a served connection: its own socket and its seats' upstream connections (max_calls is 5
    # by default); 128 for logs, the listener and the upstreams' idle pools
    per_served, spare = 6, 128
    need = server.max_pending + server.max_connections * per_served + spare
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= need:
        return
    try:
        resource.setrlimit(
            resource.RLIMIT_NOFILE,
            (need if hard == resource.RLIM_INFINITY else min(need, hard), hard),
        )
    except (ValueError, OSError):
        pass
    room = resource.getrlimit(resource.RLIMIT_NOFILE)[0] - spare
    if server.max_pending + server.max_connections * per_served > room:
        server.max_pending = max(1, min(server.max_pending, room // 4))
        server.max_connections = max(
            1, min(server.max_connections, (room - server.max_pending) // per_served)
        )
