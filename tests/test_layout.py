"""The layout's rules (DESIGN.md, "Arrows point down"), read from the code with ``ast``: which
package may import which, who may import ``http.server``, module sizes, and that every package
folder installs.

A layer is a subpackage of ``metrics`` (``store``, ``upstream``, …), a small shared module on top
of ``metrics`` (``errors``, ``home``, …) or the ``suite`` package. An import of a layer not in
the importer's allowed set fails here with both names, so an arrow that points up is caught the
day it is written.
"""

import ast
import functools
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
    "server": {
        "store",
        "upstream",
        "roster",
        "ledger",
        "seats",
        "panel",
        "wire",
        "race",
        "suite",
        "upkeep",
        "signin",
    },
    "cli": {
        "store",
        "upstream",
        "roster",
        "ledger",
        "seats",
        "panel",
        "wire",
        "race",
        "suite",
        "upkeep",
        "server",
        "signin",
    },
}
# Exceptions, each with its reason:
EXCEPTIONS = {
    # admission paces calls by the limits the roster states for each endpoint
    ("upstream.admission", "roster"),
}
# the simulated provider is a stand-in upstream for tests and the demo, never on a request path
HTTP_SERVER_OK = {"server", "upstream.simhttp"}
MAX_LINES = 800
# they build the servers and lend them to the command line; nothing imports them
ENTRY_POINTS = {"gateway", "serve", "metrics.offload"}


def modules():
    """(dotted name under ``panelist``, path) of every module of the package."""
    for folder in ("metrics", "suite", "scripts"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT)
            if rel.parts[:2] == ("suite", "tasks"):
                continue  # the suite's fixtures: other projects' code, read as data
            yield ".".join(rel.with_suffix("").parts), path
    for entry in ("gateway.py", "serve.py"):
        yield entry.removesuffix(".py"), ROOT / entry


@functools.cache
def tree(path: Path) -> ast.Module:
    """``path`` parsed, once per run: the rules below each walk every module, and none changes a
    tree it reads."""
    return ast.parse(path.read_text())


def imports(path: Path) -> list[str]:
    """Every module name ``path`` imports, absolute, without the ``panelist.`` prefix."""
    found = []
    for node in ast.walk(tree(path)):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.append(node.module)
            found += [f"{node.module}.{a.name}" for a in node.names]
    return [
        n.removeprefix("panelist.")
        for n in found
        if n == "panelist" or n.startswith("panelist.") or n.split(".")[0] == "http"
    ]


def layer(name: str) -> str | None:
    """The layer a module name belongs to (``metrics.panel.pick`` → ``panel``)."""
    parts = name.split(".")
    if parts[0] == "suite":
        return "suite"
    if parts[0] == "metrics" and len(parts) > 1:
        return parts[1]
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
            if (
                theirs is None
                or theirs == mine
                or theirs in SHARED
                or theirs in ALLOWED[mine]
                or (own(name), theirs) in EXCEPTIONS
            ):
                continue
            if target.split(".")[-1] in SHARED and layer(target.rpartition(".")[0]) is None:
                continue  # ``from panelist.metrics import errors``
            wrong.append(f"{name} imports {target} ({mine} -> {theirs})")
    assert not sorted(set(wrong)), "\n".join(sorted(set(wrong)))


def test_the_seats_core_never_imports_the_ledger():
    for path in sorted((ROOT / "metrics" / "seats").glob("*.py")):
        assert not [t for t in imports(path) if layer(t) == "ledger"], path.name


def test_only_the_server_package_imports_http_server():
    wrong = [
        name
        for name, path in modules()
        if any(t.startswith("http.server") for t in imports(path))
        and layer(name) != "server"
        and own(name) not in HTTP_SERVER_OK
    ]
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
            if (
                top in ("gateway", "serve", "scripts")
                or target.startswith("metrics.offload")
                or (layer(target) == "cli" and mine != "cli")
                or (layer(target) == "server" and mine not in ("server", "cli"))
            ):
                wrong.append(f"{name} imports {target}")
    assert not wrong, "\n".join(wrong)


