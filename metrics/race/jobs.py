"""A job's looks: what makes two races one job, and how a race run again carries the evidence of
the job's earlier races into its own report.

A **job** is what a race asks and how it is judged: the grade and its pinned model (the
reference), the inputs, system text, rubric, candidates, judges, judging orders, margin, and the
names of the job's tools. How many runs a race adds is not part of it. Each race of a job is a
**look** at its evidence: racing it again (``panelist race --again RACE``, ``POST
/bench/race/{race}/again``) runs the same job once more and judges the verdict on the runs of
every look so far, at that look's share of the error (``metrics.race.sequential``).

Invariants:

* The job of a race is in its report (``job``, with ``looks``: one entry per look, what it
  added and the verdict it gave then); a report written without one is no job's look and is
  never raced again (a new race starts a new job).
* A job's record, ``runs/race-jobs/<digest>.json``, names its latest race and look, written
  (whole, ``store.atomic``) when a look is named. Only the latest look is raced again, so two
  looks never branch from one, and no job has more than ``sequential.LOOKS`` looks.
* A look's rows are numbered after the earlier looks' runs (with 3 runs a look, look 2 holds
  runs 4 to 6), so with one input a candidate's run ``n`` still pairs with the pinned model's
  run ``n`` of the same look, both judged against that look's reference run. Every row carries
  ``look`` and ``race`` (the race whose folder holds its calls and judge prompts).
* A changed job is a new job: racing again with any field of the job other than ``runs``
  changed, or after the grade's pin, its candidates or its judges changed, is refused (409
  ``job_changed``) and names what changed.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from panelist.metrics.errors import BadRequest, Conflict, NotFound
from panelist.metrics.race import sequential
from panelist.metrics.store import atomic, jsonwire

# the fields of a race's body that make its job, as the body spells them
BODY_FIELDS = (
    "grade",
    "inputs",
    "system",
    "rubric",
    "candidates",
    "judges",
    "orders",
    "margin",
    "allow_extra_tools",
    "jury_weights",
)
LONG = ("inputs", "system", "rubric")  # texts a refusal names rather than quotes


def key_of(spec, plan, tools: list[str] | tuple = ()) -> dict:
    """The job a ``ChatSpec`` raced by ``plan`` (a ``chatjob.Plan``) asks."""
    return key(
        spec.grade,
        plan.pinned,
        list(spec.texts),
        spec.system,
        spec.rubric,
        plan.candidates,
        plan.judges,
        spec.orders,
        spec.margin,
        tools,
        allow_extra_tools=spec.allow_extra_tools,
        jury_weights=spec.jury_weights,
    )


def key(
    grade: str,
    pinned: str,
    inputs: list[str],
    system: str | None,
    rubric: str | None,
    candidates,
    judges,
    orders: str,
    margin: float,
    tools=(),
    code: bool = False,
    *,
    allow_extra_tools=None,
    jury_weights: str | None = None,
) -> dict:
    """A job's key; ``code``: the job is code (``Benchmark`` called by a program), which only
    that program can race again. How it is judged is part of it: the tools it may call beyond
    the reference's (``allow_extra_tools``) and its jury's weights."""
    return {
        "grade": grade,
        "pinned": pinned,
        "inputs": list(inputs),
        "system": system,
        "rubric": rubric,
        "candidates": list(candidates),
        "judges": list(judges),
        "orders": orders,
        "margin": margin,
        "tools": sorted(tools),
        "code": code,
        "allow_extra_tools": sorted(allow_extra_tools)
        if isinstance(allow_extra_tools, (tuple, list, set))
        else allow_extra_tools,
        "jury_weights": jury_weights,
    }


def digest(job: dict) -> str:
    return hashlib.sha256(jsonwire.dumps(job, sort_keys=True).encode()).hexdigest()[:24]


@dataclass
class Earlier:
    """What a race of a job carries from the job's earlier looks (nothing, at look 1)."""

    job: dict | None
    look: int = 1
    rows: list[dict] = field(default_factory=list)
    looks: list[dict] = field(default_factory=list)
    runs: int = 0  # runs per input the earlier looks hold
    warnings: list[str] = field(default_factory=list)

    @property
    def digest(self) -> str | None:
        return None if self.job is None else digest(self.job)

    def number(self, rows: list[dict], race: str) -> list[dict]:
        """This look's ``rows``, numbered after the earlier looks' runs and marked with the
        look and race."""
        for row in rows:
            row["run"] += self.runs
            row["look"], row["race"] = self.look, race
        return rows

    def entry(self, race: str, runs: int, started: str, verdict: dict) -> dict:
        """This look's line in the report's ``looks``."""
        test = verdict.get("test") or {}
        return {
            "look": self.look,
            "race": race,
            "runs": runs,
            "started": started,
            "level": test.get("level"),
            "state": verdict.get("state"),
            "model": verdict.get("model"),
        }


