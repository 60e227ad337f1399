"""A suite task reads only files inside its own folder or a repository named on the command
line: regular files, within the size caps, read with a bounded read. A task that names anything
else is listed as broken with its reason, skipped by ``suite run`` with a warning, and none of
what it named reaches a model."""

import json
import os
from pathlib import Path

import pytest

from panelist.metrics.offload import main
from panelist.suite import prompts
from panelist.suite.taskfiles import MAX_FILE, MAX_TOTAL
from panelist.suite.tasks import STARTER, TaskInvalid, load_task, scan

SECRET = "SECRET-7f3a"  # every file a task must not read holds it
CODE = "def f(x):\n    return x + 1\n"


def task(root: Path, tid: str, files: dict[str, str] | None = None, **fields) -> Path:
    folder = root / tid
    (folder / "fixtures").mkdir(parents=True, exist_ok=True)
    for name, text in (files or {}).items():
        path = folder / "fixtures" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    doc = dict(
        {"id": tid, "kind": "claim", "prompt": f"Claim: {tid} adds one.", "answer": True}, **fields
    )
    (folder / "task.json").write_text(json.dumps(doc))
    return folder


@pytest.fixture()
def hostile(tmp_path, monkeypatch):
    """A tasks folder holding one good task and one task for every way out, and the
    repository a user would name on the command line. Returns (tasks root, repo, expected
    field per broken task)."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(SECRET + "\n")
    fake_home = tmp_path / "fakehome"
    fake_home.mkdir()
    (fake_home / ".bashrc").write_text(f"export TOKEN={SECRET}\n")
    monkeypatch.setenv("HOME", str(fake_home))
    repo = tmp_path / "proj"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pkg" / "m.py").write_text("# in-repo-marker\n" + CODE)

    root = tmp_path / "data" / "suite" / "tasks"
    root.mkdir(parents=True)
    (root.parent / "secret.txt").write_text(SECRET + "\n")  # what "../.." reaches
    task(root, "good", {"m.py": "# good-marker\n" + CODE}, attach=["m.py"])
    task(root, "in-repo", repo=str(repo), attach=["pkg/m.py"])
    broken = {}
    broken["repo-root"] = "repo"
    task(root, "repo-root", repo="/", attach=[str(outside.relative_to("/") / "secret.txt")])
    broken["repo-home"] = "repo"
    task(root, "repo-home", repo="~", attach=[".bashrc"])
    broken["repo-up"] = "repo"
    task(root, "repo-up", repo="../..", attach=["secret.txt"])
    broken["repo-abs"] = "repo"
    task(root, "repo-abs", repo=str(outside), attach=["secret.txt"])
    broken["attach-abs"] = "attach"
    task(root, "attach-abs", attach=[str(outside / "secret.txt")])
    broken["attach-up"] = "attach"
    task(root, "attach-up", attach=["../../../../../outside/secret.txt"])
    broken["link-out"] = "attach"
    folder = task(root, "link-out", attach=["m.py"])
    (folder / "fixtures" / "m.py").symlink_to(outside / "secret.txt")
    broken["fixtures-link"] = "attach"
    folder = task(root, "fixtures-link", attach=["secret.txt"])
    (folder / "fixtures").rmdir()
    (folder / "fixtures").symlink_to(outside)
    broken["zero"] = "attach"
    folder = task(root, "zero", attach=["zero.py"])
    (folder / "fixtures" / "zero.py").symlink_to("/dev/zero")
    broken["dev-zero"] = "attach"  # /dev is named on the command line: still no device
    task(root, "dev-zero", repo="/dev", attach=["zero"])
    broken["fifo"] = "attach"
    folder = task(root, "fifo", attach=["f.py"])
    os.mkfifo(folder / "fixtures" / "f.py")
    broken["a-folder"] = "attach"
    folder = task(root, "a-folder", attach=["pkg"])
    (folder / "fixtures" / "pkg").mkdir()
    broken["big"] = "attach"
    task(
        root,
        "big",
        {"big.py": f"# {SECRET}\n" + "x = 1\n" * (MAX_FILE // 6 + 1)},
        attach=["big.py"],
    )
    broken["too-much"] = "attach"
    each = "y = 2\n" * (MAX_FILE // 6 - 10)
    names = [f"m{i}.py" for i in range(MAX_TOTAL // MAX_FILE + 1)]
    task(root, "too-much", {n: f"# {SECRET}\n" + each for n in names}, attach=names)
    broken["nul-attach"] = "attach"
    task(root, "nul-attach", attach=["m.py\0.txt"])
    broken["nul-repo"] = "repo"
    task(root, "nul-repo", repo="/\0", attach=["m.py"])
    broken["json-fifo"] = "task.json"
    (root / "json-fifo").mkdir()
    os.mkfifo(root / "json-fifo" / "task.json")
    broken["json-folder"] = "task.json"
    (root / "json-folder" / "task.json").mkdir(parents=True)
    broken["json-link"] = "task.json"
    (root / "json-link").mkdir()
    (outside / "task.json").write_text(
        json.dumps({"id": "json-link", "kind": "claim", "prompt": SECRET, "answer": True})
    )
    (root / "json-link" / "task.json").symlink_to(outside / "task.json")
    return root, repo, broken


def test_no_task_reads_outside_its_folder_or_a_named_repo(hostile):
    root, repo, broken = hostile
    found, problems = scan(root, repos=[repo, Path("/dev")])
    assert [t.id for t in found] == ["good", "in-repo"]
    by = {p.folder.name: p for p in problems}
    assert set(by) == set(broken)
    for tid, fieldname in broken.items():
        p = by[tid]
        assert p.field == fieldname, (tid, p.message)
        assert p.message.startswith(f"task {root / tid}: field '{fieldname}': "), p.message
        assert SECRET not in p.message
    # each says what to do
    assert "--repo" in by["repo-root"].message and "--repo" in by["repo-home"].message
    assert "link" in by["link-out"].message and "link" in by["fixtures-link"].message
    assert "link" in by["zero"].message
    assert "not a regular file" in by["dev-zero"].message
    assert "not a regular file" in by["fifo"].message
    assert "folder" in by["a-folder"].message
    assert f"{MAX_FILE:,}" in by["big"].message
    assert f"{MAX_TOTAL:,}" in by["too-much"].message
    texts = [prompts.text(t, 1) for t in found]
    assert not any(SECRET in t for t in texts)
    assert "in-repo-marker" in texts[1]


def test_a_repo_outside_the_task_is_read_only_when_named_on_the_command_line(hostile):
    root, repo, _ = hostile
    with pytest.raises(TaskInvalid) as err:
        load_task(root / "in-repo")
    assert err.value.field == "repo" and f"--repo {repo}" in err.value.message
    assert load_task(root / "in-repo", repos=[repo]).files[0].path == "pkg/m.py"
    # a repo inside the named one is inside it too; a named repo's neighbour is not
    assert load_task(root / "in-repo", repos=[repo.parent]).files[0].path == "pkg/m.py"
    with pytest.raises(TaskInvalid):
        load_task(root / "in-repo", repos=[repo.parent / "outside"])


def test_suite_list_lists_the_broken_tasks_with_their_reasons(hostile, capsys):
    root, repo, broken = hostile
    data = str(root.parent.parent)
    assert main(["suite", "list", "--data", data, "--repo", str(repo), "/dev", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    ids = {r["id"] for r in listed["data"]}
    assert {"good", "in-repo"} <= ids and not ids & set(broken)
    assert {p["task"]: p["field"] for p in listed["problems"]} == broken
    assert all(p["error"].startswith("task ") for p in listed["problems"])

    assert main(["suite", "list", "--data", data]) == 0
    out, err = capsys.readouterr()
    assert "good" in out and SECRET not in out + err
    for tid in [*broken, "in-repo"]:  # without --repo the in-repo task is broken too
        assert f"broken: task {root / tid}: field '" in err, tid


def test_suite_run_skips_broken_tasks_with_a_warning_and_sends_none_of_their_files(
    hostile, sim, home, capsys
):
    root, repo, broken = hostile
    assert root == home.grown_tasks  # the tasks sit in the data folder the run uses
    sim.script("fast", answer="VERDICT: TRUE")
    code = main(
        [
            "suite",
            "run",
            "--data",
            str(home.root),
            "--model",
            "fast",
            "--repo",
            str(repo),
            "/dev",
            "--json",
        ]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    summary = json.loads(out)["run"]
    asked = len(scan(STARTER)[0]) + 2
    assert summary["asked"] == asked and sim.count("fast") == asked
    sent = [r["body"]["messages"][0]["content"] for r in sim.requests]
    assert not any(SECRET in s for s in sent)
    assert any("good-marker" in s for s in sent) and any("in-repo-marker" in s for s in sent)
    for tid in broken:
        assert f"skipped: task {home.grown_tasks / tid}: field '" in err, tid

    # naming a broken task refuses the run with its reason
    code = main(
        ["suite", "run", "--data", str(home.root), "--model", "fast", "--task", "repo-home"]
    )
    out, err = capsys.readouterr()
    assert code == 1 and "field 'repo'" in err and "--repo" in err
    assert sim.count("fast") == asked


def test_a_named_repo_must_be_a_folder(tmp_path, capsys):
    code = main(
        ["suite", "list", "--data", str(tmp_path / "d"), "--repo", str(tmp_path / "nowhere")]
    )
    _, err = capsys.readouterr()
    assert code == 1 and "--repo" in err and "not a folder" in err
