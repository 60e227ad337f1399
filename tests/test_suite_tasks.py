"""Suite tasks: the starter pack loads and every key is checked against the code it is about;
the loader reads our fields and the common field set, and refuses what it cannot map, naming
the field."""

import difflib
import hashlib
import importlib.util
import json
import platform
import re
import sys
import sysconfig
import tomllib
from fnmatch import fnmatch
from pathlib import Path

import pytest

from panelist.metrics.errors import BadRequest
from panelist.suite import answers, prompts
from panelist.suite.tasks import STARTER, TaskInvalid, load_task, load_tasks, scan
from panelist.metrics.wire.errors import status_of

ROOT = Path(__file__).resolve().parent.parent
PACK, PROBLEMS = scan(STARTER)
BY_ID = {t.id: t for t in PACK}
BUGS = [t for t in PACK if t.kind == "bug"]
CLAIMS = [t for t in PACK if t.kind == "claim"]


def test_every_starter_task_loads_and_the_pack_is_big_enough():
    assert PROBLEMS == []
    controls = {t.id for t in PACK if t.kind == "control"}
    assert len(BUGS) >= 12 and {b.id + "-control" for b in BUGS} == controls
    assert len(CLAIMS) >= 8
    assert sum(c.answer for c in CLAIMS) * 2 == len(CLAIMS), "half the claims are true"
    for t in PACK:
        assert t.source and t.license and t.created and not t.draft, t.id
        assert t.files and all(f.text for f in t.files), t.id


@pytest.mark.parametrize("bug", BUGS, ids=lambda t: t.id)
def test_a_bugs_key_is_exactly_where_its_control_was_changed(bug):
    control = BY_ID[bug.id + "-control"]
    assert bug.prompt == control.prompt and [f.path for f in bug.files] == [
        f.path for f in control.files
    ], "the model cannot tell a bug from its control"
    ours = bug.files[0].text.split("\n")
    theirs = control.files[0].text.split("\n")
    changed = set()
    for op, a1, a2, b1, b2 in difflib.SequenceMatcher(
        None, theirs, ours, autojunk=False
    ).get_opcodes():
        if op != "equal":
            changed.update(range(b1 + 1, b2 + 1))
    assert changed and changed == set(bug.answer)
    # one seeded change: the rest of the file is the original's, byte for byte
    assert len(ours) == len(theirs)
    # and it parses as Python still: a realistic bug, not a broken file
    compile(bug.files[0].text, bug.files[0].path, "exec")


@pytest.mark.parametrize("bug", BUGS, ids=lambda t: t.id)
def test_a_control_is_the_stdlib_module_byte_for_byte(bug):
    control = BY_ID[bug.id + "-control"]
    blob = control.files[0].text.encode()
    m = re.fullmatch(r"CPython (3\.11\.\d+) Lib/(\S+) \(sha256 ([0-9a-f]{64})\)", control.source)
    assert m and control.license == "PSF-2.0" and m.group(2) == control.files[0].path
    assert hashlib.sha256(blob).hexdigest() == m.group(3)
    original = Path(sysconfig.get_paths()["stdlib"]) / m.group(2)
    if platform.python_version() == m.group(1) and original.exists():
        assert original.read_bytes() == blob


def _module(task, rel):
    """The claim's fixture, imported as a module of its own (the code the model is shown)."""
    path = task.folder / "fixtures" / rel
    name = "claim_fixture_" + re.sub(r"\W", "_", task.id)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[name]
    return module


def _raises(fn, exc) -> bool:
    try:
        fn()
    except exc:
        return True
    return False


def _no_tokens(m):
    from panelist.metrics.roster.roster import Model

    return m.call_cost(Model("a", "e", "a", "f", price_in=1.0, price_out=2.0), None) == 0.0


# each claim's fact, checked in the code the claim is about (its fixture)
FACTS = {
    "claim-wilson-all-useful": ("metrics/stats.py", lambda m: m.wilson(3, 3)[1] == 1.0),
    "claim-wilson-no-verdicts": (
        "metrics/stats.py",
        lambda m: _raises(lambda: m.wilson(0, 0), ValueError),
    ),
    "claim-jsonwire-surrogate": (
        "metrics/jsonwire.py",
        lambda m: _raises(lambda: m.loads('"\\ud800"'), m.JSONRefused),
    ),
    "claim-jsonwire-depth": (
        "metrics/jsonwire.py",
        lambda m: (
            _raises(lambda: m.loads("[" * 65 + "]" * 65), m.JSONRefused)
            and m.loads("[" * 64 + "]" * 64)
        ),
    ),
    "claim-plaintext-note-lines": (
        "metrics/plaintext.py",
        lambda m: m.first_control("a\tb\nc", lines=True) is None,
    ),
    "claim-plaintext-visible-bidi": (
        "metrics/plaintext.py",
        lambda m: m.visible("a\u202eb") == "ab",
    ),
    "claim-costs-no-tokens": ("metrics/costs.py", _no_tokens),
    "claim-ratelimit-retry-after": (
        "metrics/ratelimit.py",
        lambda m: m.RateCounter.retry_after(0.2) == "1",
    ),
}


