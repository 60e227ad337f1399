"""The PostgreSQL schema, versioned: ``MIGRATIONS`` in order, ``migrate`` applies the ones a
database lacks. ``runs/README.md`` describes every table for the people reading them.

Invariants:

* ``migrate`` is idempotent and safe to run from several processes at once: it holds a
  session advisory lock (``SCHEMA_LOCK``) while it reads ``panelist_schema`` and applies each
  missing version in its own transaction, so a version is applied once and never half.
* Every append-only table has a ``bigint`` ``id`` key and the record as ``JSONB`` (as its JSONL
  line would be) plus the columns reads need, each indexed: a read costs the same at any
  table size.
* Evidence (``evidence`` and ``verdicts``) takes its ids from one sequence, ``evidence_ids``,
  through ``panelist_append``, which notifies ``CHANNEL`` with the last id in the same
  transaction (delivered at commit).
* Panel seqs come from ``panel_ids`` (from 0, as a data folder counts them): no two instances
  ever get the same one.
* Version 2 holds the limits every instance shares (``rate_counts``, ``admission_*`` and their
  functions, read by ``server.ratedb`` and ``upstream.admitdb``): rows overwritten in place,
  each judged and changed in one statement under its row lock.
* Version 3 holds the races' reports: one row of ``race_reports`` per race, written when the
  race is named and again, whole, when it ends.
* Version 4: ``panelist_put_panels`` writes finished panels (and their evidence) in one
  statement.
* Version 6: leases, rows held until an expiry on the database's clock (``clock_timestamp()``)
  and renewed by their holder: a concurrency slot is a row of ``admission_leases`` (no longer a
  session advisory lock: ``panelist_take_slot`` is left for instances not yet upgraded, whose
  slots the new ones do not see, so every instance of a database is upgraded together), the
  instance that runs the jobs holds the row ``leader`` of ``leases``, the jobs' next times are
  ``schedule_book`` and the dashboard's logins ``dashboard_sessions``.
* Version 7: no write takes a lock another instance waits on. Versions 1 to 6 made ids visible
  in id order by holding one advisory lock (``APPEND_LOCK``, ``SAMPLES_LOCK``) from each write
  to its commit, so that a follower reading ``id > last`` never passed over a row committed
  late; one stalled writer then stalled every instance. Now each followed table (``FOLLOWED``)
  keeps the id of the transaction that wrote each row (``xid``), and followers read by
  transaction (``pgfollow`` shows why that misses nothing). A panel whose seq is already stored
  is not written again, nor its evidence: a write sent twice lands once.
* Version 8: a key's requests a minute are counted exactly over every 60 s (``rate_log``,
  ``panelist_rate_take``); ``rate_counts`` and ``panelist_rate_admit`` are no longer used.
* Version 9: what each key and collection spent, per UTC day and month (``spend``, one row per
  subject, period and period number, added to in place; ``panel.spenddb``).
* Config is kept as versioned rows (``config``: name, version, body); the highest version of a
  name is current, an edit inserts the next version and notifies ``CONFIG_CHANNEL``.
"""

from __future__ import annotations

import threading

SCHEMA_LOCK = 0x70616E01  # advisory lock keys: "pan" + a number, ours alone
APPEND_LOCK = 0x70616E02  # versions 1-5 only; + 1 still orders a reservation of many seqs
CHANNEL = "panelist_evidence"
CONFIG_CHANNEL = "panelist_config"

