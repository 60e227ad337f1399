"""What an operator's trial of the dashboard found, each checked in a real browser: the model
page's tiles keep their words apart and inside the tile, the Useful column sorts by what the
interval can vouch for, the faint text reads in both themes, a refused login counts down and a
suite figure that is a dash says why. The pages are watched for console errors and CSP
violations (conftest.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

try:
    from playwright.sync_api import expect
except (
    ImportError
):  # the browser fixture says why: a skip, or a failure under PANELIST_REQUIRE_BROWSER
    expect = None

from conftest import wait_until
from panelist.metrics.home import open_home
from panelist.metrics.roster.collection import Collections
from panelist.metrics.roster.roster import Roster
from panelist.metrics.upstream.sim import SimUpstream

THEMES = ["light", "dark"]


def ask_demo(dash, rounds: int, judge) -> None:
    """Ask the demo collection ``rounds`` times; ``judge(round, alias)`` → True, False or None
    (no verdict) for each answered seat."""
    for i in range(rounds):
        status, body = dash.post(
            "/v1/chat/completions",
            {"model": "bench/demo", "messages": [{"role": "user", "content": f"Review: x = {i}"}]},
        )
        assert status == 200, body
        for seat in body["bench"]["seats"]:
            useful = judge(i, seat["alias"]) if seat["status"] == "ok" else None
            if useful is not None:
                status, said = dash.post("/api/verdict", {"call": seat["call"], "useful": useful})
                assert status == 200, said


def inside(inner: dict, outer: dict) -> bool:
    return (
        inner["x"] >= outer["x"] - 0.5
        and inner["y"] >= outer["y"] - 0.5
        and inner["x"] + inner["width"] <= outer["x"] + outer["width"] + 0.5
        and inner["y"] + inner["height"] <= outer["y"] + outer["height"] + 0.5
    )


@pytest.fixture()
def failing(tmp_path):
    """A data folder whose ``broken`` model always fails and ``fine`` answers: ``bench/pair``."""
    with SimUpstream({"fine": {}, "broken": {"fail": "server_error"}}) as sim:
        home = open_home(tmp_path / "data")
        home.file("gateway.json").write_text('{"max_explorers": 0}')
        roster = Roster(home)
        roster.add_endpoint("sim", sim.url)
        roster.add_model("fine", "sim", family="fine")
        roster.add_model("broken", "sim", family="broken")
        Collections(home).save(roster.view(), "pair", ["fine", "broken"])
        yield home


def test_the_model_pages_tiles_keep_their_words_apart_and_inside_the_tile(
    failing, dashboard_factory, page
):
    dash = dashboard_factory(failing.root)
    for i in range(5):
        status, body = dash.post(
            "/v1/chat/completions",
            {"model": "bench/pair", "messages": [{"role": "user", "content": f"Review {i}"}]},
        )
        assert status == 200, body
        fine = next(s for s in body["bench"]["seats"] if s["alias"] == "fine")
        assert dash.post("/api/verdict", {"call": fine["call"], "useful": i < 3})[0] == 200
    for alias, tile_text in (
        ("broken", re.compile(r"failing\s*\n\s*5 of last 5 failed")),
        ("fine", re.compile(r"60%\s+of 5\s*\n\s*\d+–\d+%")),
    ):
        page.goto(f"{dash.url}/#/models/{alias}")
        stats = page.get_by_test_id("model-stats")
        tile = stats.locator(".stat").filter(
            has_text="Status" if alias == "broken" else "Useful rate"
        )
        expect(tile).to_have_count(1)
        said = tile.locator(".stat-value").inner_text()  # as laid out: a line break between parts
        assert tile_text.search(said), (alias, said)
        for t in range(stats.locator(".stat").count()):
            one = stats.locator(".stat").nth(t)
            box = one.bounding_box()
            for part in one.locator(".stat-value *, .stat-label").all():
                assert inside(part.bounding_box(), box), (alias, t, part.inner_text())
            # nothing cut off: no element of the tile is wider than the room it has
            clipped = one.evaluate("""t => [...t.querySelectorAll('*')]
                .filter(e => e.scrollWidth > e.clientWidth + 1 && getComputedStyle(e).overflow !== 'visible')
                .map(e => e.textContent)""")
            assert clipped == [], (alias, clipped)


def test_the_useful_column_sorts_by_the_low_end_of_its_interval(demo, page):
    # sim-swift: 1 useful of 1 (100%, 21–100%); sim-steady: 9 of 10 (90%, 60–98%)
    ask_demo(
        demo,
        10,
        lambda i, alias: {"sim-swift": True if i == 0 else None, "sim-steady": i != 0}.get(alias),
    )
    page.goto(demo.url + "/#/overview")
    table = page.get_by_role("region", name="Models on the roster")
    head = table.locator("th", has_text="Useful")
    expect(head).to_have_attribute("title", re.compile("low end of its 95% interval"))
    head.get_by_role("button").click()
    expect(head).to_have_attribute("aria-sort", "descending")
    rows = table.locator("tbody tr[data-id]")
    expect(rows.nth(0)).to_have_attribute("data-id", "sim-steady")
    expect(rows.nth(1)).to_have_attribute("data-id", "sim-swift")


def luminance(rgb: str) -> float:
    parts = [float(x) for x in re.findall(r"[\d.]+", rgb)[:3]]
    lin = [
        c / 255 / 12.92 if c / 255 <= 0.04045 else ((c / 255 + 0.055) / 1.055) ** 2.4 for c in parts
    ]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def contrast(a: str, b: str) -> float:
    la, lb = sorted((luminance(a), luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


@pytest.mark.parametrize("context", THEMES, indirect=True)
def test_faint_text_reads_at_4_5_to_1_on_the_page_and_on_a_card(demo, page):
    page.goto(demo.url + "/#/overview")
    faint = page.locator(".faint").first
    expect(faint).to_be_visible()
    colour = faint.evaluate("e => getComputedStyle(e).color")
    grounds = page.evaluate("""() => {
        const card = document.querySelector('.card') || document.body;
        return [getComputedStyle(document.body).backgroundColor, getComputedStyle(card).backgroundColor];
    }""")
    for ground in grounds:
        assert contrast(colour, ground) >= 4.5, (colour, ground, contrast(colour, ground))


def test_a_refused_login_counts_its_wait_down(dashboard_factory, context):
    dash = dashboard_factory(env={"PANELIST_ADMIN_TOKEN": "correct-horse-battery-staple"})
    ctx, watch = context
    watch.allow(r"status of 4(01|29)")  # the wrong tokens, refused on purpose
    page = ctx.new_page()
    page.clock.install()
    page.goto(dash.url + "/login")
    alert = page.get_by_role("alert")
    for i in range(6):
        page.get_by_label("Admin token").fill(f"wrong-{i}")
        page.get_by_role("button", name="Log in").click()
        expect(alert).to_be_visible()
        if "too many" in (alert.text_content() or ""):
            break
        page.evaluate("document.getElementById('login-message').replaceChildren()")
    wait = page.get_by_test_id("login-wait")
    expect(wait).to_have_text(re.compile(r"^Try again in \d+ s\.$"))
    first = int(re.search(r"\d+", wait.inner_text()).group())
    assert alert.inner_text().lower().count("try again") == 1
    page.clock.run_for(2000)
    expect(wait).to_have_text(f"Try again in {first - 2} s.")
    page.clock.run_for(first * 1000)
    expect(wait).to_have_text("You can try again now.")


def test_a_logged_in_browser_sent_to_the_login_page_lands_on_the_dashboard(dashboard_factory, page):
    token = "correct-horse-battery-staple"
    dash = dashboard_factory(env={"PANELIST_ADMIN_TOKEN": token})
    page.goto(dash.url + "/login")
    page.get_by_label("Admin token").fill(token)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("button", name="Log out")).to_be_visible()
    page.goto(dash.url + "/login")
    expect(page).not_to_have_url(re.compile(r"/login$"))
    expect(page.get_by_role("button", name="Log out")).to_be_visible()
    expect(page.get_by_label("Admin token")).to_have_count(0)


def test_a_suite_figure_that_is_a_dash_says_why(failing, dashboard_factory, page):
    dash = dashboard_factory(failing.root)
    status, body = dash.post(
        "/api/suite/run", {"models": ["broken"], "tasks": ["claim-costs-no-tokens"]}
    )
    assert status == 202, body
    found = {}

    def ended():
        found["run"] = dash.get("/api/suite/run")[1]
        return found["run"]["status"] != "running"

    assert wait_until(ended), found
    page.goto(dash.url + "/#/evidence")
    row = page.get_by_test_id("suite-card").get_by_role("row").filter(has_text="broken")
    expect(row.locator("[data-why]").first).to_contain_text(
        re.compile(r"no answer: 1 server.error")
    )
    expect(row.locator("[data-why]").nth(1)).to_contain_text("no answer")


def test_a_quick_endpoint_test_says_its_time_in_ms_and_add_all_empties_the_count(dashboard, page):
    with SimUpstream({"m-one": {}, "m-two": {}, "m-three": {}}) as up:
        page.goto(dashboard.url + "/#/endpoints?add=1")
        form = page.get_by_role("form", name="Add an endpoint")
        form.get_by_label("Name", exact=True).fill("local")
        form.get_by_label("Base URL").fill(up.url)
        form.get_by_role("button", name="Test").click()
        answered = form.get_by_text(re.compile(r"^Answered 200 in"))
        expect(answered).to_be_visible()
        # a local answer takes milliseconds: never "0.00 s"
        expect(answered).to_have_text(re.compile(r"^Answered 200 in (\d+ ms|\d+\.\d+ s)\.$"))
        expect(answered).not_to_have_text(re.compile(r"in 0\.00 s"))
        form.get_by_role("button", name="Save endpoint").click()

        listing = page.locator('[data-discover="local"]')
        summary = listing.get_by_test_id("listed-summary")
        expect(summary).to_have_text("3 models listed, 3 not on the roster yet.")
        listing.get_by_role("button", name="Add 2", exact=False).or_(
            listing.get_by_role("button", name="Add m-two", exact=True)
        ).first.click()
        expect(summary).to_have_text("3 models listed, 2 not on the roster yet.")
        listing.get_by_role("button", name="Add all 3").click()
        expect(listing.get_by_text("added", exact=True)).to_have_count(3)
        expect(summary).to_have_text("3 models listed, all on the roster.")
        expect(listing.get_by_role("button", name=re.compile(r"^Add all"))).to_have_count(0)


def test_a_field_error_goes_once_the_field_is_changed(demo, page):
    page.goto(demo.url + "/#/collections")
    page.get_by_role("button", name="New collection").first.click()
    dialog = page.get_by_role("dialog", name="New collection")
    dialog.get_by_role("button", name="Create collection").click()
    name = dialog.get_by_label("Name", exact=True)
    error = name.locator("xpath=..").locator(".field-error")
    expect(error).to_have_text("Give the collection a name.")
    expect(name).to_have_attribute("aria-invalid", "true")
    name.press_sequentially("reviewers")
    expect(error).to_have_count(0)
    expect(name).not_to_have_attribute("aria-invalid", "true")
    assert name.get_attribute("aria-describedby") in (
        None,
        "",
    ) or "error" not in name.get_attribute("aria-describedby")


def test_the_ask_page_sets_the_calls_sum_apart_from_the_description(demo, page):
    page.goto(demo.url + "/#/ask?collection=bench/demo")
    about = page.locator(".collection-about")
    expect(about.locator(".calls-sum")).to_have_text(
        re.compile(r"^Each question: 3 members \+ \d+ explorers = \d+ calls\.$")
    )
    said = about.inner_text()
    assert re.match(r"^Demo panel of simulated models: .*canned\.\n", said), said


def test_an_alert_about_a_model_names_it_once(failing, dashboard_factory, page):
    dash = dashboard_factory(failing.root)
    for i in range(3):
        assert (
            dash.post(
                "/v1/chat/completions",
                {"model": "bench/pair", "messages": [{"role": "user", "content": f"Review {i}"}]},
            )[0]
            == 200
        )
    assert wait_until(
        lambda: any(a["kind"] == "failing" for a in dash.get("/api/alerts")[1]["data"])
    )
    page.goto(dash.url + "/#/overview")
    item = page.locator('.alert-list li[data-kind="failing"]').first
    expect(item).to_contain_text("broken is failing")
    expect(item).not_to_contain_text("broken: broken")
    expect(item).to_contain_text(re.compile(r"failing · broken is failing: "))


def test_a_table_downloads_the_rows_it_shows_as_quoted_csv(tmp_path, dashboard_factory, page):
    import csv

    home = open_home(tmp_path / "data")
    roster = Roster(home)
    roster.add_endpoint("sim", "http://127.0.0.1:9/v1")
    roster.add_model("quoted", "sim", served='a,"b"', family="q")
    roster.add_model("sum", "sim", family="f")
    roster.add_model("plain", "sim", family="p")
    roster.add_model("other", "sim", family="o")
    dash = dashboard_factory(home.root)
    page.goto(dash.url + "/#/overview")
    table = page.get_by_role("region", name="Models on the roster")
    tools = page.locator(".data-table", has=table)
    tools.get_by_label("Filter").fill("o")  # quoted, other: not plain, not sum
    expect(tools.locator(".table-tools")).to_contain_text("2 of 4 shown")
    with page.expect_download() as caught:
        tools.get_by_role("button", name="Download CSV").click()
    download = caught.value
    assert download.suggested_filename == "models-on-the-roster.csv"
    text = Path(download.path()).read_text(encoding="utf-8")
    rows = list(csv.reader(text.splitlines()))
    assert rows[0][:4] == ["Model", "Family", "Grade", "Status"], rows[0]
    assert "Actions" not in rows[0]
    assert [r[0] for r in rows[1:]] == ["other sim", 'quoted sim · a,"b"'], rows
    assert '"quoted sim · a,""b"""' in text  # the quote doubled, the field quoted
    assert rows[1][1] == "o" and rows[1][3] == "untested"


