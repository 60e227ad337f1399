"""Panelist: a self-hosted panel gateway for LLMs.

Installed, the checkout's folders import as ``panelist.metrics``, ``panelist.scripts`` and so on;
from a checkout, ``_bootstrap`` gives this folder the same name, so every module imports its
siblings one way: ``from panelist.metrics import ledger``.
"""

__version__ = "0.1.0"
