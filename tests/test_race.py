"""The race's Python API on the simulated upstream: reference, candidates, blind judge, report."""

import json
import logging
import threading

import pytest

from conftest import PATIENCE, read_jsonl, wait_until
from panelist.metrics.cli.main import main
from panelist.metrics.home import open_home
from panelist.metrics.race.benchmark import Benchmark, GradeBook, tool
from panelist.metrics.roster.roster import Roster
from panelist.metrics.seats import CallFailed
from panelist.metrics.race.transcript import as_text
from panelist.metrics.upstream.sim import SimUpstream
from test_seats import CountingAdmission

LOOKUP = {"name": "lookup_order", "arguments": {"number": "42"}}
JUDGE_SAYS = {"accuracy": 7, "shown_work": 3, "reason": "same facts, same answer"}

# alias -> (served id, family, endpoint, grade, price in, price out, currency)
MODELS = {
    "pinned-one": ("vendorx/pinned-large-v3", "pinnedfam", "alpha", "general", 2.0, 6.0, "USD"),
    "cheap-two": ("vendorx/cheap-small-v1", "cheapfam", "alpha", "general", 0.5, 1.0, "USD"),
    "skipper": ("vendory/skipper-mini", "skipfam", "beta", "general", 0.1, 0.2, "USD"),
    "euro-four": ("vendorz/euro-model-9", "eurofam", "gamma", "general", 0.2, 0.4, "EUR"),
    "retired-five": ("vendorx/retired-v0", "retfam", "alpha", "general", None, None, "USD"),
    "judge-top": ("vendorj/judge-ultra", "judgefam", "delta", "strong", 5.0, 15.0, "USD"),
}


@pytest.fixture()
def upstreams():
    """Four endpoints, each a simulated provider serving its models."""
    sims = {}
    try:
        for endpoint in ("alpha", "beta", "gamma", "delta"):
            sims[endpoint] = SimUpstream({}).start()
        yield sims
    finally:
        for s in sims.values():
            s.stop()


@pytest.fixture()
def race_home(tmp_path, upstreams):
    home = open_home(tmp_path / "data")
    roster = Roster(home)
    for name, sim in upstreams.items():
        roster.add_endpoint(name, sim.url)
    for alias, (served, family, endpoint, grade, p_in, p_out, cur) in MODELS.items():
        roster.add_model(
            alias,
            endpoint,
            served=served,
            family=family,
            grade=grade,
            price_in=p_in,
            price_out=p_out,
            currency=cur,
            retired=alias == "retired-five",
            tools=True,
        )
        tool_calls = [] if alias in ("skipper", "judge-top") else [LOOKUP]
        upstreams[endpoint].script(served, tool_calls=tool_calls, json=JUDGE_SAYS)
    return home


def sim_of(upstreams, alias):
    served, _, endpoint, *_ = MODELS[alias]
    return upstreams[endpoint], served


def grades(home, candidates=None):
    return GradeBook.plain(
        {"general": "pinned-one", "strong": "judge-top"}, "judge-top", Roster(home), candidates
    )


@tool({"type": "object", "properties": {"number": {"type": "string"}}, "required": ["number"]})
def lookup_order(number):
    """Find an order by its number."""
    return {"order": number, "status": "shipped", "eta": "Monday"}


class OrderJob:
    grade = "general"
    outputs: list = []

    def run(self, question, seat):
        text = seat.chat(
            [
                {"role": "system", "content": "You answer questions about orders."},
                {"role": "user", "content": question},
            ],
            tools=[lookup_order],
        )
        out = {"answer": text}
        self.outputs.append((seat.model.alias, out))
        return out


def bench_of(home, *, runs=1, candidates=None, **kw):
    bench = Benchmark(OrderJob, runs=runs, home=home, grades=grades(home), admission=None, **kw)
    bench.set_input("Where is order 42?")
    bench.set_rubric("States the order's status and when it arrives.")
    if candidates is not None:
        bench.set_candidates(candidates)
    return bench


def judge_requests(upstreams):
    sim, served = sim_of(upstreams, "judge-top")
    return [r["body"] for r in sim.requests if r["model"] == served]


