"""The suite report's headline columns, pairs and balanced claim accuracy, cannot be gamed: a
model that gives one answer whatever it is asked scores 50% or less on both, while plain
accuracy (and plain claim accuracy, when the keys are uneven) rewards it. The models are the
simulated upstream's, asked over real sockets."""

import json

from panelist.metrics.offload import main
from panelist.metrics.roster.roster import Roster
from panelist.suite import demo, report
from panelist.suite.runner import SuiteRun
from panelist.suite.tasks import STARTER, scan

PACK = {t.id: t for t in scan(STARTER)[0]}
PAIRS = ["std-bisect-left", "std-calendar-isleap", "std-heapq-siftup"]
TRUE_CLAIMS = sorted(t.id for t in PACK.values() if t.kind == "claim" and t.answer)[:3]
FALSE_CLAIM = sorted(t.id for t in PACK.values() if t.kind == "claim" and not t.answer)[0]
TASKS = [*PAIRS, *(p + "-control" for p in PAIRS), *TRUE_CLAIMS, FALSE_CLAIM]


def key_answer(t) -> str:
    if t.kind == "claim":
        return "VERDICT: TRUE" if t.answer else "VERDICT: FALSE"
    return f"FAULT: line {t.answer[0]}" if t.kind == "bug" else "NO FAULT"


def rules(answer_of):
    """Rules that answer each task by ``answer_of(task)``, told apart by the demo's markers."""
    return [
        {"contains": demo.marker(PACK[tid], PACK), "answer": answer_of(PACK[tid])} for tid in TASKS
    ]


def test_constant_strategies_score_at_most_half_on_the_headline(sim, home, capsys):
    # the shrewdest always-FAULT there is: the faulty line itself, on the bug and its control
    sim.script(
        "fast",
        rules=rules(lambda t: f"FAULT: line {PACK[t.pair].answer[0] if t.kind != 'claim' else 1}"),
    )
    sim.script("mid", answer="NO FAULT")
    sim.script("slow", answer="VERDICT: TRUE")
    sim.script("x-one", answer="VERDICT: FALSE")
    sim.script("x-two", rules=rules(key_answer))  # the oracle: the columns can reach 100%
    view = Roster(home).view()
    aliases = ["fast", "mid", "slow", "x-one", "x-two"]
    summary = SuiteRun(
        home,
        [PACK[t] for t in TASKS],
        [view.models[a] for a in aliases],
        known=PACK,
        admission=None,
        epochs=2,
    ).run()
    assert (summary["scored"], summary["failed"]) == (len(TASKS) * len(aliases) * 2, 0)

    doc = report.load(home)
    rows = {r["model"]: r for r in doc["models"]}
    constant = ["fast", "mid", "slow", "x-one"]
    for alias in constant:
        for name in report.HEADLINE:
            r = rows[alias][name]
            assert r["rate"] is None or r["rate"] <= 0.5, (alias, name, r)
    assert rows["fast"]["pairs"]["rate"] == 0.0 and rows["mid"]["pairs"]["rate"] == 0.0
    assert rows["slow"]["balanced"]["rate"] == 0.5 and rows["x-one"]["balanced"]["rate"] == 0.5
    # what the plain columns would have said of the same answers
    assert rows["fast"]["recall"]["rate"] == 1.0
    assert rows["slow"]["claims"]["rate"] == 0.75
    assert rows["x-two"]["pairs"]["rate"] == 1.0 and rows["x-two"]["balanced"]["rate"] == 1.0
    lo, hi = rows["slow"]["balanced"]["interval"]
    assert 0 <= lo < 0.5 < hi <= 1

    # the headline comes first, in the JSON and in the table, plain accuracy after it
    assert doc["headline"] == ["pairs", "balanced"]
    names = [k for k, v in rows["slow"].items() if isinstance(v, dict) and "rate" in v]
    assert names[:3] == ["pairs", "balanced", "accuracy"]
    assert main(["suite", "report", "--data", str(home.root)]) == 0
    out = capsys.readouterr()[0]
    head = out.splitlines()[0].split()
    assert head[:5] == ["MODEL", "SAMPLES", "PAIRS", "BALANCED", "ACCURACY"]
    assert main(["suite", "report", "--data", str(home.root), "--json"]) == 0
    body = json.loads(capsys.readouterr()[0])
    assert body["models"][0]["balanced"] == doc["models"][0]["balanced"]
    assert body["warnings"] == []


def test_a_bug_without_its_control_is_named_instead_of_a_silent_dash(sim, home, capsys):
    sim.script("fast", rules=rules(key_answer))
    view = Roster(home).view()
    tasks = [
        PACK["std-bisect-left"],
        PACK["std-calendar-isleap"],
        PACK["std-calendar-isleap-control"],
    ]
    SuiteRun(home, tasks, [view.models["fast"]], known=PACK, admission=None).run()
    doc = report.load(home)
    (row,) = doc["models"]
    assert row["unpaired"] == ["std-bisect-left"]
    assert row["pairs"]["n"] == 1 and row["recall"]["n"] == 1  # the paired one only
    (said,) = doc["warnings"]
    assert "std-bisect-left" in said and "-control" in said
    assert main(["suite", "report", "--data", str(home.root)]) == 0
    err = capsys.readouterr()[1]
    assert "warning: no pair for std-bisect-left" in err
