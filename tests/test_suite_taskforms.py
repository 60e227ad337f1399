"""Task fields other tools write, on small task folders of our own: an attached path read from
the task's copy in fixtures/, code carried in the prompt with its own line numbers, NO FAULT
and must_not_claim clauses checked against the key, provenance kept out of the hash, a
created date with a time, and ``suite list --json`` naming every folder that does not load."""

import json
from pathlib import Path

import pytest

from panelist.metrics.errors import BadRequest
from panelist.metrics.offload import main
from panelist.suite import answers, prompts
from panelist.suite.tasks import TaskInvalid, given_roots, load_task, scan

CODE = "def half(n):\n    return n // 3\n\n\ndef twice(n):\n    return n * 2\n"


def write(root: Path, tid: str, doc: dict, files: dict | None = None) -> Path:
    folder = root / tid
    (folder / "fixtures").mkdir(parents=True, exist_ok=True)
    for name, text in (files or {}).items():
        (folder / "fixtures" / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / "fixtures" / name).write_text(text)
    (folder / "task.json").write_text(json.dumps(dict({"id": tid}, **doc)))
    return folder


def numbered(first: int, lines: list[str]) -> str:
    return "\n".join(f"{n:>3}| {line}" for n, line in enumerate(lines, first))


BODY = [f"total_{n} = total_{n - 1} + {n}" for n in range(40, 70)]
FIXED = list(BODY)
FIXED[57 - 40] = "total_57 = total_56 + 57  # fixed"


def shown(lines: list[str]) -> str:
    return (
        "Code from a project, lines 40-69 of its file. Answer FAULT: line N or NO FAULT.\n\n"
        + numbered(40, lines)
    )


REAL = {
    "shape": "rebench",
    "source": "demo__proj-12",
    "upstream": "demo/proj",
    "source_url": "https://example.org/demo/proj/pull/12",
    "created": "2025-06-06 10:19:55",
    "license": "MIT",
    "score_in": "first_line",
    "min_answer_chars": 8,
}


# -- attached paths read from the task's copy ------------------------------------------------


def test_an_attached_path_not_there_is_read_from_the_tasks_copy(tmp_path):
    folder = write(
        tmp_path,
        "c",
        {
            "shape": "claim",
            "prompt": "Claim: half halves.",
            "repo": "fixtures",
            "attach": ["snapshot/m.py"],
            "must_find": [{"any_of": ["verdict: false"]}],
            "must_not_claim": ["verdict: true"],
        },
        {"m.py": CODE},
    )
    t = load_task(folder)
    assert (t.kind, t.answer) == ("claim", False)
    assert t.files[0].path == "snapshot/m.py" and t.files[0].text == CODE
    text = prompts.text(t, 1)
    assert "===== FILE: snapshot/m.py =====" in text and "    2|     return n // 3" in text
    # the same without "repo": looked for under fixtures/ first, then the copy by its name
    doc = json.loads((folder / "task.json").read_text())
    del doc["repo"]
    (folder / "task.json").write_text(json.dumps(doc))
    assert load_task(folder).files[0].text == CODE


def test_no_copy_two_paths_on_one_copy_and_a_named_repository_are_refused(tmp_path):
    gone = write(
        tmp_path,
        "gone",
        {"kind": "claim", "answer": True, "prompt": "Look.", "attach": ["snapshot/m.py"]},
    )
    with pytest.raises(TaskInvalid) as err:
        load_task(gone)
    assert err.value.field == "attach" and "fixtures/m.py" in err.value.message
    twice = write(
        tmp_path,
        "twice",
        {"kind": "claim", "answer": True, "prompt": "Look.", "attach": ["a/m.py", "b/m.py"]},
        {"m.py": CODE},
    )
    with pytest.raises(TaskInvalid, match="would both be read from fixtures/m.py"):
        load_task(twice)
    # a repository named on the command line is read as it is: no copy stands in for it
    repo = tmp_path / "proj"
    repo.mkdir()
    named = write(
        tmp_path,
        "named",
        {
            "kind": "claim",
            "answer": True,
            "prompt": "Look.",
            "repo": "proj",
            "attach": ["pkg/m.py"],
        },
        {"m.py": CODE},
    )
    with pytest.raises(TaskInvalid) as err:
        load_task(named, repos=[repo])
    assert err.value.field == "attach" and "repository 'proj'" in err.value.message
    # a copy that leads out of fixtures/ is never read
    secret = tmp_path / "secret.py"
    secret.write_text("TOKEN = 'never-shown'\n")
    out = write(
        tmp_path,
        "out",
        {"kind": "claim", "answer": True, "prompt": "Look.", "attach": ["snapshot/m.py"]},
    )
    (out / "fixtures" / "m.py").symlink_to(secret)
    with pytest.raises(TaskInvalid) as err:
        load_task(out)
    assert "link out" in err.value.message and "never-shown" not in err.value.message


# -- code carried in the prompt -----------------------------------------------------------------


