"""The dashboard on a phone and on a wide screen, in a real browser: at 390 px the navigation
is a menu button (opened and closed by mouse and keyboard) and no page scrolls sideways; at
1440 px a table wider than its box says so. Each test watches the page for console errors and
CSP violations (conftest.py)."""

from __future__ import annotations

import pytest

try:
    from playwright.sync_api import expect
except (
    ImportError
):  # the browser fixture says why: a skip, or a failure under PANELIST_REQUIRE_BROWSER
    expect = None

from conftest import wait_until

PHONE = {"width": 390, "height": 844}
WIDE = {"width": 1440, "height": 900}
PAGES = (
    "overview",
    "ask",
    "panels",
    "evidence",
    "races",
    "discover",
    "collections",
    "endpoints",
    "settings",
    "models/sim-steady",
)


def finished_race(dash) -> str:
    status, started = dash.post(
        "/bench/race",
        {
            "grade": "general",
            "runs": 2,
            "prompt": "Where is my order?",
            "rubric": "Says where the order is.",
        },
    )
    assert status == 202, started
    race = started["race"]
    assert wait_until(lambda: dash.get(f"/api/races/{race}")[1]["status"] != "running", 60)
    return race


def ask(dash, n=2):
    for i in range(n):
        status, body = dash.request(
            "POST",
            "/v1/chat/completions",
            {
                "model": "bench/demo",
                "messages": [{"role": "user", "content": f"Review change {i}"}],
            },
        )
        assert status == 200, body


def opened(page, url):
    page.goto(url)
    expect(page.locator("#main .loading")).to_have_count(0)
    expect(page.locator("#main h1").first).to_be_visible()


def sideways(page) -> dict:
    """How far the page is wider than the screen, and the widest elements that make it so."""
    return page.evaluate("""() => ({
      over: document.documentElement.scrollWidth - window.innerWidth,
      culprits: [...document.querySelectorAll("body *")]
        .filter((e) => e.getBoundingClientRect().right > window.innerWidth + 0.5 && !e.closest(".table-wrap"))
        .slice(0, 5).map((e) => `${e.tagName}.${e.className}`),
    })""")


@pytest.mark.parametrize("context", ["light", "dark"], indirect=True)
def test_at_390_px_no_page_scrolls_sideways(demo, context):
    finished_race(demo)
    ask(demo)
    ctx, _ = context
    page = ctx.new_page()
    page.set_viewport_size(PHONE)
    wide = {}
    for name in PAGES:
        opened(page, f"{demo.url}/#/{name}")
        found = sideways(page)
        if found["over"] > 0:
            wide[name] = found
    assert not wide, wide


def test_at_390_px_the_navigation_is_a_menu_button(demo, page):
    page.set_viewport_size(PHONE)
    opened(page, demo.url + "/#/overview")
    menu = page.get_by_role("button", name="Open the menu")
    nav = page.get_by_role("navigation", name="Pages")
    expect(menu).to_be_visible()
    expect(menu).to_have_attribute("aria-expanded", "false")
    expect(nav).to_be_hidden()
    # the collapsed header leaves the page's heading on the first screen
    assert page.locator(".app-header").bounding_box()["height"] < 0.15 * PHONE["height"]

    menu.click()
    close = page.get_by_role("button", name="Close the menu")
    expect(close).to_have_attribute("aria-expanded", "true")
    expect(nav).to_be_visible()
    assert sideways(page)["over"] <= 0
    nav.get_by_role("link", name="Collections").click()
    expect(page).to_have_url(f"{demo.url}/#/collections")
    expect(page.locator("#main h1")).to_have_text("Collections")
    expect(nav).to_be_hidden()
    expect(menu).to_have_attribute("aria-expanded", "false")

    # by keyboard: Enter opens it with the focus on the current page's link, Escape closes it
    # and gives the focus back to the button
    menu.focus()
    page.keyboard.press("Enter")
    expect(nav).to_be_visible()
    expect(nav.get_by_role("link", name="Collections")).to_be_focused()
    page.keyboard.press("Escape")
    expect(nav).to_be_hidden()
    expect(menu).to_be_focused()
    expect(menu).to_have_attribute("aria-expanded", "false")

    # a click outside the open menu closes it too
    menu.click()
    expect(nav).to_be_visible()
    page.locator("#main h1").click()
    expect(nav).to_be_hidden()


def test_on_a_wide_screen_the_navigation_shows_without_a_menu_button(demo, page):
    page.set_viewport_size(WIDE)
    opened(page, demo.url + "/#/overview")
    expect(page.get_by_role("navigation", name="Pages")).to_be_visible()
    expect(page.locator("#nav-toggle")).to_be_hidden()


def test_at_1440_px_the_runs_table_shows_its_last_column_or_says_it_scrolls(demo, page):
    race = finished_race(demo)
    page.set_viewport_size(WIDE)
    opened(page, f"{demo.url}/#/races?race={race}")
    runs = page.get_by_role("region", name="Runs of this race")
    expect(runs.locator("tbody tr").first).to_be_visible()
    table = runs.locator("xpath=..")
    hint = table.locator(".scroll-hint")
    last = runs.get_by_role("button", name="Transcript of reference.sim-steady.run0")

    def last_column_in_view() -> bool:
        box, shown = last.bounding_box(), runs.bounding_box()
        return box is not None and box["x"] + box["width"] <= shown["x"] + shown["width"] + 0.5

    if last_column_in_view():
        expect(hint).to_be_hidden()
        return
    expect(hint).to_be_visible()
    expect(hint).to_contain_text("More columns to the right")
    # scrolled to its end, the last column comes into view and the shade on the right goes
    runs.evaluate("(el) => { el.scrollLeft = el.scrollWidth; }")
    assert wait_until(last_column_in_view)
    assert "more-right" not in (runs.get_attribute("class") or "")
