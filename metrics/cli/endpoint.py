"""``panelist endpoint``: where models are served (add, connect, list, rm, limit).

``connect`` signs in to a provider (``metrics.signin``): it prints the URL to open (and opens it
unless ``--no-browser``), waits for the provider's redirect, and stores the key it buys where
endpoint keys live. The key is never printed: the result names the variable and the file only.
"""

from __future__ import annotations

import sys
import webbrowser

from panelist.metrics.cli import limit
from panelist.metrics.cli.main import Out
from panelist.metrics.home import open_home
from panelist.metrics.roster.roster import Roster


def register(nouns, common) -> None:
    ep = nouns.add_parser("endpoint", help="where models are served").add_subparsers(
        dest="verb", metavar="VERB", required=True
    )
    a = ep.add_parser("add", parents=[common], help="add (or change) an endpoint")
    a.add_argument("name", help="what models and limits call it by")
    a.add_argument(
        "base_url", help="its OpenAI-compatible base URL, e.g. http://127.0.0.1:11434/v1"
    )
    a.add_argument(
        "--key-env",
        metavar="VAR",
        help="environment variable holding the key (default PANELIST_KEY_<NAME>)",
    )
    c = ep.add_parser(
        "connect", parents=[common], help="sign in to a provider and store the key it issues"
    )
    c.add_argument("name", help="the endpoint to create or update with the issued key")
    c.add_argument("--provider", required=True, help="a provider of config/providers.json")
    c.add_argument(
        "--port",
        type=int,
        default=0,
        help="loopback port for the provider's redirect (default: any free one)",
    )
    c.add_argument(
        "--timeout",
        type=float,
        default=300.0,
        metavar="SECONDS",
        help="how long to wait for the sign-in (default 300)",
    )
    c.add_argument(
        "--no-browser",
        action="store_true",
        help="print the URL only; open it yourself on this machine",
    )
    ep.add_parser("list", parents=[common], help="the endpoints and whether their keys are set")
    ep.add_parser("rm", parents=[common], help="remove an endpoint no model uses").add_argument(
        "name", help="the endpoint to remove"
    )
    limit.add_parser(ep, common, "name", "endpoint")


def cmd_endpoint(args, out: Out) -> int:
    home = open_home(args.data)
    roster = Roster(home)
    if args.verb == "limit":
        return limit.cmd_limit(args, out, home, "endpoint", args.name)
    if args.verb == "connect":
        return _connect(args, out, home)
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
            rows.append(
                dict(
                    e.__dict__, key_refused=refused, key_set=not refused and bool(roster.api_key(e))
                )
            )
        out.table(rows, ["name", "base_url", "key_env", "key_set", "key_refused"])
    return 0


def _connect(args, out: Out, home) -> int:
    from panelist.metrics.signin.flow import SignIn

    signin = SignIn(home, args.name, args.provider, port=args.port, timeout=args.timeout)
    try:
        # stderr, so stdout keeps only the result
        print(
            f"Sign in to {signin.provider.name} in your browser; waiting up to "
            f"{signin.timeout:g} s on 127.0.0.1:{signin.listener.port} for it to come back:\n"
            f"  {signin.auth_url}",
            file=sys.stderr,
            flush=True,
        )
        if not args.no_browser:
            webbrowser.open(signin.auth_url)
    except BaseException:
        signin.cancel()
        raise
    done = signin.finish()
    text = (
        f"endpoint {done['endpoint']} → {done['base_url']}: signed in to "
        f"{done['provider']}; key stored as {done['key_env']} in {done['key_file']}"
    )
    if done["environment_wins"]:
        text += (
            f"\nnote: {done['key_env']} is set in this environment and is used instead "
            "of the stored key while it is"
        )
    out.result(done, text)
    return 0


COMMANDS = {"endpoint": cmd_endpoint}
