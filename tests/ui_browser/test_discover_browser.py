"""The Discover page (its list, Add, Onboard and the onboarding queue) and the alerts banner in
a real browser, over the simulated upstream."""

from __future__ import annotations

import re

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture says why (a skip, or a failure when required)
    expect = None

from conftest import read_jsonl, wait_until
from panelist.metrics.upkeep import onboarding_queue
from panelist.metrics.alerts import Alerts
from panelist.metrics.cli.main import main
from panelist.metrics.home import open_home
from panelist.metrics.roster.roster import Roster

NEW = "new-model"


def test_discover_lists_an_unlisted_model_and_add_puts_it_on_the_overview(
    dashboard_factory, home, sim, page
):
    sim.script(NEW)
    dash = dashboard_factory(home)
    page.goto(dash.url + "/#/discover")
    region = page.get_by_role("region", name="Models not on the roster")
    rows = region.locator("tbody tr")
    expect(rows).to_have_count(1)
    expect(rows.first).to_have_attribute("data-id", NEW)
    expect(rows.first).to_contain_text("sim")

    region.get_by_role("button", name=f"Add {NEW} from sim").click()
    expect(page.get_by_role("heading", name="Nothing new to add")).to_be_visible()
    assert Roster(home).view().models[NEW].endpoint == "sim"

    page.get_by_role("link", name="Overview").click()
    table = page.get_by_role("region", name="Models on the roster")
    expect(table.locator(f'tr[data-id="{NEW}"]')).to_contain_text("sim")


def test_discover_shows_the_servers_refusal(dashboard_factory, home, sim, page, watch):
    sim.script(NEW)
    dash = dashboard_factory(home)
    page.goto(dash.url + "/#/discover")
    button = page.get_by_role("button", name=f"Add {NEW} from sim")
    expect(button).to_be_visible()
    Roster(home).add_model(NEW, "sim")  # someone else registers it meanwhile
    watch.allow("404")
    button.click()
    status = page.get_by_test_id("discover-status")
    expect(status).to_contain_text(f"{NEW} was not added")
    expect(status).to_contain_text("panelist discover")


def test_a_raised_alert_shows_as_a_banner_until_dismissed(dashboard, page, tmp_path):
    alerts = Alerts(open_home(tmp_path / "data"))
    page.goto(dashboard.url + "/#/overview")
    expect(page.get_by_role("link", name="Overview")).to_have_attribute("aria-current", "page")
    banner = page.get_by_role("region", name="Alerts")
    expect(banner).to_be_hidden()

    try:
        alerts.raise_alert("retired", "sim-flaky", "<b>retired</b> after 3 hard failures")
    finally:
        alerts.close()
    page.get_by_role("link", name="Races").click()
    expect(banner).to_contain_text("1 new alert")
    expect(banner).to_contain_text("sim-flaky: <b>retired</b> after 3 hard failures")
    expect(banner.locator("b")).to_have_count(0)

    banner.get_by_role("button", name="Dismiss these alerts").click()
    expect(banner).to_be_hidden()

    # the next alert (often in the same second as the first) is the only new one, after a reload
    alerts = Alerts(open_home(tmp_path / "data"))
    try:
        alerts.raise_alert("restored", "sim-flaky", "answers again")
    finally:
        alerts.close()
    page.reload()
    expect(banner).to_contain_text("1 new alert")
    expect(banner.locator("li")).to_have_count(1)
    expect(banner).to_contain_text("sim-flaky: answers again")
    banner.get_by_role("button", name="Dismiss these alerts").click()
    expect(banner).to_be_hidden()


def test_discover_shows_the_queue_and_onboard_takes_a_model_to_ready(
    dashboard_factory, home, sim, page
):
    sim.script(NEW)
    # an entry that ended before: the queue shows it as soon as the page opens
    queue = onboarding_queue.Queue(home)
    try:
        queue.enqueue(None, ["fast"], tasks=1)
    finally:
        queue.close()
    dash = dashboard_factory(home)  # its worker takes `fast` to ready
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


