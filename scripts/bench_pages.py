"""Time each dashboard page from navigation to its data on screen, in a real Chromium.

    python scripts/bench_pages.py [--data DIR] [--repeat N] [--chromium PATH]

Serves the data folder (default: the one ``scripts/bench_dashboard.py`` fills, 500 models and up
to 1,000,000 panels) with ``serve.make_dashboard`` in this process, opens each page ``--repeat``
times in a fresh tab of headless Chromium (Debian's, driven by Playwright), and prints the p50
and worst time from ``goto`` to the page having replaced its loading state with content (checked
on every animation frame), beside the p50 of the page's own clock at that moment (from the start
of its navigation, without the driver's round trips). Figures, not assertions.
"""

import sys
from pathlib import Path

if not __package__:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    import _bootstrap  # noqa

import argparse
import os
import statistics
import threading
import time

ROOT = Path(__file__).resolve().parent.parent
PAGES = (
    "overview",
    "ask",
    "owed",
    "panels",
    "evidence",
    "races",
    "discover",
    "collections",
    "endpoints",
    "settings",
)
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1 , EXCLUDE localhost",
]
# The page has shown its data: no loading state left in the main area and a heading of it
# visible; the value is the page's own clock then (ms since its navigation began).
SHOWN = """() => {
  const main = document.querySelector("#main");
  if (!main || main.querySelector(".loading")) return 0;
  const head = main.querySelector("h1, h2");
  if (!head || !head.checkVisibility()) return 0;
  return performance.now() || 1;
}"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=ROOT / "runs" / "bench-dashboard")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    from panelist.metrics.home import open_home
    from panelist.metrics.roster.roster import Roster
    from panelist.serve import make_dashboard

    models = list(Roster(open_home(args.data)).view().models)
    if not models:
        print(
            f"{args.data} has no model on its roster: fill it first, e.g. "
            f"python scripts/fill_ledger.py {args.data} --models 500 --panels 300000",
            file=sys.stderr,
        )
        return 2
    pages = PAGES + (f"models/{models[0]}",)  # the model page of one model it has
    server = make_dashboard(args.data, env={})
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=args.chromium, args=ARGS, headless=True)
            context = browser.new_context()
            load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
            print(
                f"pages of {args.data} ({len(models)} models; {args.repeat} loads each), ms from "
                "goto to data shown; "
                f"load average {load} on {os.cpu_count()} cores"
            )
            print(f"{'page':<16}{'p50':>10}{'worst':>10}{'in page p50':>14}")
            for name in pages:
                times, inside = [], []
                for _ in range(args.repeat):
                    page = context.new_page()
                    t0 = time.perf_counter()
                    page.goto(f"{server.url}/#/{name}", wait_until="commit")
                    # checked on every frame, not on Playwright's widening poll (up to 1 s), so
                    # the figure is when the content was drawn, not when it was next looked at
                    shown = page.wait_for_function(SHOWN, polling="raf", timeout=60_000)
                    times.append((time.perf_counter() - t0) * 1000)
                    inside.append(shown.json_value())
                    page.close()
                print(
                    f"{name:<16}{statistics.median(times):>10.0f}{max(times):>10.0f}"
                    f"{statistics.median(inside):>14.0f}"
                )
            browser.close()
    finally:
        server.close()
        thread.join(timeout=10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
