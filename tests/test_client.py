"""Upstream.chat against the simulated provider, over real sockets on 127.0.0.1 (the response
reader against raw bytes is ``test_client_raw.py``).

Tests assert outcomes and order, never speed: a call cut by its deadline or a cancel is shown by
its error class and by returning while the server would still be holding it."""

import json
import socket
import threading
import time
from email.utils import format_datetime
from datetime import datetime, timedelta, timezone

import pytest

from clientkit import COMPLETION, KEY, ask, plain, raw_chat
from clientkit import raw, upstream  # noqa: F401  (fixtures)
from conftest import wait_until
from panelist import __version__
from panelist.metrics.upstream.client import Answer, Upstream, _refusal
from panelist.metrics.upstream.transport import CancelFlag
from panelist.metrics.errors import (
    AuthFailed,
    Cancelled,
    ContextTooLong,
    EmptyAnswer,
    ModelNotFound,
    PaymentRequired,
    RateLimited,
    UpstreamBadReply,
    UpstreamServerError,
    UpstreamTimeout,
    UpstreamUnreachable,
)
from panelist.metrics.upstream.sim import SimUpstream
from panelist.metrics.wire.errors import body_of


@pytest.fixture
def sim():
    with SimUpstream({"m": {}}) as server:
        yield server


def chat(upstream, sim, model="m", *, key=KEY, timeout=5.0, **kw):
    return upstream.chat(sim.url, key, ask(model), timeout=timeout, **kw)


