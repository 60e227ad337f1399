"""The suite's strict parser and scorer, excerpts, and the report's symmetry: answering always
the same way never scores well."""

import pytest

from panelist.suite import answers, excerpt, prompts, report
from panelist.suite.tasks import STARTER, scan

TRICKY = [
    # (answer, what it says, the lines, the flag)
    ("VERDICT: TRUE", "true", (), ""),
    ("verdict: false", "false", (), ""),
    ("**VERDICT: FALSE.**", "false", (), ""),
    ("NO FAULT", "no_fault", (), ""),
    ("No fault.", "no_fault", (), ""),
    ("FAULT: line 12", "fault", (12,), ""),
    ("FAULT: lines 12-13", "fault", (12, 13), ""),
    ("Fault: Line 0153", "fault", (153,), ""),
    ("FAULT: line 12, 14 and line 20", "fault", (12, 14, 20), ""),
    ("FAULT: 7", "fault", (7,), ""),
    # fenced, with a reasoning block before it
    ("```\nFAULT: line 88\n```\nThe comparison admits equal items.", "fault", (88,), ""),
    (
        "<think>Could be line 3. VERDICT: FALSE?\nNo.</think>\n\nVERDICT: TRUE\nBecause…",
        "true",
        (),
        "",
    ),
    ("\n\n   \nNO FAULT\n", "no_fault", (), ""),
    # a fault answer quoting "503" later: the number is never a line
    ("FAULT: line 41\nIt returns 503 where the spec says 429.", "fault", (41,), ""),
    ("FAULT: line 41\nSame as FAULT: line 41 above.", "fault", (41,), ""),
    # ... but a number on the verdict line that is not a line is not read
    ('FAULT: line 41 returns "503"', None, (), "unparseable"),
    # hedges: both verdicts, on one line or two
    ("VERDICT: TRUE or FALSE", None, (), "unparseable"),
    ("VERDICT: TRUE/FALSE", None, (), "unparseable"),
    ("VERDICT: TRUE\nThough one could argue VERDICT: FALSE\nVERDICT: FALSE", None, (), "hedged"),
    ("FAULT: line 3\n\nNO FAULT", None, (), "hedged"),
    ("FAULT: line 3\nor maybe\nFAULT: line 9", None, (), "hedged"),
    # anything else
    ("Let me look at the code first.\nFAULT: line 3", None, (), "unparseable"),
    ("The verdict is TRUE", None, (), "unparseable"),
    ("FAULT: none", None, (), "unparseable"),
    ("FAULT: line 0", None, (), "unparseable"),
    ("FAULT: lines 1-100000", None, (), "unparseable"),
    ("<think>still thinking", None, (), "open_reasoning"),
    ("", None, (), "unparseable"),
    ("```python\nx = 1\n```\nNO FAULT", None, (), "unparseable"),
]


@pytest.mark.parametrize("text,verdict,lines,flag", TRICKY)
def test_the_parser_reads_only_the_strict_first_line(text, verdict, lines, flag):
    p = answers.parse(text)
    assert (p.verdict, p.lines, p.flag) == (verdict, lines, flag)


def test_a_bug_is_found_by_any_line_of_its_statement_and_never_by_a_wider_net():
    key = (41, 42)
    right = [
        answers.score("bug", key, a)
        for a in ("FAULT: line 41", "FAULT: line 42", "FAULT: lines 41-42")
    ]
    assert [s.right for s in right] == [True, True, True]
    wrong = [
        answers.score("bug", key, a)
        for a in (
            "FAULT: line 40",
            "FAULT: lines 40-42",
            "FAULT: lines 1-400",
            "NO FAULT",
            "VERDICT: TRUE",
            "FAULT: line 41\nNO FAULT",
        )
    ]
    assert [s.right for s in wrong] == [False] * 6
    assert [s.flag for s in wrong] == ["", "", "", "", "wrong_form", "hedged"]


def test_a_control_is_right_only_on_no_fault_and_a_claim_only_on_its_key():
    assert answers.score("control", None, "NO FAULT").right
    assert not answers.score("control", None, "FAULT: line 3").right
    assert answers.score("control", None, "VERDICT: FALSE").flag == "wrong_form"
    assert answers.score("claim", False, "VERDICT: FALSE").right
    assert not answers.score("claim", True, "VERDICT: FALSE").right
    assert answers.score("claim", True, "NO FAULT").flag == "wrong_form"


def test_an_answer_shorter_than_the_tasks_floor_is_flagged_and_scores_zero():
    s = answers.score("control", None, "NO FAULT", min_chars=40)
    assert (s.right, s.flag) == (False, "short")
    assert answers.score("control", None, "NO FAULT\n" + "because " * 5, min_chars=40).right


# -- symmetry ----------------------------------------------------------------------------------
def _samples(model, answer_of):
    tasks, _ = scan(STARTER)
    known = {t.id: t for t in tasks}
    out = []
    for epoch in (1, 2):
        for t in tasks:
            text = answer_of(t, known)
            s = answers.score(t.kind, t.answer, text)
            out.append(
                {
                    "task": t.id,
                    "task_hash": t.hash,
                    "task_kind": t.kind,
                    "pair": t.pair,
                    "epoch": epoch,
                    "model": model,
                    "outcome": "scored",
                    "failure": "",
                    "verdict": s.verdict,
                    "flag": s.flag,
                    "right": s.right,
                }
            )
    return out