_V1 = [
    """CREATE SEQUENCE IF NOT EXISTS panel_ids MINVALUE 0 START 0""",
    """CREATE SEQUENCE IF NOT EXISTS evidence_ids""",
    # seat answers, seatings, deliveries, cooldowns, windows, probes: evidence.jsonl's lines
    """CREATE TABLE IF NOT EXISTS evidence (
        id bigint PRIMARY KEY,
        kind text NOT NULL,
        panel text,
        ts timestamptz NOT NULL DEFAULT now(),
        record jsonb NOT NULL)""",
    # verdicts: evidence.jsonl's "verdict" lines, ids from the same sequence
    """CREATE TABLE IF NOT EXISTS verdicts (
        id bigint PRIMARY KEY,
        call text NOT NULL,
        ts timestamptz NOT NULL DEFAULT now(),
        record jsonb NOT NULL)""",
    """CREATE INDEX IF NOT EXISTS verdicts_call ON verdicts (call, id)""",
    # finished panels: calls.jsonl's lines, found by their seq
    """CREATE TABLE IF NOT EXISTS panels (
        id bigserial PRIMARY KEY,
        seq bigint NOT NULL UNIQUE,
        panel text NOT NULL,
        ts timestamptz NOT NULL DEFAULT now(),
        record jsonb NOT NULL)""",
    # race calls (runs/races/<id>/calls.jsonl), suite samples, config changes
    """CREATE TABLE IF NOT EXISTS races (
        id bigserial PRIMARY KEY,
        race text NOT NULL,
        ts timestamptz NOT NULL DEFAULT now(),
        record jsonb NOT NULL)""",
    """CREATE INDEX IF NOT EXISTS races_race ON races (race, id)""",
    """CREATE TABLE IF NOT EXISTS suite_samples (
        id bigserial PRIMARY KEY,
        ts timestamptz NOT NULL DEFAULT now(),
        record jsonb NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS config_changes (
        id bigserial PRIMARY KEY,
        ts timestamptz NOT NULL DEFAULT now(),
        record jsonb NOT NULL)""",
    # keys, collections, the roster: one row per version of each config file
    """CREATE TABLE IF NOT EXISTS config (
        name text NOT NULL,
        version bigint NOT NULL,
        ts timestamptz NOT NULL DEFAULT now(),
        body jsonb NOT NULL,
        PRIMARY KEY (name, version))""",
    # how far `panelist db import` got in each source file, moved in the batch's transaction
    """CREATE TABLE IF NOT EXISTS imported (
        source text PRIMARY KEY,
        byte_offset bigint NOT NULL,
        records bigint NOT NULL)""",
    f"""CREATE OR REPLACE FUNCTION panelist_append(recs jsonb) RETURNS bigint
        LANGUAGE plpgsql AS $$
        DECLARE
            r jsonb;
            i bigint;
            first bigint;
        BEGIN
            PERFORM pg_advisory_xact_lock({APPEND_LOCK});
            FOR r IN SELECT value FROM jsonb_array_elements(recs) LOOP
                i := nextval('evidence_ids');
                IF first IS NULL THEN
                    first := i;
                END IF;
                IF r->>'kind' = 'verdict' THEN
                    INSERT INTO verdicts (id, call, record) VALUES (i, r->>'call', r);
                ELSE
                    INSERT INTO evidence (id, kind, panel, record)
                        VALUES (i, coalesce(r->>'kind', ''), r->>'panel', r);
                END IF;
            END LOOP;
            IF i IS NOT NULL THEN
                PERFORM pg_notify('{CHANNEL}', i::text);
            END IF;
            RETURN first;
        END $$""",
]

