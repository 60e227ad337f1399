"""The Evidence page's ratings, in a real browser against a real dashboard server: each shape's
models with their rating, interval and comparisons, the strongest first; the shape picker
narrows them. The page is watched for console errors and CSP violations (conftest.py)."""

from __future__ import annotations

import math

try:
    from playwright.sync_api import expect
except (
    ImportError
):  # the browser fixture says why: a skip, or a failure under PANELIST_REQUIRE_BROWSER
    expect = None


def pct(x: float) -> int:
    return math.floor(x * 100 + 0.5)  # as the page's Math.round


def judged_panels(dash, rounds):
    """Ask the demo collection ``rounds`` times; judge its first seat useful and the others not."""
    for _ in range(rounds):
        status, body = dash.request(
            "POST",
            "/v1/chat/completions",
            {"model": "bench/demo", "messages": [{"role": "user", "content": "Review: x = 1"}]},
        )
        assert status == 200, body
        seats = [s for s in body["bench"]["seats"] if s["status"] == "ok"]
        assert len(seats) >= 2, body["bench"]
        for i, seat in enumerate(seats):
            status, _ = dash.post("/api/verdict", {"call": seat["call"], "useful": i == 0})
            assert status == 200
    return seats[0]["alias"]


def test_the_evidence_page_shows_ratings_with_intervals_per_shape(demo, page):
    best = judged_panels(demo, 4)
    status, ratings = demo.get("/api/ratings")
    assert status == 200 and ratings["shapes"] == ["general"]
    (general,) = ratings["data"]
    top = general["models"][0]
    assert top["alias"] == best

    page.goto(demo.url + "/#/evidence")
    card = page.get_by_test_id("ratings-card")
    expect(card.get_by_role("heading", name="Ratings", exact=True)).to_be_visible()
    block = card.locator('[data-shape="general"]')
    expect(block.get_by_role("heading")).to_contain_text(
        f"general: {general['comparisons']} comparisons ({general['comparisons']} from verdicts)"
    )
    table = block.get_by_role("region", name="Ratings on general")
    rows = table.locator("tbody tr")
    expect(rows).to_have_count(len(general["models"]))
    expect(rows.first).to_have_attribute("data-id", best)  # the strongest first
    first = table.locator(f'tr[data-id="{best}"]')
    expect(first).to_contain_text(f"{pct(top['rating'])}%")
    lo, hi = top["interval"]
    expect(first.locator(".interval")).to_have_attribute(
        "title", f"95% interval {pct(lo)}–{pct(hi)}%"
    )
    expect(first.locator("td").nth(2)).to_have_text(str(top["wins"]))

    # a shape without comparisons shows no ratings card
    page.goto(demo.url + "/#/evidence?shape=review")
    expect(page.get_by_text("No evidence yet")).to_be_visible()  # no verdict on review
    expect(page.get_by_test_id("ratings-card")).to_have_count(0)


def judge_panel(ledger, shape, seats):
    """One panel of ``shape`` whose seats (alias, useful) are all judged."""
    panel = ledger.new_panel()
    for i, (alias, useful) in enumerate(seats):
        call = f"{panel}.member{i + 1}"
        ledger.record_seat(
            {
                "call": call,
                "panel": panel,
                "alias": alias,
                "shape": shape,
                "status": "ok",
                "key": "local",
            }
        )
        ledger.record_verdict(call, useful=useful)


def test_the_ratings_of_several_shapes_open_the_one_with_most_comparisons_and_fold_the_rest(
    tmp_path, dashboard_factory, page
):
    from panelist.metrics.home import open_home
    from panelist.metrics.ledger.ledger import Ledger

    data = tmp_path / "shapes"
    with Ledger(open_home(data).gateway_runs) as ledger:
        for _ in range(3):
            judge_panel(ledger, "general", [("m-fast", True), ("m-mid", False), ("m-slow", False)])
        judge_panel(ledger, "review", [("m-mid", True), ("m-slow", False)])
    dash = dashboard_factory(data)
    asked = []
    page.on("request", lambda r: asked.append(r.url.split("?")[0].removeprefix(dash.url)))

    page.goto(dash.url + "/#/evidence")
    card = page.get_by_test_id("ratings-card")
    general = card.locator('[data-shape="general"]')
    review = card.locator('[data-shape="review"]')
    # the shape with the most comparisons is open, its models drawn, the strongest first
    expect(general.locator("details")).to_have_attribute("open", "")
    rows = general.get_by_role("region", name="Ratings on general").locator("tbody tr")
    expect(rows).to_have_count(3)
    expect(rows.first).to_have_attribute("data-id", "m-fast")
    # the other is folded, says what it holds, and is drawn only when opened
    fold = review.locator("details")
    expect(fold).not_to_have_attribute("open", "")
    expect(fold.locator("summary")).to_have_text("Ratings of 2 models on review")
    expect(review.get_by_role("region", name="Ratings on review")).to_have_count(0)
    fold.locator("summary").click()
    rows = review.get_by_role("region", name="Ratings on review").locator("tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.first).to_have_attribute("data-id", "m-mid")
    # the shapes come with the evidence: the page does not read the whole roster
    assert "/api/evidence" in asked and "/api/models" not in asked, asked


def test_the_evidence_page_is_drawn_while_its_ratings_are_still_being_fitted(
    tmp_path, dashboard_factory, page, watch
):
    from panelist.metrics.home import open_home
    from panelist.metrics.ledger.ledger import Ledger

    data = tmp_path / "slow"
    with Ledger(open_home(data).gateway_runs) as ledger:
        judge_panel(ledger, "general", [("m-fast", True), ("m-slow", False)])
    dash = dashboard_factory(data)
    held = []  # the ratings' answer is held back, as a slow fit would

    def hold(route):
        held.append(route)

    page.route("**/api/ratings*", hold)
    page.goto(dash.url + "/#/evidence")
    expect(page.get_by_role("heading", name="Useful answers, with 95% intervals")).to_be_visible()
    slot = page.get_by_test_id("ratings-slot")
    expect(slot).to_contain_text("Fitting the ratings…")
    assert len(held) == 1
    held[0].continue_()
    page.unroute("**/api/ratings*", hold)
    card = page.get_by_test_id("ratings-card")
    expect(card.locator('[data-shape="general"] tbody tr').first).to_have_attribute(
        "data-id", "m-fast"
    )
    expect(slot).not_to_contain_text("Fitting")

    # ratings that cannot be read say so in their card; the rest of the page stays
    watch.allow(r"status of 400")
    page.goto(dash.url + "/#/evidence?shape=Not-A-Shape")
    expect(slot.get_by_role("alert")).to_contain_text("is not a shape")
    expect(page.get_by_role("heading", name="Evidence", level=1)).to_be_visible()