@pytest.mark.slow
def test_the_reference_output_is_returned_unchanged_and_the_report_is_kept(race_home):
    class Parent:
        metadata = {}

    OrderJob.outputs = []
    bench = bench_of(race_home, candidates=["cheap-two"], parent=Parent())
    answer = bench.run()
    reference = next(out for alias, out in OrderJob.outputs if alias == "pinned-one")
    assert answer is reference, "what the reference returned, the very object"
    assert "The tools said" in answer["answer"]

    report = bench.report()
    assert Parent.metadata[Benchmark.REPORT] is report
    assert bench.metadata[Benchmark.REPORT] is report
    saved = json.loads((race_home.root / "runs" / "races" / f"{report.race}.json").read_text())
    assert saved["race"] == report.race and saved["pinned"] == "pinned-one"
    assert saved["reference"]["succeeded"] is True
    assert saved["reference"]["output"] == as_text(answer)
    assert [(r["model"], r["run"]) for r in saved["rows"]] == [("cheap-two", 1)]
    assert saved["rows"][0]["tool_difference"] == {
        "skipped": [],
        "different": [],
        "extra": [],
        "new_tool": [],
        "equivalent": [],
        "unused": [],
        "allowed": [],
    }
    assert saved["rows"][0]["accuracy"] == 7 and saved["rows"][0]["total"] == 10


@pytest.mark.slow
def test_a_candidate_that_skips_a_tool_is_told_to_the_judge_and_capped(race_home, upstreams):
    bench = bench_of(race_home, candidates=["skipper"])
    bench.run()
    (row,) = bench.report().rows
    assert row["tool_difference"]["skipped"] == [
        {"tool": "lookup_order", "arguments": {"number": "42"}, "reference_call": 1}
    ]
    assert row["accuracy"] <= 4 and row["capped_from"] == 7, "code caps what the judge gave"
    assert "capped at 4 from 7" in row["reason"]
    assert row["total"] == row["accuracy"] + row["shown_work"]
    both = judge_requests(upstreams)
    assert len(both) == 2, "judged with the reference first, and again with it second"
    for asked in both:
        assert "reference call 1 (lookup_order) was skipped" in asked["messages"][-1]["content"]
        assert asked["response_format"]["type"] == "json_schema"
        assert set(asked["response_format"]["json_schema"]["schema"]["required"]) == {
            "accuracy",
            "shown_work",
            "reason",
        }
        assert asked["temperature"] == 0 and isinstance(asked["seed"], int)


@pytest.mark.slow
def test_no_model_or_endpoint_identifier_reaches_the_judge(race_home, upstreams):
    bench = bench_of(race_home, candidates=["cheap-two", "skipper", "euro-four"])
    bench.run()
    view = Roster(race_home).view()
    forbidden = set()
    for alias in ("pinned-one", "cheap-two", "skipper", "euro-four"):
        model = view.models[alias]
        endpoint = view.endpoints[model.endpoint]
        host = endpoint.base_url.split("//")[1].split("/")[0]
        forbidden |= {alias, model.served, model.family, endpoint.name, endpoint.base_url, host}
    asked = judge_requests(upstreams)
    assert len(asked) == 6, "three runs, each judged in both orders"
    for body in asked:
        read = json.dumps(body["messages"]).lower()
        for name in forbidden:
            assert name.lower() not in read, f"{name!r} reached the judge"
    # what the runs said did reach it, masked: the simulated answers quote their served ids
    assert "[simulated [model]]" in asked[0]["messages"][-1]["content"]
    assert "shipped" in asked[0]["messages"][-1]["content"]


