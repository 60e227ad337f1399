"""The dashboard in a real browser: headless Chromium against a real dashboard server, the
simulated upstream playing the models. Each test watches the page for console errors, uncaught
exceptions and CSP violations (see conftest.py); a screenshot lands in its temp folder when it
fails."""

from __future__ import annotations

import json
import re

import openai

try:
    from playwright.sync_api import expect
except (
    ImportError
):  # the browser fixture says why: a skip, or a failure under PANELIST_REQUIRE_BROWSER
    expect = None

from panelist.metrics.home import open_home
from panelist.metrics.roster.roster import Roster
from panelist.metrics.upstream.sim import SimUpstream

ASK = "Review: def add(a, b): return a - b"
XSS = '<script>window.__owned = 1</script><img src="x" onerror="window.__owned = 2"> and a plain ending'


def changes(data_dir):
    path = data_dir / "config" / "changes.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def evidence(data_dir):
    path = data_dir / "runs" / "gateway" / "evidence.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def client(dash):
    return openai.OpenAI(base_url=dash.url + "/v1", api_key="local", max_retries=0)


def ask_openai(dash, model="bench/demo", content=ASK):
    r = client(dash).chat.completions.create(
        model=model, messages=[{"role": "user", "content": content}]
    )
    return r.model_extra["bench"]


# ------------------------------------------------------------------ first run
def test_first_run_says_what_to_do_and_loads_the_demo(dashboard, page, tmp_path):
    page.goto(dashboard.url + "/")
    expect(page.get_by_role("heading", name="Welcome to Panelist")).to_be_visible()
    expect(page.locator(".steps li")).to_have_count(3)
    expect(page.get_by_role("link", name="Add an endpoint")).to_be_visible()

    page.get_by_role("button", name="Load the demo roster").click()

    expect(page.get_by_role("heading", name="Overview")).to_be_visible()
    table = page.get_by_role("region", name="Models on the roster")
    for alias in ("sim-swift", "sim-steady", "sim-careful", "sim-flaky", "sim-vision"):
        expect(table.locator(f'tr[data-id="{alias}"]')).to_be_visible()
    status, info = dashboard.get("/api/info")
    assert status == 200 and info["first_run"] is False and info["counts"]["models"] == 5
    page.get_by_role("link", name="Collections", exact=True).click()
    expect(page.locator('[data-collection="demo"]')).to_contain_text("bench/demo")


def test_add_endpoint_needs_a_passing_test_then_adds_a_model_in_one_click(
    dashboard, sim, page, watch, tmp_path
):
    watch.allow(r"status of 400")  # a key variable no endpoint may read, refused on purpose
    page.goto(dashboard.url + "/")
    page.get_by_role("link", name="Add an endpoint").click()
    form = page.get_by_role("form", name="Add an endpoint")
    save = form.get_by_role("button", name="Save endpoint")
    form.get_by_label("Name", exact=True).fill("local")
    # an endpoint that refuses the key: the upstream's own 401 is shown, not the gateway's 502
    with SimUpstream({"m": {}}, listing_key="sk-not-sent") as keyed:
        form.get_by_label("Base URL").fill(keyed.url)
        form.get_by_role("button", name="Test").click()
        expect(form.get_by_text(re.compile(r"Test failed \(401\) after"))).to_be_visible()
        expect(form.get_by_text(re.compile(r"^auth: .*\(HTTP 401: "))).to_be_visible()
    expect(save).to_be_disabled()
    form.get_by_label("Base URL").fill(sim.url)
    expect(save).to_be_disabled()

    form.get_by_role("button", name="Test").click()
    expect(form.get_by_text(re.compile(r"Answered 200 in"))).to_be_visible()
    expect(save).to_be_enabled()
    form.get_by_label("Key variable").fill("PANELIST_KEY_ELSEWHERE")  # untested fields: no Save
    expect(save).to_be_disabled()
    form.get_by_label("Key variable").fill("AWS_SECRET_ACCESS_KEY")  # never read: says how to allow
    form.get_by_role("button", name="Test").click()
    expect(form.get_by_text("Test could not run")).to_be_visible()
    expect(
        form.get_by_text(re.compile(r"'AWS_SECRET_ACCESS_KEY' is not one .*key_envs\.json"))
    ).to_be_visible()
    expect(save).to_be_disabled()
    form.get_by_label("Key variable").fill("")  # back to what passed
    expect(save).to_be_enabled()
    save.click()

    listing = page.locator('[data-discover="local"]')
    expect(listing.get_by_role("row", name=re.compile(r"\bfast\b"))).to_be_visible()
    listing.get_by_role("button", name="Add fast", exact=True).click()
    expect(listing.get_by_text("added")).to_be_visible()
    table = page.get_by_role("region", name="Models on the roster")
    expect(table.locator('tr[data-id="fast"]')).to_contain_text("local")

    roster = Roster(open_home(tmp_path / "data")).view()
    assert roster.endpoints["local"].base_url.rstrip("/") == sim.url.rstrip("/")
    assert roster.models["fast"].endpoint == "local"
    whats = [(c.get("by"), c.get("what", "")) for c in changes(tmp_path / "data")]
    assert any(by == "dashboard" for by, _ in whats), whats


