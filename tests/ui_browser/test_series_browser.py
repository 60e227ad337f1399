"""The time axis in a real browser, over the demo roster: a chart of seats and error rate and one
of p50/p95 draw for a model, for its endpoint (reached from the Endpoints list) and for a gateway
key (reached from Settings); the window switch asks for other buckets and redraws; a window
with no seat says so. Seats are written through the ledger's own write path."""

from __future__ import annotations

import time

try:
    from playwright.sync_api import expect
except (
    ImportError
):  # the browser fixture says why: a skip, or a failure under PANELIST_REQUIRE_BROWSER
    expect = None

from panelist.metrics.ledger.ledger import Ledger

ALIAS = "sim-steady"


def seat(demo, *, seconds, status="ok", ago=0.0, key="team-a"):
    seated = time.time() - ago
    with Ledger(demo.server.parts.home.gateway_runs) as ledger:
        pid = ledger.new_panels(1, seated)[0]
        ledger.record_seats(
            [
                {
                    "call": f"{pid}.member1",
                    "panel": pid,
                    "alias": ALIAS,
                    "role": "member",
                    "shape": "general",
                    "seated": seated,
                    "status": status,
                    "seconds": seconds,
                    "tokens": {},
                    "error": "" if status == "ok" else "timeout: slow",
                    "key": key,
                    "endpoint": "demo",
                }
            ],
            seatings=[{"panel": pid, "shape": "general", "aliases": [ALIAS], "seated": seated}],
        )


def charted(page, buckets: int) -> None:
    section = page.get_by_test_id("series")
    expect(section).to_have_attribute("data-buckets", str(buckets))
    expect(section.locator("svg.series-chart")).to_have_count(2)
    expect(section.locator("rect.series-seats").first).to_be_visible()
    expect(section.locator("circle.series-p50-dot").first).to_be_visible()


def test_a_model_its_endpoint_and_a_key_are_charted_and_the_window_switches(demo, page):
    status, body = demo.post("/api/keys", {"name": "team-a"})
    assert status == 200, body
    for s in (1.0, 2.0, 3.0):
        seat(demo, seconds=s, ago=2 * 3600)
    seat(demo, seconds=5.0, status="error", ago=60)

    page.goto(demo.url + f"/#/models/{ALIAS}")
    charted(page, 24)  # the day: 24 hourly buckets
    section = page.get_by_test_id("series")
    expect(section.get_by_test_id("series-summary")).to_contain_text("4 seats, 1 failed")
    # ticks read as times of day, not whole timestamps
    ticks = section.locator("svg.series-chart").first.locator(".axis-x text")
    assert all(len(t) <= 8 and ":" in t for t in ticks.all_text_contents())
    section.get_by_role("button", name="Week").click()
    charted(page, 7)
    expect(section.get_by_role("button", name="Week")).to_have_attribute("aria-pressed", "true")
    section.get_by_role("button", name="Hour").click()
    expect(section).to_have_attribute("data-buckets", "12")
    # the last hour holds only the failure: seats drawn, no answer time to chart
    expect(section.locator("rect.series-failed")).to_have_count(1)
    expect(section).to_contain_text("No answer in this window")

    page.goto(demo.url + "/#/endpoints")
    page.locator('tr[data-endpoint="demo"] a').click()
    expect(page).to_have_url(demo.url + "/#/endpoints/demo")
    charted(page, 24)
    expect(page.locator(f'tr[data-alias="{ALIAS}"] a')).to_be_visible()
    expect(page.get_by_role("button", name="Test demo")).to_be_visible()

    page.goto(demo.url + "/#/settings")
    page.locator('tr[data-key="team-a"] a').click()
    charted(page, 24)
    expect(page.get_by_test_id("series-summary")).to_contain_text("4 seats")


def test_an_empty_window_says_so(demo, page):
    page.goto(demo.url + "/#/keys/nobody")
    expect(page.locator("main")).to_contain_text("No gateway key nobody")
    page.goto(demo.url + f"/#/models/{ALIAS}")
    section = page.get_by_test_id("series")
    expect(section).to_contain_text("No seat in the last day")
    expect(section.locator("svg.series-chart")).to_have_count(0)


def test_the_overview_charts_the_whole_gateway(demo, page):
    seat(demo, seconds=1.5, ago=30, key="ci")
    page.goto(demo.url + "/#/overview")
    section = page.get_by_test_id("series")
    expect(section).to_contain_text("The gateway over time")
    charted(page, 24)
