"""Tasks written in the common field set other tools write load: every field that cannot be
mapped is named in one message, ``repo`` is a repository's name (looked up among those named
with --repo, else the task's fixtures/), ``X-bug`` pairs with ``X-control``, a bug without a
control is warned about, and one broken folder never keeps the others from running."""

import json
import os
from pathlib import Path

import pytest

from panelist.metrics.offload import main
from panelist.metrics.wire.errors import status_of
from panelist.suite import prompts, report
from panelist.suite.tasks import TaskInvalid, load_task, notices, scan

CODE = "def f(a, b):\n    return a - b\n\n\ndef g():\n    return 1\n"
LONG_CODE = "".join(f"x{n} = {n}\n" for n in range(1, 501))


def write(root: Path, tid: str, doc: dict, files: dict | None = None) -> Path:
    folder = root / tid
    (folder / "fixtures").mkdir(parents=True)
    for name, text in (files or {}).items():
        (folder / "fixtures" / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / "fixtures" / name).write_text(text)
    (folder / "task.json").write_text(json.dumps(dict({"id": tid}, **doc)))
    return folder


def test_every_field_that_cannot_be_mapped_is_named_in_one_message(tmp_path):
    folder = write(
        tmp_path,
        "many",
        {
            "shape": "design",
            "prompt": "Look.",
            "attach": ["m.py"],
            "tags": ["x"],
            "difficulty": "hard",
            "score_in": "whole_answer",
            "min_answer_chars": -1,
            "must_not_claim": [{"weight": 2}],
            "draft": "no",
        },
        {"m.py": CODE},
    )
    with pytest.raises(TaskInvalid) as err:
        load_task(folder)
    fields = {
        "tags",
        "difficulty",
        "shape",
        "score_in",
        "min_answer_chars",
        "must_not_claim",
        "draft",
    }
    assert set(err.value.fields) == fields
    said = err.value.message
    assert str(folder) in said and all(f"'{f}'" in said for f in fields)
    assert said.count(str(folder)) == 1, "one message for the task, not one per field"
    assert status_of(err.value) == 400
    # the fixes named, the task loads at the next attempt
    (folder / "task.json").write_text(
        json.dumps(
            {
                "id": "many",
                "shape": "review",
                "prompt": "Look.",
                "attach": ["m.py"],
                "must_find": "line 2",
                "score_in": "first_line",
                "min_answer_chars": 0,
            }
        )
    )
    assert load_task(folder).answer == (2,)


def test_a_task_with_one_problem_says_it_as_before(tmp_path):
    folder = write(
        tmp_path,
        "one",
        {"kind": "claim", "answer": True, "prompt": "Look.", "attach": ["gone.py"]},
        {"m.py": CODE},
    )
    with pytest.raises(TaskInvalid) as err:
        load_task(folder)
    assert err.value.fields == ("attach",) and "field 'attach'" in err.value.message


def test_a_regex_clause_is_the_lines_whose_strict_answer_it_accepts(tmp_path):
    folder = write(
        tmp_path,
        "rx-bug",
        {
            "prompt": "Look.",
            "attach": ["big.py"],
            "must_find": [{"regex": "line\\s*4[12]", "label": "the slip"}],
        },
        {"big.py": LONG_CODE},
    )
    t = load_task(folder)
    # "line 41" and "line 42", never "line 410" or "line 142"
    assert (t.kind, t.answer) == ("bug", (41, 42))
    wide = write(
        tmp_path,
        "wide-bug",
        {"prompt": "Look.", "attach": ["big.py"], "must_find": [{"regex": "line \\d+"}]},
        {"big.py": LONG_CODE},
    )
    with pytest.raises(TaskInvalid, match="accepts lines 1 to 500"):
        load_task(wide)


@pytest.fixture()
def layout(tmp_path):
    """Repositories as a user has them, and tasks that name them by name."""
    src = tmp_path / "src"
    for repo in ("proj", "other/lib"):
        (src / repo / "pkg").mkdir(parents=True)
        (src / repo / "pkg" / "m.py").write_text(f"# {repo}\n" + CODE)
    tasks = tmp_path / "tasks"
    common = {"prompt": "Review pkg/m.py.", "attach": ["pkg/m.py"]}
    write(tasks, "sub-bug", dict(common, repo="proj", must_find=["line 3"]))
    write(tasks, "sub-control", dict(common, repo="proj", shape="review", must_not_claim=["FAULT"]))
    write(
        tasks,
        "lib-claim",
        dict(common, repo="other/lib", shape="claim", must_find=[{"any_of": ["VERDICT: FALSE"]}]),
    )
    # shipped with copies of its files: runs without the repository
    write(
        tasks,
        "copied",
        dict(common, repo="elsewhere", shape="claim", must_find="VERDICT: TRUE"),
        {"pkg/m.py": "# copy\n" + CODE},
    )
    return src, tasks


def test_repo_is_a_name_looked_up_among_the_named_repositories(layout):
    src, tasks = layout
    found, problems = scan(tasks, repos=[src / "proj", src / "other" / "lib"])
    assert problems == []
    by = {t.id: t for t in found}
    assert by["sub-bug"].files[0].text.startswith("# proj")
    assert by["lib-claim"].files[0].text.startswith("# other/lib")
    assert by["copied"].files[0].text.startswith("# copy")
    assert (by["sub-bug"].kind, by["sub-bug"].answer, by["sub-bug"].pair) == ("bug", (3,), "sub")
    assert (by["sub-control"].kind, by["sub-control"].pair) == ("control", "sub")
    assert notices(found) == []