# ------------------------------------------------------------------ collections
def test_collection_created_and_edited_from_the_form(demo, page, watch, tmp_path):
    page.goto(demo.url + "/#/collections")
    page.get_by_role("button", name="New collection").first.click()
    dialog = page.get_by_role("dialog", name="New collection")
    dialog.get_by_label("Name").fill("reviewers")
    dialog.get_by_label("Description").fill("Find real bugs in a diff")
    dialog.get_by_label("Tags").fill("code, review")
    dialog.locator('.picker-item[data-alias="sim-swift"] input').check()
    dialog.locator('.picker-item[data-alias="sim-steady"] input').check()
    expect(dialog.get_by_test_id("calls-sum")).to_have_text("2 members + 2 explorers = 4 calls")
    dialog.get_by_role("button", name="Create collection").click()

    card = page.locator('[data-collection="reviewers"]')
    expect(card).to_contain_text("bench/reviewers")
    expect(card).to_contain_text("Find real bugs in a diff")
    # a policy the form does not show is kept by an edit made in the form
    _, cols = demo.get("/api/collections")
    made = {c["name"]: c for c in cols["data"]}["reviewers"]
    status, _ = demo.request(
        "PUT",
        "/api/collections/reviewers",
        dict(
            {
                k: made[k]
                for k in ("name", "members", "description", "tags", "shape", "reply", "merger")
            },
            explorer_policy="thompson",
            version=made["version"],
        ),
    )
    assert status == 200
    page.reload()

    card.get_by_role("button", name="Edit reviewers").click()
    dialog = page.get_by_role("dialog", name="Edit bench/reviewers")
    dialog.locator('.picker-item[data-alias="sim-careful"] input').check()
    expect(dialog.get_by_test_id("calls-sum")).to_have_text("3 members + 2 explorers = 5 calls")
    dialog.get_by_role("button", name="Save changes").click()
    expect(card.get_by_text("sim-careful")).to_be_visible()

    status, cols = demo.get("/api/collections")
    saved = {c["name"]: c for c in cols["data"]}["reviewers"]
    assert saved["members"] == ["sim-swift", "sim-steady", "sim-careful"]
    assert saved["tags"] == ["code", "review"]
    assert saved["explorer_policy"] == "thompson"
    mine = [c for c in changes(tmp_path / "data") if c.get("by") == "dashboard"]
    assert len(mine) >= 2, mine

    # someone else saves meanwhile: the form's edit is refused as stale and says so
    card.get_by_role("button", name="Edit reviewers").click()
    dialog = page.get_by_role("dialog", name="Edit bench/reviewers")
    status, _ = demo.request(
        "PUT",
        "/api/collections/reviewers",
        dict(
            {
                k: saved[k]
                for k in ("name", "members", "description", "tags", "shape", "reply", "merger")
            },
            description="Changed elsewhere",
            version=saved["version"],
        ),
    )
    assert status == 200
    watch.allow(r"status of 409")
    dialog.get_by_label("Description").fill("My edit")
    dialog.get_by_role("button", name="Save changes").click()
    expect(dialog.get_by_role("alert")).to_contain_text("Changed by someone else — reload")
    dialog.get_by_role("button", name="Reload").click()
    expect(card).to_contain_text("Changed elsewhere")