@pytest.mark.slow
def test_costs_come_from_prices_per_currency(race_home):
    bench = bench_of(race_home, candidates=["cheap-two", "euro-four"])
    bench.run()
    report = bench.report()
    prices = {alias: (m[4], m[5], m[6]) for alias, m in MODELS.items()}
    spent = {}
    for row in [report.reference, *report.rows]:
        p_in, p_out, currency = prices[row["model"]]
        cost = (row["tokens_in"] * p_in + row["tokens_out"] * p_out) / 1e6
        assert row["currency"] == currency
        assert row["cost"] == pytest.approx(cost)
        spent[currency] = spent.get(currency, 0) + cost
    calls = read_jsonl(report_path(race_home, report).parent / report.race / "calls.jsonl")
    judged = [c for c in calls if c["role"] == "judge"]
    spent["USD"] += sum(
        (c["tokens"]["prompt"] * 5 + c["tokens"]["completion"] * 15) / 1e6 for c in judged
    )
    assert report.costs["by_currency"] == pytest.approx(spent)
    assert set(report.costs["by_currency"]) == {"USD", "EUR"}, "never summed across currencies"
    # the pinned model was not raced here: there is nothing to compare with
    assert report.verdict["model"] is None and "pinned-one" in report.verdict["why"]


def report_path(home, report):
    return home.root / "runs" / "races" / f"{report.race}.json"


# the judge marks down an answer that never looked the order up (the skipper's), by its text
SKIPPER_SAYS = {"accuracy": 2, "shown_work": 1, "reason": "it never looked the order up"}


def discerning(upstreams):
    sim, served = sim_of(upstreams, "judge-top")
    sim.script(
        served,
        json=JUDGE_SAYS,
        json_rules=[{"contains": "no language model read your prompt", "answer": SKIPPER_SAYS}],
    )


@pytest.mark.slow
def test_a_judge_that_marks_every_run_alike_names_no_model(race_home):
    bench = bench_of(race_home, runs=3, candidates=["pinned-one", "cheap-two"])
    bench.run()
    report = bench.report()
    assert report.verdict["model"] is None
    assert report.verdict["state"] == "cannot_discriminate"
    assert "cannot tell the models apart" in report.table()


@pytest.mark.slow
def test_the_verdict_names_the_cheapest_model_shown_good_enough(race_home, upstreams):
    discerning(upstreams)
    # six runs: the first look of a job tests at 1.48% (alpha spent over five looks), and two
    # candidates under Holm's correction need six runs marked alike to pass it
    bench = bench_of(race_home, runs=6, candidates=["pinned-one", "cheap-two", "skipper"])
    bench.run()
    report = bench.report()
    said = report.verdict
    assert said["model"] == "cheap-two" and said["state"] == "named"
    assert said["test"]["margin"] == 1.0 and said["test"]["measures"] == ["accuracy"]
    assert said["test"]["unit"] == "run"
    by = {c["model"]: c for c in said["candidates"]}
    assert set(by) == {"cheap-two", "skipper"}, "the pinned model is the yardstick"
    assert by["skipper"]["result"] == "worse", "cheaper, but it skipped the tool"
    assert by["cheap-two"]["result"] == "good_enough"
    assert by["cheap-two"]["p"] <= by["cheap-two"]["p_holm"] <= said["test"]["level"] < 0.05
    table = report.table()
    verdict_line = next(line for line in table.splitlines() if line.startswith("verdict: "))
    assert verdict_line.startswith(
        "verdict: cheap-two: cheap-two is the cheapest model shown good enough"
    )
    assert "margin 1 point of 10" in table and "Holm" in table
    assert "skipper" in table.split("verdict: ")[0].split("test: ")[1], "a line per candidate"


@pytest.mark.slow
def test_too_few_runs_say_how_many_more_would_settle_it_and_name_no_model(race_home, upstreams):
    discerning(upstreams)
    bench = bench_of(race_home, runs=2, candidates=["pinned-one", "cheap-two", "skipper"])
    bench.run()
    said = bench.report().verdict
    assert said["model"] is None and said["state"] == "insufficient"
    low, high = said["needed"]["low"], said["needed"]["high"]
    assert said["needed"]["of"] == "runs" and 1 <= low < high
    assert f"{low} to {high} more run(s) of it and of the pinned model" in said["why"]
    # two runs of two candidates measure a spread (two degrees of freedom, pooled): the advice
    # says what it planned from
    assert said["needed"]["assumed"] is None and said["needed"]["df"] == 2
    assert "the 80% interval of the 0.58 seen, tempered by an assumed 2" in said["why"]
    table = bench.report().table()
    assert f"needs {low} to {high} more run(s)" in table
    assert "look 1 of 5 of this job, tested at 1.48%" in table


