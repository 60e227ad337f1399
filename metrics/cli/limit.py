"""``panelist endpoint limit`` and ``panelist model limit``: the calls an endpoint or a
model takes at once and a minute, across every process, and how they are used now.
"""

from __future__ import annotations

from panelist.metrics.cli.main import Out
from panelist.metrics.plaintext import visible
from panelist.metrics.roster.roster import Roster


def add_parser(verbs, common, name: str, kind: str) -> None:
    a = verbs.add_parser(
        "limit",
        parents=[common],
        help=f"calls a{'n' if kind == 'endpoint' else ''} {kind} takes at once "
        "and a minute, across every process (no option: show them)",
    )
    a.add_argument(name, help=f"the {kind} whose limits to set or show")
    a.add_argument("--rpm", type=int, metavar="N", help="calls that may start in any 60 s")
    a.add_argument("--max-concurrent", type=int, metavar="N", help="calls running at once")
    a.add_argument(
        "--clear",
        action="store_true",
        help="remove its limits first" + (" (and end a pause)" if kind == "endpoint" else ""),
    )


def cmd_limit(args, out: Out, home, kind: str, name: str) -> int:
    """Set or show the call limits of one endpoint or model, and how they are used now."""
    from panelist.metrics.upstream.admission import Admission

    roster = Roster(home)
    changes = {
        k: v
        for k, v in (("rpm", args.rpm), ("max_concurrent", args.max_concurrent))
        if v is not None
    }
    if changes or args.clear:
        roster.set_limits(kind, name, changes, clear=args.clear, by="cli")
    else:
        roster.limits(kind, name)  # NotFound for a name the roster does not hold
    admission = Admission.of_home(home)
    try:
        if args.clear and kind == "endpoint":
            admission.resume(name)
        status = admission.status(kind, name)
    finally:
        admission.close()
    parts = [
        f"at most {status['max_concurrent']} call(s) at once" if status["max_concurrent"] else "",
        f"{status['rpm']} call(s) a minute" if status["rpm"] else "",
    ]
    said = ", ".join(p for p in parts if p) or "no limit"
    now = []
    if status["running"] is not None:
        now.append(f"{status['running']} running")
    if status["admitted_last_window"] is not None:
        now.append(f"{status['admitted_last_window']} in the last minute")
    if status["paused"]:
        now.append(
            f"paused for {status['paused']['seconds_left']:.0f} s more "
            f"({visible(status['paused']['why'])})"
        )
    out.result(
        dict(status, **{kind: name}),
        f"{kind} {name}: {said}" + (f"; now {', '.join(now)}" if now else ""),
    )
    return 0