def test_no_module_is_over_800_lines():
    big = {
        name: n for name, path in modules() if (n := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert not big, f"past {MAX_LINES} lines a module holds two concepts: {big}"


def test_every_package_folder_installs():
    conf = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(conf["packages"])
    folders = {"panelist"}
    for init in ROOT.rglob("__init__.py"):
        rel = init.parent.relative_to(ROOT)
        if rel.parts and (
            rel.parts[0] in ("tests", "build")
            or rel.parts[0].startswith(".")
            or rel.parts[:2] == ("suite", "tasks")
        ):
            continue
        if rel.parts:
            folders.add("panelist." + ".".join(rel.parts))
    assert folders <= listed, f"not in pyproject.toml's packages: {sorted(folders - listed)}"


def test_the_seats_core_calls_no_private_name_across_its_modules():
    """The seats core's modules work together through public names only: a private attribute
    is read on ``self`` or ``cls`` alone, never on another module's object."""
    wrong = []
    for path in sorted((ROOT / "metrics" / "seats").glob("*.py")):
        for node in ast.walk(tree(path)):
            if (
                isinstance(node, ast.Attribute)
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
            ):
                if not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                    wrong.append(f"{path.name}:{node.lineno} .{node.attr}")
    assert not wrong, wrong


# Module-level containers that are changed after import, each with its reason. Anything else of
# the kind is state a server must own and hand down (DESIGN.md, "No hidden state").
REGISTRIES = {
    # the t-quantile factor of a count: a memo of a pure function, the same in every server
    ("metrics.ledger.bradleyterry", "_FEW"),
    # the Date header of the current second, the same for every server in the process
    ("metrics.server.front.handler", "_DATE"),
    # the allocator's setting is the process's own (mallopt), made once whoever asks first
    ("metrics.server.front.memory", "_pinned"),
    # the formatted UTC time of the current second, shared by every log line written in it
    ("metrics.store.jsonl", "_SECOND"),
    # one compiled encoder per option set: pure, and bounded
    ("metrics.store.jsonwire", "_ENCODERS"),
}
_CONTAINERS = {
    "dict",
    "list",
    "set",
    "defaultdict",
    "deque",
    "OrderedDict",
    "Counter",
    "WeakValueDictionary",
    "WeakKeyDictionary",
    "WeakSet",
}
_MUTATORS = {
    "append",
    "appendleft",
    "extend",
    "insert",
    "remove",
    "discard",
    "add",
    "update",
    "setdefault",
    "pop",
    "popitem",
    "popleft",
    "clear",
}


def _container(value) -> bool:
    if isinstance(value, (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp, ast.SetComp)):
        return True
    if isinstance(value, ast.Call):
        f = value.func
        name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
        return name in _CONTAINERS
    return False


def changed_module_state(tree: ast.Module) -> set[str]:
    """Names bound at module level to a container that the module changes in place (an item
    set or deleted, a mutating method called), and names any function rebinds as ``global``."""
    top = set()
    for node in tree.body:
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else [node.target]
            if isinstance(node, ast.AnnAssign) and node.value
            else []
        )
        top.update(t.id for t in targets if isinstance(t, ast.Name) and _container(node.value))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Global):
            found.update(node.names)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.attr in _MUTATORS
        ):
            found.add(node.func.value.id) if node.func.value.id in top else None
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.Delete)):
            targets = [node.target] if isinstance(node, ast.AugAssign) else node.targets
            found.update(
                t.value.id
                for t in targets
                if isinstance(t, ast.Subscript)
                and isinstance(t.value, ast.Name)
                and t.value.id in top
            )
    return found


def test_no_module_level_state_changes_outside_the_declared_registries():
    wrong = sorted(
        f"{name}.{state}"
        for name, path in modules()
        for state in changed_module_state(tree(path))
        if (name, state) not in REGISTRIES
    )
    assert not wrong, (
        "module-level state a server should own and hand down (or declare it "
        f"in REGISTRIES with its reason): {wrong}"
    )


def test_the_state_check_sees_a_counter_kept_in_a_module():
    tree = ast.parse(
        "_busy = [0]\nLIMITS = {}\n"
        "def work():\n    _busy[0] += 1\n    LIMITS.setdefault('a', 1)\n"
        "def flag():\n    global ON\n    ON = True\n"
    )
    assert changed_module_state(tree) == {"_busy", "LIMITS", "ON"}