@pytest.mark.slow
def test_the_margin_is_the_races_own(race_home, upstreams):
    discerning(upstreams)
    bench = bench_of(race_home, runs=2, candidates=["pinned-one", "skipper"])
    bench.set_margin(5)
    bench.run()
    assert bench.report().verdict["test"]["margin"] == 5.0
    with pytest.raises(ValueError, match="points of 10"):
        bench.set_margin(0)


class AskJob:
    grade = "general"

    def run(self, question, seat):
        return seat.chat([{"role": "user", "content": question}])


QUESTIONS = ["Where is order 42?", "Has order 43 shipped yet?", "When does order 44 arrive?"]


@pytest.mark.slow
def test_a_race_takes_a_list_of_inputs_each_judged_against_its_own_reference(race_home, upstreams):
    bench = Benchmark(AskJob, runs=2, home=race_home, grades=grades(race_home), admission=None)
    bench.set_inputs(QUESTIONS).set_candidates(["pinned-one", "cheap-two"])
    answers = bench.run()
    assert len(answers) == 3, "what the reference returned, one per input"
    for question, answer in zip(QUESTIONS, answers):
        assert question in answer, "each reference ran on its own input"
    report = bench.report()
    assert report.inputs == QUESTIONS and report.task == QUESTIONS[0]
    assert [(r["input"], r["role"], r["succeeded"]) for r in report.references] == [
        (1, "reference", True),
        (2, "reference", True),
        (3, "reference", True),
    ]
    assert report.reference == report.references[0]
    assert sorted((r["model"], r["input"], r["run"]) for r in report.rows) == sorted(
        (m, i, n) for m in ("pinned-one", "cheap-two") for i in (1, 2, 3) for n in (1, 2)
    )
    assert "candidate.cheap-two.input2.run1" in {r["label"] for r in report.rows}
    assert report.verdict["test"]["unit"] == "input"
    # every judgement read one input and that input's reference, never another's
    asked = [b["messages"][-1]["content"] for b in judge_requests(upstreams)]
    assert len(asked) == 24, "12 runs, each judged in both orders"
    for question in QUESTIONS:
        theirs = [a for a in asked if question in a]
        assert len(theirs) == 8, question
        assert all(a.count(question) >= 2 for a in theirs), "the task and its reference"
        assert not any(other in a for a in theirs for other in QUESTIONS if other != question)
    calls = read_jsonl(report_path(race_home, report).parent / report.race / "calls.jsonl")
    assert sorted(c["input"] for c in calls if c["role"] == "reference") == [1, 2, 3]
    assert {c["input"] for c in calls if c["role"] in ("candidate", "judge")} == {1, 2, 3}
    saved = json.loads(report_path(race_home, report).read_text())
    assert saved["inputs"] == QUESTIONS and len(saved["references"]) == 3
    table = report.table()
    assert "3 input(s)" in table
    assert any(line.split()[:3] == ["model", "input", "run"] for line in table.splitlines())


@pytest.mark.slow
def test_a_reference_that_fails_on_one_input_stops_the_race_after_the_report(race_home):
    class FailsOnTheSecond(AskJob):
        def run(self, question, seat):
            if question == QUESTIONS[1] and seat.role == "reference":
                raise OrderMissing("no order 43")
            return super().run(question, seat)

    bench = Benchmark(
        FailsOnTheSecond, runs=2, home=race_home, grades=grades(race_home), admission=None
    )
    bench.set_inputs(QUESTIONS).set_candidates(["cheap-two"])
    with pytest.raises(OrderMissing, match="no order 43"):
        bench.run()
    report = bench.report()
    assert [r["succeeded"] for r in report.references] == [True, False, True]
    assert report.reference is report.references[1], "the reference that failed"
    assert report.rows == [] and report.verdict["model"] is None
    assert report.verdict["state"] == "reference_failed" and "input 2" in report.verdict["why"]


def test_inputs_are_a_list(race_home):
    bench = Benchmark(AskJob, home=race_home, grades=grades(race_home), admission=None)
    for bad in ("one input", [], None):
        with pytest.raises(TypeError, match="set_inputs takes a non-empty list"):
            bench.set_inputs(bad)


