"""Failures in a real browser, in both themes: the Overview's recent window (error rate, answer
times, spend per currency), a failing model's status, and the badges of panels in which seats
failed. The simulator plays three models, one of which always fails."""

from __future__ import annotations

import re

import pytest

try:
    from playwright.sync_api import expect
except (
    ImportError
):  # the browser fixture says why: a skip, or a failure under PANELIST_REQUIRE_BROWSER
    expect = None

from panelist.metrics.home import open_home
from panelist.metrics.roster.collection import Collections
from panelist.metrics.roster.roster import Roster
from panelist.metrics.upstream.sim import SimUpstream

THEMES = ["light", "dark"]


@pytest.fixture()
def broken(tmp_path):
    """A data folder whose ``broken`` model always fails: ``bench/trio`` (fast, mid, broken)
    and ``bench/alone`` (broken only), no explorers; fast is priced in USD, mid in EUR."""
    with SimUpstream(
        {"fast": {}, "mid": {"latency": 0.01}, "broken": {"fail": "server_error"}}
    ) as sim:
        home = open_home(tmp_path / "data")
        home.file("gateway.json").write_text('{"max_explorers": 0}')
        roster = Roster(home)
        roster.add_endpoint("sim", sim.url)
        roster.add_model("fast", "sim", family="fast", price_in=1.0, price_out=2.0)
        roster.add_model("mid", "sim", family="mid", price_in=3.0, price_out=4.0, currency="EUR")
        roster.add_model("broken", "sim", family="broken")
        collections = Collections(home)
        collections.save(roster.view(), "trio", ["fast", "mid", "broken"])
        collections.save(roster.view(), "alone", ["broken"])
        yield home


def ask(dash, collection: str, n: int = 1) -> None:
    for i in range(n):
        status, body = dash.post(
            "/v1/chat/completions",
            {"model": collection, "messages": [{"role": "user", "content": f"Review {i}"}]},
        )
        assert status in (200, 502), body  # 502: no seat answered (bench/alone)


@pytest.mark.parametrize("context", THEMES, indirect=True)
def test_the_overview_shows_the_windows_error_rates_answer_times_and_spend(
    broken, dashboard_factory, page, tmp_path
):
    dash = dashboard_factory(broken.root)
    ask(dash, "bench/trio", 3)
    page.goto(dash.url + "/#/overview?window=hour")
    usage = page.locator("#usage")
    expect(usage).to_have_attribute("data-window", "hour")
    expect(usage.get_by_role("link", name="Last hour")).to_have_attribute("aria-current", "true")
    row = usage.locator('tr[data-id="broken"]')
    expect(row).to_contain_text("100%")
    expect(row).to_contain_text("failing")
    expect(row).to_contain_text("no price")
    expect(usage.locator('tr[data-id="fast"]')).to_contain_text("0%")
    expect(usage.locator('tr[data-id="fast"]')).to_contain_text("USD")
    expect(usage.locator('tr[data-id="mid"]')).to_contain_text("EUR")
    totals = usage.locator(".stats")
    expect(totals).to_contain_text("33%")  # 3 failed of 9 seats
    # one amount per currency, never added together
    expect(totals.locator(".stat", has_text="spend in USD")).to_contain_text("USD")
    expect(totals.locator(".stat", has_text="spend in EUR")).to_contain_text("EUR")
    # the answer times read as a time; a model that never answered has none
    expect(usage.locator('tr[data-id="fast"] td').nth(3)).to_have_text(re.compile(r"^\d+ ms$"))
    expect(usage.locator('tr[data-id="broken"] td').nth(3)).to_have_text("—")
    models = page.get_by_role("region", name="Models on the roster")
    expect(models.locator('tr[data-id="broken"]')).to_contain_text("3 of last 3 failed")
    expect(page.locator(".stat", has_text="failing now")).to_contain_text("1")
    page.screenshot(path=str(tmp_path / "overview.png"), full_page=True)

    usage.get_by_role("link", name="Last 7 days").click()
    expect(page).to_have_url(re.compile(r"#/overview\?window=week$"))
    expect(page.locator("#usage")).to_have_attribute("data-window", "week")
    expect(page.locator('#usage tr[data-id="broken"]')).to_contain_text("100%")


@pytest.mark.parametrize("context", THEMES, indirect=True)
def test_panels_with_failed_seats_carry_a_badge_and_one_nobody_answered_is_marked(
    broken, dashboard_factory, page, tmp_path
):
    dash = dashboard_factory(broken.root)
    ask(dash, "bench/trio")
    ask(dash, "bench/alone")
    page.goto(dash.url + "/#/panels")
    some = page.locator(".panel-item", has_text="bench/trio")
    none = page.locator(".panel-item", has_text="bench/alone")
    expect(some.locator(".badge[data-failed]")).to_have_text("1 of 3 seats failed")
    expect(some).not_to_have_class(re.compile(r"\ball-failed\b"))
    expect(none.locator(".badge[data-failed]")).to_have_text("no seat answered")
    expect(none).to_have_class(re.compile(r"\ball-failed\b"))
    page.screenshot(path=str(tmp_path / "panels.png"), full_page=True)
    # the panel found by its id shows the same badge
    panel_id = none.locator(".panel-id").inner_text()
    page.get_by_label("Find a panel or call id").fill(panel_id)
    page.get_by_role("button", name="Find").click()
    expect(page.locator(".panel-item.found .badge[data-failed]")).to_have_text("no seat answered")


def test_a_failed_probe_shows_as_failed_on_the_models_page(broken, dashboard_factory, page):
    dash = dashboard_factory(broken.root)
    page.goto(dash.url + "/#/endpoints")
    row = page.get_by_role("region", name="Models on the roster").locator('tr[data-id="broken"]')
    expect(row).to_contain_text("untested")
    row.get_by_role("button", name="Probe broken").click()
    expect(page.get_by_text(re.compile(r"broken did not answer: server_error"))).to_be_visible()
    expect(row).to_contain_text("failing")
    expect(row).to_contain_text("probe failed (server_error)")