def test_an_onboarding_that_ends_before_the_pages_first_look_still_updates_the_list(
    dashboard_factory, home, sim, page
):
    """The worker may take a model to ready before the page reads the queue after Onboard (the
    simulator answers at once, the machine may be busy): the page must still show the entry
    ready and read the list again. Here every queue read sent after the click is held until the
    server says the entry is ready, so the page's first look always comes too late."""
    sim.script(NEW)
    dash = dashboard_factory(home)
    page.goto(dash.url + "/#/discover")
    onboard = page.get_by_role("region", name="Models not on the roster").get_by_role(
        "button", name=f"Onboard {NEW} from sim"
    )
    expect(onboard).to_be_visible()

    def ready() -> bool:
        status, body = dash.get("/api/onboarding")
        return status == 200 and [(e["alias"], e["status"]) for e in body["data"]] == [
            (NEW, "ready")
        ]

    posted, held = [], []

    def hold_reads_until_ready(route):
        if route.request.method == "POST":
            posted.append(True)
        elif posted:
            held.append(wait_until(ready))
        route.continue_()

    page.route("**/api/onboarding", hold_reads_until_ready)
    onboard.click()
    row = page.get_by_role("region", name="Onboarding queue entries").locator(
        f'tr[data-alias="{NEW}"]'
    )
    expect(row).to_have_attribute("data-status", "ready")
    expect(page.get_by_role("heading", name="Nothing new to add")).to_be_visible()
    assert held and all(held), "the page's queue read was not held until the entry was ready"
    page.unroute("**/api/onboarding")


def test_a_models_dialog_shows_what_the_catalog_knows_and_where_from(
    dashboard_factory, home, sim, page
):
    sim.script("x-one", window=9000, price=[0.5, 2])
    assert main(["catalog", "refresh", "--data", str(home.root)]) == 0
    dash = dashboard_factory(home)
    page.goto(dash.url + "/#/endpoints")
    row = page.get_by_role("region", name="Models on the roster").locator('tr[data-id="x-one"]')
    expect(row).to_contain_text("0.5 / 2 USD")  # no price typed: the listed one
    row.get_by_role("button", name="More for x-one").click()
    row.get_by_role("button", name="Edit x-one").click()
    dialog = page.get_by_role("dialog", name="Edit x-one")
    known = dialog.get_by_role("region", name="What the catalog knows")
    expect(known.locator('tr[data-fact="price_in"]')).to_contain_text("endpoint (GET /models)")
    expect(known.locator('tr[data-fact="price_in"]')).to_contain_text("0.5")
    # the typed window wins; the listed one is not shown over it
    expect(known.locator('tr[data-fact="context"]')).to_contain_text("typed")
    expect(known.locator('tr[data-fact="context"]')).to_contain_text("100000")


def test_a_model_also_served_from_another_endpoint_says_so(dashboard_factory, home, sim, page):
    from panelist.metrics.upstream.sim import SimUpstream

    sim.script(NEW)
    with SimUpstream({NEW: {}}) as mirror:
        Roster(home).add_endpoint("mirror", mirror.url)
        Roster(home).add_model("new-here", "mirror", served=NEW)
        dash = dashboard_factory(home)
        page.goto(dash.url + "/#/discover")
        row = page.get_by_role("region", name="Models not on the roster").locator(
            f'tr[data-endpoint="sim"][data-id="{NEW}"]'
        )
        expect(row).to_contain_text("also on the roster from another endpoint as new-here")


def test_refresh_catalog_and_probe_from_the_dashboard(dashboard_factory, home, sim, page):
    sim.script(NEW)
    dash = dashboard_factory(home)
    page.goto(dash.url + "/#/discover")
    row = page.get_by_role("region", name="Models not on the roster").locator(
        f'tr[data-id="{NEW}"]'
    )
    expect(row).to_have_count(1)
    sim.script(NEW, window=48000)  # the listing now states a window
    page.get_by_role("button", name="Refresh catalog").click()
    expect(page.get_by_text("Catalog refreshed. sim: 7 models")).to_be_visible()
    expect(row).to_contain_text("48k")

    page.goto(dash.url + "/#/endpoints")
    table = page.get_by_role("region", name="Models on the roster")
    table.locator('tr[data-id="fast"]').get_by_role("button", name="Probe fast").click()
    expect(page.get_by_text(re.compile(r"fast answered in"))).to_be_visible()
    probes = [r for r in read_jsonl(home.gateway_runs / "evidence.jsonl") if r["kind"] == "probe"]
    assert [(p["alias"], p["status"]) for p in probes] == [("fast", "ok")]