@pytest.mark.slow
def test_judge_failures_are_counted_per_model_and_shown(race_home, upstreams):
    sim, served = sim_of(upstreams, "judge-top")
    sim.script(
        served,
        json=JUDGE_SAYS,
        json_rules=[  # the skipper's runs, asked again
            {"contains": "no language model read your prompt", "answer": "not JSON"},
            {"contains": "cannot be used", "answer": "still not JSON"},
        ],
    )
    bench = bench_of(race_home, runs=2, candidates=["pinned-one", "skipper"])
    bench.run()
    report = bench.report()
    by = {m["model"]: m for m in report.models}
    assert by["skipper"]["judge_failures"] == 2 and by["skipper"]["judged"] == 0
    assert by["skipper"]["accuracy"] is None, "no mean over runs nobody judged"
    assert by["pinned-one"]["judge_failures"] == 0
    assert report.judge_failures == 2
    (skipper,) = report.verdict["candidates"]
    assert skipper["result"] == "unjudged" and "2 of its 2 runs were not judged" in skipper["why"]
    models_head = next(
        line
        for line in report.table().splitlines()
        if line.startswith("model") and "judged" in line
    )
    assert "judge failed" in models_head


@pytest.mark.slow
def test_a_failing_candidate_is_a_row_that_says_why(race_home, upstreams):
    sim, served = sim_of(upstreams, "cheap-two")
    sim.script(served, fail="auth")
    bench = bench_of(race_home, candidates=["cheap-two", "euro-four"])
    bench.run()
    failed, fine = bench.report().rows
    assert failed["model"] == "cheap-two" and failed["succeeded"] is False
    assert "CallFailed" in failed["error"] and "auth" in failed["error"]
    assert failed["reason"] == failed["error"] and failed["total"] is None
    assert fine["succeeded"] is True and fine["total"] == 10
    assert len(judge_requests(upstreams)) == 2, "a failed run is not judged"
    summary = {m["model"]: m for m in bench.report().models}["cheap-two"]
    assert summary["runs"] == 1 and summary["succeeded"] == 0


class OrderMissing(Exception):
    pass


class StrictJob(OrderJob):
    def run(self, question, seat):
        try:
            return super().run(question, seat)
        except CallFailed as exc:
            raise OrderMissing(f"could not look up the order: {exc.kind}") from exc


@pytest.mark.slow
def test_a_failing_reference_raises_the_jobs_exception_after_the_report(
    race_home, upstreams, caplog
):
    sim, served = sim_of(upstreams, "pinned-one")
    sim.script(served, fail="auth")
    bench = Benchmark(StrictJob, home=race_home, grades=grades(race_home), admission=None)
    bench.set_input("Where is order 42?")
    with (
        caplog.at_level(logging.INFO, logger="panelist.race"),
        pytest.raises(OrderMissing, match="auth"),
    ):
        bench.run()
    report = bench.report()
    saved = json.loads(report_path(race_home, report).read_text())
    assert saved["reference"]["succeeded"] is False
    assert "OrderMissing" in saved["reference"]["error"]
    assert saved["rows"] == [] and saved["verdict"]["model"] is None
    assert saved["verdict"]["state"] == "reference_failed"
    assert report.race in caplog.text and "FAILED" in caplog.text, "the table was logged"
    sim_c, served_c = sim_of(upstreams, "cheap-two")
    assert sim_c.count(served_c) == 0, "nothing raced against a reference that failed"


@pytest.mark.slow
def test_a_judge_answer_that_is_not_json_is_asked_again_then_a_judge_failure(race_home, upstreams):
    sim, served = sim_of(upstreams, "judge-top")
    sim.script(served, json="this is not JSON {")
    bench = bench_of(race_home, candidates=["cheap-two"])
    bench.run()
    (row,) = bench.report().rows
    assert sim.count(served) == 6, "each order tried three times in all, never a fourth"
    assert row["accuracy"] is None and row["total"] is None
    assert "judge failure" in row["judge_error"] and "not a JSON object" in row["judge_error"]
    assert bench.report().judge_failures == 1
    for again in judge_requests(upstreams)[2:]:
        assert again["messages"][-2] == {"role": "assistant", "content": "this is not JSON {"}
        assert "cannot be used" in again["messages"][-1]["content"]


