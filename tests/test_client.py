"""Upstream.chat against the simulated provider, over real sockets on 127.0.0.1; the response
reader against raw bytes from a scripted socket server.

Tests assert outcomes and order, never speed: a call cut by its deadline or a cancel is shown by
its error class and by returning while the server would still be holding it."""

import json
import socket
import threading
import time
from email.utils import format_datetime
from datetime import datetime, timedelta, timezone

import pytest

from conftest import wait_until
from panelist import __version__
from panelist.metrics.upstream.client import Answer, Upstream, _refusal
from panelist.metrics.upstream.transport import CancelFlag
from panelist.metrics.errors import (AuthFailed, Cancelled, ContextTooLong, EmptyAnswer,
                                     ModelNotFound, PaymentRequired, RateLimited, UpstreamBadReply,
                                     UpstreamServerError, UpstreamTimeout, UpstreamUnreachable)
from panelist.metrics.upstream.sim import SimUpstream
from panelist.metrics.wire.errors import body_of

KEY = "sk-test-5f3a9c1e7b"


@pytest.fixture
def sim():
    with SimUpstream({"m": {}}) as server:
        yield server


@pytest.fixture
def upstream():
    client = Upstream(proxies={})   # direct, whatever proxy the shell running the tests names
    yield client
    client.close()


def ask(model="m", text="Compare these two designs briefly"):
    return {"model": model, "messages": [{"role": "user", "content": text}]}


def chat(upstream, sim, model="m", *, key=KEY, timeout=5.0, **kw):
    return upstream.chat(sim.url, key, ask(model), timeout=timeout, **kw)


