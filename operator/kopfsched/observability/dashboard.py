"""The read-only dashboard and /debug/pending on the metrics port.

Routes (added to the health server's app when it is given a `DashboardSource`):
- `GET /` — one self-contained page (dashboard.html: inline CSS, JS and SVG, no fetch
  beyond this server) that polls the two JSON documents below every few seconds;
- `GET /debug/overview` — profiles, queue depths, recent throughput and latency, pending
  pods (the latest), recent bindings, node utilization;
- `GET /debug/pending` — `{"pods": [...]}`, every pod the scheduler could not place, with
  the reasons of its last attempt;
- `GET /debug/pending/{namespace}/{name}` — one pod, with the per-node `filter` map while
  its detail is held (404 when the pod is not pending).

This module knows HTTP only: the data comes from a `DashboardSource` the kube layer wires
in. The overview is computed at most once per `min_interval` seconds, however many pages
poll it; every answer is a snapshot, nothing here writes anywhere.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from importlib import resources
from typing import Any, Protocol

from aiohttp import web


class DashboardSource(Protocol):
    async def overview(self) -> dict[str, Any]:
        """The /debug/overview document."""

    async def pending(self) -> bytes:
        """The /debug/pending document, encoded."""

    def pending_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        """One pending pod with its per-node detail, or None."""


def page() -> bytes:
    return resources.files(__package__).joinpath("dashboard.html").read_bytes()


class DashboardRoutes:
    def __init__(self, source: DashboardSource, *, min_interval: float = 1.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.source = source
        self.min_interval = min_interval
        self.clock = clock
        self._page = page()
        self._overview: tuple[float, bytes] | None = None
        self._computing: asyncio.Future[bytes] | None = None

    def add_to(self, app: web.Application) -> None:
        app.router.add_get("/", self._index)
        app.router.add_get("/debug/overview", self._overview_handler)
        app.router.add_get("/debug/pending", self._pending)
        app.router.add_get("/debug/pending/{namespace}/{name}", self._pending_pod)

    async def _index(self, request: web.Request) -> web.Response:
        return web.Response(body=self._page, content_type="text/html", charset="utf-8",
                            headers={"Cache-Control": "no-store"})

    async def _overview_handler(self, request: web.Request) -> web.Response:
        return _json_body(await self._cached_overview())

    async def _cached_overview(self) -> bytes:
        now = self.clock()
        if self._overview is not None and now - self._overview[0] < self.min_interval:
            return self._overview[1]
        if self._computing is not None:  # another request is computing it: share the answer
            return await asyncio.shield(self._computing)
        self._computing = asyncio.get_running_loop().create_future()
        try:
            body = json.dumps(await self.source.overview(), separators=(",", ":")).encode()
        except BaseException as exc:
            self._computing.set_exception(exc)
            self._computing.exception()  # retrieved: no "never retrieved" warning when nobody waits
            raise
        else:
            self._computing.set_result(body)
            self._overview = (self.clock(), body)
            return body
        finally:
            self._computing = None

    async def _pending(self, request: web.Request) -> web.Response:
        return _json_body(await self.source.pending())

    async def _pending_pod(self, request: web.Request) -> web.Response:
        namespace, name = request.match_info["namespace"], request.match_info["name"]
        entry = self.source.pending_pod(namespace, name)
        if entry is None:
            return web.json_response({"message": f"pod {namespace}/{name} is not pending in this scheduler"},
                                     status=404)
        return _json_body(json.dumps(entry, separators=(",", ":")).encode())


def _json_body(body: bytes) -> web.Response:
    return web.Response(body=body, content_type="application/json", headers={"Cache-Control": "no-store"})
