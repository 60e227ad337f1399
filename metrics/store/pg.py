"""PostgreSQL connections: one ``Database`` per URL, a small pool of connections, statements and
transactions with retry where a retry is safe, and ``Listener`` for ``LISTEN``/``NOTIFY``. No
domain words: the tables are ``pgschema``'s, their meaning the ledger's.

The driver (psycopg 3, the ``panelist[postgres]`` extra) is imported when a ``Database`` is
made, never before: without a database URL nothing here is loaded, and the default install
stays standard-library only.

Invariants:

* A failure to reach the server (refused, reset, closed, timed out) is raised as one error,
  ``errors.DatabaseUnreachable`` (503 with ``Retry-After``), whose message says only that the
  database is unreachable: a caller of the gateway learns neither the host, the port, the user
  nor the password. The operator's detail (the URL without its secrets, libpq's reason) goes
  to the ``panelist.database`` log, at most once per ``QUIET`` seconds for one reason.
* ``redact`` takes the secrets out of every form a database may be named in: a URL's
  ``user:password@``, its ``?password=`` and ``?sslpassword=`` parameters, and a libpq
  keyword string's ``password=…`` (quoted or not); whatever cannot be parsed is not shown.
* Every other database error is a bug of ours or a broken schema and goes up as it is.
* A statement or transaction is retried once on a fresh connection only when the failure came
  before anything could have been committed (a pooled connection that died while idle, e.g.
  across a server restart); a failure during ``COMMIT`` is never retried, since the commit
  may have landed.
* After a connection failure every idle connection is dropped: they all went to the same
  server, so the next caller connects anew instead of meeting another dead one. Connecting is
  tried ``ATTEMPTS`` times with a growing pause.
* Every wait is bounded (``pgbounds``): each try to connect, each statement and lock wait on
  the server, a transaction left idle, a silent connection; and, by this process's own watch,
  each statement or transaction of the pool (``run``, ``begin``), for a server that cannot
  enforce its bounds. A statement or lock wait over its bound, or a watched use cut, is a
  ``DatabaseUnreachable`` at once, never retried (the server was there and too slow: a second
  try would double the wait).
* Connections are in autocommit mode: one statement is one transaction unless ``transaction``
  brackets several.
* The pool caps the connections *in use*, not only the idle ones: at most ``pool`` uses
  (``PANELIST_DB_POOL``, default ``POOL``) of one ``Database`` run at once; one more waits for
  a free connection at most the connect bound, then is a ``DatabaseUnreachable`` saying the
  connections stayed busy (503, nothing written). A thread's nested use (a read inside its own
  transaction) rides on the permit it holds, so it can never wait on itself. ``session`` and
  ``Listener`` connections are outside the cap (see the connection budget in docs/cluster.md).
* Every use, error and wait for a connection is counted in ``pgstats.STATS`` for ``/metrics``.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from contextlib import contextmanager
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from panelist.metrics import errors
from panelist.metrics.store import envsetting
from panelist.metrics.store.pgbounds import Bounds, Watch
from panelist.metrics.store.pgstats import STATS

INSTALL_HINT = "pip install 'panelist[postgres]'"
ATTEMPTS = 3  # connection tries before a caller is told the database is unreachable
BACKOFF = 0.1  # seconds before the second try, doubled after each
RETRY_AFTER = 2.0  # what a caller is told to wait when the database is unreachable
POOL = 5  # connections of one Database in use at once (PANELIST_DB_POOL)
MAX_POOL = 1000
QUIET = 10.0  # seconds between two log lines of one unreachable reason
SECRET_PARAMS = ("password", "sslpassword")  # URL parameters and keywords libpq reads secrets from
HIDDEN = "***"

log = logging.getLogger("panelist.database")
# libpq's keyword form: ``password=s3cret`` or ``password='with \' quote'``
_KEYWORD_SECRET = re.compile(
    r"\b(" + "|".join(SECRET_PARAMS) + r")\s*=\s*('(?:[^'\\]|\\.)*'?|\S*)", re.IGNORECASE
)
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")  # a URL, as opposed to a keyword string


def driver():
    """The psycopg module, or a ConfigInvalid saying how to install it."""
    try:
        import psycopg
    except ImportError:
        raise errors.ConfigInvalid(
            "a database URL is set (PANELIST_DATABASE_URL or --database) but the PostgreSQL "
            f"driver is not installed; run: {INSTALL_HINT}"
        ) from None
    return psycopg


def redact(url: str) -> str:
    """``url`` with every secret it may carry replaced by ``***``, for messages and logs."""
    if not _URL.match(url):
        # a libpq keyword string (``host=db password=…``), or no database name at all
        return _KEYWORD_SECRET.sub(lambda m: f"{m.group(1)}={HIDDEN}", url)
    try:
        parts = urlsplit(url)
        password = parts.password
        query = parse_qsl(parts.query, keep_blank_values=True)
    except ValueError:
        return "(a malformed database URL)"
    netloc = parts.netloc
    if password is not None:
        netloc = f"{parts.username or ''}:{HIDDEN}@{netloc.rpartition('@')[2]}"
    if any(k.lower() in SECRET_PARAMS for k, _ in query):
        query = [(k, HIDDEN if k.lower() in SECRET_PARAMS else v) for k, v in query]
        return urlunsplit(parts._replace(netloc=netloc, query=urlencode(query, safe="*")))
    return urlunsplit(parts._replace(netloc=netloc))


def secrets_of(url: str) -> list[str]:
    """The secret values ``url`` carries (to scrub them from text a driver wrote)."""
    if not _URL.match(url):
        found = [m.group(2).strip("'") for m in _KEYWORD_SECRET.finditer(url)]
    else:
        try:
            parts = urlsplit(url)
            found = [parts.password or ""] + [
                v
                for k, v in parse_qsl(parts.query, keep_blank_values=True)
                if k.lower() in SECRET_PARAMS
            ]
        except ValueError:
            return []
    return [s for s in found if s]


def has_secret(url: str) -> bool:
    """Whether ``url`` carries a password in any form."""
    return bool(secrets_of(url))


def pool_size(env=None) -> int:
    """The cap on connections in use per ``Database``: ``PANELIST_DB_POOL``, else ``POOL``; a
    bad value is refused by name."""
    import os

    return envsetting.whole(
        os.environ if env is None else env,
        "PANELIST_DB_POOL",
        POOL,
        high=MAX_POOL,
        unit="connections",
    )


def check_url(url: str) -> str:
    """``url`` if it names PostgreSQL, else a ConfigInvalid saying what one looks like."""
    if not isinstance(url, str) or urlsplit(url).scheme not in ("postgresql", "postgres"):
        shown = redact(url) if isinstance(url, str) else repr(url)
        raise errors.ConfigInvalid(
            f"not a PostgreSQL URL: {shown}; use postgresql://USER@HOST:PORT/DATABASE"
        )
    return url


def check_argument(url: str) -> str:
    """``url`` as given on a command line, refused when it carries a password: every user of
    the machine can read a process's arguments (``ps``), so a secret there is already out."""
    if has_secret(url):
        raise errors.ConfigInvalid(
            "--database carries a password, which any user of this machine can read in the "
            "process list; give the URL without it and the password in PGPASSWORD or "
            "~/.pgpass, or the whole URL in PANELIST_DATABASE_URL"
        )
    return url


