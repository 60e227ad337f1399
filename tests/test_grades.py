"""Grades: ordered weakest first, a pinned model per grade, the ceiling; `panelist grade`,
`GET /api/grades`, and the demo roster's pins."""

import json

import pytest

from conftest import read_jsonl
from panelist.metrics.roster import demo
from panelist.metrics.cli.main import main
from panelist.metrics.errors import ConfigInvalid, NotFound
from panelist.metrics.roster.grades import DEFAULT_ORDER, Grades
from panelist.metrics.home import open_home
from panelist.metrics.roster.roster import Roster


@pytest.fixture()
def graded(tmp_path):
    """A roster with two general models, one strong, one retired strong, one without grade."""
    home = open_home(tmp_path / "data")
    roster = Roster(home)
    roster.add_endpoint("ep", "http://127.0.0.1:9/v1")
    for alias, grade in (
        ("g1", "general"),
        ("g2", "general"),
        ("s1", "strong"),
        ("s-old", "strong"),
        ("plain", None),
    ):
        roster.add_model(alias, "ep", grade=grade)
    roster.retire("s-old")
    return home


def run(capsys, home, *argv):
    code = main([*argv, "--data", str(home.root)])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_new_data_folder_orders_the_demo_grades_with_no_pin(graded):
    grades = Grades(graded)
    assert grades.order() == list(DEFAULT_ORDER) == ["light", "general", "strong"]
    assert grades.pinned("general") is None and grades.ceiling() is None


def test_candidates_are_the_callable_models_of_the_grade(graded):
    view = Roster(graded).view()
    assert Grades.candidates("general", view) == ["g1", "g2"]
    assert Grades.candidates("strong", view) == ["s1"]  # the retired one is left out
    assert Grades.candidates("light", view) == []


def test_pin_and_ceiling_from_the_command_line(graded, capsys):
    code, out, _ = run(capsys, graded, "grade", "pin", "general", "g2")
    assert code == 0 and "grade general: pinned g2" in out
    change = read_jsonl(graded.file("changes.jsonl"))[-1]
    assert change["file"] == "grades.json" and change["what"] == "grade general pin"
    assert change["by"] == "cli" and change["old"] is None and change["new"] == "g2"
    grades = Grades(graded)
    assert grades.pinned("general") == "g2" and grades.ceiling() == "g2"
    run(capsys, graded, "grade", "pin", "strong", "s1")
    assert grades.ceiling() == "s1"  # the strongest pinned grade's model
    code, out, _ = run(capsys, graded, "grade", "ceiling", "g1")
    assert code == 0 and grades.ceiling() == "g1"
    code, out, _ = run(capsys, graded, "grade", "list", "--json")
    listing = json.loads(out)
    assert [g["grade"] for g in listing["grades"]] == ["light", "general", "strong"]
    assert [g["pinned"] for g in listing["grades"]] == [None, "g2", "s1"]
    assert listing["grades"][1]["models"] == ["g1", "g2"]
    assert listing["ceiling"] == {"alias": "g1", "set": True, "problem": None}
    code, out, _ = run(capsys, graded, "grade", "list")
    assert "general  g2" in out and "ceiling: g1 (set)" in out
    code, out, _ = run(capsys, graded, "grade", "ceiling", "--clear")
    assert code == 0 and "ceiling: s1" in out and grades.ceiling() == "s1"
    code, out, _ = run(capsys, graded, "grade", "pin", "strong", "--clear")
    assert code == 0 and grades.pinned("strong") is None and grades.ceiling() == "g2"


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (("pin", "general", "nobody"), "unknown model 'nobody'"),
        (
            ("pin", "strong", "g1"),
            "model 'g1' is of grade 'general', not 'strong'; pin a model of grade strong (s1)",
        ),
        (("pin", "general", "plain"), "model 'plain' has no grade, not 'general'"),
        (("pin", "huge", "g1"), "unknown grade 'huge'; the grades are light, general, strong"),
        (("pin", "strong", "s-old"), "model 's-old' is retired; restore it first"),
        (("pin", "general"), "give the model to pin"),
        (("ceiling", "nobody"), "unknown model 'nobody'"),
        (("order", "light,light"), "grade(s) light named twice"),
    ],
)
def test_a_refused_grade_change_says_why_and_writes_nothing(graded, capsys, argv, fragment):
    before = graded.file("grades.json").read_bytes()
    code, _, err = run(capsys, graded, "grade", *argv)
    assert code == 1 and fragment in err and err.count("\n") == 1
    assert graded.file("grades.json").read_bytes() == before


def test_a_new_order_drops_the_pins_of_grades_left_out(graded, capsys):
    grades = Grades(graded)
    grades.pin("strong", "s1")
    grades.pin("general", "g1")
    code, out, _ = run(capsys, graded, "grade", "order", "small,general,large", "--json")
    assert code == 0
    assert json.loads(out) == {"order": ["small", "general", "large"], "unpinned": ["strong"]}
    assert grades.pinned("general") == "g1" and grades.pinned("strong") is None
    assert grades.ceiling() == "g1"
    code, out, _ = run(capsys, graded, "grade", "list", "--json")
    assert json.loads(out)["unordered"] == ["strong"]


def test_a_pin_the_roster_changed_under_is_kept_and_flagged(graded):
    grades = Grades(graded)
    grades.pin("general", "g1")
    Roster(graded).retire("g1")
    assert grades.pinned("general") == "g1"
    (general,) = [g for g in grades.listing()["grades"] if g["grade"] == "general"]
    assert general["problem"] == "retired" and general["models"] == ["g2"]


def test_a_hand_broken_grades_file_is_named(graded):
    graded.file("grades.json").write_text('{"order": "strong"}')
    with pytest.raises(ConfigInvalid, match="'order' must list each grade"):
        Grades(graded).order()


def test_the_demo_roster_pins_a_model_per_grade(tmp_path):
    home = open_home(tmp_path / "data")
    demo.install(home, "http://127.0.0.1:9/v1")
    grades = Grades(home)
    assert {g: grades.pinned(g) for g in grades.order()} == demo.PINS
    assert grades.ceiling() == "sim-careful"
    assert Grades.candidates("general", Roster(home).view()) == [
        "sim-flaky",
        "sim-steady",
        "sim-vision",
    ]
    grades.pin("general", "sim-flaky")
    demo.install(home, "http://127.0.0.1:9/v1")  # the user's pin stands
    assert grades.pinned("general") == "sim-flaky"


def test_the_ceiling_refuses_an_unknown_model_in_python_too(graded):
    with pytest.raises(NotFound):
        Grades(graded).set_ceiling("nobody")
