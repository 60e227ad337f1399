"""``panelist gateway`` and ``panelist serve``: run a server until SIGTERM or Ctrl-C.

The servers themselves are lent by the entry point (``Runtime.make_gateway``,
``Runtime.make_dashboard``): the command line imports no server. With ``--demo`` a simulated
upstream (``Runtime.simulator``) serves demo models for as long as the server runs.
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
    sim = None
    if args.demo:
        from panelist.metrics.roster import demo
        simulator = args.runtime.need("simulator", "start the simulated demo models")
        sim = simulator(keep_requests=1000).start()  # a long demo keeps memory flat
        demo.install(home, sim.url)
    try:
        server = make(home, args.host, args.port)
    except BaseException as exc:   # a refused setting too: the simulator must not outlive it
        if sim:
            sim.stop()
        if isinstance(exc, OSError):
            raise PanelistError(f"cannot listen on {args.host}:{args.port}: {exc.strerror}; "
                                "pick another --port or stop what holds it") from None
        raise

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


COMMANDS = {"gateway": cmd_gateway, "serve": cmd_serve}
