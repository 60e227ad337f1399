"""What the dashboard says, in a real browser: the first run's guidance goes on past the first
endpoint, a collection card asks itself, Add all says one thing, refusals name their field
beside it, and messages read as sentences. Each test watches the page for console errors and
CSP violations (conftest.py)."""

from __future__ import annotations

import re

try:
    from playwright.sync_api import expect
except (
    ImportError
):  # the browser fixture says why: a skip, or a failure under PANELIST_REQUIRE_BROWSER
    expect = None

from panelist.metrics.home import open_home
from panelist.metrics.roster.catalog import Catalog
from panelist.metrics.roster.collection import Collections
from panelist.metrics.roster.roster import Roster
from panelist.metrics.upstream.sim import SimUpstream


def test_after_the_first_endpoint_the_guidance_goes_on_to_a_collection_and_asking_it(
    dashboard, page, tmp_path
):
    with SimUpstream(
        {"m-one": {"window": 32000, "vision": True, "price": [0.5, 2]}, "m-two": {}, "m-three": {}}
    ) as up:
        page.goto(dashboard.url + "/")
        page.get_by_role("link", name="Add an endpoint").click()
        form = page.get_by_role("form", name="Add an endpoint")
        form.get_by_label("Name", exact=True).fill("local")
        form.get_by_label("Base URL").fill(up.url)
        form.get_by_role("button", name="Test").click()
        expect(form.get_by_text(re.compile(r"Answered 200 in"))).to_be_visible()
        form.get_by_role("button", name="Save endpoint").click()

        listing = page.locator('[data-discover="local"]')
        listing.get_by_role("button", name="Add all 3").click()
        expect(listing.get_by_text("added", exact=True)).to_have_count(3)
        # one summary, not a toast per model
        toasts = page.locator(".toasts .toast")
        expect(toasts.filter(has_text="Added 3 models from local")).to_have_count(1)
        expect(toasts.filter(has_text=re.compile(r"^Added m-"))).to_have_count(0)
        # added as Discover adds: what the endpoint reports came along
        facts = Catalog(open_home(tmp_path / "data")).facts("m-one")
        assert facts["context"]["value"] == 32000 and facts["vision"]["value"] is True, facts
        assert facts["price_in"]["value"] == 0.5, facts
        row = page.get_by_role("region", name="Models on the roster").locator('tr[data-id="m-one"]')
        expect(row).to_contain_text("0.5 / 2 USD")

        # the next step is named where the models were added, and on the overview
        listing.get_by_role("link", name="Make a collection").click()
    dialog = page.get_by_role("dialog", name="New collection")
    expect(dialog).to_be_visible()
    page.keyboard.press("Escape")
    page.goto(dashboard.url + "/#/overview")
    nxt = page.get_by_test_id("next-step")
    expect(nxt).to_contain_text("Next: make a collection")
    expect(nxt.get_by_role("link", name="Make a collection")).to_have_attribute(
        "href", "#/collections?new=1"
    )


def test_a_collection_card_has_an_ask_button_that_opens_ask_with_it_chosen(demo, page, tmp_path):
    home = open_home(tmp_path / "data")
    Collections(home).save(
        Roster(home).view(), "pair", ["sim-steady", "sim-swift"], description="Two reviewers"
    )
    page.goto(demo.url + "/#/overview")
    # a collection, no panel yet: the next step is asking it
    expect(page.get_by_test_id("next-step")).to_contain_text("Next: ask your collection")
    page.goto(demo.url + "/#/collections")
    card = page.locator('[data-collection="pair"]')
    card.get_by_role("link", name="Ask bench/pair").click()
    expect(page).to_have_url(re.compile(r"#/ask\?collection=bench%2Fpair$"))
    expect(page.get_by_label("Collection", exact=True)).to_have_value("bench/pair")


