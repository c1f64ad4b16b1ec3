"""kube.http's HTTP/1.1 pool against a scripted server on 127.0.0.1: the ways an answer can be
framed, connections reused or not, servers that close, time out or speak TLS."""
from __future__ import annotations

import asyncio
import datetime
import ipaddress
import ssl
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import aiohttp
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from kubernetes_asyncio import client as k8s

from kopfsched.framework.client import ClusterError, NotFoundError
from kopfsched.kube.client import KubeClusterClient
from kopfsched.kube.http import HttpPool
from tests.waiting import until

Answer = Callable[[bytes], bytes | None]
"""The request's bytes -> what to write back (None: close the connection without answering)."""


class ScriptedServer:
    def __init__(self) -> None:
        self.answers: list[Answer] = []
        self.requests: list[bytes] = []
        self.connections = 0
        self.url = ""

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                request = head + await reader.readexactly(length)
                self.requests.append(request)
                answer = self.answers.pop(0)(request) if self.answers else ok(b"{}")
                if answer is None:
                    break
                writer.write(answer)
                await writer.drain()
                if b"connection: close" in answer.lower():
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


def ok(body: bytes, *, extra: str = "") -> bytes:
    head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n{extra}\r\n"
    return head.encode() + body


@pytest.fixture
async def server() -> AsyncIterator[ScriptedServer]:
    scripted = ScriptedServer()
    listening = await asyncio.start_server(scripted.serve, "127.0.0.1", 0)
    scripted.url = f"http://127.0.0.1:{listening.sockets[0].getsockname()[1]}"
    async with listening:
        yield scripted


@pytest.fixture
async def pool(server: ScriptedServer) -> AsyncIterator[HttpPool]:
    opened = HttpPool(server.url + "/prefix/", limit=4)
    yield opened
    opened.close()


async def get(pool: HttpPool, target: str = "/x", timeout: float | None = 5.0) -> tuple[int, bytes]:
    response = await pool.request("GET", target, headers={"Accept": "application/json"}, body=None, timeout=timeout)
    return response.status, response.body


@pytest.mark.parametrize("answer", [
    pytest.param(ok(b'{"a":1}'), id="content-length"),
    pytest.param(b'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;ext=1\r\n{"a\r\n4\r\n":1}\r\n0\r\n\r\n',
                 id="chunked"),
    pytest.param(b'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n7\r\n{"a":1}\r\n0\r\nX-Trailer: t\r\n\r\n',
                 id="chunked-with-trailer"),
    pytest.param(b'HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n{"a":1}', id="until-close"),
    pytest.param(b'HTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\n' + ok(b'{"a":1}'), id="after-informational"),
])
async def test_every_framing_of_an_answer_is_read_whole(server: ScriptedServer, pool: HttpPool,
                                                        answer: bytes) -> None:
    server.answers = [lambda _: answer]
    assert await get(pool) == (200, b'{"a":1}')
    assert await get(pool) == (200, b"{}")  # and the pool goes on, on this connection or a new one


