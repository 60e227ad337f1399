"""The Evidence page's judge checks, in a real browser against a real dashboard server: with
none, the card says what a check is; after one, each judge and shape with its figures, their
intervals, the baselines beside them and the findings in words. The page is watched for console
errors and CSP violations (conftest.py)."""

from __future__ import annotations

from pathlib import Path

from panelist.metrics.home import open_home
from panelist.metrics.race.judgecheck import JudgeCheck
from panelist.metrics.roster.roster import Roster
from panelist.metrics.upstream.sim import SimUpstream
from panelist.scripts.bench_judgecheck import fill_judged

try:
    from playwright.sync_api import expect
except (
    ImportError
):  # the browser fixture says why: a skip, or a failure under PANELIST_REQUIRE_BROWSER
    expect = None


def test_the_evidence_page_shows_each_judge_against_people(dashboard, page, tmp_path):
    page.goto(dashboard.url + "/#/evidence")
    card = page.get_by_test_id("judge-checks-card")
    expect(card.get_by_role("heading", name="Judges against people")).to_be_visible()
    expect(card).to_contain_text("No judge has been checked yet")

    home = open_home(Path(dashboard.server.parts.panels.home.root))
    with SimUpstream({"judge-const": {"judge": {"mode": "useful"}}}) as sim:
        roster = Roster(home)
        roster.add_endpoint("sims", sim.url)
        roster.add_model("judge-const", "sims", family="constfam", price_in=1.0, price_out=2.0)
        ledger = dashboard.server.parts.panels.ledger
        fill_judged(ledger, 12, seed=5)
        check = JudgeCheck(home, judges=["judge-const"], sample=12, admission=None, ledger=ledger)
        report = check.run(check.plan())
    overall = next(r for r in report["results"] if r["shape"] == "all")

    page.reload()
    card = page.get_by_test_id("judge-checks-card")
    table = card.get_by_role("region", name="Judges against people")
    rows = table.locator("tbody tr")
    expect(rows).to_have_count(3)  # all, general, review
    row = table.locator('tr[data-id="judge-const all"]')
    expect(row).to_contain_text("0.00")  # κ of a constant judge
    expect(row).to_contain_text("constant 0.00 · length")  # the baselines beside it
    expect(row).to_contain_text("no better than the constant baseline (always useful")
    assert overall["findings"][0].startswith("no better than the constant baseline")
    card.get_by_text("What the figures mean").click()
    expect(card.get_by_text("Cohen's κ")).to_be_visible()


def test_a_race_weighted_by_agreement_needs_its_judges_checked(demo, page, watch):
    watch.allow("status of 400")  # the refused start below, on purpose
    page.goto(demo.url + "/#/races")
    page.get_by_test_id("start-race").first.click()
    form = page.get_by_test_id("race-form")
    form.get_by_label("Grade").select_option("general")
    form.get_by_label("Prompt").fill("Where is my order?")
    form.get_by_label("Judges' weights").select_option("agreement")
    page.get_by_role("dialog").get_by_role("button", name="Start").click()
    expect(form.locator('[data-field="jury_weights"] .field-error')).to_contain_text(
        "needs a judge check of every judge"
    )
    _, races = demo.get("/api/races")
    assert races["data"] == [], "refused before any race was named"
