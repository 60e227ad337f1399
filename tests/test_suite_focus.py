"""A claim about a long file names its focus lines (``focus``, or the lines its ``why`` cites),
and every excerpt of that file holds them, at an offset that varies across epochs."""

import json
import re
from pathlib import Path

import pytest

from panelist.suite import excerpt, prompts
from panelist.suite.tasks import TaskInvalid, load_task, notices

LINES = 900
BIG = "".join(f"value_{n} = {n}\n" for n in range(1, LINES + 1))
EPOCHS = range(1, 301)


def write(root: Path, tid: str, doc: dict, text: str = BIG) -> Path:
    folder = root / tid
    (folder / "fixtures").mkdir(parents=True)
    (folder / "fixtures" / "big.py").write_text(text)
    (folder / "task.json").write_text(json.dumps(dict(
        {"id": tid, "kind": "claim", "answer": True, "prompt": "Claim: value_650 is 650.",
         "attach": ["big.py"]}, **doc)))
    return folder


def shown(task, epoch: int) -> list[int]:
    """The file's line numbers a prompt shows, in order."""
    text = prompts.text(task, epoch, prompts.focus_of(task, {task.id: task}))
    return [int(n) for n in re.findall(r"^\s*(\d+)\| ", text, re.M)]


@pytest.mark.parametrize("doc,focus", [
    ({"focus": "640-655"}, range(640, 656)),
    ({"focus": 700}, [700]),
    ({"focus": ["lines 120-121", 200]}, [120, 121, 200]),
    ({"why": "See line 650: it assigns 650, and lines 652-653 too."}, [650, 652, 653]),
    ({"why": "big.py:897 sets it (L899 does not)."}, [897, 899]),
    ({"focus": "1-3"}, [1, 2, 3]),
    ({"focus": f"{LINES - 2}-{LINES}"}, [LINES - 2, LINES - 1, LINES]),
])
def test_every_excerpt_holds_the_focus_lines_at_a_random_offset(tmp_path, doc, focus):
    task = load_task(write(tmp_path, "c", doc))
    (own,) = task.focus   # one entry per attached file
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


@pytest.mark.parametrize("doc,says", [
    ({"focus": "901"}, "past the end"),
    ({"focus": "10-400"}, "more than an excerpt shows"),
    ({"focus": "twelve"}, "is not a line"),
    ({"focus": "20-10"}, "is not a line"),
    ({"focus": True}, "is not a line"),
])
def test_a_focus_that_cannot_be_shown_is_refused(tmp_path, doc, says):
    with pytest.raises(TaskInvalid, match=says) as err:
        load_task(write(tmp_path, "c", doc))
    assert err.value.field == "focus"


def test_only_a_claim_names_its_focus(tmp_path):
    folder = write(tmp_path, "c", {"kind": "bug", "answer": [650], "focus": "640-655"})
    (folder / "task.json").write_text(json.dumps({
        "id": "c", "kind": "bug", "answer": [650], "focus": "640-655", "prompt": "Look.",
        "attach": ["big.py"]}))
    with pytest.raises(TaskInvalid) as err:
        load_task(folder)
    assert err.value.field == "focus" and "only a claim" in err.value.message


def test_a_long_claim_without_focus_is_warned_about(tmp_path):
    bare = load_task(write(tmp_path, "bare", {"why": "It is assigned where it is defined."}))
    far = load_task(write(tmp_path, "far", {"why": "line 10 and line 800 both matter"}))
    short = load_task(write(tmp_path, "short", {}, "x = 1\n" * 40))
    assert bare.focus == ((),) and far.focus == ((),)   # lines too far apart for one excerpt
    said = {n["task"]: n["message"] for n in notices([bare, far, short])}
    assert set(said) == {"bare", "far"} and "focus" in said["bare"]