# the limits every instance shares: a key's requests a minute (``rate_counts``, the sliding
# estimate of server.ratelimit), and admission's rate logs and pauses per scope; its slots are
# session advisory locks on (``admission_scopes.id``, slot), two-int keys that never meet the
# one-bigint keys above
_V2_LIMITS = [
    """CREATE TABLE IF NOT EXISTS rate_counts (
        key text PRIMARY KEY,
        minute bigint NOT NULL,
        current bigint NOT NULL,
        before bigint NOT NULL)""",
    # {admitted 1|0, before, current (this one included when admitted), seconds into the minute}
    """CREATE OR REPLACE FUNCTION panelist_rate_admit(k text, lim bigint, win float8, at float8)
        RETURNS float8[] LANGUAGE plpgsql AS $$
        DECLARE
            t float8 := coalesce(at, extract(epoch FROM clock_timestamp()));
            m bigint := floor(t / win)::bigint;
            el float8 := t - floor(t / win) * win;
            r rate_counts;
            cur bigint := 0;
            bef bigint := 0;
        BEGIN
            INSERT INTO rate_counts VALUES (k, m, 0, 0) ON CONFLICT (key) DO NOTHING;
            SELECT * INTO r FROM rate_counts WHERE key = k FOR UPDATE;
            IF r.minute = m THEN
                cur := r.current;
                bef := r.before;
            ELSIF r.minute = m - 1 THEN
                bef := r.current;
            END IF;
            IF bef * (1 - el / win) + cur + 1 > lim THEN
                RETURN ARRAY[0, bef, cur, el];
            END IF;
            UPDATE rate_counts SET minute = m, current = cur + 1, before = bef WHERE key = k;
            RETURN ARRAY[1, bef, cur + 1, el];
        END $$""",
    """CREATE TABLE IF NOT EXISTS admission_scopes (
        scope text PRIMARY KEY,
        id integer GENERATED ALWAYS AS IDENTITY UNIQUE)""",
    # admission times (the database's clock, epoch seconds) within the last span, oldest first
    """CREATE TABLE IF NOT EXISTS admission_rates (
        scope text PRIMARY KEY,
        times float8[] NOT NULL DEFAULT '{}')""",
    """CREATE TABLE IF NOT EXISTS admission_pauses (
        endpoint text PRIMARY KEY,
        until float8 NOT NULL,
        seconds float8 NOT NULL,
        why text NOT NULL,
        ts timestamptz NOT NULL DEFAULT now())""",
    # {seconds until every scope has room (0: now), which scope waits longest (1-based, 0:
    # none), the time judged}; the rows are locked in the order given (a model's before its
    # endpoint's, so no two callers wait on each other)
    """CREATE OR REPLACE FUNCTION panelist_admission_rate(scopes text[], rpms int[],
            span float8, rec boolean) RETURNS float8[] LANGUAGE plpgsql AS $$
        DECLARE
            t float8;
            i int;
            n int;
            kept float8[];
            w float8;
            later float8 := 0;
            worst int := 0;
        BEGIN
            INSERT INTO admission_rates (scope) SELECT unnest(scopes) ON CONFLICT DO NOTHING;
            FOR i IN 1 .. array_length(scopes, 1) LOOP
                PERFORM 1 FROM admission_rates WHERE scope = scopes[i] FOR UPDATE;
            END LOOP;
            t := extract(epoch FROM clock_timestamp());
            FOR i IN 1 .. array_length(scopes, 1) LOOP
                SELECT array(SELECT x FROM unnest(times) x WHERE x > t - span ORDER BY x)
                    INTO kept FROM admission_rates WHERE scope = scopes[i];
                n := coalesce(array_length(kept, 1), 0);
                IF n >= rpms[i] THEN
                    w := kept[n - rpms[i] + 1] + span - t;
                    IF w > later THEN
                        later := w;
                        worst := i;
                    END IF;
                END IF;
            END LOOP;
            IF later <= 0 AND rec THEN
                FOR i IN 1 .. array_length(scopes, 1) LOOP
                    UPDATE admission_rates SET times = array(
                        SELECT x FROM unnest(times) x WHERE x > t - span ORDER BY x) || t
                        WHERE scope = scopes[i];
                END LOOP;
            END IF;
            RETURN ARRAY[later, worst, t];
        END $$""",
    # the first free slot below n not in skip (this session's own), locked for the session;
    # -1 when every one is held
    """CREATE OR REPLACE FUNCTION panelist_take_slot(scope_id int, n int, skip int[])
            RETURNS int LANGUAGE plpgsql AS $$
        DECLARE
            i int;
        BEGIN
            FOR i IN 0 .. n - 1 LOOP
                IF NOT (i = ANY(skip)) AND pg_try_advisory_lock(scope_id, i) THEN
                    RETURN i;
                END IF;
            END LOOP;
            RETURN -1;
        END $$""",
]

_V3_RACES = [
    # one row per race, made when the race is named (report NULL until it ends): every host
    # lists and reads the races any host ran
    """CREATE TABLE IF NOT EXISTS race_reports (
        race text PRIMARY KEY,
        started timestamptz NOT NULL DEFAULT now(),
        ended timestamptz,
        report jsonb)""",
    """CREATE INDEX IF NOT EXISTS race_reports_started ON race_reports (started, race)""",
]

