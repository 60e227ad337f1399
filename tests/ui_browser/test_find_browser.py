"""Finding panels and a model's page, in a real browser against a real dashboard server: the
filters and the text search live in the address (a reload keeps them), a bad filter is named
next to its field, the model page shows and acts, and model names link to it. Each test
watches the page for console errors and CSP violations (conftest.py)."""

from __future__ import annotations

import re

try:
    from playwright.sync_api import expect
except (
    ImportError
):  # the browser fixture says why: a skip, or a failure under PANELIST_REQUIRE_BROWSER
    expect = None

from conftest import set_limits, wait_until
from panelist.metrics.roster.collection import Collections
from panelist.metrics.roster.roster import Roster


def ask(dash, content, collection="bench/trio"):
    status, body = dash.request(
        "POST",
        "/v1/chat/completions",
        {"model": collection, "messages": [{"role": "user", "content": content}]},
    )
    assert status == 200, body
    return body["bench"]


def indexed(dash, n):
    """Wait until the search index holds ``n`` panels (so a filtered page shows them all)."""

    def whole():
        status, body = dash.get("/api/panels?status=failed")
        return status == 200 and body["index"]["complete"] and body["index"]["indexed"] == n

    assert wait_until(whole), dash.get("/api/panels?status=failed")


def seeded(dashboard_factory, home, sim):
    """Three panels on two collections; the parser one's fast seat answers words of its own,
    the lock one's x-two seat fails."""
    set_limits(home, max_explorers=0)
    Collections(home).save(
        Roster(home).view(), "duo", ["x-one", "x-two"], description="Two more simulated reviewers"
    )
    sim.script(
        "fast", rules=[{"contains": "parser", "answer": "The zanzibar tokenizer drops a newline."}]
    )
    dash = dashboard_factory(home)
    made = {
        "parser": ask(dash, "Review the parser module")["panel"],
        "cache": ask(dash, "Check the cache eviction policy", "bench/duo")["panel"],
    }
    sim.script("x-two", fail="server_error")
    made["lock"] = ask(dash, "Review the lock ordering in the writer", "bench/duo")["panel"]
    sim.script("x-two")
    indexed(dash, 3)
    return dash, made


def shown(page):
    return page.locator(".panel-item")


def test_filters_and_text_search_live_in_the_address(dashboard_factory, home, sim, page, watch):
    watch.allow(r"status of 400")  # a filter refused on purpose, at the end
    dash, made = seeded(dashboard_factory, home, sim)
    page.goto(dash.url + "/#/panels")
    expect(shown(page)).to_have_count(3)
    form = page.get_by_role("search", name="Filter panels")

    form.get_by_label("Search prompts and answers").fill("zanzibar")
    form.get_by_role("button", name="Search").click()
    expect(page).to_have_url(re.compile(r"#/panels\?q=zanzibar$"))
    expect(shown(page)).to_have_count(1)
    item = shown(page).first
    expect(item).to_have_attribute("data-panel", made["parser"])
    expect(item.get_by_test_id("match")).to_contain_text("Found in the answer of member1")
    expect(item.locator("mark")).to_have_text("zanzibar")

    # a reload keeps the filter, in the form and in the list
    page.reload()
    expect(shown(page)).to_have_count(1)
    expect(page.get_by_label("Search prompts and answers")).to_have_value("zanzibar")
    expect(page.get_by_test_id("filter-summary")).to_contain_text("zanzibar")

    # more filters at once: a collection and a status, then the text cleared
    form = page.get_by_role("search", name="Filter panels")
    form.get_by_label("Search prompts and answers").fill("")
    form.get_by_label("Collection").select_option("bench/duo")
    form.get_by_label("Status").select_option("failed")
    form.get_by_role("button", name="Search").click()
    expect(page).to_have_url(re.compile(r"#/panels\?collection=bench%2Fduo&status=failed$"))
    expect(shown(page)).to_have_count(1)
    expect(shown(page).first).to_have_attribute("data-panel", made["lock"])

    # a shared address opens the same view in a fresh page
    other = page.context.new_page()
    other.goto(dash.url + "/#/panels?q=%22lock+ordering%22&model=x-two")
    expect(other.locator(".panel-item")).to_have_count(1)
    expect(other.locator(".panel-item").first).to_have_attribute("data-panel", made["lock"])
    expect(other.get_by_label("Model", exact=True)).to_have_value("x-two")

    # a filter the server refuses is named beside its field; Clear filters shows every panel
    page.goto(dash.url + "/#/panels?since=yesterday")
    field = page.get_by_label("From (UTC)")
    expect(field).to_be_visible()
    expect(field).to_have_attribute("aria-invalid", "true")
    expect(page.locator(".field-error")).to_contain_text("'since' must be")
    page.get_by_role("link", name="Clear filters").click()
    expect(shown(page)).to_have_count(3)


def test_a_filtered_view_stays_live(dashboard_factory, home, sim, page):
    dash, made = seeded(dashboard_factory, home, sim)
    page.goto(dash.url + "/#/panels?q=parser")
    expect(shown(page)).to_have_count(1)
    newer = ask(dash, "Review the parser once more")["panel"]
    ask(dash, "Check nothing of the sort", "bench/duo")
    expect(shown(page)).to_have_count(2)
    expect(shown(page).first).to_have_attribute("data-panel", newer)