def test_answer_with_tokens(upstream, sim):
    answer = chat(upstream, sim)
    assert isinstance(answer, Answer)
    assert answer.text.startswith("[simulated m] ") and "Compare these two designs" in answer.text
    prompt = -(-len("Compare these two designs briefly") // 4)
    completion = -(-len(answer.text) // 4)
    assert answer.tokens == {
        "prompt": prompt,
        "completion": completion,
        "total": prompt + completion,
    }
    assert answer.model == "m" and answer.seconds > 0


def test_sends_the_body_with_stream_false_and_headers(upstream, sim):
    upstream.chat(sim.url, KEY, {**ask(), "stream": True, "temperature": 0.1}, timeout=5)
    upstream.chat(sim.url, None, ask(), timeout=5)
    with_key, without = sim.requests
    assert with_key["body"]["stream"] is False and with_key["body"]["temperature"] == 0.1
    assert with_key["headers"]["Authorization"] == f"Bearer {KEY}"
    assert with_key["headers"]["User-Agent"] == f"panelist/{__version__}"
    assert with_key["headers"]["Content-Type"] == "application/json"
    assert "Authorization" not in without["headers"]


def test_connections_are_reused(upstream, sim):
    for _ in range(20):
        chat(upstream, sim)
    sim.script("m", fail="rate_limit")  # an error answer leaves the connection usable
    with pytest.raises(RateLimited):
        chat(upstream, sim)
    sim.script("m")
    chat(upstream, sim)
    assert sim.count("m") == 22 and sim.connections == 1


def test_connections_are_pooled_across_threads(upstream, sim):
    errors = []

    def worker():
        try:
            for _ in range(25):
                chat(upstream, sim)
        except Exception as exc:  # noqa: BLE001  (reported below)
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, f"calls failed: {errors[:3]}"
    assert sim.count("m") == 150, "every call reached the server once"
    assert sim.connections <= 6, f"{sim.connections} connections for 6 threads: not pooled"


def test_idle_connections_are_capped_per_host(sim):
    sim.script("m", latency=0.1)
    client = Upstream(max_idle_per_host=1, proxies={})
    threads = [threading.Thread(target=chat, args=(client, sim)) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sim.connections == 4
    sim.script("m")
    for _ in range(3):
        chat(client, sim)
    assert sim.connections == 4  # one idle connection was kept, and reused
    client.close()


def test_connection_close_is_not_pooled(upstream, sim):
    sim.script("m", close=True)
    for _ in range(3):
        chat(upstream, sim)
    assert sim.connections == 3


def test_rate_limit_reads_retry_after(upstream, sim):
    sim.script("m", fail="rate_limit", retry_after=12)
    with pytest.raises(RateLimited) as caught:
        chat(upstream, sim)
    assert caught.value.retry_after == 12
    assert "429" in caught.value.message and "Rate limit reached" in caught.value.message


def test_rate_limit_reads_an_http_date(upstream, sim):
    when = datetime.now(timezone.utc) + timedelta(seconds=120)
    sim.script("m", fail="rate_limit", retry_after=format_datetime(when, usegmt=True))
    with pytest.raises(RateLimited) as caught:
        chat(upstream, sim)
    assert 110 <= caught.value.retry_after <= 121


def test_quota_is_payment_required(upstream, sim):
    sim.script("m", fail="quota")
    with pytest.raises(PaymentRequired, match="429"):
        chat(upstream, sim)


def test_context_length_carries_the_window(upstream, sim):
    sim.script("m", fail="context_length", window=8192)
    with pytest.raises(ContextTooLong) as caught:
        chat(upstream, sim)
    assert caught.value.window == 8192 and "400" in caught.value.message


@pytest.mark.parametrize(
    "message, window",
    [
        ("prompt is too long: 210000 tokens > 200000 maximum", 200000),
        ("The input exceeds the context window of 128,000 tokens", 128000),
        ("too many tokens in the request", None),
    ],
)
def test_context_length_in_other_words(upstream, sim, message, window):
    sim.script("m", fail="context_length", message=message)
    with pytest.raises(ContextTooLong) as caught:
        chat(upstream, sim)
    assert caught.value.window == window


def test_context_length_parsing_of_other_servers():
    vllm = (
        b'{"object": "error", "message": "This model\'s maximum context length is 4096 tokens.'
        b' However, you requested 5000 tokens.", "type": "BadRequestError", "code": 400}'
    )
    llama = (
        b'{"error": {"code": 400, "message": "the request exceeds the available context '
        b'size, try increasing it", "type": "exceed_context_size_error", "n_ctx": 2048}}'
    )
    for data, window in ((vllm, 4096), (llama, 2048)):
        error = _refusal(400, None, data, "upstream x:1")
        assert isinstance(error, ContextTooLong) and error.window == window
    assert isinstance(
        _refusal(413, None, b"request entity too large", "upstream x:1"), UpstreamBadReply
    )


def test_server_error(upstream, sim):
    sim.script("m", fail="server_error")
    with pytest.raises(UpstreamServerError, match="500"):
        chat(upstream, sim)


def test_empty_answer(upstream, sim):
    sim.script("m", fail="empty")
    with pytest.raises(EmptyAnswer):
        chat(upstream, sim)
    sim.script("m", answer="  \n ")
    with pytest.raises(EmptyAnswer):
        chat(upstream, sim)


def test_garbage_is_a_bad_reply(upstream, sim):
    sim.script("m", fail="garbage")
    with pytest.raises(UpstreamBadReply, match="not JSON"):
        chat(upstream, sim)


def test_error_body_on_200(upstream, sim):
    sim.script("m", fail="error_body")
    with pytest.raises(UpstreamServerError, match="overloaded"):
        chat(upstream, sim)
    sim.script("m", fail="error_body", message="Rate limit reached, try again in 1.5s")
    with pytest.raises(RateLimited) as caught:
        chat(upstream, sim)
    assert caught.value.retry_after == 1.5
    sim.script("m", fail="error_body", message="maximum context length is 2048 tokens")
    with pytest.raises(ContextTooLong) as caught:
        chat(upstream, sim)
    assert caught.value.window == 2048


def test_auth_failed(upstream, sim):
    sim.script("m", fail="auth")
    with pytest.raises(AuthFailed, match="401"):
        chat(upstream, sim)


@pytest.mark.parametrize(
    "fail, error, status",
    [
        ("auth", AuthFailed, 401),
        ("rate_limit", RateLimited, 429),
        ("quota", PaymentRequired, 429),
        ("server_error", UpstreamServerError, 500),
        ("context_length", ContextTooLong, 400),
        ("not_found", ModelNotFound, 404),
        ("error_body", UpstreamServerError, 200),
        ("empty", EmptyAnswer, 200),
        ("garbage", UpstreamBadReply, 200),
    ],
)
def test_an_error_read_from_a_reply_carries_the_upstreams_own_status(
    upstream, sim, fail, error, status
):
    sim.script("m", fail=fail)
    with pytest.raises(error) as caught:
        chat(upstream, sim)
    assert caught.value.upstream_status == status


@pytest.mark.slow
def test_an_error_without_a_reply_has_no_upstream_status(upstream):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(UpstreamUnreachable) as caught:
        upstream.chat(f"http://127.0.0.1:{port}/v1", None, ask(), timeout=5)
    assert caught.value.upstream_status is None


def test_unknown_model_says_the_served_id_may_be_wrong(upstream, sim):
    with pytest.raises(UpstreamBadReply, match="404.*model not found"):
        chat(upstream, sim, "no-such-model")


def test_api_key_is_scrubbed_when_echoed(upstream, sim):
    sim.script("m", require_key="the-right-key", echo_auth=True)
    assert chat(upstream, sim, key="the-right-key").text
    with pytest.raises(AuthFailed) as caught:
        chat(upstream, sim)
    error = caught.value
    assert sim.requests[-1]["headers"]["Authorization"] == f"Bearer {KEY}"  # it was echoed
    assert KEY not in str(error) and KEY not in str(body_of(error))
    assert "[api key]" in error.message


def test_api_key_is_scrubbed_even_where_a_body_is_cut():
    pieces = {KEY[at : at + 4] for at in range(len(KEY) - 3)}  # every 4-character piece of it
    for spaces in range(1180, 1200):  # the key straddles the cut at some of these
        data = b"<html>" + b" " * spaces + KEY.encode() + b"</html>"
        message = _refusal(502, None, data, "upstream x:1", ((KEY, "[api key]"),)).message
        left = sorted(piece for piece in pieces if piece in message)
        assert not left, f"pieces of the key left where the body was cut: {left} in {message!r}"


def test_an_answer_that_echoes_the_api_key_is_scrubbed(upstream, sim):
    sim.script("m", echo_auth_answer=True)
    answer = chat(upstream, sim)
    assert sim.requests[-1]["headers"]["Authorization"] == f"Bearer {KEY}"  # it was echoed
    assert KEY not in answer.text
    assert answer.text.endswith("Called with Authorization: Bearer [api key].")


# -- what an upstream's words may hold -------------------------------------------------------------
def test_a_lone_surrogate_in_an_answer_becomes_a_replacement_character(upstream, sim):
    sim.script("m", answer="half a pair \ud800 then the rest")  # sent as the escape \ud800
    answer = chat(upstream, sim)
    assert answer.text == "half a pair \ufffd then the rest"
    assert answer.text.encode() == "half a pair \ufffd then the rest".encode()


@pytest.mark.parametrize(
    "fail, error",
    [
        ("server_error", UpstreamServerError),
        ("error_body", UpstreamServerError),
        ("rate_limit", RateLimited),
        ("auth", AuthFailed),
        ("context_length", ContextTooLong),
    ],
)
def test_a_lone_surrogate_in_an_error_message_becomes_a_replacement_character(
    upstream, sim, fail, error
):
    sim.script("m", fail=fail, message="broken \udc00 words")
    with pytest.raises(error) as caught:
        chat(upstream, sim)
    assert "broken \ufffd words" in caught.value.message
    caught.value.message.encode()
    json.dumps(body_of(caught.value), ensure_ascii=False).encode()


@pytest.mark.slow
def test_surrogates_sent_raw_or_as_utf16_become_replacement_characters(upstream, raw):
    # Bytes ED A0 80 encode U+D800 the way UTF-8 forbids; JSON's decoder lets them through.
    cesu = COMPLETION.replace(b'"raw answer"', b'"raw \xed\xa0\x80 answer"').replace(
        b'"model": "raw"', b'"model": "raw\\udbff"'
    )
    utf16 = '{"choices": [{"message": {"content": "wide \\udc00 answer"}}]}'.encode("utf-16")
    server = raw(plain(body=cesu), plain(body=utf16))
    answer = raw_chat(upstream, server)
    assert (answer.text, answer.model) == ("raw \ufffd answer", "raw\ufffd")
    assert raw_chat(upstream, server).text == "wide \ufffd answer"


@pytest.mark.parametrize(
    "status, error",
    [
        (b"200 OK", UpstreamBadReply),
        (b"400 Bad Request", UpstreamBadReply),
        (b"500 Internal Server Error", UpstreamServerError),
    ],
)
@pytest.mark.slow
def test_json_nested_too_deep_is_refused_not_a_crash(upstream, raw, status, error):
    deep = b'{"choices": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    server = raw(plain(body=deep, status=status))
    with pytest.raises(error) as caught:  # never a RecursionError
        raw_chat(upstream, server)
    assert status[:3].decode() in caught.value.message


def test_upstream_messages_are_trimmed(upstream, sim):
    sim.script("m", fail="server_error", message="x" * 1000)
    with pytest.raises(UpstreamServerError) as caught:
        chat(upstream, sim)
    assert 290 < caught.value.message.count("x") < 300 and "500" in caught.value.message


def test_reset_mid_answer_is_unreachable(upstream, sim):
    sim.script("m", fail="reset")
    with pytest.raises(UpstreamUnreachable, match="closed the connection"):
        chat(upstream, sim)


@pytest.mark.slow
def test_connection_refused_is_unreachable(upstream):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    # a refusal is its own error, not a wait for the deadline (which would be UpstreamTimeout)
    with pytest.raises(UpstreamUnreachable, match="refused"):
        upstream.chat(f"http://127.0.0.1:{port}/v1", KEY, ask(), timeout=60)


def test_unresolvable_host_is_unreachable(upstream):
    with pytest.raises(UpstreamUnreachable, match="resolve"):
        upstream.chat("http://no-such-host.invalid/v1", KEY, ask(), timeout=5)


def test_hang_times_out_and_the_server_sees_the_disconnect(upstream, sim):
    sim.script("m", fail="hang")  # the server holds the request until the client goes
    started = time.monotonic()
    with pytest.raises(UpstreamTimeout, match="0.3 s"):
        chat(upstream, sim, timeout=0.3)
    assert time.monotonic() - started >= 0.3, "gave up before its deadline"  # order, not speed
    assert sim.wait_disconnects(1, timeout=10), "the hanging request's connection was not closed"


def test_a_dripping_server_cannot_outlast_the_deadline(upstream, sim):
    # every byte resets a socket timeout; the watchdog does not care. Left alone the answer
    # would arrive whole after some 20 s, so only the deadline can make this an error.
    sim.script("m", drip=0.05)
    with pytest.raises(UpstreamTimeout):
        chat(upstream, sim, timeout=0.3)
    assert sim.wait_disconnects(1, timeout=10), "the dripping connection was not closed"


class Background:
    """A call run on its own thread, so the test can act while it is in flight."""

    def __init__(self, fn, *args, **kw):
        self.done = threading.Event()
        self.error: BaseException | None = None
        self.result = None
        self.thread = threading.Thread(target=self._run, args=(fn, args, kw), daemon=True)
        self.thread.start()

    def _run(self, fn, args, kw):
        try:
            self.result = fn(*args, **kw)
        except BaseException as exc:  # noqa: BLE001  (the test inspects it)
            self.error = exc
        finally:
            self.done.set()

    def outcome(self, patience: float = 20):
        """The error the call ended with; ``patience`` only keeps a broken build from hanging the
        run, far short of the call's own deadline (60 s) that would end it otherwise."""
        assert self.done.wait(patience), "the call was still running: nothing cut it short"
        self.thread.join()
        return self.error


@pytest.mark.parametrize("flag", [threading.Event, CancelFlag])
def test_cancel_from_another_thread(upstream, sim, flag):
    sim.script("m", fail="hang")
    cancel = flag()  # a CancelFlag wakes the watchdog; a plain Event is polled
    call = Background(chat, upstream, sim, timeout=60, cancel=cancel)
    assert wait_until(lambda: sim.count("m") == 1), "the request never reached the server"
    assert not call.done.is_set()  # the server holds it
    cancel.set()
    assert isinstance(call.outcome(), Cancelled)
    assert sim.wait_disconnects(1, timeout=10), "the cancelled connection was not closed"
    sim.script("m")
    chat(upstream, sim)  # the cancelled connection was discarded, not pooled
    assert sim.connections == 2


@pytest.mark.slow
def test_cancel_aborts_a_stalled_connect(upstream):
    # a listener whose backlog is full drops new SYNs, so connect() blocks
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        filler = socket.create_connection(listener.getsockname())
        cancel = threading.Event()
        try:
            call = Background(
                upstream.chat,
                "http://127.0.0.1:%d/v1" % listener.getsockname()[1],
                KEY,
                ask(),
                timeout=60,
                cancel=cancel,
            )
            assert not call.done.wait(0.2), "the connect was expected to stall"
            cancel.set()
            assert isinstance(call.outcome(), Cancelled)
        finally:
            filler.close()


def test_already_cancelled_or_expired_calls_are_not_made(upstream, sim):
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(Cancelled):
        chat(upstream, sim, cancel=cancel)
    with pytest.raises(UpstreamTimeout):
        chat(upstream, sim, timeout=0)
    assert sim.count("m") == 0


@pytest.mark.slow
def test_idle_connection_closed_by_the_server_is_retried_once(upstream):
    with SimUpstream({"m": {}}, keepalive=0.1) as sim:
        chat(upstream, sim)
        # the server closes the idle connection; the pool still holds it
        assert wait_until(lambda: not sim._open), "the server kept its idle connection open"
        answer = chat(upstream, sim)
        assert answer.text and sim.count("m") == 2 and sim.connections == 2


def test_a_fresh_connection_is_never_retried(upstream, sim):
    sim.script("m", fail="reset")
    with pytest.raises(UpstreamUnreachable):
        chat(upstream, sim)
    assert sim.count("m") == 1


def test_bad_base_url(upstream):
    with pytest.raises(UpstreamUnreachable, match="http://"):
        upstream.chat("ftp://example.com/v1", KEY, ask(), timeout=5)


def test_close_ends_the_client(sim):
    client = Upstream(proxies={})
    chat(client, sim)
    client.close()
    with pytest.raises(Cancelled, match="closed"):
        chat(client, sim)
