"""HealthServer on 127.0.0.1, port 0, through a real aiohttp client."""

from __future__ import annotations

import aiohttp
import pytest

from kopfsched.observability.health import HealthServer
from kopfsched.observability.metrics import SchedulerMetrics


class Flags:
    def __init__(self) -> None:
        self.healthy = True
        self.ready = False


def broken() -> bool:
    raise RuntimeError("loop task\nended")


@pytest.fixture
async def served():
    flags = Flags()
    metrics = SchedulerMetrics()
    server = HealthServer(port=0, host="127.0.0.1", healthy=lambda: flags.healthy, ready=lambda: flags.ready,
                          registry=metrics.registry)
    await server.start()
    async with aiohttp.ClientSession(base_url=f"http://127.0.0.1:{server.port}") as session:
        yield session, flags, metrics
    await server.stop()


async def get(session: aiohttp.ClientSession, path: str) -> tuple[int, str]:
    async with session.get(path) as response:
        return response.status, await response.text()


@pytest.mark.parametrize(("healthy", "ready", "path", "status", "body"), [
    (True, True, "/healthz", 200, "ok"),
    (False, True, "/healthz", 503, "healthz check failed\n"),
    (True, True, "/readyz", 200, "ok"),
    (True, False, "/readyz", 503, "readyz check failed\n"),
    (False, True, "/readyz", 200, "ok"),
], ids=["healthy", "unhealthy", "ready", "not-ready", "ready-while-unhealthy"])
async def test_probes(served, healthy, ready, path, status, body):
    session, flags, _ = served
    flags.healthy, flags.ready = healthy, ready
    assert await get(session, path) == (status, body)


async def test_probe_answers_follow_the_checks_live(served):
    session, flags, _ = served
    assert (await get(session, "/readyz"))[0] == 503
    flags.ready = True
    assert (await get(session, "/readyz"))[0] == 200


async def test_a_raising_check_is_a_one_line_503():
    server = HealthServer(port=0, host="127.0.0.1", healthy=broken, ready=broken,
                          registry=SchedulerMetrics().registry)
    await server.start()
    try:
        async with aiohttp.ClientSession() as session:
            status, body = await get(session, f"http://127.0.0.1:{server.port}/healthz")
    finally:
        await server.stop()
    assert (status, body) == (503, "healthz check failed: loop task ended\n")


async def test_metrics_exposition(served):
    session, _, metrics = served
    metrics.set_pending({"active": 2, "backoff": 0, "unschedulable": 1, "gated": 0})
    metrics.extension_point("kopfsched", "Filter", "Success", 0.001)
    async with session.get("/metrics") as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain")
        text = await response.text()
    assert 'scheduler_pending_pods{queue="active"} 2.0' in text
    assert 'scheduler_pending_pods{queue="unschedulable"} 1.0' in text
    assert ('scheduler_framework_extension_point_duration_seconds_count'
            '{extension_point="Filter",profile="kopfsched",status="Success"} 1.0') in text


async def test_metrics_restricted_to_the_names_asked_for(served):
    session, _, metrics = served
    metrics.set_pending({"active": 2, "backoff": 0, "unschedulable": 1, "gated": 0})
    metrics.set_cache_size(nodes=3, pods=4, assumed_pods=1)
    metrics.extension_point("kopfsched", "Filter", "Success", 0.001)
    async with session.get("/metrics", params=[("name[]", "scheduler_pending_pods"),
                                               ("name[]", "scheduler_cache_size")]) as response:
        text = await response.text()
    assert 'scheduler_pending_pods{queue="active"} 2.0' in text
    assert 'scheduler_cache_size{type="pods"} 4.0' in text
    assert "scheduler_framework_extension_point_duration_seconds" not in text


async def test_unknown_path_is_404(served):
    session, _, _ = served
    assert (await get(session, "/nope"))[0] == 404


async def test_stop_releases_the_port():
    server = HealthServer(port=0, host="127.0.0.1", healthy=lambda: True, ready=lambda: True,
                          registry=SchedulerMetrics().registry)
    await server.start()
    port = server.port
    await server.stop()
    async with aiohttp.ClientSession() as session:
        with pytest.raises(aiohttp.ClientConnectionError):
            await get(session, f"http://127.0.0.1:{port}/healthz")


def test_port_before_start_is_an_error():
    server = HealthServer(port=0, healthy=lambda: True, ready=lambda: True, registry=SchedulerMetrics().registry)
    with pytest.raises(RuntimeError):
        _ = server.port