def test_collections_show_their_use_and_a_filter_keeps_the_ones_asked_for(demo, page, tmp_path):
    home = open_home(tmp_path / "data")
    Collections(home).save(
        Roster(home).view(), "pair", ["sim-steady", "sim-swift"], description="Two reviewers"
    )
    ask_demo(demo, 2, lambda i, alias: True if (i, alias) == (0, "sim-steady") else None)
    status, capped = demo.request("PUT", "/api/budgets/collection/pair", {"day": 5})
    assert status == 200, capped
    page.goto(demo.url + "/#/collections")
    used = page.locator('[data-collection="demo"]').get_by_test_id("collection-use")
    expect(used).to_contain_text("Panels 2")
    expect(used).to_contain_text(re.compile(r"Seats \d+"))
    expect(used).to_contain_text("Useful 1 of 1")
    expect(used).to_contain_text("Spend not counted: no cap")
    pair = page.locator('[data-collection="pair"]').get_by_test_id("collection-use")
    expect(pair).to_contain_text("Panels 0")
    expect(pair).to_contain_text(re.compile(r"Spent today 0 USD of 5(\.00)? USD"))

    box = page.get_by_label("Filter the collections")
    box.fill("reviewers")
    expect(page.locator('[data-collection="pair"]')).to_be_visible()
    expect(page.locator('[data-collection="demo"]')).to_be_hidden()
    expect(page.get_by_text("1 of 2 shown")).to_be_visible()
    box.fill("sim-careful")  # a member of demo only
    expect(page.locator('[data-collection="demo"]')).to_be_visible()
    expect(page.locator('[data-collection="pair"]')).to_be_hidden()


