"""Pages at 500 models, in a real browser: a long table draws its first rows and the rest as
they are scrolled to or asked for (its count and its filter always cover every row), and a
model's page draws each of its seats in the latency chart. Each test watches the page for
console errors and CSP violations (conftest.py)."""

from __future__ import annotations

import re

import pytest

try:
    from playwright.sync_api import expect
except (
    ImportError
):  # the browser fixture says why: a skip, or a failure under PANELIST_REQUIRE_BROWSER
    expect = None

from conftest import wait_until
from panelist.metrics.home import open_home
from panelist.scripts.fill_ledger import fill

MODELS = 500


@pytest.fixture()
def roster500(tmp_path, dashboard_factory, roster_of_500):
    """A dashboard over 500 models and a few hundred panels."""
    data = roster_of_500(tmp_path / "roster500")
    fill(open_home(data).gateway_runs, 600, 0, 7, models=MODELS, collections=50, every=60)
    return dashboard_factory(data)


def drawn(table):
    return table.locator("tbody tr[data-id]").count()


@pytest.mark.parametrize("name", ["overview", "endpoints"])
def test_a_long_table_draws_its_first_rows_then_the_rest_on_scroll_or_show_more(
    roster500, page, name
):
    page.set_viewport_size({"width": 1440, "height": 900})
    page.goto(f"{roster500.url}/#/{name}")
    table = page.get_by_role("region", name="Models on the roster")
    rows = table.locator("tbody tr[data-id]")
    expect(rows.first).to_be_visible()
    tools = page.locator(".data-table", has=table)
    expect(tools.locator(".table-tools")).to_contain_text(f"{MODELS} rows")

    # fewer rows than the roster are laid out, more than the box shows, and the button says
    # how many are left
    first = drawn(table)
    assert 0 < first < MODELS
    box = table.bounding_box()
    last = rows.nth(first - 1).bounding_box()
    assert last["y"] > box["y"] + box["height"], "the first rows must overfill their box"
    more = table.get_by_role("button", name=re.compile(r"^Show more"))
    expect(more).to_have_text(f"Show more ({MODELS - first} left)")

    # the button draws the next chunk; scrolling the box to its end draws the one after. The
    # button is pressed from the keyboard: a pointer click first scrolls it into view, which
    # itself draws the next rows and moves the button on (a loaded machine sees that race)
    more.press("Enter")
    expect(rows).not_to_have_count(first)
    after_click = drawn(table)
    assert after_click > first
    table.evaluate("(el) => { el.scrollTop = el.scrollHeight; }")
    expect(rows).not_to_have_count(after_click)
    assert drawn(table) > after_click

    # the order is the whole roster's, and the filter finds a row none of that drew
    ids = rows.evaluate_all("(els) => els.map((e) => e.dataset.id)")
    assert ids == sorted(ids) and ids[0] == "sim-000"
    tools.get_by_label("Filter", exact=True).fill("sim-499")
    expect(rows).to_have_count(1)
    expect(rows.first).to_have_attribute("data-id", "sim-499")


def test_the_model_page_draws_every_seat_of_its_latency_chart(roster500, page):
    busiest = max(roster500.get("/api/models")[1]["data"], key=lambda m: m["seats"])
    assert busiest["seats"] > 0
    # its latency comes from the search index, which is built from the logs in the background
    alias = busiest["alias"]
    assert wait_until(lambda: roster500.get(f"/api/models/{alias}")[1]["latency"], 60)
    page.goto(f"{roster500.url}/#/models/{busiest['alias']}")
    summary = page.get_by_test_id("latency-summary")
    expect(summary).to_contain_text("Its last")
    seats = int(re.search(r"last ([\d,]+) seat", summary.text_content()).group(1).replace(",", ""))
    failed = int(
        re.search(r"; ([\d,]+) did not answer", summary.text_content()).group(1).replace(",", "")
    )
    chart = page.locator("svg.latency-chart")
    expect(chart).to_be_visible()
    # one arc pair per answered seat in the dots' path, one cross per failed seat
    dots = chart.locator("path.point").evaluate_all(
        "(els) => els.map((e) => (e.getAttribute('d').match(/a/g) || []).length / 2)"
    )
    crosses = chart.locator("path.fail").evaluate_all(
        "(els) => els.map((e) => (e.getAttribute('d').match(/M/g) || []).length)"
    )
    assert sum(dots) == seats - failed and sum(crosses) == failed, (seats, failed, dots, crosses)
    box = chart.locator("path.point").bounding_box()
    outer = chart.bounding_box()
    assert box["x"] >= outer["x"] and box["x"] + box["width"] <= outer["x"] + outer["width"] + 0.5
