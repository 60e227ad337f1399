"""Upstreams behind an HTTP proxy: a small proxy written here (absolute-form forwarding and CONNECT
tunnels, on 127.0.0.1, recording what it saw) between the client and the simulated upstream, and
for https a TLS upstream with a certificate made by ``openssl`` for the test."""

import base64
import json
import shutil
import socket
import ssl
import subprocess
import threading
from urllib.parse import urlsplit

import pytest

from conftest import read_jsonl, wait_until
from panelist.metrics.upstream.client import Upstream
from panelist.metrics.upstream.transport import _tunnel
from panelist.metrics.errors import (
    AuthFailed,
    Cancelled,
    UpstreamServerError,
    UpstreamTimeout,
    UpstreamUnreachable,
)
from panelist.metrics.upstream.proxy import bypassed, environment_proxies

KEY = "sk-proxy-test-4e8d2a"
USER, PASSWORD = "bench", "p@ss-w0rd-secret"
CREDENTIALS = "bench:p%40ss-w0rd-secret"  # as written in a proxy URL
TOKEN = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
PROXY_VARS = (
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "no_proxy",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
    "REQUEST_METHOD",
)


class Proxy:
    """An HTTP proxy on 127.0.0.1:0. Forwards absolute-form requests in origin form (one upstream
    connection per client connection, Proxy-Authorization dropped) and tunnels CONNECT. Records
    each request head in ``seen`` and counts client connections.

    ``refuse``: answer every request with this status instead (``echo``: with the request head as
    the body, as a careless proxy's error page might). ``stall``: hold every CONNECT unanswered
    until ``release`` is set. ``hosts``: names resolved here rather than by DNS."""

    def __init__(self, *, refuse=None, echo=False, stall=False, hosts=None):
        self.refuse, self.echo, self.stall = refuse, echo, stall
        self.hosts = hosts or {}
        self.seen: list[dict] = []
        self.connections = 0
        self.release = threading.Event()
        self.lock = threading.Lock()
        self.socks: list[socket.socket] = []
        self.threads: list[threading.Thread] = []
        self.closing = False
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self._spawn(self._accept)

    def url(self, credentials=None):
        return f"http://{credentials + '@' if credentials else ''}127.0.0.1:{self.port}"

    def _spawn(self, fn, *args):
        thread = threading.Thread(target=fn, args=args, daemon=True)
        with self.lock:
            self.threads.append(thread)
        thread.start()

    def _keep(self, sock):
        with self.lock:
            if self.closing:
                sock.close()
                raise OSError("closing")
            self.socks.append(sock)

    def _accept(self):
        while True:
            try:
                conn, _ = self.listener.accept()
                self._keep(conn)
            except OSError:
                return
            with self.lock:
                self.connections += 1
            self._spawn(self._serve, conn)

    def _serve(self, conn):
        reader = conn.makefile("rb")
        upstreams: dict[tuple, tuple] = {}
        try:
            while True:
                line = reader.readline(65536)
                if not line:
                    return
                method, target, _ = line.decode("latin-1").split(" ", 2)
                lines, headers = [], {}
                while (field := reader.readline(65536)) not in (b"\r\n", b"\n", b""):
                    lines.append(field)
                    name, _, value = field.decode("latin-1").partition(":")
                    headers[name.strip().lower()] = value.strip()
                with self.lock:
                    self.seen.append({"method": method, "target": target, "headers": headers})
                if self.refuse:
                    body = line + b"".join(lines) if self.echo else b"refused by the test proxy"
                    extra = (
                        b'Proxy-Authenticate: Basic realm="test"\r\n' if self.refuse == 407 else b""
                    )
                    conn.sendall(
                        b"HTTP/1.1 %d Refused\r\n%sContent-Length: %d\r\n\r\n%s"
                        % (self.refuse, extra, len(body), body)
                    )
                    if method == "CONNECT":
                        return
                    reader.read(int(headers.get("content-length", 0)))
                    continue
                if method == "CONNECT":
                    return self._tunnel(conn, reader, target)
                self._forward(conn, reader, method, target, lines, headers, upstreams)
        except OSError:
            return
        finally:
            for sock, _ in upstreams.values():
                sock.close()

    def _tunnel(self, conn, reader, target):
        if self.stall:
            self.release.wait(30)
            return
        host, _, port = target.rpartition(":")
        upstream = socket.create_connection((self.hosts.get(host, host), int(port)))
        self._keep(upstream)
        conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        self._spawn(_pump, upstream, conn)
        _pump(reader, upstream)

    def _forward(self, conn, reader, method, target, lines, headers, upstreams):
        url = urlsplit(target)
        where = (self.hosts.get(url.hostname, url.hostname), url.port or 80)
        body = reader.read(int(headers.get("content-length", 0)))
        if where not in upstreams:
            sock = socket.create_connection(where)
            self._keep(sock)
            upstreams[where] = (sock, sock.makefile("rb"))
        sock, answers = upstreams[where]
        kept = b"".join(f for f in lines if not f.lower().startswith(b"proxy-authorization:"))
        sock.sendall(
            b"%s %s HTTP/1.1\r\n%s\r\n%s"
            % (
                method.encode(),
                (url.path + ("?" + url.query if url.query else "")).encode(),
                kept,
                body,
            )
        )
        head = [answers.readline()]
        while head[-1] not in (b"\r\n", b""):
            head.append(answers.readline())
        length = next(
            (int(h.split(b":")[1]) for h in head if h.lower().startswith(b"content-length:")), 0
        )
        conn.sendall(b"".join(head) + answers.read(length))

    def close(self):
        with self.lock:
            self.closing = True
            socks = [self.listener, *self.socks]
        self.release.set()
        for sock in socks:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        for _ in range(3):  # a thread may start another (a tunnel's pump) while ending
            with self.lock:
                threads = list(self.threads)
            for thread in threads:
                thread.join(timeout=10)
        for sock in socks:
            sock.close()
        alive = [t for t in self.threads if t.is_alive()]
        assert not alive, f"{len(alive)} proxy threads still running after close"


