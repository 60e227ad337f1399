"""One panel: the request checked whole (``request``), seated (``seating``: members plus
explorers by staleness), every seat asked through the seats core (``panel``), and the reply
shaped: all answers, one picked (``pick``), or merged (``merge``, with the decider), or the
error when none can be (``failures``). Around it: prompts and their size (``prompt``), JSON
output checks (``jsonshape``), what was asked before (``history``), collection suggestions
(``suggest``), explorers by what they would teach (``explore``), the owed queue by value
(``owedorder``), spend caps (``budgets``) and usage (``usage``).

Imports ``metrics.seats``, ``metrics.ledger``, ``metrics.roster`` and ``metrics.upstream``.
"""