# finished panels in one statement, so a panel's write is one round trip and one commit instead
# of BEGIN, lock, evidence, rows and COMMIT each waiting for the server: ``pairs`` is
# [[seq, panel, record], ...] in the order their ids are to be given, ``abandoned`` the
# evidence written first (``[]`` for none); both under the append lock, as panelist_append
_V4_PANELS = [
    f"""CREATE OR REPLACE FUNCTION panelist_put_panels(pairs jsonb, abandoned jsonb)
        RETURNS void LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM pg_advisory_xact_lock({APPEND_LOCK});
            IF jsonb_array_length(abandoned) > 0 THEN
                PERFORM panelist_append(abandoned);
            END IF;
            INSERT INTO panels (seq, panel, record)
                SELECT (p->>0)::bigint, p->>1, p->2
                FROM jsonb_array_elements(pairs) WITH ORDINALITY AS t(p, n) ORDER BY n
                ON CONFLICT (seq) DO UPDATE SET panel = EXCLUDED.panel,
                    record = EXCLUDED.record, ts = now();
        END $$""",
]

# which file each source of `panelist db import` was read from (a hash of its first line: the
# logs are append-only), so an import of another folder is refused instead of resumed
_V5_IMPORT_ORIGIN = ["ALTER TABLE imported ADD COLUMN IF NOT EXISTS origin text"]

# leases: rows held until an expiry on the database's clock and renewed by their holder, for what
# must outlive a connection (a session advisory lock ends with its connection, even while the
# process that held it still works, and lasts forever on a frozen one). ``admission_leases``:
# one row per call in flight in a limited scope (``token`` its handle); ``leases``: one row per
# named role (the instance that runs the jobs); ``schedule_book``: the jobs' next times, the
# same for whichever instance leads; ``dashboard_sessions``: the dashboard's logins, as the
# SHA-256 of the cookie's value
_V6_LEASES = [
    """CREATE SEQUENCE IF NOT EXISTS lease_tokens""",
    """CREATE TABLE IF NOT EXISTS admission_leases (
        token bigint PRIMARY KEY,
        scope integer NOT NULL,
        holder text NOT NULL,
        taken timestamptz NOT NULL DEFAULT clock_timestamp(),
        until timestamptz NOT NULL)""",
    """CREATE INDEX IF NOT EXISTS admission_leases_scope ON admission_leases (scope, until)""",
    # a lease for a call in a scope of n slots: its token, or -1 when n leases are live. Takes
    # of one scope queue on its row of admission_scopes for the statement, so two never both
    # see the last free slot; a lease past its expiry is counted as free, and removed
    """CREATE OR REPLACE FUNCTION panelist_take_lease(scope_id int, n int, who text,
            ttl float8) RETURNS bigint LANGUAGE plpgsql AS $$
        DECLARE
            live int;
            tok bigint;
        BEGIN
            PERFORM 1 FROM admission_scopes WHERE id = scope_id FOR UPDATE;
            DELETE FROM admission_leases WHERE scope = scope_id AND until <= clock_timestamp();
            SELECT count(*) INTO live FROM admission_leases WHERE scope = scope_id;
            IF live >= n THEN
                RETURN -1;
            END IF;
            tok := nextval('lease_tokens');
            INSERT INTO admission_leases (token, scope, holder, until)
                VALUES (tok, scope_id, who, clock_timestamp() + make_interval(secs => ttl));
            RETURN tok;
        END $$""",
    # every lease of one holder moved to now + ttl; a lease that is gone (it expired and a take
    # removed it) is put back, whatever the count, since its call still runs: the tokens put
    # back. A lease is only ever removed by its holder's give or once it has expired
    """CREATE OR REPLACE FUNCTION panelist_renew_leases(tokens bigint[], scopes int[],
            who text, ttl float8) RETURNS bigint[] LANGUAGE plpgsql AS $$
        DECLARE
            back bigint[];
        BEGIN
            WITH kept AS (
                UPDATE admission_leases SET until = clock_timestamp() + make_interval(secs => ttl)
                    WHERE token = ANY(tokens) RETURNING token),
            gone AS (
                INSERT INTO admission_leases (token, scope, holder, until)
                    SELECT t, s, who, clock_timestamp() + make_interval(secs => ttl)
                    FROM unnest(tokens, scopes) AS x(t, s)
                    WHERE t NOT IN (SELECT token FROM kept)
                    ON CONFLICT (token) DO NOTHING RETURNING token)
            SELECT coalesce(array_agg(token), '{}') INTO back FROM gone;
            RETURN back;
        END $$""",
    """CREATE TABLE IF NOT EXISTS leases (
        name text PRIMARY KEY,
        holder text NOT NULL,
        term bigint NOT NULL,
        since timestamptz NOT NULL DEFAULT clock_timestamp(),
        until timestamptz NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS schedule_book (
        job text PRIMARY KEY,
        next float8 NOT NULL,
        last float8 NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS dashboard_sessions (
        digest bytea PRIMARY KEY,
        made timestamptz NOT NULL DEFAULT clock_timestamp(),
        until timestamptz NOT NULL)""",
    """CREATE INDEX IF NOT EXISTS dashboard_sessions_made ON dashboard_sessions (made)""",
]

