"""Keeping the roster honest while nobody watches: health probes (``health``), retiring and
restoring models (``retirement``), marking and alerting models whose calls keep failing
(``failing``), the job schedule (``schedule``) and, with a database, which instance runs it
(``leader``), onboarding new models (``onboarding_queue``,
worked by ``onboarding_worker``, whose every call ``onboarding_calls`` records before it is
sent and after it ends) and the demo's one simulator per data folder (``demohost``).

Imports ``metrics.roster``, ``metrics.seats``, ``metrics.ledger`` and ``suite``.
"""
