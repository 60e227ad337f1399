"""``panelist endpoint``: where models are served (add, list, rm, limit)."""

from __future__ import annotations

from panelist.metrics.cli import limit
from panelist.metrics.cli.main import Out
from panelist.metrics.home import open_home
from panelist.metrics.roster.roster import Roster


def register(nouns, common) -> None:
    ep = nouns.add_parser("endpoint", help="where models are served").add_subparsers(
        dest="verb", metavar="VERB", required=True)
    a = ep.add_parser("add", parents=[common], help="add (or change) an endpoint")
    a.add_argument("name", help="what models and limits call it by")
    a.add_argument("base_url", help="its OpenAI-compatible base URL, e.g. "
                   "http://127.0.0.1:11434/v1")
    a.add_argument("--key-env", metavar="VAR",
                   help="environment variable holding the key (default PANELIST_KEY_<NAME>)")
    ep.add_parser("list", parents=[common], help="the endpoints and whether their keys are set")
    ep.add_parser("rm", parents=[common], help="remove an endpoint no model uses").add_argument(
        "name", help="the endpoint to remove")
    limit.add_parser(ep, common, "name", "endpoint")


def cmd_endpoint(args, out: Out) -> int:
    home = open_home(args.data)
    roster = Roster(home)
    if args.verb == "limit":
        return limit.cmd_limit(args, out, home, "endpoint", args.name)
    if args.verb == "add":
        ep = roster.add_endpoint(args.name, args.base_url, args.key_env)
        out.result(ep.__dict__, f"endpoint {ep.name} → {ep.base_url} (key from ${ep.key_env})")
    elif args.verb == "rm":
        roster.remove_endpoint(args.name)
        out.result({"removed": args.name}, f"removed endpoint {args.name}")
    else:
        rows = []
        for e in roster.view().endpoints.values():
            refused = roster.key_envs.problem(e.key_env, e.name) is not None
            rows.append(dict(e.__dict__, key_refused=refused,
                             key_set=not refused and bool(roster.api_key(e))))
        out.table(rows, ["name", "base_url", "key_env", "key_set", "key_refused"])
    return 0


COMMANDS = {"endpoint": cmd_endpoint}