def after(report: dict, *, by_code: bool = False) -> Earlier:
    """The evidence a race again of ``report``'s race carries, or Conflict when that race is
    no job's look (or a job of code, unless ``by_code``) or its job's looks are spent."""
    race = report.get("race")
    job = report.get("job")
    if not isinstance(job, dict) or (job.get("code") and not by_code):
        raise Conflict(
            f"race {race} kept no job it can race again (it was raced before races "
            "kept one, or its job is code: a program that raced it races it again "
            "with Benchmark.set_looks(jobs.after(report, by_code=True))); start a "
            "new race of the job",
            code="not_a_job",
        )
    looks = list(report.get("looks") or ())
    look = len(looks) + 1
    if look > sequential.LOOKS:
        raise Conflict(
            f"race {race} is look {len(looks)} of its job, the last of the "
            f"{sequential.LOOKS} its error is spent over: racing it again could "
            "name no model; change the job (its margin, rubric or inputs) and "
            "start a new race",
            code="looks_spent",
        )
    rows = [dict(r) for r in report.get("rows") or ()]
    runs = max((r.get("run") or 0 for r in rows), default=0)
    return Earlier(job, look, rows, looks, runs)


def body_of(job: dict, given) -> dict:
    """The race body that races ``job`` again; ``given`` may set ``runs`` and may repeat the
    job's own fields, but a field that differs is refused (a changed job is a new job)."""
    if given is None:
        given = {}
    if not isinstance(given, dict):
        raise BadRequest('the body must be a JSON object: {} or {"runs": N}')
    unknown = sorted(set(given) - {"runs", "prompt", *BODY_FIELDS})
    if unknown:
        raise BadRequest(
            f"unknown field(s) {', '.join(unknown)}; racing again takes 'runs' "
            "(the job's own fields may be repeated, unchanged)",
            param=unknown[0],
        )
    body = {
        "grade": job["grade"],
        "system": job["system"],
        "rubric": job["rubric"],
        "candidates": list(job["candidates"]),
        "judges": list(job["judges"]),
        "orders": job["orders"],
        "margin": job["margin"],
    }
    for judged in ("allow_extra_tools", "jury_weights"):  # absent from jobs kept before them
        if job.get(judged) is not None:
            body[judged] = job[judged]
    one = job["inputs"][0] if len(job["inputs"]) == 1 else None
    mine = dict(body, prompt=one, inputs=list(job["inputs"]))
    if one is not None:
        body["prompt"] = one
    else:
        body["inputs"] = list(job["inputs"])
    changed = [
        k
        for k, v in given.items()
        if k != "runs"
        and v is not None
        and (list(v) if isinstance(v, (list, tuple)) else v) != mine[k]
    ]
    if changed:
        raise Conflict(
            f"{', '.join(changed)} differ(s) from the job raced: a changed job is a "
            "new job; start it with a new race (POST /bench/race, panelist race)",
            code="job_changed",
            param=changed[0],
        )
    if "runs" in given:
        body["runs"] = given["runs"]
    return body


def check(earlier: Earlier, job: dict) -> None:
    """Conflict when the job a race again would run is not the earlier looks' job (the
    grade's pin, its candidates or judges changed since)."""
    if earlier.job is None or earlier.job == job:
        return
    changed = [k for k in job if job.get(k) != earlier.job.get(k)]
    said = [
        f"{k} was {earlier.job.get(k)!r}, is now {job.get(k)!r}"
        if k not in LONG
        else f"{k} differs"
        for k in changed
    ]
    raise Conflict(
        f"the job changed since its last look ({'; '.join(said)}): a changed job "
        "is a new job; start it with a new race",
        code="job_changed",
        param=changed[0] if changed else None,
    )


# -- the job's record ------------------------------------------------------------------------------
def record(folder, job_digest: str) -> dict | None:
    """The job's record (``{"race", "look"}`` of its latest look), or None."""
    try:
        found = jsonwire.loads((folder / f"{job_digest}.json").read_bytes())
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def note(folder, earlier: Earlier, race: str) -> None:
    """Name ``race`` the job's latest look."""
    if earlier.job is None:
        return
    folder.mkdir(parents=True, exist_ok=True)
    atomic.write(
        folder / f"{earlier.digest}.json",
        jsonwire.dumps({"race": race, "look": earlier.look}) + "\n",
        fsync=False,
    )


def latest_check(folder, report: dict) -> None:
    """Conflict when ``report``'s race is not the latest look of its job."""
    job = report.get("job")
    if not isinstance(job, dict):
        return
    found = record(folder, digest(job))
    if found is not None and found.get("race") != report.get("race"):
        raise Conflict(
            f"race {report.get('race')} is not the latest look of its job: race "
            f"{found.get('race')} (look {found.get('look')}) carries its evidence "
            f"on; race that one again",
            code="job_moved_on",
        )


def fresh(folder, job: dict) -> list[str]:
    """What a new race (look 1) of a job raced before should warn of."""
    found = record(folder, digest(job))
    if found is None:
        return []
    said = (
        f"this job was raced before (race {found.get('race')}, look {found.get('look')}): "
        "a new race starts its error budget over, so racing anew until a model is named "
        "breaks the 5% promise; race that one again instead (panelist race --again "
        f"{found.get('race')})"
    )
    return [said]


def missing(race: str) -> NotFound:
    return NotFound(f"unknown race '{race}'; GET /bench/races lists the races")


__all__ = [
    "Earlier",
    "after",
    "body_of",
    "check",
    "digest",
    "fresh",
    "key_of",
    "latest_check",
    "note",
    "record",
]
