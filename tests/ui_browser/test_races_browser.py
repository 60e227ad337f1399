"""The Races page in a real browser, on a race of the demo roster that has finished."""

from __future__ import annotations

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture says why (a skip, or a failure when required)
    expect = None

from conftest import wait_until
from panelist.metrics.home import open_home
from panelist.metrics.roster.roster import Roster

# text a model echoes back: the page must show it as text, never run it
PROMPT = '<img src="x" onerror="window.__owned = 1"> Where is my order?'
CANDIDATES = ("sim-flaky", "sim-steady", "sim-vision")


def finished_demo_race(demo) -> str:
    """A race of grade general on the demo roster (its pins: sim-steady for general, the
    ceiling sim-careful), run to its end over POST /bench/race."""
    status, started = demo.post(
        "/bench/race",
        {"grade": "general", "prompt": PROMPT, "runs": 2, "rubric": "Says where the order is."},
    )
    assert status == 202, started
    race = started["race"]
    assert wait_until(lambda: demo.get(f"/api/races/{race}")[1]["status"] != "running", 60)
    return race


def test_races_page_shows_a_finished_race_its_runs_chart_and_transcripts(demo, page):
    race = finished_demo_race(demo)
    page.goto(demo.url + "/#/races")

    expect(page.locator(f'.race-item[data-race="{race}"]')).to_contain_text("grade general")
    head = page.locator(".race-head")
    expect(head).to_contain_text(race)
    expect(head.get_by_test_id("race-status")).to_have_text("done")
    expect(head).to_contain_text("Verdict:")

    runs = page.get_by_role("region", name="Runs of this race")
    expect(runs.locator("tbody tr")).to_have_count(1 + 2 * len(CANDIDATES))
    expect(runs.locator('tr[data-id="reference.sim-steady.run0"]')).to_contain_text("reference")
    for alias in CANDIDATES:
        for n in (1, 2):
            expect(runs.locator(f'tr[data-id="candidate.{alias}.run{n}"]')).to_contain_text(alias)
    models = page.get_by_role("region", name="Models of this race")
    expect(models.locator("tbody tr")).to_have_count(len(CANDIDATES))
    chart = page.get_by_test_id("cost-score-chart")
    expect(chart.locator("svg")).to_have_count(1)
    for alias in CANDIDATES:  # a point per model, named beside it
        expect(chart.locator(f'circle.point[data-name="{alias}"]')).to_have_count(1)
        expect(chart.locator("text.point-label", has_text=alias)).to_have_count(1)
    expect(page.get_by_test_id("judging")).to_contain_text("in both orders")

    runs.get_by_role("button", name="Transcript of candidate.sim-vision.run1").click()
    dialog = page.get_by_role("dialog", name="Transcript: sim-vision · run 1")
    transcript = dialog.get_by_test_id("transcript")
    expect(transcript).to_contain_text("The job sent")
    expect(transcript).to_contain_text(PROMPT)
    expect(transcript).to_contain_text("[simulated sim-vision]")
    expect(dialog).to_contain_text(
        "The same tool calls, with the same arguments or the same results."
    )
    judged = dialog.get_by_test_id("judgements")
    expect(judged).to_contain_text("sim-careful · reference shown first")
    expect(judged).to_contain_text("sim-careful · candidate shown first")
    # the question the judge was asked, as it was sent: the run masked, the task as given
    judged.get_by_role("button", name="The question sim-careful was asked (1)").first.click()
    expect(judged).to_contain_text("<<<BEGIN")
    expect(judged).to_contain_text("[simulated [model]]")
    expect(judged).to_contain_text(PROMPT)
    assert page.evaluate("window.__owned") is None, "text from a model ran as markup"
    dialog.get_by_role("button", name="Close the transcript").click()
    expect(dialog).to_have_count(0)