def test_a_key_capped_in_money_is_refused_with_the_numbers_and_its_seats_are_never_asked(
    tmp_path, dashboard_factory, context, capsys
):
    from panelist.metrics.cli.main import main

    token = "correct-horse-battery-staple"
    ask = {"model": "bench/solo", "messages": [{"role": "user", "content": "Review: x = 1"}]}
    with SimUpstream({"fine": {}}) as sim:
        home = open_home(tmp_path / "data")
        home.file("gateway.json").write_text('{"max_explorers": 0}')
        roster = Roster(home)
        roster.add_endpoint("sim", sim.url)
        roster.add_model("fine", "sim", family="fine", price_in=1000.0, price_out=2000.0)
        Collections(home).save(roster.view(), "solo", ["fine"])
        data = ["--data", str(home.root)]
        assert main(["key", "create", "app", "--budget-day", "5", *data]) == 0
        secret = capsys.readouterr().out.strip()
        dash = dashboard_factory(home.root, env={"PANELIST_ADMIN_TOKEN": token})
        auth = {"Authorization": f"Bearer {secret}"}
        status, body = dash.request("POST", "/v1/chat/completions", ask, auth)
        assert status == 200, body
        assert sim.count("fine") == 1
        assert main(["--json", "key", "list", *data]) == 0
        [row] = json.loads(capsys.readouterr().out)
        spent = row["budget"]["day"]["spent"]
        assert spent > 0
        assert (
            main(["key", "budget", "app", "--budget-day", str(spent), *data]) == 0
        )  # now at its cap

        ctx, watch = context
        watch.allow(r"status of 429")  # the refusal, asked for on purpose
        page = ctx.new_page()
        page.goto(dash.url + "/login")
        page.get_by_label("Admin token").fill(token)
        page.get_by_role("button", name="Log in").click()
        expect(page.get_by_role("button", name="Log out")).to_be_visible()
        page.goto(dash.url + "/#/settings")
        cell = page.locator('tr[data-key="app"]').get_by_test_id("key-spend")
        figure = f"{spent:.2f}".rstrip("0").rstrip(".")
        expect(cell.locator('[data-period="day"]')).to_contain_text(
            re.compile(rf"^Today {re.escape(figure)}\d* USD of {re.escape(figure)}\d* USD")
        )
        expect(cell.locator('[data-period="day"]')).to_contain_text(
            re.compile(r"resets \d{4}-\d\d-\d\d 00:00 UTC")
        )
        expect(cell.get_by_text("at its cap")).to_be_visible()
        # the key's own page and the Overview show the same spend against the cap
        page.goto(dash.url + "/#/keys/app")
        mine = page.get_by_test_id("key-spend")
        expect(mine.locator('[data-period="day"]')).to_contain_text(
            re.compile(rf"^Today {re.escape(figure)}")
        )
        expect(mine.get_by_text("at its cap")).to_be_visible()
        page.goto(dash.url + "/#/overview")
        row = page.get_by_test_id("spend-caps").locator('tr[data-kind="key"][data-name="app"]')
        expect(row.locator('[data-period="day"]')).to_contain_text(
            re.compile(rf"^Today {re.escape(figure)}")
        )
        expect(row.get_by_text("at its cap")).to_be_visible()
        expect(row.get_by_role("link", name="app")).to_have_attribute("href", "#/keys/app")

        # the app's call, made from the page as a browser client would make it
        refused = page.evaluate(
            """async ([secret, ask]) => {
                const r = await fetch('/v1/chat/completions', {method: 'POST',
                    headers: {'Content-Type': 'application/json', Authorization: `Bearer ${secret}`},
                    body: JSON.stringify(ask)});
                return {status: r.status, retry: r.headers.get('Retry-After'), body: await r.json()};
            }""",
            [secret, ask],
        )
        assert refused["status"] == 429 and int(refused["retry"]) >= 1, refused
        err = refused["body"]["error"]
        assert err["code"] == "budget_exceeded"
        said = err["budget"]
        assert (
            said["cap"] == spent
            and said["spent"] == pytest.approx(spent)
            and said["currency"] == "USD"
        )
        assert said["resets"].endswith("T00:00:00Z") and said["resets"] in err["message"]
        assert "key 'app' is at its daily spend cap" in err["message"]
        assert sim.count("fine") == 1  # refused before its seat was asked