def test_every_claim_has_its_fact_checked():
    assert set(FACTS) == {c.id for c in CLAIMS}


@pytest.mark.parametrize("claim", CLAIMS, ids=lambda t: t.id)
def test_a_claims_key_is_the_fact_in_its_code(claim):
    rel, fact = FACTS[claim.id]
    assert [f.path for f in claim.files] == [rel]
    assert bool(fact(_module(claim, rel))) is claim.answer


def test_the_pack_ships_with_the_package():
    conf = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert "panelist.suite" in conf["packages"]
    patterns = conf["package-data"]["panelist.suite"]
    base = ROOT / "suite"
    for path in (base / "tasks").rglob("*"):
        if path.is_file() and "__pycache__" not in path.parts:
            rel = path.relative_to(base).as_posix()
            assert any(fnmatch(rel, p.replace("**/", "")) or fnmatch(rel, p) for p in patterns), rel


# -- the loader --------------------------------------------------------------------------------
def write(root: Path, tid: str, doc: dict, files: dict | None = None) -> Path:
    folder = root / tid
    (folder / "fixtures").mkdir(parents=True)
    for name, text in (files or {}).items():
        (folder / "fixtures" / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / "fixtures" / name).write_text(text)
    (folder / "task.json").write_text(json.dumps(doc))
    return folder


CODE = {"m.py": "def f(a, b):\n    return a - b\n\n\ndef g():\n    return 1\n"}


def test_our_own_fields_load_with_their_key(tmp_path):
    t = load_task(
        write(
            tmp_path,
            "sub",
            {
                "id": "sub",
                "kind": "bug",
                "prompt": "Review m.py.",
                "attach": ["m.py"],
                "answer": [2],
                "why": "minus",
            },
            CODE,
        )
    )
    assert (t.kind, t.answer, t.pair, t.title, t.why) == ("bug", (2,), "sub", "sub", "minus")
    c = load_task(
        write(
            tmp_path,
            "sub-control",
            {"id": "sub-control", "kind": "control", "prompt": "Review m.py.", "attach": ["m.py"]},
            CODE,
        )
    )
    assert (c.kind, c.answer, c.pair) == ("control", None, "sub")
    assert "minus" not in prompts.text(t, 1) and "===== FILE: m.py =====" in prompts.text(t, 1)


def test_the_hash_follows_what_the_model_sees_and_the_key_only(tmp_path):
    doc = {"id": "h", "kind": "bug", "prompt": "Review m.py.", "attach": ["m.py"], "answer": [2]}
    base = load_task(write(tmp_path / "a", "h", doc, CODE)).hash
    assert (
        load_task(write(tmp_path / "b", "h", dict(doc, why="x", title="y", source="z"), CODE)).hash
        == base
    )
    assert load_task(write(tmp_path / "c", "h", dict(doc, answer=[5]), CODE)).hash != base
    assert load_task(write(tmp_path / "d", "h", doc, {"m.py": CODE["m.py"] + "#\n"})).hash != base


COMMON = [
    ({"shape": "review", "must_find": "line 2"}, "bug", (2,)),
    ({"shape": "bug", "must_find": [{"any_of": ["line 2", "lines 5-6"]}]}, "bug", (2, 5, 6)),
    ({"shape": "fault", "must_find": ["FAULT: line 0002"]}, "bug", (2,)),
    ({"shape": "claim", "must_find": ["VERDICT: TRUE"]}, "claim", True),
    ({"shape": "claim", "must_not_claim": "VERDICT: TRUE"}, "claim", False),
    ({"shape": "claim", "must_find": "false", "score_in": "first_line"}, "claim", False),
    # a regex clause is mapped by the strict answers it accepts, digits either side kept out
    ({"shape": "review", "must_find": [{"regex": "line\\s+2", "label": "the line"}]}, "bug", (2,)),
    ({"shape": "claim", "must_not_claim": [{"regex": "\\btrue\\b"}]}, "claim", False),
]


@pytest.mark.parametrize("fields,kind,key", COMMON)
def test_the_common_field_set_maps_onto_our_kinds(tmp_path, fields, kind, key):
    t = load_task(
        write(
            tmp_path, "t", dict({"id": "t", "prompt": "Look.", "attach": ["m.py"]}, **fields), CODE
        )
    )
    assert (t.kind, t.answer) == (kind, key)