@pytest.mark.slow
def test_a_judge_answer_out_of_range_then_valid_is_taken_on_the_second_ask(race_home, upstreams):
    sim, served = sim_of(upstreams, "judge-top")
    bad, good = (
        {"accuracy": 9, "shown_work": 3, "reason": "x"},
        {"accuracy": 5, "shown_work": 2, "reason": "close enough"},
    )
    sim.script(served, json=[bad, bad, good, good])  # both orders' first asks, then seconds
    bench = bench_of(race_home, candidates=["cheap-two"])
    bench.run()
    (row,) = bench.report().rows
    assert (row["accuracy"], row["shown_work"], row["total"]) == (5, 2, 7)
    assert row["judge_asks"] == 4 and row["judge_error"] is None
    assert [j["asks"] for j in row["judgements"]] == [2, 2]
    assert "'accuracy' is 9" in judge_requests(upstreams)[2]["messages"][-1]["content"]


@pytest.mark.slow
def test_runs_times_candidates_rows_and_the_call_log(race_home):
    bench = bench_of(race_home, runs=2)  # default candidates: every callable model of the grade
    bench.run()
    report = bench.report()
    expected = report.candidates
    assert sorted(expected) == ["cheap-two", "euro-four", "pinned-one", "skipper"], (
        "retired models and other grades are not raced"
    )
    assert [(r["model"], r["run"]) for r in report.rows] == [
        (m, n) for n in (1, 2) for m in expected
    ]
    assert all(r["total"] is not None for r in report.rows)
    assert [m["model"] for m in report.models] == expected
    assert all(m["judged"] == 2 and m["accuracy_interval"] is not None for m in report.models)

    calls = read_jsonl(report_path(race_home, report).parent / report.race / "calls.jsonl")
    assert all(c["race"] == report.race for c in calls)
    roles = [c["role"] for c in calls]
    assert roles.count("judge") == 16, "eight runs, each judged in both orders"
    assert roles.count("reference") == 2, "the reference called the model, then its tool"
    # the pinned model and both tool users call twice a run, the skipper once
    assert roles.count("candidate") == 2 * (2 + 2 + 1 + 2)
    assert {c["run"] for c in calls if c["role"] == "candidate"} == {1, 2}
    assert {c["run"] for c in calls if c["role"] == "reference"} == {0}
    assert progress_done(bench) == {"runs": 8, "done": 8, "judged": 8}


def progress_done(bench):
    return bench.progress()


@pytest.mark.slow
def test_tool_calls_are_recorded_with_what_they_returned_or_raised(race_home, upstreams):
    def broken(number):
        raise KeyError(f"no order {number}")

    class BrokenToolJob(OrderJob):
        def run(self, question, seat):
            return seat.chat(
                [{"role": "user", "content": question}],
                tools=[
                    (
                        broken,
                        {
                            "name": "lookup_order",
                            "parameters": {
                                "type": "object",
                                "properties": {"number": {"type": "string"}},
                            },
                        },
                    )
                ],
            )

    bench = Benchmark(BrokenToolJob, home=race_home, grades=grades(race_home), admission=None)
    bench.set_input("Where is order 42?").set_candidates(["cheap-two"])
    bench.run()
    events = bench.report().reference["transcript"]["events"]
    (used,) = [e for e in events if e["kind"] == "tool"]
    assert used == {
        "kind": "tool",
        "tool": "lookup_order",
        "arguments": {"number": "42"},
        "raised": "KeyError: 'no order 42'",
    }
    sim, served = sim_of(upstreams, "pinned-one")
    told = sim.requests[-1]["body"]["messages"][-1]
    assert told["role"] == "tool" and told["content"].startswith("error: KeyError")


