"""The starter tasks another tool ships (benchwarmers 0.3.3, installed by the test extra) load
as they are, through the same path a user takes (``suite list --tasks FOLDER``, ``suite run
--tasks FOLDER``): 18 tasks, no problem, five bug/control pairs, and each scored right on its
key and wrong off it. The pack is read where pip put it and never copied here."""

import importlib.metadata
import importlib.util
import json
from pathlib import Path

from conftest import read_jsonl
from panelist.metrics.offload import main
from panelist.suite import answers, demo, prompts
from panelist.suite.tasks import scan

PACKAGE, VERSION = "benchwarmers", "0.3.3"
PAIRS = {
    "rebench-matchms-809",
    "rebench-more-itertools-1028",
    "rebench-narwhals-2864",
    "rebench-quantecon-py-769",
    "rebench-scrapy-6867",
}


def pack_folder() -> Path:
    """The installed package's task folder. Its absence fails the test: CI installs the test
    extra, so a missing package is a broken environment, never a reason to skip."""
    spec = importlib.util.find_spec(PACKAGE)
    assert spec is not None and spec.submodule_search_locations, (
        f"{PACKAGE}=={VERSION} is not installed; install the test extra: pip install -e '.[test]'"
    )
    assert importlib.metadata.version(PACKAGE) == VERSION
    (where,) = [
        Path(p) / "suite" / "tasks"
        for p in spec.submodule_search_locations
        if (Path(p) / "suite" / "tasks").is_dir()
    ]
    return where


def state(folder: Path) -> dict:
    """Every file under ``folder``, with its size and modification time."""
    return {
        str(p): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def test_the_pack_loads_unmodified_as_18_tasks_in_5_pairs(tmp_path, capsys):
    folder = pack_folder()
    before = state(folder)
    assert (
        main(["suite", "list", "--data", str(tmp_path / "d"), "--tasks", str(folder), "--json"])
        == 0
    )
    listed = json.loads(capsys.readouterr().out)
    assert listed["problems"] == []
    rows = listed["data"]
    assert len(rows) == 18 and all(Path(r["folder"]).parent == folder for r in rows)
    kinds = {r["id"]: r["kind"] for r in rows}
    assert sorted(kinds.values()).count("claim") == 8
    for pair in PAIRS:
        assert kinds[f"{pair}-bug"] == "bug" and kinds[f"{pair}-control"] == "control"
    paired = {r["pair"] for r in rows if r["kind"] in ("bug", "control")}
    assert paired == PAIRS
    # no lone bug or control among the warnings; the long file of each claim that attaches
    # two files has no focus lines, and is named
    said = listed["warnings"]
    assert not any("has no control" in w["message"] or "has no bug" in w["message"] for w in said)
    assert {w["task"] for w in said} == {r["id"] for r in rows if ", " in r["files"]}
    assert all("snapshot/route.py is over 300 lines" in w["message"] for w in said)
    assert state(folder) == before  # read, never written


def test_each_task_is_right_on_its_key_and_wrong_off_it():
    found, problems = scan(pack_folder())
    assert problems == []
    by = {t.id: t for t in found}
    cases = {  # (task, answer): right?
        ("rebench-matchms-809-bug", "FAULT: line 112"): True,
        ("rebench-matchms-809-bug", "FAULT: line 111"): False,
        ("rebench-matchms-809-bug", "FAULT: line 1120"): False,
        ("rebench-matchms-809-bug", "NO FAULT"): False,
        ("rebench-matchms-809-control", "NO FAULT"): True,
        ("rebench-matchms-809-control", "FAULT: line 112"): False,
        ("rebench-narwhals-2864-bug", "FAULT: line 471"): True,
        ("rebench-narwhals-2864-bug", "FAULT: lines 470-472"): True,
        ("rebench-narwhals-2864-bug", "FAULT: lines 470-473"): False,
        ("claim-alias-unbound", "VERDICT: FALSE"): True,
        ("claim-alias-unbound", "VERDICT: TRUE"): False,
        ("claim-error-text-string", "VERDICT: TRUE"): True,
        ("claim-error-text-string", "NO FAULT"): False,  # the wrong form for a claim
    }
    for (tid, said), right in cases.items():
        t = by[tid]
        got = answers.score(t.kind, t.answer, f"{said}\nBecause.", min_chars=t.min_answer_chars)
        assert got.right is right, (tid, said, got)
    # the pack's floor on an answer's length holds: a bare "NO" is short, not a verdict
    t = by["rebench-matchms-809-control"]
    assert answers.score(t.kind, t.answer, "NO", min_chars=t.min_answer_chars).flag == "short"


def test_a_task_with_its_code_in_the_prompt_is_sent_as_written():
    found, _ = scan(pack_folder())
    by = {t.id: t for t in found}
    for pair in PAIRS:
        bug, control = by[f"{pair}-bug"], by[f"{pair}-control"]
        assert bug.files == () and control.files == ()
        text = prompts.text(bug, 1, prompts.focus_of(bug, by))
        assert text.startswith(bug.prompt.strip()) and "===== FILE:" not in text
        # the key's lines are numbers the prompt shows, and the pair differs on them
        assert set(bug.answer) <= set(bug.code)
        assert any(bug.code[n] != control.code.get(n) for n in bug.answer)
        assert bug.upstream and bug.source_url.startswith("https://") and bug.created


def test_a_run_of_the_pack_scores_each_model_on_the_keys(home, sim, tmp_path):
    folder = pack_folder()
    found, _ = scan(folder)
    by = {t.id: t for t in found}
    ids = ["rebench-scrapy-6867-bug", "rebench-scrapy-6867-control", "claim-sse-hang"]

    def says(t, right: bool) -> str:
        if t.kind == "claim":
            return f"VERDICT: {'TRUE' if t.answer == right else 'FALSE'}"
        if t.kind == "bug":
            return f"FAULT: line {t.answer[0] if right else t.answer[0] + 1}"
        return "NO FAULT" if right else f"FAULT: line {by[t.pair + '-bug'].answer[0]}"

    for alias, right in (("fast", True), ("mid", False)):
        sim.script(
            alias,
            rules=[
                {"contains": demo.marker(by[i], by), "answer": says(by[i], right) + "\n(simulated)"}
                for i in ids
            ],
        )
    assert (
        main(
            [
                "suite",
                "run",
                "--data",
                str(home.root),
                "--tasks",
                str(folder),
                "--model",
                "fast",
                "mid",
                "--task",
                *ids,
            ]
        )
        == 0
    )
    got = {(s["alias"], s["task"]): s for s in read_jsonl(home.suite_samples)}
    assert len(got) == 6
    for tid in ids:
        assert got[("fast", tid)]["right"] is True and got[("fast", tid)]["flag"] == ""
        assert got[("mid", tid)]["right"] is False and got[("mid", tid)]["flag"] == ""
