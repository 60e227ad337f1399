"""suite seed: mutants planted at exact positions, keyed by the changed statement, kept only when
the repository's tests notice them; bug/control pairs written as draft tasks, deterministically.

Repositories are made in tmp_path; their tests run for real (``python -m pytest`` in a copy)."""

import argparse
import difflib
import json
import textwrap
from pathlib import Path

import pytest

from panelist.metrics.cli.main import Out
from panelist.metrics.errors import BadRequest
from panelist.suite import mutants, seed as seeding

# -- the operators ------------------------------------------------------------------------------

OPERATOR_CASES = [
    # (source of a function body line, operator, a mutated text the operator offers)
    (
        "    if a  <  b:  # keep me\n        return a\n    return b\n",
        "compare",
        "    if a  <=  b:  # keep me\n",
    ),
    ("    return x == 0\n", "compare", "    return x != 0\n"),
    ("    return key not in seen\n", "compare", "    return key in seen\n"),
    ("    return items[-1]\n", "off_by_one", "    return items[-2]\n"),
    ("    return items[1:]\n", "off_by_one", "    return items[2:]\n"),
    ("    return [i for i in range(n)]\n", "off_by_one", "    return [i for i in range(n + 1)]\n"),
    ("    return items[:size]\n", "off_by_one", "    return items[:size - 1]\n"),
    ("    return divmod(total, count)\n", "swap_args", "    return divmod(count, total)\n"),
    ("    return ready and (not stale)\n", "not", "    return ready and (stale)\n"),
    ("    return ready and not stale\n", "and_or", "    return ready or not stale\n"),
    ("    return dict(strict=True)\n", "bool", "    return dict(strict=False)\n"),
]


def fn(body: str, args: str = "a, b, x, n, key, seen, items, size, total, count, ready, stale"):
    return f"def f({args}):\n{body}".encode()


@pytest.mark.parametrize("body,operator,expected", OPERATOR_CASES)
def test_each_operator_edits_only_its_node(body, operator, expected):
    source = fn(body)
    found = [
        m for f in mutants.functions("m.py", source) for m in f.mutants if m.operator == operator
    ]
    results = {m.apply(source): m for m in found}
    wanted = source.replace(body.split("\n")[0].encode() + b"\n", expected.encode(), 1)
    assert wanted in results, [r.decode() for r in results]
    m = results[wanted]
    assert mutants.check(m, source) == wanted
    assert m.lines == (2,)


def test_a_byte_order_mark_and_crlf_line_ends_are_kept():
    source = b"\xef\xbb\xbfdef f(a): return a < 2\r\n\r\ndef g(b):\r\n    return b > 1\r\n"
    mutated = {
        m.apply(source)
        for f in mutants.functions("m.py", source)
        for m in f.mutants
        if m.operator == "compare" and mutants.check(m, source)
    }
    assert mutated == {source.replace(b"a < 2", b"a <= 2"), source.replace(b"b > 1", b"b >= 1")}


def test_a_removed_call_is_keyed_by_the_lines_around_its_gap():
    source = textwrap.dedent("""\
        def save(path, data):
            check(data)

            # write it
            write(path,
                  data)
            return path
        """).encode()
    removals = [
        m
        for f in mutants.functions("m.py", source)
        for m in f.mutants
        if m.operator == "remove_call"
    ]
    assert [source[m.start : m.end] for m in removals] == [
        b"    check(data)\n",
        b"    write(path,\n          data)\n",
    ]
    write = removals[1]
    mutated = mutants.check(write, source)
    assert mutated.decode().splitlines() == [
        "def save(path, data):",
        "    check(data)",
        "",
        "    # write it",
        "    return path",
    ]
    assert write.lines == (2, 5)  # the code line above the gap, and what now follows it
    # a call that ends its block has nothing after the gap to point at: never removed
    assert all(source[m.start : m.end] != b"    return path\n" for m in removals)


def test_wrong_variable_takes_a_twin_bound_earlier():
    source = textwrap.dedent("""\
        def span(items, lo: int, hi: int):
            width = hi - lo
            return items[lo:hi], width
        """).encode()
    swaps = {
        (source[m.start : m.end], m.new)
        for f in mutants.functions("m.py", source)
        for m in f.mutants
        if m.operator == "wrong_var"
    }
    assert (b"lo", b"hi") in swaps and (b"hi", b"lo") in swaps
    assert not any(b"items" in pair for pair in swaps)  # no twin of the same kind


