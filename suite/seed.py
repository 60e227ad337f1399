"""``panelist suite seed``: bug/control pairs grown from the functions of the user's repository.

Each pair is one function of one file: the bug task attaches the file with one realistic fault
planted in that function (``suite/mutants.py``), keyed by the lines of the changed statement;
its control (the same id + ``-control``) attaches the file byte for byte as it is. Both get the
same prompt, so nothing but the code tells them apart.

How mutants are chosen: the repository's Python files are walked in path order (hidden folders,
virtual environments, test folders, ``fixtures/`` folders, test files and the folder the tasks
are written to are left out), every function's mutants are
listed, and the functions are tried in an order drawn from ``--seed`` (with ``--hard``, larger
files and longer functions first, and each function's subtlest operators only). Within a
function the operator used least so far is picked, so a run spreads over the kinds of slip.
At most one mutant per function becomes a task.

When the repository has tests (a ``tests/`` folder, or ``test_*.py`` / ``*_test.py`` files),
they are run with ``python -m pytest -x -q`` in a temporary copy: first untouched (they must
pass, or seeding stops and says so), then once per mutant, which is dropped if every test still
passes (it did not change behaviour, as a change in dead code or an equivalent rewrite would
not). A run that outlasts four times the untouched run's time plus 10 s (at most ``--timeout``)
counts as caught: the mutant hangs. The repository itself is never written to.

Invariants: the same repository, ``--seed`` and flags give the same tasks (the same ids); an id
names the file's content, the function and the edit, so seeding again writes nothing new
(tasks already there are counted, never rewritten); every task is a draft until reviewed.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import math
import os
import random
import shutil
import signal
import subprocess
from typing import Any
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from panelist.metrics.errors import BadRequest
from panelist.metrics.home import open_home
from panelist.suite import drafts, mutants, taskfiles

HELP = "plant one realistic bug per task into your repository's functions, each with its control"
LICENSE = "user's repository"
# not the project's own code: test material (fixtures included), environments, build output
SKIP_DIRS = frozenset(
    {
        "__pycache__",
        "node_modules",
        "site-packages",
        "venv",
        "env",
        "build",
        "dist",
        "tests",
        "test",
        "testing",
        "fixtures",
    }
)
COPY_SKIP = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        "__pycache__",
        ".pytest_cache",
        ".mypy_cache",
        ".ruff_cache",
        ".tox",
        ".nox",
        "node_modules",
    }
)
PYTEST = ("-m", "pytest", "-x", "-q", "-p", "no:cacheprovider")
NO_TESTS_COLLECTED = 5  # pytest's exit code when it found nothing to run


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--repo",
        required=True,
        metavar="PATH",
        help="the repository whose functions get the bugs (never modified)",
    )
    parser.add_argument(
        "--hard",
        action="store_true",
        help="subtler slips (boundaries, off-by-one, wrong variable) in larger files first",
    )
    parser.add_argument(
        "--count", type=int, default=10, metavar="N", help="bug/control pairs to make (default 10)"
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=0,
        metavar="N",
        help="draws the functions and slips; the same seed gives the same tasks",
    )
    parser.add_argument(
        "--out", metavar="DIR", help="write the tasks here (default: the data folder's suite/tasks)"
    )
    parser.add_argument(
        "--license",
        metavar="TEXT",
        default=LICENSE,
        help=f"the code's license, recorded in each task (default: {LICENSE})",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=600.0,
        metavar="S",
        help="the most one run of the repository's tests may take (default 600)",
    )
    parser.add_argument(
        "--no-tests",
        action="store_true",
        help="keep every mutant without running the repository's tests",
    )


def run(args, out) -> int:
    """The command: seed, then print what was made (or the report as JSON)."""
    if args.count < 1:
        raise BadRequest("--count must be 1 or more: the number of bug/control pairs to make")
    if not 0 < args.timeout < math.inf:
        raise BadRequest("--timeout must be a number of seconds above 0")
    root = drafts.out_dir(open_home(args.data) if not args.out else None, args.out)
    say = None if out.as_json else (lambda line: print(line, file=sys.stderr, flush=True))
    report = seed(
        args.repo,
        root,
        count=args.count,
        seed=args.seed,
        hard=args.hard,
        license=args.license,
        timeout=args.timeout,
        use_tests=not args.no_tests,
        progress=say,
    )
    if out.as_json:
        out.result(report)
        return 0
    print(summary(report))
    out.table(
        [dict(t, lines=", ".join(map(str, t["lines"]))) for t in report["tasks"]],
        ["id", "path", "function", "operator", "lines"],
    )
    return 0


def summary(report: dict) -> str:
    lines = [
        f"{report['kept']} bug/control pair(s) from {report['repo']} in {report['out']} "
        f"({report['written']} written, {report['present']} already there)"
    ]
    if report["tests"] == "ran":
        lines.append(
            f"tests ran on {report['tested']} mutant(s): {report['dropped']} passed every "
            "test and were dropped (they did not change behaviour)"
        )
    elif report["tests"] == "none":
        lines.append("no tests found: every mutant was kept; review them before use")
    else:
        lines.append("tests not run (--no-tests): every mutant was kept; review them before use")
    if report["kept"] < report["count"]:
        lines.append(
            f"asked for {report['count']}: the repository has no more functions to "
            "mutate" + (" (try without --hard)" if report["hard"] else "")
        )
    lines.append('every task is a draft: review it, set "draft": false, and it runs by default')
    return "\n".join(lines)


# -- the repository ------------------------------------------------------------------------------


def _venv(folder: Path) -> bool:
    return (folder / "pyvenv.cfg").is_file()


def _test_file(name: str) -> bool:
    return name.startswith("test_") or name.endswith("_test.py") or name == "conftest.py"


def _walk(repo: Path):
    """``(folder, dirs, files)`` below ``repo`` in name order, hidden and venv folders pruned."""
    for folder, dirs, files in os.walk(repo):
        base = Path(folder)
        dirs[:] = sorted(
            d for d in dirs if not d.startswith(".") and d not in COPY_SKIP and not _venv(base / d)
        )
        yield base, dirs, sorted(files)


def python_files(repo: Path, leave_out: Path | None = None) -> list[str]:
    """The repository's own Python files (no tests, fixtures, venvs or hidden folders, nothing
    under ``leave_out``), as POSIX paths."""
    found = []
    for base, dirs, files in _walk(repo):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS and base / d != leave_out]
        for name in files:
            path = base / name
            if (
                name.endswith(".py")
                and not _test_file(name)
                and not name.startswith(".")
                and not path.is_symlink()
                and name not in ("setup.py", "noxfile.py")
            ):
                found.append(path.relative_to(repo).as_posix())
    return found


def has_tests(repo: Path) -> bool:
    """Whether pytest would find tests: a ``tests/`` folder with Python in it, or test files."""
    for base, _, files in _walk(repo):
        if any(
            n.endswith(".py") and (n.startswith("test_") or n.endswith("_test.py")) for n in files
        ):
            return True
        if base.name in ("tests", "test") and any(n.endswith(".py") for n in files):
            return True
    return False


class RepoTests:
    """The repository's tests, run in a temporary copy that one mutant at a time is written to."""

    def __init__(self, repo: Path, timeout: float):
        self._tmp = tempfile.TemporaryDirectory(prefix="panelist-seed-")
        self.root = Path(self._tmp.name) / repo.name
        shutil.copytree(
            repo,
            self.root,
            symlinks=True,
            ignore=lambda folder, names: [n for n in names if n in COPY_SKIP],
        )
        self.timeout = timeout
        self.limit = timeout
        paths = [str(self.root)] + (
            [str(self.root / "src")] if (self.root / "src").is_dir() else []
        )
        if os.environ.get("PYTHONPATH"):
            paths.append(os.environ["PYTHONPATH"])
        # our copy first, so an installed (or editable) copy of the project is not what is
        # tested; no bytecode, so a same-size edit within the same second is never run stale
        self.env = dict(os.environ, PYTHONPATH=os.pathsep.join(paths), PYTHONDONTWRITEBYTECODE="1")

    def baseline(self) -> None:
        """Run the untouched tests; raise, saying what to do, unless they all pass."""
        if importlib.util.find_spec("pytest") is None:
            raise BadRequest(
                f"the repository has tests but pytest is not installed for "
                f"{sys.executable}; install it, or seed with --no-tests"
            )
        began = time.monotonic()
        outcome, tail = self._pytest(self.timeout)
        took = time.monotonic() - began
        if outcome == "timeout":
            raise BadRequest(
                f"the repository's tests did not finish within {self.timeout:g} s "
                "before any change; raise --timeout, or seed with --no-tests"
            )
        if outcome == "failed":
            raise BadRequest(
                "the repository's tests fail before any change, so they cannot "
                "tell which mutants change behaviour; fix them, or seed with "
                f"--no-tests. pytest said: {tail}"
            )
        self.limit = min(self.timeout, 4 * took + 10)

    def catches(self, path: str, mutated: bytes) -> bool:
        """Whether the tests fail (or hang) with ``path`` replaced by ``mutated``."""
        target = self.root / path
        original = target.read_bytes()
        target.write_bytes(mutated)
        try:
            outcome, _ = self._pytest(self.limit)
        finally:
            target.write_bytes(original)
        return outcome in ("failed", "timeout")

    def _pytest(self, limit: float) -> tuple[str, str]:
        proc = subprocess.Popen(
            [sys.executable, *PYTEST],
            cwd=self.root,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            output, _ = proc.communicate(timeout=limit)
        except subprocess.TimeoutExpired:
            _kill(proc)
            return "timeout", ""
        except BaseException:  # Ctrl-C: take the test run (and what it started) down with us
            _kill(proc)
            raise
        tail = " ".join(output.decode("utf-8", "replace").strip().splitlines()[-3:])[-400:]
        if proc.returncode == 0:
            return "passed", tail
        if proc.returncode == NO_TESTS_COLLECTED:
            return "none", tail
        return "failed", tail

    def close(self) -> None:
        self._tmp.cleanup()


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # its own session: pytest and its children
    except ProcessLookupError:
        pass
    proc.communicate()


# -- choosing ------------------------------------------------------------------------------------


@dataclass
class _Candidate:
    """A function with the file it is in, and the mutants still untried."""

    fn: mutants.Function
    file_lines: int
    pool: list[mutants.Mutant] = field(default_factory=list)


def _order(found: list[_Candidate], rng: random.Random, hard: bool) -> list[_Candidate]:
    """The order functions are tried in: a draw (weighted by size with ``hard``), and with
    ``hard`` the functions that offer only the plainest slips last."""

    def key(c: _Candidate) -> tuple:
        weight = 1.0
        if hard:
            weight = c.file_lines * (c.fn.end_lineno - c.fn.lineno + 1)
        draw = math.log(1.0 - rng.random()) / weight  # weighted order without replacement
        plain = hard and max(m.level for m in c.fn.mutants) < 2
        return (plain, -draw)

    keys = {id(c): key(c) for c in found}
    return sorted(found, key=lambda c: keys[id(c)])


def _pick(c: _Candidate, used: Counter, rng: random.Random, hard: bool) -> mutants.Mutant | None:
    """Take one untried mutant of the function: its least used operator (the subtlest level
    only, with ``hard``), then one of that operator's sites."""
    if not c.pool:
        return None
    pool = c.pool
    if hard:
        top = max(m.level for m in pool)
        pool = [m for m in pool if m.level == top]
    ops = sorted({m.operator for m in pool})
    fewest = min(used[o] for o in ops)
    op = rng.choice([o for o in ops if used[o] == fewest])
    choice = rng.choice([m for m in pool if m.operator == op])
    c.pool.remove(choice)
    return choice


def task_id(repo: Path, mutant: mutants.Mutant, source: bytes) -> str:
    """Names the repository, and digests the file's content, the function and the edit."""
    blob = b"\0".join(
        [
            mutant.path.encode(),
            mutant.function.encode(),
            mutant.operator.encode(),
            str(mutant.start).encode(),
            str(mutant.end).encode(),
            mutant.new,
            hashlib.sha256(source).digest(),
        ]
    )
    return f"seed-{drafts.slug(repo.name, 30)}-{hashlib.sha256(blob).hexdigest()[:10]}"


def tasks_for(
    repo: Path, mutant: mutants.Mutant, source: bytes, *, license: str, created: str
) -> tuple[dict, dict]:
    """The bug task and its control, as task.json dicts."""
    tid = task_id(repo, mutant, source)
    common = {
        "prompt": f"Review the function {mutant.function} in {mutant.path}.",
        "attach": [mutant.path],
        "source": f"{repo}/{mutant.path}, function {mutant.function} "
        f"(sha256 {hashlib.sha256(source).hexdigest()})",
        "license": license,
        "created": created,
        "draft": True,
    }
    if mutant.operator == "remove_call":
        where = "it was between lines {} and {}".format(*mutant.lines)
    else:
        where = "the faulty statement is on line(s) " + ", ".join(map(str, mutant.lines))
    bug = {
        "id": tid,
        "title": f"{mutant.path}: {mutant.function}, seeded fault",
        "kind": "bug",
        **common,
        "answer": list(mutant.lines),
        "why": f"Seeded ({mutant.operator}) in {mutant.function}: {mutant.detail}; {where}.",
    }
    control = {
        "id": tid + "-control",
        "title": f"{mutant.path}: {mutant.function}, untouched",
        "kind": "control",
        **common,
        "answer": None,
        "why": f"The original {mutant.path}, byte for byte: no fault was seeded (its bug "
        f"is {tid}).",
    }
    order = drafts.FIELDS
    return ({k: bug[k] for k in order}, {k: control[k] for k in order})


# -- seeding -------------------------------------------------------------------------------------


def seed(
    repo: str | os.PathLike,
    root: Path,
    *,
    count: int = 10,
    seed: int = 0,
    hard: bool = False,
    license: str = LICENSE,
    timeout: float = 600.0,
    use_tests: bool = True,
    created: str | None = None,
    progress=None,
) -> dict:
    """Write up to ``count`` bug/control pairs from ``repo`` into ``root``; returns the report:
    ``{repo, out, count, hard, seed, tests: ran|none|off, files, functions, tested, dropped,
    kept, written, present, tasks: [{id, control, path, function, operator, lines}]}``."""
    repo = Path(repo).expanduser().resolve()
    if not repo.is_dir():
        raise BadRequest(f"--repo {repo} is not a folder; name the repository to seed from")
    created = created or drafts.today()
    say = progress or (lambda line: None)
    sources: dict[str, bytes] = {}
    found: list[_Candidate] = []
    for path in python_files(repo, leave_out=Path(root).resolve()):  # never our own tasks
        try:  # bounded, regular files only: the loader refuses anything else anyway
            source = taskfiles.read(repo / path, taskfiles.MAX_FILE)
        except taskfiles.Unreadable:
            continue
        for fn in mutants.functions(path, source):
            sources[path] = source
            found.append(_Candidate(fn, source.count(b"\n") + 1, list(fn.mutants)))
    if not found:
        raise BadRequest(
            f"no function to mutate in {repo}: seeding needs Python files with "
            "functions, outside test folders, hidden folders and virtual "
            "environments"
        )
    rng = random.Random(seed)
    order = _order(found, rng, hard)
    report: dict[str, Any] = {
        "repo": str(repo),
        "out": str(root),
        "count": count,
        "hard": hard,
        "seed": seed,
        "tests": "off",
        "files": len(sources),
        "functions": len(found),
        "tested": 0,
        "dropped": 0,
        "kept": 0,
        "written": 0,
        "present": 0,
        "tasks": [],
    }
    tests = None
    if use_tests and has_tests(repo):
        say(f"running the tests of {repo} once untouched")
        tests = RepoTests(repo, timeout)
        report["tests"] = "ran"
    elif use_tests:
        report["tests"] = "none"
    used: Counter = Counter()
    trees: dict[str, str | None] = {}  # each file's fingerprint, made when first needed
    try:
        if tests is not None:
            tests.baseline()
        for c in order:
            if report["kept"] >= count:
                break
            source = sources[c.fn.path]
            if c.fn.path not in trees:
                trees[c.fn.path] = mutants.fingerprint(source)
            if trees[c.fn.path] is None:
                continue  # nested too deep to compare trees: no mutant of it can be checked
            while (mutant := _pick(c, used, rng, hard)) is not None:
                mutated = mutants.check(mutant, source, trees[c.fn.path])
                if mutated is not None:
                    break
            if mutant is None or mutated is None:
                continue
            bug, control = tasks_for(repo, mutant, source, license=license, created=created)
            present = drafts.exists(root, bug["id"]) and drafts.exists(root, control["id"])
            if not present and tests is not None:
                report["tested"] += 1
                say(
                    f"testing mutant {report['tested']}: {mutant.path} {mutant.function} "
                    f"({mutant.operator})"
                )
                if not tests.catches(mutant.path, mutated):
                    report["dropped"] += 1
                    say("  every test passed: dropped")
                    continue
            used[mutant.operator] += 1
            report["kept"] += 1
            wrote = int(drafts.write(root, bug, {mutant.path: mutated}))
            wrote += drafts.write(root, control, {mutant.path: source})
            report["written"] += wrote > 0
            report["present"] += wrote == 0
            report["tasks"].append(
                {
                    "id": bug["id"],
                    "control": control["id"],
                    "path": mutant.path,
                    "function": mutant.function,
                    "operator": mutant.operator,
                    "level": mutant.level,
                    "lines": list(mutant.lines),
                }
            )
    finally:
        if tests is not None:
            tests.close()
    return report
