"""The dashboard's console: what the CLI's ``grade``, ``race``, ``suite run`` and ``catalog
import`` verbs do, as ``/api/`` routes over the same domain calls (``Grades``, ``Races.start``,
``SuiteJob``, ``Catalog.import_known``), so a page and a command refuse and change alike.

Invariants (beside ``metrics.server.api``'s, which hold here too):

* Every write declares its body; a grade write carries the ``version`` ``GET /api/grades``
  gave and is refused with 409 ``stale`` when the grades changed since.
* A race or a suite run started here runs in the server's own background thread (``Races``,
  ``SuiteRuns``): closing the page stops nothing; a job already running is refused (409).
* A catalog upload is read as the file ``panelist catalog import`` reads, and is answered
  with what it added, changed and kept, per model.
"""

from __future__ import annotations

from typing import Callable

from panelist.metrics.errors import BadRequest
from panelist.metrics.plaintext import first_control
from panelist.metrics.race import chatjob, verdict
from panelist.metrics.roster.grades import MAX_GRADE, MAX_GRADES, Grades
from panelist.metrics.server import fanout
from panelist.metrics.server.api import NAME, VERSION, Accepted, ApiRequest, edits_config
from panelist.metrics.server.bodies import Body, Flag, Number, OneOf, Strings, Text, Whole, takes
from panelist.metrics.upkeep.suitejob import MAX_EPOCHS

GRADES = Text(
    VERSION,
    nonempty=True,
    required=True,
    hint="the version GET /api/grades gave, so a change made meanwhile is not undone",
)
UPLOAD = 16 * 1024 * 1024  # bytes of a catalog upload in JSON: a models.dev file, with room


def _grades(req: ApiRequest) -> dict:
    return Grades(req.panels.home).listing(req.panels.roster.view())


def _one_of(body: dict, what: str) -> str | None:
    """The alias a pin or ceiling names, or None for ``clear``; both or neither is refused."""
    if body.get("clear", False) == bool(body.get("alias")):
        raise BadRequest(
            f"send 'alias' (the model to {what}) or \"clear\": true, not both", param="alias"
        )
    return None if body.get("clear") else body["alias"]


# -- grades ---------------------------------------------------------------------------------------
@edits_config
@takes(
    Body(
        version=GRADES,
        order=Strings(
            MAX_GRADES,
            MAX_GRADE,
            required=True,
            comma=True,
            hint="every grade once, weakest first, e.g. light,general,strong",
        ),
    )
)
def put_order(req: ApiRequest) -> dict:
    """Set the grades, weakest first (``panelist grade order``)."""
    order = req.body["order"]
    order = order.split(",") if isinstance(order, str) else order
    dropped = Grades(req.panels.home).set_order(
        [g for g in order if g.strip()], by=req.who, expect=req.body["version"]
    )
    return dict(_grades(req), unpinned=dropped)


@edits_config
@takes(
    Body(
        version=GRADES,
        grade=Text(MAX_GRADE, nonempty=True, required=True, hint="a grade of the order"),
        alias=Text(NAME, nonempty=True, hint="a model of that grade; or send clear"),
        clear=Flag(hint="unpin the grade"),
    )
)
def put_pin(req: ApiRequest) -> dict:
    """Pin the model the deployment uses for a grade, or unpin it (``panelist grade pin``)."""
    alias = _one_of(req.body, "pin")
    was = Grades(req.panels.home).pin(
        req.body["grade"], alias, by=req.who, expect=req.body["version"]
    )
    return dict(_grades(req), was=was)


@edits_config
@takes(
    Body(
        version=GRADES,
        alias=Text(NAME, nonempty=True, hint="the strongest model, a race's judge"),
        clear=Flag(hint="back to the strongest grade's pin"),
    )
)
def put_ceiling(req: ApiRequest) -> dict:
    """Name the ceiling, or go back to the strongest pin (``panelist grade ceiling``)."""
    alias = _one_of(req.body, "make the ceiling")
    Grades(req.panels.home).set_ceiling(alias, by=req.who, expect=req.body["version"])
    return _grades(req)


# -- races ----------------------------------------------------------------------------------------
ALIASES = "model aliases, or one comma-separated string"


@takes(
    Body(
        grade=Text(MAX_GRADE, nonempty=True, required=True, hint="the grade the job needs"),
        prompt=Text(
            chatjob.MAX_PROMPT, nonempty=True, required=True, hint="what the job sends the model"
        ),
        system=Text(chatjob.MAX_SYSTEM, hint="the job's system text"),
        rubric=Text(chatjob.MAX_RUBRIC, hint="what the judge checks, beyond the task"),
        runs=Whole(1, chatjob.MAX_RUNS, hint="runs per candidate"),
        margin=Number(
            0,
            verdict.MAX_MARGIN,
            above=True,
            hint="points of 10 worse than the pinned model still good enough",
        ),
        candidates=Strings(
            chatjob.MAX_CANDIDATES,
            NAME,
            comma=True,
            hint=f"{ALIASES}; leave it out for every model of the grade",
        ),
        judges=Strings(
            chatjob.MAX_JUDGES,
            NAME,
            comma=True,
            hint=f"{ALIASES} of distinct families; leave it out for the ceiling",
        ),
        orders=OneOf("both", "random", hint="judge each run in both orders, or one drawn"),
        jury_weights=OneOf(
            "agreement", hint="weight each judge by its κ against people (its latest judge check)"
        ),
    )
)
def start_race(req: ApiRequest) -> dict:
    """Start a race in the server's background, as ``panelist race`` runs one: 202, then
    ``GET /api/races/{race}`` follows its progress."""
    body = dict(req.body)
    for key in ("candidates", "judges"):
        if isinstance(body.get(key), str):
            body[key] = [a.strip() for a in body[key].split(",") if a.strip()]
        if key in body and not body[key]:
            del body[key]  # an empty field means the default, as the CLI's left-out option
    return Accepted(
        req.parts.races.start(body, admit=lambda calls: fanout.within_cap(req.parts.limits, calls))
    )