def test_race_again_adds_a_look_and_the_new_race_shows_both(demo, page, watch):
    watch.allow("status of 409")  # the refused race again at the end, on purpose
    first = finished_demo_race(demo)
    page.goto(demo.url + f"/#/races?race={first}")
    card = page.get_by_test_id("race-again-card")
    expect(card).to_contain_text("Race this job again")
    expect(card).to_contain_text("adds 2 run(s) a model")
    card.get_by_role("button", name="Race again").click()
    # the new race opens; once it has ended, it lists both looks and holds both looks' runs
    expect(page.locator(".race-head h2")).not_to_have_text(first)
    second = page.locator(".race-head h2").text_content()
    assert wait_until(lambda: demo.get(f"/api/races/{second}")[1]["status"] != "running", 60)
    page.goto(demo.url + f"/#/races?race={second}")
    looks = page.get_by_test_id("race-looks")
    expect(looks.locator("li")).to_have_count(2)
    expect(looks.locator("li").first).to_contain_text(
        f"Race {first}: added 2 run(s) a model, tested at 1.48%"
    )
    expect(page.get_by_test_id("race-again-card")).to_contain_text("Look 2 of this job")
    runs = page.get_by_role("region", name="Runs of this race")
    expect(runs.locator("tbody tr")).to_have_count(1 + 4 * len(CANDIDATES))
    expect(runs.locator(f'tr[data-id="{first}.candidate.sim-vision.run1"]')).to_have_count(1)
    # the first race is no longer its job's latest look: racing it again is refused, and said
    page.goto(demo.url + f"/#/races?race={first}")
    page.get_by_test_id("race-again-card").get_by_role("button", name="Race again").click()
    expect(page.get_by_test_id("race-again-card")).to_contain_text("not the latest look")


def test_races_page_without_a_race_says_how_to_start_one(dashboard, page):
    page.goto(dashboard.url + "/#/races")
    expect(page.get_by_role("heading", name="No race yet")).to_be_visible()
    # the hint names the button that starts one, which opens the race form
    empty = page.locator(".state")
    expect(empty).to_contain_text("Press Start a race")
    empty.get_by_role("button", name="Start a race").click()
    expect(page.get_by_test_id("race-form")).to_be_visible()


def test_a_race_that_ends_while_the_page_opens_is_listed_as_it_ended(demo, gated, page, tmp_path):
    """The list of races is read before the race itself: a race that ends in between must not
    stay listed as running beside its finished report. Here the list's answer, read while the
    race runs, is held until the race has ended."""
    roster = Roster(open_home(tmp_path / "data"))
    roster.add_endpoint("gated", gated.url)
    roster.add_model("slow", "gated", family="slow", grade="general", context=100_000)
    status, started = demo.post(
        "/bench/race", {"grade": "general", "prompt": PROMPT, "runs": 1, "candidates": ["slow"]}
    )
    assert status == 202, started
    race = started["race"]
    assert gated.wait_arrived("slow"), "the race never asked its candidate"

    def ended() -> str | None:
        status = demo.get(f"/api/races/{race}")[1]["status"]
        return None if status == "running" else status

    listed = []

    def hold_the_list_until_the_race_ended(route):
        answer = route.fetch()
        listed.append(next(r["status"] for r in answer.json()["data"] if r["race"] == race))
        gated.open("slow")
        assert wait_until(ended, 60), f"race {race} did not end"
        route.fulfill(response=answer)

    page.route(lambda url: url.endswith("/api/races?limit=50"), hold_the_list_until_the_race_ended)
    page.goto(demo.url + "/#/races")
    # the race is read after the list was answered, so it shows how the race ended
    expect(page.locator(".race-head").get_by_test_id("race-status")).not_to_have_text("running")
    assert listed == ["running"], "the list was not read while the race ran"
    item = page.locator(f'.race-item[data-race="{race}"]')
    expect(item.get_by_test_id("race-status")).to_have_text(ended())


class Ask:
    grade = "general"

    def run(self, question, seat):
        return seat.chat([{"role": "user", "content": question}])


