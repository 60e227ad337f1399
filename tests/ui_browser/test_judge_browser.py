"""Judging fast in a real browser: the owed queue worked with the keyboard, Ctrl+Enter on the Ask
page, answers side by side (tabs on a phone) as sanitised Markdown, one verdict state for every
view of a call, focus back where it was after a dialog, and the admin's Ask without a key."""

from __future__ import annotations

import json
import re

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture says why (a skip, or a failure when required)
    expect = None

from conftest import read_jsonl, wait_until

TOKEN = "correct-horse-battery-staple"
MARKDOWN = "# Findings\n\n- the sign is wrong\n- no test covers it\n\n```\nreturn a + b\n```\n"
HOSTILE = (
    '<script>window.__owned = 1</script>\n\n<img src="x" onerror="window.__owned = 2">\n\n'
    "[click me](javascript:window.__owned=3) and ![a pixel](http://tracker.example/p.png)\n"
)


def chat(dash, content, model="bench/trio"):
    status, body = dash.post(
        "/v1/chat/completions", {"model": model, "messages": [{"role": "user", "content": content}]}
    )
    assert status == 200, body
    return body["bench"]


def verdict_of(dash, call):
    status, seat = dash.get(f"/api/calls/{call}")
    assert status == 200, seat
    return seat["verdict"]


def owed_calls(dash):
    status, body = dash.get("/api/owed?limit=200")
    assert status == 200, body
    return [r["call"] for r in body["data"]]


def ask_on_the_page(page, prompt, *, reply=None):
    if reply:
        page.get_by_label("Reply", exact=True).select_option(reply)
    page.get_by_label("Prompt", exact=True).fill(prompt)
    page.get_by_role("button", name="Ask", exact=True).click()
    expect(page.get_by_text(re.compile(r"^Done: \d of \d seats answered"))).to_be_visible()


# ------------------------------------------------------------------ the owed queue
def test_the_owed_queue_is_judged_with_the_keyboard_oldest_first(dashboard_factory, home, page):
    dash = dashboard_factory(home)
    chat(dash, "Review one")
    chat(dash, "Review two")
    queue = owed_calls(dash)
    assert len(queue) >= 4

    page.goto(dash.url + "/#/owed")
    expect(page.locator("#owed-count")).to_have_text(str(len(queue)))
    items = page.get_by_role("list", name="Owed verdicts, oldest first").locator("li")
    expect(items).to_have_count(len(queue))
    expect(items.first).to_have_attribute("data-call", queue[0])  # the oldest leads
    expect(page.get_by_text("Keys:")).to_contain_text("u useful")
    current = page.locator(".owed-detail .answer-card")
    expect(current).to_have_attribute("data-call", queue[0])

    page.keyboard.press("u")
    expect(current).to_have_attribute("data-call", queue[1])  # judged, and on to the next
    page.keyboard.press("n")
    expect(current).to_have_attribute("data-call", queue[2])
    page.keyboard.press("j")  # passed over, not judged
    expect(current).to_have_attribute("data-call", queue[3])
    expect(items.nth(0)).to_contain_text("useful")
    expect(items.nth(1)).to_contain_text("not useful")
    expect(page.locator("#owed-count")).to_have_text(str(len(queue) - 2))

    assert verdict_of(dash, queue[0])["useful"] is True
    assert verdict_of(dash, queue[1])["useful"] is False
    assert verdict_of(dash, queue[2]) is None
    assert owed_calls(dash) == queue[2:]


def test_the_owed_queue_can_be_worked_by_value(dashboard_factory, home, page):
    dash = dashboard_factory(home)
    chat(dash, "Review one")
    chat(dash, "Review two")
    status, valued = dash.get("/api/owed?order=value&limit=200")
    assert status == 200 and valued["order"] == "value"
    page.goto(dash.url + "/#/owed")
    expect(
        page.get_by_role("list", name="Owed verdicts, oldest first").locator("li")
    ).to_have_count(len(valued["data"]))
    page.get_by_role("button", name="By value").click()
    items = page.get_by_role("list", name="Owed verdicts, by value").locator("li")
    expect(items).to_have_count(len(valued["data"]))
    for i, row in enumerate(valued["data"]):
        expect(items.nth(i)).to_have_attribute("data-call", row["call"])
        expect(items.nth(i)).to_contain_text(row["reason"])
    expect(page.get_by_role("button", name="By value")).to_have_attribute("aria-pressed", "true")


