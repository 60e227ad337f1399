"""The Endpoints page's Connect button in a real browser: sign in to the simulated provider of
``signinkit`` (the test follows the sign-in link as the user's browser tab would) and the new
endpoint shows with its key set, the key nowhere on the page."""

from __future__ import annotations

import json

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture says why (a skip, or a failure when required)
    expect = None

from panelist.metrics.home import open_home
from signinkit import FakeProvider, sign_in


def test_connect_signs_in_and_lists_the_endpoint_with_its_key_set(
    dashboard_factory, tmp_path, page, monkeypatch
):
    monkeypatch.delenv("PANELIST_KEY_ROUTER", raising=False)
    provider = FakeProvider()
    try:
        home = open_home(tmp_path / "data")
        home.file("providers.json").write_text(
            json.dumps({"v": 1, "providers": {"sim-auth": provider.entry()}})
        )
        dash = dashboard_factory(home)
        page.goto(dash.url + "/#/endpoints")
        page.get_by_role("button", name="Connect a provider").click()
        dialog = page.get_by_role("dialog", name="Connect a provider")
        expect(dialog.get_by_label("Provider", exact=True)).to_have_value("sim-auth")
        dialog.get_by_label("Endpoint name", exact=True).fill("router")
        dialog.get_by_role("button", name="Sign in").click()
        link = dialog.get_by_role("link", name="Open the sign-in page")
        expect(link).to_be_visible()
        assert sign_in(link.get_attribute("href"))[0] == 200
        expect(dialog).to_contain_text("Signed in: endpoint router is ready")
        expect(dialog).to_contain_text("PANELIST_KEY_ROUTER")
        dialog.get_by_role("button", name="Close").last.click()
        row = page.locator('tr[data-endpoint="router"]')
        expect(row).to_contain_text("https://models.example/api/v1")
        expect(row).to_contain_text("set")
        [key] = provider.issued
        assert key not in page.content()
    finally:
        provider.close()
