"""Following an append-only PostgreSQL table without a lock and without a gap.

A row's ``id`` comes from a sequence when it is inserted, but the row becomes visible when its
transaction commits: two writers may take ids 7 and 8 and commit 8 first, so a reader that
remembers "the last id I read" would pass over 7 for good. Every followed table therefore keeps,
beside the id, the id of the transaction that wrote the row (``xid``, an ``xid8`` defaulting to
``pg_current_xact_id()``), and a follower reasons about transactions, not ids:

* The *horizon* is ``pg_snapshot_xmin(pg_current_snapshot())``: every transaction below it has
  ended, committed or not. A row whose ``xid`` is below the horizon is final: it is visible to
  every later statement, and no row with such an ``xid`` can appear any more.
* A cursor ``h`` means "every row with ``xid < h`` has been read". To move it, a follower first
  takes the horizon ``h'`` (one statement), then reads the rows with ``h <= xid < h'``
  (ordered by ``(xid, id)``, later statements). Each row it reads was final before the read
  began, so the read sees them all; each row it does not read has ``xid >= h'`` and is read by
  a later move. No row is skipped and none is read twice; and writers take no lock at all.
  ``final`` reads this way (``page`` one bounded batch of it).
* A reader that must also see what committed a moment ago (the ledger's index, which decides
  on it) reads ``fresh``: every row with ``xid >= h`` it can see now, less the ones it already
  holds (``seen``: the ``(xid, id)`` of rows read at or past the horizon). The horizon ``h'``
  is taken before the read, as above; afterwards only the seen rows with ``xid >= h'`` need
  remembering, since a later read starts at ``h'``. A row committed late has ``xid >= h'`` (its
  transaction was running when ``h'`` was taken), is not in ``seen``, and is read next time.
* A transaction held open holds every follower's horizon back (never a writer): ``final``
  readers lag until it ends (bounded by the database's statement and idle bounds, ``pgbounds``),
  ``fresh`` readers re-send the seen set meanwhile. Keep write transactions short.
* A row copied in from another cluster by a logical dump may carry a transaction id this
  cluster has not reached (``xid`` at or past ``pg_snapshot_xmax``): such a row is final, and
  ``settle`` renumbers it to 1 (below every horizon), so it is read once, first.

Only tables with an ``xid`` column and an index on ``(xid, id)`` are followed here; the SQL
a caller passes selects ``xid::text::bigint, id, ...`` and filters with ``WHERE_FINAL`` or
``WHERE_FRESH``.
"""

from __future__ import annotations

from collections.abc import Iterator

HORIZON = "SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint"
# a limit past every transaction id (an xid8 is an epoch and a 32-bit id; epochs are few)
FAR = 1 << 62

# the rows of one batch of a ``final`` read, with the keyset of the batch before it
WHERE_FINAL = (
    "xid >= %(lo)s::text::xid8 AND xid < %(hi)s::text::xid8 "
    "AND (xid, id) > (%(kx)s::text::xid8, %(kid)s)"
)
WHERE_FRESH = WHERE_FINAL + " AND id <> ALL(%(seen)s::bigint[])"


def horizon(db) -> int:
    """Every transaction whose id is below this one has ended."""
    return int(db.execute(HORIZON)[0][0])


def part(table: str, columns: str, where: str = "", *, fresh: bool = False) -> str:
    """One table's share of a follow: ``xid, id, <columns>`` of its rows in the batch."""
    extra = f" AND {where}" if where else ""
    return (
        f"SELECT xid::text::bigint AS x, id, {columns} FROM {table} "
        f"WHERE {WHERE_FRESH if fresh else WHERE_FINAL}{extra}"
    )


def query(*parts: str) -> str:
    """``parts`` as one statement in follow order, ``%(limit)s`` rows at most."""
    return " UNION ALL ".join(parts) + " ORDER BY 1, 2 LIMIT %(limit)s"