def _oracle(t, known):
    if t.kind == "claim":
        return f"VERDICT: {'TRUE' if t.answer else 'FALSE'}"
    return f"FAULT: line {t.answer[0]}" if t.kind == "bug" else "NO FAULT"


def test_always_no_fault_and_always_fault_both_score_poorly():
    lazy = _samples("lazy", lambda t, k: "VERDICT: TRUE" if t.kind == "claim" else "NO FAULT")
    # the worst cheat: it claims a fault on the very lines a bug would be, on every control too
    eager = _samples(
        "eager",
        lambda t, k: (
            "VERDICT: FALSE" if t.kind == "claim" else f"FAULT: line {prompts.focus_of(t, k)[0][0]}"
        ),
    )
    oracle = _samples("oracle", _oracle)
    rows = {r["model"]: r for r in report.summarise(lazy + eager + oracle)["models"]}
    for name in ("lazy", "eager"):
        row = rows[name]
        assert row["pairs"]["rate"] == 0.0 and row["pairs"]["interval"][0] == 0.0
        assert row["accuracy"]["rate"] <= 0.5 and row["claims"]["rate"] == 0.5
    assert rows["lazy"]["recall"]["rate"] == 0.0 and rows["lazy"]["precision"]["rate"] is None
    assert rows["eager"]["recall"]["rate"] == 1.0 and rows["eager"]["precision"]["rate"] == 0.5
    good = rows["oracle"]
    assert [good[r]["rate"] for r in ("accuracy", "pairs", "precision", "recall", "claims")] == [
        1.0
    ] * 5 and good["unparseable"]["rate"] == 0.0
    # a rate's interval is over tasks (or pairs), not over the two epochs' samples
    assert good["pairs"]["n"] == 2 * good["pairs"]["tasks"]
    assert (
        good["pairs"]["interval"][0]
        < report.rate([(i, 1) for i in range(good["pairs"]["n"])])["interval"][0]
    )


def test_unparseable_answers_and_model_failures_count_against_the_model():
    samples = _samples("m", _oracle)
    bug = next(s for s in samples if s["task_kind"] == "bug")
    bug.update(verdict=None, flag="hedged", right=False)
    ctl = next(s for s in samples if s["task_kind"] == "control")
    ctl.update(verdict=None, flag="", right=False, failure="timeout")
    (row,) = report.summarise(samples)["models"]
    assert row["accuracy"]["hits"] == row["accuracy"]["n"] - 2
    assert row["recall"]["hits"] == row["recall"]["n"] - 1
    assert row["flags"] == {"hedged": 1} and row["failures"] == {"timeout": 1}
    assert row["unparseable"]["hits"] == 1 and row["unparseable"]["n"] == len(samples) - 1


# -- excerpts ----------------------------------------------------------------------------------
def _long(n=1000):
    return "".join(f"line{i} = {i}\n" for i in range(1, n + 1))


def test_an_excerpt_keeps_the_files_line_numbers_and_never_states_its_bounds():
    text = _long()
    shown = excerpt.render("big.py", text, focus=(500,), seed="pair|1|big.py")
    head, *rows = shown.splitlines()
    assert head == "===== FILE: big.py ====="
    assert len(rows) == excerpt.WINDOW
    numbers = [int(r.split("|", 1)[0]) for r in rows]
    assert numbers == list(range(numbers[0], numbers[0] + excerpt.WINDOW)) and 500 in numbers
    for r in rows:
        n, code = r.split("| ", 1)
        assert code == f"line{int(n)} = {int(n)}"  # each number is the file's own line
    assert "excerpt" not in shown.lower() and "1000" not in head


def test_where_the_fault_sits_in_the_excerpt_is_seeded_and_varies():
    text = _long()
    spans = {excerpt.span(1000, (500,), f"pair|{e}|big.py") for e in range(1, 40)}
    assert len(spans) > 10, "the fault is not always at the same place in the window"
    assert all(first + excerpt.MARGIN <= 500 <= last - excerpt.MARGIN for first, last in spans)
    again = excerpt.render("big.py", text, focus=(500,), seed="pair|3|big.py")
    assert again == excerpt.render("big.py", text, focus=(500,), seed="pair|3|big.py")


def test_short_files_are_whole_and_a_form_feed_does_not_shift_the_numbers():
    text = "a = 1\n\x0cb = 2\nc = 3\n"
    shown = excerpt.render("f.py", text)
    assert shown.split("\n")[1:] == ["    1| a = 1", "    2| \x0cb = 2", "    3| c = 3", ""]


def test_a_bug_and_its_control_show_the_same_window_in_the_same_epoch():
    tasks, _ = scan(STARTER)
    known = {t.id: t for t in tasks}
    bug, control = known["std-statistics-median"], known["std-statistics-median-control"]
    for epoch in (1, 2, 3):
        a = prompts.text(bug, epoch, prompts.focus_of(bug, known)).splitlines()
        b = prompts.text(control, epoch, prompts.focus_of(control, known)).splitlines()
        assert len(a) == len(b)
        assert [i for i, (x, y) in enumerate(zip(a, b)) if x != y] and sum(
            x != y for x, y in zip(a, b)
        ) == 1, "one line differs: the seeded change"
        assert f"{bug.answer[0]:>5}| " in "\n".join(a)