def _pump(source, sink):
    """Copy bytes until ``source`` ends (a socket or a buffered reader), then end ``sink``'s side."""
    read = source.read1 if hasattr(source, "read1") else source.recv
    try:
        while chunk := read(65536):
            sink.sendall(chunk)
    except OSError:
        pass
    try:
        sink.shutdown(socket.SHUT_WR)
    except OSError:
        pass


@pytest.fixture
def proxies():
    made = []

    def make(**kw):
        made.append(Proxy(**kw))
        return made[-1]

    yield make
    for proxy in made:
        proxy.close()


@pytest.fixture
def clients():
    made = []

    def make(**kw):
        made.append(Upstream(**kw))
        return made[-1]

    yield make
    for client in made:
        client.close()


@pytest.fixture
def clean_env(monkeypatch):
    for name in PROXY_VARS:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def ask(model="fast"):
    return {"model": model, "messages": [{"role": "user", "content": "Compare two designs"}]}


def secrets_in(text):
    return [s for s in (PASSWORD, CREDENTIALS, TOKEN, "p%40ss") if s in text]


# -- http upstreams: absolute-form requests to the proxy -------------------------------------------
def test_an_http_upstream_is_asked_through_the_proxy_with_its_credentials(sim, proxies, clients):
    proxy = proxies()
    client = clients(proxies={"http": proxy.url(CREDENTIALS)})
    for _ in range(3):
        assert client.chat(sim.url, KEY, ask(), timeout=10).text.startswith("[simulated fast]")
    port = sim.port
    assert [s["method"] for s in proxy.seen] == ["POST"] * 3
    assert {s["target"] for s in proxy.seen} == {f"http://127.0.0.1:{port}/v1/chat/completions"}
    first = proxy.seen[0]["headers"]
    assert first["host"] == f"127.0.0.1:{port}"
    assert first["proxy-authorization"] == f"Basic {TOKEN}"
    assert first["authorization"] == f"Bearer {KEY}"
    assert proxy.connections == 1, "the connection to the proxy is kept alive and reused"
    assert sim.count("fast") == 3 and all(r["body"]["model"] == "fast" for r in sim.requests), (
        "the upstream got each request in origin form"
    )


