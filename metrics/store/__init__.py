"""Storage with no domain words: JSON at our edges (``jsonwire``), append-only JSONL logs and
their readers (``jsonl``), config files written atomically under a lock (``configfile``).

Imports nothing of ours but ``metrics.errors``.
"""
