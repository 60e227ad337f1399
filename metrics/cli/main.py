"""The ``panelist`` command: ``noun verb`` over one data folder.

This module is the frame: the parser registry (``NOUNS``: one module per noun, next to its
commands; each has ``register(nouns, common)``, which adds its parsers, and ``COMMANDS``, which
maps the nouns it added to their functions), the output (``Out``) and ``main``, the one place
where an error prints one line and exits non-zero.

Every command takes ``--json`` (machine-readable output) and ``--data DIR`` (else
``PANELIST_HOME``, else the per-user default). Errors print one line and exit 1;
``ask`` exits 3 (``NO_ANSWER``) when no seat answered, ``race`` (after its report) when the
reference run failed. ``ask``, ``verdict`` and ``pending`` work on the data folder directly, or
with ``--url`` against a running gateway (``remote``, the client ``mcp`` uses too). ``mcp``
serves the Model Context Protocol on stdin/stdout for agents; its stdout carries the protocol
only.

What the commands cannot import themselves, the entry point that runs them hands in as a
``Runtime``: the servers ``gateway`` and ``serve`` start and the simulated upstream of ``--demo``
(the domain imports no entry point and no script). ``metrics/offload.py`` (the ``panelist``
command) hands in all of them, ``python gateway.py`` and ``python serve.py`` their own.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from dataclasses import dataclass
from typing import Callable

from panelist import __version__
from panelist.metrics.errors import PanelistError
from panelist.metrics.plaintext import visible
from panelist.metrics.store import jsonwire
from panelist.metrics.wire.errors import body_of

NO_ANSWER = 3  # the exit status of a command whose panel (or reference run) gave no answer

# the modules of the nouns, in the order ``panelist --help`` lists their commands. Imported
# when the parser is built, not before: each imports ``Out`` from here
NOUNS = (
    "serve",
    "endpoint",
    "model",
    "probe",
    "grade",
    "collection",
    "ask",
    "verdict",
    "mcp",
    "race",
    "judge",
    "suite",
    "ratings",
    "replay",
    "key",
    "catalog",
    "schedule",
    "db",
)


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
        cells = [
            [visible(str(r.get(c, "") if r.get(c) is not None else "")) for c in columns]
            for r in rows
        ]
        widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
        print("  ".join(c.upper().ljust(w) for c, w in zip(columns, widths)).rstrip())
        for row in cells:
            print("  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip())


@dataclass(frozen=True)
class Runtime:
    """The servers and the simulator an entry point lends the commands (None: not lent)."""

    make_gateway: Callable | None = None
    make_dashboard: Callable | None = None
    simulator: Callable | None = None  # builds a simulated upstream: SimUpstream(models, …)

    def need(self, name: str, what: str):
        made = getattr(self, name)
        if made is None:
            raise PanelistError(
                f"this command line cannot {what}; run it as `panelist ...`, "
                "`python metrics/offload.py ...` or `python serve.py`"
            )
        return made


def _common(parser: argparse.ArgumentParser, suppress: bool) -> None:
    default = argparse.SUPPRESS if suppress else None
    parser.add_argument(
        "--json",
        action="store_true",
        default=argparse.SUPPRESS if suppress else False,
        help="print machine-readable JSON",
    )
    parser.add_argument(
        "--data",
        metavar="DIR",
        default=default,
        help="data folder (default: $PANELIST_HOME or ~/.local/share/panelist)",
    )


def _modules() -> list:
    return [importlib.import_module(f"panelist.metrics.cli.{name}") for name in NOUNS]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="panelist", description="A panel gateway for LLMs.")
    p.add_argument("--version", action="version", version=f"panelist {__version__}")
    _common(p, suppress=False)
    # every verb takes --json and --data after it too; there they must not reset what was
    # given before the noun, hence SUPPRESS
    common = argparse.ArgumentParser(add_help=False)
    _common(common, suppress=True)
    nouns = p.add_subparsers(dest="noun", metavar="COMMAND", required=True)
    for module in _modules():
        module.register(nouns, common)
    return p


def commands() -> dict[str, Callable]:
    """Each noun's command: ``(args, out) -> exit status``."""
    table: dict[str, Callable] = {}
    for module in _modules():
        table.update(module.COMMANDS)
    return table


def main(argv: list[str] | None = None, runtime: Runtime | None = None) -> int:
    # the command line is where text comes in: bytes that are not UTF-8 arrive as lone
    # surrogates (surrogateescape), which nothing after this point could write or print
    argv = [jsonwire.clean(a) for a in (sys.argv[1:] if argv is None else argv)]
    args = build_parser().parse_args(argv)
    args.runtime = runtime or Runtime()
    out = Out(args.json)
    try:
        return commands()[args.noun](args, out)
    except PanelistError as exc:
        if out.as_json:
            print(jsonwire.dumps(body_of(exc)))
        print(f"panelist: error: {exc.message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # one line for a person; the traceback when asked for
        if os.environ.get("PANELIST_DEBUG"):
            raise
        print(
            f"panelist: internal error: {type(exc).__name__}: {exc}; run again with "
            "PANELIST_DEBUG=1 for the traceback and report it",
            file=sys.stderr,
        )
        return 1