@pytest.mark.slow
def test_the_scorer_runs_beside_the_judge(race_home):
    seen = []

    def scorer(reference, output):
        seen.append((reference, output))
        return 1.0 if reference == output else 0.0

    bench = bench_of(race_home, candidates=["cheap-two", "skipper"])
    bench.set_scorer(scorer)
    bench.run()
    cheap, skipper = bench.report().rows
    assert cheap["score"] == 0.0  # the simulated answer names its own model
    assert skipper["score"] == 0.0 and len(seen) == 2

    bench = bench_of(race_home, candidates=["cheap-two"])
    bench.set_scorer(lambda ref, out: 3)
    bench.run()
    (row,) = bench.report().rows
    assert row["score"] is None and "not a number from 0 to 1" in row["score_error"]
    assert row["total"] == 10, "the judge still ran"


@pytest.mark.slow
def test_candidates_are_paced_by_admission(race_home):
    admission = CountingAdmission(limit=1)
    bench = Benchmark(
        OrderJob, runs=2, home=race_home, grades=grades(race_home), admission=admission
    )
    bench.set_input("Where is order 42?").set_candidates(["cheap-two", "euro-four"])
    bench.run()
    assert all(r["succeeded"] for r in bench.report().rows)
    assert admission.most == 1
    # reference 2 calls, 4 runs × 2 calls, 4 runs judged in both orders
    assert admission.slots == 2 + 8 + 8


@pytest.mark.slow
def test_grades_are_read_through_the_grades_interface(race_home):
    class Grades:  # the shape metrics.roster.grades.Grades offers
        def pinned(self, grade):
            return {"general": "pinned-one"}.get(grade)

        def ceiling(self):
            return "judge-top"

        def candidates(self, grade, view):
            assert grade in view.models["pinned-one"].grade, "given the roster's view"
            return ["pinned-one", "cheap-two"]

    book = GradeBook.of(Grades(), Roster(race_home))
    assert Benchmark.candidates("general", grades=book) == ["pinned-one", "cheap-two"]
    bench = Benchmark(OrderJob, home=race_home, grades=book, admission=None)
    bench.set_input("Where is order 42?")
    bench.run()
    report = bench.report()
    assert (report.pinned, report.ceiling) == ("pinned-one", "judge-top")
    assert report.candidates == ["pinned-one", "cheap-two"]


def test_refusals_say_what_to_do(race_home):
    from panelist.metrics.errors import BadRequest, NotFound

    bench = Benchmark(OrderJob, home=race_home, grades=grades(race_home), admission=None)
    with pytest.raises(BadRequest, match="set_input"):
        bench.run()
    with pytest.raises(BadRequest, match="run\\(\\) first"):
        bench.report()
    bench.set_input("x")
    bench.grades = GradeBook.plain({}, "judge-top", Roster(race_home))
    with pytest.raises(NotFound, match="grade pin general"):
        bench.run()
    bench.grades = grades(race_home)
    bench.set_candidates(["nobody"])
    with pytest.raises(NotFound, match="'nobody'"):
        bench.run()
    with pytest.raises(ValueError, match="runs"):
        Benchmark(OrderJob, runs=0, home=race_home)
    with pytest.raises(TypeError, match="metadata"):
        Benchmark(OrderJob, parent=object(), home=race_home)


