"""What the CLI can do, the page can do, in a real browser over the demo roster: reorder the
grades, pin a model and set the ceiling (and the CLI's `grade list` agrees), start a race and see
it finish, run the suite and see its progress reach done, import a catalog file and see its
facts on the model page."""

from __future__ import annotations

import json

try:
    from playwright.sync_api import expect
except (
    ImportError
):  # the browser fixture says why: a skip, or a failure under PANELIST_REQUIRE_BROWSER
    expect = None

from panelist.metrics.cli.main import main


def cli_grades(demo, capsys) -> dict:
    capsys.readouterr()
    assert main(["grade", "list", "--json", "--data", str(demo.server.parts.home.root)]) == 0
    return json.loads(capsys.readouterr().out)


def test_grades_reorder_pin_and_ceiling_on_the_overview(demo, page, capsys):
    page.goto(demo.url + "/#/overview")
    section = page.locator("section#grades")
    rows = section.locator("tbody tr")
    expect(rows).to_have_count(3)
    section.get_by_role("button", name="Move strong up (weaker)").click()
    # the move changes the ceiling (a race's judge): asked first
    ask = page.get_by_role("dialog", name="Change the race judge?")
    expect(ask).to_contain_text("becomes sim-steady instead of sim-careful")
    ask.get_by_role("button", name="Reorder").click()
    expect(page.locator(".toasts")).to_contain_text(
        "The ceiling, which judges races, is now sim-steady."
    )
    expect(rows.nth(1)).to_have_attribute("data-grade", "strong")
    expect(rows.nth(2)).to_have_attribute("data-grade", "general")
    listed = cli_grades(demo, capsys)
    assert [g["grade"] for g in listed["grades"]] == ["light", "strong", "general"]
    # the ceiling follows the strongest pinned grade: general's sim-steady now
    expect(section.locator("#ceiling")).to_contain_text("sim-steady")
    assert listed["ceiling"]["alias"] == "sim-steady"

    section.get_by_label("Model pinned for general").select_option("sim-flaky")
    expect(section.locator('tr[data-grade="general"] .badge.accent')).to_have_text("ceiling")
    expect(section.locator("#ceiling")).to_contain_text("sim-flaky")
    listed = cli_grades(demo, capsys)
    assert next(g for g in listed["grades"] if g["grade"] == "general")["pinned"] == "sim-flaky"

    section.locator("#ceiling-picker").select_option("sim-careful")
    expect(section.locator("#ceiling")).to_contain_text("sim-careful, set by hand")
    assert cli_grades(demo, capsys)["ceiling"] == {
        "alias": "sim-careful",
        "set": True,
        "problem": None,
    }
    # what the page shows survives a reload: it was the server's
    page.reload()
    expect(section.locator("tbody tr").nth(1)).to_have_attribute("data-grade", "strong")
    expect(section.get_by_label("Model pinned for general")).to_have_value("sim-flaky")


def test_a_stale_grades_edit_says_reload(demo, page, watch):
    watch.allow("409")
    page.goto(demo.url + "/#/overview")
    section = page.locator("section#grades")
    expect(section.locator("tbody tr")).to_have_count(3)
    # another hand changes the grades after the page read them
    _, listing = demo.get("/api/grades")
    status, _ = demo.request(
        "PUT",
        "/api/grades/order",
        {"version": listing["version"], "order": ["light", "general", "strong", "extra"]},
    )
    assert status == 200
    section.get_by_role("button", name="Move general up (weaker)").click()
    expect(section.get_by_test_id("grades-status")).to_contain_text("reload")
    section.get_by_role("button", name="Reload").click()
    expect(section.locator("tbody tr")).to_have_count(4)


