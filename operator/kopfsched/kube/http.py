"""A lean HTTP/1.1 client for the scheduler's own requests to the API server.

Keep-alive connections to one server, one request at a time on each, at most `limit` at
once (the ApiClient's connection_pool_maxsize). aiohttp's ClientSession spent about 300 µs of
the scheduling loop's CPU per request (request and response objects, tracing hooks, the cookie
jar, timers, URL objects); with two requests per bound pod (the bind and its Event) that was
about a quarter of the loop's work. This client writes the request in one go and parses
the answer in one Protocol: about 100 µs per request, measured the same way.

What it speaks: HTTP/1.1 with Content-Length or chunked answers (or an answer that ends with
the connection), plain or TLS. No proxies, no redirects, no compression (none is asked for):
the ApiClient's aiohttp session keeps serving a configuration with a proxy. Failures are
aiohttp's exception types (ClientConnectionError, ServerDisconnectedError) and TimeoutError,
so callers retry them as they retry aiohttp's.
"""

from __future__ import annotations

import asyncio
import ssl
import urllib.parse
from collections.abc import Mapping

import aiohttp
from multidict import CIMultiDict

MAX_HEAD = 1 << 16
"""Longest status line and headers accepted (bytes)."""


class Response:
    __slots__ = ("body", "headers", "reason", "status")

    def __init__(self, status: int, reason: str, headers: CIMultiDict[str], body: bytes) -> None:
        self.status, self.reason, self.headers, self.body = status, reason, headers, body