def test_answer_with_tokens(upstream, sim):
    answer = chat(upstream, sim)
    assert isinstance(answer, Answer)
    assert answer.text.startswith("[simulated m] ") and "Compare these two designs" in answer.text
    prompt = -(-len("Compare these two designs briefly") // 4)
    completion = -(-len(answer.text) // 4)
    assert answer.tokens == {"prompt": prompt, "completion": completion,
                             "total": prompt + completion}
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
    sim.script("m", fail="rate_limit")       # an error answer leaves the connection usable
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
    assert sim.connections == 4   # one idle connection was kept, and reused
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


@pytest.mark.parametrize("message, window", [
    ("prompt is too long: 210000 tokens > 200000 maximum", 200000),
    ("The input exceeds the context window of 128,000 tokens", 128000),
    ("too many tokens in the request", None),
])
def test_context_length_in_other_words(upstream, sim, message, window):
    sim.script("m", fail="context_length", message=message)
    with pytest.raises(ContextTooLong) as caught:
        chat(upstream, sim)
    assert caught.value.window == window


def test_context_length_parsing_of_other_servers():
    vllm = (b'{"object": "error", "message": "This model\'s maximum context length is 4096 tokens.'
            b' However, you requested 5000 tokens.", "type": "BadRequestError", "code": 400}')
    llama = (b'{"error": {"code": 400, "message": "the request exceeds the available context '
             b'size, try increasing it", "type": "exceed_context_size_error", "n_ctx": 2048}}')
    for data, window in ((vllm, 4096), (llama, 2048)):
        error = _refusal(400, None, data, "upstream x:1")
        assert isinstance(error, ContextTooLong) and error.window == window
    assert isinstance(_refusal(413, None, b"request entity too large", "upstream x:1"),
                      UpstreamBadReply)


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


@pytest.mark.parametrize("fail, error, status", [
    ("auth", AuthFailed, 401), ("rate_limit", RateLimited, 429), ("quota", PaymentRequired, 429),
    ("server_error", UpstreamServerError, 500), ("context_length", ContextTooLong, 400),
    ("not_found", ModelNotFound, 404), ("error_body", UpstreamServerError, 200),
    ("empty", EmptyAnswer, 200), ("garbage", UpstreamBadReply, 200),
])
def test_an_error_read_from_a_reply_carries_the_upstreams_own_status(upstream, sim, fail, error,
                                                                     status):
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
    assert sim.requests[-1]["headers"]["Authorization"] == f"Bearer {KEY}"   # it was echoed
    assert KEY not in str(error) and KEY not in str(body_of(error))
    assert "[api key]" in error.message


def test_api_key_is_scrubbed_even_where_a_body_is_cut():
    pieces = {KEY[at:at + 4] for at in range(len(KEY) - 3)}   # every 4-character piece of it
    for spaces in range(1180, 1200):   # the key straddles the cut at some of these
        data = b"<html>" + b" " * spaces + KEY.encode() + b"</html>"
        message = _refusal(502, None, data, "upstream x:1", ((KEY, "[api key]"),)).message
        left = sorted(piece for piece in pieces if piece in message)
        assert not left, f"pieces of the key left where the body was cut: {left} in {message!r}"


def test_an_answer_that_echoes_the_api_key_is_scrubbed(upstream, sim):
    sim.script("m", echo_auth_answer=True)
    answer = chat(upstream, sim)
    assert sim.requests[-1]["headers"]["Authorization"] == f"Bearer {KEY}"   # it was echoed
    assert KEY not in answer.text
    assert answer.text.endswith("Called with Authorization: Bearer [api key].")


# -- what an upstream's words may hold -------------------------------------------------------------
def test_a_lone_surrogate_in_an_answer_becomes_a_replacement_character(upstream, sim):
    sim.script("m", answer="half a pair \ud800 then the rest")   # sent as the escape \ud800
    answer = chat(upstream, sim)
    assert answer.text == "half a pair \ufffd then the rest"
    assert answer.text.encode() == "half a pair \ufffd then the rest".encode()


@pytest.mark.parametrize("fail, error", [
    ("server_error", UpstreamServerError), ("error_body", UpstreamServerError),
    ("rate_limit", RateLimited), ("auth", AuthFailed), ("context_length", ContextTooLong),
])
def test_a_lone_surrogate_in_an_error_message_becomes_a_replacement_character(upstream, sim,
                                                                              fail, error):
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
        b'"model": "raw"', b'"model": "raw\\udbff"')
    utf16 = '{"choices": [{"message": {"content": "wide \\udc00 answer"}}]}'.encode("utf-16")
    server = raw(plain(body=cesu), plain(body=utf16))
    answer = raw_chat(upstream, server)
    assert (answer.text, answer.model) == ("raw \ufffd answer", "raw\ufffd")
    assert raw_chat(upstream, server).text == "wide \ufffd answer"


@pytest.mark.parametrize("status, error", [
    (b"200 OK", UpstreamBadReply), (b"400 Bad Request", UpstreamBadReply),
    (b"500 Internal Server Error", UpstreamServerError),
])
@pytest.mark.slow
def test_json_nested_too_deep_is_refused_not_a_crash(upstream, raw, status, error):
    deep = b'{"choices": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    server = raw(plain(body=deep, status=status))
    with pytest.raises(error) as caught:   # never a RecursionError
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
    sim.script("m", fail="hang")   # the server holds the request until the client goes
    started = time.monotonic()
    with pytest.raises(UpstreamTimeout, match="0.3 s"):
        chat(upstream, sim, timeout=0.3)
    assert time.monotonic() - started >= 0.3, "gave up before its deadline"   # order, not speed
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
    assert not call.done.is_set()   # the server holds it
    cancel.set()
    assert isinstance(call.outcome(), Cancelled)
    assert sim.wait_disconnects(1, timeout=10), "the cancelled connection was not closed"
    sim.script("m")
    chat(upstream, sim)   # the cancelled connection was discarded, not pooled
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
            call = Background(upstream.chat, "http://127.0.0.1:%d/v1" % listener.getsockname()[1],
                              KEY, ask(), timeout=60, cancel=cancel)
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


# -- replies as raw bytes: the response reader against what real servers send ---------------------
COMPLETION = (b'{"id": "c1", "model": "raw", "choices": [{"index": 0, "message": {"role": '
              b'"assistant", "content": "raw answer"}, "finish_reason": "stop"}], "usage": '
              b'{"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}}')


def plain(body=COMPLETION, extra=b"", status=b"200 OK"):
    return b"HTTP/1.1 %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%s\r\n%s" \
        % (status, len(body), extra, body)


def chunked(body=COMPLETION, pieces=(7, 1, 40), trailer=b"X-Checksum: abc\r\n"):
    """A chunked body cut into the given sizes (the rest last), with chunk extensions."""
    out, at = [], 0
    for n in (*pieces, len(body)):
        piece = body[at:at + n]
        at += len(piece)
        if piece:
            out.append(b"%x;name=value;flag\r\n%s\r\n" % (len(piece), piece))
    head = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n")
    return head + b"".join(out) + b"0 ; last\r\n" + trailer + b"\r\n"


class RawServer:
    """Answers each request (read to the end of its Content-Length body) with the next scripted
    reply: bytes sent as they are, in ``piece``-byte writes when given; then the connection is
    closed if the reply says so (``close``) or kept for the next request."""

    def __init__(self, *replies):
        self.replies = list(replies)
        self.connections = 0
        self.requests = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = "http://127.0.0.1:%d/v1" % self.listener.getsockname()[1]
        self.conns = []
        self.threads = []
        self.lock = threading.Lock()
        self.closing = False
        self.acceptor = threading.Thread(target=self._accept, daemon=True)
        self.acceptor.start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            with self.lock:
                if self.closing:
                    conn.close()
                    return
                self.connections += 1
                self.conns.append(conn)
                thread = threading.Thread(target=self._serve, args=(conn,), daemon=True)
                self.threads.append(thread)
            thread.start()

    def _serve(self, conn):
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        data = b""
        try:
            while self.replies:
                while b"\r\n\r\n" not in data:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    data += chunk
                head, _, data = data.partition(b"\r\n\r\n")
                length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
                while len(data) < length:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    data += chunk
                self.requests.append(data[:length])
                data = data[length:]
                reply = self.replies.pop(0)
                if callable(reply):
                    reply(conn)
                    continue
                reply, close, piece = reply if isinstance(reply, tuple) else (reply, False, 0)
                for at in range(0, len(reply), piece or len(reply) or 1):
                    conn.sendall(reply[at:at + (piece or len(reply))])
                    if piece:
                        time.sleep(0.001)
                if close:
                    conn.close()
                    return
        except OSError:
            pass

    def close(self):
        """Stop accepting, end every connection, and wait for every thread. A bare close() would
        leave the thread blocked in accept() and the port listening (Linux wakes accept() only on
        shutdown), so a later test's fresh connection could land on this dead server."""
        with self.lock:
            self.closing = True
        for sock in (self.listener, *self.conns):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass   # already closed by a reply, or never connected
        self.acceptor.join(timeout=10)
        for thread in self.threads:
            thread.join(timeout=10)
        self.listener.close()
        for conn in self.conns:
            conn.close()
        alive = [t for t in (self.acceptor, *self.threads) if t.is_alive()]
        assert not alive, f"{len(alive)} server threads still running after close"


@pytest.fixture
def raw():
    servers = []

    def start(*replies):
        servers.append(RawServer(*replies))
        return servers[-1]
    yield start
    for server in servers:
        server.close()




def raw_chat(upstream, server, timeout=5.0):
    return upstream.chat(server.url, KEY, ask("raw"), timeout=timeout)


@pytest.mark.slow
def test_a_chunked_reply_with_extensions_and_a_trailer(upstream, raw):
    server = raw(chunked(), (chunked(pieces=(1, 2, 3)), False, 5), chunked(trailer=b""))
    for _ in range(3):
        answer = raw_chat(upstream, server)
        assert answer.text == "raw answer" and answer.tokens["total"] == 5
    assert server.connections == 1   # read to its last chunk and trailer: the connection is reused


@pytest.mark.slow
def test_interim_1xx_replies_are_skipped(upstream, raw):
    interim = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </style.css>\r\n\r\n"
    server = raw(interim + plain(), (interim + chunked(), False, 3))
    assert raw_chat(upstream, server).text == "raw answer"
    assert raw_chat(upstream, server).text == "raw answer"
    assert server.connections == 1


@pytest.mark.slow
def test_a_reply_without_length_is_read_until_close_and_not_reused(upstream, raw):
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n"
    server = raw((head + COMPLETION, True, 0), (head + COMPLETION, True, 11))
    assert raw_chat(upstream, server).text == "raw answer"
    assert raw_chat(upstream, server).text == "raw answer"
    assert server.connections == 2


@pytest.mark.parametrize("reply", [
    b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(COMPLETION), COMPLETION),
    plain(extra=b"Connection: keep-alive, Close\r\n"),
    plain() + b"\r\n",   # a byte past the answer's end
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n"
    b"%x\r\n%s\r\n0\r\n\r\n" % (len(COMPLETION), COMPLETION),
])
@pytest.mark.slow
def test_connections_that_cannot_be_trusted_are_not_reused(upstream, raw, reply):
    server = raw(reply, plain())
    assert raw_chat(upstream, server).text == "raw answer"
    assert raw_chat(upstream, server).text == "raw answer"
    assert server.connections == 2