def test_the_queue_says_when_nothing_is_owed(dashboard_factory, home, page):
    dash = dashboard_factory(home)
    bench = chat(dash, "Review once")
    owed = sum(s["status"] == "ok" for s in bench["seats"])
    page.goto(dash.url + "/#/owed")
    for left in range(owed - 1, 0, -1):
        current = page.locator(".owed-detail .answer-card")
        call = current.get_attribute("data-call")
        page.keyboard.press("u")
        expect(page.locator(f'.owed-list li[data-call="{call}"]')).to_contain_text("useful")
        expect(page.locator("#owed-count")).to_have_text(str(left))
        expect(current).not_to_have_attribute("data-call", call)
    page.keyboard.press("u")
    expect(page.get_by_role("heading", name="No verdict owed")).to_be_visible()
    expect(page.locator("#owed-count")).to_be_hidden()
    assert owed_calls(dash) == []


# ------------------------------------------------------------------ the Ask page
def test_ctrl_enter_asks_and_the_answers_come_into_view(dashboard_factory, home, page):
    dash = dashboard_factory(home)
    page.set_viewport_size({"width": 1280, "height": 600})
    page.goto(dash.url + "/#/ask")
    prompt = page.get_by_label("Prompt", exact=True)
    prompt.fill("Review: def add(a, b): return a - b")
    prompt.press("Control+Enter")
    expect(page.get_by_text(re.compile(r"^Done: \d of \d seats answered"))).to_be_visible()
    cards = page.locator(".compare-grid > .answer-card[data-call]")
    expect(cards.first).to_be_in_viewport()  # the answers came into view
    # side by side: the first two answers share a row on a wide screen
    boxes = page.evaluate("""[...document.querySelectorAll('.compare-grid > .answer-card')]
        .slice(0, 2).map((c) => { const r = c.getBoundingClientRect(); return [r.x, r.y]; })""")
    assert boxes[0][1] == boxes[1][1] and boxes[1][0] > boxes[0][0], boxes
    panels = read_jsonl(home.gateway_runs / "calls.jsonl")
    assert len(panels) == 1 and "Review: def add" in json.dumps(panels[0]["prompt"])


def test_on_a_phone_the_answers_are_tabs(dashboard_factory, home, page):
    dash = dashboard_factory(home)
    page.set_viewport_size({"width": 390, "height": 800})
    page.goto(dash.url + "/#/ask")
    ask_on_the_page(page, "Review x = 1")
    tabs = page.get_by_role("tablist", name="Seats' answers").get_by_role("tab")
    cards = page.locator(".compare-grid > .answer-card")
    expect(tabs.first).to_have_attribute("aria-selected", "true")
    expect(cards.nth(0)).to_be_visible()
    expect(cards.nth(1)).to_be_hidden()
    tabs.nth(1).click()
    expect(cards.nth(1)).to_be_visible()
    expect(cards.nth(0)).to_be_hidden()
    tabs.nth(1).press("ArrowRight")
    expect(tabs.nth(2)).to_be_focused()
    expect(cards.nth(2)).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")


def test_answers_render_markdown_and_hostile_markup_stays_inert(dashboard_factory, home, sim, page):
    sim.script("fast", answer=MARKDOWN)
    sim.script("mid", answer=HOSTILE)
    dash = dashboard_factory(home)
    page.goto(dash.url + "/#/ask")
    ask_on_the_page(page, "Review the adder")

    good = page.locator(".answer-card", has_text="· fast").locator(".markdown")
    expect(good.get_by_role("heading", name="Findings")).to_be_visible()
    expect(good.locator("li")).to_have_text(["the sign is wrong", "no test covers it"])
    expect(good.locator("pre code")).to_have_text("return a + b")

    bad = page.locator(".answer-card", has_text="· mid").locator(".markdown")
    expect(bad).to_contain_text("<script>window.__owned = 1</script>")  # shown, as text
    expect(bad).to_contain_text('onerror="window.__owned = 2"')
    expect(bad).to_contain_text("[image: a pixel (http://tracker.example/p.png)]")
    expect(page.locator("main script, main img, main [onerror]")).to_have_count(0)
    link = bad.get_by_text("click me")
    expect(link).to_be_visible()
    href = link.get_attribute("href")
    assert href is None or not href.lower().startswith("javascript"), href
    for anchor in bad.locator("a[href]").all():
        assert anchor.get_attribute("rel") == "noopener noreferrer"
    link.click()
    assert page.evaluate("window.__owned") is None

    # the same answers in the seat dialog
    call = page.locator(".answer-card", has_text="· mid").get_attribute("data-call")
    page.goto(dash.url + "/#/panels")
    page.locator(f'.seat-chip[data-call="{call}"]').click()
    answer = page.get_by_role("dialog").get_by_test_id("answer")
    expect(answer).to_contain_text("<script>window.__owned = 1</script>")
    expect(page.get_by_role("dialog").locator("img, script")).to_have_count(0)
    assert page.evaluate("window.__owned") is None