def test_a_negative_limit_is_refused_beside_its_field_by_its_name(demo, page, watch):
    watch.allow(r"status of 400")  # refused on purpose
    page.goto(demo.url + "/#/collections")
    limits = page.get_by_role("form", name="Gateway limits")
    box = limits.get_by_label("Max explorers")
    box.fill("-1")
    limits.get_by_role("button", name="Save limits").click()
    error = box.locator("xpath=..").locator(".field-error")
    expect(error).to_contain_text("Max explorers must be a whole number from 0")
    expect(error).not_to_contain_text("max_explorers")
    expect(error).not_to_contain_text(".json")
    expect(box).to_have_attribute("aria-invalid", "true")
    expect(box).to_be_focused()
    expect(
        limits.get_by_role("status").or_(limits.get_by_role("alert")).filter(has_text="Not saved")
    ).to_have_count(1)
    # fixed and saved, the mark goes
    box.fill("1")
    limits.get_by_role("button", name="Save limits").click()
    expect(page.locator('[data-collection="demo"]').get_by_test_id("calls-sum")).to_contain_text(
        "1 explorer"
    )


def test_a_refused_connection_reads_as_no_answer_not_a_status_and_a_time(dashboard, page):
    page.goto(dashboard.url + "/#/endpoints?add=1")
    form = page.get_by_role("form", name="Add an endpoint")
    form.get_by_label("Name", exact=True).fill("gone")
    form.get_by_label("Base URL").fill("http://127.0.0.1:9/v1")  # nothing listens on port 9
    form.get_by_role("button", name="Test").click()
    failed = form.get_by_text(re.compile(r"^Test failed"))
    expect(failed).to_have_text("Test failed: no answer")
    expect(form).to_contain_text("connection refused")
    expect(form).not_to_contain_text("(502)")
    expect(form).not_to_contain_text("after 0.00 s")


def test_too_many_wrong_logins_say_when_to_try_again_once(dashboard_factory, context):
    dash = dashboard_factory(env={"PANELIST_ADMIN_TOKEN": "correct-horse-battery-staple"})
    ctx, watch = context
    watch.allow(r"status of 4(01|29)")  # the wrong tokens, refused on purpose
    page = ctx.new_page()
    page.goto(dash.url + "/login")
    alert = page.get_by_role("alert")
    for i in range(6):
        page.get_by_label("Admin token").fill(f"wrong-{i}")
        page.get_by_role("button", name="Log in").click()
        expect(alert).to_be_visible()
        if "too many" in (alert.text_content() or ""):
            break
        expect(alert).to_contain_text("Check the token and try again.")
        page.evaluate("document.getElementById('login-message').replaceChildren()")
    expect(alert).to_contain_text("too many failed logins")
    said = alert.text_content().lower()
    assert said.count("try again in") == 1, said


def test_discover_never_says_nothing_is_new_while_an_endpoint_was_not_read(
    dashboard_factory, home, page
):
    Roster(home).add_endpoint("gone", "http://127.0.0.1:9/v1", by="test")  # nothing listens
    dash = dashboard_factory(home)
    page.goto(dash.url + "/#/discover")
    expect(page.get_by_text("gone was not read")).to_be_visible()
    expect(
        page.get_by_role("heading", name="Nothing new from the endpoints that answered")
    ).to_be_visible()
    expect(page.get_by_role("heading", name="Nothing new to add")).to_have_count(0)
    expect(page.locator("#main")).to_contain_text(
        "could not be read, so what it serves is not known yet"
    )


def test_removing_an_endpoint_with_models_explains_instead_of_offering_a_refused_remove(demo, page):
    page.goto(demo.url + "/#/endpoints")
    page.get_by_role("button", name="Remove demo", exact=True).click()
    dialog = page.get_by_role("dialog", name="Endpoint demo still has models")
    expect(dialog).to_contain_text("Remove its 5 models from the roster first")
    expect(dialog.get_by_role("link", name="sim-steady")).to_be_visible()
    expect(dialog.get_by_role("button", name="Remove")).to_have_count(0)
    dialog.get_by_role("button", name="Close").last.click()
    expect(dialog).to_have_count(0)
    assert demo.get("/api/endpoints")[1]["data"][0]["name"] == "demo"


def test_a_missing_name_is_said_beside_the_name_field(demo, page):
    page.goto(demo.url + "/#/collections")
    page.get_by_role("button", name="New collection").first.click()
    dialog = page.get_by_role("dialog", name="New collection")
    dialog.get_by_role("button", name="Create collection").click()
    name = dialog.get_by_label("Name", exact=True)
    expect(name).to_have_attribute("aria-invalid", "true")
    expect(name.locator("xpath=..").locator(".field-error")).to_have_text(
        "Give the collection a name."
    )
    expect(name).to_be_focused()
