"""The HTTP server of the operator's ports: /healthz, /readyz, /livez, Prometheus /metrics and,
given a dashboard source, the read-only dashboard `/` and `/debug/*` (see dashboard.py).

The same routes serve two ports: the secure port (HTTPS, every path but the health paths
checked with the API server: secure.py) and the metrics port (plain HTTP on 127.0.0.1, for
a person behind `kubectl port-forward`).

kopf's own liveness endpoint only says its reporting task runs; ours asks the
operator (`healthy()`: the scheduling loop is alive, `ready()`: the initial listing
is done), so the Deployment's probes see a stuck scheduler, not merely a live process.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Callable

from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

from kopfsched.observability.dashboard import DashboardRoutes, DashboardSource
from kopfsched.observability.secure import DelegatedAuth

logger = logging.getLogger(__name__)


class HealthServer:
    """Serves GET /healthz, /readyz, /livez and /metrics until `stop()`; over TLS given an
    `ssl_context`, each request checked by `auth` given one."""

    def __init__(self, *, port: int, host: str = "127.0.0.1", healthy: Callable[[], bool],
                 ready: Callable[[], bool], registry: CollectorRegistry,
                 dashboard: DashboardSource | None = None, ssl_context: ssl.SSLContext | None = None,
                 auth: DelegatedAuth | None = None) -> None:
        self.host = host
        self.ssl_context = ssl_context
        self.auth = auth
        self._requested_port = port
        self._healthy = healthy
        self._ready = ready
        self._registry = registry
        self._dashboard = dashboard
        self._runner: web.AppRunner | None = None
        self._port: int | None = None

    @property
    def port(self) -> int:
        """The bound port (the kernel's choice when constructed with port=0)."""
        if self._port is None:
            raise RuntimeError("HealthServer is not started")
        return self._port

    async def start(self) -> None:
        app = web.Application(middlewares=[self.auth.middleware] if self.auth is not None else [])
        app.router.add_get("/healthz", self._check_handler("healthz", self._healthy))
        app.router.add_get("/livez", self._check_handler("livez", self._healthy))
        app.router.add_get("/readyz", self._check_handler("readyz", self._ready))
        app.router.add_get("/metrics", self._metrics)
        if self._dashboard is not None:
            DashboardRoutes(self._dashboard).add_to(app)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        try:
            site = web.TCPSite(runner, self.host, self._requested_port, ssl_context=self.ssl_context)
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        self._port = runner.addresses[0][1]
        logger.info("serving /healthz, /readyz, /livez, /metrics%s on %s://%s:%d%s",
                    ", / (dashboard) and /debug/*" if self._dashboard is not None else "",
                    "https" if self.ssl_context is not None else "http", self.host, self._port,
                    " (TokenReview and SubjectAccessReview but for " + ", ".join(self.auth.always_allow_paths) + ")"
                    if self.auth is not None else "")

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    @staticmethod
    def _check_handler(name: str, check: Callable[[], bool]):
        async def handle(request: web.Request) -> web.Response:
            try:
                ok = check()
            except Exception as exc:  # a failing check is an unhealthy answer, not a 500
                reason = " ".join(str(exc).split()) or type(exc).__name__
                return web.Response(status=503, text=f"{name} check failed: {reason}\n")
            if ok:
                return web.Response(text="ok")
            return web.Response(status=503, text=f"{name} check failed\n")
        return handle

    async def _metrics(self, request: web.Request) -> web.Response:
        """The exposition; `?name[]=N` (repeatable) restricts it to those metric families, as
        prometheus_client's own HTTP handlers do (a poller reading one counter need not render
        every histogram)."""
        encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
        names = request.query.getall("name[]", [])
        registry = self._registry.restricted_registry(names) if names else self._registry
        return web.Response(body=encoder(registry), headers={"Content-Type": content_type})
