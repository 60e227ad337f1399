"""How many upstream calls a race will make, said before it starts (``RaceCalls``).

``planned``: the calls the race makes when every call answers at its first try and no run is
left unjudged: one reference run per input, each candidate's runs (candidates × inputs × runs,
one call each, without tools), and every judged run's judgements (each judge, in each order).
``at_most``: the most it can make whatever happens: each run's call tried again once (the seats
core's ``retries=1``) and corrected once to a stated output cap, through every round of tool
calls a run may make (``MAX_ROUNDS``, when it has tools), and each judgement asked ``judge.ASKS``
times in all plus once more for each tuning parameter an endpoint may refuse.

Invariants: ``planned <= at_most``; both depend only on the checked spec and its plan, so the
count said in the reply that starts a race is the one its cap and its key's limit were judged by.
A run whose candidate the jury may not judge (``Plan.judged``) plans no judgement; a run that
fails, or is voided because it names itself, makes fewer calls than planned, never more.
"""

from __future__ import annotations

from dataclasses import dataclass

from panelist.metrics.race import judge, jury

RUN_ATTEMPTS = 3  # a run's call: the first try, one retry, one correction to an output cap


@dataclass(frozen=True)
class RaceCalls:
    planned: int
    at_most: int

    def public(self) -> dict:
        return {"planned": self.planned, "at_most": self.at_most}


def of_race(spec, plan, *, tools: bool = False, max_rounds: int = 8) -> RaceCalls:
    """The calls of a race of ``spec`` (a checked ``ChatSpec``) as ``plan`` seats it."""
    inputs, runs = len(spec.texts), spec.runs
    candidate_runs = len(plan.candidates) * inputs * runs
    judged_runs = plan.judged * inputs * runs
    judgements = judged_runs * len(plan.judges) * (2 if spec.orders == "both" else 1)
    rounds = max_rounds if tools else 1
    planned = inputs + candidate_runs + judgements
    at_most = (inputs + candidate_runs) * rounds * RUN_ATTEMPTS + judgements * (
        judge.ASKS + 2 * len(jury.TUNED)
    )
    return RaceCalls(planned, at_most)
