"""The ``panelist`` command, and ``python metrics/offload.py verdict <call> --useful|…`` from a
checkout (the same commands, for scripts written against the offload log's command line).

An entry point: it lends the commands the servers and the simulated upstream they start
(``cli.Runtime``), each imported only when a command needs it, so a ``verdict`` never loads the
HTTP layer.
"""

import sys
from pathlib import Path

if not __package__:
    # run as a file, this folder would shadow the package; import the checkout as ``panelist``
    sys.path[0] = str(Path(__file__).resolve().parent.parent)
    import _bootstrap  # noqa: F401

from panelist.metrics.cli import main as cli  # noqa: E402


def make_gateway(*args, **kw):
    from panelist.gateway import make_gateway

    return make_gateway(*args, **kw)


def make_dashboard(*args, **kw):
    from panelist.serve import make_dashboard

    return make_dashboard(*args, **kw)


def simulator(*args, **kw):
    from panelist.metrics.upstream.sim import SimUpstream

    return SimUpstream(*args, **kw)


RUNTIME = cli.Runtime(make_gateway, make_dashboard, simulator)


def main(argv: list[str] | None = None) -> int:
    return cli.main(argv, RUNTIME)


if __name__ == "__main__":
    sys.exit(main())
