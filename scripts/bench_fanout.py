"""Upstream calls per race request against what the reply that started it said, and against
the caps: a gateway built in this process over a temporary data folder, the simulated upstream
playing every model (and counting the requests that reach it).

    python scripts/bench_fanout.py [--cap N]

For races of growing size (candidates × inputs × runs) it prints the calls the starting reply
planned and said it could make at most, the calls the simulated upstream counted for the race
the key without a limit started, and whether the race was admitted under the server's cap
(``PANELIST_MAX_REQUEST_CALLS``,
``--cap``, default the server's own) and under a key limited to 60 requests a minute. Every
model answers at its first try here, so "counted" should equal "planned"; "at most" is the
bound when every retry and re-ask is used. Figures, not assertions.
"""

import sys
from pathlib import Path

if not __package__:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    import _bootstrap  # noqa

import argparse
import http.client
import json
import tempfile
import threading
import time

from panelist.gateway import make_gateway
from panelist.metrics.home import open_home
from panelist.metrics.roster.grades import Grades
from panelist.metrics.roster.roster import Roster
from panelist.metrics.server.keys import Keys
from panelist.metrics.server.limits import MAX_REQUEST_CALLS
from panelist.metrics.upstream.sim import SimUpstream

CANDIDATES = [f"gen-{i}" for i in range(12)]
JUDGE = {"accuracy": 6, "shown_work": 2, "reason": "the same facts as the reference"}
SIZES = [(1, 1, 1), (2, 1, 3), (4, 3, 3), (12, 10, 5), (12, 40, 10)]  # candidates, inputs, runs
KEY_RPM = 60


def request(port: int, method: str, path: str, body=None, key=None) -> tuple[int, dict]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    conn.request(method, path, json.dumps(body) if body is not None else None, headers)
    reply = conn.getresponse()
    status, data = reply.status, json.loads(reply.read() or b"{}")
    conn.close()
    return status, data


def counted(sim) -> int:
    return sum(sim.count(a) for a in [*CANDIDATES, "pinned", "judge"])


def race(port, sim, key, candidates, inputs, runs) -> dict:
    body = {
        "grade": "general",
        "runs": runs,
        "candidates": CANDIDATES[:candidates],
        "inputs": [f"Where is order {1000 + i}?" for i in range(inputs)],
    }
    before = counted(sim)
    status, reply = request(port, "POST", "/bench/race", body, key)
    error = reply.get("error") or {}
    out = {
        "status": status,
        "calls": reply.get("calls"),
        "refused": error.get("code"),
        "message": error.get("message"),
    }
    if status == 202:
        while True:
            _, now = request(port, "GET", f"/bench/race/{reply['race']}", key=key)
            if now.get("status") != "running":
                break
            time.sleep(0.2)
    out["counted"] = counted(sim) - before
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cap", type=int, default=MAX_REQUEST_CALLS)
    args = ap.parse_args(argv)
    models: dict[str, dict] = {a: {} for a in [*CANDIDATES, "pinned"]}
    models["judge"] = {"json": JUDGE}
    with tempfile.TemporaryDirectory() as tmp, SimUpstream(models) as sim:
        home = open_home(Path(tmp) / "data")
        roster = Roster(home)
        roster.add_endpoint("sim", sim.url)
        for alias in [*CANDIDATES, "pinned"]:
            roster.add_model(alias, "sim", family=alias, grade="general")
        roster.add_model("judge", "sim", family="judge", grade="strong")
        grades = Grades(home)
        grades.pin("general", "pinned")
        grades.pin("strong", "judge")
        wide, _ = Keys(home).create("wide")
        narrow, _ = Keys(home).create("narrow", rpm=KEY_RPM)
        server = make_gateway(
            home, env={"PANELIST_REQUIRE_KEYS": "1", "PANELIST_MAX_REQUEST_CALLS": str(args.cap)}
        )
        thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
        thread.start()
        server.started.wait(30)
        try:
            port = server.port
            print(
                f"cap: {args.cap:,} upstream calls a request (PANELIST_MAX_REQUEST_CALLS); "
                f"key 'narrow': {KEY_RPM} requests a minute\n"
            )
            print(
                f"{'candidates × inputs × runs':28} {'planned':>9} {'at most':>9} "
                f"{'counted':>9}  {'key without rpm':18} {f'key rpm {KEY_RPM}':18}"
            )
            for c, i, r in SIZES:
                a = race(port, sim, wide, c, i, r)
                b = race(port, sim, narrow, c, i, r)
                calls = a["calls"] or b["calls"] or {}
                said = (
                    f"{calls.get('planned', '-'):>9} {calls.get('at_most', '-'):>9}"
                    if calls
                    else f"{'-':>9} {'-':>9}"
                )
                print(
                    f"{f'{c} × {i} × {r}':28} {said} {a['counted']:>9}  "
                    f"{a['refused'] or 'admitted':18} {b['refused'] or 'admitted':18}",
                    flush=True,
                )
                if not calls:
                    print(f"{'':28} refused: {a['message']}", flush=True)
                time.sleep(0.1)
        finally:
            server.close()
            thread.join()
    return 0


if __name__ == "__main__":
    sys.exit(main())
