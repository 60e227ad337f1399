"""The ``panelist`` command: ``noun verb`` over one data folder.

Every command takes ``--json`` (machine-readable output) and ``--data DIR`` (else
``PANELIST_HOME``, else the per-user default). Errors print one line and exit 1 from one place;
``ask`` exits 3 when no seat answered, ``race`` (after its report) when the reference run failed.
``ask`` and ``verdict`` work on the data folder directly,
or with ``--url`` against a running gateway. ``mcp`` serves the Model Context Protocol on
stdin/stdout for agents, against a running gateway; its stdout carries the protocol only.

What the commands cannot import themselves, the entry point that runs them hands in as a
``Runtime``: the servers ``gateway`` and ``serve`` start and the simulated upstream of ``--demo``
(the domain imports no entry point and no script). ``metrics/offload.py`` (the ``panelist``
command) hands in all of them, ``python gateway.py`` and ``python serve.py`` their own.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Callable
from pathlib import Path

from panelist import __version__
from panelist.metrics.store import jsonl, jsonwire
from panelist.metrics.ledger import verdict as verdict_rules
from panelist.metrics.roster.collection import REPLIES, Collections
from panelist.metrics.errors import BadRequest, ConfigInvalid, PanelistError
from panelist.metrics.wire.errors import body_of
from panelist.metrics.home import open_home
from panelist.metrics.ledger.ledger import ANSWERED
from panelist.metrics.plaintext import visible
from panelist.metrics.roster.roster import Roster
from panelist.suite import mine as suite_mine
from panelist.suite import seed as suite_seed

NO_ANSWER = 3
# the error codes of a panel that ran and gave no answer: ``ask`` exits NO_ANSWER on them
NO_ANSWER_CODES = ("all_seats_failed", "all_seats_rate_limited", "no_valid_json")


class Out:
    """Prints for people, or JSON for scripts, from one place."""

    def __init__(self, as_json: bool):
        self.as_json = as_json

    def result(self, data, text: str | None = None) -> None:
        if self.as_json:
            print(jsonwire.dumps(data, indent=2))
        elif text is not None:
            print(text)

    def table(self, rows: list[dict], columns: list[str]) -> None:
        if self.as_json:
            self.result(rows)
            return
        if not rows:
            print("(none)")
            return
        cells = [[visible(str(r.get(c, "") if r.get(c) is not None else "")) for c in columns]
                 for r in rows]
        widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
        print("  ".join(c.upper().ljust(w) for c, w in zip(columns, widths)).rstrip())
        for row in cells:
            print("  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip())


def _common(parser: argparse.ArgumentParser, suppress: bool) -> None:
    default = argparse.SUPPRESS if suppress else None
    parser.add_argument("--json", action="store_true",
                        default=argparse.SUPPRESS if suppress else False,
                        help="print machine-readable JSON")
    parser.add_argument("--data", metavar="DIR", default=default,
                        help="data folder (default: $PANELIST_HOME or ~/.local/share/panelist)")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="panelist", description="A panel gateway for LLMs.")
    p.add_argument("--version", action="version", version=f"panelist {__version__}")
    _common(p, suppress=False)
    common = argparse.ArgumentParser(add_help=False)
    _common(common, suppress=True)
    nouns = p.add_subparsers(dest="noun", metavar="COMMAND", required=True)

    for noun, port, what in (("gateway", 8123, "run the gateway"),
                             ("serve", 8122, "run the dashboard (and the gateway's routes)")):
        g = nouns.add_parser(noun, parents=[common], help=what)
        g.add_argument("--host", default="127.0.0.1")
        g.add_argument("--port", type=int, default=port)
        g.add_argument("--demo", action="store_true",
                       help="start a simulated upstream with demo models and a demo collection")

    ep = nouns.add_parser("endpoint", help="where models are served").add_subparsers(
        dest="verb", metavar="VERB", required=True)
    a = ep.add_parser("add", parents=[common])
    a.add_argument("name")
    a.add_argument("base_url")
    a.add_argument("--key-env", metavar="VAR",
                   help="environment variable holding the key (default PANELIST_KEY_<NAME>)")
    ep.add_parser("list", parents=[common])
    ep.add_parser("rm", parents=[common]).add_argument("name")
    _limit_parser(ep, common, "name", "endpoint")

    mo = nouns.add_parser("model", help="models a seat can be").add_subparsers(
        dest="verb", metavar="VERB", required=True)
    a = mo.add_parser("add", parents=[common])
    a.add_argument("alias")
    a.add_argument("--endpoint", required=True, metavar="NAME")
    a.add_argument("--served", metavar="ID", help="the id the endpoint knows (default: alias)")
    a.add_argument("--family", metavar="F")
    a.add_argument("--grade", metavar="G")
    a.add_argument("--context", type=int, metavar="N")
    a.add_argument("--max-output", type=int, metavar="N")
    a.add_argument("--vision", action="store_true")
    a.add_argument("--tools", action="store_true")
    a.add_argument("--price-in", type=float, metavar="X", help="per million input tokens")
    a.add_argument("--price-out", type=float, metavar="Y", help="per million output tokens")
    a.add_argument("--currency", metavar="CUR")
    a.add_argument("--decider", action="store_true",
                   help="this model labels the prompts of shape-auto collections (one at a time)")
    mo.add_parser("decider", parents=[common], help="make one model the decider (labels the "
                  "prompts of shape-auto collections)").add_argument("alias")
    mo.add_parser("list", parents=[common])
    mo.add_parser("rm", parents=[common]).add_argument("alias")
    a = mo.add_parser("retire", parents=[common],
                      help="keep a model out of every panel until it is restored")
    a.add_argument("alias")
    a.add_argument("--reason", default="", metavar="TEXT", help="why, for the alert")
    mo.add_parser("restore", parents=[common],
                  help="end a model's cooldown and retirement").add_argument("alias")
    _limit_parser(mo, common, "alias", "model")
    a = mo.add_parser("onboard", parents=[common], help="register → probe → quick suite run → "
                      "ready, as a queue in the data folder (no alias: resume the queue)")
    a.add_argument("aliases", nargs="*", metavar="ALIAS",
                   help="roster aliases, or served ids `panelist discover` lists")
    a.add_argument("--endpoint", metavar="NAME", help="where a discovered model is served, "
                   "when more than one endpoint serves it")
    a.add_argument("--tasks", type=int, metavar="N", help="tasks in the quick suite run "
                   "(default 6)")
    a.add_argument("--list", action="store_true", help="show the queue and change nothing")

    a = nouns.add_parser("probe", parents=[common], help="one tiny call per model; retire "
                         "models that keep failing hard, restore them when they answer")
    a.add_argument("aliases", nargs="*", metavar="ALIAS", help="default: every model")
    a.add_argument("--timeout", type=float, default=30.0, metavar="S",
                   help="seconds each model may take to answer (default 30)")

    gr = nouns.add_parser("grade", help="quality tiers, weakest first, and their pinned "
                          "models").add_subparsers(dest="verb", metavar="VERB", required=True)
    gr.add_parser("list", parents=[common], help="the grades, their pins and the ceiling")
    a = gr.add_parser("pin", parents=[common], help="the model the deployment uses for a grade")
    a.add_argument("grade")
    a.add_argument("alias", nargs="?")
    a.add_argument("--clear", action="store_true", help="unpin the grade")
    a = gr.add_parser("ceiling", parents=[common],
                      help="the strongest model (default: the strongest grade's pin)")
    a.add_argument("alias", nargs="?")
    a.add_argument("--clear", action="store_true", help="back to the strongest grade's pin")
    gr.add_parser("order", parents=[common], help="set the grades, weakest first").add_argument(
        "grades", metavar="a,b,c")

    co = nouns.add_parser("collection", help="named panels").add_subparsers(
        dest="verb", metavar="VERB", required=True)
    a = co.add_parser("save", parents=[common])
    a.add_argument("name")
    a.add_argument("--members", required=True, metavar="a,b,c")
    a.add_argument("--description", default="", metavar="TEXT")
    a.add_argument("--tags", default="", metavar="a,b")
    a.add_argument("--shape", default="", metavar="S")
    a.add_argument("--reply", default="all", choices=REPLIES)
    a.add_argument("--merger", default="", metavar="ALIAS")
    co.add_parser("list", parents=[common])
    co.add_parser("rm", parents=[common]).add_argument("name")
    a = co.add_parser("suggest", parents=[common],
                      help="models whose verdicts are clearly better than a member's")
    a.add_argument("name")
    a.add_argument("--shape", metavar="S",
                   help="the shape of work to compare on (default: the collection's, "
                   "else general)")

    a = nouns.add_parser("ask", parents=[common], help="ask a collection (answers on stdout)")
    a.add_argument("name", help="collection, e.g. demo or bench/demo")
    a.add_argument("prompt", nargs="?", default="")
    a.add_argument("-f", "--file", metavar="FILE", help="append this file's text to the prompt")
    a.add_argument("--system", metavar="TEXT")
    a.add_argument("--url", metavar="URL", help="ask a running gateway instead")

    v = nouns.add_parser("verdict", parents=[common],
                         help="judge one call (its call id, or --panel and --alias)")
    v.add_argument("call", nargs="?", help="the call id, e.g. p20250101-7.member2")
    v.add_argument("--panel", metavar="P",
                   help="instead of a call id: the panel id (bench.panel, X-Panelist-Panel)")
    v.add_argument("--alias", metavar="A",
                   help="with --panel: the model whose answer you judge, or 'merger'")
    which = v.add_mutually_exclusive_group(required=True)
    which.add_argument("--useful", dest="useful", action="store_true", default=None)
    which.add_argument("--not-useful", dest="useful", action="store_false")
    v.add_argument("--note", default="", metavar="TEXT")
    v.add_argument("--real", action="append", default=[], metavar="CLAIM")
    v.add_argument("--false", action="append", default=[], metavar="CLAIM")
    v.add_argument("--url", metavar="URL", help="send it to a running gateway instead")

    pe = nouns.add_parser("pending", parents=[common],
                          help="calls that answered and await a verdict")
    pe.add_argument("--limit", type=int, default=50, metavar="N")
    pe.add_argument("--abandoned", action="store_true",
                    help="list instead the panels whose reply never reached the caller "
                    "(their answers are owed no verdict)")
    pe.add_argument("--url", metavar="URL", help="ask a running gateway instead")

    m = nouns.add_parser("mcp", help="serve the Model Context Protocol on stdin/stdout, so an "
                         "agent can ask a running gateway's panels and judge their answers")
    m.add_argument("--url", metavar="URL", help="the running gateway (default: $PANELIST_URL, "
                   "else http://127.0.0.1:8123); its key, if it needs one, from $PANELIST_KEY")

    r = nouns.add_parser("race", parents=[common],
                         help="race a chat job across its grade: the pinned model's reference "
                         "run, every candidate, a blind judge, the report")
    r.add_argument("--grade", required=True, metavar="G", help="the grade the job needs")
    r.add_argument("--prompt", default="", metavar="TEXT", help="what the job sends the model")
    r.add_argument("-f", "--file", metavar="FILE", help="append this file's text to the prompt")
    r.add_argument("--system", metavar="TEXT", help="the job's system text")
    r.add_argument("--rubric", metavar="TEXT", help="what the judge checks, beyond the task")
    r.add_argument("--runs", type=int, default=1, metavar="N",
                   help="runs per candidate (default 1; 2 or more give intervals)")
    r.add_argument("--candidates", metavar="a,b",
                   help="the models to race (default: every callable model of the grade)")
    r.add_argument("--tools", metavar="tools.py",
                   help="a Python file whose TOOLS list the job offers the model")
    su = nouns.add_parser("suite", help="score models on review tasks (find the fault, judge "
                          "the claim)").add_subparsers(dest="verb", metavar="VERB", required=True)
    a = su.add_parser("run", parents=[common], help="ask the tasks of models not yet asked them "
                      "(a rerun finishes what is left)")
    a.add_argument("--model", action="extend", nargs="+", metavar="ALIAS",
                   help="the models to score (default: every model on the roster)")
    a.add_argument("--task", action="extend", nargs="+", metavar="ID",
                   help="the tasks to run (default: every task but drafts)")
    a.add_argument("--epochs", type=int, default=1, metavar="K",
                   help="ask each task K times (default 1)")
    a.add_argument("--demo", action="store_true",
                   help="offline: simulated models answer (scripted, deterministic)")
    su.add_parser("report", parents=[common], help="each model's rates with 95%% intervals")
    su.add_parser("list", parents=[common], help="the tasks, and any task folder that is broken")
    suite_seed.add_arguments(su.add_parser("seed", parents=[common], help=suite_seed.HELP))
    suite_mine.add_arguments(su.add_parser("mine", parents=[common], help=suite_mine.HELP))

    ke = nouns.add_parser("key", help="gateway keys callers present").add_subparsers(
        dest="verb", metavar="VERB", required=True)
    a = ke.add_parser("create", parents=[common], help="make a key (shown once)")
    a.add_argument("name", help="names the caller on every call it makes")
    a.add_argument("--collections", metavar="a,b", help="the only collections it may call")
    a.add_argument("--rpm", type=int, metavar="N", help="requests a minute it may make")
    ke.add_parser("list", parents=[common])
    ke.add_parser("revoke", parents=[common]).add_argument("name")
    _catalog_parsers(nouns, common)
    _schedule_parsers(nouns, common)
    return p


def _catalog_parsers(nouns, common) -> None:
    ca = nouns.add_parser("catalog", help="what is known about each model, and from where"
                          ).add_subparsers(dest="verb", metavar="VERB", required=True)
    ca.add_parser("import", parents=[common], help="fill missing facts of roster models from a "
                  "models.dev-layout JSON file").add_argument("file")
    ca.add_parser("refresh", parents=[common], help="read each endpoint's model list").add_argument(
        "--endpoint", metavar="NAME", help="only this endpoint")
    ca.add_parser("show", parents=[common], help="a model's facts and their sources"
                  ).add_argument("alias")
    a = nouns.add_parser("alerts", parents=[common], help="recent roster alerts, newest first")
    a.add_argument("--limit", type=int, default=50, metavar="N")
    a = nouns.add_parser("discover", parents=[common],
                         help="models the endpoints serve that are not on the roster, free first")
    a.add_argument("--endpoint", metavar="NAME", help="only this endpoint")
    a.add_argument("--free", action="store_true", help="only models known to be free")
    a.add_argument("--add", nargs="+", metavar="ID", help="register these (by served id)")


def _limit_parser(verbs, common, name: str, kind: str) -> None:
    a = verbs.add_parser("limit", parents=[common],
                         help=f"calls a{'n' if kind == 'endpoint' else ''} {kind} takes at once "
                         "and a minute, across every process (no option: show them)")
    a.add_argument(name)
    a.add_argument("--rpm", type=int, metavar="N", help="calls that may start in any 60 s")
    a.add_argument("--max-concurrent", type=int, metavar="N", help="calls running at once")
    a.add_argument("--clear", action="store_true",
                   help="remove its limits first" + (" (and end a pause)" if kind == "endpoint"
                                                     else ""))


# -- commands ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Runtime:
    """The servers and the simulator an entry point lends the commands (None: not lent)."""

    make_gateway: Callable | None = None
    make_dashboard: Callable | None = None
    simulator: Callable | None = None   # builds a simulated upstream: SimUpstream(models, …)

    def need(self, name: str, what: str):
        made = getattr(self, name)
        if made is None:
            raise PanelistError(f"this command line cannot {what}; run it as `panelist ...`, "
                                "`python metrics/offload.py ...` or `python serve.py`")
        return made


def cmd_gateway(args, out: Out) -> int:
    return _serve(args, out, args.runtime.need("make_gateway", "start the gateway"))


def cmd_serve(args, out: Out) -> int:
    return _serve(args, out, args.runtime.need("make_dashboard", "start the dashboard"))


def _serve(args, out: Out, make) -> int:
    """Run a server until SIGTERM or Ctrl-C; with ``--demo``, over the simulated roster."""
    home = open_home(args.data)
    sim = None
    if args.demo:
        from panelist.metrics.roster import demo
        simulator = args.runtime.need("simulator", "start the simulated demo models")
        sim = simulator(keep_requests=1000).start()  # a long demo keeps memory flat
        demo.install(home, sim.url)
    try:
        server = make(home, args.host, args.port)
    except OSError as exc:
        if sim:
            sim.stop()
        raise PanelistError(f"cannot listen on {args.host}:{args.port}: {exc.strerror}; "
                            "pick another --port or stop what holds it") from None

    def on_signal(*_):
        threading.Thread(target=server.shutdown, daemon=True).start()
    signal.signal(signal.SIGTERM, on_signal)
    dashboard = args.noun == "serve"
    info = {"url": f"{server.url}/v1", "data": str(home.root), "demo": bool(sim)}
    lines = [f"panelist gateway on {server.url}/v1 (data folder {home.root})"]
    if dashboard:
        info["dashboard"] = server.url + "/"
        lines = [f"panelist dashboard on {server.url}/",
                 f"OpenAI base URL: {server.url}/v1 (data folder {home.root})"]
    if sim:
        lines.append("try: model 'bench/demo' (simulated models)"
                     + (", or the Ask page" if dashboard else ""))
    out.result(info, "\n".join(lines))
    sys.stdout.flush()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
        if sim:
            sim.stop()
    return 0


def cmd_endpoint(args, out: Out) -> int:
    home = open_home(args.data)
    roster = Roster(home)
    if args.verb == "limit":
        return cmd_limit(args, out, home, "endpoint", args.name)
    if args.verb == "add":
        ep = roster.add_endpoint(args.name, args.base_url, args.key_env)
        out.result(ep.__dict__, f"endpoint {ep.name} → {ep.base_url} (key from ${ep.key_env})")
    elif args.verb == "rm":
        roster.remove_endpoint(args.name)
        out.result({"removed": args.name}, f"removed endpoint {args.name}")
    else:
        out.table([dict(e.__dict__, key_set=bool(e.api_key()))
                   for e in roster.view().endpoints.values()],
                  ["name", "base_url", "key_env", "key_set"])
    return 0


def cmd_model(args, out: Out) -> int:
    home = open_home(args.data)
    roster = Roster(home)
    if args.verb == "add":
        m = roster.add_model(args.alias, args.endpoint, served=args.served, family=args.family,
                             grade=args.grade, context=args.context, max_output=args.max_output,
                             vision=args.vision, tools=args.tools, price_in=args.price_in,
                             price_out=args.price_out, currency=args.currency,
                             decider=args.decider)
        out.result(m.public(), f"model {m.alias} → {m.endpoint}:{m.served}"
                   + (" (the decider)" if m.decider else ""))
    elif args.verb == "decider":
        changed = roster.set_decider(args.alias)
        out.result({"decider": args.alias, "changed": changed},
                   f"{args.alias} is now the decider" if changed else
                   f"{args.alias} was already the decider; nothing to do")
    elif args.verb == "rm":
        users = Collections(home).using(args.alias)
        if users:
            raise ConfigInvalid(f"model '{args.alias}' is used by collection(s) "
                                f"{', '.join(users)}; change them first")
        roster.remove_model(args.alias)
        out.result({"removed": args.alias}, f"removed model {args.alias}")
    elif args.verb == "retire":
        from panelist.metrics.upkeep import retirement
        from panelist.metrics.alerts import Alerts
        alerts = Alerts(home)
        try:
            changed = retirement.retire(roster, alerts, args.alias, by="cli",
                                     reason=visible(args.reason.strip())[:500])
        finally:
            alerts.close()
        out.result({"alias": args.alias, "retired": changed},
                   f"retired {args.alias}; `panelist model restore {args.alias}` puts it back"
                   if changed else f"{args.alias} was retired already; nothing to do")
    elif args.verb == "restore":
        return restore_model(home, roster, args.alias, out)
    elif args.verb == "limit":
        return cmd_limit(args, out, home, "model", args.alias)
    elif args.verb == "onboard":
        return cmd_onboard(args, out, home)
    else:
        out.table([m.public() for m in roster.view().models.values()],
                  ["alias", "endpoint", "served", "family", "grade", "context", "vision",
                   "tools", "price_in", "price_out", "currency"])
    return 0


ONBOARD_FOLLOW = 0.5   # seconds between looks at a queue another process works


def _onboard_line(entry: dict) -> str:
    from panelist.metrics.upkeep import onboarding_queue
    alias, step, now = entry["alias"], entry["step"], entry["step_status"]
    d = entry.get("detail") or {}
    if entry["status"] == "failed":
        return (f"{alias}: failed at {step} ({entry['error_kind']}): {entry['error']}; "
                f"{entry['hint']}")
    if entry["status"] == "ready":
        result = entry["result"] or {}
        return f"{alias}: ready" + (" (no suite run)" if result.get("suite") == "skipped" else
                                    f": {onboarding_queue.describe(result)}")
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
    import time
    from panelist.metrics.upkeep import onboarding_worker, onboarding_queue
    queue = onboarding_queue.Queue(home)
    if args.list:
        if args.aliases or args.endpoint or args.tasks is not None:
            raise BadRequest("--list shows the queue; leave out aliases, --endpoint and --tasks")
        out.table([dict(e, error=(e["error"] or "")[:80],
                        result=onboarding_queue.describe(e["result"]) if e["result"] and
                        e["result"].get("suite") != "skipped" else "")
                   for e in queue.entries()],
                  ["alias", "endpoint", "step", "status", "updated", "result", "error"])
        return 0
    if not args.aliases and (args.endpoint or args.tasks is not None):
        raise BadRequest("--endpoint and --tasks go with the models to onboard; name them")
    if args.aliases:
        from panelist.metrics.upstream.client import Upstream
        upstream = Upstream()
        try:
            entries = queue.enqueue(upstream, args.aliases, args.endpoint,
                                    **({} if args.tasks is None else {"tasks": args.tasks}))
        finally:
            upstream.close()
        mine = [e["id"] for e in entries]
        if not out.as_json:
            for e in entries:
                print(f"{e['alias']}: " + ("queued" if e["new"] else
                                            f"already in the queue ({e['status']})"))
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
                    print("the queue is worked by " + (f"process {who['pid']} (since "
                          f"{who['since']})" if who else "another process")
                          + "; following its progress", flush=True)
                    told = True
                for eid in mine:
                    e = onboarding_queue.public(queue.entry(eid))
                    show(e | {"detail": queue.entry(eid)["detail"].get(e["step"], {})})
                time.sleep(ONBOARD_FOLLOW)
    except KeyboardInterrupt:
        print("panelist: interrupted; run `panelist model onboard` to resume where it stopped",
              file=sys.stderr)
        return 130
    finally:
        worker.close()
        queue.close()
    ended = [onboarding_queue.public(queue.entry(eid)) for eid in mine]
    for e in ended:
        show(e | {"detail": {}})
    out.result({"data": ended})
    return NO_ANSWER if any(e["status"] == "failed" for e in ended) else 0


def cmd_limit(args, out: Out, home, kind: str, name: str) -> int:
    """Set or show the call limits of one endpoint or model, and how they are used now."""
    from panelist.metrics.upstream.admission import Admission
    roster = Roster(home)
    changes = {k: v for k, v in (("rpm", args.rpm), ("max_concurrent", args.max_concurrent))
               if v is not None}
    if changes or args.clear:
        roster.set_limits(kind, name, changes, clear=args.clear, by="cli")
    else:
        roster.limits(kind, name)   # NotFound for a name the roster does not hold
    admission = Admission(home)
    try:
        if args.clear and kind == "endpoint":
            admission.resume(name)
        status = admission.status(kind, name)
    finally:
        admission.close()
    parts = [f"at most {status['max_concurrent']} call(s) at once"
             if status["max_concurrent"] else "",
             f"{status['rpm']} call(s) a minute" if status["rpm"] else ""]
    said = ", ".join(p for p in parts if p) or "no limit"
    now = []
    if status["running"] is not None:
        now.append(f"{status['running']} running")
    if status["admitted_last_window"] is not None:
        now.append(f"{status['admitted_last_window']} in the last minute")
    if status["paused"]:
        now.append(f"paused for {status['paused']['seconds_left']:.0f} s more "
                   f"({visible(status['paused']['why'])})")
    out.result(dict(status, **{kind: name}),
               f"{kind} {name}: {said}" + (f"; now {', '.join(now)}" if now else ""))
    return 0


def cmd_grade(args, out: Out) -> int:
    from panelist.metrics.roster.grades import Grades
    grades = Grades(open_home(args.data))
    if args.verb == "pin":
        if args.clear == bool(args.alias):
            raise BadRequest("give the model to pin (grade pin GRADE ALIAS) or --clear, not "
                             "both")
        old = grades.pin(args.grade, None if args.clear else args.alias, by="cli")
        new = None if args.clear else args.alias
        out.result({"grade": args.grade, "pinned": new, "was": old},
                   f"grade {args.grade}: " + (f"pinned {new}" if new else "no pin")
                   + (f" (was {old})" if old and old != new else ""))
    elif args.verb == "ceiling":
        if args.clear == bool(args.alias):
            raise BadRequest("give the ceiling model (grade ceiling ALIAS) or --clear, not both")
        grades.set_ceiling(None if args.clear else args.alias, by="cli")
        now = grades.ceiling()
        out.result({"ceiling": now, "set": not args.clear},
                   f"ceiling: {now or 'none (no grade is pinned)'}"
                   + (" (the strongest grade's pin)" if args.clear and now else ""))
    elif args.verb == "order":
        dropped = grades.set_order([g for g in args.grades.split(",") if g.strip()], by="cli")
        out.result({"order": grades.order(), "unpinned": dropped},
                   "grades, weakest first: " + ", ".join(grades.order())
                   + (f"; dropped the pins of {', '.join(dropped)}" if dropped else ""))
    else:
        listing = grades.listing()
        if out.as_json:
            out.result(listing)
            return 0
        out.table([dict(g, pinned=(g["pinned"] or "(none)")
                        + (f" [{g['problem']}]" if g["problem"] else ""),
                        models=",".join(g["models"])) for g in listing["grades"]],
                  ["rank", "grade", "pinned", "models"])
        c = listing["ceiling"]
        how = "set" if c["set"] else "the strongest grade's pin"
        print(f"ceiling: {visible(c['alias'])} ({how})" if c["alias"] else
              "ceiling: none (pin a grade, or set one with `panelist grade ceiling ALIAS`)")
        if listing["unordered"]:
            print("grades models use that the order leaves out: "
                  + visible(", ".join(listing["unordered"]))
                  + " (add them with `panelist grade order a,b,c`)")
    return 0


def restore_model(home, roster: Roster, alias: str, out: Out) -> int:
    """Clear a cooldown (an evidence line) and a retirement (a roster change), both logged."""
    from panelist.metrics.upkeep import retirement
    from panelist.metrics.alerts import Alerts
    from panelist.metrics.ledger.ledger import Ledger
    if alias not in roster.view().models:
        raise PanelistError(f"unknown model '{alias}'; see `panelist model list`")
    alerts = Alerts(home)
    try:
        with Ledger(home.gateway_runs) as ledger:
            unretired, left = retirement.restore(roster, ledger, alias, by="cli", alerts=alerts)
    finally:
        alerts.close()
    done = ([f"ended a cooldown that had {left:.0f} s to run"]
            if left else []) + (["no longer retired"] if unretired else [])
    out.result({"alias": alias, "cooldown_cleared": bool(left), "unretired": unretired},
               f"restored {alias}: {'; '.join(done)}" if done else
               f"{alias} was neither cooling down nor retired; nothing to do")
    return 0


def cmd_probe(args, out: Out) -> int:
    from panelist.metrics.upkeep.health import Health
    if not args.timeout > 0:
        raise BadRequest("--timeout must be a number of seconds above 0")
    health = Health(open_home(args.data))
    try:
        probes = health.probe(args.aliases, timeout=args.timeout)
    finally:
        health.close()
    rows = [p.public() for p in probes]
    if out.as_json:
        out.result(rows)
    else:
        out.table([dict(r, error=r["error"][:80]) for r in rows],
                  ["alias", "status", "seconds", "error_kind", "action", "error"])
    return 0


def cmd_collection(args, out: Out) -> int:
    home = open_home(args.data)
    collections = Collections(home)
    if args.verb == "save":
        c = collections.save(Roster(home).view(), args.name, args.members,
                             description=args.description, tags=args.tags, shape=args.shape,
                             reply=args.reply, merger=args.merger)
        n = c.explorers(collections.limits())
        out.result(c.public(), f"saved {c.model_id}: {', '.join(c.members)} + {n} explorer(s)")
    elif args.verb == "rm":
        collections.remove(args.name)
        out.result({"removed": args.name}, f"removed collection {args.name}")
    elif args.verb == "suggest":
        return cmd_collection_suggest(args, out, home, collections)
    else:
        limits = collections.limits()
        out.table([dict(c.public(), id=c.model_id, explorers=c.explorers(limits),
                        members=",".join(c.members), tags=",".join(c.tags))
                   for c in collections.all().values()],
                  ["id", "members", "explorers", "shape", "reply", "tags", "description"])
    return 0


def cmd_collection_suggest(args, out: Out, home, collections: Collections) -> int:
    """Print the suggestions for one collection, or "no suggestion" with the evidence."""
    from panelist.metrics.panel import suggest
    from panelist.metrics.roster.collection import SHAPE
    from panelist.metrics.ledger.ledger import Ledger
    name = args.name if args.name.startswith("bench/") else f"bench/{args.name}"
    collection, _ = collections.resolve(name)
    shape = args.shape or collection.shape or "general"
    if not SHAPE.fullmatch(shape):
        raise BadRequest(f"--shape '{shape}' is not a shape; use lower-case letters, digits "
                         "and '-', e.g. general or review")
    view = Roster(home).view()
    with Ledger(home.gateway_runs) as ledger:
        states = ledger.states(view.models.keys(), shape)
    report = suggest.report(collection, view, states, shape)
    if out.as_json:
        out.result(report)
        return 0
    for s in report["suggest"]:
        lo, hi = s["interval"]
        mlo, mhi = s["member_interval"]
        print(f"{s['alias']} instead of {s['instead_of']} on {shape}: {s['useful']} of {s['of']} "
              f"useful (95% interval {lo:.2f}-{hi:.2f}, the member's {mlo:.2f}-{mhi:.2f})")
    if report["suggest"]:
        print(f"to change {collection.model_id}: panelist collection save {collection.name} "
              "--members ...")
        return 0
    print(f"no suggestion for {collection.model_id} on {shape}: no model's useful rate is "
          "clearly above a member's (their 95% intervals overlap, or verdicts are missing)")
    out.table([dict(r, interval="{:.2f}-{:.2f}".format(*r["interval"]))
               for r in report["evidence"]], ["seat", "alias", "useful", "of", "interval"])
    if report["members_without_verdicts"]:
        print(f"members without verdicts on {shape}: "
              + ", ".join(report["members_without_verdicts"]))
    return 0


def _request(url: str, path: str, body: dict | None = None) -> dict:
    """GET (no body) or POST JSON to a running gateway; its error message becomes ours."""
    base = url.rstrip("/")
    if base.endswith("/v1"):
        base = base[:-3]
    headers = {"Content-Type": "application/json"} if body is not None else {}
    key = os.environ.get("PANELIST_API_KEY")
    if key:
        headers["Authorization"] = f"Bearer {key}"
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(base + path, data=data, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=3600) as resp:
            return json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        try:
            error = json.loads(exc.read())["error"]
            message = error["message"]
        except Exception:
            error, message = {}, exc.reason
        seats = error.get("seats") if isinstance(error, dict) else None
        raise PanelistError(f"{exc.code} from {base}: {message}",
                            code=error.get("code") if isinstance(error, dict) else None,
                            details={"seats": seats} if isinstance(seats, list) else None) \
            from None
    except (urllib.error.URLError, OSError) as exc:
        raise PanelistError(f"cannot reach {base}: {getattr(exc, 'reason', exc)}; "
                            "is the gateway running?") from None


def cmd_ask(args, out: Out) -> int:
    text = args.prompt
    if args.file:
        try:
            text = (text + "\n\n" if text else "") + Path(args.file).read_text(encoding="utf-8")
        except OSError as exc:
            raise BadRequest(f"cannot read {args.file}: {exc.strerror}") from None
    if not text.strip():
        raise BadRequest("nothing to ask: give a prompt or -f FILE")
    messages = ([{"role": "system", "content": args.system}] if args.system else []) + \
        [{"role": "user", "content": text}]
    model = args.name if args.name.startswith("bench/") else f"bench/{args.name}"
    body = {"model": model, "messages": messages}
    try:
        if args.url:
            reply = _request(args.url, "/v1/chat/completions", body)
        else:
            from panelist.metrics.panel.panel import Panels
            panels = Panels(open_home(args.data))
            try:
                reply = panels.ask(body)
            finally:
                panels.close()
    except PanelistError as exc:   # the panel ran and no seat answered: every seat's error
        if exc.code not in NO_ANSWER_CODES:
            raise
        from panelist.metrics.panel.panel import markdown_of
        if out.as_json:
            print(jsonwire.dumps(body_of(exc)))
        else:
            print(markdown_of(exc.details.get("seats") or []))
        print(f"panelist: {exc.message}", file=sys.stderr)
        return NO_ANSWER
    seats = reply["bench"]["seats"]
    if out.as_json:
        out.result(reply)
    else:
        print(reply["choices"][0]["message"]["content"])
        for s in seats:
            print(f"{s['call']}  {s['alias']}  {s['status']}  {s['seconds']:.2f}s",
                  file=sys.stderr)
    return 0 if any(s["status"] in ANSWERED for s in seats) else NO_ANSWER


def cmd_verdict(args, out: Out) -> int:
    by_panel = args.panel is not None or args.alias is not None
    if args.call is not None and by_panel:
        raise BadRequest("give a call id, or --panel and --alias, not both")
    if args.call is None and (args.panel is None or args.alias is None):
        raise BadRequest("name the answer you judge: its call id (p20250101-7.member2), or "
                         "--panel P --alias A (the model, or 'merger' for the merged answer)")
    target = {"panel": args.panel, "alias": args.alias} if by_panel else {"call": args.call}
    v = verdict_rules.check({**target, "useful": args.useful, "note": args.note,
                             "real": args.real, "false": args.false})
    if args.url:
        result = _request(args.url, "/bench/verdict",
                          {k: x for k, x in v.items() if x is not None})
    else:
        from panelist.metrics.ledger.ledger import Ledger
        with Ledger(open_home(args.data).gateway_runs) as ledger:
            result = ledger.record_verdict(verdict_rules.call_of(v, ledger), useful=v["useful"],
                                           note=v["note"], real=v["real"], false=v["false"],
                                           by="cli")
    word = "useful" if v["useful"] else "not useful"
    said = ("recorded" if not result.get("replaced") else "replaced the earlier verdict:") \
        if result.get("written") else "unchanged (the same verdict was already recorded):"
    out.result(result, f"{said} {result.get('call')} {word}")
    return 0


def cmd_pending(args, out: Out) -> int:
    if args.url:
        found = _request(args.url, f"/bench/pending?limit={args.limit}")
        owed, left = found["data"], found.get("abandoned", [])
    else:
        from panelist.metrics.ledger.ledger import Ledger
        with Ledger(open_home(args.data).gateway_runs) as ledger:
            owed = [verdict_rules.owed(r) for r in ledger.pending(limit=args.limit)]
            left = [verdict_rules.not_owed(p) for p in ledger.undelivered(limit=args.limit)]
    if args.abandoned:
        if out.as_json:
            out.result(left)
        else:
            out.table([dict(c, reason=p["reason"]) for p in left for c in p["calls"]],
                      ["panel", "reason", "call", "alias", "collection", "ts"])
        return 0
    out.table(owed, ["call", "alias", "collection", "ts"])
    if left and not out.as_json:
        print(f"not owed: {len(left)} panel(s) whose reply never reached the caller; "
              "'panelist pending --abandoned' lists them", file=sys.stderr)
    return 0


def cmd_race(args, out: Out) -> int:
    """Race a plain chat job; progress on stderr when it is a terminal, then the report.
    Exits 3 (after the report) when the reference run failed, 130 when interrupted."""
    from panelist.metrics.race import chatjob
    from panelist.metrics.race.benchmark import Benchmark, races_dir
    from panelist.metrics.race.registry import Tracker
    text = args.prompt
    if args.file:
        try:
            text = (text + "\n\n" if text else "") + Path(args.file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise BadRequest(f"cannot read {args.file}: {getattr(exc, 'strerror', None) or exc}"
                             ) from None
    if not text.strip():
        raise BadRequest("nothing to race: give --prompt TEXT or -f FILE")
    body = {"grade": args.grade, "prompt": jsonwire.clean(text), "runs": args.runs}
    for key in ("system", "rubric"):
        if getattr(args, key):
            body[key] = getattr(args, key)
    if args.candidates is not None:
        body["candidates"] = [a.strip() for a in args.candidates.split(",") if a.strip()]
    spec = chatjob.ChatSpec.parse(body)   # the same checks as over HTTP
    tools = chatjob.load_tools(args.tools) if args.tools else ()
    home = open_home(args.data)
    tracker = Tracker(spec.runs)
    bench, plan = chatjob.benchmark(spec, home, tools=tools, done=tracker.done)
    race = bench.reserve()
    tracker.expect(plan.candidates, races_dir(home) / race / "calls.jsonl")
    failed: list[BaseException] = []

    def work():
        try:
            bench.run()
        except BaseException as exc:   # raised again below, in the command's own thread
            failed.append(exc)

    thread = threading.Thread(target=work, name=f"race-{race}", daemon=True)
    shown = RaceProgress(sys.stderr, race, spec, plan, bench, tracker) \
        if sys.stderr.isatty() else None
    thread.start()
    try:
        while thread.is_alive():
            thread.join(0.25)
            if shown is not None:
                shown.draw()
    except KeyboardInterrupt:
        bench.cancel()
        thread.join()
        print(f"\npanelist: race {race} cancelled; what had ended is in "
              f"{races_dir(home) / race}.json", file=sys.stderr)
        return 130
    if shown is not None:
        shown.draw()   # where it ended, even when it ended before the first redraw
    report = bench.metadata.get(Benchmark.REPORT)
    if report is None:
        raise failed[0]
    out.result(report.public(), report.table())
    if failed:
        print(f"panelist: error: the reference run failed "
              f"({report.reference.get('error')}); nothing was judged", file=sys.stderr)
        return NO_ANSWER
    return 0


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
        head = [f"race {self.race} · grade {self.spec.grade} · judge {self.plan.ceiling}",
                f"  reference {self.plan.pinned}: {seen['reference']} · {total['done']}/"
                f"{len(self.plan.candidates) * self.spec.runs} runs done, {total['judged']} "
                "judged"]
        width = max((len(a) for a in seen["models"]), default=0)
        rows = [f"  {alias.ljust(width)}  {c['done']}/{c['runs']} runs done"
                + (f" ({c['failed']} failed)" if c["failed"] else "") + f" · {c['judged']} judged"
                for alias, c in seen["models"].items()]
        return [*head, *rows]

    def draw(self) -> None:
        try:
            cols = os.get_terminal_size(self.stream.fileno()).columns
        except (OSError, ValueError, AttributeError):
            cols = 0
        cols = max(40, cols or 100) - 1   # a line as wide as the terminal would wrap
        lines = [visible(line)[:cols] for line in self.lines()]
        up = f"\x1b[{self._drawn}F" if self._drawn else ""
        self.stream.write(up + "".join(f"\x1b[2K{line}\n" for line in lines))
        self.stream.flush()
        self._drawn = len(lines)


def cmd_key(args, out: Out) -> int:
    from panelist.metrics.server.keys import Keys
    home = open_home(args.data)
    keys = Keys(home)
    if args.verb == "create":
        secret, key = keys.create(args.name, collections=args.collections, rpm=args.rpm,
                                  known=Collections(home).all().keys())
        # the one time the key exists outside the caller's hands: it is stored only as a digest.
        # Alone on stdout, so `KEY=$(panelist key create app)` captures just the key.
        out.result(dict(key.public(), key=secret), secret)
        if not out.as_json:
            print(f"key '{key.name}' made; copy it now, it is not shown again. Callers send it as "
                  "'Authorization: Bearer <key>'", file=sys.stderr)
    elif args.verb == "revoke":
        keys.revoke(args.name)
        out.result({"revoked": args.name}, f"revoked key {args.name}")
    else:
        rows = [k.public() for k in keys.all()]
        if not out.as_json:
            rows = [dict(r, hint="…" + r["hint"], collections=",".join(r["collections"] or
                                                                        ["(all)"]))
                    for r in rows]
        out.table(rows, ["name", "hint", "collections", "rpm", "created"])
    return 0


def cmd_suite(args, out: Out) -> int:
    return SUITE_VERBS[args.verb](args, out)


def _suite_tasks(home):
    from panelist.suite import tasks
    found, problems = tasks.scan(*tasks.roots(home))
    return tasks, found, problems


def cmd_suite_list(args, out: Out) -> int:
    _, found, problems = _suite_tasks(open_home(args.data))
    rows = [{"id": t.id, "kind": t.kind, "pair": t.pair if t.kind != "claim" else "",
             "files": ", ".join(f.path for f in t.files), "draft": "draft" if t.draft else "",
             "title": t.title, "folder": str(t.folder)} for t in found]
    if out.as_json:
        out.result({"data": rows, "problems": [p.message for p in problems]})
    else:
        out.table(rows, ["id", "kind", "files", "draft", "title"])
        for p in problems:
            print(f"skipped: {p.message}", file=sys.stderr)
    return 0


def cmd_suite_run(args, out: Out) -> int:
    from panelist.suite import report
    from panelist.suite.progress import Bar
    from panelist.suite.runner import SuiteRun, resolve_models
    home = open_home(args.data)
    tasks, found, problems = _suite_tasks(home)
    if problems:
        raise problems[0]
    known = {t.id: t for t in found}
    chosen = tasks.select(found, args.task)
    sim = None
    aliases = args.model
    if args.demo:
        from panelist.metrics.roster import demo as demo_roster
        from panelist.suite import demo
        simulator = args.runtime.need("simulator", "start the simulated demo models")
        sim = simulator(demo.behaviours(list(known.values()), known)).start()
        demo_roster.install(home, sim.url)
        aliases = aliases or list(demo.MODELS)
    bar = None

    def progress(done: dict, totals: dict) -> None:
        nonlocal bar
        if bar is None:
            bar = Bar(sys.stderr, totals)
        bar.update(done, force=sum(done.values()) == sum(totals.values()))
    try:
        models = resolve_models(Roster(home), aliases)
        run = SuiteRun(home, chosen, models, epochs=args.epochs, known=known)
        summary = run.run(progress=None if out.as_json else progress)
    finally:
        if bar is not None:
            bar.close()
        if sim is not None:
            sim.stop()
    doc = report.load(home)
    if out.as_json:
        out.result({"run": summary, "report": doc})
    else:
        said = (f"run {summary['run']}: {summary['asked']} asked, {summary['skipped']} already "
                f"done, {summary['failed']} failed on the way to the model (a rerun asks them "
                f"again); samples in {summary['samples']}")
        print(said)
        _suite_table(out, doc)
    if summary["interrupted"]:
        print("panelist: interrupted; every finished sample is kept: run the same command "
              "again to finish", file=sys.stderr)
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
        print("rates: mean over epochs (95% interval over tasks); pairs: bug and control both "
              "right; failed: no answer in time, or empty (scored 0); unfinished: not scored "
              "yet (limits, errors), a rerun asks again")
    return 0


def _suite_table(out: Out, doc: dict) -> None:
    from panelist.suite import report
    out.table(report.table_rows(doc), ["model", "samples", *report.RATES, "failed",
                                      "unfinished"])


SUITE_VERBS = {"run": cmd_suite_run, "report": cmd_suite_report, "list": cmd_suite_list,
               "seed": suite_seed.run, "mine": suite_mine.run}


def cmd_mcp(args, out: Out) -> int:
    from panelist.metrics.cli import mcp  # stdout becomes the protocol's: nothing else prints there
    return mcp.main(url=args.url)


def cmd_catalog(args, out: Out) -> int:
    from panelist.metrics.roster.catalog import Catalog
    catalog = Catalog(open_home(args.data))
    if args.verb == "import":
        done = catalog.import_file(args.file)
        lines = [f"{m['alias']}: filled {', '.join(m['facts']) or 'nothing (all typed)'}"
                 for m in done["matched"]]
        if done["unmatched"]:
            lines.append(f"not in the file: {', '.join(done['unmatched'])}")
        out.result(done, "\n".join(lines) or "the roster has no models; add some first")
        return 0
    if args.verb == "show":
        facts = catalog.facts(args.alias)
        if out.as_json:
            out.result({"alias": args.alias, "facts": facts})
        else:
            rows = []
            for k, v in facts.items():
                rows.append(dict(v, fact=k))
                if "learned" in v:   # beside the fact that wins, not instead of it
                    rows.append(dict(v["learned"], fact=k, source="learned"))
            out.table(rows, ["fact", "value", "source", "at", "from"])
        return 0
    from panelist.metrics.upstream.client import Upstream
    upstream = Upstream()
    try:
        done = catalog.refresh(upstream, [args.endpoint] if args.endpoint else None)
    finally:
        upstream.close()
    lines = [f"{r['endpoint']}: {r['models']} model(s), {r['with_facts']} with facts"
             for r in done["refreshed"]]
    lines += [f"{f['endpoint']}: not read: {f['error']}" for f in done["failed"]]
    lines += [f"alert: {a['message']}" for a in done["went_paid"]]
    out.result(done, "\n".join(visible(line) for line in lines)
               or "no endpoints; add one with `panelist endpoint add`")
    return 1 if done["failed"] else 0


def _schedule_parsers(nouns, common) -> None:
    sc = nouns.add_parser("schedule", help="work the server does on its own: probe, "
                          "catalog_refresh").add_subparsers(dest="verb", metavar="VERB",
                                                            required=True)
    sc.add_parser("show", parents=[common], help="each job's mode, interval and next run")
    a = sc.add_parser("set", parents=[common], help="a job's mode and/or interval (the server "
                      "reads them when it starts)")
    a.add_argument("job", metavar="JOB", help="probe or catalog_refresh")
    a.add_argument("--mode", metavar="M", help="off, log-only (say what would change) or run")
    a.add_argument("--every", type=int, metavar="SECONDS", help="seconds between runs")


def cmd_schedule(args, out: Out) -> int:
    from panelist.metrics.upkeep import schedule
    home = open_home(args.data)
    if args.verb == "set":
        done = schedule.set_job(home, args.job, mode=args.mode, every=args.every)
        out.result(dict(done, job=args.job), f"{args.job}: {done['mode']} every "
                   f"{done['every']} s; a running server takes it up within "
                   f"{schedule.SETTINGS_EVERY:g} s")
        return 0
    book = schedule.Book(home)
    rows = []
    for job, s in schedule.settings(home).items():
        due = book.next_due(job, s["every"])
        rows.append(dict(s, job=job, next=jsonl.utc_second(due) if due else "due now"))
    out.table(rows, ["job", "mode", "every", "next"])
    return 0


def cmd_alerts(args, out: Out) -> int:
    from panelist.metrics.alerts import Alerts
    if args.limit < 1:
        raise BadRequest("--limit must be 1 or more")
    book = Alerts(open_home(args.data))
    out.table(book.recent(args.limit), ["ts", "kind", "subject", "message"])
    return 0


def cmd_discover(args, out: Out) -> int:
    from panelist.metrics.roster import discover
    from panelist.metrics.roster.catalog import Catalog
    from panelist.metrics.upstream.client import Upstream
    catalog, upstream = Catalog(open_home(args.data)), Upstream()
    try:
        if args.add:
            added = discover.add(catalog, upstream, args.add, args.endpoint)
            out.result({"added": added}, "\n".join(
                visible(f"added {a['alias']} → {a['endpoint']}") for a in added))
            return 0
        found = discover.find(catalog, upstream, args.endpoint, free_only=args.free)
    finally:
        upstream.close()
    if out.as_json:
        out.result(found)
    else:
        out.table([dict(r["facts"], endpoint=r["endpoint"], id=r["id"], free=r["free"],
                        also=", ".join(r["also_on_roster"]))
                   for r in found["models"]],
                  ["endpoint", "id", "free", "context", "price_in", "price_out", "vision",
                   "also"])
        for f in found["failed"]:
            print(f"panelist: {f['endpoint']} not read: {visible(f['error'])}", file=sys.stderr)
    return 1 if found["failed"] else 0


COMMANDS = {"gateway": cmd_gateway, "serve": cmd_serve, "endpoint": cmd_endpoint, "model": cmd_model,
            "collection": cmd_collection, "ask": cmd_ask, "verdict": cmd_verdict,
            "pending": cmd_pending, "key": cmd_key, "mcp": cmd_mcp, "grade": cmd_grade,
            "race": cmd_race, "suite": cmd_suite, "probe": cmd_probe, "catalog": cmd_catalog,
            "alerts": cmd_alerts, "discover": cmd_discover, "schedule": cmd_schedule}


def main(argv: list[str] | None = None, runtime: Runtime | None = None) -> int:
    # the command line is where text comes in: bytes that are not UTF-8 arrive as lone
    # surrogates (surrogateescape), which nothing after this point could write or print
    argv = [jsonwire.clean(a) for a in (sys.argv[1:] if argv is None else argv)]
    args = build_parser().parse_args(argv)
    args.runtime = runtime or Runtime()
    out = Out(args.json)
    try:
        return COMMANDS[args.noun](args, out)
    except PanelistError as exc:
        if out.as_json:
            print(jsonwire.dumps(body_of(exc)))
        print(f"panelist: error: {exc.message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except Exception as exc:   # one line for a person; the traceback when asked for
        if os.environ.get("PANELIST_DEBUG"):
            raise
        print(f"panelist: internal error: {type(exc).__name__}: {exc}; run again with "
              "PANELIST_DEBUG=1 for the traceback and report it", file=sys.stderr)
        return 1