@takes(
    Body(
        runs=Whole(
            1,
            chatjob.MAX_RUNS,
            hint="runs per candidate this look adds; leave it out for as many as the race ran",
        )
    )
)
def race_again(req: ApiRequest) -> dict:
    """Race a race's job again as its next look (``panelist race --again``): 202, then
    ``GET /api/races/{race}`` follows the new race."""
    return Accepted(
        req.parts.races.again(
            req.params["race"],
            dict(req.body),
            admit=lambda calls: fanout.within_cap(req.parts.limits, calls),
        )
    )


# -- the suite ------------------------------------------------------------------------------------
@takes(
    Body(
        models=Strings(
            1000,
            NAME,
            comma=True,
            required=True,
            hint="the models to score (the page names them, so a body with "
            "none is never a run of every model)",
        ),
        tasks=Strings(
            1000,
            NAME,
            comma=True,
            hint="the task ids to ask; leave it out for every task but drafts",
        ),
        epochs=Whole(1, MAX_EPOCHS, hint="how many times each task is asked"),
        demo=Flag(hint="the demo's simulated models answer, offline"),
    )
)
def start_suite(req: ApiRequest) -> dict:
    """Run the suite in the server's background, as ``panelist suite run`` does: 202, then
    ``GET /api/suite/run`` follows its progress."""
    body = req.body

    def listed(key):
        value = body.get(key)
        value = value.split(",") if isinstance(value, str) else value
        return [v.strip() for v in value or () if v.strip()] or None

    models = listed("models")
    if models is None:
        raise BadRequest(
            "'models' must name at least one model to score (GET /api/models lists them)",
            param="models",
        )
    return Accepted(
        req.parts.suite_runs.start(
            models=models,
            task_ids=listed("tasks"),
            epochs=body.get("epochs", 1),
            demo=body.get("demo", False),
            admit=lambda calls: fanout.within_cap(req.parts.limits, calls, "suite run"),
        )
    )


def suite_run(req: ApiRequest) -> dict:
    """The running or last suite run started here (``status`` none when there was none)."""
    return req.parts.suite_runs.get()


def suite_tasks(req: ApiRequest) -> dict:
    """The tasks a run can ask (``panelist suite list``), and the folders that do not load."""
    from panelist.suite import tasks

    found, problems = tasks.scan(*tasks.roots(req.panels.home))
    return {
        "data": [{"id": t.id, "kind": t.kind, "title": t.title, "draft": t.draft} for t in found],
        "problems": [{"task": p.folder.name, "field": p.field, "error": str(p)} for p in problems],
    }


# -- the catalog ----------------------------------------------------------------------------------
@takes(
    Body(
        name=Text(
            NAME, nonempty=True, required=True, hint="the file's name, as the import logs it"
        ),
        text=Text(
            nonempty=True,
            required=True,
            hint="the file's contents: a models.dev-layout JSON document",
        ),
    )
)
def catalog_import(req: ApiRequest) -> dict:
    """Fill roster models' missing facts from an uploaded file, as ``panelist catalog import``
    does with a path."""
    from panelist.metrics.roster.catalog import Catalog, parse_import

    name = req.body["name"].replace("/", "_").replace("\\", "_")
    if first_control(name):  # it lands in the change log and the catalog as the facts' source
        raise BadRequest("'name' must be a file name without control characters", param="name")
    try:
        known = parse_import(req.body["text"], name)
    except BadRequest as exc:
        raise BadRequest(str(exc), param="text") from None
    return Catalog(req.panels.home).import_known(known, name)


catalog_import.max_body = UPLOAD

ROUTES: list[tuple[str, dict[str, Callable[[ApiRequest], object]]]] = [
    ("/api/grades/order", {"PUT": put_order}),
    ("/api/grades/pin", {"PUT": put_pin}),
    ("/api/grades/ceiling", {"PUT": put_ceiling}),
    ("/api/races", {"POST": start_race}),
    ("/api/races/{race}/again", {"POST": race_again}),
    ("/api/suite/run", {"GET": suite_run, "POST": start_suite}),
    ("/api/suite/tasks", {"GET": suite_tasks}),
    ("/api/catalog/import", {"POST": catalog_import}),
]
