"""The onboarding queue on the Discover page, in a real browser over the simulated upstream."""

from __future__ import annotations

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture says why (a skip, or a failure when required)
    expect = None

from panelist.metrics import onboarding
from panelist.metrics.roster import Roster

NEW = "new-model"


def test_discover_shows_the_queue_and_onboard_takes_a_model_to_ready(
        dashboard_factory, home, sim, page):
    sim.script(NEW)
    # an entry that ended before: the queue shows it as soon as the page opens
    queue = onboarding.Queue(home)
    try:
        queue.enqueue(None, ["fast"], tasks=1)
    finally:
        queue.close()
    dash = dashboard_factory(home)   # its worker takes `fast` to ready
    page.goto(dash.url + "/#/discover")
    entries = page.get_by_role("region", name="Onboarding queue entries")
    expect(entries.locator('tr[data-alias="fast"]')).to_have_attribute("data-status", "ready")

    found = page.get_by_role("region", name="Models not on the roster")
    found.get_by_role("button", name=f"Onboard {NEW} from sim").click()
    row = entries.locator(f'tr[data-alias="{NEW}"]')
    expect(row).to_have_count(1)
    expect(row).to_have_attribute("data-status", "ready")
    expect(row).to_contain_text("accuracy")
    # once it is on the roster, the list of models to add no longer holds it
    expect(page.get_by_role("heading", name="Nothing new to add")).to_be_visible()
    assert Roster(home).view().models[NEW].endpoint == "sim"
    status, body = dash.get("/api/onboarding")
    assert status == 200 and [e["alias"] for e in body["data"]] == [NEW, "fast"]
    assert all(e["status"] == "ready" for e in body["data"])
