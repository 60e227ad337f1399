"""``panelist race``: race a plain chat job across its grade (the pinned model's reference
run of each input, every candidate, a blind judge), with progress on a terminal, then the report.
"""

from __future__ import annotations

import os
import sys
import threading

from panelist.metrics.cli.main import NO_ANSWER, Out
from panelist.metrics.errors import BadRequest
from panelist.metrics.home import open_home
from panelist.metrics.plaintext import visible
from panelist.metrics.race import jobs
from panelist.metrics.store import jsonwire, readfile


def register(nouns, common) -> None:
    r = nouns.add_parser(
        "race",
        parents=[common],
        help="race a chat job across its grade: the pinned model's reference "
        "run, every candidate, a blind judge, the report",
    )
    r.add_argument("--grade", metavar="G", help="the grade the job needs")
    r.add_argument(
        "--again",
        metavar="RACE",
        help="race that race's job again as its next look: the same job, --runs "
        "more runs (default: as many as that race ran), the verdict on every look's "
        "runs at this look's share of the error",
    )
    r.add_argument("--prompt", default="", metavar="TEXT", help="what the job sends the model")
    r.add_argument("-f", "--file", metavar="FILE", help="append this file's text to the prompt")
    r.add_argument(
        "--inputs",
        metavar="FILE.jsonl",
        help="race several inputs instead of one prompt: one a line, each a JSON "
        'string or {"prompt": "..."}',
    )
    r.add_argument("--system", metavar="TEXT", help="the job's system text")
    r.add_argument("--rubric", metavar="TEXT", help="what the judge checks, beyond the task")
    r.add_argument(
        "--runs",
        type=int,
        metavar="N",
        help="runs per candidate and input (default 3, the fewest that measure a "
        "spread; at most 100; the verdict says how many more would settle it)",
    )
    r.add_argument(
        "--margin",
        type=float,
        metavar="POINTS",
        help="how many points of 10 worse than the pinned model is still good enough (default 1)",
    )
    r.add_argument(
        "--candidates",
        metavar="a,b",
        help="the models to race (default: every callable model of the grade)",
    )
    r.add_argument(
        "--judges",
        metavar="a,b,c",
        help="judge with these models, of distinct families and none of a "
        "candidate's, their totals pooled (default: the ceiling model)",
    )
    r.add_argument(
        "--orders",
        choices=("both", "random"),
        default="both",
        help="judge each run with the reference shown first and again with it "
        "second (both, default), or once in an order drawn per run (random)",
    )
    r.add_argument(
        "--jury-weights",
        choices=("agreement",),
        help="agreement: each judge counts by its κ against people in its latest "
        "`panelist judge check` (a judge never checked refuses the race)",
    )
    r.add_argument(
        "--tools",
        metavar="tools.py",
        help="a Python file whose TOOLS list the job offers the model",
    )
    r.add_argument(
        "--allow-extra-tools",
        nargs="?",
        const=True,
        default=None,
        metavar="a,b",
        help="calls to these tools (alone: to any tool) that the reference did not "
        "call do not count against accuracy (default: every such call counts)",
    )


def cmd_race(args, out: Out) -> int:
    """Race a plain chat job; progress on stderr when it is a terminal, then the report.
    Exits 3 (after the report) when the reference run failed, 130 when interrupted."""
    from panelist.metrics.race import chatjob
    from panelist.metrics.race.benchmark import Benchmark
    from panelist.metrics.race.registry import Tracker

    home = open_home(args.data)
    earlier = None
    if args.again:
        spec, earlier = _again(args, home)
    else:
        spec = chatjob.ChatSpec.parse(_body(args))  # the same checks as over HTTP
    tools = chatjob.load_tools(args.tools) if args.tools else ()
    tracker = Tracker(spec.runs * len(spec.texts), len(spec.texts))
    bench, plan = chatjob.benchmark(
        spec, home, tools=tools, done=tracker.done, judged=tracker.judged, earlier=earlier
    )
    race = bench.reserve()
    jobs.note(home.race_jobs, bench.earlier, race)
    tracker.expect(plan.candidates)
    failed: list[BaseException] = []

    def work():
        try:
            bench.run()
        except BaseException as exc:  # raised again below, in the command's own thread
            failed.append(exc)

    thread = threading.Thread(target=work, name=f"race-{race}", daemon=True)
    shown = (
        RaceProgress(sys.stderr, race, spec, plan, bench, tracker) if sys.stderr.isatty() else None
    )
    thread.start()
    try:
        while thread.is_alive():
            thread.join(0.25)
            if shown is not None:
                shown.draw()
    except KeyboardInterrupt:
        bench.cancel()
        thread.join()
        print(
            f"\npanelist: race {race} cancelled; what had ended is in {home.races / race}.json",
            file=sys.stderr,
        )
        return 130
    if shown is not None:
        shown.draw()  # where it ended, even when it ended before the first redraw
    report = bench.metadata.get(Benchmark.REPORT)
    if report is None:
        raise failed[0]
    out.result(report.public(), report.table())
    if failed:
        print(
            f"panelist: error: the reference run failed "
            f"({report.reference.get('error')}); nothing was judged",
            file=sys.stderr,
        )
        return NO_ANSWER
    return 0