class Database:
    """One database's connections, shared by the threads of one process."""

    def __init__(
        self,
        url: str,
        *,
        application: str = "panelist",
        bounds: Bounds | None = None,
        pool: int | None = None,
    ):
        self.url = check_url(url)
        self.bounds = bounds or Bounds.of_env()
        self.pool = pool or pool_size()
        self._permits = threading.BoundedSemaphore(self.pool)
        self._depth = threading.local()  # this thread's uses in progress (nested ones ride free)
        self._watch = Watch()
        self.shown = redact(url)
        self._secrets = secrets_of(url)
        self._logged: dict[str, float] = {}  # reason -> when it was last logged
        self._pg = driver()
        # a connection refused, reset or closed under us: the server is (for now) out of reach
        self._lost = (self._pg.OperationalError, self._pg.InterfaceError)
        # the server's own bounds (statement_timeout, lock_timeout): it is there, and too slow
        self._slow = (self._pg.errors.QueryCanceled, self._pg.errors.LockNotAvailable)
        self._application = application
        self._idle: list = []
        self._lock = threading.Lock()
        self._closed = False
        self.schema_ready = False  # ``pgschema.ensure`` brought its schema up to date

    # ----------------------------------------------------------------- connections

    def connect(self, attempts: int = ATTEMPTS):
        """A new autocommit connection (tried ``attempts`` times), the caller's to close."""
        pause = BACKOFF
        for attempt in range(attempts):
            try:
                return self._pg.connect(
                    self.url,
                    autocommit=True,
                    application_name=self._application,
                    **self.bounds.connect_options(),
                )
            except self._pg.OperationalError as exc:
                if attempt == attempts - 1:
                    raise self.unreachable(exc) from None
                time.sleep(pause)
                pause *= 2
        raise AssertionError("unreachable")

    def unreachable(self, exc: Exception, *, cut: bool = False) -> errors.DatabaseUnreachable:
        """The error a caller sees for ``exc``, a failure to reach the server (``cut``: the
        watch ended a use that outlived its bound): it says no more than that (where the
        database is, and who connects to it, is the operator's business, logged here)."""
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if cut:
            reason = f"no answer within {self.bounds.wait:g} s ({reason})"
        self._log(reason)
        STATS.error("unreachable")
        said = (
            f"the database did not answer within {self.bounds.wait:g} s"
            if cut
            else "the database is unreachable"
        )
        return errors.DatabaseUnreachable(
            f"{said}; nothing was written, retry in a few seconds", retry_after=RETRY_AFTER
        )

    def too_slow(self, exc: Exception) -> errors.DatabaseUnreachable:
        """The error a caller sees when the server ended a statement at its own bound."""
        what = "a lock" if isinstance(exc, self._pg.errors.LockNotAvailable) else "a statement"
        bound = self.bounds.lock if what == "a lock" else self.bounds.statement
        STATS.error("too_slow")
        self._log(
            f"{what} waited over {bound:g} s: "
            f"{str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
        )
        return errors.DatabaseUnreachable(
            f"the database did not finish in time ({what} waited over {bound:g} s); nothing "
            "was written, retry in a few seconds",
            retry_after=RETRY_AFTER,
        )

    def _log(self, reason: str) -> None:
        for secret in self._secrets:
            reason = reason.replace(secret, HIDDEN)
        now = time.monotonic()
        with self._lock:
            loud = now - self._logged.get(reason, -QUIET) >= QUIET
            if loud:
                self._logged[reason] = now
        if loud:
            log.warning("the database %s is unreachable: %s", self.shown, reason[:300])

    def _take(self):
        """``(connection, fresh)``: an idle one if any, else a new one."""
        with self._lock:
            if self._closed:
                raise errors.DatabaseUnreachable(
                    "the database connection is closed (the server is stopping)",
                    retry_after=RETRY_AFTER,
                )
            conn = self._idle.pop() if self._idle else None
        if conn is not None and not conn.closed:
            return conn, False
        return self.connect(), True

    def _give(self, conn) -> None:
        with self._lock:
            if not self._closed and len(self._idle) < self.pool and not conn.closed:
                self._idle.append(conn)
                return
        conn.close()

    def _broken(self, conn) -> None:
        """Close ``conn`` and every idle connection: they all went to the server that failed."""
        with self._lock:
            idle, self._idle = self._idle, []
        for c in [conn, *idle]:
            try:
                c.close()
            except Exception:
                pass

    # ----------------------------------------------------------------- statements

    def execute(self, sql: str, params=(), *, retry: bool = True) -> list[tuple]:
        """Run one statement (its own transaction) and return its rows ([] for none).
        ``retry``: try once more on a fresh connection when a pooled one had died; only for
        statements that are safe to run twice or that cannot have committed."""
        return self.run(
            lambda conn: _rows(conn.execute(sql, params)), retry=retry, transaction=False
        )

    def transaction(self, body, *, retry: bool = True):
        """``body(conn)`` inside one transaction; its result. Nothing is committed when it
        raises. Retried (once, fresh connection) when a pooled connection failed before
        ``COMMIT`` was sent; never when ``COMMIT`` itself failed."""
        return self.run(body, retry=retry, transaction=True)

    @contextmanager
    def _permit(self):
        """One of the ``pool`` uses at once, waited for at most the connect bound (a thread
        already in a use takes none: its nested use cannot wait on itself)."""
        depth = getattr(self._depth, "n", 0)
        t0 = time.monotonic()
        if depth == 0 and not self._permits.acquire(blocking=False):
            got = self._permits.acquire(timeout=self.bounds.connect)
            STATS.pool_wait(time.monotonic() - t0, got)
            if not got:
                STATS.error("pool_full")
                raise errors.DatabaseUnreachable(
                    f"all {self.pool} database connections of this instance stayed busy for "
                    f"{self.bounds.connect:g} s; nothing was written, retry in a few seconds",
                    retry_after=RETRY_AFTER,
                )
        self._depth.n = depth + 1
        STATS.taken(1)
        try:
            yield
        finally:
            STATS.taken(-1)
            self._depth.n = depth
            if depth == 0:
                self._permits.release()
            STATS.used(time.monotonic() - t0)

    def run(self, body, *, retry: bool = True, transaction: bool = True):
        with self._permit():
            return self._run(body, retry, transaction)

    def _run(self, body, retry: bool, transaction: bool):
        for attempt in range(2):
            conn, fresh = self._take()
            self._watch.start(conn, self.bounds.wait)
            committing = False
            try:
                if transaction:
                    conn.execute("BEGIN")
                result = body(conn)
                if transaction:
                    committing = True
                    conn.execute("COMMIT")
            except self._slow as exc:
                self._watch.stop(conn)
                self._rollback(conn)
                raise self.too_slow(exc) from None
            except self._lost as exc:
                cut = self._watch.stop(conn)
                self._broken(conn)
                # a failure during COMMIT is never retried: the commit may have landed
                if cut or committing or fresh or attempt or not retry:
                    raise self.unreachable(exc, cut=cut) from None
                continue
            except BaseException:
                self._watch.stop(conn)
                self._rollback(conn)
                raise
            self._release(conn)
            return result
        raise AssertionError("unreachable")

    def _release(self, conn) -> None:
        """Back to the pool after a use that ended well, unless the watch cut it just then."""
        if self._watch.stop(conn):
            conn.close()
        else:
            self._give(conn)

    def _rollback(self, conn) -> None:
        try:
            if (
                not conn.closed
                and conn.info.transaction_status != self._pg.pq.TransactionStatus.IDLE
            ):
                conn.execute("ROLLBACK")
            self._give(conn)
        except Exception:
            self._broken(conn)

    @contextmanager
    def begin(self):
        """One transaction on a pooled connection, held while the block runs (statements of
        the caller's between them, e.g. a lock taken, then other work, then a write):
        committed when the block ends, rolled back when it raises. A failure to reach the
        server inside, or the block outliving its bound, becomes ``DatabaseUnreachable``."""
        with self._permit(), self._begin() as conn:
            yield conn

    @contextmanager
    def _begin(self):
        conn, fresh = self._take()
        self._watch.start(conn, self.bounds.wait)
        try:
            conn.execute("BEGIN")
        except self._lost as exc:
            cut = self._watch.stop(conn)
            self._broken(conn)
            if fresh or cut:
                raise self.unreachable(exc, cut=cut) from None
            conn = self.connect()  # a pooled one had died while idle: nothing was sent
            self._watch.start(conn, self.bounds.wait)
            try:
                conn.execute("BEGIN")
            except self._lost as exc2:
                cut = self._watch.stop(conn)
                self._broken(conn)
                raise self.unreachable(exc2, cut=cut) from None
        try:
            yield conn
            conn.execute("COMMIT")
        except self._slow as exc:
            self._watch.stop(conn)
            self._rollback(conn)
            raise self.too_slow(exc) from None
        except self._lost as exc:
            cut = self._watch.stop(conn)
            self._broken(conn)
            raise self.unreachable(exc, cut=cut) from None
        except BaseException:
            self._watch.stop(conn)
            self._rollback(conn)
            raise
        self._release(conn)

    @contextmanager
    def session(self):
        """One connection held for a while (a lock held across statements); closed after,
        never returned to the pool, so no session state outlives it."""
        conn = self.connect()
        try:
            yield conn
        finally:
            conn.close()

    @contextmanager
    def reaching(self):
        """Statements on a connection of the caller's own (``connect``, ``session``): a
        failure to reach the server inside becomes ``DatabaseUnreachable``."""
        try:
            yield
        except self._slow as exc:
            raise self.too_slow(exc) from None
        except self._lost as exc:
            raise self.unreachable(exc) from None

    def listener(self, channel: str, on_notify, on_reconnect) -> "Listener":
        return Listener(self, channel, on_notify, on_reconnect)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
        self._watch.close()


