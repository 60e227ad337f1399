"""Storage with no domain words: JSON at our edges (``jsonwire``), append-only JSONL logs and
their readers, tail and backward (``jsonl``), the one atomic file write (``atomic``) and config
files written with it under a lock (``configfile``), numbers the environment sets for settings
(``envsetting``); PostgreSQL connections (``pg``: a pool,
retries, LISTEN), the versioned schema (``pgschema``) and leases, rows held until an expiry on the
database's clock (``pglease``), loaded only when a database URL is set.

Imports nothing of ours but ``metrics.errors``.
"""
