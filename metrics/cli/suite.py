"""``panelist suite``: score models on review tasks (run, report, list), and make tasks
(seed: bug/control pairs from a repository; mine: claim tasks from verdicts' claims).
"""

from __future__ import annotations

import sys

from panelist.metrics.cli.main import Out
from panelist.metrics.home import open_home
from panelist.suite import mine as suite_mine
from panelist.suite import seed as suite_seed


def register(nouns, common) -> None:
    su = nouns.add_parser(
        "suite", help="score models on review tasks (find the fault, judge the claim)"
    ).add_subparsers(dest="verb", metavar="VERB", required=True)
    a = su.add_parser(
        "run",
        parents=[common],
        help="ask the tasks of models not yet asked them (a rerun finishes what is left)",
    )
    a.add_argument(
        "--model",
        action="extend",
        nargs="+",
        metavar="ALIAS",
        help="the models to score (default: every model on the roster)",
    )
    a.add_argument(
        "--task",
        action="extend",
        nargs="+",
        metavar="ID",
        help="the tasks to run (default: every task but drafts)",
    )
    a.add_argument(
        "--epochs", type=int, default=1, metavar="K", help="ask each task K times (default 1)"
    )
    a.add_argument(
        "--demo",
        action="store_true",
        help="offline: simulated models answer (scripted, deterministic)",
    )
    _repo_argument(a)
    su.add_parser("report", parents=[common], help="each model's rates with 95%% intervals")
    _repo_argument(
        su.add_parser(
            "list", parents=[common], help="the tasks, and any task folder that does not load"
        )
    )
    suite_seed.add_arguments(su.add_parser("seed", parents=[common], help=suite_seed.HELP))
    suite_mine.add_arguments(su.add_parser("mine", parents=[common], help=suite_mine.HELP))


def _repo_argument(parser) -> None:
    parser.add_argument(
        "--repo",
        action="extend",
        nargs="+",
        metavar="PATH",
        help="a repository tasks may read from (a task's 'repo' must lie in "
        "its own folder or in one of these)",
    )
    parser.add_argument(
        "--tasks",
        action="extend",
        nargs="+",
        metavar="FOLDER",
        help="read the task folders in FOLDER (FOLDER/<id>/task.json, such as "
        "another tool's pack) instead of the starter pack and the data "
        "folder's",
    )


def cmd_suite(args, out: Out) -> int:
    return SUITE_VERBS[args.verb](args, out)


def _suite_tasks(home, args):
    """Every task the suite finds, and every task folder that does not load."""
    from panelist.suite import taskfiles, tasks

    repos = taskfiles.repositories(args.repo)
    roots = tasks.given_roots(args.tasks) or tasks.roots(home)
    found, problems = tasks.scan(*roots, repos=repos)
    return tasks, found, problems


def cmd_suite_list(args, out: Out) -> int:
    tasks, found, problems = _suite_tasks(open_home(args.data), args)
    notices = tasks.notices(found)
    rows = [
        {
            "id": t.id,
            "kind": t.kind,
            "pair": t.pair if t.kind != "claim" else "",
            "files": ", ".join(f.path for f in t.files) or ("(in its prompt)" * bool(t.code)),
            "draft": "draft" if t.draft else "",
            "title": t.title,
            "folder": str(t.folder),
        }
        for t in found
    ]
    if out.as_json:
        # a task that does not load: where it is, and what to fix (every field at fault)
        out.result(
            {
                "data": rows,
                "problems": [
                    {
                        "task": p.folder.name,
                        "path": str(p.folder),
                        "folder": str(p.folder),
                        "field": p.field,
                        "fields": list(p.fields),
                        "message": p.message,
                        "error": p.message,
                    }
                    for p in problems
                ],
                "warnings": notices,
            }
        )
    else:
        out.table(rows, ["id", "kind", "files", "draft", "title"])
        for p in problems:
            print(f"broken: {p.message}", file=sys.stderr)
        _warn(notices)
    return 0


def _warn(notices: list) -> None:
    """Each warning on stderr: a task's notice (``tasks.notices``) or a report's sentence."""
    for said in notices:
        print(f"warning: {said['message'] if isinstance(said, dict) else said}", file=sys.stderr)


def cmd_suite_run(args, out: Out) -> int:
    from panelist.metrics.upkeep.suitejob import SuiteJob
    from panelist.suite import report
    from panelist.suite.progress import Bar

    home = open_home(args.data)
    simulator = (
        args.runtime.need("simulator", "start the simulated demo models") if args.demo else None
    )
    job = SuiteJob(
        home,
        models=args.model,
        task_ids=args.task,
        epochs=args.epochs,
        demo=args.demo,
        repos=args.repo,
        task_roots=args.tasks,
        simulator=simulator,
    )
    for said in job.skipped:
        print(f"skipped: {said}", file=sys.stderr)
    notices = job.notices
    if not out.as_json:
        _warn(notices)
    bar = None

    def progress(done: dict, totals: dict) -> None:
        nonlocal bar
        if bar is None:
            bar = Bar(sys.stderr, totals)
        bar.update(done, force=sum(done.values()) == sum(totals.values()))

    try:
        summary = job.run(progress=None if out.as_json else progress)
    finally:
        if bar is not None:
            bar.close()
    doc = report.load(home)
    if out.as_json:
        out.result({"run": summary, "report": doc, "warnings": notices})
    else:
        said = (
            f"run {summary['run']}: {summary['asked']} asked, {summary['skipped']} already "
            f"done, {summary['failed']} failed on the way to the model (a rerun asks them "
            f"again); samples in {summary['samples']}"
        )
        print(said)
        _suite_table(out, doc)
        _warn(doc.get("warnings", []))
    if summary["interrupted"]:
        print(
            "panelist: interrupted; every finished sample is kept: run the same command "
            "again to finish",
            file=sys.stderr,
        )
        return 130
    return 0


def cmd_suite_report(args, out: Out) -> int:
    from panelist.suite import report

    doc = report.load(open_home(args.data))
    if out.as_json:
        out.result(doc)
    elif not doc["models"]:
        print("no suite results yet: run 'panelist suite run' (or 'panelist suite run --demo')")
    else:
        _suite_table(out, doc)
        print(
            "rates: mean over epochs (95% interval over tasks); headline first, which no "
            "constant answer can game: pairs (the bug found and its control judged clean) "
            "and balanced (claim accuracy on true and on false claims, averaged); then "
            "accuracy, where always NO FAULT scores 50%; failed: no answer in time, or empty "
            "(scored 0); unfinished: not scored yet (limits, errors), a rerun asks again"
        )
        _warn(doc.get("warnings", []))
    return 0


def _suite_table(out: Out, doc: dict) -> None:
    from panelist.suite import report

    out.table(report.table_rows(doc), ["model", "samples", *report.RATES, "failed", "unfinished"])


SUITE_VERBS = {
    "run": cmd_suite_run,
    "report": cmd_suite_report,
    "list": cmd_suite_list,
    "seed": suite_seed.run,
    "mine": suite_mine.run,
}


COMMANDS = {"suite": cmd_suite}
