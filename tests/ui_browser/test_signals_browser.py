"""Signals that lead somewhere, in a real browser: an alert's message, the Overview's health
tiles and each Recent activity row open the filtered view that explains them; after a restart
the model page lists the newest failure first while the index catches up; and on Ask the focus
goes to the first answer after Ctrl+Enter and stays in place after a verdict, given with a
button or in the dialog, while a long list of models not seated folds into a count."""

from __future__ import annotations

import re
from urllib.parse import parse_qs

import pytest

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture says why: a skip, or a failure when required
    expect = None

from conftest import wait_until
from panelist.metrics.home import open_home
from panelist.metrics.ledger.ledger import Ledger
from panelist.metrics.ledger.search import SearchIndex
from panelist.metrics.roster.collection import Collections
from panelist.metrics.roster.roster import Roster
from panelist.metrics.upstream.sim import SimUpstream
from test_search_tail import Held, write

PATIENCE = 30.0


@pytest.fixture()
def broken(tmp_path):
    """A data folder whose ``broken`` model always fails: ``bench/pair`` (fast, broken), no
    explorers."""
    with SimUpstream({"fast": {}, "broken": {"fail": "server_error"}}) as sim:
        home = open_home(tmp_path / "data")
        home.file("gateway.json").write_text('{"max_explorers": 0}')
        roster = Roster(home)
        roster.add_endpoint("sim", sim.url)
        roster.add_model("fast", "sim", family="fast")
        roster.add_model("broken", "sim", family="broken")
        Collections(home).save(roster.view(), "pair", ["fast", "broken"])
        yield home


def ask(dash, n: int) -> list[str]:
    made = []
    for i in range(n):
        status, body = dash.post(
            "/v1/chat/completions",
            {"model": "bench/pair", "messages": [{"role": "user", "content": f"Review {i}"}]},
        )
        assert status == 200, body
        made.append(body["bench"]["panel"])
    return made


def hash_query(page) -> dict:
    """The filters the page's address holds (#/panels?…)."""
    url = page.url
    return {k: v[0] for k, v in parse_qs(url.split("?", 1)[1]).items()} if "?" in url else {}


def failing_alert(dash) -> dict:
    def found():
        status, body = dash.get("/api/alerts?limit=20")
        found.alert = next((a for a in body["data"] if a["kind"] == "failing"), None)
        return found.alert is not None

    assert wait_until(found, PATIENCE), "no failing alert was raised"
    return found.alert


def test_an_alert_click_lands_on_that_models_failed_seats(broken, dashboard_factory, page):
    dash = dashboard_factory(broken.root)
    panels = ask(dash, 3)
    alert = failing_alert(dash)
    assert alert["subject"] == "broken"
    page.goto(dash.url + "/#/overview")
    banner = page.locator("#alerts-banner")
    item = banner.locator('li[data-kind="failing"]')
    link = item.get_by_test_id("alert-link")
    # the model's name links to its page and is said once; the message links to its failures
    expect(item).to_contain_text("broken is failing")
    expect(link).to_contain_text("is failing")
    expect(link).to_contain_text("Probe or Retire on its model page")
    link.click()
    expect(page).to_have_url(re.compile(r"#/panels\?"))
    wanted = hash_query(page)
    assert wanted["model"] == "broken" and wanted["status"] == "failed", wanted
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", wanted["since"]), wanted
    listed = page.locator(".panel-item")
    expect(listed).to_have_count(3)
    assert [listed.nth(i).get_attribute("data-panel") for i in range(3)] == panels[::-1]
    expect(page.get_by_label("Model", exact=True)).to_have_value("broken")
    expect(page.get_by_label("Status", exact=True)).to_have_value("failed")


def test_health_tiles_and_activity_rows_lead_to_what_explains_them(broken, dashboard_factory, page):
    dash = dashboard_factory(broken.root)
    ask(dash, 3)
    failing_alert(dash)
    page.goto(dash.url + "/#/overview?window=hour")
    stats = page.locator(".stat")
    # verdicts owed: the owed queue, not the whole list of panels
    expect(stats.filter(has_text="verdicts owed")).to_have_attribute("href", "#/owed")
    expect(stats.filter(has_text="failing now")).to_have_attribute(
        "href", "#/panels?model=broken&status=failed&since=24h"
    )
    expect(stats.filter(has_text="error rate")).to_have_attribute(
        "href", "#/panels?status=failed&since=1h"
    )
    usage = page.locator("#usage")
    expect(usage.locator('tr[data-id="fast"]').get_by_test_id("activity-failed")).to_have_count(0)
    usage.locator('tr[data-id="broken"]').get_by_test_id("activity-failed").click()
    expect(page).to_have_url(re.compile(r"#/panels\?"))
    assert hash_query(page) == {"model": "broken", "status": "failed", "since": "1h"}
    expect(page.locator(".panel-item")).to_have_count(3)
    page.go_back()
    page.locator('#usage tr[data-id="fast"]').get_by_test_id("activity-link").click()
    expect(page).to_have_url(re.compile(r"#/panels\?"))
    assert hash_query(page) == {"model": "fast", "since": "1h"}
    expect(page.locator(".panel-item")).to_have_count(3)
    page.go_back()
    page.locator(".stat", has_text="verdicts owed").click()
    expect(page).to_have_url(re.compile(r"#/owed$"))


