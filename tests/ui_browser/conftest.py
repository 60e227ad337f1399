"""Real-browser fixtures: Debian's Chromium driven by Playwright, against a real dashboard server.

One browser per session, a fresh context (cookies, storage) per test. Every page is watched:
a console error, an uncaught exception or a Content-Security-Policy violation fails the test
(checked by the ``pytest_runtest_call`` wrapper below, so it is a failure, not a teardown error),
and a failed test leaves ``failure.png`` in its temp folder. A test that provokes an error on
purpose (a refused login, a stale edit) says so with ``watch.allow(pattern)``.

Chromium is never downloaded (``playwright install`` cannot reach the internet here): the tests
launch ``/usr/bin/chromium`` (``PANELIST_CHROMIUM`` to use another), which ``.ci/run`` installs
with apt. Without it, or without Playwright, the tests are skipped, unless
``PANELIST_REQUIRE_BROWSER=1`` (set by ``.ci/run``) turns the skip into a failure.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("PANELIST_CHROMIUM", "/usr/bin/chromium")
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    # no lookups outside this machine (Chromium asks a Google host at start)
    "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1 , EXCLUDE localhost",
]
TIMEOUT_MS = 20_000  # generous: the machine may be loaded; tests wait on conditions, not time

# Collects every CSP violation, on every document the context opens, into the test's watch.
CSP_WATCH = """
document.addEventListener("securitypolicyviolation", (e) => {
  window.__panelistCsp(`${e.violatedDirective} blocked ${e.blockedURI || "inline"} `
    + `at ${e.sourceFile || "?"}:${e.lineNumber || 0}`);
});
"""


def _unavailable() -> str | None:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "Playwright is not installed (pip install '.[test]')"
    if not Path(CHROMIUM).exists():
        return f"no Chromium at {CHROMIUM} (apt-get install chromium)"
    return None


@pytest.fixture(scope="session")
def browser():
    why = _unavailable()
    if why:
        if os.environ.get("PANELIST_REQUIRE_BROWSER") == "1":
            pytest.fail(f"browser tests cannot run: {why}")
        pytest.skip(why)
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=TIMEOUT_MS)
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            yield b
        finally:
            b.close()


class Watch:
    """What went wrong in the page while a test ran."""

    def __init__(self):
        self.problems: list[str] = []
        self._allowed: list[re.Pattern] = []
        self._lock = threading.Lock()

    def add(self, text: str) -> None:
        with self._lock:
            self.problems.append(text)

    def allow(self, pattern: str) -> None:
        """A console error this test provokes on purpose (matched as a regex)."""
        self._allowed.append(re.compile(pattern))

    def unexpected(self) -> list[str]:
        with self._lock:
            return [
                p
                for p in self.problems
                if not (p.startswith("console error:") and any(a.search(p) for a in self._allowed))
            ]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    result = yield
    watch = getattr(item, "_browser_watch", None)
    if watch is not None:
        bad = watch.unexpected()
        assert not bad, "the page reported problems:\n  " + "\n  ".join(bad)
    return result


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    report = yield
    setattr(item, f"_report_{report.when}", report)
    return report


class Dashboard:
    """A dashboard server on 127.0.0.1:0 over one data folder, served from a thread."""

    def __init__(self, server):
        self.server = server
        self.url = server.url.rstrip("/")
        # a short poll: close() waits for the loop to see it, once per test
        self.thread = threading.Thread(
            target=server.serve_forever, args=(0.05,), daemon=True, name="dashboard-under-test"
        )
        self.thread.start()

    def request(self, method: str, path: str, body=None, headers=None):
        data = None if body is None else json.dumps(body).encode()
        hdrs = {"Content-Type": "application/json"} if data is not None else {}
        hdrs.update(headers or {})
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=hdrs)
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                return resp.status, json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read() or b"null")

    def get(self, path: str):
        return self.request("GET", path)

    def post(self, path: str, body=None):
        return self.request("POST", path, {} if body is None else body)

    def close(self) -> None:
        self.server.close()
        self.thread.join(timeout=10)
        assert not self.thread.is_alive(), "the dashboard server did not stop"


@pytest.fixture()
def dashboard_factory(tmp_path):
    """make(data=None, env=None) → a running Dashboard; all are closed after the test."""
    from panelist.serve import make_dashboard

    running: list[Dashboard] = []

    def make(data=None, env=None) -> Dashboard:
        server = make_dashboard(data if data is not None else tmp_path / "data", env=env or {})
        dash = Dashboard(server)
        running.append(dash)
        return dash

    yield make
    for dash in running:
        dash.close()


@pytest.fixture(scope="session")
def roster_of_500(tmp_path_factory):
    """copy(dest) → ``dest``, a data folder holding ``bench_dashboard``'s 500 models and 50
    collections and nothing else (no panels yet).

    Writing that roster edits ``roster.json`` once per model, minutes of CPU on a loaded machine,
    while each test only needs its own copy: it is written once for the whole run, under a lock
    in the folder every xdist worker of this run shares, and copied for each test that asks."""
    from panelist.scripts.bench_dashboard import prepare_roster

    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # one folder per run (pytest-N), above each worker's own
    template = base / "roster-of-500"
    with open(base / "roster-of-500.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the first worker writes it; the others wait
        if not (template / "written").exists():
            shutil.rmtree(template, ignore_errors=True)  # a run cut short mid-write
            prepare_roster(template)
            (template / "written").touch()

    def copy(dest: Path) -> Path:
        shutil.copytree(template, dest, ignore=shutil.ignore_patterns("written"))
        return dest

    return copy


@pytest.fixture()
def dashboard(dashboard_factory):
    """A dashboard over an empty data folder, open to local callers (no admin token)."""
    return dashboard_factory()


@pytest.fixture()
def demo(dashboard):
    """A dashboard with the demo roster loaded (five simulated models, bench/demo)."""
    status, body = dashboard.post("/api/demo")
    assert status == 200 and body["collection"] == "bench/demo", body
    return dashboard


@pytest.fixture()
def context(browser, request, tmp_path):
    """A fresh browser context whose pages are watched; yields (context, watch)."""
    scheme = getattr(request, "param", "light")
    ctx = browser.new_context(viewport={"width": 1280, "height": 900}, color_scheme=scheme)
    ctx.set_default_timeout(TIMEOUT_MS)
    watch = Watch()
    ctx.expose_binding("__panelistCsp", lambda _source, text: watch.add(f"CSP violation: {text}"))
    ctx.add_init_script(script=CSP_WATCH)
    pages = []

    def on_page(page):
        pages.append(page)
        page.on(
            "console",
            lambda m: (
                watch.add(f"console error: {m.text} ({m.location.get('url', '')})")
                if m.type == "error"
                else None
            ),
        )
        page.on("pageerror", lambda exc: watch.add(f"uncaught exception: {exc}"))

    ctx.on("page", on_page)
    request.node._browser_watch = watch
    try:
        yield ctx, watch
    finally:
        call = getattr(request.node, "_report_call", None)
        if call is None or call.failed:
            for i, page in enumerate(pages):
                if not page.is_closed():
                    name = "failure.png" if i == 0 else f"failure-{i}.png"
                    try:
                        page.screenshot(path=str(tmp_path / name), full_page=True)
                    except Exception as exc:  # the screenshot is a help, never the failure
                        print(f"no screenshot of page {i}: {exc}")
        ctx.close()


@pytest.fixture()
def page(context):
    ctx, _ = context
    return ctx.new_page()


@pytest.fixture()
def watch(context):
    return context[1]
