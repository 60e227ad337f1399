"""Charts at scale, in a real browser: seats per day over 500 models read as stacked bars of
the busiest few with the rest on an axis of their own, with short tick labels that fit and a
legend whose every entry has a value; the race's scatter starts at zero and keeps points that
coincide apart. Each test watches the page for console errors and CSP violations (conftest.py)."""

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

SHORT_TICK = re.compile(r"^\d+(\.\d)?[kM]?$")  # "0", "250", "1.5k", "12k", "2M"
PANELS = 3000


@pytest.fixture()
def busy(tmp_path, dashboard_factory, roster_of_500):
    """A dashboard over 500 models whose 3,000 panels are spread over the last 21 days."""
    data = roster_of_500(tmp_path / "busy")
    fill(
        open_home(data).gateway_runs,
        PANELS,
        300,
        7,
        models=500,
        collections=50,
        every=21 * 86400 / PANELS,
    )
    return dashboard_factory(data)


def boxes(locator) -> list[dict]:
    return locator.evaluate_all(
        "(els) => els.map((e) => { const b = e.getBoundingClientRect(); "
        "return {x: b.x, y: b.y, right: b.right, bottom: b.bottom, text: e.textContent}; })"
    )


def inside(box, outer) -> bool:
    return (
        box["x"] >= outer["x"] - 0.5
        and box["right"] <= outer["right"] + 0.5
        and box["y"] >= outer["y"] - 0.5
        and box["bottom"] <= outer["bottom"] + 0.5
    )


@pytest.mark.parametrize("width", [1440, 390])
def test_seats_per_day_at_500_models_stack_the_busiest_and_put_the_rest_on_their_own_axis(
    busy, page, width
):
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(busy.url + "/#/evidence")
    chart = page.get_by_test_id("seats-chart")
    svg = chart.locator("svg.day-chart")
    expect(svg).to_have_count(1)

    # the seven busiest models are bars, each in the legend with its total; every other model
    # with a seat is summed into one series on the right-hand axis, named as such
    legend = chart.locator(".day-legend li")
    expect(legend).to_have_count(8)
    named = chart.locator(".day-legend li[data-alias]")
    expect(named).to_have_count(7)
    aliases = named.evaluate_all("(els) => els.map((e) => e.dataset.alias)")
    assert len(set(aliases)) == 7 and all(a.startswith("sim-") for a in aliases)
    drawn = set(svg.locator("rect.bar").evaluate_all("(els) => els.map((e) => e.dataset.alias)"))
    assert drawn == set(aliases)
    seated = [
        a for a, counts in busy.get("/api/evidence")[1]["buckets"]["series"].items() if sum(counts)
    ]
    assert len(seated) > 400
    expect(chart.locator(".legend-others")).to_contain_text(f"{len(seated) - 7} other models")
    expect(chart.locator(".legend-others")).to_contain_text("right axis")
    values = chart.locator(".legend-value").all_text_contents()
    assert len(values) == 8 and all(SHORT_TICK.match(v) for v in values), values
    expect(svg.locator(".others circle.others-dot")).to_have_count(30)

    # the bars are not flattened: the busiest day's stack fills most of the plot's height
    heights = svg.locator("rect.bar").evaluate_all("(els) => els.map((e) => e.getBBox().height)")
    assert sum(heights) > 0
    left = boxes(svg.locator(".axis-left text"))
    plot_height = left[0]["y"] - left[-1]["y"]
    tallest = page.evaluate("""() => {
      const stacks = new Map();
      for (const r of document.querySelectorAll("svg.day-chart rect.bar")) {
        const x = r.getAttribute("x");
        stacks.set(x, (stacks.get(x) || 0) + r.getBoundingClientRect().height);
      }
      return Math.max(...stacks.values());
    }""")
    assert tallest > 0.5 * plot_height

    # every tick is short, and sits inside the chart without touching its neighbour
    outer = svg.bounding_box()
    outer = {
        "x": outer["x"],
        "y": outer["y"],
        "right": outer["x"] + outer["width"],
        "bottom": outer["y"] + outer["height"],
    }
    right = boxes(svg.locator(".axis-right text"))
    days = boxes(svg.locator(".axis-x text"))
    assert len(left) >= 3 and len(right) >= 3 and len(days) >= 3
    for tick in left + right:
        assert SHORT_TICK.match(tick["text"]), tick["text"]
        assert "," not in tick["text"]
    for tick in left + right + days:
        assert inside(tick, outer), (tick, outer)
    days.sort(key=lambda b: b["x"])
    assert all(a["right"] < b["x"] for a, b in zip(days, days[1:])), [d["text"] for d in days]
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")


def test_the_race_scatter_starts_at_zero_and_spreads_points_that_coincide(demo, page):
    status, started = demo.post(
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
    assert wait_until(lambda: demo.get(f"/api/races/{race}")[1]["status"] != "running", 60)
    report = demo.get(f"/api/races/{race}")[1]["report"]
    page.goto(f"{demo.url}/#/races?race={race}")
    chart = page.get_by_test_id("cost-score-chart")
    expect(chart.locator("circle.point")).to_have_count(len(report["models"]))

    # both axes start at 0
    assert chart.locator(".axis-x text").first.text_content() == "0"
    assert chart.locator(".axis-y text").first.text_content() == "0"
    # the demo's models cost the same and score the same here, yet every point is visible
    spots = {(m["cost"], m["accuracy"]) for m in report["models"]}
    points = boxes(chart.locator("circle.point"))
    for a in points:
        for b in points:
            if a is not b:
                assert abs(a["x"] - b["x"]) >= 10 or abs(a["y"] - b["y"]) >= 10, (a, b)
    if len(spots) < len(report["models"]):
        expect(chart.locator("circle.true-spot")).not_to_have_count(0)
    # and no name covers another
    labels = boxes(chart.locator("text.point-label"))
    for i, a in enumerate(labels):
        for b in labels[i + 1 :]:
            overlap = (
                min(a["right"], b["right"]) - max(a["x"], b["x"]) > 0
                and min(a["bottom"], b["bottom"]) - max(a["y"], b["y"]) > 1
            )
            assert not overlap, (a, b)


def test_at_390_px_the_pages_of_500_models_do_not_scroll_sideways(busy, page):
    page.set_viewport_size({"width": 390, "height": 844})
    wide = {}
    for name in ("overview", "panels", "evidence", "endpoints", "collections", "models/sim-001"):
        page.goto(f"{busy.url}/#/{name}")
        expect(page.locator("#main .loading")).to_have_count(0)
        expect(page.locator("#main h1").first).to_be_visible()
        over = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        if over > 0:
            wide[name] = over
    assert not wide, wide
