"""A lean HTTP/1.1 client for the scheduler's own requests to the API server.

Keep-alive connections to one server, one request at a time on each, at most `limit` at
once (the ApiClient's connection_pool_maxsize). aiohttp's ClientSession spent more of the
scheduling loop's CPU on a request than the scheduler's own work on it (request and response
objects, tracing hooks, the cookie jar, timers, URL objects), and every bound pod makes two (the
bind and its Event). This client writes the request in one go and parses the answer in one
Protocol, for a fraction of that (docs/performance.md has the figures).

What it speaks: HTTP/1.1 with Content-Length or chunked answers (or an answer that ends with
the connection), plain or TLS. No proxies, no redirects, no compression (none is asked for):
the ApiClient's aiohttp session keeps serving a configuration with a proxy. Failures are
aiohttp's exception types (ClientConnectionError, ServerDisconnectedError) and TimeoutError,
so callers retry them as they retry aiohttp's.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import ssl
import urllib.parse
from collections.abc import Mapping

import aiohttp
from multidict import CIMultiDict

MAX_HEAD = 1 << 16
"""Longest status line and headers accepted (bytes)."""


class Response:
    """An answer: status, reason, body; its headers are parsed from the raw head when first read
    (a bind's or an Event's answer is judged by its status alone)."""

    __slots__ = ("_fields", "_headers", "body", "reason", "status")

    def __init__(self, status: int, reason: str, headers: CIMultiDict[str] | None, body: bytes, *,
                 fields: bytes = b"") -> None:
        self.status, self.reason, self.body = status, reason, body
        self._headers, self._fields = headers, fields

    @property
    def headers(self) -> CIMultiDict[str]:
        if self._headers is None:
            self._headers = _parse_fields(self._fields)
        return self._headers


class _Connection(asyncio.Protocol):
    """One keep-alive connection: bytes in, one Response out per request."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.reusable = True
        self._buffer = bytearray()
        self._waiter: asyncio.Future[Response] | None = None
        self._head: tuple[int, str, bytes] | None = None
        self._length: int | None = None
        """Body bytes expected; None: chunked, or (`_to_close`) until the connection ends."""
        self._to_close = False
        self._chunks = bytearray()
        self.deadline: float | None = None
        """When the request in flight times out (loop time); None: never, or none in flight."""

    # -- asyncio.Protocol ------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        if self._waiter is None:  # bytes nobody asked for (e.g. while idle): the stream is off
            self._buffer += data
            self._fail(aiohttp.ClientPayloadError("unexpected data from the server"))
            return
        try:
            if self._head is None and not self._buffer and (response := self._whole(data)) is not None:
                self._finish(response)  # the usual answer: all of it in one read, nothing more
                return
            self._buffer += data
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
                status, reason, fields = self._head
                self._finish(Response(status, reason, None, bytes(self._buffer), fields=fields))
            else:
                self._waiter.set_exception(aiohttp.ServerDisconnectedError())
        self._waiter = None

    # -- one request -----------------------------------------------------------------------

    def start(self, request: bytes, waiter: asyncio.Future[Response], deadline: float | None = None) -> None:
        """Write the request; `waiter` gets the whole answer. `deadline` (loop time) is for the
        pool's sweep, which fails the request with TimeoutError (and closes the connection) past it."""
        assert self.transport is not None and self._waiter is None
        self._waiter = waiter
        self._head, self._length, self._to_close = None, None, False
        if self._chunks:
            self._chunks.clear()
        self.deadline = deadline
        self.transport.write(request)

    async def send(self, request: bytes, deadline: float | None = None) -> Response:
        """Write the request, wait for the whole answer (`start` with a future of its own)."""
        waiter: asyncio.Future[Response] = asyncio.get_running_loop().create_future()
        self.start(request, waiter, deadline)
        return await waiter

    def time_out(self) -> None:
        self._fail(TimeoutError())

    def close(self) -> None:
        self.reusable = False
        if self.transport is not None and not self.closed:
            self.transport.close()

    def _finish(self, response: Response) -> None:
        waiter, self._waiter = self._waiter, None
        self.deadline = None
        if self._buffer:  # more than the answer: not a stream to trust with the next request
            self.reusable = False
        if waiter is not None and not waiter.done():
            waiter.set_result(response)
        if not self.reusable:
            self.close()

    def _fail(self, exc: Exception) -> None:
        waiter, self._waiter = self._waiter, None
        self.deadline = None
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)
        self.close()

    # -- parsing -------------------------------------------------------------------------

    def _whole(self, data: bytes) -> Response | None:
        """The Response when `data` is exactly one final answer framed by Content-Length (a bind's,
        an Event's: one read each); None for anything else, which `_parse` reads from the buffer."""
        end = data.find(b"\r\n\r\n")
        if end < 0:
            return None
        status, reason, fields = _parse_head(data[:end])
        if status < 200 or status in (204, 304):
            return None
        connection, transfer_encoding, content_length = _framing(fields)
        if transfer_encoding is not None or content_length is None or not content_length.isdigit() \
                or len(data) - end - 4 != int(content_length):
            return None
        if connection is not None and connection.lower() == "close":
            self.reusable = False
        return Response(status, reason, None, data[end + 4:], fields=fields)

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
            status, _, fields = head
            if 100 <= status < 200:
                continue  # informational (e.g. 103 Early Hints): the answer follows
            self._head = head
            connection, transfer_encoding, content_length = _framing(fields)
            if connection is not None and connection.lower() == "close":
                self.reusable = False
            if status in (204, 304):
                self._length = 0
            elif transfer_encoding is not None and "chunked" in transfer_encoding.lower():
                self._length = None
            elif content_length is not None:
                self._length = int(content_length)
                if self._length < 0:
                    raise ValueError("negative Content-Length")
            else:
                self._length, self._to_close, self.reusable = None, True, False
        status, reason, fields = self._head
        if self._to_close:
            return None  # the body ends with the connection
        if self._length is not None:
            if len(buffer) < self._length:
                return None
            body = bytes(buffer[:self._length])
            del buffer[:self._length]
            return Response(status, reason, None, body, fields=fields)
        return self._parse_chunks(status, reason, fields)

    def _parse_chunks(self, status: int, reason: str, fields: bytes) -> Response | None:
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
                return Response(status, reason, None, bytes(self._chunks), fields=fields)
            if len(buffer) < line_end + 2 + size + 2:
                return None
            start = line_end + 2
            self._chunks += buffer[start:start + size]
            del buffer[:start + size + 2]


