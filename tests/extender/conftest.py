"""A fake HTTP extender: a small aiohttp app on 127.0.0.1 (port 0) that records every
request and answers with what the test scripted per verb."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

Answer = Callable[[dict[str, Any]], Any]


class FakeExtender:
    def __init__(self) -> None:
        self.requests: list[tuple[str, Any]] = []
        self.answers: dict[str, Answer] = {}
        self.release = asyncio.Event()
        self.url = ""

    def on(self, verb: str, answer: Answer) -> None:
        """answer(body) -> a JSON value, or a web.Response (e.g. a status code)."""
        self.answers[verb] = answer

    def bodies(self, verb: str) -> list[Any]:
        return [body for v, body in self.requests if v == verb]

    async def handle(self, request: web.Request) -> web.StreamResponse:
        verb = request.match_info["verb"]
        body = await request.json()
        self.requests.append((verb, body))
        answer = self.answers[verb](body)
        if asyncio.iscoroutine(answer):
            answer = await answer
        return answer if isinstance(answer, web.StreamResponse) else web.json_response(answer)

    async def hang(self) -> None:
        """Never answer (until the test ends): for timeouts, without sleeping."""
        await self.release.wait()


@pytest.fixture
async def extender() -> AsyncIterator[FakeExtender]:
    fake = FakeExtender()
    app = web.Application()
    app.router.add_post("/{verb}", fake.handle)
    server = TestServer(app, host="127.0.0.1", port=0)
    await server.start_server()
    fake.url = str(server.make_url("")).rstrip("/")
    try:
        yield fake
    finally:
        fake.release.set()
        await server.close()
