"""The evidence: calls, seat outcomes and verdicts appended to JSONL and read back through an
in-memory index. ``ledger`` (the writes and the facade callers use) stands on ``ids`` (panel ids,
panels.idx), ``index`` (the pure fold of evidence records, with its parts ``histogram`` (answer
times), ``usage`` (the recent windows), ``outcomes`` (each model's latest calls) and ``pairs``
(who was judged better on one panel)),
``snapshot`` (index.json) and ``queries`` (the reads), over ``logs`` (the JSONL files) or
``pglogs`` (the same in PostgreSQL; ``pgcopy`` moves a folder's logs in and out); beside them
the verdict rules (``verdict``), the review suite's record counted beside verdicts
(``suiteevidence``), the races' accuracy marks as comparisons (``raceevidence``), the ratings
fitted from all three (``ratings``, on ``bradleyterry``: the fit and its clustered errors) and
the panels' search index (``search``: SQLite FTS5, following calls.jsonl and evidence.jsonl by byte
offset; ``searchfold``: log lines into its rows; ``searchplan``: its queries and their
budget; ``pgsearch``: the same index following the
database's tables by id).

Imports ``metrics.store`` and ``metrics.errors``.
"""
