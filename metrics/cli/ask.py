"""``panelist ask``: ask a collection, on the data folder or (``--url``) a running gateway.

The answer goes to stdout, each seat's call id, model and status to stderr (so a script can
judge them). Exits 3 (``NO_ANSWER``) when no seat answered: then every seat's error is printed.
"""

from __future__ import annotations

import os
import sys

from panelist.metrics.cli import remote
from panelist.metrics.cli.main import NO_ANSWER, Out
from panelist.metrics.errors import BadRequest, PanelistError
from panelist.metrics.home import open_home
from panelist.metrics.ledger.index import ANSWERED
from panelist.metrics.store import jsonwire, readfile
from panelist.metrics.wire.errors import body_of

# the error codes of a panel that ran and gave no answer: ``ask`` exits NO_ANSWER on them
NO_ANSWER_CODES = ("all_seats_failed", "all_seats_rate_limited", "no_valid_json")


def register(nouns, common) -> None:
    a = nouns.add_parser("ask", parents=[common], help="ask a collection (answers on stdout)")
    a.add_argument("name", help="collection, e.g. demo or bench/demo")
    a.add_argument("prompt", nargs="?", default="", help="the prompt (-f appends a file's text)")
    a.add_argument("-f", "--file", metavar="FILE", help="append this file's text to the prompt")
    a.add_argument("--system", metavar="TEXT", help="the system message")
    a.add_argument(
        "--url",
        metavar="URL",
        help="ask a running gateway instead (its key, if it needs one, from $PANELIST_KEY)",
    )


def cmd_ask(args, out: Out) -> int:
    text = args.prompt
    if args.file:
        text = (text + "\n\n" if text else "") + readfile.read_text(args.file, what="prompt file")
    if not text.strip():
        raise BadRequest("nothing to ask: give a prompt or -f FILE")
    messages = ([{"role": "system", "content": args.system}] if args.system else []) + [
        {"role": "user", "content": text}
    ]
    model = args.name if args.name.startswith("bench/") else f"bench/{args.name}"
    body = {"model": model, "messages": messages}
    try:
        if args.url:
            gateway = remote.connect(args.url, remote.CLI, os.environ)
            reply = gateway.post("/v1/chat/completions", body, timeout=remote.ASK_TIMEOUT)
        else:
            from panelist.metrics.panel.panel import Panels

            panels = Panels(open_home(args.data))
            try:
                answered = panels.ask(body)
            finally:
                panels.close()
            assert answered is not None  # None only when an ``alive`` check says the caller left
            reply = answered
    except PanelistError as exc:  # the panel ran and no seat answered: every seat's error
        if exc.code not in NO_ANSWER_CODES:
            raise
        from panelist.metrics.panel.sections import markdown_of

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
            print(f"{s['call']}  {s['alias']}  {s['status']}  {s['seconds']:.2f}s", file=sys.stderr)
    return 0 if any(s["status"] in ANSWERED for s in seats) else NO_ANSWER


COMMANDS = {"ask": cmd_ask}
