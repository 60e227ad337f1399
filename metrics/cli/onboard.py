"""``panelist model onboard``: enqueue models for register → probe → quick suite run → ready,
then work the queue here, or follow the process that works it (the queue lives in the data
folder, so an interrupted run resumes where it stopped).
"""

from __future__ import annotations

import sys
import time

from panelist.metrics.cli.main import NO_ANSWER, Out
from panelist.metrics.errors import BadRequest
from panelist.metrics.plaintext import visible


def add_parser(verbs, common) -> None:
    a = verbs.add_parser(
        "onboard",
        parents=[common],
        help="register → probe → quick suite run "
        "→ ready, as a queue in the data folder (no alias: resume the queue)",
    )
    a.add_argument(
        "aliases",
        nargs="*",
        metavar="ALIAS",
        help="roster aliases, or served ids `panelist discover` lists",
    )
    a.add_argument(
        "--endpoint",
        metavar="NAME",
        help="where a discovered model is served, when more than one endpoint serves it",
    )
    a.add_argument(
        "--tasks", type=int, metavar="N", help="tasks in the quick suite run (default 6)"
    )
    a.add_argument("--list", action="store_true", help="show the queue and change nothing")


ONBOARD_FOLLOW = 0.5  # seconds between looks at a queue another process works


def _onboard_line(entry: dict) -> str:
    from panelist.metrics.upkeep import onboarding_queue

    alias, step, now = entry["alias"], entry["step"], entry["step_status"]
    d = entry.get("detail") or {}
    if entry["status"] == "failed":
        return (
            f"{alias}: failed at {step} ({entry['error_kind']}): {entry['error']}; {entry['hint']}"
        )
    if entry["status"] == "ready":
        result = entry["result"] or {}
        return f"{alias}: ready" + (
            " (no suite run)"
            if result.get("suite") == "skipped"
            else f": {onboarding_queue.describe(result)}"
        )
    if entry["status"] == "queued":
        return f"{alias}: queued"
    if now == "started":
        more = f" ({len(d['tasks'])} task(s))" if step == "suite" and d.get("tasks") else ""
        return f"{alias}: {step} started{more}"
    if step == "register":
        return f"{alias}: registered ({d.get('how', '')}, endpoint {entry['endpoint']})"
    if step == "probe":
        return f"{alias}: probe answered in {d.get('seconds', 0):.2f} s"
    if step == "suite" and now == "skipped":
        return f"{alias}: suite skipped: {d.get('why', '')}"
    if step == "suite":
        return f"{alias}: suite done: {onboarding_queue.describe(d)}"
    return f"{alias}: {step} {now}"


def cmd_onboard(args, out: Out, home) -> int:
    """Enqueue models for onboarding, then work the queue here (or follow whoever works it)."""
    from panelist.metrics.upkeep import onboarding_worker, onboarding_queue

    queue = onboarding_queue.Queue(home)
    if args.list:
        if args.aliases or args.endpoint or args.tasks is not None:
            raise BadRequest("--list shows the queue; leave out aliases, --endpoint and --tasks")
        out.table(
            [
                dict(
                    e,
                    error=(e["error"] or "")[:80],
                    result=onboarding_queue.describe(e["result"])
                    if e["result"] and e["result"].get("suite") != "skipped"
                    else "",
                )
                for e in queue.entries()
            ],
            ["alias", "endpoint", "step", "status", "updated", "result", "error"],
        )
        return 0
    if not args.aliases and (args.endpoint or args.tasks is not None):
        raise BadRequest("--endpoint and --tasks go with the models to onboard; name them")
    if args.aliases:
        from panelist.metrics.upstream.client import Upstream

        upstream = Upstream()
        try:
            entries = queue.enqueue(
                upstream,
                args.aliases,
                args.endpoint,
                **({} if args.tasks is None else {"tasks": args.tasks}),
            )
        finally:
            upstream.close()
        mine = [e["id"] for e in entries]
        if not out.as_json:
            for e in entries:
                print(
                    f"{e['alias']}: "
                    + ("queued" if e["new"] else f"already in the queue ({e['status']})")
                )
    else:
        mine = queue.pending()
        if not mine:
            out.result({"data": []}, "the onboarding queue is empty: nothing to resume")
            return 0
    shown: dict[str, tuple] = {}

    def show(entry: dict) -> None:
        key = (entry["step"], entry["step_status"], entry["status"])
        if out.as_json or shown.get(entry["id"]) == key:
            return
        shown[entry["id"]] = key
        print(visible(_onboard_line(entry)), flush=True)

    worker = onboarding_worker.Worker(home, on_step=show)
    told = False
    try:
        while True:
            worked = worker.work()
            queue.refresh()
            if all(queue.ended(eid) for eid in mine):
                break
            if not worked:
                if not told and not out.as_json:
                    who = queue.holder()
                    print(
                        "the queue is worked by "
                        + (
                            f"process {who['pid']} (since {who['since']})"
                            if who
                            else "another process"
                        )
                        + "; following its progress",
                        flush=True,
                    )
                    told = True
                for eid in mine:
                    e = onboarding_queue.public(queue.entry(eid))
                    show(e | {"detail": queue.entry(eid)["detail"].get(e["step"], {})})
                time.sleep(ONBOARD_FOLLOW)
    except KeyboardInterrupt:
        print(
            "panelist: interrupted; run `panelist model onboard` to resume where it stopped",
            file=sys.stderr,
        )
        return 130
    finally:
        worker.close()
        queue.close()
    ended = [onboarding_queue.public(queue.entry(eid)) for eid in mine]
    for e in ended:
        show(e | {"detail": {}})
    out.result({"data": ended})
    return NO_ANSWER if any(e["status"] == "failed" for e in ended) else 0