def test_after_a_restart_the_newest_failure_is_first_on_the_model_page(
    broken, dashboard_factory, page
):
    runs = broken.gateway_runs
    with Ledger(runs) as ledger:
        write(ledger, 20, first=0, failing=range(20), alias="broken")
    builder = SearchIndex(runs)
    try:
        assert wait_until(lambda: builder.catch_up()["complete"] and not builder.building)
    finally:
        builder.close()
    with Ledger(runs) as ledger:  # while no server ran
        write(ledger, 200, first=1000, alias="broken")
        [newest] = write(ledger, 1, first=5000, failing=[0], alias="broken")
    dash = dashboard_factory(broken.root)
    held = Held()
    # the index is caught up by another process, held after its first window
    builder = SearchIndex(runs, inline_bytes=0, batch_panels=20, tail_bytes=4000, on_batch=held)
    try:
        builder.catch_up()
        assert held.reached.wait(PATIENCE)
        page.goto(dash.url + "/#/models/broken")
        note = page.get_by_test_id("index-note")
        behind = builder.state()["behind_panels"]
        assert 0 < behind < 201
        expect(note).to_contain_text(f"The search index is catching up: {behind:,} panels behind")
        failures = page.get_by_role("region", name=re.compile("failures", re.I))
        expect(failures.locator("tbody tr").first).to_contain_text(newest)
    finally:
        held.release()
        builder.close()


@pytest.fixture()
def crowded(home):
    """``home`` with seven more models on the roster: most are not seated in a trio panel."""
    roster = Roster(home)
    for i in range(7):
        roster.add_model(f"extra-{i}", "sim", family=f"extra-{i}", context=100_000)
    return home


def test_ask_moves_the_focus_to_the_first_answer_and_keeps_it_through_verdicts(
    crowded, dashboard_factory, page
):
    dash = dashboard_factory(crowded)
    page.goto(dash.url + "/#/ask")
    prompt = page.get_by_label("Prompt", exact=True)
    prompt.fill("Review: def add(a, b): return a - b")
    prompt.press("Control+Enter")
    expect(page.get_by_text(re.compile(r"^Done: \d of \d seats answered"))).to_be_visible()
    cards = page.locator(".compare-grid > .answer-card[data-call]")
    expect(cards.first).to_be_focused()
    page.keyboard.press("u")  # at once: no click needed to leave the prompt
    expect(cards.nth(0).get_by_role("button", name="Useful", exact=True)).to_have_attribute(
        "aria-pressed", "true"
    )

    # a verdict given with a button keeps the focus on that button
    not_useful = cards.nth(1).get_by_role("button", name="Not useful", exact=True)
    not_useful.click()
    expect(not_useful).to_have_attribute("aria-pressed", "true")
    expect(not_useful).to_be_focused()
    page.keyboard.press("u")  # so the keys still act on that answer
    expect(cards.nth(1).get_by_role("button", name="Useful", exact=True)).to_have_attribute(
        "aria-pressed", "true"
    )
    expect(cards.nth(0).get_by_role("button", name="Useful", exact=True)).to_have_attribute(
        "aria-pressed", "true"
    )

    # a verdict saved in the dialog keeps the focus on Save, and closing it goes back
    more = cards.nth(1).get_by_role("button", name="Add a note or claims…")
    more.click()
    dialog = page.get_by_role("dialog")
    dialog.get_by_label("Not useful").check()
    save = dialog.get_by_role("button", name="Save verdict")
    save.click()
    expect(dialog.get_by_text("Verdict changed.")).to_be_visible()
    expect(save).to_be_focused()
    page.keyboard.press("Escape")
    expect(dialog).to_have_count(0)
    expect(more).to_be_focused()


def test_models_not_seated_fold_into_a_count(crowded, dashboard_factory, page):
    dash = dashboard_factory(crowded)
    page.goto(dash.url + "/#/ask")
    page.get_by_label("Prompt", exact=True).fill("Review x = 1")
    page.get_by_role("button", name="Ask", exact=True).click()
    expect(page.get_by_text(re.compile(r"^Done: \d of \d seats answered"))).to_be_visible()
    status, last = dash.get("/api/panels?limit=1")
    record = dash.get(f"/api/panels/{last['data'][0]['panel']}")[1]
    skipped = record.get("skipped") or []
    assert len(skipped) > 3, record
    fold = page.get_by_test_id("not-seated")
    expect(fold).to_contain_text(f"Not seated: {len(skipped)} models")
    names = fold.locator(".model-link")
    expect(names.first).to_be_hidden()
    show = fold.get_by_role("button", name="Show")
    expect(show).to_have_attribute("aria-expanded", "false")
    show.click()
    expect(names).to_have_count(len(skipped))
    expect(names.first).to_be_visible()
    expect(fold.get_by_role("button", name="Hide")).to_have_attribute("aria-expanded", "true")


def test_a_grade_change_leaves_the_focus_where_it_was(demo, page):
    page.goto(demo.url + "/#/overview")
    section = page.locator("section#grades")
    expect(section.locator("tbody tr")).to_have_count(3)
    pin = section.get_by_label("Model pinned for general")
    pin.focus()  # as a person choosing from it with the keyboard or a pointer
    pin.select_option("sim-flaky")
    expect(pin).to_have_value("sim-flaky")
    expect(pin).to_be_focused()  # the section was drawn anew; its picker has the focus back
    up = section.get_by_role("button", name="Move general up (weaker)")
    up.focus()
    page.keyboard.press("Enter")
    expect(section.locator("tbody tr").first).to_have_attribute("data-grade", "general")
    # it cannot move further up: the focus goes to its Down, in the same row
    expect(section.get_by_role("button", name="Move general down (stronger)")).to_be_focused()


def test_a_model_failing_its_probe_leads_to_its_page(broken, dashboard_factory, page):
    dash = dashboard_factory(broken.root)
    status, body = dash.post("/api/models/broken/probe")
    assert status == 200, body
    page.goto(dash.url + "/#/overview")
    tile = page.locator(".stat", has_text="failing now")
    expect(tile).to_contain_text("1")
    expect(tile).to_have_attribute("href", "#/models/broken")  # a probe is no panel