def _rows(cursor) -> list[tuple]:
    return cursor.fetchall() if cursor.description is not None else []


class Listener:
    """A thread that ``LISTEN``s on one channel: ``on_notify(payload)`` for each notification,
    ``on_reconnect()`` each time it has (re)connected, since notifications sent while it was
    away are lost and the caller must look for itself. ``listening`` is True only while the
    connection is up; a caller that cannot be sure it heard everything treats every read as
    possibly stale while it is False."""

    POLL = 0.25  # seconds between looks at the stop flag while waiting for notifications

    def __init__(self, db: Database, channel: str, on_notify, on_reconnect):
        if not channel.isidentifier():
            raise ValueError(f"not a channel name: {channel!r}")
        self._db = db
        self._channel = channel
        self._on_notify = on_notify
        self._on_reconnect = on_reconnect
        self._stop = threading.Event()
        self.listening = False
        self._thread = threading.Thread(target=self._run, name=f"listen-{channel}", daemon=True)
        self._conn = None

    def start(self) -> "Listener":
        self._thread.start()
        return self

    def _run(self) -> None:
        pause = BACKOFF
        while not self._stop.is_set():
            try:
                # one try a turn: the loop is the retry, and close() never waits for more
                conn = self._db.connect(attempts=1)
            except errors.DatabaseUnreachable:
                self._stop.wait(pause)
                pause = min(pause * 2, 2.0)
                continue
            pause = BACKOFF
            self._conn = conn
            try:
                conn.execute(f"LISTEN {self._channel}")
                self.listening = True
                self._on_reconnect()
                while not self._stop.is_set():
                    for note in conn.notifies(timeout=self.POLL):
                        self._on_notify(note.payload)
            except Exception:
                pass  # the connection failed: reconnect, and the caller looks for itself
            finally:
                self.listening = False
                self._conn = None
                try:
                    conn.close()
                except Exception:
                    pass

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
