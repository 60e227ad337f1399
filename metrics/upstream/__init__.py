"""Upstream calls: the OpenAI-compatible protocol of one call (``client``) over pooled keep-alive
connections, TLS and proxy tunnels (``transport``), whose responses the small HTTP/1.1 reader
reads (``http11``); the proxy rules (``proxy``); the pacing of every process's calls to an
endpoint (``admission``); and the simulated provider tests and the demo use (``sim``).

Imports only ``metrics.store`` and ``metrics.errors`` (admission also reads the roster's limits).
"""