def _parse_head(head: bytes) -> tuple[int, str, bytes]:
    """(status, reason, the header lines as received): the lines are checked here, parsed into a
    CIMultiDict only when someone reads them (Response.headers)."""
    line_end = head.find(b"\r\n")
    status_line, fields = (head, b"") if line_end < 0 else (head[:line_end], head[line_end + 2:])
    version, _, rest = status_line.partition(b" ")
    if not version.startswith(b"HTTP/1."):
        raise ValueError(f"not an HTTP/1.x answer: {status_line[:40].decode('latin-1')!r}")
    code, _, reason = rest.partition(b" ")
    if fields:  # (checked as text: `b":" in line` first tries b":" as an int, an exception each time)
        for line in fields.decode("latin-1").split("\r\n"):
            if ":" not in line:
                raise ValueError(f"malformed header line {line[:40]!r}")
    return int(code), reason.decode("latin-1"), fields


def _framing(fields: bytes) -> tuple[str | None, str | None, str | None]:
    """The first Connection, Transfer-Encoding and Content-Length values of the header lines."""
    lowered = b"\r\n" + fields.lower()
    return (_value(lowered, fields, b"\r\nconnection:"), _value(lowered, fields, b"\r\ntransfer-encoding:"),
            _value(lowered, fields, b"\r\ncontent-length:"))


def _value(lowered: bytes, fields: bytes, name: bytes) -> str | None:
    start = lowered.find(name)
    if start < 0:
        return None
    start += len(name) - 2  # offsets in `fields` are those in `lowered` less 2: the value as received
    end = fields.find(b"\r\n", start)
    return fields[start:None if end < 0 else end].strip().decode("latin-1")


