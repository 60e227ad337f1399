"""The HTTP front end both servers stand on: the listener, connections until their first head
(``heads``), the threads that answer them (``pool``), one connection's reads, deadlines and
phases (``connection``), the request handler (``handler``), the byte budget of bodies in flight
(``memory``), the server itself (``base``) and several processes on one port (``workers``).
Routes, the API and who may call live beside it in ``metrics.server``; nothing here knows them.

A connection's life (phases are ``connection.Wire``'s; ``base`` holds the limits)::

    accept ──▶ Heads (one thread, selector) ── first head whole ──▶ queued for a thread
      │          │ silent / too slow: 408 or closed          │ full queue: 503, closed
      │          │ over the memory budget: 503               ▼
      │          ▼                                   Pool thread + Wire (phase HEAD)
      │        closed                                        │ Server.begin_work
      │                                                      ▼
      │                               ┌──────────────── BUSY: routed, gated, answered
      │                               │   reads a body ──▶ BODY ──▶ BUSY (end_body)
      │                               │                    │ late or stalled: 408, closed
      │                               ▼
      │                     reply sent ── keep-alive? ── no ──▶ closed
      │                               │ yes
      │                               ▼
      │                     IDLE: waits ``stall`` s for the next request ── first byte ──▶ HEAD
      │                               │ nothing came, server draining, or taken back: closed
      ▼
    the listener never waits; past ``max_connections`` the server takes back IDLE, HEAD or
    BODY connections (never a BUSY one) for heads waiting for a thread

Invariants: a phase and the ``dropped`` mark change together under the connection's own lock
(``Wire.state``), so the server never takes back a connection in the instant it turns busy;
the table of connections changes under the server's lock (``room``), taken first where both
are. DEBUG records of these steps go to the loggers ``panelist.server.heads`` and
``panelist.server.connection``; they are silent unless the logging setup turns DEBUG on.
"""