def test_the_control_suffix_and_a_repo_with_attach_and_min_answer_chars(tmp_path):
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pkg" / "m.py").write_text(CODE["m.py"])
    t = load_task(
        write(
            tmp_path / "tasks",
            "sub-control",
            {
                "id": "sub-control",
                "shape": "review",
                "prompt": "Look.",
                "repo": str(repo),
                "attach": ["pkg/m.py"],
                "must_not_claim": ["FAULT"],
                "min_answer_chars": 30,
            },
        ),
        repos=[repo],
    )  # a repo outside the task is read only when named on the command line
    assert (t.kind, t.answer, t.files[0].path, t.min_answer_chars) == (
        "control",
        None,
        "pkg/m.py",
        30,
    )
    assert "===== FILE: pkg/m.py =====" in prompts.text(t, 1)
    assert answers.score(t.kind, t.answer, "NO FAULT", min_chars=t.min_answer_chars).flag == "short"


REFUSED = [
    ({"kind": "bug", "answer": [2], "shape": "review"}, "shape"),
    ({"kind": "bug", "answer": []}, "answer"),
    ({"kind": "bug", "answer": [99]}, "answer"),
    ({"kind": "bug", "answer": ["2"]}, "answer"),
    ({"kind": "claim", "answer": "yes"}, "answer"),
    ({"kind": "control", "answer": [2]}, "answer"),
    ({"kind": "maybe", "answer": True}, "kind"),
    ({"kind": "claim", "answer": True, "attach": ["../../etc/passwd"]}, "attach"),
    ({"kind": "claim", "answer": True, "attach": ["gone.py"]}, "attach"),
    ({"kind": "claim", "answer": True, "colour": "red"}, "colour"),
    ({"kind": "claim", "answer": True, "draft": "no"}, "draft"),
    ({"kind": "claim", "answer": True, "prompt": " "}, "prompt"),
    ({"kind": "claim", "answer": True, "id": "other"}, "id"),
    (
        {"shape": "review", "must_find": [{"regex": "off.by.one", "label": "the slip"}]},
        "must_find",
    ),  # a regex about words accepts no strict answer
    ({"shape": "review", "must_find": [{"regex": "line (", "label": "broken"}]}, "must_find"),
    ({"shape": "claim", "must_find": [{"regex": "verdict", "label": "either"}]}, "must_find"),
    ({"shape": "review", "must_find": ["the subtraction"]}, "must_find"),
    ({"shape": "review"}, "must_find"),
    ({"shape": "claim", "must_find": ["VERDICT: TRUE", "VERDICT: FALSE"]}, "must_find"),
    ({"shape": "design", "must_find": "x"}, "shape"),
    ({"must_find": "line 2"}, "shape"),
    ({"shape": "review", "must_find": "line 2", "score_in": "whole_answer"}, "score_in"),
    ({"shape": "review", "must_find": "line 2", "min_answer_chars": -1}, "min_answer_chars"),
    ({"shape": "review", "must_find": "line 2", "repo": "/nowhere/at/all"}, "repo"),
]


@pytest.mark.parametrize("fields,field", REFUSED)
def test_what_cannot_be_mapped_is_refused_naming_the_field(tmp_path, fields, field):
    doc = dict({"id": "t", "prompt": "Look.", "attach": ["m.py"]}, **fields)
    with pytest.raises(TaskInvalid) as err:
        load_task(write(tmp_path, "t", doc, CODE))
    assert err.value.field == field and f"'{field}'" in err.value.message
    assert status_of(err.value) == 400


def test_a_control_id_and_kind_must_agree(tmp_path):
    with pytest.raises(TaskInvalid, match="control"):
        load_task(
            write(
                tmp_path,
                "x-control",
                {
                    "id": "x-control",
                    "kind": "bug",
                    "answer": [1],
                    "prompt": "Look.",
                    "attach": ["m.py"],
                },
                CODE,
            )
        )


def test_drafts_run_only_when_named_and_an_unknown_id_is_refused(tmp_path):
    write(
        tmp_path,
        "a",
        {"id": "a", "kind": "claim", "answer": True, "prompt": "A?", "attach": ["m.py"]},
        CODE,
    )
    write(
        tmp_path,
        "b",
        {
            "id": "b",
            "kind": "claim",
            "answer": False,
            "prompt": "B?",
            "attach": ["m.py"],
            "draft": True,
        },
        CODE,
    )
    assert [t.id for t in load_tasks(tmp_path)] == ["a"]
    assert [t.id for t in load_tasks(tmp_path, ids=["b"])] == ["b"]
    with pytest.raises(BadRequest, match="panelist suite list"):
        load_tasks(tmp_path, ids=["c"])


def test_scan_reports_broken_folders_and_keeps_the_rest(tmp_path):
    write(
        tmp_path,
        "a",
        {"id": "a", "kind": "claim", "answer": True, "prompt": "A?", "attach": ["m.py"]},
        CODE,
    )
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "task.json").write_text("{not json")
    found, problems = scan(tmp_path)
    assert [t.id for t in found] == ["a"]
    assert len(problems) == 1 and "broken" in problems[0].message
