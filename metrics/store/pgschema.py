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
* Suite samples become visible in id order: each insert holds ``SAMPLES_LOCK`` (a transaction
  advisory lock) until it commits. A race's report is one row of ``race_reports``, written
  when the race is named and again, whole, when it ends.
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

_V2 = [
    # one row per race, made when the race is named (report NULL until it ends): every host
    # lists and reads the races any host ran
    """CREATE TABLE IF NOT EXISTS race_reports (
        race text PRIMARY KEY,
        started timestamptz NOT NULL DEFAULT now(),
        ended timestamptz,
        report jsonb)""",
    """CREATE INDEX IF NOT EXISTS race_reports_started ON race_reports (started, race)""",
]

# (version, statements): append a new version, never edit an applied one
MIGRATIONS: list[tuple[int, list[str]]] = [(1, _V1), (2, _V2)]
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