def test_a_roster_row_carries_two_buttons_and_the_rest_behind_more(demo, page):
    page.goto(demo.url + "/#/endpoints")
    table = page.get_by_role("region", name="Models on the roster")
    row = table.locator('tr[data-id="sim-swift"]')
    expect(row.get_by_role("button", name="Probe sim-swift")).to_be_visible()
    expect(row.locator("td.actions button:visible")).to_have_count(2)
    more = row.get_by_role("button", name="More for sim-swift")
    expect(more).to_have_attribute("aria-expanded", "false")
    more.click()
    expect(more).to_have_attribute("aria-expanded", "true")
    for name in ("Edit sim-swift", "Retire sim-swift", "Remove sim-swift"):
        expect(row.get_by_role("button", name=name)).to_be_visible()
    expect(row.get_by_role("button", name="Edit sim-swift")).to_be_focused()
    page.keyboard.press("Escape")
    expect(more).to_have_attribute("aria-expanded", "false")
    expect(more).to_be_focused()
    expect(row.locator("td.actions button:visible")).to_have_count(2)


@pytest.fixture()
def graded(tmp_path):
    """30 general models (g-00 … g-29, g-00 pinned), one strong (top, pinned), one light."""
    from panelist.metrics.roster.grades import Grades

    home = open_home(tmp_path / "data")
    roster = Roster(home)
    roster.add_endpoint("sim", "http://127.0.0.1:9/v1")
    for i in range(30):
        roster.add_model(f"g-{i:02d}", "sim", family=f"f{i}", grade="general")
    roster.add_model("top", "sim", family="top", grade="strong")
    roster.add_model("low", "sim", family="low", grade="light")
    grades = Grades(home)
    grades.pin("general", "g-00")
    grades.pin("strong", "top")
    return home


