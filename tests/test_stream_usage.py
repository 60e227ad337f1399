"""Usage of streamed replies: the tokens the picked seat (or every seat and the merger) used, as
its upstream's stream reported them (the gateway asks for them: ``stream_options.include_usage``),
and, when an upstream's stream carries none, an estimate marked ``estimated``, never a zero that
reads as "free". The same request unstreamed reports the upstream's own counts."""

import pytest

from sse import RawStream

ASK = [{"role": "user", "content": "Review: x = 1/0"}]


def final_chunk(gateway, model, **extra) -> dict:
    with RawStream(
        gateway.server,
        "/v1/chat/completions",
        {"model": model, "messages": ASK, "stream": True, **extra},
    ) as stream:
        events = stream.rest()
    assert events[-1] == (None, "[DONE]")
    return events[-2][1]


def test_streamed_pick_reports_the_tokens_its_upstream_streamed(gateway, sim):
    final = final_chunk(gateway, "bench/trio:pick")
    usage = final["usage"]
    asked = [r["body"] for r in sim.requests if r["model"] == "fast"]
    assert asked[0]["stream_options"] == {"include_usage": True}
    assert usage["prompt_tokens"] > 0 and usage["completion_tokens"] > 0
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert "estimated" not in usage


def test_streamed_pick_without_usage_from_upstream_estimates_and_says_so(gateway, sim):
    sim.script("fast", stream_usage=False)
    final = final_chunk(gateway, "bench/trio:pick")
    assert final["bench"]["picked"]["alias"] == "fast"
    usage = final["usage"]
    status, plain, _ = gateway.post(
        "/v1/chat/completions", {"model": "bench/trio:pick", "messages": ASK}
    )
    # never a zero: an estimate near what the upstream counts unstreamed, marked as one
    assert usage["estimated"] is True
    assert usage["prompt_tokens"] > 0 and usage["completion_tokens"] > 0
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert "estimated" not in plain["usage"]
    fast = next(s for s in final["bench"]["seats"] if s["alias"] == "fast")
    assert fast["tokens"]["completion"] is None  # the seat's own record keeps it unknown


def test_streamed_merged_counts_the_mergers_tokens(gateway, home, sim):
    final = final_chunk(gateway, "bench/trio:merged")
    bench = final["bench"]
    seats = [s["tokens"] for s in bench["seats"]] + [bench["merger"]["tokens"]]
    assert bench["merger"]["tokens"]["completion"] > 0
    assert final["usage"]["completion_tokens"] == sum(t["completion"] for t in seats)
    assert final["usage"]["prompt_tokens"] == sum(t["prompt"] for t in seats)


def test_a_streamed_merger_without_usage_is_counted_by_estimate(gateway, sim):
    for alias in ("fast", "mid", "slow", "x-one", "x-two", "x-three"):
        sim.script(alias, stream_usage=False)  # only the merger's call is streamed
    final = final_chunk(gateway, "bench/trio:merged")
    bench = final["bench"]
    assert bench["merger"]["tokens"]["completion"] is None and "buffered" not in bench
    seats = [s["tokens"] for s in bench["seats"]]
    usage = final["usage"]
    assert usage["estimated"] is True
    assert usage["completion_tokens"] > sum(t["completion"] for t in seats)
    assert usage["prompt_tokens"] > sum(t["prompt"] for t in seats)
    assert bench["usage_total"]["completion_tokens"] == usage["completion_tokens"]


@pytest.mark.parametrize(
    "path, body",
    [
        ("/v1/responses", {"input": "Review: x = 1/0"}),
        ("/v1/messages", {"max_tokens": 300, "messages": ASK}),
    ],
)
def test_the_other_formats_carry_the_estimate_never_zero(gateway, sim, path, body):
    sim.script("fast", stream_usage=False)
    with RawStream(
        gateway.server, path, dict(body, model="bench/trio:pick", stream=True)
    ) as stream:
        events = [e for e in stream.rest() if isinstance(e[1], dict)]
    if path == "/v1/responses":
        usage = events[-1][1]["response"]["usage"]
        assert usage["input_tokens"] > 0 and usage["output_tokens"] > 0
    else:
        usage = next(d for n, d in events if n == "message_delta")["usage"]
        assert usage["input_tokens"] > 0 and usage["output_tokens"] > 0
    assert usage["estimated"] is True
