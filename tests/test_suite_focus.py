"""A claim about a long file names its focus lines (``focus``, or the lines its ``why`` cites),
and every excerpt of that file holds them, at an offset that varies across epochs."""

import json
import re
from pathlib import Path

import pytest

from panelist.suite import excerpt, prompts
from panelist.suite.tasks import TaskInvalid, load_task, notices, scan

LINES = 900
BIG = "".join(f"value_{n} = {n}\n" for n in range(1, LINES + 1))
EPOCHS = range(1, 301)


def write(root: Path, tid: str, doc: dict, text: str = BIG) -> Path:
    folder = root / tid
    (folder / "fixtures").mkdir(parents=True)
    (folder / "fixtures" / "big.py").write_text(text)
    (folder / "task.json").write_text(
        json.dumps(
            dict(
                {
                    "id": tid,
                    "kind": "claim",
                    "answer": True,
                    "prompt": "Claim: value_650 is 650.",
                    "attach": ["big.py"],
                },
                **doc,
            )
        )
    )
    return folder


def shown(task, epoch: int) -> list[int]:
    """The file's line numbers a prompt shows, in order."""
    text = prompts.text(task, epoch, prompts.focus_of(task, {task.id: task}))
    return [int(n) for n in re.findall(r"^\s*(\d+)\| ", text, re.M)]


@pytest.mark.parametrize(
    "doc,focus",
    [
        ({"focus": "640-655"}, range(640, 656)),
        ({"focus": 700}, [700]),
        ({"focus": ["lines 120-121", 200]}, [120, 121, 200]),
        ({"why": "See line 650: it assigns 650, and lines 652-653 too."}, [650, 652, 653]),
        ({"why": "big.py:897 sets it (L899 does not)."}, [897, 899]),
        ({"focus": "1-3"}, [1, 2, 3]),
        ({"focus": f"{LINES - 2}-{LINES}"}, [LINES - 2, LINES - 1, LINES]),
    ],
)
def test_every_excerpt_holds_the_focus_lines_at_a_random_offset(tmp_path, doc, focus):
    task = load_task(write(tmp_path, "c", doc))
    (own,) = task.focus  # one entry per attached file
    assert set(focus) <= set(range(own[0], own[-1] + 1))
    starts = set()
    for epoch in EPOCHS:
        lines = shown(task, epoch)
        assert len(lines) == excerpt.WINDOW and lines == list(range(lines[0], lines[-1] + 1))
        assert set(focus) <= set(lines), (epoch, lines[0])
        starts.add(lines[0])
    # where the focus sits in the window says nothing: many offsets (unless the file's edge
    # leaves no room)
    if 150 < focus[0] < LINES - 150:
        assert len(starts) > 40
    # the same epoch always asks the same (a resumed run asks what it would have asked)
    assert shown(task, 7) == shown(task, 7)


def test_the_focus_moves_the_hash_only_where_it_moves_the_excerpt(tmp_path):
    a = load_task(write(tmp_path / "a", "c", {"focus": "640-655"}))
    b = load_task(write(tmp_path / "b", "c", {"focus": "100-110"}))
    assert a.hash != b.hash
    short = "x = 1\n" * 40
    c = load_task(write(tmp_path / "c", "c", {"focus": 3}, short))
    d = load_task(write(tmp_path / "d", "c", {}, short))
    assert c.hash == d.hash and prompts.text(c, 1) == prompts.text(d, 1)


@pytest.mark.parametrize(
    "doc,says",
    [
        ({"focus": "901"}, "past the end"),
        ({"focus": "10-400"}, "more than an excerpt shows"),
        ({"focus": "twelve"}, "is not a line"),
        ({"focus": "20-10"}, "is not a line"),
        ({"focus": True}, "is not a line"),
    ],
)
def test_a_focus_that_cannot_be_shown_is_refused(tmp_path, doc, says):
    with pytest.raises(TaskInvalid, match=says) as err:
        load_task(write(tmp_path, "c", doc))
    assert err.value.field == "focus"


def test_only_a_claim_names_its_focus(tmp_path):
    folder = write(tmp_path, "c", {"kind": "bug", "answer": [650], "focus": "640-655"})
    (folder / "task.json").write_text(
        json.dumps(
            {
                "id": "c",
                "kind": "bug",
                "answer": [650],
                "focus": "640-655",
                "prompt": "Look.",
                "attach": ["big.py"],
            }
        )
    )
    with pytest.raises(TaskInvalid) as err:
        load_task(folder)
    assert err.value.field == "focus" and "only a claim" in err.value.message


def test_a_long_claim_without_focus_is_warned_about(tmp_path):
    bare = load_task(write(tmp_path, "bare", {"why": "It is assigned where it is defined."}))
    far = load_task(write(tmp_path, "far", {"why": "line 10 and line 800 both matter"}))
    short = load_task(write(tmp_path, "short", {}, "x = 1\n" * 40))
    assert bare.focus == ((),) and far.focus == ((),)  # lines too far apart for one excerpt
    said = {n["task"]: n["message"] for n in notices([bare, far, short])}
    assert set(said) == {"bare", "far"} and "focus" in said["bare"]


# -- focus per attached file ---------------------------------------------------------------------

A_TEXT = "".join(f"alpha_{n} = {n}\n" for n in range(1, 701))