def test_a_repo_name_not_given_falls_back_to_fixtures_and_says_how_to_give_it(layout):
    src, tasks = layout
    found, problems = scan(tasks)  # no --repo at all
    assert {t.id for t in found} == {"copied"}
    by = {p.folder.name: p for p in problems}
    assert set(by) == {"sub-bug", "sub-control", "lib-claim"}
    assert (
        by["sub-bug"].field == "attach"
        and "--repo" in by["sub-bug"].message
        and "'proj'" in by["sub-bug"].message
    )
    # two repositories of the same name: the task must not guess which
    twin = src.parent / "twin" / "proj"
    (twin / "pkg").mkdir(parents=True)
    (twin / "pkg" / "m.py").write_text(CODE)
    _, problems = scan(tasks, repos=[src / "proj", twin])
    assert {p.folder.name for p in problems if p.field == "repo"} == {"sub-bug", "sub-control"}


def test_a_repo_name_never_reads_outside_the_task_or_a_named_repository(tmp_path):
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "m.py").write_text("TOKEN = 'sk-never-shown'\n")
    tasks = tmp_path / "tasks"
    folder = write(
        tasks,
        "sneaky",
        {
            "shape": "claim",
            "must_find": "VERDICT: TRUE",
            "prompt": "Look.",
            "repo": "inner",
            "attach": ["m.py"],
        },
    )
    os.symlink(secret, folder / "inner")  # a folder of the task's own that leads out
    with pytest.raises(TaskInvalid) as err:
        load_task(folder)
    assert err.value.field == "attach" and "sk-never" not in err.value.message
    repo = tmp_path / "proj"
    repo.mkdir()
    os.symlink(secret / "m.py", repo / "m.py")  # a link out of a named repository
    (folder / "task.json").write_text(
        json.dumps(
            {
                "id": "sneaky",
                "shape": "claim",
                "must_find": "VERDICT: TRUE",
                "prompt": "Look.",
                "repo": "proj",
                "attach": ["m.py"],
            }
        )
    )
    with pytest.raises(TaskInvalid, match="link out"):
        load_task(folder, repos=[repo])


def test_x_bug_pairs_with_x_control_and_a_lone_bug_is_warned_about(tmp_path):
    code = {"m.py": CODE}
    write(
        tmp_path,
        "a-bug",
        {"shape": "bug", "prompt": "Look.", "attach": ["m.py"], "must_find": "line 2"},
        code,
    )
    write(tmp_path, "a-control", {"prompt": "Look.", "attach": ["m.py"]}, code)
    write(tmp_path, "b-bug", {"prompt": "Look.", "attach": ["m.py"], "must_find": "line 2"}, code)
    found, problems = scan(tmp_path)
    assert problems == []
    by = {t.id: t for t in found}
    assert by["a-bug"].pair == by["a-control"].pair == "a"
    assert prompts.focus_of(by["a-control"], by) == ((2,),)  # the control's follows its bug
    (said,) = notices(found)
    assert (
        said["task"] == "b-bug"
        and "no control" in said["message"]
        and "'b-control'" in said["message"]
    )
    # "a" and "a-bug" would both claim "a-control": the second is refused, naming both
    write(
        tmp_path, "a", {"kind": "bug", "prompt": "Look.", "attach": ["m.py"], "answer": [2]}, code
    )
    found, problems = scan(tmp_path)
    (p,) = problems
    assert p.field == "id" and "'a'" in p.message and "'a-bug'" in p.message
    assert {t.id for t in found} == {"a", "a-control", "b-bug"}


def test_list_and_run_warn_of_a_lone_bug_and_skip_a_broken_folder(home, sim, capsys):
    sim.script("fast", answer="FAULT: line 2\n(simulated)")
    grown, code = home.grown_tasks, {"m.py": CODE}
    write(grown, "zz-bug", {"prompt": "Look.", "attach": ["m.py"], "must_find": "line 2"}, code)
    write(grown, "zz-control", {"prompt": "Look.", "attach": ["m.py"]}, code)
    write(grown, "zy-bug", {"prompt": "Look.", "attach": ["m.py"], "must_find": "line 2"}, code)
    broken = grown / "zx-broken"
    broken.mkdir()
    (broken / "task.json").write_text('{"id": "zx-broken", "shape": ')
    data = str(home.root)

    assert main(["suite", "list", "--data", data]) == 0
    out, err = capsys.readouterr()
    assert "zz-bug" in out and "broken: task" in err and "zx-broken" in err
    assert "warning: bug zy-bug has no control" in err
    assert main(["suite", "list", "--data", data, "--json"]) == 0
    listed = json.loads(capsys.readouterr()[0])
    assert [w["task"] for w in listed["warnings"]] == ["zy-bug"]
    assert [p["task"] for p in listed["problems"]] == ["zx-broken"]

    argv = ["suite", "run", "--data", data, "--model", "fast"]
    assert main([*argv, "--task", "zz-bug", "zz-control", "zy-bug"]) == 0
    out, err = capsys.readouterr()
    assert "warning: bug zy-bug has no control" in err
    assert "warning: no pair for zy-bug" in err  # the report's warning, after the table
    doc = report.load(home)
    (row,) = doc["models"]
    assert row["pairs"]["n"] == 1 and row["pairs"]["rate"] == 0.0  # always FAULT: no pair
    assert row["unpaired"] == ["zy-bug"]
    # a run of everything skips the broken folder with a warning and runs the rest
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert "skipped: task" in err and "zx-broken" in err
    assert report.load(home)["tasks"] > 3