def test_only_function_bodies_are_mutated_and_never_inside_f_strings():
    source = textwrap.dedent("""\
        LIMIT = 3 < 4

        class Box:
            size = 1 + 1

            def show(self, n=1 + 1):
                return f"{n < 2}"
        """).encode()
    assert mutants.functions("m.py", source) == []


@pytest.mark.parametrize("module", ["bisect", "heapq", "textwrap"])
def test_every_mutant_of_a_real_module_is_sound(module):
    source = Path(__import__(module).__file__).read_bytes()
    before = mutants.fingerprint(source)
    found = [m for f in mutants.functions(f"{module}.py", source) for m in f.mutants]
    assert len({m.operator for m in found}) >= 4
    for m in found:
        mutated = mutants.check(m, source, before)
        assert mutated is not None, m
        assert_key_is_the_change(source, mutated, m.lines)


def assert_key_is_the_change(original: bytes, mutated: bytes, key) -> None:
    """The key holds every line the edit touched (numbered in the mutated file) or, for a
    removal, both lines bordering the gap."""
    a, b = original.split(b"\n"), mutated.split(b"\n")
    ops = [
        op
        for op in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
        if op[0] != "equal"
    ]
    assert len(ops) == 1, ops
    tag, i1, i2, j1, j2 = ops[0]
    if tag == "delete":
        # difflib may place an ambiguous gap a few lines off; the gap's bytes are gone either way
        assert len(b) == len(a) - (i2 - i1)
        assert min(key) <= j1 + 1 <= max(key) + 1
    else:
        assert tag == "replace" and i2 - i1 == j2 - j1
        assert set(range(j1 + 1, j2 + 1)) <= set(key)


# -- a repository -------------------------------------------------------------------------------


