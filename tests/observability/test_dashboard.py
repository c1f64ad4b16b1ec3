"""The dashboard's HTTP side: routes, the overview's rate limit, the page's self-containment."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from kopfsched.observability.dashboard import DashboardRoutes, page
from kopfsched.observability.health import HealthServer
from kopfsched.observability.metrics import SchedulerMetrics


class Source:
    def __init__(self) -> None:
        self.overviews = 0

    async def overview(self) -> dict[str, Any]:
        self.overviews += 1
        return {"n": self.overviews}

    async def pending(self) -> bytes:
        return b'{"pods":[{"namespace":"ns","name":"p"}]}'

    def pending_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        return {"namespace": namespace, "name": name, "filter": {}} if (namespace, name) == ("ns", "p") else None


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class ViewSource:
    """The dashboard's source over a real scheduler, through the view functions the operator uses."""

    def __init__(self, scheduler: Any) -> None:
        self.scheduler = scheduler

    async def overview(self) -> dict[str, Any]:
        from kopfsched.scheduler import view
        from kopfsched.scheduler.activity import Activity
        data = await view.overview(self.scheduler, Activity(), self.scheduler.cache)
        data["instance"] = {"identity": "test", "scheduling": True, "time": 0}
        for profile in data["profiles"]:
            profile.update(source="--config", ready={"status": "True"}, queue={})
        return data

    async def pending(self) -> bytes:
        from kopfsched.scheduler import view
        return await view.pending_body(self.scheduler.pending)

    def pending_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        return None


@contextlib.asynccontextmanager
async def page_of(scheduler: Any) -> AsyncIterator[Any]:
    """The dashboard of `scheduler` served on a free port and opened in the browser; the page
    must raise no error while it is open."""
    from tests.browser import async_page
    app = web.Application()
    DashboardRoutes(ViewSource(scheduler)).add_to(app)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        async with async_page() as page:
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            await page.goto(f"http://127.0.0.1:{runner.addresses[0][1]}/")
            yield page
        assert errors == []
    finally:
        await runner.cleanup()



@pytest.fixture
async def served() -> AsyncIterator[tuple[aiohttp.ClientSession, Source, Clock]]:
    source, clock = Source(), Clock()
    app = web.Application()
    DashboardRoutes(source, min_interval=1.0, clock=clock).add_to(app)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    async with aiohttp.ClientSession(base_url=f"http://127.0.0.1:{port}") as session:
        yield session, source, clock
    await runner.cleanup()


async def get(session: aiohttp.ClientSession, path: str) -> tuple[int, str, str]:
    async with session.get(path) as response:
        return response.status, response.content_type, await response.text()


async def test_routes(served) -> None:
    session, _, _ = served
    status, content_type, body = await get(session, "/")
    assert (status, content_type) == (200, "text/html") and "<title>kopfsched</title>" in body
    assert await get(session, "/debug/pending") == (200, "application/json",
                                                   '{"pods":[{"namespace":"ns","name":"p"}]}')
    status, _, body = await get(session, "/debug/pending/ns/p")
    assert (status, json.loads(body)) == (200, {"namespace": "ns", "name": "p", "filter": {}})
    status, _, body = await get(session, "/debug/pending/ns/other")
    assert (status, json.loads(body)) == (404, {"message": "pod ns/other is not pending in this scheduler"})


async def test_the_overview_is_computed_at_most_once_per_interval(served) -> None:
    session, source, clock = served
    answers = [json.loads((await get(session, "/debug/overview"))[2]) for _ in range(3)]
    assert answers == [{"n": 1}] * 3
    clock.now += 1.0
    assert json.loads((await get(session, "/debug/overview"))[2]) == {"n": 2}
    assert source.overviews == 2


def test_the_page_fetches_nothing_but_its_own_server() -> None:
    html = page().decode()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html)
    assert "@import" not in html and "url(" not in html
    assert set(re.findall(r'fetch\(\s*[`"\']([^`"\'$]*)', html)) == {"debug/overview", "debug/pending/"}


