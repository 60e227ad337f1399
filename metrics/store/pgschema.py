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
  and only through ``panelist_append``, which holds ``APPEND_LOCK`` (a transaction advisory
  lock) until its transaction commits: ids become visible in id order, so a reader that
  follows ``id > last`` never passes over a row committed late. It notifies ``CHANNEL`` with
  the last id in the same transaction (delivered at commit).
* Panel seqs come from ``panel_ids`` (from 0, as a data folder counts them): no two instances
  ever get the same one.
* Version 2 holds the limits every instance shares (``rate_counts``, ``admission_*`` and their
  functions, read by ``server.ratedb`` and ``upstream.admitdb``): rows overwritten in place,
  each judged and changed in one statement under its row lock.
* Suite samples become visible in id order: each insert holds ``SAMPLES_LOCK`` (a transaction
  advisory lock) until it commits. Version 3 holds the races' reports: one row of
  ``race_reports`` per race, written when the race is named and again, whole, when it ends.
* Version 4: ``panelist_put_panels`` writes finished panels (and their ``"abandoned"``
  evidence) in one statement under ``APPEND_LOCK``, so panel ids too become visible in id order.
* Version 6: a key's requests a minute are counted exactly over every 60 s (``rate_log``,
  ``panelist_rate_take``); ``rate_counts`` and ``panelist_rate_admit`` are no longer used.
* Config is kept as versioned rows (``config``: name, version, body); the highest version of a
  name is current, an edit inserts the next version and notifies ``CONFIG_CHANNEL``.
"""

from __future__ import annotations

SCHEMA_LOCK = 0x70616E01     # advisory lock keys: "pan" + a number, ours alone
APPEND_LOCK = 0x70616E02
SAMPLES_LOCK = 0x70616E03    # held by each suite sample's insert until it commits
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

# a key's requests a minute, exact over every 60 s: the admission times of the last window,
# oldest first, never more than the limit (``server.ratedb``); returns 0 when admitted, else the
# seconds until the oldest leaves the window. Replaces the two-minute estimate of rate_counts
_V6_RATE_LOG = [
    """CREATE TABLE IF NOT EXISTS rate_log (
        key text PRIMARY KEY,
        times float8[] NOT NULL DEFAULT '{}')""",
    """CREATE OR REPLACE FUNCTION panelist_rate_take(k text, lim bigint, win float8, at float8)
        RETURNS float8 LANGUAGE plpgsql AS $$
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
            IF n >= lim THEN
                RETURN kept[n - lim + 1] + win - t;
            END IF;
            UPDATE rate_log SET times = kept || t WHERE key = k;
            RETURN 0;
        END $$""",
]

# (version, statements): append a new version, never edit an applied one
MIGRATIONS: list[tuple[int, list[str]]] = [(1, _V1), (2, _V2_LIMITS), (3, _V3_RACES), (4, _V4_PANELS),
                                           (5, _V5_IMPORT_ORIGIN), (6, _V6_RATE_LOG)]
VERSION = MIGRATIONS[-1][0]


def current(conn) -> int:
    """The schema version of the database ``conn`` is on (0: none yet)."""
    row = conn.execute("SELECT to_regclass('panelist_schema') IS NOT NULL").fetchone()
    if not row[0]:
        return 0
    row = conn.execute("SELECT coalesce(max(version), 0) FROM panelist_schema").fetchone()
    return int(row[0])


def migrate(db) -> tuple[int, list[int]]:
    """Bring the database to ``VERSION``; ``(version now, versions applied by this call)``."""
    applied = []
    with db.session() as conn:
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
                    conn.execute("INSERT INTO panelist_schema (version) VALUES (%s)",
                                 (version,))
                applied.append(version)
            return current(conn), applied
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (SCHEMA_LOCK,))
