"""Upstream calls: one OpenAI-compatible call over pooled keep-alive HTTP (``client``), the
proxy rules (``proxy``), and the pacing of every process's calls to an endpoint (``admission``).

Imports only ``metrics.store`` and ``metrics.errors`` (admission also reads the roster's limits).
"""
