"""The evidence: calls, seat outcomes and verdicts appended to JSONL (``ledger``), the verdict
rules (``verdict``) and the review suite's record counted beside verdicts (``suiteevidence``).

Imports ``metrics.store`` and ``metrics.errors``.
"""
