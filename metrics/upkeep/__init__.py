"""Keeping the roster honest while nobody watches: health probes (``health``), retiring and
restoring models (``retirement``), the job schedule (``schedule``) and onboarding new models
(``onboarding_queue``, worked by ``onboarding_worker``, whose every call
``onboarding_calls`` records before it is sent and after it ends).

Imports ``metrics.roster``, ``metrics.seats``, ``metrics.ledger`` and ``suite``.
"""