def _parse_fields(fields: bytes) -> CIMultiDict[str]:
    headers: CIMultiDict[str] = CIMultiDict()
    if fields:
        for line in fields.decode("latin-1").split("\r\n"):
            name, _, value = line.partition(":")
            headers.add(name.strip(), value.strip())
    return headers


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
        self._busy: set[_Connection] = set()
        self._limit = limit
        self._in_use = 0
        self._slot_waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._closed = False
        self._sweep: asyncio.TimerHandle | None = None
        self._sweep_at = 0.0

    @staticmethod
    def encode_headers(headers: Mapping[str, str]) -> bytes:
        """Header lines as `request` writes them, checked once: a caller sending the same headers
        again and again encodes them once."""
        for name, value in headers.items():
            if "\r" in value or "\n" in value or "\r" in name or "\n" in name:
                raise ValueError(f"header {name!r} holds a line break")
        return "".join([f"{name}: {value}\r\n" for name, value in headers.items()]).encode("latin-1")

    async def request(self, method: str, target: str, *, headers: Mapping[str, str] | bytes, body: bytes | None,
                      timeout: float | None) -> Response:
        """`target`: the path and query, e.g. /api/v1/nodes?limit=500; `headers`: a mapping, or
        lines from `encode_headers`."""
        request = self._encode(method, self.prefix + target, headers, body)
        if self._in_use >= self._limit or self._slot_waiters:
            await self._wait_for_slot()
        self._in_use += 1
        try:
            connection = None
            idle = self._idle
            while idle:
                connection = idle.pop()
                if not connection.closed:
                    break
                self._all.discard(connection)
                connection = None
            if connection is None:
                connection = await self._connect(timeout)
            loop = asyncio.get_running_loop()
            deadline = None
            if timeout is not None:
                deadline = loop.time() + timeout
                if self._sweep is None or deadline < self._sweep_at:
                    self._arm(deadline)
            busy = self._busy
            busy.add(connection)
            try:
                waiter: asyncio.Future[Response] = loop.create_future()
                connection.start(request, waiter, deadline)
                response = await waiter
            except BaseException:  # timed out, cancelled, or broken: its state is unknown
                connection.close()
                self._all.discard(connection)
                raise
            finally:
                busy.discard(connection)
            if connection.reusable and not self._closed:
                idle.append(connection)
            else:
                connection.close()
                self._all.discard(connection)
            return response
        finally:
            self._in_use -= 1
            if self._slot_waiters:
                self._wake_next()

    # -- at most `limit` requests at once (asyncio.Semaphore's fairness, without its awaits when free) --

    async def _wait_for_slot(self) -> None:
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._slot_waiters.append(waiter)
        try:
            while True:
                await waiter
                if self._in_use < self._limit:
                    return
                # another request took the slot first: wait again, in front
                waiter = asyncio.get_running_loop().create_future()
                self._slot_waiters.appendleft(waiter)
        except BaseException:
            if waiter.done() and not waiter.cancelled():
                self._wake_next()  # it was woken for a slot it will not take: pass the turn on
            else:
                with contextlib.suppress(ValueError):
                    self._slot_waiters.remove(waiter)
            raise
        finally:
            if self._slot_waiters and self._in_use + 1 < self._limit:
                self._wake_next()  # more slots free than this request takes

    def _wake_next(self) -> None:
        while self._slot_waiters:
            waiter = self._slot_waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    # -- timeouts: one timer for the pool, not one per request ------------------------------------

    def _arm(self, when: float) -> None:
        if self._sweep is not None:
            self._sweep.cancel()
        self._sweep_at = when
        self._sweep = asyncio.get_running_loop().call_at(when, self._sweep_expired)

    def _sweep_expired(self) -> None:
        """Fail the requests past their deadline; come back at the next deadline of those in flight."""
        self._sweep = None
        now = asyncio.get_running_loop().time()
        following = None
        for connection in list(self._busy):
            deadline = connection.deadline
            if deadline is None:
                continue
            if deadline <= now:
                connection.time_out()
            elif following is None or deadline < following:
                following = deadline
        if following is not None:
            self._arm(following)

    async def _connect(self, timeout: float | None) -> _Connection:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout):
                _, connection = await loop.create_connection(_Connection, self.host, self.port, ssl=self.ssl,
                                                             server_hostname=self.server_hostname)
        except OSError as exc:
            raise aiohttp.ClientConnectionError(f"cannot connect to {self.host}:{self.port}: {exc}") from exc
        self._all.add(connection)
        return connection

    def _encode(self, method: str, target: str, headers: Mapping[str, str] | bytes, body: bytes | None) -> bytes:
        lines = headers if isinstance(headers, bytes) else self.encode_headers(headers)
        if body is not None or method in ("POST", "PUT", "PATCH"):
            lines += b"Content-Length: %d\r\n" % len(body or b"")
        head = b"%s %s HTTP/1.1\r\nHost: %s\r\n%s\r\n" % (method.encode(), target.encode("latin-1"),
                                                          self._host_header, lines)
        return head + body if body else head

    def close(self) -> None:
        self._closed = True
        if self._sweep is not None:
            self._sweep.cancel()
            self._sweep = None
        for connection in self._all:
            connection.close()
        self._all.clear()
        self._idle.clear()


__all__ = ["HttpPool", "Response"]
