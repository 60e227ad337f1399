"""What a large request body is granted of the memory budget (``PANELIST_MAX_INFLIGHT_MB``):
enough for every copy a panel holds of it at once (the parsed text, the seats' one encoding,
the prompt as logged and its log line), so that the budget bounds the server's memory rather
than a part of it. Measured peaks are printed by ``scripts/bench_memory.py``."""

import threading

from conftest import Gateway, set_limits, wait_until
from panelist.gateway import make_gateway

BODY = 190_000  # characters: past the size that needs a grant, within the models' window


def chat_body(text: str) -> dict:
    return {"model": "bench/trio", "messages": [{"role": "user", "content": text}]}


def test_a_large_body_holds_five_times_its_size_so_a_second_waits(home, sim):
    """A budget of 1 MB: one body of 190 KB in flight holds five times its size of it, so a
    second one is refused (503, Retry-After) until the first is answered; at twice the size
    (the old grant) both were let in and the panels' real copies went past the budget."""
    set_limits(home, max_explorers=0)
    big = "word " * (BODY // 5)
    sim.script("slow", latency=3600)  # the first panel holds its grant while it waits
    with Gateway(make_gateway(home, env={"PANELIST_MAX_INFLIGHT_MB": "1"})) as gw:
        first = {}

        def ask():
            first["reply"] = gw.post("/v1/chat/completions", chat_body(big + "one"))

        thread = threading.Thread(target=ask)
        thread.start()
        try:
            assert wait_until(lambda: sim.count("slow") >= 1)
            held = gw.server.in_flight.held
            assert held >= 5 * BODY, held
            status, body, headers = gw.post("/v1/chat/completions", chat_body(big + "two"))
            assert status == 503, body
            assert "PANELIST_MAX_INFLIGHT_MB" in body["error"]["message"]
            assert headers["Retry-After"] == "1"
        finally:
            sim.release("slow")
            sim.script("slow", latency=0.0)
            gw.server.close()
            thread.join()
    assert first["reply"][0] == 200, first["reply"][:2]  # answered with what came, then closed