class _Connection(asyncio.Protocol):
    """One keep-alive connection: bytes in, one Response out per request."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.reusable = True
        self._buffer = bytearray()
        self._waiter: asyncio.Future[Response] | None = None
        self._head: tuple[int, str, CIMultiDict[str]] | None = None
        self._length: int | None = None
        """Body bytes expected; None: chunked, or (`_to_close`) until the connection ends."""
        self._to_close = False
        self._chunks = bytearray()

    # -- asyncio.Protocol ------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        if self._waiter is None:  # bytes nobody asked for (e.g. while idle): the stream is off
            self._fail(aiohttp.ClientPayloadError("unexpected data from the server"))
            return
        try:
            response = self._parse()
        except ValueError as exc:
            self._fail(aiohttp.ClientPayloadError(f"malformed answer from the server: {exc}"))
            return
        if response is not None:
            self._finish(response)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.reusable = False
        if self._waiter is not None and not self._waiter.done():
            if self._head is not None and self._to_close:
                status, reason, headers = self._head
                self._finish(Response(status, reason, headers, bytes(self._buffer)))
            else:
                self._waiter.set_exception(aiohttp.ServerDisconnectedError())
        self._waiter = None

    # -- one request -----------------------------------------------------------------------

    async def send(self, request: bytes) -> Response:
        assert self.transport is not None and self._waiter is None
        self._waiter = asyncio.get_running_loop().create_future()
        self._head, self._length, self._to_close = None, None, False
        self._chunks.clear()
        self.transport.write(request)
        return await self._waiter

    def close(self) -> None:
        self.reusable = False
        if self.transport is not None and not self.closed:
            self.transport.close()

    def _finish(self, response: Response) -> None:
        waiter, self._waiter = self._waiter, None
        if self._buffer:  # more than the answer: not a stream to trust with the next request
            self.reusable = False
        if waiter is not None and not waiter.done():
            waiter.set_result(response)
        if not self.reusable:
            self.close()

    def _fail(self, exc: Exception) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)
        self.close()

    # -- parsing -------------------------------------------------------------------------

    def _parse(self) -> Response | None:
        """The Response once the buffer holds all of it; None while it does not yet."""
        buffer = self._buffer
        while self._head is None:
            end = buffer.find(b"\r\n\r\n")
            if end < 0:
                if len(buffer) > MAX_HEAD:
                    raise ValueError("headers too long")
                return None
            head = _parse_head(bytes(buffer[:end]))
            del buffer[:end + 4]
            status, _, headers = head
            if 100 <= status < 200:
                continue  # informational (e.g. 103 Early Hints): the answer follows
            self._head = head
            if headers.get("Connection", "").lower() == "close":
                self.reusable = False
            if status in (204, 304):
                self._length = 0
            elif "chunked" in headers.get("Transfer-Encoding", "").lower():
                self._length = None
            elif "Content-Length" in headers:
                self._length = int(headers["Content-Length"])
                if self._length < 0:
                    raise ValueError("negative Content-Length")
            else:
                self._length, self._to_close, self.reusable = None, True, False
        status, reason, headers = self._head
        if self._to_close:
            return None  # the body ends with the connection
        if self._length is not None:
            if len(buffer) < self._length:
                return None
            body = bytes(buffer[:self._length])
            del buffer[:self._length]
            return Response(status, reason, headers, body)
        return self._parse_chunks(status, reason, headers)

    def _parse_chunks(self, status: int, reason: str, headers: CIMultiDict[str]) -> Response | None:
        buffer = self._buffer
        while True:
            line_end = buffer.find(b"\r\n")
            if line_end < 0:
                return None
            size = int(bytes(buffer[:line_end]).split(b";", 1)[0].strip() or b"x", 16)
            if size == 0:
                trailers_end = buffer.find(b"\r\n\r\n", line_end)  # after trailers, if any
                if trailers_end < 0:
                    return None
                del buffer[:trailers_end + 4]
                return Response(status, reason, headers, bytes(self._chunks))
            if len(buffer) < line_end + 2 + size + 2:
                return None
            start = line_end + 2
            self._chunks += buffer[start:start + size]
            del buffer[:start + size + 2]


def _parse_head(head: bytes) -> tuple[int, str, CIMultiDict[str]]:
    status_line, *lines = head.decode("latin-1").split("\r\n")
    version, _, rest = status_line.partition(" ")
    if not version.startswith("HTTP/1."):
        raise ValueError(f"not an HTTP/1.x answer: {status_line[:40]!r}")
    code, _, reason = rest.partition(" ")
    headers: CIMultiDict[str] = CIMultiDict()
    for line in lines:
        name, sep, value = line.partition(":")
        if not sep:
            raise ValueError(f"malformed header line {line[:40]!r}")
        headers.add(name.strip(), value.strip())
    return int(code), reason, headers


class HttpPool:
    """Keep-alive HTTP/1.1 connections to the server at `base_url`."""

    def __init__(self, base_url: str, *, ssl_context: ssl.SSLContext | None = None, server_hostname: str | None = None,
                 limit: int = 100) -> None:
        url = urllib.parse.urlsplit(base_url)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError(f"not an http(s) URL: {base_url!r}")
        self.host = url.hostname
        self.port = url.port or (443 if url.scheme == "https" else 80)
        self.prefix = url.path.rstrip("/")
        self.ssl = (ssl_context or ssl.create_default_context()) if url.scheme == "https" else None
        self.server_hostname = (server_hostname or self.host) if self.ssl is not None else None
        self._host_header = url.netloc.rpartition("@")[2].encode("idna")
        self._idle: list[_Connection] = []
        self._all: set[_Connection] = set()
        self._slots = asyncio.Semaphore(limit)
        self._closed = False

    async def request(self, method: str, target: str, *, headers: Mapping[str, str], body: bytes | None,
                      timeout: float | None) -> Response:
        """`target`: the path and query, e.g. /api/v1/nodes?limit=500."""
        request = self._encode(method, self.prefix + target, headers, body)
        async with self._slots:
            connection = await self._connection(timeout)
            try:
                async with asyncio.timeout(timeout):
                    response = await connection.send(request)
            except BaseException:  # timed out, cancelled, or broken: its state is unknown
                connection.close()
                self._all.discard(connection)
                raise
            if connection.reusable and not self._closed:
                self._idle.append(connection)
            else:
                connection.close()
                self._all.discard(connection)
            return response

    async def _connection(self, timeout: float | None) -> _Connection:
        while self._idle:
            connection = self._idle.pop()
            if not connection.closed:
                return connection
            self._all.discard(connection)
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout):
                _, connection = await loop.create_connection(_Connection, self.host, self.port, ssl=self.ssl,
                                                             server_hostname=self.server_hostname)
        except OSError as exc:
            raise aiohttp.ClientConnectionError(f"cannot connect to {self.host}:{self.port}: {exc}") from exc
        self._all.add(connection)
        return connection

    def _encode(self, method: str, target: str, headers: Mapping[str, str], body: bytes | None) -> bytes:
        lines = [f"{method} {target} HTTP/1.1", f"Host: {self._host_header.decode()}"]
        for name, value in headers.items():
            if "\r" in value or "\n" in value or "\r" in name or "\n" in name:
                raise ValueError(f"header {name!r} holds a line break")
            lines.append(f"{name}: {value}")
        if body is not None or method in ("POST", "PUT", "PATCH"):
            lines.append(f"Content-Length: {len(body or b'')}")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        return head + body if body else head

    def close(self) -> None:
        self._closed = True
        for connection in self._all:
            connection.close()
        self._all.clear()
        self._idle.clear()


__all__ = ["HttpPool", "Response"]
