"""The race: one job run on its grade's pinned model (the reference) for each of its inputs,
raced on every model of that grade, each run judged blind against its input's reference
(``benchmark``; what the judge reads: ``transcript``, ``blind``, ``names``, ``tooldiff``; who
judges and how: ``jury``, ``judge``), with cost (``costs``), time and quality side by side
(``report``) and a verdict that fails closed (``verdict``: a paired non-inferiority test).
``chatjob`` is the plain chat job; ``registry`` holds the races a server runs and every race on
disk. ``judgecheck`` checks a judge against the verdicts people gave (its questions:
``checkprompt``; its figures: ``agreement``; its reports and a race's jury weights: ``checks``).

Imports ``metrics.seats``, ``metrics.roster``, ``metrics.store`` and reads ``metrics.ledger``.
The names a job's own code uses (``Benchmark``, ``tool``) are importable from here, as the README
shows: ``from panelist.metrics.race import Benchmark, tool``.
"""

from panelist.metrics.race.benchmark import Benchmark, tool

__all__ = ["Benchmark", "tool"]