def write_tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def snapshot(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


TESTED_REPO = {
    "calc/__init__.py": "",
    # double_first has one mutant, which the test catches; unused is never called: dead code
    "calc/ops.py": """\
        def double_first(items):
            return items[0] * 2


        def unused(a, b):
            if a < b:
                return a
            return b
        """,
    "tests/test_ops.py": """\
        from calc.ops import double_first


        def test_double_first():
            assert double_first([3, 5]) == 6
        """,
}

RICH_REPO = {
    "pkg/__init__.py": "",
    "pkg/text.py": """\
        def window(items, start: int, stop: int):
            if start < 0 or stop > len(items):
                raise ValueError("out of range")
            return items[start:stop]


        def squash(words, sep=" "):
            out = []
            for i in range(len(words)):
                if not words[i]:
                    continue
                out.append(words[i].strip())
            return sep.join(out)


        class Counter:
            def __init__(self):
                self.seen = {}

            def add(self, key, n=1):
                if key in self.seen:
                    self.seen[key] += n
                else:
                    self.seen[key] = n
                return self.seen[key] >= 10
        """,
    "pkg/util.py": """\
        import os


        def ensure(path, mode):
            os.makedirs(path, exist_ok=True)
            os.chmod(path, mode)
            return path


        def between(x, lo, hi):
            return lo <= x and x < hi
        """,
    ".hidden/skip.py": "def hidden(a, b):\n    return a < b\n",
    "pkg/fixtures/sample.py": "def sample(a, b):\n    return a < b\n",
    "venv/pyvenv.cfg": "home = /usr\n",
    "venv/lib/site.py": "def env(a, b):\n    return a < b\n",
    "test_pkg.py": "def check(a, b):\n    return a < b\n",
}


def test_walk_leaves_out_tests_hidden_folders_and_venvs(tmp_path):
    repo = write_tree(
        tmp_path / "repo",
        dict(
            RICH_REPO,
            **{
                "tasks/seed-x/task.json": "{}",
                "tasks/mine.py": "def mine(a, b):\n    return a < b\n",
            },
        ),
    )
    # tasks written into the repository itself are not its code
    assert seeding.python_files(repo, leave_out=repo / "tasks") == [
        "pkg/__init__.py",
        "pkg/text.py",
        "pkg/util.py",
    ]
    assert "tasks/mine.py" in seeding.python_files(repo)
    assert seeding.has_tests(repo)  # test_pkg.py
    plain = write_tree(tmp_path / "plain", {"a.py": "def f(x):\n    return x < 1\n"})
    assert not seeding.has_tests(plain)


@pytest.mark.slow
def test_a_mutant_the_tests_miss_is_dropped_and_one_they_catch_is_kept(tmp_path):
    repo = write_tree(tmp_path / "repo", TESTED_REPO)
    before = snapshot(repo)
    out = tmp_path / "tasks"
    report = seeding.seed(repo, out, count=5, seed=3)
    assert report["tests"] == "ran"
    assert (report["tested"], report["dropped"], report["kept"]) == (2, 1, 1)
    [task] = report["tasks"]
    assert task["function"] == "double_first" and task["operator"] == "off_by_one"
    bug = json.loads((out / task["id"] / "task.json").read_text())
    control = json.loads((out / task["control"] / "task.json").read_text())
    original = (repo / "calc/ops.py").read_bytes()
    mutated = (out / task["id"] / "fixtures/calc/ops.py").read_bytes()
    assert (out / task["control"] / "fixtures/calc/ops.py").read_bytes() == original
    assert mutated == original.replace(b"items[0]", b"items[1]")
    assert bug["answer"] == [2] and bug["kind"] == "bug" and control["kind"] == "control"
    assert control["answer"] is None and control["id"] == bug["id"] + "-control"
    # the kept mutant changes behaviour: the repository's own test fails on it
    scope = {}
    exec(compile(mutated, "ops.py", "exec"), scope)
    assert scope["double_first"]([3, 5]) != 6
    assert snapshot(repo) == before  # the repository itself is never touched
    # the unused function's mutant was tried and dropped: no task names it
    assert not any("unused" in p.read_text() for p in out.glob("*/task.json"))


def test_pairs_are_keyed_at_the_change_and_controls_are_the_original(tmp_path):
    repo = write_tree(tmp_path / "repo", RICH_REPO)
    out = tmp_path / "tasks"
    report = seeding.seed(
        repo, out, count=20, seed=1, use_tests=False, license="MIT", created="2026-01-02"
    )
    assert report["tests"] == "off" and report["kept"] == report["functions"] == 5
    assert len({t["operator"] for t in report["tasks"]}) >= 4  # spread over the slips
    for t in report["tasks"]:
        bug = json.loads((out / t["id"] / "task.json").read_text())
        control = json.loads((out / t["control"] / "task.json").read_text())
        assert list(bug) == list(control) == list(seeding.drafts.FIELDS)
        assert bug["prompt"] == control["prompt"] and bug["attach"] == control["attach"] == [
            t["path"]
        ]
        assert bug["draft"] is control["draft"] is True
        assert bug["license"] == "MIT" and bug["created"] == "2026-01-02"
        assert str(repo) in bug["source"] and t["function"] in bug["source"]
        original = (repo / t["path"]).read_bytes()
        assert (out / t["control"] / "fixtures" / t["path"]).read_bytes() == original
        mutated = (out / t["id"] / "fixtures" / t["path"]).read_bytes()
        assert mutated != original
        assert_key_is_the_change(original, mutated, bug["answer"])


def test_the_same_seed_gives_the_same_tasks_and_seeding_again_writes_nothing(tmp_path):
    repo = write_tree(tmp_path / "repo", RICH_REPO)
    first = seeding.seed(repo, tmp_path / "a", count=3, seed=7, use_tests=False)
    second = seeding.seed(repo, tmp_path / "b", count=3, seed=7, use_tests=False)
    assert first["tasks"] == second["tasks"] and len(first["tasks"]) == 3
    assert snapshot(tmp_path / "a") == snapshot(tmp_path / "b")
    other = seeding.seed(repo, tmp_path / "c", count=3, seed=8, use_tests=False)
    assert other["tasks"] != first["tasks"]
    again = seeding.seed(repo, tmp_path / "a", count=3, seed=7, use_tests=False)
    assert again["tasks"] == first["tasks"]
    assert (again["written"], again["present"]) == (0, 3)
    assert snapshot(tmp_path / "a") == snapshot(tmp_path / "b")


def test_hard_takes_each_functions_subtlest_slip(tmp_path):
    repo = write_tree(tmp_path / "repo", RICH_REPO)
    report = seeding.seed(repo, tmp_path / "out", count=5, seed=2, hard=True, use_tests=False)
    top = {
        (f.path, f.name): max(m.level for m in f.mutants)
        for p in seeding.python_files(repo)
        for f in mutants.functions(p, (repo / p).read_bytes())
    }
    assert report["kept"] == 5
    for t in report["tasks"]:
        assert t["level"] == top[(t["path"], t["function"])]
    assert {t["level"] for t in report["tasks"]} == {2, 3}


@pytest.mark.slow
def test_tests_that_fail_untouched_stop_seeding_and_say_what_to_do(tmp_path):
    repo = write_tree(
        tmp_path / "repo",
        dict(TESTED_REPO, **{"tests/test_broken.py": "def test_broken():\n    assert False\n"}),
    )
    with pytest.raises(BadRequest, match="fail before any change.*--no-tests"):
        seeding.seed(repo, tmp_path / "out", count=1)
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_a_file_nested_too_deep_to_compare_is_passed_over(tmp_path):
    deep = "def chain(a):\n    return " + " + ".join(["a"] * 2000) + " < 1\n"
    repo = write_tree(
        tmp_path / "repo", {"deep.py": deep, "flat.py": "def flat(x):\n    return x < 1\n"}
    )
    report = seeding.seed(repo, tmp_path / "out", count=5, use_tests=False)
    assert [t["path"] for t in report["tasks"]] == ["flat.py"]


def test_a_fifo_or_an_oversized_file_is_passed_over_unread(tmp_path):
    import os
    from panelist.suite.taskfiles import MAX_FILE

    big = "def big(x):\n    return x < 1\n" + "# pad\n" * (MAX_FILE // 6)
    repo = write_tree(
        tmp_path / "repo", {"big.py": big, "flat.py": "def flat(x):\n    return x < 1\n"}
    )
    os.mkfifo(repo / "stuck.py")  # opening it to read would wait for a writer forever
    report = seeding.seed(repo, tmp_path / "out", count=5, use_tests=False)
    assert [t["path"] for t in report["tasks"]] == ["flat.py"]


def test_bad_repositories_are_refused_with_what_to_do(tmp_path):
    with pytest.raises(BadRequest, match="not a folder"):
        seeding.seed(tmp_path / "missing", tmp_path / "out")
    empty = write_tree(tmp_path / "empty", {"README.md": "nothing\n", "tests/test_x.py": ""})
    with pytest.raises(BadRequest, match="no function to mutate"):
        seeding.seed(empty, tmp_path / "out")


# -- the command --------------------------------------------------------------------------------


def parser():
    p = argparse.ArgumentParser()
    p.add_argument("--json", action="store_true")
    p.add_argument("--data")
    seeding.add_arguments(p)
    return p


@pytest.mark.slow
def test_the_command_writes_to_the_data_folder_and_reports(tmp_path, capsys):
    repo = write_tree(tmp_path / "repo", TESTED_REPO)
    data = tmp_path / "data"
    args = parser().parse_args(["--repo", str(repo), "--data", str(data), "--count", "2"])
    assert seeding.run(args, Out(False)) == 0
    said = capsys.readouterr()
    assert (
        "1 bug/control pair(s)" in said.out
        and "1 passed every test and were dropped" in said.out
        and "asked for 2" in said.out
    )
    assert "testing mutant" in said.err
    tasks = sorted(p.name for p in (data / "suite" / "tasks").iterdir())
    assert len(tasks) == 2 and tasks[1] == tasks[0] + "-control"
    args = parser().parse_args(["--repo", str(repo), "--data", str(data), "--count", "2", "--json"])
    assert seeding.run(args, Out(True)) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["written"], report["present"], report["tested"]) == (0, 1, 1)
    for bad, fragment in ((["--count", "0"], "--count"), (["--timeout", "0"], "--timeout")):
        args = parser().parse_args(["--repo", str(repo), "--data", str(data), *bad])
        with pytest.raises(BadRequest, match=fragment):
            seeding.run(args, Out(False))


def test_seeded_tasks_load_in_the_suite(tmp_path):
    from panelist.suite import tasks

    repo = write_tree(tmp_path / "repo", RICH_REPO)
    report = seeding.seed(repo, tmp_path / "out", count=5, seed=4, use_tests=False)
    loaded, problems = tasks.scan(tmp_path / "out")
    assert problems == [] and len(loaded) == 10
    by_id = {t.id: t for t in loaded}
    for t in report["tasks"]:
        assert by_id[t["id"]].answer == tuple(t["lines"]) and by_id[t["id"]].draft
        assert by_id[t["control"]].kind == "control"
