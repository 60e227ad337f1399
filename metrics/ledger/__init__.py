"""The evidence: calls, seat outcomes and verdicts appended to JSONL and read back through an
in-memory index. ``ledger`` (the writes and the facade callers use) stands on ``ids`` (panel ids,
panels.idx), ``index`` (the pure fold of evidence records, with its parts ``histogram`` (answer
times), ``usage`` (the recent windows) and ``outcomes`` (each model's latest calls)),
``snapshot`` (index.json) and ``queries`` (the reads); beside them the verdict rules (``verdict``) and the review suite's record
counted beside verdicts (``suiteevidence``).

Imports ``metrics.store`` and ``metrics.errors``.
"""