# ------------------------------------------------------------------ asking
def test_ask_page_streams_the_seats_and_offers_verdicts(demo, page):
    page.goto(demo.url + "/#/ask")
    expect(page.get_by_label("Collection", exact=True)).to_have_value("bench/demo")
    page.get_by_label("Prompt", exact=True).fill(ASK)
    page.get_by_role("button", name="Ask", exact=True).click()

    expect(page.get_by_text(re.compile(r"^Done: \d of \d seats answered"))).to_be_visible()
    cards = page.locator(".answer-card[data-call]")
    expect(cards).to_have_count(5)
    for alias in ("sim-swift", "sim-steady", "sim-careful"):
        expect(page.locator(".answer-card", has_text=f"· {alias}").first).to_contain_text(
            "[simulated"
        )
    first = cards.first
    call = first.get_attribute("data-call")
    first.get_by_role("button", name="Useful", exact=True).click()
    expect(first.get_by_text("Verdict recorded.")).to_be_visible()

    status, seat = demo.get(f"/api/calls/{call}")
    assert (
        status == 200 and seat["verdict"]["useful"] is True and seat["verdict"]["by"] == "dashboard"
    )


def test_panels_from_the_ask_page_and_the_openai_client_appear_without_reload(demo, context):
    ctx, _ = context
    panels = ctx.new_page()
    panels.goto(demo.url + "/#/panels")
    expect(panels.get_by_role("heading", name="No panels yet")).to_be_visible()
    panels.evaluate("window.__sameDocument = true")

    asker = ctx.new_page()
    asker.goto(demo.url + "/#/ask")
    asker.get_by_label("Prompt", exact=True).fill(ASK)
    asker.get_by_role("button", name="Ask", exact=True).click()
    expect(asker.get_by_text(re.compile(r"^Done:"))).to_be_visible()
    from_page = (
        asker.locator(".answer-card[data-call]").first.get_attribute("data-call").split(".")[0]
    )

    from_client = ask_openai(demo)["panel"]

    items = panels.locator(".panel-item")
    expect(items).to_have_count(2)
    expect(items.nth(0)).to_have_attribute("data-panel", from_client)  # newest first
    expect(items.nth(1)).to_have_attribute("data-panel", from_page)
    expect(items.nth(0)).to_contain_text("bench/demo")
    assert panels.evaluate("window.__sameDocument") is True  # no reload happened


def test_seat_verdict_from_panels_shows_on_evidence(demo, page, tmp_path):
    bench = ask_openai(demo)
    call = next(s["call"] for s in bench["seats"] if s["alias"] == "sim-swift")

    page.goto(demo.url + "/#/panels")
    chip = page.locator(f'.seat-chip[data-call="{call}"]')
    expect(chip).to_contain_text("owed")
    chip.click()
    dialog = page.get_by_role("dialog")
    expect(dialog.get_by_test_id("answer")).to_contain_text("[simulated")
    dialog.get_by_label("Not useful").check()
    dialog.get_by_label("Note").fill("missed the sign error")
    dialog.get_by_label("False claims").fill("says the function is correct\nsays it adds")
    dialog.get_by_role("button", name="Save verdict").click()
    expect(dialog.get_by_text("Verdict recorded.")).to_be_visible()
    dialog.get_by_role("button", name="Close").click()
    expect(page.locator(f'.seat-chip[data-call="{call}"]')).to_contain_text("not useful")

    verdicts = [e for e in evidence(tmp_path / "data") if e.get("kind") == "verdict"]
    assert [(v["call"], v["useful"], v["false"], v["by"]) for v in verdicts] == [
        (call, False, ["says the function is correct", "says it adds"], "dashboard")
    ]

    page.get_by_role("link", name="Evidence", exact=True).click()
    expect(
        page.get_by_role("img", name="Useful rate per model with 95% intervals")
    ).to_contain_text("sim-swift")
    page.get_by_text(re.compile(r"^Table: every model and shape")).click()
    row = (
        page.get_by_role("region", name="Evidence per model and shape")
        .locator("tr", has_text="sim-swift")
        .first
    )
    expect(row).to_contain_text("0%")
    cells = row.locator("td")
    expect(cells.nth(4)).to_have_text("1")  # not useful
    expect(cells.nth(5)).to_have_text("2")  # false claims


def test_a_model_answer_with_markup_is_shown_as_text(dashboard_factory, home, sim, page):
    sim.script("fast", answer=XSS)
    dash = dashboard_factory(home)
    bench = ask_openai(dash, model="bench/trio")
    call = next(s["call"] for s in bench["seats"] if s["alias"] == "fast")

    page.goto(dash.url + "/#/panels")
    page.locator(f'.seat-chip[data-call="{call}"]').click()
    answer = page.get_by_role("dialog").get_by_test_id("answer")
    expect(answer).to_have_text(XSS)
    expect(page.get_by_role("dialog").locator("img, script")).to_have_count(0)
    page.get_by_role("dialog").get_by_role("button", name="Close").click()

    page.goto(dash.url + "/#/ask")
    page.get_by_label("Prompt", exact=True).fill("<b>bold?</b>")
    page.get_by_role("button", name="Ask", exact=True).click()
    expect(page.get_by_text(re.compile(r"^Done:"))).to_be_visible()
    card = page.locator(".answer-card", has_text="· fast").first
    expect(card.locator(".answer")).to_have_text(XSS)
    expect(page.locator("main img, main script, main b")).to_have_count(0)
    assert page.evaluate("window.__owned") is None