def test_the_environment_is_read_when_the_client_is_built_and_only_then(
    sim, proxies, clients, clean_env
):
    proxy = proxies()
    clean_env.setenv("HTTP_PROXY", proxy.url())
    built = clients()
    clean_env.delenv("HTTP_PROXY")
    built.chat(sim.url, KEY, ask(), timeout=10)
    assert len(proxy.seen) == 1, "a client uses the proxy its environment named when built"
    clients().chat(sim.url, KEY, ask(), timeout=10)
    assert len(proxy.seen) == 1, "a client built without HTTP_PROXY connects directly"
    assert sim.count("fast") == 2


def test_lower_case_variables_win_and_an_empty_one_switches_the_proxy_off(
    sim, proxies, clients, clean_env
):
    proxy, dead = proxies(), proxies(refuse=502)
    clean_env.setenv("HTTP_PROXY", dead.url())
    clean_env.setenv("http_proxy", proxy.url())
    clients().chat(sim.url, KEY, ask(), timeout=10)
    assert len(proxy.seen) == 1 and not dead.seen
    clean_env.setenv("http_proxy", "")
    clients().chat(sim.url, KEY, ask(), timeout=10)
    assert len(proxy.seen) == 1 and not dead.seen, "an empty http_proxy means no proxy"


def test_all_proxy_stands_in_for_an_unset_scheme(sim, proxies, clients):
    proxy = proxies()
    clients(proxies={"all": proxy.url()}).chat(sim.url, KEY, ask(), timeout=10)
    assert len(proxy.seen) == 1


@pytest.mark.parametrize(
    "no_proxy, direct",
    [
        ("", False),
        ("127.0.0.1", True),
        ("{port}", None),  # replaced below: this host with its own port, and another port
        ("*", True),
        ("127.0.0.0/8", True),
        ("example.com 127.0.0.1", True),  # spaces separate entries too
        ("localhost", False),  # loopback follows NO_PROXY: 127.0.0.1 is not named here
        (".0.0.1", False),  # a name's suffix never matches an address
    ],
)
def test_no_proxy_sends_listed_hosts_direct(sim, proxies, clients, no_proxy, direct):
    proxy = proxies()
    cases = (
        [(f"127.0.0.1:{sim.port}", True), (f"127.0.0.1:{sim.port ^ 1}", False)]
        if no_proxy == "{port}"
        else [(no_proxy, direct)]
    )
    for value, goes_direct in cases:
        before = len(proxy.seen)
        clients(proxies={"http": proxy.url(), "no": value}).chat(sim.url, KEY, ask(), timeout=10)
        assert (len(proxy.seen) == before) == goes_direct, (
            f"NO_PROXY={value!r}: expected {'direct' if goes_direct else 'through the proxy'}"
        )


@pytest.mark.parametrize(
    "host, port, no_proxy, listed",
    [
        ("api.corp.example", 443, "corp.example", True),
        ("api.corp.example", 443, ".corp.example", True),
        ("corp.example", 443, ".corp.example", True),
        ("notcorp.example", 443, "corp.example", False),
        ("api.corp.example", 443, "corp.example:8443", False),
        ("api.corp.example", 8443, "corp.example:8443", True),
        ("API.Corp.Example", 443, "api.corp.example", True),
        ("::1", 80, "::1", True),
        ("::1", 8080, "[::1]:8080", True),
        ("::1", 80, "[::1]:8080", False),
        ("fd00::5", 80, "fd00::/8", True),
        ("10.1.2.3", 80, "10.0.0.0/8, other", True),
        ("11.1.2.3", 80, "10.0.0.0/8", False),
        ("localhost", 80, "", False),
        ("anything.at.all", 80, "*", True),
    ],
)
def test_no_proxy_entries(host, port, no_proxy, listed):
    assert bypassed(host, port, no_proxy) is listed


def test_proxied_and_direct_connections_are_pooled_apart(sim, proxies, clients):
    proxy = proxies()
    client = clients(proxies={"http": proxy.url(), "no": "127.0.0.1"})
    direct, proxied = sim.url, sim.url.replace("127.0.0.1", "localhost")
    for _ in range(3):
        client.chat(direct, KEY, ask(), timeout=10)
        client.chat(proxied, KEY, ask(), timeout=10)
    assert len(proxy.seen) == 3 and proxy.connections == 1
    assert sim.count("fast") == 6
    assert sim.connections == 2, "one pooled connection each way, never one for both"