def test_a_real_bug_pair_with_its_code_in_the_prompt_loads_and_scores(tmp_path):
    write(
        tmp_path,
        "proj-12-bug",
        dict(
            REAL,
            prompt=shown(BODY),
            must_find=[{"regex": r"^\W*fault:\s*line\s*(?:57)\b", "label": "fault: line 57"}],
            must_not_claim=["no fault"],
        ),
    )
    write(
        tmp_path,
        "proj-12-control",
        dict(
            REAL,
            prompt=shown(FIXED),
            must_find=[{"any_of": ["no fault"]}],
            must_not_claim=[{"regex": r"^\W*fault:\s*line", "label": "fault: line"}],
        ),
    )
    found, problems = scan(tmp_path)
    assert problems == []
    by = {t.id: t for t in found}
    bug, control = by["proj-12-bug"], by["proj-12-control"]
    assert (bug.kind, bug.answer, control.kind, control.answer) == ("bug", (57,), "control", None)
    assert bug.pair == control.pair == "proj-12"
    assert (bug.upstream, bug.source_url, bug.created) == (
        "demo/proj",
        "https://example.org/demo/proj/pull/12",
        "2025-06-06 10:19:55",
    )
    for t, said, right in (
        (bug, "FAULT: line 57", True),
        (bug, "FAULT: line 56", False),
        (bug, "NO FAULT", False),
        (control, "NO FAULT", True),
        (control, "FAULT: line 57", False),
    ):
        assert answers.score(t.kind, t.answer, said, min_chars=8).right is right, (t.id, said)
    text = prompts.text(bug, 3, prompts.focus_of(bug, by))
    assert text.startswith(shown(BODY)) and "===== FILE:" not in text


@pytest.mark.parametrize(
    "doc,fieldname,says",
    [
        # a key line the prompt does not number
        ({"must_find": ["line 75"]}, "must_find", "not among the lines the prompt numbers (40-69)"),
        # no code at all: neither attached nor numbered
        ({"prompt": "Find the fault.", "must_find": ["line 57"]}, "attach", "number the code"),
        # a must_not_claim that rejects the key
        (
            {"must_find": ["line 57"], "must_not_claim": [{"regex": "line 5[0-9]"}]},
            "must_not_claim",
            "'FAULT: line 57'",
        ),
        # both a line and NO FAULT
        ({"must_find": ["line 57", "no fault"]}, "must_find", "both a faulty line and NO FAULT"),
        ({"must_find": [{"regex": "(no fault|line 57)"}]}, "must_find", "accepts both NO FAULT"),
        # a date that is not one
        ({"must_find": ["line 57"], "created": "last June"}, "created", "is not a date"),
    ],
)
def test_a_bug_whose_key_cannot_stand_is_refused_with_what_to_fix(tmp_path, doc, fieldname, says):
    folder = write(tmp_path, "proj-12-bug", dict(REAL, prompt=shown(BODY)) | doc)
    with pytest.raises(TaskInvalid) as err:
        load_task(folder)
    assert fieldname in err.value.fields and says in err.value.message, err.value.message


def test_a_control_that_rejects_no_fault_or_names_a_line_is_refused(tmp_path):
    folder = write(
        tmp_path, "proj-12-control", dict(REAL, prompt=shown(FIXED), must_not_claim=["NO FAULT"])
    )
    with pytest.raises(TaskInvalid, match="rejects NO FAULT") as err:
        load_task(folder)
    assert err.value.field == "must_not_claim"
    folder = write(
        tmp_path / "b", "proj-12-control", dict(REAL, prompt=shown(FIXED), must_find=["line 57"])
    )
    with pytest.raises(TaskInvalid, match="no faulty line to find"):
        load_task(folder)
    # NO FAULT as a task's key makes it a control, and a control's id ends in -control
    folder = write(
        tmp_path / "c", "proj-12", dict(REAL, prompt=shown(FIXED), must_find=["no fault"])
    )
    with pytest.raises(TaskInvalid, match="rename it 'proj-12-control'"):
        load_task(folder)


def test_provenance_and_created_never_move_the_hash(tmp_path):
    a = load_task(
        write(tmp_path / "a", "p-bug", dict(REAL, prompt=shown(BODY), must_find=["line 57"]))
    )
    b = load_task(
        write(
            tmp_path / "b",
            "p-bug",
            dict(
                REAL,
                prompt=shown(BODY),
                must_find=["line 57"],
                upstream="else/where",
                source_url="https://example.org/other",
                created="2024-01-02",
                license="BSD-3-Clause",
            ),
        )
    )
    c = load_task(
        write(tmp_path / "c", "p-bug", dict(REAL, prompt=shown(FIXED), must_find=["line 57"]))
    )
    assert a.hash == b.hash and a.hash != c.hash


# -- where tasks are read from, and what does not load -----------------------------------------


def test_suite_list_names_each_folder_that_does_not_load_with_what_to_fix(tmp_path, capsys):
    root = tmp_path / "pack"
    write(root, "good-bug", dict(REAL, prompt=shown(BODY), must_find=["line 57"]))
    write(root, "good-control", dict(REAL, prompt=shown(FIXED)))
    write(
        root, "odd", dict(REAL, prompt=shown(BODY), must_find=["line 57"], shape="design", weight=3)
    )
    assert (
        main(["suite", "list", "--data", str(tmp_path / "d"), "--tasks", str(root), "--json"]) == 0
    )
    listed = json.loads(capsys.readouterr().out)
    assert [r["id"] for r in listed["data"]] == ["good-bug", "good-control"]
    assert listed["data"][0]["files"] == "(in its prompt)"
    (p,) = listed["problems"]
    assert p["task"] == "odd" and p["path"] == str(root / "odd")
    assert set(p["fields"]) == {"shape", "weight"}
    assert "'design' cannot be mapped; use one of" in p["message"] and "rebench" in p["message"]
    assert "not a task field" in p["message"]


def test_tasks_names_a_folder_of_task_folders(tmp_path):
    root = tmp_path / "pack"
    one = write(root, "good-bug", dict(REAL, prompt=shown(BODY), must_find=["line 57"]))
    assert given_roots([root]) == [root]
    with pytest.raises(BadRequest, match="one task's folder") as err:
        given_roots([one])
    assert str(root.resolve()) in str(err.value) and "--task good-bug" in str(err.value)
    with pytest.raises(BadRequest, match="is not a folder"):
        given_roots([tmp_path / "nowhere"])