async def test_an_answer_split_across_reads_is_joined(server: ScriptedServer, pool: HttpPool) -> None:
    answer = b'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n7\r\n{"a":1}\r\n0\r\n\r\n'

    async def dribble(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        for i in range(len(answer)):
            writer.write(answer[i:i + 1])
            await writer.drain()
            await asyncio.sleep(0)
        writer.close()
    listening = await asyncio.start_server(dribble, "127.0.0.1", 0)
    async with listening:
        slow = HttpPool(f"http://127.0.0.1:{listening.sockets[0].getsockname()[1]}")
        assert await get(slow) == (200, b'{"a":1}')
        slow.close()


async def test_keep_alive_reuses_one_connection_and_sends_the_prefix(server: ScriptedServer, pool: HttpPool) -> None:
    for _ in range(3):
        await pool.request("POST", "/api/v1/x?a=b", headers={"Content-Type": "application/json"}, body=b'{"k":1}',
                           timeout=5.0)
    assert server.connections == 1
    assert server.requests[0].startswith(b"POST /prefix/api/v1/x?a=b HTTP/1.1\r\nHost: 127.0.0.1:")
    assert b"\r\nContent-Length: 7\r\n\r\n{\"k\":1}" in server.requests[0]


async def test_connection_close_is_not_reused(server: ScriptedServer, pool: HttpPool) -> None:
    server.answers = [lambda _: ok(b"1", extra="Connection: close\r\n")]
    assert await get(pool) == (200, b"1")
    assert await get(pool) == (200, b"{}")
    assert server.connections == 2


async def test_a_server_closing_mid_request_is_a_disconnection_the_client_retries(server: ScriptedServer) -> None:
    server.answers = [lambda _: None]
    pool = HttpPool(server.url)
    with pytest.raises(aiohttp.ServerDisconnectedError):
        await get(pool)
    assert await get(pool) == (200, b"{}")
    pool.close()


async def test_an_idle_connection_the_server_closed_is_not_used_again(server: ScriptedServer, pool: HttpPool) -> None:
    server.answers = [lambda _: ok(b"1")]
    await get(pool)
    idle = list(pool._idle)
    for connection in idle:
        connection.transport.close()  # as a server's idle timeout would
    await until(lambda: all(connection.closed for connection in idle), what='the pool seeing the close')
    assert await get(pool) == (200, b"{}")


async def test_a_slow_answer_times_out_and_its_connection_is_dropped(server: ScriptedServer, pool: HttpPool) -> None:
    server.answers = [lambda _: b""]  # no answer: the server waits for a next request
    with pytest.raises(TimeoutError):
        await get(pool, timeout=0.2)
    assert not pool._idle
    assert await get(pool) == (200, b"{}")


async def test_at_most_limit_requests_at_once_served_in_arrival_order(server: ScriptedServer) -> None:
    """Past `limit`, requests wait their turn in order; one cancelled while waiting passes it on."""
    pool = HttpPool(server.url, limit=2)
    server.answers = [lambda _: b"", lambda _: b""]  # the first two are held until given up
    held = [asyncio.ensure_future(get(pool, "/held", timeout=30.0)) for _ in range(2)]
    await until(lambda: len(server.requests) == 2, what='the two held requests sent')
    cancelled = asyncio.ensure_future(get(pool, "/cancelled"))
    waiting = [asyncio.ensure_future(get(pool, f"/w{i}")) for i in range(3)]
    await until(lambda: len(pool._slot_waiters) == 4, what='four requests waiting for a slot')
    assert len(server.requests) == 2 and not any(task.done() for task in waiting)
    cancelled.cancel()
    for task in held:  # given up by their callers: each frees its slot
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert [await task for task in waiting] == [(200, b"{}")] * 3
    assert [request.split(b" ")[1] for request in server.requests[2:]] == [b"/w0", b"/w1", b"/w2"]
    assert server.connections <= 4
    pool.close()


async def test_nothing_listening_is_a_connection_error() -> None:
    pool = HttpPool("http://127.0.0.1:9")
    with pytest.raises(aiohttp.ClientConnectionError, match=r"cannot connect to 127\.0\.0\.1:9"):
        await get(pool)


async def test_a_malformed_answer_is_a_payload_error(server: ScriptedServer, pool: HttpPool) -> None:
    server.answers = [lambda _: b"SMTP ready\r\n\r\n"]
    with pytest.raises(aiohttp.ClientPayloadError, match=r"not an HTTP/1\.x answer"):
        await get(pool)


async def test_headers_are_read_case_insensitively_when_asked_for(server: ScriptedServer, pool: HttpPool) -> None:
    server.answers = [lambda _: ok(b"{}", extra="Retry-After: 3\r\nX-Two: a\r\nx-two: b\r\n")]
    response = await pool.request("GET", "/x", headers={}, body=None, timeout=5.0)
    assert response.headers["retry-after"] == "3"
    assert response.headers.getall("X-Two") == ["a", "b"]
    assert response.headers["content-length"] == "2"


async def test_a_header_line_without_a_colon_is_a_payload_error(server: ScriptedServer, pool: HttpPool) -> None:
    server.answers = [lambda _: b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nno colon here\r\n\r\n"]
    with pytest.raises(aiohttp.ClientPayloadError, match="malformed header line 'no colon here'"):
        await get(pool)


async def test_each_request_times_out_on_its_own_deadline(server: ScriptedServer, pool: HttpPool) -> None:
    """One sweep timer for the pool: a long timeout armed first must not delay a shorter one,
    and a request answered in time is not failed by a sweep."""
    server.answers = [lambda _: b"", lambda _: b""]  # two requests left unanswered
    slow = asyncio.ensure_future(get(pool, timeout=30.0))
    await until(lambda: len(server.requests) == 1, what='the slow request sent')
    started = asyncio.get_running_loop().time()
    with pytest.raises(TimeoutError):
        await get(pool, timeout=0.2)
    assert asyncio.get_running_loop().time() - started < 2.0
    assert await get(pool, timeout=0.2) == (200, b"{}")
    assert not slow.done()
    slow.cancel()


def test_a_header_with_a_line_break_is_refused() -> None:
    pool = HttpPool("http://127.0.0.1:9")
    with pytest.raises(ValueError, match="line break"):
        pool._encode("GET", "/", {"authorization": "Bearer x\r\nX-Evil: 1"}, None)


def _self_signed(directory: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kopfsched-test")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=1))
            .not_valid_after(now + datetime.timedelta(hours=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
            .sign(key, hashes.SHA256()))
    cert_file, key_file = directory / "server.crt", directory / "server.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_file, key_file


@pytest.mark.parametrize("trusted", [True, False], ids=["ca-trusted", "unknown-ca"])
async def test_tls_with_the_configurations_ca(server: ScriptedServer, tmp_path: Path, trusted: bool) -> None:
    cert_file, key_file = _self_signed(tmp_path)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert_file, key_file)
    server.answers = [lambda _: b'HTTP/1.1 404 Not Found\r\nContent-Length: 20\r\n\r\n{"message":"no pod"}']
    listening = await asyncio.start_server(server.serve, "127.0.0.1", 0, ssl=context)
    async with listening:
        configuration = k8s.Configuration(host=f"https://127.0.0.1:{listening.sockets[0].getsockname()[1]}")
        configuration.ssl_ca_cert = str(cert_file) if trusted else None
        async with k8s.ApiClient(configuration) as api:
            client = KubeClusterClient(api, instance="test", retry_delays=())
            try:
                if trusted:
                    with pytest.raises(NotFoundError, match="404 Not Found: no pod"):
                        await client.request("GET", "/api/v1/namespaces/default/pods/p")
                else:
                    with pytest.raises(ClusterError, match="CERTIFICATE_VERIFY_FAILED"):
                        await client.request("GET", "/api/v1/namespaces/default/pods/p")
            finally:
                await client.close()


async def test_with_a_proxy_requests_go_through_the_api_clients_session(server: ScriptedServer) -> None:
    configuration = k8s.Configuration(host="http://kube.invalid:6443")
    configuration.proxy = server.url
    server.answers = [lambda _: ok(b'{"items":[]}')]
    async with k8s.ApiClient(configuration) as api:
        client = KubeClusterClient(api, instance="test")
        assert await client.request("GET", "/api/v1/nodes") == {"items": []}
        await client.close()
    assert server.requests[0].startswith(b"GET http://kube.invalid:6443/api/v1/nodes HTTP/1.1\r\n")


async def _handshake(context: ssl.SSLContext, cert_file: Path, key_file: Path) -> str:
    """'ok', or the client's TLS error, against a server presenting `cert_file`."""
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_context.load_cert_chain(cert_file, key_file)

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.close()

    listening = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=server_context)
    async with listening:
        port = listening.sockets[0].getsockname()[1]
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context, server_hostname="127.0.0.1")
        except ssl.SSLCertVerificationError as exc:
            return exc.verify_message
        writer.close()
        return "ok"


@pytest.mark.parametrize("how", ["file", "data"])
async def test_one_tls_reading_for_the_api_server_and_extenders(tmp_path: Path, how: str) -> None:
    """kopfsched.tls.client_context (both the API client and HTTP extenders use it, as client-go's
    TLSConfigFor): a given CA, as a file or as PEM data, is trusted; an insecure context checks
    nothing; a client certificate loads from inline PEM data too."""
    from kopfsched.tls import client_context

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    cert, key = _self_signed(tmp_path / "a")
    other, _ = _self_signed(tmp_path / "b")

    def given(ca: Path, **kwargs) -> ssl.SSLContext:
        return client_context(**({"ca_file": str(ca)} if how == "file" else {"ca_data": ca.read_bytes()}), **kwargs)

    assert await _handshake(given(cert), cert, key) == "ok"
    assert await _handshake(given(other), cert, key) == "self-signed certificate"
    assert await _handshake(given(other, verify=False), cert, key) == "ok"
    with_client_cert = given(cert, cert_data=cert.read_bytes(), key_data=key.read_bytes())
    assert with_client_cert.verify_mode is ssl.CERT_REQUIRED