def test_the_environment_reader_follows_the_usual_rules():
    env = {
        "HTTP_PROXY": "http://upper:1",
        "http_proxy": "http://lower:1",
        "HTTPS_PROXY": "http://secure:1",
        "https_proxy": "",
        "NO_PROXY": "a,b",
        "ALL_PROXY": "http://all:1",
        "FTP_PROXY": "http://ftp:1",
        "PATH": "/bin",
    }
    assert environment_proxies(env) == {
        "http": "http://lower:1",
        "no": "a,b",
        "all": "http://all:1",
    }
    # under CGI a request's "Proxy:" header arrives as HTTP_PROXY (httpoxy): never trusted
    assert environment_proxies({"HTTP_PROXY": "http://evil:1", "REQUEST_METHOD": "GET"}) == {}


# -- what goes wrong, said without the credentials ----------------------------------------------------
def test_a_proxy_asking_for_credentials_is_an_auth_failure_naming_it(sim, proxies, clients):
    proxy = proxies(refuse=407)
    for url, said in (
        (proxy.url(CREDENTIALS), "refused the credentials in HTTP_PROXY"),
        (proxy.url(), "asks for credentials"),
    ):
        with pytest.raises(AuthFailed) as caught:
            clients(proxies={"http": url}).chat(sim.url, KEY, ask(), timeout=10)
        message = caught.value.message
        assert f"proxy 127.0.0.1:{proxy.port}" in message and said in message, message
        assert not secrets_in(message), message
    assert sim.count("fast") == 0


def test_a_proxy_echoing_our_request_in_an_error_has_the_credentials_scrubbed(
    sim, proxies, clients
):
    proxy = proxies(refuse=502, echo=True)
    with pytest.raises(UpstreamServerError) as caught:
        clients(proxies={"http": proxy.url(CREDENTIALS)}).chat(sim.url, KEY, ask(), timeout=10)
    message = caught.value.message
    assert "Proxy-Authorization: Basic [proxy credentials]" in message, message
    assert not secrets_in(message) and KEY not in message, message


def test_a_proxy_that_is_down_is_named_in_the_error(sim, clients):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(UpstreamUnreachable) as caught:
        clients(proxies={"http": f"http://{CREDENTIALS}@127.0.0.1:{port}"}).chat(
            sim.url, KEY, ask(), timeout=60
        )
    message = caught.value.message
    assert f"cannot connect to proxy 127.0.0.1:{port}" in message and "HTTP_PROXY" in message
    assert not secrets_in(message), message


@pytest.mark.parametrize(
    "url, said",
    [
        ("socks5://bench:p%40ss-w0rd-secret@127.0.0.1:1080", "socks5:// proxy"),
        ("http://bench:p%40ss-w0rd-secret@127.0.0.1:port", "cannot be parsed"),
        ("http://bench:p%40ss-w0rd-secret@:3128", "names no host"),
    ],
)
def test_a_proxy_url_we_cannot_use_refuses_the_call_without_echoing_it(sim, clients, url, said):
    with pytest.raises(UpstreamUnreachable) as caught:
        clients(proxies={"https": url}).chat("https://api.example.com/v1", KEY, ask(), timeout=10)
    message = caught.value.message
    assert said in message and "HTTPS_PROXY" in message, message
    assert not secrets_in(message), message


# -- https upstreams: CONNECT, then TLS inside the tunnel ------------------------------------------
@pytest.mark.slow
def test_a_refused_connect_names_the_proxy_and_the_upstream(proxies, clients):
    proxy = proxies(refuse=403)
    client = clients(proxies={"https": proxy.url(CREDENTIALS)})
    with pytest.raises(UpstreamUnreachable) as caught:
        client.chat("https://origin.example:8443/v1", KEY, ask(), timeout=10)
    message = caught.value.message
    assert (
        f"proxy 127.0.0.1:{proxy.port} would not open a tunnel to origin.example:8443 (403)"
        in message
    ), message
    assert "NO_PROXY" in message and not secrets_in(message), message
    (connect,) = proxy.seen
    assert (connect["method"], connect["target"]) == ("CONNECT", "origin.example:8443")
    assert connect["headers"]["host"] == "origin.example:8443"
    assert connect["headers"]["proxy-authorization"] == f"Basic {TOKEN}"
    assert "authorization" not in connect["headers"], "the API key is only sent inside the tunnel"