# no lock on the write path: every followed table keeps the id of the transaction that wrote
# each row, and followers read by transaction (``pgfollow``) instead of by id. Rows already
# there get 1 (final, read first, in id order) without rewriting the table; new rows their
# writer's. ``panelist_append`` and ``panelist_put_panels`` lose the append lock; a panel
# already stored (its seq taken) is left as it is with its evidence unwritten, so a write
# retried after a lost COMMIT, or sent again from an outbox, lands once
FOLLOWED = ("evidence", "verdicts", "panels", "suite_samples")
_V7_XIDS = [
    stmt
    for table in FOLLOWED
    for stmt in (
        f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS xid xid8 NOT NULL DEFAULT '1'",
        f"ALTER TABLE {table} ALTER COLUMN xid SET DEFAULT pg_current_xact_id()",
        f"CREATE INDEX IF NOT EXISTS {table}_xid ON {table} (xid, id)",
    )
] + [
    f"""CREATE OR REPLACE FUNCTION panelist_append(recs jsonb) RETURNS bigint
        LANGUAGE plpgsql AS $$
        DECLARE
            r jsonb;
            i bigint;
            first bigint;
        BEGIN
            FOR r IN SELECT value FROM jsonb_array_elements(recs) LOOP
                i := nextval('evidence_ids');
                IF first IS NULL THEN
                    first := i;
                END IF;
                IF r->>'kind' = 'verdict' THEN
                    INSERT INTO verdicts (id, call, record) VALUES (i, r->>'call', r);
                ELSE
                    INSERT INTO evidence (id, kind, panel, record)
                        VALUES (i, coalesce(r->>'kind', ''), r->>'panel', r);
                END IF;
            END LOOP;
            IF i IS NOT NULL THEN
                PERFORM pg_notify('{CHANNEL}', i::text);
            END IF;
            RETURN first;
        END $$""",
    # the panels newly stored; evidence of a panel already stored is not written again
    """CREATE OR REPLACE FUNCTION panelist_put_panels(pairs jsonb, abandoned jsonb)
        RETURNS void LANGUAGE plpgsql AS $$
        DECLARE
            fresh text[];
            keep jsonb;
        BEGIN
            WITH put AS (
                INSERT INTO panels (seq, panel, record)
                    SELECT (p->>0)::bigint, p->>1, p->2
                    FROM jsonb_array_elements(pairs) WITH ORDINALITY AS t(p, n) ORDER BY n
                    ON CONFLICT (seq) DO NOTHING RETURNING panel)
            SELECT coalesce(array_agg(panel), '{}') INTO fresh FROM put;
            SELECT coalesce(jsonb_agg(e ORDER BY n), '[]') INTO keep
                FROM jsonb_array_elements(abandoned) WITH ORDINALITY AS t(e, n)
                WHERE e->>'panel' IS NULL OR e->>'panel' = ANY(fresh);
            IF jsonb_array_length(keep) > 0 THEN
                PERFORM panelist_append(keep);
            END IF;
        END $$""",
]

