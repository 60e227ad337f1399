"""The review suite's record as seating evidence: a model the suite found stronger is seated as
an explorer and picked ahead of an equal never judged, for the review shape only, and only
until it has 20 real verdicts for the shape."""

import json

from conftest import Gateway, read_jsonl, wait_until
from panelist.gateway import make_gateway
from panelist.metrics.ledger import suiteevidence
from panelist.metrics.roster.collection import Collections
from panelist.metrics.roster.roster import Roster
from test_pick import panels_logged, set_limits
from test_suite_run import FOUR, oracle_rules, suite

ASK = [{"role": "user", "content": "Is this patch safe to merge?"}]


def run_suite(home, sim, strong: list[str], weak: list[str]) -> None:
    """The suite's four tasks (one bug/control pair, two claims) asked of ``strong`` models that
    answer every key right and ``weak`` ones that always say NO FAULT (right only on the
    control, so the pair and both claims are wrong)."""
    for alias in strong:
        sim.script(alias, rules=oracle_rules())
    for alias in weak:
        sim.script(alias, answer="NO FAULT")
    summary = suite(home, strong + weak).run()
    assert summary["scored"] == len(FOUR) * len(strong + weak), summary
    lines = read_jsonl(home.suite_samples)
    right = {a: sum(s["right"] for s in lines if s["alias"] == a) for a in strong + weak}
    assert right == {**{a: 4 for a in strong}, **{a: 1 for a in weak}}
    for alias in strong + weak:  # from here on they answer chat as any simulated model
        sim.script(alias)


def collection(home, name, members, shape, reply="all"):
    Collections(home).save(Roster(home).view(), name, members, shape=shape, reply=reply)


def ask(gw, model):
    status, body, _ = gw.post("/v1/chat/completions", {"model": model, "messages": ASK})
    assert status == 200, body
    return body


def seated_line(home, panel):
    return next(
        r
        for r in read_jsonl(home.gateway_runs / "evidence.jsonl")
        if r.get("kind") == "seated" and r["panel"] == panel
    )


def test_a_better_suite_record_is_picked_first_among_unjudged_members(home, sim):
    set_limits(home, max_explorers=0)
    run_suite(home, sim, strong=["mid"], weak=["fast"])
    # members in the same order; unjudged, fast (the first) would be picked
    collection(home, "rev", ["fast", "mid"], "review", reply="pick")
    collection(home, "gen", ["fast", "mid"], "general", reply="pick")
    with Gateway(make_gateway(home, env={})) as gw:
        review = ask(gw, "bench/rev")
        general = ask(gw, "bench/gen")
        assert wait_until(
            lambda: (
                {review["bench"]["panel"], general["bench"]["panel"]} <= set(panels_logged(home))
            )
        )
    assert review["bench"]["picked"]["alias"] == "mid"
    assert review["choices"][0]["message"]["content"].startswith("[simulated mid]")
    # another shape knows nothing of the suite: the first member, as before
    assert general["bench"]["picked"]["alias"] == "fast"
    logged = panels_logged(home)
    assert logged[review["bench"]["panel"]]["picked"]["alias"] == "mid"
    assert logged[general["bench"]["panel"]]["picked"]["alias"] == "fast"


def test_a_better_suite_record_sits_first_among_explorers_for_review_only(home, sim):
    set_limits(home, max_explorers=1)
    # never seated, explorers go by weight then alias: x-one would come first
    run_suite(home, sim, strong=["x-three"], weak=["x-one", "x-two"])
    collection(home, "rev", ["fast"], "review")
    collection(home, "gen", ["fast"], "general")
    with Gateway(make_gateway(home, env={})) as gw:
        review = ask(gw, "bench/rev")["bench"]
        general = ask(gw, "bench/gen")["bench"]
    explorer = {
        b["panel"]: [s["alias"] for s in b["seats"] if s["seat"] == "explorer"]
        for b in (review, general)
    }
    assert explorer[review["panel"]] == ["x-three"]
    assert explorer[general["panel"]] == ["mid"]  # alias order, as without a suite
    assert seated_line(home, review["panel"])["aliases"] == ["fast", "x-three"]