def _again(args, home):
    """The spec and earlier looks of ``--again RACE``: the race's job, ``--runs`` more runs;
    an option that would change the job is refused (a changed job is a new job)."""
    from panelist.metrics.race import chatjob, reports
    from panelist.metrics.race.registry import RACE_ID

    race = args.again
    changed = (
        [
            f"--{k}"
            for k in (
                "grade",
                "prompt",
                "file",
                "inputs",
                "system",
                "rubric",
                "margin",
                "candidates",
                "judges",
            )
            if getattr(args, k) not in (None, "")
        ]
        + (["--allow-extra-tools"] if args.allow_extra_tools is not None else [])
        + (["--jury-weights"] if args.jury_weights else [])
        + (["--orders"] if args.orders != "both" else [])
    )
    if changed:
        raise BadRequest(
            f"--again races the job of race {race} as it was; {', '.join(changed)} "
            "would change it (a changed job is a new job: race it without "
            "--again); give only --runs, and --tools when the job had tools"
        )
    found = None
    if RACE_ID.fullmatch(race):
        with reports.of_home(home) as store:
            found = store.stored(race)
    if found is None:
        raise jobs.missing(race)
    report = found[1]
    if not isinstance(report, dict) or report.get("race") != race:
        raise BadRequest(
            f"race {race} has no readable report yet (still running, or its "
            "process stopped first); race it again once it has ended"
        )
    earlier = jobs.after(report)
    jobs.latest_check(home.race_jobs, report)
    body = jobs.body_of(earlier.job, {} if args.runs is None else {"runs": args.runs})
    body.setdefault("runs", report.get("runs") or chatjob.DEFAULT_RUNS)
    return chatjob.ChatSpec.parse(body), earlier


def _body(args) -> dict:
    """The race body the options describe."""
    from panelist.metrics.race import chatjob

    if not args.grade:
        raise BadRequest(
            "--grade is required: the grade of model the job needs (or race a "
            "race's job again with --again RACE)"
        )
    if args.inputs:
        if args.prompt or args.file:
            raise BadRequest(
                "give one input (--prompt TEXT, -f FILE) or several (--inputs FILE.jsonl), not both"
            )
        body = {"grade": args.grade, "inputs": chatjob.load_inputs(args.inputs)}
    else:
        text = args.prompt
        if args.file:
            text = (text + "\n\n" if text else "") + readfile.read_text(
                args.file, what="prompt file"
            )
        if not text.strip():
            raise BadRequest("nothing to race: give --prompt TEXT, -f FILE or --inputs FILE.jsonl")
        body = {"grade": args.grade, "prompt": jsonwire.clean(text)}
    if args.runs is not None:
        body["runs"] = args.runs
    if args.margin is not None:
        body["margin"] = args.margin
    for key in ("system", "rubric"):
        if getattr(args, key):
            body[key] = getattr(args, key)
    if args.candidates is not None:
        body["candidates"] = [a.strip() for a in args.candidates.split(",") if a.strip()]
    if args.judges is not None:
        body["judges"] = [a.strip() for a in args.judges.split(",") if a.strip()]
    if args.orders != "both":
        body["orders"] = args.orders
    if args.allow_extra_tools is not None:
        body["allow_extra_tools"] = (
            True
            if args.allow_extra_tools is True
            else [a.strip() for a in args.allow_extra_tools.split(",") if a.strip()]
        )
    if args.jury_weights:
        body["jury_weights"] = args.jury_weights
    return body


class RaceProgress:
    """A race's progress on a terminal: a line for the race, one per candidate (runs done and
    judged), redrawn in place."""

    def __init__(self, stream, race, spec, plan, bench, tracker):
        self.stream, self.race, self.spec, self.plan = stream, race, spec, plan
        self.bench, self.tracker = bench, tracker
        self._drawn = 0

    def lines(self) -> list[str]:
        seen = self.tracker.snapshot()
        total = self.bench.progress()
        judges = self.plan.judges
        head = [
            f"race {self.race} · grade {self.spec.grade} · "
            f"{'judge' if len(judges) == 1 else 'judges'} {', '.join(judges)}",
            f"  reference {self.plan.pinned}: {seen['reference']} · {total['done']}/"
            f"{len(self.plan.candidates) * self.spec.runs * len(self.spec.texts)} runs "
            f"done, {total['judged']} "
            "judged",
        ]
        width = max((len(a) for a in seen["models"]), default=0)
        rows = [
            f"  {alias.ljust(width)}  {c['done']}/{c['runs']} runs done"
            + (f" ({c['failed']} failed)" if c["failed"] else "")
            + f" · {c['judged']} judged"
            for alias, c in seen["models"].items()
        ]
        return [*head, *rows]

    def draw(self) -> None:
        try:
            cols = os.get_terminal_size(self.stream.fileno()).columns
        except (OSError, ValueError, AttributeError):
            cols = 0
        cols = max(40, cols or 100) - 1  # a line as wide as the terminal would wrap
        lines = [visible(line)[:cols] for line in self.lines()]
        up = f"\x1b[{self._drawn}F" if self._drawn else ""
        self.stream.write(up + "".join(f"\x1b[2K{line}\n" for line in lines))
        self.stream.flush()
        self._drawn = len(lines)


COMMANDS = {"race": cmd_race}