# a key's requests a minute, exact over every 60 s: the admission times of the last window,
# oldest first, never more than the limit (``server.ratedb``); returns 0 when admitted, else the
# seconds until the oldest leaves the window. Replaces the two-minute estimate of rate_counts
_V8_RATE_LOG = [
    """CREATE TABLE IF NOT EXISTS rate_log (
        key text PRIMARY KEY,
        times float8[] NOT NULL DEFAULT '{}')""",
    # ``cost`` requests at once (a request that fans out counts its planned upstream calls):
    # all are admitted when they fit, else none, and the wait is until enough of the oldest
    # leave the window (``cost <= lim``, checked by the caller)
    """CREATE OR REPLACE FUNCTION panelist_rate_take(k text, lim bigint, cost bigint, win float8,
            at float8) RETURNS float8 LANGUAGE plpgsql AS $$
        DECLARE
            t float8 := coalesce(at, extract(epoch FROM clock_timestamp()));
            kept float8[];
            n int;
        BEGIN
            INSERT INTO rate_log (key) VALUES (k) ON CONFLICT (key) DO NOTHING;
            PERFORM 1 FROM rate_log WHERE key = k FOR UPDATE;
            SELECT array(SELECT x FROM unnest(times) x WHERE x > t - win ORDER BY x)
                INTO kept FROM rate_log WHERE key = k;
            n := coalesce(array_length(kept, 1), 0);
            IF n + cost > lim THEN
                RETURN kept[n + cost - lim] + win - t;
            END IF;
            UPDATE rate_log SET times = kept || array_fill(t, ARRAY[cost::int]) WHERE key = k;
            RETURN 0;
        END $$""",
]

# spend caps' counts, shared by every instance (``panel.spenddb``): a row per subject
# (``key-NAME``, ``collection-NAME``), period and its number (UTC day, or year × 12 + month − 1)
_V9_SPEND = [
    """CREATE TABLE IF NOT EXISTS spend (
        subject text NOT NULL,
        period text NOT NULL,
        n bigint NOT NULL,
        amount float8 NOT NULL DEFAULT 0,
        PRIMARY KEY (subject, period, n))""",
]

# (version, statements): append a new version, never edit an applied one
MIGRATIONS: list[tuple[int, list[str]]] = [
    (1, _V1),
    (2, _V2_LIMITS),
    (3, _V3_RACES),
    (4, _V4_PANELS),
    (5, _V5_IMPORT_ORIGIN),
    (6, _V6_LEASES),
    (7, _V7_XIDS),
    (8, _V8_RATE_LOG),
    (9, _V9_SPEND),
]
VERSION = MIGRATIONS[-1][0]


def current(conn) -> int:
    """The schema version of the database ``conn`` is on (0: none yet)."""
    row = conn.execute("SELECT to_regclass('panelist_schema') IS NOT NULL").fetchone()
    if not row[0]:
        return 0
    row = conn.execute("SELECT coalesce(max(version), 0) FROM panelist_schema").fetchone()
    return int(row[0])


_ENSURING = threading.Lock()


def ensure(db) -> None:
    """``migrate`` once per ``pg.Database``, and only when the schema is behind (a read needs
    no lock and no right to create): its first user brings the schema to ``VERSION`` (others
    wait meanwhile); later ones pass at no cost."""
    if db.schema_ready:
        return
    with _ENSURING:
        if not db.schema_ready:
            if db.run(current, transaction=False) != VERSION:
                migrate(db)
            db.schema_ready = True


def migrate(db) -> tuple[int, list[int]]:
    """Bring the database to ``VERSION``; ``(version now, versions applied by this call)``."""
    applied = []
    # a session cut mid-way (a restart, a failover, pg_terminate_backend) is the caller's 503,
    # like every other statement's, not a driver error
    with db.reaching(), db.session() as conn:
        conn.execute("SELECT pg_advisory_lock(%s)", (SCHEMA_LOCK,))
        try:
            conn.execute("""CREATE TABLE IF NOT EXISTS panelist_schema (
                version int PRIMARY KEY, applied timestamptz NOT NULL DEFAULT now())""")
            have = current(conn)
            for version, statements in MIGRATIONS:
                if version <= have:
                    continue
                with conn.transaction():
                    for sql in statements:
                        conn.execute(sql)
                    conn.execute("INSERT INTO panelist_schema (version) VALUES (%s)", (version,))
                applied.append(version)
            return current(conn), applied
        finally:
            if not conn.closed:  # a cut session's lock went with it
                conn.execute("SELECT pg_advisory_unlock(%s)", (SCHEMA_LOCK,))