async def test_the_health_server_serves_the_dashboard_only_when_given_a_source() -> None:
    for source, expected in ((None, 404), (Source(), 200)):
        server = HealthServer(port=0, host="127.0.0.1", healthy=lambda: True, ready=lambda: True,
                              registry=SchedulerMetrics().registry, dashboard=source)
        await server.start()
        try:
            async with aiohttp.ClientSession() as session, session.get(f"http://127.0.0.1:{server.port}/") as resp:
                assert resp.status == expected
        finally:
            await server.stop()


async def test_the_page_renders_a_large_cluster_aggregated_per_zone(tmp_path) -> None:
    """400 nodes: above the per-node limit the page shows per-zone sums, histograms and the
    busiest nodes, from the real view functions."""
    from kopfsched.cache import Cache
    from kopfsched.config.defaults import default_profile
    from kopfsched.plugins.registry import in_tree_registry
    from kopfsched.scheduler.scheduler import Scheduler
    from kopfsched.simulate.client import InMemoryClusterClient
    from tests.builders import make_node, make_pod

    registry = in_tree_registry()
    scheduler = Scheduler(cache=Cache(), client=InMemoryClusterClient(), registry=registry)
    scheduler.set_profiles([default_profile(registry)])
    for i in range(400):
        scheduler.cache.add_node(make_node(f"node-{i:03d}", cpu="4",
                                           labels={"topology.kubernetes.io/zone": f"zone-{'ab'[i % 2]}"}))
    scheduler.cache.add_pod(make_pod("hog", uid="hog", node_name="node-007", requests={"cpu": "3900m"}))

    async with page_of(scheduler) as page:
        await page.get_by_text("Busiest nodes").wait_for(timeout=15_000)
        assert await page.locator("#node-count").inner_text() == "400 nodes, aggregated per zone"
        assert await page.locator(".zone h3").all_inner_texts() == [
            "zone-a\n200 nodes · CPU 0% (0/800) · memory 0% (0B/6.3Ti) · pods 0/22000",
            "zone-b\n200 nodes · CPU 0.5% (3.9/800) · memory 0% (0B/6.3Ti) · pods 1/22000"]
        assert await page.locator(".hist").count() == 2
        busiest = await page.locator(".wide tbody tr").all_inner_texts()
        assert len(busiest) == 10 and busiest[0].startswith("node-007")
        await page.screenshot(path=str(tmp_path / "aggregated.png"), full_page=True)


async def test_the_page_counts_bound_and_pending_pods_and_marks_tainted_nodes_and_gated_pods(tmp_path) -> None:
    """The sandbox's complaint: "24 pods in cache" with 30 pods, no taint shown, no gated pod listed."""
    from tests.builders import make_node, make_pod
    from tests.harness import Harness

    h = Harness([make_node("a", cpu="2"), make_node("gpu", cpu="2", extended={"nvidia.com/gpu": "4"}, taints=[
        {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}])])
    h.add_pods(make_pod("web", requests={"cpu": "1"}), make_pod("huge", requests={"cpu": "8"}),
               make_pod("held", scheduling_gates=["example.com/quota"]))
    await h.settle()

    async with page_of(h.scheduler) as page:
        await page.locator("tr.pod").nth(1).wait_for(timeout=15_000)
        assert await page.locator("#cluster").inner_text() == "2 nodes · 1 pod bound · 2 pending"
        assert await page.locator(".tainted").all_inner_texts() == ["tainted dedicated=gpu:NoSchedule"]
        assert await page.locator(".ext").all_inner_texts() == ["nvidia.com/gpu 0 / 4"]
        rows = await page.locator("tr.pod").all_inner_texts()
        assert rows[0].startswith("default/huge") and rows[1].startswith("default/held")
        assert "SchedulingGated · gates: example.com/quota" in rows[1]
        assert "Scheduling is blocked due to non-empty scheduling gates" in rows[1]
        await page.screenshot(path=str(tmp_path / "dashboard.png"), full_page=True)
