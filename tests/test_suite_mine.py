"""suite mine: verdicts posted to a real gateway become draft claim tasks (real claims true, false
claims false) with the request's files as fixtures; mining again writes nothing new."""

import argparse
import json

import pytest

from conftest import read_jsonl
from panelist.metrics.cli.main import Out
from panelist.suite import drafts, mine

CODE = "def add(a, b):\n    return a - b\n"
PROMPT = (
    "Review this change.\n\n"
    "===== FILE: app/calc.py =====\n" + CODE + "\n"
    "===== FILE: ../../etc/notes.txt =====\nkeep it simple\n"
)


def ask(gateway, content):
    status, body, _ = gateway.post(
        "/v1/chat/completions",
        {"model": "bench/trio", "messages": [{"role": "user", "content": content}]},
    )
    assert status == 200
    return [s["call"] for s in body["bench"]["seats"] if s["status"] == "ok"]


def judge(gateway, call, **verdict):
    status, got, _ = gateway.post("/bench/verdict", {"call": call, "useful": True, **verdict})
    assert status == 200, got


def snapshot(root):
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def tasks_by_claim(root):
    found = {}
    for path in root.glob("*/task.json"):
        task = json.loads(path.read_text())
        found[task["prompt"]] = task
    return found


def test_claims_become_draft_claim_tasks_with_the_requests_files(gateway, home):
    first, second, third = ask(gateway, PROMPT)[:3]
    judge(
        gateway,
        first,
        note="checked by running it",
        real=["add subtracts instead of adding"],
        false=["add is never called"],
    )
    judge(gateway, second, real=["a claim withdrawn later"])
    judge(gateway, second, useful=False)  # the last verdict wins: no claims
    judge(gateway, third)  # a verdict without claims
    root = home.grown_tasks
    report = mine.mine(home, root, created="2026-02-03")
    assert (report["verdicts"], report["claims"], report["written"]) == (1, 2, 2)
    tasks = tasks_by_claim(root)
    assert set(tasks) == {"Claim: add subtracts instead of adding", "Claim: add is never called"}
    real, false = (
        tasks["Claim: add subtracts instead of adding"],
        tasks["Claim: add is never called"],
    )
    assert real["answer"] is True and false["answer"] is False
    for task in (real, false):
        assert list(task) == list(drafts.FIELDS)
        assert task["kind"] == "claim" and task["draft"] is True
        assert task["created"] == "2026-02-03" and task["license"] == mine.LICENSE
        assert first in task["source"] and first in task["why"]
        assert "checked by running it" in task["why"]
        # the request's files, under their own path; one that would leave fixtures/ renamed
        assert task["attach"] == ["app/calc.py", "file2.txt"]
        folder = root / task["id"]
        assert (folder / "fixtures/app/calc.py").read_text() == CODE
        assert (folder / "fixtures/file2.txt").read_text() == "keep it simple\n"
        assert task["id"].startswith("mined-" + first.split(".")[0])


def test_mining_twice_writes_nothing_and_a_changed_verdict_updates_drafts_only(
    gateway, home, tmp_path
):
    [call] = ask(gateway, PROMPT)[:1]
    judge(gateway, call, real=["add subtracts"], false=["add is never called"])
    root = tmp_path / "tasks"
    assert mine.mine(home, root)["written"] == 2
    before = snapshot(root)
    again = mine.mine(home, root)
    assert (again["written"], again["present"], again["updated"]) == (0, 2, 0)
    assert snapshot(root) == before
    # the judge looks again: "add is never called" was real after all
    judge(gateway, call, real=["add subtracts", "add is never called"])
    moved = mine.mine(home, root)
    assert (moved["written"], moved["present"], moved["updated"]) == (0, 1, 1)
    task = tasks_by_claim(root)["Claim: add is never called"]
    assert task["answer"] is True and task["draft"] is True
    # someone reviews it; a newer verdict that disagrees leaves the reviewed task alone
    path = root / task["id"] / "task.json"
    path.write_text(json.dumps(dict(task, draft=False)))
    reviewed = path.read_bytes()
    judge(gateway, call, real=["add subtracts"], false=["add is never called"])
    report = mine.mine(home, root)
    assert report["reviewed"] == [task["id"]] and report["updated"] == 0
    assert path.read_bytes() == reviewed
    assert not list(root.glob(".*"))  # no temporary folder left behind