def test_the_verdict_shows_what_it_tested_and_what_would_settle_it(dashboard, page, tmp_path):
    """A race of two inputs on a judge that tells a useless answer apart: too little evidence
    for the cheaper model that answers as the pinned one does, the useless one shown worse."""
    from panelist.metrics.race.benchmark import Benchmark, GradeBook
    from panelist.metrics.upstream.sim import SimUpstream

    marks = {"accuracy": 7, "shown_work": 2, "reason": "as the reference"}
    useless = {"accuracy": 1, "shown_work": 0, "reason": "it does not answer"}
    with SimUpstream(
        {
            "pin": {},
            "cheap": {},
            "bad": {"answer": "I cannot help."},
            "judge": {
                "json": marks,
                "json_rules": [{"contains": "I cannot help", "answer": useless}],
            },
        }
    ) as sim:
        home = open_home(tmp_path / "data")
        roster = Roster(home)
        roster.add_endpoint("sim", sim.url)
        for alias, price in (("pin", 2.0), ("cheap", 0.5), ("bad", 0.1), ("judge", 5.0)):
            roster.add_model(
                alias,
                "sim",
                family=alias,
                price_in=price,
                price_out=price,
                grade="strong" if alias == "judge" else "general",
            )
        bench = Benchmark(
            Ask,
            runs=2,
            home=home,
            admission=None,
            grades=GradeBook.plain({"general": "pin", "strong": "judge"}, "judge", roster),
        )
        bench.set_inputs(["Where is order 1?", "Where is order 2?"])
        bench.set_candidates(["pin", "cheap", "bad"])
        bench.run()
    race = bench.report().race
    page.goto(dashboard.url + f"/#/races?race={race}")

    head = page.locator(".race-head")
    expect(head).to_contain_text("Verdict: no model")
    expect(head).to_contain_text("too little evidence to name a model")
    needed = bench.report().verdict["needed"]
    more = f"{needed['low']} to {needed['high']} more input(s)"
    # two candidates on two inputs measure a spread (two degrees of freedom, pooled)
    assert needed["assumed"] is None and needed["low"] < needed["high"]
    expect(page.get_by_test_id("verdict-needed")).to_have_text(f"To settle it: {more}.")
    tested = page.get_by_test_id("verdict-test")
    expect(tested).to_contain_text("at most 1 point of 10 worse than the pinned model")
    expect(tested).to_contain_text("a unit per input")
    candidates = page.get_by_role("region", name="Candidates tested")
    expect(candidates.locator('tr[data-id="cheap.accuracy"]')).to_contain_text("undecided")
    expect(candidates.locator('tr[data-id="cheap.accuracy"]')).to_contain_text(
        f"{more} would settle it"
    )
    expect(candidates.locator('tr[data-id="bad.accuracy"]')).to_contain_text("worse")
    runs = page.get_by_role("region", name="Runs of this race")
    expect(runs.locator("tbody tr")).to_have_count(2 + 3 * 2 * 2)
    expect(runs.locator('tr[data-id="reference.pin.input2.run0"]')).to_contain_text("reference")


def test_a_jurys_agreement_is_shown_as_krippendorffs_alpha(demo, page):
    status, started = demo.post(
        "/bench/race",
        {
            "grade": "general",
            "prompt": "Where is my order?",
            "runs": 2,
            "candidates": ["sim-steady", "sim-vision"],
            "judges": ["sim-careful", "sim-swift"],
        },
    )
    assert status == 202, started
    race = started["race"]
    assert wait_until(lambda: demo.get(f"/api/races/{race}")[1]["status"] != "running", 60)
    alpha = demo.get(f"/api/races/{race}")[1]["report"]["judging"]["alpha"]
    page.goto(demo.url + "/#/races")
    page.locator(f'.race-item[data-race="{race}"]').click()
    note = page.get_by_test_id("judging")
    expect(note).to_contain_text(
        f"Jury agreement on accuracy (Krippendorff's α over "
        f"{alpha['units']} judged prompts of {alpha['runs']} runs): "
        f"{alpha['meaning']}."
    )
    expect(note).not_to_contain_text("within 1 point")
