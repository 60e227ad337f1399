"""The docs a person reads: every relative link in them leads somewhere (the file, and the
heading an anchor names), the README's test command is the one CI runs, the README stays a
front door (at most 250 lines) whose first client code asks the port the demo serves on, and
the reference pages name every route and every command the code has."""

import argparse
import re
from pathlib import Path

import pytest

from panelist.metrics.cli.main import build_parser

ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted([*ROOT.glob("*.md"), *ROOT.glob("docs/*.md"), *ROOT.glob("*/README.md")])
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def anchors(path: Path) -> set[str]:
    """The anchors a Markdown file's headings make, as GitHub makes them."""
    found = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        m = re.match(r"#{1,6}\s+(.*)", line)
        if m:
            text = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower())
            found.add(text.replace(" ", "-"))
    return found


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(doc):
    broken = []
    for target in LINK.findall(doc.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", target):
            continue  # a URL: not ours to check offline
        path, _, anchor = target.partition("#")
        where = (doc.parent / path).resolve() if path else doc
        if not where.exists():
            broken.append(f"{target} (no {path})")
        elif anchor and where.suffix == ".md" and anchor not in anchors(where):
            broken.append(f"{target} (no heading #{anchor} in {path or doc.name})")
    assert not broken, f"{doc.relative_to(ROOT)}: {broken}"


def test_the_readme_test_command_is_the_one_ci_runs():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```sh\n(.*?)```", readme, flags=re.S)
    command = next(b.strip() for b in blocks if "pytest" in b)
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert ci[-1].strip() == command, (ci[-1], command)
    assert "python serve.py --demo" in blocks[0]


def test_ci_lints_formats_and_type_checks_before_the_tests():
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()]
    checks = [
        "python -m ruff check .",
        "python -m ruff format --check .",
        "bash scripts/typecheck.sh",
    ]
    where = [ci.index(c) for c in checks]  # ValueError: a check is missing
    assert where == sorted(where) and where[-1] < len(ci) - 1, where


def test_the_readme_is_a_front_door():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines; move detail into docs/"


def test_the_readmes_first_client_code_asks_the_port_the_demo_serves_on():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    first = re.findall(r"```python\n(.*?)```", readme, flags=re.S)[0]
    port = re.search(r"base_url=\"http://127\.0\.0\.1:(\d+)/v1\"", first)
    assert port, first
    # `python serve.py --demo` is `panelist serve --demo`: the port its parser defaults to
    assert int(port[1]) == build_parser().parse_args(["serve", "--demo"]).port


def _subcommands(parser):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.choices
    return {}


def test_the_cli_reference_has_a_section_for_every_command():
    page = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    missing = []
    for noun, parser in _subcommands(build_parser()).items():
        for path in [noun, *(f"{noun} {verb}" for verb in _subcommands(parser))]:
            if f"`panelist {path}`" not in page:
                missing.append(path)
    assert not missing, f"docs/cli.md lacks (python scripts/cli_reference.py): {missing}"


def test_the_http_reference_lists_every_route():
    from panelist.metrics.server.dashboard import UI, Dashboard
    from panelist.metrics.server.guard import Settings
    from panelist.metrics.server.routes import GATEWAY_ROUTES

    page = (ROOT / "docs" / "http-api.md").read_text(encoding="utf-8")
    routes = [*GATEWAY_ROUTES, *Dashboard(Settings.from_env({}), UI).routes()]
    missing = [
        f"{method} {route.pattern}"
        for route in routes
        for method in route.actions
        if f"| {method} | `{route.pattern}` |" not in page
    ]
    assert not missing, f"docs/http-api.md lacks: {missing}"
