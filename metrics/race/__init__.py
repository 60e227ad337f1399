"""The race: one job run on its grade's pinned model (the reference) for each of its inputs,
raced on every model of that grade, each run judged blind against its input's reference
(``benchmark``; what the judge reads: ``transcript``, ``blind``, ``names``, ``tooldiff``; who
judges and how: ``jury``, ``judge``), with cost (``costs``), time and quality side by side
(``report``) and a verdict that fails closed (``verdict``: a paired non-inferiority test, its
error spread over a job's looks by ``sequential``, which also advises how many more runs).
``chatjob`` is the plain chat job; ``jobs`` what makes races one job and carries a job raced
again; ``registry`` holds the races a server runs and every race on disk. ``judgecheck``
checks a judge against the verdicts people gave (its questions: ``checkprompt``; its figures:
``peoplematch``; its reports and a race's jury weights: ``checks``). The jury's own agreement
is ``agreement``; what the judge reads is made blind by ``blind``, ``normal`` and ``names``,
and a run that names itself is found by ``selfname``; ``flags`` marks text addressed to the
judge.

Imports ``metrics.seats``, ``metrics.roster``, ``metrics.store`` and reads ``metrics.ledger``.
The names a job's own code uses (``Benchmark``, ``tool``) are importable from here, as docs/race.md
shows: ``from panelist.metrics.race import Benchmark, tool``.
"""

from panelist.metrics.race.benchmark import Benchmark, tool

__all__ = ["Benchmark", "tool"]