@pytest.mark.slow
def test_a_connect_refused_for_credentials_is_an_auth_failure(proxies, clients):
    proxy = proxies(refuse=407)
    with pytest.raises(AuthFailed, match=f"proxy 127.0.0.1:{proxy.port} refused the credentials"):
        clients(proxies={"https": proxy.url(CREDENTIALS)}).chat(
            "https://origin.example/v1", KEY, ask(), timeout=10
        )
    assert proxy.seen[0]["target"] == "origin.example:443"


@pytest.mark.slow
@pytest.mark.parametrize("ending", ["deadline", "cancel"])
def test_a_stalled_connect_ends_at_the_deadline_or_the_cancel(proxies, clients, ending):
    proxy = proxies(stall=True)
    client = clients(proxies={"https": proxy.url()})
    cancel = threading.Event()

    def cancel_once_held():  # the proxy has the CONNECT and holds it
        assert wait_until(lambda: proxy.seen), "the CONNECT never reached the proxy"
        cancel.set()

    canceller = threading.Thread(target=cancel_once_held, daemon=True)
    if ending == "cancel":
        canceller.start()
    expected = UpstreamTimeout if ending == "deadline" else Cancelled
    try:
        with pytest.raises(expected) as caught:
            client.chat(
                "https://origin.example/v1",
                KEY,
                ask(),
                timeout=0.3 if ending == "deadline" else 60,
                cancel=cancel,
            )
        assert not proxy.release.is_set(), "the call returned while the proxy still held it"
        assert f"via proxy 127.0.0.1:{proxy.port}" in caught.value.message
        assert proxy.seen[0]["method"] == "CONNECT"
    finally:
        if ending == "cancel":
            canceller.join(timeout=20)


@pytest.mark.slow
def test_the_tunnel_carries_bytes_both_ways(proxies):
    with socket.create_server(("127.0.0.1", 0)) as listener:

        def echo():
            conn, _ = listener.accept()
            with conn:
                while data := conn.recv(65536):
                    conn.sendall(data)

        thread = threading.Thread(target=echo, daemon=True)
        thread.start()
        proxy = proxies(hosts={"echo.example": "127.0.0.1"})
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as sock:
            auth = b"Proxy-Authorization: Basic %s\r\n" % TOKEN.encode()
            _tunnel(sock, b"echo.example:%d" % listener.getsockname()[1], auth)
            sock.sendall(b"ping through the tunnel")
            assert sock.recv(65536) == b"ping through the tunnel"
            sock.shutdown(socket.SHUT_WR)
            assert sock.recv(65536) == b""
        thread.join(timeout=10)
    assert proxy.seen[0]["headers"]["proxy-authorization"] == f"Basic {TOKEN}"


class TLSOrigin:
    """An https upstream on 127.0.0.1 that answers chat completions itself (keep-alive), with a
    certificate for ``origin.example`` and 127.0.0.1; records the SNI name of each handshake."""

    def __init__(self, cert, key):
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(cert, key)
        self.names: list = []
        self.context.sni_callback = lambda sock, name, ctx: self.names.append(name)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.conns: list[socket.socket] = []
        self.threads: list[threading.Thread] = []
        self.acceptor = threading.Thread(target=self._accept, daemon=True)
        self.acceptor.start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.conns.append(conn)
            thread = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self.threads.append(thread)
            thread.start()

    def _serve(self, conn):
        try:
            tls = self.context.wrap_socket(conn, server_side=True)
            reader = tls.makefile("rb")
            while line := reader.readline():
                length = 0
                while (field := reader.readline()) not in (b"\r\n", b""):
                    if field.lower().startswith(b"content-length:"):
                        length = int(field.split(b":")[1])
                request = json.loads(reader.read(length))
                text = f"over TLS, asked {line.split()[1].decode()} for {request['model']}"
                body = json.dumps(
                    {
                        "model": request["model"],
                        "choices": [{"message": {"role": "assistant", "content": text}}],
                    }
                ).encode()
                tls.sendall(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                    b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
                )
        except (OSError, ValueError):
            return

    def close(self):
        for sock in (self.listener, *self.conns):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self.acceptor.join(timeout=10)
        for thread in self.threads:
            thread.join(timeout=10)
        self.listener.close()
        for conn in self.conns:
            conn.close()