def test_a_prompt_without_file_headers_is_attached_whole(gateway, home, tmp_path):
    [call] = ask(gateway, "Is this safe? eval(input())")[:1]
    judge(gateway, call, false=["eval of input is safe"])
    root = tmp_path / "tasks"
    mine.mine(home, root)
    [task] = tasks_by_claim(root).values()
    assert task["attach"] == [mine.REQUEST] and task["answer"] is False
    logged = read_jsonl(home.gateway_runs / "calls.jsonl")[-1]["prompt"]
    assert (root / task["id"] / "fixtures" / mine.REQUEST).read_text() == logged


def test_the_command_mines_the_data_folder(gateway, home, capsys):
    [call] = ask(gateway, PROMPT)[:1]
    judge(gateway, call, real=["add subtracts"])
    p = argparse.ArgumentParser()
    p.add_argument("--json", action="store_true")
    p.add_argument("--data")
    mine.add_arguments(p)
    assert mine.run(p.parse_args(["--data", str(home.root)]), Out(False)) == 0
    said = capsys.readouterr().out
    assert "1 claim(s) in 1 verdict(s) with claims: 1 task(s) written" in said
    assert "draft" in said
    assert (
        mine.run(p.parse_args(["--data", str(home.root), "--json", "--license", "MIT"]), Out(True))
        == 0
    )
    report = json.loads(capsys.readouterr().out)
    assert (report["written"], report["present"]) == (0, 1)
    assert len(list((home.root / "suite" / "tasks").iterdir())) == 1


def test_no_verdicts_mine_nothing(folder, tmp_path):
    report = mine.mine(folder, tmp_path / "tasks")
    assert (report["verdicts"], report["claims"], report["written"]) == (0, 0, 0)


def test_the_latest_verdict_line_wins_and_a_torn_line_is_left(tmp_path):
    path = tmp_path / "evidence.jsonl"
    lines = [
        {"kind": "seat", "call": "p1.member1"},
        {"kind": "verdict", "call": "p1.member1", "real": ["a"]},
        {"kind": "verdict", "call": "p1.member2", "real": ["b"]},
        {"kind": "verdict", "call": "p1.member1", "real": []},
    ]
    blob = b"".join(
        json.dumps(r).replace(", ", ",").replace(": ", ":").encode() + b"\n" for r in lines
    )
    path.write_bytes(blob + b'{"kind":"verdict","call":"p1.member3","real":["c"]')
    found = mine.latest_verdicts(path)
    assert list(found) == ["p1.member1", "p1.member2"]
    assert found["p1.member1"] == blob.rindex(b'{"kind":"verdict","call":"p1.member1"')


@pytest.mark.parametrize(
    "shown,stored",
    [
        ("    1| def f():\n    2|     return 1\n", "def f():\n    return 1\n"),  # our margin
        ("  153| x = 1\n  154| y = 2\n", "  153| x = 1\n  154| y = 2\n"),  # an excerpt
        ("plain\n\n", "plain\n"),
    ],
)
def test_files_are_read_back_from_the_prompt(shown, stored):
    prompt = f"user: look\n===== FILE: a.py =====\n{shown}===== FILE: b.txt =====\nend"
    assert mine.files_in(prompt) == [("a.py", stored), ("b.txt", "end\n")]


def test_mined_tasks_load_in_the_suite(gateway, home):
    from panelist.suite import tasks

    [call] = ask(gateway, PROMPT)[:1]
    judge(gateway, call, real=["add subtracts"], false=["add adds"])
    mine.mine(home, home.grown_tasks)
    loaded, problems = tasks.scan(home.grown_tasks)
    assert problems == [] and sorted(t.answer for t in loaded) == [False, True]
    assert all(t.draft and t.files[0].text == CODE for t in loaded)


def test_a_request_past_the_loaders_caps_is_skipped_not_written(gateway, home, tmp_path):
    from panelist.metrics.roster.roster import Roster
    from panelist.suite.taskfiles import MAX_FILE, MAX_TOTAL

    for alias in ("fast", "mid", "slow"):  # windows that take the prompt
        Roster(home).add_model(alias, "sim", family=alias, context=2_000_000)
    chunk = "x = 1\n" * (MAX_FILE // 6 - 100)  # each file under the cap, together over it
    files = "".join(
        f"===== FILE: m{i}.py =====\n{chunk}" for i in range(MAX_TOTAL // len(chunk) + 1)
    )
    [call] = ask(gateway, "Review.\n" + files)[:1]
    judge(gateway, call, real=["x is 1"])
    root = tmp_path / "tasks"
    report = mine.mine(home, root)
    assert (report["too_large"], report["written"]) == (1, 0)
    assert "over 2,000,000 together" in mine.summary(report)
    assert not root.exists() or not any(root.iterdir())