# ------------------------------------------------------------------ access and looks
def test_login_and_logout_with_the_admin_token(dashboard_factory, context):
    token = "correct-horse-battery-staple"
    dash = dashboard_factory(env={"PANELIST_ADMIN_TOKEN": token})
    ctx, watch = context
    page = ctx.new_page()
    page.goto(dash.url + "/#/settings")
    expect(page).to_have_url(re.compile(r"/login$"))
    expect(page.get_by_label("Admin token")).to_be_visible()
    # the visit without a session went straight to the login: no refused call on the way
    assert watch.unexpected() == []

    watch.allow(r"status of 401")  # the wrong token, refused on purpose
    page.get_by_label("Admin token").fill("not-the-token-at-all")
    page.get_by_role("button", name="Log in").click()
    alert = page.get_by_role("alert")
    expect(alert).to_be_visible()
    # the server's reason and the page's advice read as two sentences
    expect(alert).to_contain_text("was started. Check the token and try again.")
    expect(page).to_have_url(re.compile(r"/login$"))

    page.get_by_label("Admin token").fill(token)
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(re.compile(r"/#/settings$"))
    expect(page.get_by_role("heading", name="Settings")).to_be_visible()
    cookie = next(c for c in ctx.cookies() if c["name"] == "panelist_session")
    assert cookie["httpOnly"] is True and cookie["sameSite"] == "Strict"

    page.get_by_role("button", name="Log out").click()
    expect(page).to_have_url(re.compile(r"/login$"))
    page.goto(dash.url + "/#/overview")
    expect(page).to_have_url(re.compile(r"/login$"))


def background(page):
    return page.evaluate("getComputedStyle(document.body).backgroundColor")


def test_theme_light_dark_and_system(dashboard, page, tmp_path):
    page.goto(dashboard.url + "/#/settings")
    expect(page.get_by_role("heading", name="Settings")).to_be_visible()
    light = background(page)
    page.get_by_label("Dark").check()
    expect(page.locator("html")).to_have_attribute("data-theme", "dark")
    dark = background(page)
    assert dark != light
    page.screenshot(path=str(tmp_path / "settings-dark.png"))
    page.reload()
    expect(page.locator("html")).to_have_attribute("data-theme", "dark")
    expect(page.get_by_label("Dark")).to_be_checked()
    page.get_by_label("Light").check()
    expect(page.locator("html")).to_have_attribute("data-theme", "light")
    assert background(page) == light
    page.get_by_label("Same as the system").check()
    expect(page.locator("html")).to_have_attribute("data-theme", "system")
    page.emulate_media(color_scheme="dark")  # the page follows the system's change
    expect(page.locator("html")).to_have_attribute("data-scheme", "dark")
    assert background(page) == dark
    page.emulate_media(color_scheme="light")
    expect(page.locator("html")).to_have_attribute("data-scheme", "light")
    assert background(page) == light


def test_overview_table_sorts_and_filters(demo, page):
    page.goto(demo.url + "/#/overview")
    table = page.get_by_role("region", name="Models on the roster")
    rows = table.locator("tbody tr")
    expect(rows).to_have_count(5)
    header = table.get_by_role("columnheader", name=re.compile("^Model"))
    expect(header).to_have_attribute("aria-sort", "ascending")
    header.get_by_role("button").click()
    expect(header).to_have_attribute("aria-sort", "descending")
    expect(rows.first).to_have_attribute("data-id", "sim-vision")
    page.get_by_label("Filter").fill("careful")
    expect(rows).to_have_count(1)
    expect(rows.first).to_have_attribute("data-id", "sim-careful")


