"""``panelist probe``: one tiny call per model; models that keep failing hard are retired,
retired ones that answer restored.
"""

from __future__ import annotations

from panelist.metrics.cli.main import Out
from panelist.metrics.errors import BadRequest
from panelist.metrics.home import open_home


def register(nouns, common) -> None:
    a = nouns.add_parser(
        "probe",
        parents=[common],
        help="one tiny call per model; retire "
        "models that keep failing hard, restore them when they answer",
    )
    a.add_argument("aliases", nargs="*", metavar="ALIAS", help="default: every model")
    a.add_argument(
        "--timeout",
        type=float,
        default=30.0,
        metavar="S",
        help="seconds each model may take to answer (default 30)",
    )


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
        out.table(
            [dict(r, error=r["error"][:80]) for r in rows],
            ["alias", "status", "seconds", "error_kind", "action", "error"],
        )
    return 0


COMMANDS = {"probe": cmd_probe}
