"""``panelist gateway`` and ``panelist serve``: run a server until SIGTERM or Ctrl-C.

The servers themselves are lent by the entry point (``Runtime.make_gateway``,
``Runtime.make_dashboard``): the command line imports no server. With ``--demo`` the server
serves the demo roster: the data folder's one simulated upstream, started by the server if no
other process serves it, and taken over by it when that process ends
(``metrics.upkeep.demohost``).
"""

from __future__ import annotations

import signal
import sys
import threading

from panelist.metrics.cli.main import Out
from panelist.metrics.errors import PanelistError
from panelist.metrics.home import open_home


def register(nouns, common) -> None:
    for noun, port, what in (("gateway", 8123, "run the gateway"),
                             ("serve", 8122, "run the dashboard (and the gateway's routes)")):
        g = nouns.add_parser(noun, parents=[common], help=what)
        g.add_argument("--host", default="127.0.0.1")
        g.add_argument("--port", type=int, default=port)
        g.add_argument("--demo", action="store_true",
                       help="start a simulated upstream with demo models and a demo collection")


def cmd_gateway(args, out: Out) -> int:
    return _serve(args, out, args.runtime.need("make_gateway", "start the gateway"))


def cmd_serve(args, out: Out) -> int:
    return _serve(args, out, args.runtime.need("make_dashboard", "start the dashboard"))


def _serve(args, out: Out, make) -> int:
    """Run a server until SIGTERM or Ctrl-C; with ``--demo``, over the simulated roster."""
    home = open_home(args.data)
    try:
        # a refused setting or port is refused before the demo starts; a server that fails to
        # start the demo closes itself, so no simulator outlives it
        server = make(home, args.host, args.port, demo=args.demo) if args.demo else \
            make(home, args.host, args.port)
    except OSError as exc:
        raise PanelistError(f"cannot listen on {args.host}:{args.port}: {exc.strerror}; "
                            "pick another --port or stop what holds it") from None

    def on_signal(*_):
        threading.Thread(target=server.shutdown, daemon=True).start()
    signal.signal(signal.SIGTERM, on_signal)
    dashboard = args.noun == "serve"
    info = {"url": f"{server.url}/v1", "data": str(home.root), "demo": args.demo}
    lines = [f"panelist gateway on {server.url}/v1 (data folder {home.root})"]
    if dashboard:
        info["dashboard"] = server.url + "/"
        lines = [f"panelist dashboard on {server.url}/",
                 f"OpenAI base URL: {server.url}/v1 (data folder {home.root})"]
    if args.demo:
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
    return 0


COMMANDS = {"gateway": cmd_gateway, "serve": cmd_serve}