def test_the_suite_no_longer_counts_once_a_model_has_20_real_verdicts(home, sim):
    set_limits(home, max_explorers=0)
    run_suite(home, sim, strong=[], weak=["mid"])
    collection(home, "rev", ["fast", "mid"], "review")
    with Gateway(make_gateway(home, env={})) as gw:
        # 11 useful and 9 not-useful real verdicts on mid: a rate of 12/22, above the 1/2 of
        # fast, never judged; counted with the suite's three wrong it would be 12/25, below
        for n in range(20):
            body = ask(gw, "bench/rev")
            call = next(s["call"] for s in body["bench"]["seats"] if s["alias"] == "mid")
            status, said, _ = gw.post("/bench/verdict", {"call": call, "useful": n < 11})
            assert status == 200, said
        picked = ask(gw, "bench/rev:pick")["bench"]
        assert wait_until(lambda: picked["panel"] in panels_logged(home))
    assert picked["picked"]["alias"] == "mid"
    verdicts = [
        r for r in read_jsonl(home.gateway_runs / "evidence.jsonl") if r.get("kind") == "verdict"
    ]
    assert len(verdicts) == 20


def test_nineteen_real_verdicts_still_count_the_suite(home, sim):
    set_limits(home, max_explorers=0)
    run_suite(home, sim, strong=[], weak=["mid"])
    collection(home, "rev", ["fast", "mid"], "review")
    with Gateway(make_gateway(home, env={})) as gw:
        # 11 useful, 8 not: 12/21 alone, 12/24 (a tie with fast, the first member) with the suite
        for n in range(19):
            body = ask(gw, "bench/rev")
            call = next(s["call"] for s in body["bench"]["seats"] if s["alias"] == "mid")
            assert gw.post("/bench/verdict", {"call": call, "useful": n < 11})[0] == 200
        picked = ask(gw, "bench/rev:pick")["bench"]
        assert wait_until(lambda: picked["panel"] in panels_logged(home))
    assert picked["picked"]["alias"] == "fast"


def test_the_record_counts_each_task_once_its_latest_version_and_follows_the_file(tmp_path):
    path = tmp_path / "samples.jsonl"

    def line(task, model, epoch, right, *, kind="claim", pair=None, digest="h1", outcome="scored"):
        return (
            json.dumps(
                {
                    "kind": "sample",
                    "task": task,
                    "task_hash": digest,
                    "task_kind": kind,
                    "pair": pair or task,
                    "model": model,
                    "epoch": epoch,
                    "right": right,
                    "outcome": outcome,
                }
            )
            + "\n"
        )

    path.write_text(
        # a claim right in 2 of 3 epochs: right once
        line("c1", "m", 1, True)
        + line("c1", "m", 2, True)
        + line("c1", "m", 3, False)
        # a pair: both halves right in epoch 1, the control wrong in epoch 2: a half, rounds up
        + line("b1", "m", 1, True, kind="bug", pair="b1")
        + line("b1-control", "m", 1, True, kind="control", pair="b1")
        + line("b1", "m", 2, True, kind="bug", pair="b1")
        + line("b1-control", "m", 2, False, kind="control", pair="b1")
        # a failed call never counts
        + line("c2", "m", 1, False, outcome="failed")
    )
    evidence = suiteevidence.SuiteEvidence(path)
    assert evidence.record() == {"m": (2, 2)}
    with open(path, "a") as f:  # c1 changed: its older version no longer counts
        f.write(line("c1", "m", 1, False, digest="h2") + line("c3", "n", 1, True))
    assert evidence.record() == {"m": (1, 2), "n": (1, 1)}
    path.write_text(line("c9", "n", 1, False))  # replaced: read again from its start
    assert evidence.record() == {"n": (0, 1)}


def test_the_merger_is_the_member_with_the_better_suite_record_for_review(home, sim):
    set_limits(home, max_explorers=0)
    run_suite(home, sim, strong=["mid"], weak=["fast"])
    collection(home, "rev", ["fast", "mid"], "review", reply="merged")
    collection(home, "gen", ["fast", "mid"], "general", reply="merged")
    with Gateway(make_gateway(home, env={})) as gw:
        review = ask(gw, "bench/rev")["bench"]
        general = ask(gw, "bench/gen")["bench"]
    assert review["merger"]["alias"] == "mid"
    assert general["merger"]["alias"] == "fast"  # no verdicts: the first member
    assert panels_logged(home)[review["panel"]]["merger"]["alias"] == "mid"