def test_grades_at_scale_fold_filter_and_say_when_a_reorder_changes_the_judge(
    graded, dashboard_factory, page
):
    dash = dashboard_factory(graded.root)
    page.goto(dash.url + "/#/overview")
    section = page.locator("section#grades")
    general = section.locator('tr[data-grade="general"]')
    # the 30 models are a count that unfolds, not a run-on list
    fold = general.locator("details")
    expect(fold.locator("summary")).to_have_text("30 models")
    expect(fold.get_by_text("g-29", exact=False)).to_be_hidden()
    fold.locator("summary").click()
    expect(fold).to_contain_text("g-29")

    # a pick among 30 is a box that filters, not a 31-option menu
    pick = section.get_by_label("Model pinned for general")
    assert pick.evaluate("e => e.tagName") == "INPUT"
    pick.fill("no-such-model")
    pick.press("Enter")
    expect(general.locator(".field-error")).to_have_text(
        "no-such-model is not one of these 30 models."
    )
    pick.fill("g-17")
    pick.press("Enter")
    expect(page.locator(".toasts")).to_contain_text("g-17 is pinned for general.")
    expect(section.get_by_label("Model pinned for general")).to_have_value("g-17")

    # moving strong below general would make general's pin the judge: asked, and Cancel keeps all
    expect(section.locator("#ceiling")).to_contain_text("top")
    section.get_by_role("button", name="Move strong up (weaker)").click()
    ask = page.get_by_role("dialog", name="Change the race judge?")
    expect(ask).to_contain_text("the ceiling, which judges races, becomes g-17 instead of top")
    ask.get_by_role("button", name="Cancel").click()
    expect(section.locator("tbody tr").nth(2)).to_have_attribute("data-grade", "strong")
    section.get_by_role("button", name="Move strong up (weaker)").click()
    page.get_by_role("dialog", name="Change the race judge?").get_by_role(
        "button", name="Reorder"
    ).click()
    expect(page.locator(".toasts")).to_contain_text("The ceiling, which judges races, is now g-17.")
    expect(section.locator("#ceiling")).to_contain_text("g-17")
    # a move that leaves the judge alone is made at once
    section.get_by_role("button", name="Move light down (stronger)").click()
    expect(page.get_by_role("dialog")).to_have_count(0)
    expect(section.locator("tbody tr").nth(0)).to_have_attribute("data-grade", "strong")