@pytest.mark.slow
def test_a_job_may_call_its_seat_from_threads(race_home):
    class TwoAtOnce(OrderJob):
        def run(self, question, seat):
            out = [None, None]

            def ask(i):
                out[i] = seat.chat([{"role": "user", "content": f"{question} ({i})"}])

            threads = [threading.Thread(target=ask, args=(i,)) for i in (0, 1)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            return out

    bench = Benchmark(TwoAtOnce, home=race_home, grades=grades(race_home), admission=None)
    bench.set_input("Hello").set_candidates(["cheap-two"])
    assert len(bench.run()) == 2
    assert bench.report().reference["model_calls"] == 2


def test_the_tool_difference_names_skipped_different_and_extra_calls():
    from panelist.metrics.race.tooldiff import differs, tool_difference

    ref = [
        {"tool": "lookup", "arguments": {"n": 1}, "returned": "a1"},
        {"tool": "ship", "arguments": {"n": 1}, "returned": "shipped"},
        {"tool": "lookup", "arguments": {"n": 2}, "returned": "a2"},
    ]
    run = [
        {"tool": "ship", "arguments": {"n": 9}, "returned": "unknown order"},
        {"tool": "lookup", "arguments": {"n": 1}, "returned": "a1"},
        {"tool": "refund", "arguments": {}, "returned": "refund-7731"},
    ]
    diff = tool_difference(ref, run, output="refunded as refund-7731")
    # refund is a tool the reference never called: counted as such, whatever its result did
    assert diff == {
        "skipped": [{"tool": "lookup", "arguments": {"n": 2}, "reference_call": 3}],
        "different": [
            {
                "tool": "ship",
                "reference": {"n": 1},
                "run": {"n": 9},
                "call": 1,
                "reference_call": 2,
                "gaps": {"of": 1, "changed": [1], "added": [], "of_reference": 1, "missing": []},
            }
        ],
        "extra": [],
        "new_tool": [{"tool": "refund", "arguments": {}, "call": 3}],
        "equivalent": [],
        "unused": [],
        "allowed": [],
    }
    assert differs(diff)
    same = tool_difference(ref, list(reversed(ref)))
    assert not differs(same), "order is not compared; arguments are, as data"


def test_masking_replaces_whole_identifiers_only():
    from panelist.metrics.race.blind import Masker, Names
    from panelist.metrics.roster.roster import Endpoint, Model

    mask = Masker(
        Names.of(
            [Model("fast", "local", "org/Fast-7B", "fastfam")],
            [Endpoint("local", "http://10.0.0.5:8000/v1", "K")],
        )
    )
    said = mask("FAST said breakfast; org/fast-7b at http://10.0.0.5:8000/v1 via local")
    assert said == "[model] said breakfast; [model] at [endpoint] via [endpoint]"


@pytest.mark.slow
def test_a_price_only_the_catalog_knows_still_costs_the_run(race_home, upstreams):
    served, family, endpoint, grade, p_in, p_out, _ = MODELS["cheap-two"]
    Roster(race_home).add_model(
        "cheap-two", endpoint, served=served, family=family, grade=grade, tools=True
    )  # the typed prices are gone
    upstreams[endpoint].script(served, tool_calls=[LOOKUP], json=JUDGE_SAYS, price=[p_in, p_out])
    assert main(["catalog", "refresh", "--data", str(race_home.root)]) == 0
    bench = bench_of(race_home, candidates=["cheap-two"])
    bench.run()
    row = bench.report().rows[0]
    assert row["model"] == "cheap-two" and row["currency"] == "USD"
    assert row["cost"] == pytest.approx((row["tokens_in"] * p_in + row["tokens_out"] * p_out) / 1e6)


@pytest.mark.slow
def test_a_run_whose_job_is_stuck_is_a_row_that_says_so_and_the_race_ends(race_home):
    entered, stuck = threading.Event(), threading.Event()

    class StuckJob(OrderJob):
        def run(self, question, seat):
            if seat.model.alias == "cheap-two":  # its own code never returns (a hung tool)
                entered.set()
                stuck.wait(PATIENCE)
            return super().run(question, seat)

    bench = Benchmark(StuckJob, runs=1, home=race_home, grades=grades(race_home), admission=None)
    bench.set_input("Where is order 42?")
    bench.set_rubric("States the order's status and when it arrives.")
    bench.set_candidates(["cheap-two", "euro-four"])
    done = []
    racer = threading.Thread(target=lambda: done.append(bench.run()))
    racer.start()
    try:
        assert entered.wait(PATIENCE)
        assert wait_until(lambda: bench.progress()["done"] == 1)  # euro-four ended
        bench.cancel()  # as a closing server does
        racer.join(PATIENCE)
        assert not racer.is_alive(), "the race waited for a stuck job"
    finally:
        stuck.set()  # let the stuck job's thread end
        racer.join(PATIENCE)
    report = bench.report()
    assert len(done) == 1 and done[0]["answer"]  # run() returned the reference's output
    rows = {r["model"]: r for r in report.rows}
    assert rows["euro-four"]["succeeded"] is True
    stuck_row = rows["cheap-two"]
    assert stuck_row["succeeded"] is False
    assert "was cancelled" in stuck_row["error"] and "still working" in stuck_row["error"]