@pytest.mark.slow
def test_lenient_where_servers_differ(upstream, raw):
    bare_lf = (b"HTTP/1.1 200\nCONTENT-length:   %d  \nX-Folded: a\n  b\nnot a field\n\n%s"
               % (len(COMPLETION), COMPLETION))
    twice = plain(extra=b"Content-Length: %d\r\n" % len(COMPLETION))
    server = raw(bare_lf, twice)
    assert raw_chat(upstream, server).text == "raw answer"
    assert raw_chat(upstream, server).text == "raw answer"


@pytest.mark.slow
def test_retry_after_is_read_from_a_raw_reply(upstream, raw):
    body = b'{"error": {"message": "slow down", "type": "requests"}}'
    server = raw(b"HTTP/1.1 429 Too Many Requests\r\nretry-after: 7\r\nContent-Length: %d\r\n\r\n%s"
                 % (len(body), body))
    with pytest.raises(RateLimited) as caught:
        raw_chat(upstream, server)
    assert caught.value.retry_after == 7


@pytest.mark.parametrize("reply, words", [
    (b"SSH-2.0-OpenSSH_9.6\r\n", "not HTTP/1.1"),
    (b"HTTP/2 200\r\n\r\n", "not HTTP/1.1"),
    (b"HTTP/1.1 2000 OK\r\n\r\n", "not HTTP/1.1"),
    (b"HTTP/1.1 200 OK\r\nX-Big: " + b"x" * 70_000 + b"\r\n\r\n", "64 KiB"),
    (b"HTTP/1.1 200 OK\r\n" + b"X-Many: 1\r\n" * 101 + b"\r\n", "more than 100 header lines"),
    (b"x" * 200_000, "64 KiB"),   # no line end at all: refused after 64 KiB, not buffered on
    (b"HTTP/1.1 200 OK\r\nContent-Length: 12, 13\r\n\r\n", "Content-Length"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", "Content-Length"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0x5\r\nhello\r\n0\r\n\r\n",
     "hexadecimal"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nhello\r\n0\r\n\r\n",
     "longer than its size"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n" + b"T: 1\r\n" * 101 + b"\r\n",
     "trailer"),
])
@pytest.mark.slow
def test_garbage_and_oversized_heads_are_bad_replies(upstream, raw, reply, words):
    server = raw((reply, True, 0))
    with pytest.raises(UpstreamBadReply, match=words) as caught:
        raw_chat(upstream, server, timeout=60)   # refused as read, not left to the deadline
    assert "x" * 20 not in caught.value.message   # what the server sent is not repeated