def test_the_model_page_shows_the_model_and_acts_on_it(dashboard_factory, home, sim, page, watch):
    dash, made = seeded(dashboard_factory, home, sim)
    page.goto(dash.url + "/#/overview")
    page.get_by_role("region", name="Models on the roster").get_by_role(
        "link", name="x-two", exact=True
    ).click()
    expect(page).to_have_url(re.compile(r"#/models/x-two$"))
    expect(page.get_by_role("heading", name="x-two", level=1)).to_be_visible()
    expect(
        page.get_by_role("region", name="Evidence per shape").locator('tr[data-shape="general"]')
    ).to_contain_text("server_error 1")
    expect(page.get_by_test_id("latency-summary")).to_contain_text("last 2 seats")
    expect(
        page.get_by_role("img", name=re.compile("Answer time of each of its last 2 seats"))
    ).to_be_visible()
    # the latency chart's answer-time axis reads in distinct round steps (the simulator answers
    # in milliseconds: "0.00 s, 0.01 s, 0.01 s" said nothing), its time ends as short clock times
    axis = page.locator("svg.latency-chart text.axis").evaluate_all(
        "(els) => els.map((e) => e.lastChild.textContent)"
    )
    times, ends = axis[:-2], axis[-2:]
    assert len(times) >= 3 and len(set(times)) == len(times), axis
    assert times[0] == "0" and all(re.fullmatch(r"[\d.]+ m?s", t) for t in times[1:]), axis
    assert all("UTC" not in t and re.search(r"\d:\d\d", t) for t in ends), axis
    expect(page.get_by_test_id("latency-summary")).to_contain_text(re.compile(r"median \d+ ms"))
    failures = page.get_by_role("region", name="Its newest failures")
    expect(failures.locator("tr", has_text=made["lock"])).to_contain_text("server_error")
    panels = page.get_by_role("region", name="Its newest panels")
    expect(panels.locator("tbody tr")).to_have_count(2)
    expect(page.get_by_role("region", name="Catalog facts and their sources")).to_contain_text(
        "100000"
    )
    # a failure opens its seat
    failures.get_by_role("button", name=re.compile("^Open")).click()
    dialog = page.get_by_role("dialog")
    expect(dialog).to_contain_text("server_error")
    dialog.get_by_role("button", name="Close").click()

    # retire, then restore, from the page
    page.get_by_role("button", name="Retire x-two").click()
    expect(page.get_by_test_id("model-stats")).to_contain_text("retired")
    assert Roster(home).view().models["x-two"].retired is True
    page.get_by_role("button", name="Restore x-two").click()
    expect(page.get_by_role("button", name="Retire x-two")).to_be_visible()
    assert Roster(home).view().models["x-two"].retired is False
    # probe: one call, and the page shows its seats again
    page.get_by_role("button", name="Probe x-two").click()
    expect(page.get_by_text(re.compile(r"^x-two answered in"))).to_be_visible()
    # edit its facts in the same dialog as on Endpoints & models
    page.get_by_role("button", name="Edit x-two").click()
    edit = page.get_by_role("dialog", name="Edit x-two")
    edit.get_by_label("Grade").fill("strong")
    edit.get_by_role("button", name="Save changes").click()
    expect(page.get_by_text("Grade strong")).to_be_visible()
    assert Roster(home).view().models["x-two"].grade == "strong"

    # its panels, filtered, one click away
    page.get_by_role("link", name="All its failures").click()
    expect(page).to_have_url(re.compile(r"#/panels\?model=x-two&status=failed$"))
    expect(shown(page)).to_have_count(1)
    expect(shown(page).first).to_have_attribute("data-panel", made["lock"])


def test_model_names_link_to_their_pages(dashboard_factory, home, sim, page, watch):
    watch.allow(r"status of 404")  # the page of a model not on the roster, asked on purpose
    dash, made = seeded(dashboard_factory, home, sim)
    for where, scope in (
        ("#/overview", page.get_by_role("region", name="Models on the roster")),
        ("#/endpoints", page.get_by_role("region", name="Models on the roster")),
        ("#/collections", page.locator('[data-collection="trio"]')),
    ):
        page.goto(dash.url + "/" + where)
        link = scope.get_by_role("link", name="mid", exact=True)
        expect(link).to_have_attribute("href", "#/models/mid")
    # the seat dialog names its model as a link
    page.goto(dash.url + "/#/panels")
    page.locator(f'.seat-chip[data-call="{made["parser"]}.member2"]').click()
    dialog = page.get_by_role("dialog")
    dialog.get_by_role("link", name="mid", exact=True).click()
    expect(page.get_by_role("heading", name="mid", level=1)).to_be_visible()
    # evidence's table too
    page.goto(dash.url + "/#/evidence")
    page.get_by_text(re.compile(r"^Table: every model and shape")).click()
    table = page.get_by_role("region", name="Evidence per model and shape")
    expect(table.get_by_role("link", name="fast", exact=True).first).to_have_attribute(
        "href", "#/models/fast"
    )
    # a model no longer on the roster has a page that says so
    page.goto(dash.url + "/#/models/nobody")
    expect(page.get_by_role("heading", name="No model nobody on the roster")).to_be_visible()


def test_times_read_relative_with_the_exact_utc_time_on_hover(dashboard_factory, home, sim, page):
    dash, made = seeded(dashboard_factory, home, sim)
    page.goto(dash.url + "/#/panels")
    stamp = shown(page).first.locator("time")
    expect(stamp).to_have_text("just now")
    expect(stamp).to_have_attribute("title", re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$"))
    page.goto(dash.url + "/#/overview")
    cell = page.locator('tr[data-id="fast"] time')
    expect(cell).to_have_text("just now")
    expect(cell).to_have_attribute("title", re.compile(r" UTC$"))