@pytest.fixture
def origin(tmp_path):
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed: no certificate for a TLS upstream")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=origin.example",
            "-addext",
            "subjectAltName=DNS:origin.example,IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    server = TLSOrigin(cert, key)
    server.cert = cert
    yield server
    server.close()


@pytest.mark.slow
def test_an_https_upstream_through_a_tunnel_gets_tls_with_its_own_name(origin, proxies, clients):
    proxy = proxies(hosts={"origin.example": "127.0.0.1"})
    trust = ssl.create_default_context(cafile=str(origin.cert))
    client = clients(proxies={"https": proxy.url(CREDENTIALS)}, tls=trust)
    url = f"https://origin.example:{origin.port}/v1"
    for _ in range(2):
        answer = client.chat(url, KEY, ask("tls-model"), timeout=10)
        assert answer.text == "over TLS, asked /v1/chat/completions for tls-model"
    (connect,) = proxy.seen  # one tunnel, kept alive and reused for the second call
    assert connect["target"] == f"origin.example:{origin.port}"
    assert connect["headers"]["proxy-authorization"] == f"Basic {TOKEN}"
    assert origin.names == ["origin.example"], "TLS named the upstream, not the proxy"


@pytest.mark.slow
def test_an_https_upstream_whose_certificate_is_not_trusted_fails_tls(origin, proxies, clients):
    proxy = proxies(hosts={"origin.example": "127.0.0.1"})
    client = clients(proxies={"https": proxy.url()}, tls=ssl.create_default_context())
    with pytest.raises(UpstreamUnreachable, match="TLS with upstream origin.example"):
        client.chat(f"https://origin.example:{origin.port}/v1", KEY, ask(), timeout=10)


@pytest.mark.slow
def test_no_proxy_reaches_an_https_upstream_directly(origin, proxies, clients):
    proxy = proxies()
    trust = ssl.create_default_context(cafile=str(origin.cert))
    client = clients(proxies={"https": proxy.url(), "no": "127.0.0.1"}, tls=trust)
    answer = client.chat(f"https://127.0.0.1:{origin.port}/v1", KEY, ask(), timeout=10)
    assert answer.text.startswith("over TLS") and not proxy.seen
    assert origin.names == [None], "no SNI is sent for an IP address"


# -- end to end: a gateway whose upstream is behind a proxy ----------------------------------------
def test_a_gateway_behind_a_proxy_answers_and_logs_no_credentials(home, sim, proxies, clean_env):
    from conftest import Gateway
    from panelist.gateway import make_gateway

    proxy = proxies()
    # the server's environment names the proxy; this test's own requests go to it directly
    server = make_gateway(home, env={"HTTP_PROXY": proxy.url(CREDENTIALS)})
    gateway = Gateway(server)
    try:
        status, body, _ = gateway.post(
            "/v1/chat/completions",
            {"model": "bench/trio", "messages": [{"role": "user", "content": "hi"}]},
        )
        assert status == 200 and all(s["status"] == "ok" for s in body["bench"]["seats"]), body
        assert len(proxy.seen) == 5, "every seat went through the proxy"
        proxy.refuse = 407
        status, body, _ = gateway.post(
            "/v1/chat/completions",
            {"model": "bench/trio", "messages": [{"role": "user", "content": "hi again"}]},
        )
    finally:
        server.close()
    assert status == 502  # no seat answered: every seat's error is in the error body
    errors = [s["error"] for s in body["error"]["seats"]]
    assert all(
        e.startswith("auth") and "refused the credentials in HTTP_PROXY" in e for e in errors
    ), errors
    assert len(read_jsonl(home.gateway_runs / "calls.jsonl")) == 2
    for f in home.root.rglob("*"):
        if f.is_file():
            text = f.read_bytes().decode("utf-8", "replace")  # panels.idx is binary
            assert not secrets_in(text), f"proxy credentials in {f}"