@pytest.mark.parametrize("reply", [
    plain(body=b"x" * 2000),
    chunked(body=b"x" * 2000, pieces=(999, 999)),
    (b"HTTP/1.1 200 OK\r\n\r\n" + b"x" * 2000, True, 0),
])
@pytest.mark.slow
def test_an_answer_over_the_cap_is_refused(upstream, raw, reply, monkeypatch):
    monkeypatch.setattr("panelist.metrics.upstream.http11.MAX_ANSWER_BYTES", 1000)
    with pytest.raises(UpstreamBadReply, match="sent an answer over"):
        raw_chat(upstream, raw(reply))


@pytest.mark.parametrize("reply", [
    plain()[:-10],
    chunked()[:-30],
    b"HTTP/1.1 200 OK\r\nContent-Ty",
])
@pytest.mark.slow
def test_a_reply_cut_short_is_unreachable(upstream, raw, reply):
    with pytest.raises(UpstreamUnreachable, match="closed the connection mid-answer"):
        raw_chat(upstream, raw((reply, True, 0)))


@pytest.mark.slow
def test_a_close_before_any_byte_on_a_fresh_connection_is_not_retried(upstream, raw):
    server = raw((b"", True, 0), plain())
    with pytest.raises(UpstreamUnreachable, match="before answering"):
        raw_chat(upstream, server)
    assert len(server.requests) == 1


@pytest.mark.slow
def test_a_body_up_to_the_close_still_ends_at_the_deadline(upstream, raw):
    release = threading.Event()

    def stall(conn):   # part of a body with no length, then nothing until the test lets go
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n" + COMPLETION[:20])
        release.wait(30)
    try:
        with pytest.raises(UpstreamTimeout):
            raw_chat(upstream, raw(stall), timeout=0.3)
        assert not release.is_set()   # it returned while the server still held the connection
    finally:
        release.set()
