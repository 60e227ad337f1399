"""``panelist gateway`` and ``panelist serve``: run a server until SIGTERM or Ctrl-C.

The servers themselves are lent by the entry point (``Runtime.make_gateway``,
``Runtime.make_dashboard``): the command line imports no server. With ``--demo`` the server
serves the demo roster: the data folder's one simulated upstream, started by the server if no
other process serves it, and taken over by it when that process ends
(``metrics.upkeep.demohost``); with workers, by one of them for all. Without ``--data`` the
demo runs in its own data folder (``home.demo_dir``), never in the user's default one.
``--workers N`` runs N processes on the port (``metrics.server.front.workers``).

Stopping: the first Ctrl-C or SIGTERM lets every request that began be answered (at most
``workers.DRAIN`` seconds), then closes; a second one ends that wait at once.
"""

from __future__ import annotations

import os
import signal
import sys
import threading

from panelist.metrics.cli.main import Out
from panelist.metrics.errors import PanelistError
from panelist.metrics.home import demo_dir, open_home
from panelist.metrics.server.front import workers
from panelist.metrics.store.pg import check_argument, check_url, redact


def register(nouns, common) -> None:
    for noun, port, what in (
        ("gateway", 8123, "run the gateway"),
        ("serve", 8122, "run the dashboard (and the gateway's routes)"),
    ):
        g = nouns.add_parser(noun, parents=[common], help=what)
        g.add_argument(
            "--host",
            default="127.0.0.1",
            help="the address to listen on (default 127.0.0.1; any other needs "
            "PANELIST_ADMIN_TOKEN)",
        )
        g.add_argument("--port", type=int, default=port, help=f"the port (default {port})")
        g.add_argument(
            "--workers",
            metavar="N",
            type=workers.worker_count,
            default=1,
            help="processes answering the port, sharing the data folder (default 1; "
            "auto: one per core)",
        )
        g.add_argument(
            "--demo",
            action="store_true",
            help="serve simulated demo models and a demo collection, in the "
            "demo's own data folder (beside the default one, named panelist-demo) "
            "unless --data names one",
        )
        g.add_argument(
            "--database",
            metavar="URL",
            default=None,
            help="keep the ledger in PostgreSQL (postgresql://USER@HOST:PORT/DB), "
            "shared by every instance given the same URL (default: "
            "$PANELIST_DATABASE_URL, else the data folder's JSONL logs)",
        )


def cmd_gateway(args, out: Out) -> int:
    return _serve(args, out, args.runtime.need("make_gateway", "start the gateway"))


def cmd_serve(args, out: Out) -> int:
    return _serve(args, out, args.runtime.need("make_dashboard", "start the dashboard"))


def _serve(args, out: Out, make) -> int:
    """Run a server (or a group of workers) until SIGTERM or Ctrl-C; with ``--demo``, over the
    simulated roster."""
    if args.database:
        check_argument(check_url(args.database))
    # the demo's simulated models and panels stay out of the user's own folder: a first real
    # collection would otherwise seat demo models as explorers
    data = args.data or (demo_dir() if args.demo else None)
    home = open_home(data, database=args.database)
    workers.check_reuse_port(args.workers)  # before anything starts
    if args.workers == 1:
        return _one(args, out, make, home)
    return _group(args, out, make, home)


def _one(args, out: Out, make, home) -> int:
    try:
        # a refused setting or port is refused before the demo starts; a server that fails to
        # start the demo closes itself, so no simulator outlives it
        server = (
            make(home, args.host, args.port, demo=args.demo)
            if args.demo
            else make(home, args.host, args.port)
        )
    except OSError as exc:
        raise PanelistError(
            f"cannot listen on {args.host}:{args.port}: {exc.strerror}; "
            "pick another --port or stop what holds it"
        ) from None
    stop, hurry = threading.Event(), threading.Event()

    def on_signal(*_):
        (hurry if stop.is_set() else stop).set()  # asked again: the drain ends now

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        _announce(args, out, home, server.url, [os.getpid()])
        left = workers.serve_until(server, stop, hurry)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if left:
        print(f"panelist: stopped with {left} request(s) still being answered", file=sys.stderr)
    return 0


def _group(args, out: Out, make, home) -> int:
    group = workers.Group(
        make,
        home.root,
        args.host,
        args.port,
        args.workers,
        share_sessions=args.noun == "serve",
        demo=args.demo,
        database=home.database,
    )
    if not group.start():  # stopped before every worker listened
        return 0
    try:
        _announce(args, out, home, group.url, group.pids)
        return group.run()
    finally:
        group.close()


def _announce(args, out: Out, home, url: str, pids: list[int]) -> None:
    dashboard = args.noun == "serve"
    info = {
        "url": f"{url}/v1",
        "data": str(home.root),
        "demo": args.demo,
        "workers": pids,
        "database": redact(home.database) if home.database else None,
    }
    several = f", {len(pids)} workers (pids {', '.join(map(str, pids))})" if len(pids) > 1 else ""
    lines = [f"panelist gateway on {url}/v1 (data folder {home.root}{several})"]
    if dashboard:
        info["dashboard"] = url + "/"
        lines = [
            f"panelist dashboard on {url}/" + (f" ({several[2:]})" if several else ""),
            f"OpenAI base URL: {url}/v1 (data folder {home.root})",
        ]
    if home.database:
        lines.append(f"ledger in {redact(home.database)}")
    if args.demo:
        if not args.data:
            lines.append(
                f"the demo keeps its own data folder ({home.root}); --data DIR names another"
            )
        lines.append(
            "try: model 'bench/demo' (simulated models)"
            + (", or the Ask page" if dashboard else "")
        )
    out.result(info, "\n".join(lines))
    sys.stdout.flush()


COMMANDS = {"gateway": cmd_gateway, "serve": cmd_serve}
