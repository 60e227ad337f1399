"""Print every command's ``--help``, as ``docs/cli.md`` shows it under "Every command's help".

    python scripts/cli_reference.py > /tmp/help.md     (then paste it over that section)

Each noun, then each of its verbs, a heading and the help argparse prints, 100 columns wide.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if not __package__:
    sys.path.insert(0, str(ROOT))
    import _bootstrap  # noqa: E401,E702,F401

from panelist.metrics.cli.main import build_parser


def _verbs(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def reference() -> str:
    """The section's Markdown: a heading and a fenced ``--help`` per command."""
    os.environ["COLUMNS"] = "100"  # argparse wraps to the terminal; the page is fixed
    parts = []
    for noun, parser in _verbs(build_parser()).items():
        parts.append(f"### `panelist {noun}`\n\n```\n{parser.format_help().rstrip()}\n```\n")
        for verb, sub in _verbs(parser).items():
            parts.append(
                f"#### `panelist {noun} {verb}`\n\n```\n{sub.format_help().rstrip()}\n```\n"
            )
    return "\n".join(parts)


if __name__ == "__main__":
    print(reference())