def test_start_a_race_from_the_page_and_see_it_finish(demo, page, watch):
    watch.allow("status of 400")  # the refused start below, on purpose
    page.goto(demo.url + "/#/races")
    page.get_by_test_id("start-race").first.click()
    form = page.get_by_test_id("race-form")
    form.get_by_label("Grade").select_option("general")
    form.get_by_label("Prompt").fill("Where is my order?")
    form.get_by_label("Candidates").fill("sim-flaky")
    page.get_by_role("dialog").get_by_role("button", name="Start").click()
    head = page.locator(".race-head")
    expect(head.get_by_test_id("race-status")).to_have_text("done", timeout=60_000)
    race = page.locator(".race-item").first.get_attribute("data-race")
    _, found = demo.get(f"/api/races/{race}")
    assert found["status"] == "done" and found["candidates"] == ["sim-flaky"]
    # a refusal shows beside the field it names
    page.get_by_test_id("start-race").first.click()
    form = page.get_by_test_id("race-form")
    form.get_by_label("Prompt").fill("Where is my order?")
    form.get_by_label("Runs").fill("0")
    page.get_by_role("dialog").get_by_role("button", name="Start").click()
    expect(form.locator('[data-field="runs"] .field-error')).to_contain_text("'runs' must be")
    expect(form.locator(".field-error:not(:empty)")).to_have_count(1)


def test_run_the_suite_on_the_demo_and_see_progress_reach_done(demo, page):
    page.goto(demo.url + "/#/evidence")
    card = page.get_by_test_id("suite-card")
    expect(card).to_contain_text("No model has been scored yet")
    card.get_by_test_id("run-suite").click()
    dialog = page.get_by_role("dialog", name="Run the suite")
    models = dialog.get_by_test_id("suite-models")
    for alias in ("sim-careful", "sim-flaky", "sim-vision"):
        models.get_by_label(alias).uncheck()
    expect(dialog.get_by_label("Simulated answers", exact=False)).to_be_checked()
    dialog.get_by_test_id("suite-start").click()
    expect(page.get_by_test_id("suite-run")).to_be_visible()
    # the run is the server's: leaving the page stops nothing, and coming back shows it
    page.goto(demo.url + "/#/overview")
    expect(page.locator("section#grades")).to_be_visible()
    page.goto(demo.url + "/#/evidence")
    run = page.get_by_test_id("suite-run")
    expect(run).to_have_attribute("data-status", "done", timeout=90_000)
    # the page read itself again: the two models' scores are in the table
    table = page.get_by_test_id("suite-card").get_by_role("table")
    expect(table).to_contain_text("sim-steady")
    expect(table).to_contain_text("sim-swift")
    expect(page.get_by_test_id("suite-run")).to_contain_text("asked")
    _, state = demo.get("/api/suite/run")
    assert state["status"] == "done" and sorted(state["models"]) == ["sim-steady", "sim-swift"]
    assert state["progress"]["done"] == state["progress"]["planned"] == state["summary"]["asked"]


def test_import_a_catalog_file_and_see_its_facts(demo, page, tmp_path):
    catalog = {
        "sims": {
            "models": {
                "sim-steady": {
                    "limit": {"context": 64_000, "output": 8_000},
                    "cost": {"input": 0.25, "output": 2.0},
                    "tool_call": True,
                }
            }
        }
    }
    path = tmp_path / "sims.json"
    path.write_text(json.dumps(catalog))
    page.goto(demo.url + "/#/discover")
    page.get_by_test_id("catalog-file").set_input_files(str(path))
    report = page.get_by_test_id("import-report")
    expect(report).to_contain_text("Imported sims.json")
    steady = report.locator('li[data-alias="sim-steady"]')
    # the demo types its windows and prices (free): the file fills only what is left
    expect(steady).to_contain_text("added max_output, tools")
    expect(steady).to_contain_text(
        "left as typed on the roster context, currency, price_in, price_out"
    )
    expect(report).to_contain_text("Not in the file: sim-careful")
    steady.get_by_role("link", name="sim-steady").click()
    fact = page.locator('tr[data-fact="max_output"]')
    expect(fact).to_contain_text("8000")
    expect(fact).to_contain_text("imported (sims.json)")
    expect(page.locator('tr[data-fact="price_in"]')).to_contain_text("typed")