def test_one_verdict_state_for_every_view_of_a_call(dashboard_factory, home, page):
    dash = dashboard_factory(home)
    page.goto(dash.url + "/#/ask")
    ask_on_the_page(page, "Review x = 1", reply=":pick")
    picked = page.locator(".answer-card").first
    call = picked.get_attribute("data-call")
    views = page.locator(f'.answer-card[data-call="{call}"]')
    expect(views).to_have_count(2)  # the picked reply, and its seat among every seat's

    picked.get_by_role("button", name="Useful", exact=True).click()
    for i in range(2):
        expect(views.nth(i).get_by_role("button", name="Useful", exact=True)).to_have_attribute(
            "aria-pressed", "true"
        )
        expect(views.nth(i).locator(".verdict-mark")).to_have_text("✓ useful")

    # an edit in the dialog, opened from the other view, changes every view
    more = views.nth(1).get_by_role("button", name="Add a note or claims…")
    more.click()
    dialog = page.get_by_role("dialog")
    expect(dialog.get_by_label("Useful", exact=True)).to_be_checked()
    dialog.get_by_label("Not useful").check()
    dialog.get_by_label("Note").fill("the pick missed the bug")
    dialog.get_by_role("button", name="Save verdict").click()
    expect(dialog.get_by_text("Verdict changed.")).to_be_visible()
    expect(dialog.locator(".verdict-mark")).to_have_text("✗ not useful")
    for i in range(2):
        expect(views.nth(i).get_by_role("button", name="Not useful", exact=True)).to_have_attribute(
            "aria-pressed", "true"
        )
        expect(views.nth(i).get_by_role("button", name="Useful", exact=True)).to_have_attribute(
            "aria-pressed", "false"
        )
        expect(views.nth(i).locator(".verdict-mark")).to_have_text("✗ not useful")
    page.keyboard.press("Escape")
    expect(dialog).to_have_count(0)
    expect(more).to_be_focused()  # back where it was

    # a quick verdict afterwards keeps the note written in the dialog
    picked.get_by_role("button", name="Useful", exact=True).click()
    expect(views.nth(1).locator(".verdict-mark")).to_have_text("✓ useful")
    assert wait_until(lambda: (verdict_of(dash, call) or {}).get("useful") is True)
    assert verdict_of(dash, call)["note"] == "the pick missed the bug"


def test_the_ask_pages_keys_judge_the_current_answer_and_go_to_the_next_owed(
    dashboard_factory, home, page
):
    dash = dashboard_factory(home)
    page.goto(dash.url + "/#/ask")
    ask_on_the_page(page, "Review y = 2")
    cards = page.locator(".compare-grid > .answer-card[data-call]")
    first, second = cards.nth(0).get_attribute("data-call"), cards.nth(1).get_attribute("data-call")
    page.locator("body").click(position={"x": 5, "y": 5})  # out of the prompt: keys are for judging
    page.keyboard.press("u")
    expect(cards.nth(0).get_by_role("button", name="Useful", exact=True)).to_have_attribute(
        "aria-pressed", "true"
    )
    page.keyboard.press("j")
    expect(cards.nth(1)).to_be_focused()
    page.keyboard.press("n")
    expect(cards.nth(1).get_by_role("button", name="Not useful", exact=True)).to_have_attribute(
        "aria-pressed", "true"
    )
    assert wait_until(lambda: verdict_of(dash, second) is not None)
    assert verdict_of(dash, first)["useful"] is True and verdict_of(dash, second)["useful"] is False


def test_focus_returns_to_the_seat_after_its_dialog_redrew_the_panel(dashboard_factory, home, page):
    dash = dashboard_factory(home)
    bench = chat(dash, "Review z = 3")
    call = next(s["call"] for s in bench["seats"] if s["status"] == "ok")
    page.goto(dash.url + "/#/panels")
    chip = page.locator(f'.seat-chip[data-call="{call}"]')
    chip.focus()
    page.keyboard.press("Enter")
    dialog = page.get_by_role("dialog")
    dialog.get_by_label("Useful", exact=True).check()
    dialog.get_by_role("button", name="Save verdict").click()
    expect(dialog.get_by_text("Verdict recorded.")).to_be_visible()
    dialog.get_by_role("button", name="Close").click()
    expect(chip).to_contain_text("useful")
    expect(chip).to_be_focused()


def test_focus_returns_to_the_opener_after_a_saved_edit_reloads_the_page(
    dashboard_factory, home, page
):
    dash = dashboard_factory(home)
    page.goto(dash.url + "/#/collections")
    edit = page.get_by_role("button", name="Edit trio")
    edit.click()
    dialog = page.get_by_role("dialog", name="Edit bench/trio")
    dialog.get_by_label("Description").fill("Three reviewers, edited")
    dialog.get_by_role("button", name="Save changes").click()
    expect(dialog).to_have_count(0)
    expect(page.locator('[data-collection="trio"]')).to_contain_text("Three reviewers, edited")
    expect(edit).to_be_focused()  # the reloaded card's button, the opener's twin
    page.get_by_role("button", name="Edit trio").click()
    page.get_by_role("dialog").get_by_role("button", name="Cancel").click()
    expect(edit).to_be_focused()


