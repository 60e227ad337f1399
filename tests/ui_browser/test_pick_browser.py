"""Pick mode and undelivered panels in a real browser: the Ask page shows a picked reply (the
picked call named, its tool calls listed), and the Panels page never says a verdict is owed on
a panel whose caller left."""

from __future__ import annotations

import json
import re
import socket

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture says why (a skip, or a failure when required)
    expect = None

from conftest import PATIENCE, read_jsonl, wait_until

LOOKUP = [{"name": "lookup_order", "arguments": {"number": "42"}}]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "lookup_order",
            "parameters": {"type": "object", "properties": {"number": {"type": "string"}}},
        },
    }
]


def no_explorers(home) -> None:
    path = home.file("gateway.json")
    path.write_text(json.dumps(dict(json.loads(path.read_text()), max_explorers=0)))


def logged(home) -> dict:
    path = home.gateway_runs / "calls.jsonl"
    return {r["panel"]: r for r in read_jsonl(path)} if path.exists() else {}


def test_the_ask_page_shows_a_picked_reply_with_its_tool_calls(dashboard_factory, home, sim, page):
    sim.script("fast", tool_calls=LOOKUP)  # the first member, picked while nobody is judged
    dash = dashboard_factory(home)
    page.goto(dash.url + "/#/ask")
    expect(page.get_by_label("Collection", exact=True)).to_have_value("bench/trio")
    page.get_by_label("Reply", exact=True).select_option(":pick")
    expect(page.locator("pre", has_text='model="bench/trio:pick"')).to_have_count(1)
    page.get_by_label("Prompt", exact=True).fill("Where is order 42?")
    page.get_by_label("Tools", exact=True).fill(json.dumps(TOOLS))
    page.get_by_role("button", name="Ask", exact=True).click()
    expect(page.get_by_text(re.compile(r"^Done: \d of \d seats answered"))).to_be_visible()

    picked = page.locator(".answer-card").first
    expect(picked.locator(".answer-title")).to_have_text("Picked answer · fast")
    call = picked.get_attribute("data-call")
    panel = call.split(".")[0]
    assert call == f"{panel}.member1"
    expect(picked.locator(".pick-note")).to_have_text(
        f"The reply is member1 fast's answer, verbatim: call {call}."
    )
    calls = picked.get_by_role("group", name="Tool calls")
    expect(calls.locator(".tool-call")).to_have_text(['lookup_order({"number": "42"})'])
    expect(picked.get_by_text("The answer was empty.")).to_have_count(0)
    # every seat follows it, the picked one among them
    expect(page.get_by_role("heading", name="Every seat's answer")).to_be_visible()
    expect(page.locator(f'.answer-card[data-call="{call}"]')).to_have_count(2)

    assert wait_until(lambda: panel in logged(home)), "the panel was never logged"
    record = logged(home)[panel]
    assert record["reply"] == "pick" and record["picked"]["call"] == call
    assert record["abandoned"] is False
    (seat,) = [s for s in record["seats"] if s["call"] == call]
    assert (
        seat["status"] == "tool_calls"
        and seat["tool_calls"][0]["function"]["name"] == "lookup_order"
    )


def leave_a_panel(dash, home, sim) -> str:
    """A panel of bench/trio whose caller leaves once fast and mid answered (slow hangs)."""
    no_explorers(home)
    sim.script("slow", fail="hang")
    host, port = dash.server.server_address[:2]
    raw = json.dumps(
        {"model": "bench/trio", "messages": [{"role": "user", "content": "Review x = 1"}]}
    ).encode()
    evidence = home.gateway_runs / "evidence.jsonl"

    def answered():
        return (
            sorted(
                e["alias"]
                for e in read_jsonl(evidence)
                if e.get("kind") == "seat" and e["status"] == "ok"
            )
            if evidence.exists()
            else []
        )

    with socket.create_connection((host, port), timeout=PATIENCE) as s:
        s.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
            b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
            % (port, len(raw), raw)
        )
        assert wait_until(lambda: sim.count("slow") == 1 and answered() == ["fast", "mid"])
    assert wait_until(lambda: len(logged(home)) == 1), "the panel was never logged"
    (record,) = logged(home).values()
    assert record["abandoned"] is True
    sim.script("slow", latency=0)
    return record["panel"]


def test_an_abandoned_panel_is_not_owed_on_the_panels_page(dashboard_factory, home, sim, page):
    dash = dashboard_factory(home)
    left = leave_a_panel(dash, home, sim)
    status, delivered = dash.post(
        "/v1/chat/completions",
        {"model": "bench/trio", "messages": [{"role": "user", "content": "Review y = 2"}]},
    )
    assert status == 200, delivered
    kept = delivered["bench"]["panel"]
    status, listing = dash.get("/api/panels")
    assert status == 200 and listing["owed"] == 3
    assert [(p["panel"], p["reason"]) for p in listing["apart"]] == [(left, "abandoned")]
    assert sorted(listing["apart"][0]["calls"]) == [f"{left}.member1", f"{left}.member2"]

    page.goto(dash.url + "/#/panels")
    gone = page.locator(f'.panel-item[data-panel="{left}"]')
    expect(gone).to_contain_text("caller left: no verdict owed")
    expect(gone.locator(".verdict-mark.owed")).to_have_count(0)
    expect(gone.locator(".verdict-mark.not-owed")).to_have_count(2)
    expect(gone.locator(".badge.warn")).to_have_count(0)  # no "N owed" badge
    chip = gone.locator(f'.seat-chip[data-call="{left}.member1"]')
    expect(chip).to_have_attribute("aria-label", re.compile(r"no verdict owed$"))
    # the panel the caller did receive is owed as before
    here = page.locator(f'.panel-item[data-panel="{kept}"]')
    expect(here.locator(".verdict-mark.owed")).to_have_count(3)
    expect(here).to_contain_text("3 owed")
    # and the one the caller left is listed apart
    apart = page.get_by_role("group", name="Panels not owed a verdict")
    expect(apart).to_contain_text("1 recent panel never reached the caller: no verdict owed")
    apart.locator("summary").click()
    expect(apart.locator(f'li[data-panel="{left}"]')).to_contain_text(
        "caller left · 2 answered seats without a verdict"
    )


def test_a_collection_is_made_to_reply_with_a_pick_from_its_form(dashboard_factory, home, page):
    dash = dashboard_factory(home)
    page.goto(dash.url + "/#/collections")
    page.get_by_role("button", name="New collection").first.click()
    dialog = page.get_by_role("dialog", name="New collection")
    dialog.get_by_label("Name").fill("agents")
    dialog.locator('.picker-item[data-alias="fast"] input').check()
    dialog.locator('.picker-item[data-alias="mid"] input').check()
    dialog.get_by_label("One seat's answer, verbatim (pick)").check()
    dialog.get_by_role("button", name="Create collection").click()
    card = page.locator('[data-collection="agents"]')
    expect(card).to_contain_text("one picked answer")
    status, cols = dash.get("/api/collections")
    assert {c["name"]: c["reply"] for c in cols["data"]}["agents"] == "pick"
