"""Peak memory of a gateway answering 20 MB prompts, against its in-flight budget. It prints
figures; it asserts nothing.

    python scripts/bench_memory.py [--prompt-mb N] [--rounds N] [--concurrent N] [--budget-mb N]

Three processes: the simulated upstream (three members of 0 ms whose context window takes the
prompt), ``gateway.py`` with ``PANELIST_MAX_INFLIGHT_MB`` set to ``--budget-mb`` (128), and this
script, which sends ``POST /v1/chat/completions`` panels whose one user message is
``--prompt-mb`` MB (20) of text to the collection of the three, first ``--rounds`` (5) one after
another, then ``--rounds`` rounds of ``--concurrent`` (4) at once (the budget lets about three
bodies of 20 MB in at a time; the others are refused 503 with Retry-After, and retried by this
script after that many seconds). After each phase it prints the gateway's RSS (``VmRSS``), its
peak RSS since it started (``VmHWM``) and the largest RSS sampled every 50 ms during the phase,
next to the target of budget + 64 MB. The gateway's RSS before the first prompt is printed too
(the interpreter and the modules take some 30-40 MB of it).
"""

import sys
from pathlib import Path

if not __package__:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    import _bootstrap  # noqa

import argparse
import http.client
import json
import shutil
import tempfile
import threading
import time

from panelist.metrics.home import open_home
from panelist.metrics.roster.collection import Collections
from panelist.metrics.roster.roster import Roster
from panelist.scripts.bench_gateway_rig import GATEWAY, PY, SIM
from panelist.scripts.benchkit import Child, proc_mem, url_of

MEMBERS = ("m1", "m2", "m3")
WINDOW = 50_000_000  # tokens: no prompt of this script is refused for its length


class Sampler:
    """The gateway's VmRSS every 50 ms; the largest seen since the last ``reset``."""

    def __init__(self, pid: int):
        self.pid, self.peak = pid, 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            try:
                self.peak = max(self.peak, proc_mem(self.pid).get("VmRSS", 0.0))
            except OSError:
                return

    def reset(self) -> None:
        self.peak = 0.0

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def panel(addr: tuple[str, int], body: bytes):
    """One panel; on 503 with Retry-After, waits and asks again. Its final status (or the
    name of the error that ended it)."""
    while True:
        conn = http.client.HTTPConnection(*addr, timeout=300)
        try:
            conn.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
            reply = conn.getresponse()
            reply.read()
            if reply.status != 503:
                return reply.status
            time.sleep(float(reply.getheader("Retry-After") or 1))
        except (BrokenPipeError, ConnectionResetError):
            time.sleep(1)  # refused (503) before the body was read: the reply cut the upload
        except OSError as exc:
            return type(exc).__name__
        finally:
            conn.close()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prompt-mb", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--concurrent", type=int, default=4)
    ap.add_argument("--budget-mb", type=int, default=128)
    args = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="bench-memory-"))
    sim = gateway = sampler = None
    try:
        home = open_home(work / "data")
        limits = home.file("gateway.json")
        limits.write_text(json.dumps(dict(json.loads(limits.read_text()), max_explorers=0)))
        models = work / "sim.json"
        models.write_text(json.dumps({m: {"latency": 0.0, "window": WINDOW} for m in MEMBERS}))
        sim = Child("sim", [PY, str(SIM), "--port", "0", "--models", str(models)], work)
        roster = Roster(home)
        roster.add_endpoint("sim", sim.first_line, by="bench")
        for i, m in enumerate(MEMBERS, 1):
            roster.add_model(m, "sim", family=f"fam{i}", context=WINDOW, by="bench")
        Collections(home).save(
            roster.view(), "trio", list(MEMBERS), description="bench trio", by="bench"
        )
        env = {"PANELIST_MAX_INFLIGHT_MB": str(args.budget_mb), "PATH": "/usr/bin:/bin"}
        gateway = Child(
            "gateway", [PY, str(GATEWAY), "--data", str(home.root), "--port", "0"], work, env=env
        )
        addr = url_of(gateway.first_line)
        size = args.prompt_mb * 1_000_000  # decimal MB: 20 MB stays under the 20 MiB body cap
        text = "lorem ipsum dolor sit amet " * (size // 27 + 1)
        body = json.dumps(
            {"model": "bench/trio", "messages": [{"role": "user", "content": text[:size]}]}
        ).encode()
        del text
        small = json.dumps(
            {"model": "bench/trio", "messages": [{"role": "user", "content": "hello"}]}
        ).encode()
        assert panel(addr, small) == 200, "the gateway answered no small panel"
        sampler = Sampler(gateway.pid)
        target = args.budget_mb + 64
        print(
            f"budget {args.budget_mb} MB (PANELIST_MAX_INFLIGHT_MB); target: peak RSS "
            f"<= {target} MB; request body {len(body) / 1e6:.1f} MB (MB: 10^6 bytes; RSS "
            "in MiB)"
        )
        print(f"{'phase':34} {'statuses':>16} {'peak sampled':>13} {'VmHWM':>8} {'VmRSS':>8}")
        mem = proc_mem(gateway.pid)
        print(
            f"{'started, one small panel':34} {'':>16} {'':>13} {mem['VmHWM']:>6.1f} MB "
            f"{mem['VmRSS']:>6.1f} MB",
            flush=True,
        )

        def phase(name, n_at_once):
            sampler.reset()
            statuses = []
            for _ in range(args.rounds):
                threads = [
                    threading.Thread(target=lambda: statuses.append(panel(addr, body)))
                    for _ in range(n_at_once)
                ]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
            time.sleep(0.5)
            mem = proc_mem(gateway.pid)
            counts = ", ".join(f"{s}×{statuses.count(s)}" for s in sorted(set(statuses), key=str))
            print(
                f"{name:34} {counts:>16} {sampler.peak:>10.1f} MB {mem['VmHWM']:>6.1f} MB "
                f"{mem['VmRSS']:>6.1f} MB",
                flush=True,
            )

        phase(f"{args.rounds} one after another", 1)
        phase(f"{args.rounds} rounds of {args.concurrent} at once", args.concurrent)
    finally:
        if sampler is not None:
            sampler.stop()
        for child in (gateway, sim):
            if child is not None:
                child.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
