"""One panel: the request checked whole (``request``), seated (``seating``: members plus
explorers by staleness), every seat asked through the seats core (``panel``), and the reply
shaped: all answers, one picked (``pick``), or merged (``merge``, with the decider). Around it:
prompts and their size (``prompt``), JSON output checks (``jsonshape``), what was asked before
(``history``) and collection suggestions (``suggest``).

Imports ``metrics.seats``, ``metrics.ledger``, ``metrics.roster`` and ``metrics.upstream``.
"""