def _batches(db, sql: str, params: dict, limit: int) -> Iterator[tuple[list[tuple], bool]]:
    """``(rows, last)`` batches of ``limit`` rows in ``(xid, id)`` order (a keyset moves
    between batches); ``last``: nothing follows this batch."""
    kx, kid = 0, 0
    while True:
        rows = db.execute(sql, {**params, "kx": kx, "kid": kid, "limit": limit})
        last = len(rows) < limit
        yield rows, last
        if last:
            return
        kx, kid = rows[-1][0], rows[-1][1]


def final(
    db, sql: str, after: int, limit: int, params: dict | None = None
) -> Iterator[tuple[list[tuple], int]]:
    """Batches ``(rows, cursor)`` of the rows with ``after <= xid <`` the horizon now; once a
    batch is taken, ``cursor`` is where the next read starts (the horizon, with the last batch;
    ``after`` before it)."""
    top = max(after, horizon(db))
    if top <= after:
        yield [], top
        return
    for rows, last in _batches(db, sql, {**(params or {}), "lo": after, "hi": top}, limit):
        yield rows, (top if last else after)


def page(
    db, sql: str, after: int, limit: int | None, params: dict | None = None
) -> tuple[list[tuple], int, bool]:
    """``(rows, cursor, done)``: at most about ``limit`` final rows from ``after`` on, whole
    transactions only, so that ``cursor`` (every row below it read) is one number. ``done``:
    the read reached the horizon."""
    top = max(after, horizon(db))
    base = {**(params or {}), "lo": after, "hi": top, "kx": 0, "kid": 0}
    if limit is None or top <= after:
        rows = db.execute(sql, {**base, "limit": None}) if top > after else []
        return rows, top, True
    rows = db.execute(sql, {**base, "limit": limit + 1})
    if len(rows) <= limit:
        return rows, top, True
    cut = rows[limit][0]  # the transaction the limit fell in: left for next time
    kept = [r for r in rows if r[0] < cut]
    if kept:
        return kept, cut, False
    # one transaction larger than the limit: read it whole
    rows = db.execute(sql, {**base, "hi": cut + 1, "limit": None})
    return rows, cut + 1, cut + 1 >= top


def fresh(
    db, sql: str, after: int, seen: set, limit: int, params: dict | None = None
) -> Iterator[tuple[list[tuple], int]]:
    """Batches ``(rows, cursor)`` of every row with ``xid >= after`` visible now and not in
    ``seen`` (a set of ``(xid, id)``). Once a batch is taken, ``cursor`` is a horizon every row
    below which has been read: the horizon taken before the read, with the last batch; before
    it, the lower of that and the batch's last transaction (rows come in ``(xid, id)`` order,
    and every final row is visible to the read). The caller adds the batch's rows to ``seen``,
    moves to ``cursor`` and keeps only the seen rows at or past it (``prune``): ``seen`` stays
    as small as the rows of the transactions still open, even in a read from the start."""
    top = max(after, horizon(db))
    ids = sorted(i for _, i in seen)
    for rows, last in _batches(
        db, sql, {**(params or {}), "lo": after, "hi": FAR, "seen": ids}, limit
    ):
        yield rows, (top if last else max(after, min(top, rows[-1][0])))


def prune(seen: set, cursor: int) -> set:
    """The seen rows a read from ``cursor`` on still needs to tell apart."""
    return {s for s in seen if s[0] >= cursor}


def settle(conn_or_db, tables: tuple[str, ...]) -> int:
    """Renumber rows whose transaction id this cluster has not reached (copied from another
    cluster) to 1, so they are final; the number renumbered."""
    total = 0
    for table in tables:
        rows = conn_or_db.execute(
            f"WITH moved AS (UPDATE {table} SET xid = '1'::xid8 "
            "WHERE xid >= pg_snapshot_xmax(pg_current_snapshot()) RETURNING 1) "
            "SELECT count(*) FROM moved"
        )
        total += int(rows[0][0] if isinstance(rows, list) else rows.fetchone()[0])
    return total
