"""How long any wait on PostgreSQL may last, and the watch that holds a connection to it.

A database that stops answering (a frozen server, a host cut off the network, a backend stuck
behind another's lock) must cost a caller a 503 within a known time, never a hung request. Each
kind of wait has its own bound, all in seconds, each set by a variable of the environment:

=================================  =======  ================================================
variable                           default  what it bounds
=================================  =======  ================================================
``PANELIST_DB_CONNECT_TIMEOUT``    3        one try to connect (libpq's ``connect_timeout``;
                                            whole seconds, at least 1)
``PANELIST_DB_STATEMENT_TIMEOUT``  10       one statement, on the server
                                            (``statement_timeout``); and, held by this
                                            process's own watch, one statement or
                                            transaction with ``GRACE`` more, for a server
                                            that cannot enforce it (frozen, unreachable)
``PANELIST_DB_LOCK_TIMEOUT``       5        a wait for any lock (``lock_timeout``)
``PANELIST_DB_IDLE_TIMEOUT``       30       a transaction left open while its client does
                                            nothing (``idle_in_transaction_session_timeout``)
``PANELIST_DB_KEEPALIVE``          10       silence on a connection before TCP probes it;
                                            three probes ``KEEPALIVE/2`` apart unanswered, or
                                            data unacknowledged this long plus those probes,
                                            and the connection is given up
=================================  =======  ================================================

Invariants:

* A bound is a positive number of seconds; a bad value stops the process at start with a
  message naming the variable (``ConfigInvalid``), never a silent default.
* The watch (``Watch``) cuts the socket of a connection whose statement or transaction has run
  ``statement + GRACE`` seconds: libpq then fails the call at once, and the caller raises
  ``DatabaseUnreachable``. A cut connection is never given back to the pool, nor retried on.
* ``session`` connections (held locks, ``LISTEN``) are not watched: their waits are for a
  notification or a lock they hold, and TCP keepalive ends them when their server is gone.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from dataclasses import dataclass

from panelist.metrics.store import envsetting

GRACE = 2.0  # seconds the watch allows past the server's own statement bound
LINGER = 30.0  # seconds an idle watch thread waits for work before it ends


@dataclass(frozen=True)
class Bounds:
    """The seconds each kind of database wait may last (see the module's table)."""

    connect: int = 3
    statement: float = 10.0
    lock: float = 5.0
    idle: float = 30.0
    keepalive: int = 10

    VARIABLES = {
        "connect": "PANELIST_DB_CONNECT_TIMEOUT",
        "statement": "PANELIST_DB_STATEMENT_TIMEOUT",
        "lock": "PANELIST_DB_LOCK_TIMEOUT",
        "idle": "PANELIST_DB_IDLE_TIMEOUT",
        "keepalive": "PANELIST_DB_KEEPALIVE",
    }

    @classmethod
    def of_env(cls, env=None, **defaults) -> "Bounds":
        """The bounds the environment sets, else ``defaults``, else the table's."""
        env = os.environ if env is None else env
        values = dict(defaults)
        for field, name in cls.VARIABLES.items():
            if not (env.get(name) or "").strip():
                continue
            value = envsetting.seconds(env, name, 0.0, high=86400)
            values[field] = max(1, round(value)) if field in ("connect", "keepalive") else value
        return cls(**values)

    @property
    def wait(self) -> float:
        """The longest one statement or transaction may hold its caller, whatever the server
        does."""
        return self.statement + GRACE

    def connect_options(self) -> dict:
        """The keyword arguments of ``psycopg.connect`` that set these bounds."""
        probe = max(1, self.keepalive // 2)
        return {
            "connect_timeout": self.connect,
            "options": (
                f"-c statement_timeout={_ms(self.statement)} "
                f"-c lock_timeout={_ms(self.lock)} "
                f"-c idle_in_transaction_session_timeout={_ms(self.idle)}"
            ),
            "keepalives": 1,
            "keepalives_idle": self.keepalive,
            "keepalives_interval": probe,
            "keepalives_count": 3,
            # data sent and never acknowledged (a host gone from the network)
            "tcp_user_timeout": _ms(self.keepalive + 3 * probe),
        }

    def public(self) -> dict:
        return {
            "connect": self.connect,
            "statement": self.statement,
            "lock": self.lock,
            "idle_in_transaction": self.idle,
            "keepalive": self.keepalive,
            "wait": self.wait,
        }


def _ms(seconds: float) -> int:
    return max(1, round(seconds * 1000))


def cut(conn) -> None:
    """Shut ``conn``'s socket down under whoever is waiting on it: the wait ends at once with a
    connection error (a duplicate descriptor is shut, so the driver's own stays valid to
    close)."""
    try:
        fd = os.dup(conn.pgconn.socket)
    except Exception:
        return  # already closed: nothing waits on it
    s = socket.socket(fileno=fd)
    try:
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    finally:
        s.close()


class Watch:
    """Connections with a deadline, and one thread that cuts those past it.

    ``start(conn, seconds)`` and ``stop(conn)`` bracket a use of a connection; ``stop`` tells
    the caller whether the watch cut it (so a failure is not retried). The thread starts with
    the first watched use and ends after ``LINGER`` idle seconds, or at ``close``."""

    def __init__(self, *, clock=time.monotonic):
        self._clock = clock
        self._due: dict[int, tuple[float, object]] = {}  # id(conn) -> (deadline, conn)
        self._cut: set[int] = set()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False

    def start(self, conn, seconds: float) -> None:
        with self._cond:
            self._due[id(conn)] = (self._clock() + seconds, conn)
            self._cut.discard(id(conn))
            if self._thread is None and not self._closed:
                self._thread = threading.Thread(target=self._run, name="db-watch", daemon=True)
                self._thread.start()
            self._cond.notify()

    def stop(self, conn) -> bool:
        """End the watch of ``conn``; whether the watch had cut it."""
        with self._cond:
            self._due.pop(id(conn), None)
            if id(conn) in self._cut:
                self._cut.discard(id(conn))
                return True
            return False

    def _run(self) -> None:
        with self._cond:
            idle_since = self._clock()
            while not self._closed:
                now = self._clock()
                late = [(k, c) for k, (due, c) in self._due.items() if due <= now]
                for key, conn in late:
                    del self._due[key]
                    self._cut.add(key)
                    cut(conn)
                if self._due:
                    idle_since = now
                    self._cond.wait(min(d for d, _ in self._due.values()) - now)
                elif now - idle_since >= LINGER:
                    break
                else:
                    self._cond.wait(LINGER - (now - idle_since))
            self._thread = None

    def close(self) -> None:
        with self._cond:
            self._closed = True
            thread = self._thread
            self._cond.notify()
        if thread is not None and thread is not threading.current_thread():
            thread.join()