def write_two(root: Path, tid: str, doc: dict, second: str = BIG) -> Path:
    """A task attaching two files: a.py (700 lines) and b.py (``second``, 900 lines)."""
    folder = root / tid
    (folder / "fixtures").mkdir(parents=True)
    (folder / "fixtures" / "a.py").write_text(A_TEXT)
    (folder / "fixtures" / "b.py").write_text(second)
    (folder / "task.json").write_text(
        json.dumps(
            dict(
                {
                    "id": tid,
                    "kind": "claim",
                    "answer": True,
                    "prompt": "Claim: b's value_650 is 650.",
                    "attach": ["a.py", "b.py"],
                },
                **doc,
            )
        )
    )
    return folder


def shown_per_file(task, epoch: int, known=None) -> dict[str, list[int]]:
    """Per attached file, the line numbers a prompt shows of it."""
    known = known or {task.id: task}
    text = prompts.text(task, epoch, prompts.focus_of(task, known))
    out = {}
    for part in text.split("===== FILE: ")[1:]:
        path, body = part.split(" =====\n", 1)
        out[path] = [int(n) for n in re.findall(r"^\s*(\d+)\| ", body, re.M)]
    return out


@pytest.mark.parametrize(
    "doc,want",
    [
        (
            {"focus": {"a.py": "100-104", "b.py": "640-650"}},
            {"a.py": range(100, 105), "b.py": range(640, 651)},
        ),
        ({"focus": {"b.py": [650, "lines 655-656"]}}, {"b.py": [650, 655, 656]}),
        (
            {"why": "alpha is set at a.py:120, and b.py:650 reads it (b.py:652 too)."},
            {"a.py": [120], "b.py": [650, 652]},
        ),
    ],
)
def test_each_long_files_excerpt_holds_its_own_focus_lines(tmp_path, doc, want):
    task = load_task(write_two(tmp_path, "two", doc))
    starts = {path: set() for path in want}
    for epoch in EPOCHS:
        seen = shown_per_file(task, epoch)
        assert set(seen) == {"a.py", "b.py"}
        for path, lines in want.items():
            assert len(seen[path]) == excerpt.WINDOW and set(lines) <= set(seen[path]), (
                epoch,
                path,
            )
            starts[path].add(seen[path][0])
    assert all(len(s) > 40 for s in starts.values())  # at a random offset, file by file
    # a long file without focus lines is warned about by name; one with them is not
    said = [n["message"] for n in notices([task])]
    missing = {"a.py", "b.py"} - set(want)
    assert len(said) == len(missing) and all(
        any(f" {path} is over {excerpt.LONG} lines" in s for s in said) for path in missing
    )


def test_the_decisive_second_file_without_focus_is_warned_about_by_name(tmp_path):
    task = load_task(write_two(tmp_path, "two", {"focus": 300}))
    (said,) = notices([task])
    assert said["task"] == "two" and "b.py is over 300 lines and has no focus" in said["message"]
    assert '{"b.py": "120-134"}' in said["message"]  # how to give it
    # the same claim with b.py short: nothing to warn about
    short = load_task(write_two(tmp_path / "s", "two", {"focus": 300}, "x = 1\n" * 40))
    assert notices([short]) == []


def test_a_pair_with_two_long_files_shows_the_same_windows_holding_each_files_focus(tmp_path):
    for tid, doc in (
        ("p-bug", {"kind": "bug", "answer": [660], "focus": {"b.py": "300-305"}}),
        ("p-control", {"kind": "control", "answer": None}),
    ):
        write_two(tmp_path, tid, dict(doc, prompt="Review a.py, using b.py."))
    slip = A_TEXT.replace("alpha_660 = 660\n", "alpha_660 = 606\n")
    (tmp_path / "p-bug" / "fixtures" / "a.py").write_text(slip)
    found, problems = scan(tmp_path)
    assert problems == []
    by = {t.id: t for t in found}
    for epoch in range(1, 101):
        bug, control = (
            shown_per_file(by["p-bug"], epoch, by),
            shown_per_file(by["p-control"], epoch, by),
        )
        assert 660 in bug["a.py"] and set(range(300, 306)) <= set(bug["b.py"])
        assert bug == control  # both halves of the pair show the same windows
    assert notices(found) == []


@pytest.mark.parametrize(
    "doc,says",
    [
        ({"focus": {"c.py": 10}}, "'c.py' is none of the attached files"),
        ({"focus": {"b.py": "10-400"}}, "lines 10-400 of b.py are more than an excerpt shows"),
        ({"focus": {"b.py": 901}}, "past the end of b.py"),
        (
            {"kind": "bug", "answer": [5], "focus": {"a.py": 10}},
            "only a claim names the focus of its first file",
        ),
        (
            {"kind": "control", "answer": None, "focus": {"b.py": 10}},
            "a control's excerpts follow its bug's",
        ),
    ],
)
def test_a_focus_per_file_that_cannot_be_shown_is_refused(tmp_path, doc, says):
    tid = "t-control" if doc.get("kind") == "control" else "t"
    with pytest.raises(TaskInvalid) as err:
        load_task(write_two(tmp_path, tid, doc))
    assert err.value.field == "focus" and says in err.value.message, err.value.message


def test_a_second_files_focus_moves_the_hash_only_where_that_file_is_long(tmp_path):
    a = load_task(write_two(tmp_path / "a", "t", {"focus": {"b.py": "640-655"}}))
    b = load_task(write_two(tmp_path / "b", "t", {"focus": {"b.py": "100-110"}}))
    assert a.hash != b.hash
    short = "x = 1\n" * 40
    c = load_task(write_two(tmp_path / "c", "t", {"focus": {"b.py": 3}}, short))
    d = load_task(write_two(tmp_path / "d", "t", {}, short))
    assert c.hash == d.hash
