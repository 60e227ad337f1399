"""The layout's rules (DESIGN.md, "Arrows point down"), read from the code with ``ast``: which
package may import which, who may import ``http.server``, module sizes, and that every package
folder installs.

A layer is a subpackage of ``metrics`` (``store``, ``upstream``, …), a small shared module on top
of ``metrics`` (``errors``, ``home``, …) or the ``suite`` package. An import of a layer not in
the importer's allowed set fails here with both names, so an arrow that points up is caught the
day it is written.
"""

import ast
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# small shared nouns every layer may use
SHARED = {"errors", "home", "plaintext", "stats", "alerts"}
# what each layer may import of ours, besides itself and SHARED
ALLOWED = {
    "store": set(),
    "upstream": {"store"},
    "roster": {"store"},
    "ledger": {"store"},
    "seats": {"upstream", "roster", "store"},
    "panel": {"seats", "ledger", "roster", "upstream", "store"},
    # a format reads the panel's types, and ``GET /v1/models`` describes collections and models
    "wire": {"panel", "roster", "store"},
    "race": {"seats", "roster", "store", "ledger", "upstream"},
    "suite": {"seats", "roster", "store", "ledger", "upstream"},
    "upkeep": {"roster", "seats", "ledger", "suite", "upstream", "store"},
    # provider sign-in: creates an endpoint and stores the key it buys
    "signin": {"roster", "store"},
    "server": {"store", "upstream", "roster", "ledger", "seats", "panel", "wire", "race",
               "suite", "upkeep", "signin"},
    "cli": {"store", "upstream", "roster", "ledger", "seats", "panel", "wire", "race", "suite",
            "upkeep", "server", "signin"},
}
# Exceptions, each with its reason:
EXCEPTIONS = {
    # admission paces calls by the limits the roster states for each endpoint
    ("upstream.admission", "roster"),
}
# the simulated provider is a stand-in upstream for tests and the demo, never on a request path
HTTP_SERVER_OK = {"server", "upstream.sim"}
MAX_LINES = 800
# they build the servers and lend them to the command line; nothing imports them
ENTRY_POINTS = {"gateway", "serve", "metrics.offload"}


def modules():
    """(dotted name under ``panelist``, path) of every module of the package."""
    for folder in ("metrics", "suite", "scripts"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT)
            if rel.parts[:2] == ("suite", "tasks"):
                continue   # the suite's fixtures: other projects' code, read as data
            yield ".".join(rel.with_suffix("").parts), path
    for entry in ("gateway.py", "serve.py"):
        yield entry.removesuffix(".py"), ROOT / entry


def imports(path: Path) -> list[str]:
    """Every module name ``path`` imports, absolute, without the ``panelist.`` prefix."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.append(node.module)
            found += [f"{node.module}.{a.name}" for a in node.names]
    return [n.removeprefix("panelist.") for n in found if n == "panelist" or
            n.startswith("panelist.") or n.split(".")[0] == "http"]


def layer(name: str) -> str | None:
    """The layer a module name belongs to (``metrics.panel.pick`` → ``panel``)."""
    parts = name.split(".")
    if parts[0] == "suite":
        return "suite"
    if parts[0] == "metrics" and len(parts) > 1:
        # the seats core, and the one record shape every model call is written in
        return "seats" if parts[1] in ("seats", "seatcalls", "seatset",
                                       "seatrecord") else parts[1]
    return None


def own(name: str) -> str:
    """The importer's own key for the exceptions table (``upstream.admission``)."""
    return ".".join(name.split(".")[1:]) if name.startswith("metrics.") else name


def test_arrows_point_down():
    wrong = []
    for name, path in modules():
        mine = layer(name)
        if mine not in ALLOWED or name in ENTRY_POINTS:
            continue
        for target in imports(path):
            theirs = layer(target)
            if theirs is None or theirs == mine or theirs in SHARED or \
                    theirs in ALLOWED[mine] or (own(name), theirs) in EXCEPTIONS:
                continue
            if target.split(".")[-1] in SHARED and layer(target.rpartition(".")[0]) is None:
                continue   # ``from panelist.metrics import errors``
            wrong.append(f"{name} imports {target} ({mine} -> {theirs})")
    assert not sorted(set(wrong)), "\n".join(sorted(set(wrong)))


def test_the_seats_core_never_imports_the_ledger():
    for name in ("seats.py", "seatcalls.py", "seatset.py", "seatrecord.py"):
        assert not [t for t in imports(ROOT / "metrics" / name) if layer(t) == "ledger"], name


def test_only_the_server_package_imports_http_server():
    wrong = [name for name, path in modules()
             if any(t.startswith("http.server") for t in imports(path))
             and layer(name) != "server" and own(name) not in HTTP_SERVER_OK]
    assert not wrong, f"only metrics/server/ may import http.server: {wrong}"


def test_nothing_imports_the_cli_the_server_an_entry_point_or_a_script():
    """The command line and the servers sit on top: only an entry point (or the command line,
    for the servers' non-HTTP parts such as keys) reaches them, and nothing reaches an entry
    point or a script but another entry point."""
    wrong = []
    for name, path in modules():
        if name in ENTRY_POINTS or name.startswith("scripts."):
            continue
        mine = layer(name)
        for target in imports(path):
            top = target.split(".")[0]
            if top in ("gateway", "serve", "scripts") or target.startswith("metrics.offload") \
                    or (layer(target) == "cli" and mine != "cli") \
                    or (layer(target) == "server" and mine not in ("server", "cli")):
                wrong.append(f"{name} imports {target}")
    assert not wrong, "\n".join(wrong)


def test_no_module_is_over_800_lines():
    big = {name: n for name, path in modules()
           if (n := len(path.read_text().splitlines())) > MAX_LINES}
    assert not big, f"past {MAX_LINES} lines a module holds two concepts: {big}"


def test_every_package_folder_installs():
    conf = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(conf["packages"])
    folders = {"panelist"}
    for init in ROOT.rglob("__init__.py"):
        rel = init.parent.relative_to(ROOT)
        if rel.parts and (rel.parts[0] in ("tests", "build") or rel.parts[0].startswith(".")
                          or rel.parts[:2] == ("suite", "tasks")):
            continue
        if rel.parts:
            folders.add("panelist." + ".".join(rel.parts))
    assert folders <= listed, f"not in pyproject.toml's packages: {sorted(folders - listed)}"