def test_model_facts_edited_then_retired_and_restored(demo, page, tmp_path):
    page.goto(demo.url + "/#/endpoints")
    table = page.get_by_role("region", name="Models on the roster")
    row = table.locator('tr[data-id="sim-swift"]')
    row.get_by_role("button", name="More for sim-swift").click()
    row.get_by_role("button", name="Edit sim-swift").click()
    dialog = page.get_by_role("dialog", name="Edit sim-swift")
    dialog.get_by_label("Context window (tokens)").fill("64000")
    dialog.get_by_label("Grade").fill("strong")
    dialog.get_by_role("button", name="Save changes").click()
    expect(row).to_contain_text("64k")
    expect(row).to_contain_text("strong")

    row.get_by_role("button", name="More for sim-swift").click()
    row.get_by_role("button", name="Retire sim-swift").click()
    expect(row).to_contain_text("retired")
    assert Roster(open_home(tmp_path / "data")).view().models["sim-swift"].retired is True
    row.get_by_role("button", name="More for sim-swift").click()
    row.get_by_role("button", name="Restore sim-swift").click()
    # the table redraws once the restore is saved: its More menu opens on the new row
    expect(row).not_to_contain_text("retired")
    row.get_by_role("button", name="More for sim-swift").click()
    expect(row.get_by_role("button", name="Retire sim-swift")).to_be_visible()
    model = Roster(open_home(tmp_path / "data")).view().models["sim-swift"]
    assert (model.context, model.grade, model.retired) == (64000, "strong", False)


def test_limits_saved_from_the_collections_page(demo, page):
    page.goto(demo.url + "/#/collections")
    card = page.locator('[data-collection="demo"]')
    expect(card.get_by_test_id("calls-sum")).to_have_text("3 members + 2 explorers = 5 calls")
    limits = page.get_by_role("form", name="Gateway limits")
    limits.get_by_label("Max explorers").fill("1")
    limits.get_by_role("button", name="Save limits").click()
    expect(card.get_by_test_id("calls-sum")).to_have_text("3 members + 1 explorer = 4 calls")
    status, cols = demo.get("/api/collections")
    assert status == 200 and cols["limits"]["max_explorers"] == 1


def test_evidence_shows_each_models_suite_record(dashboard, page, tmp_path, capsys):
    from panelist.metrics.offload import main
    from panelist.suite import demo

    tasks = ["std-bisect-left", "std-bisect-left-control", "claim-wilson-all-useful"]
    assert (
        main(
            ["suite", "run", "--demo", "--data", str(tmp_path / "data"), "--task", *tasks, "--json"]
        )
        == 0
    )
    capsys.readouterr()
    page.goto(dashboard.url + "/#/evidence")
    expect(
        page.get_by_text("No evidence yet")
    ).to_be_visible()  # no verdicts: the suite still shows
    card = page.get_by_test_id("suite-card")
    expect(card.get_by_role("heading", name="Review suite")).to_be_visible()
    table = card.get_by_role("region", name="Review suite per model")
    for model in demo.MODELS:
        expect(table.locator("tr", has_text=model)).to_be_visible()
    # the headline columns come first: pairs, then balanced claims, then plain accuracy
    headers = table.locator("th")
    expect(headers.nth(1)).to_contain_text("Pairs")
    expect(headers.nth(2)).to_contain_text("Balanced claims")
    expect(headers.nth(3)).to_contain_text("Accuracy")
    swift = table.locator("tr", has_text="sim-swift").locator("td")
    expect(swift.nth(1)).to_contain_text("0%")  # pairs: always NO FAULT never gets a pair right
    # one claim, so one key: nothing to balance, and the dash says so
    expect(swift.nth(2)).to_have_text("– needs true and false claims")
    expect(swift.nth(8)).to_have_text("3")  # samples


def test_the_suite_card_says_why_a_lone_bug_has_no_pairs(dashboard, page, tmp_path, capsys):
    from panelist.metrics.offload import main

    assert (
        main(
            [
                "suite",
                "run",
                "--demo",
                "--data",
                str(tmp_path / "data"),
                "--task",
                "std-bisect-left",
                "--json",
            ]
        )
        == 0
    )  # the bug without its control
    capsys.readouterr()
    page.goto(dashboard.url + "/#/evidence")
    card = page.get_by_test_id("suite-card")
    warning = card.get_by_role("status").filter(has_text="Unpaired tasks")
    expect(warning).to_contain_text("std-bisect-left")
    swift = (
        card.get_by_role("region", name="Review suite per model")
        .locator("tr", has_text="sim-swift")
        .locator("td")
    )
    # pairs: nothing to count, and the card and the dash say why
    expect(swift.nth(1)).to_have_text("– no bug asked with its control")