# ------------------------------------------------------------------ the admin's Ask
def test_the_logged_in_admin_asks_without_a_gateway_key(dashboard_factory, home, context):
    dash = dashboard_factory(
        home, env={"PANELIST_ADMIN_TOKEN": TOKEN, "PANELIST_REQUIRE_KEYS": "1"}
    )
    ctx, watch = context
    watch.allow(r"status of 401")  # the first visit, before the login
    page = ctx.new_page()
    page.goto(dash.url + "/#/ask")
    expect(page).to_have_url(re.compile(r"/login$"))
    page.get_by_label("Admin token").fill(TOKEN)
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(re.compile(r"/#/ask$"))
    expect(page.get_by_label("Gateway key")).to_have_count(0)
    ask_on_the_page(page, "Review w = 4")
    expect(page.get_by_text("missing gateway key")).to_have_count(0)
    (line,) = read_jsonl(home.gateway_runs / "calls.jsonl")
    assert line["key"] == "dashboard"
    # /v1 still wants a key, session or not
    status = page.evaluate("""async () => (await fetch('/v1/chat/completions', {method: 'POST',
        headers: {'Content-Type': 'application/json'},
        body: JSON.stringify({model: 'bench/trio', messages: [{role: 'user', content: 'hi'}]})})).status""")
    watch.allow(r"status of 401")
    assert status == 401
    assert len(read_jsonl(home.gateway_runs / "calls.jsonl")) == 1
    assert json.dumps(line).count(TOKEN) == 0


def test_a_verdict_given_elsewhere_shows_on_the_panels_chip_and_in_the_open_dialog(
    dashboard_factory, home, page
):
    dash = dashboard_factory(home)
    bench = chat(dash, "Review x = 1")
    first, second = [s["call"] for s in bench["seats"] if s["status"] == "ok"][:2]
    page.goto(dash.url + "/#/panels")
    chip = page.locator(f'.seat-chip[data-call="{first}"]')
    expect(chip.locator(".verdict-mark")).to_have_text("owed")
    chip.click()
    dialog = page.get_by_role("dialog")
    expect(dialog.get_by_test_id("answer")).to_be_visible()
    line = dialog.get_by_test_id("verdict-by")
    expect(line).to_be_hidden()

    # another view (the owed queue's keys, Ask's buttons) judges through the one verdict store
    def judge_elsewhere(call, useful):
        page.evaluate(
            "([call, useful]) => import('/js/verdictstate.js').then((m) => m.judge(call, useful))",
            [call, useful],
        )

    judge_elsewhere(first, False)
    expect(line).to_be_visible()
    expect(line).to_contain_text("Current verdict by")
    expect(dialog.get_by_label("Not useful")).to_be_checked()
    expect(chip.locator(".verdict-mark")).to_have_text("✗ not useful")  # behind the dialog

    # the dialog's own save changes the chip too, and the line stays with it
    dialog.get_by_label("Useful", exact=True).check()
    dialog.get_by_role("button", name="Save verdict").click()
    expect(dialog.get_by_text("Verdict changed.")).to_be_visible()
    expect(chip.locator(".verdict-mark")).to_have_text("✓ useful")
    expect(line).to_contain_text("Current verdict by")
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()

    # with no dialog open, a verdict on another seat redraws its chip and the panel's count
    other = page.locator(f'.seat-chip[data-call="{second}"]')
    expect(other.locator(".verdict-mark")).to_have_text("owed")
    judge_elsewhere(second, True)
    expect(other.locator(".verdict-mark")).to_have_text("✓ useful")
    assert verdict_of(dash, first)["useful"] is True
    assert verdict_of(dash, second)["useful"] is True
    assert first not in owed_calls(dash) and second not in owed_calls(dash)


def test_ask_compares_chosen_models_with_explorers_off(dashboard_factory, home, page):
    dash = dashboard_factory(home)
    page.goto(dash.url + "/#/ask")
    page.get_by_label("Models", exact=True).fill("x-one, slow")
    page.get_by_label("No explorers for this ask").check()
    ask_on_the_page(page, "Review: x = 1")
    expect(page.get_by_text("Done: 2 of 2 seats answered")).to_be_visible()
    (panel,) = read_jsonl(home.gateway_runs / "calls.jsonl")
    assert sorted(s["alias"] for s in panel["seats"]) == ["slow", "x-one"]
