"""Webhooks on the Settings page, in a real browser: a webhook added there receives the test
alert its button sends, its URL is shown masked, and a receiver that refuses is said so."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture says why
    expect = None

SECRET = "T0AAA/B0BBB/s3cretQRST"


class Receiver:
    """A local HTTP receiver that keeps each POSTed body and answers ``status``."""

    def __init__(self, status: int):
        self.bodies = []
        me = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                me.bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *a):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_port}/hooks/{SECRET}"

    def close(self):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


def test_a_webhook_added_on_settings_receives_the_test_alert(dashboard, page):
    good, bad = Receiver(204), Receiver(500)
    try:
        page.goto(dashboard.url + "/#/settings")
        form = page.get_by_role("form", name="Add a webhook")
        form.get_by_label("URL").fill(good.url)
        form.get_by_label("Alert kinds").fill("failing, went_paid")
        form.get_by_role("button", name="Add webhook").click()
        row = page.locator("tr[data-hook='w1']")
        expect(row).to_contain_text("…QRST")
        expect(row).to_contain_text("failing, went_paid")
        expect(row).to_contain_text("nothing sent yet")
        row.get_by_role("button", name="Test webhook w1").click()
        expect(page.get_by_text("Test alert delivered to the webhook.")).to_be_visible()
        assert good.bodies[-1]["kind"] == "test" and "works" in good.bodies[-1]["message"]
        assert SECRET not in page.content()

        form.get_by_label("URL").fill(bad.url)
        form.get_by_role("button", name="Add webhook").click()
        bad_row = page.locator("tr[data-hook='w2']")
        expect(bad_row).to_be_visible()
        bad_row.get_by_role("button", name="Test webhook w2").click()
        expect(page.get_by_text("The test alert did not arrive everywhere.")).to_be_visible()
        expect(page.get_by_text("answered HTTP 500")).to_be_visible()
        assert len(bad.bodies) == 1
    finally:
        good.close()
        bad.close()
