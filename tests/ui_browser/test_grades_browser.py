"""The Overview page shows the grades, weakest first, each with its pinned model and the ceiling,
in a real browser over the demo roster (which pins a model per grade)."""

from __future__ import annotations

try:
    from playwright.sync_api import expect
except (
    ImportError
):  # the browser fixture says why: a skip, or a failure under PANELIST_REQUIRE_BROWSER
    expect = None


def test_overview_shows_the_grades_and_their_pins(demo, page):
    page.goto(demo.url + "/#/overview")
    section = page.locator("section#grades")
    rows = section.locator("tbody tr")
    expect(rows).to_have_count(3)
    expect(rows.nth(0)).to_have_attribute("data-grade", "light")
    expect(rows.nth(2)).to_have_attribute("data-grade", "strong")
    strong = section.locator('tr[data-grade="strong"]')
    expect(strong).to_contain_text("sim-careful")
    expect(strong.locator(".badge")).to_have_text("ceiling")
    expect(section.locator('tr[data-grade="general"]')).to_contain_text("sim-steady")
    expect(section.locator('tr[data-grade="general"]')).to_contain_text("sim-flaky")
    expect(section.locator("#ceiling")).to_contain_text("sim-careful")
