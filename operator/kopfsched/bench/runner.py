"""Run a workload through the real scheduler core and measure it."""

from __future__ import annotations

import asyncio
import contextlib
import random
import resource
import sys
import time
from collections.abc import Callable
from typing import Any

from kopfsched.bench.workloads import WORKLOADS, Workload
from kopfsched.cache.cache import Cache
from kopfsched.config.defaults import default_profile
from kopfsched.config.types import ProfileConfig
from kopfsched.framework.registry import Registry
from kopfsched.plugins.registry import full_registry
from kopfsched.scheduler.event_handlers import EventHandlers
from kopfsched.scheduler.observer import Attempt, NullObserver
from kopfsched.scheduler.scheduler import Scheduler
from kopfsched.simulate.client import InMemoryClusterClient


class _Progress(NullObserver):
    def __init__(self, total: int, done: asyncio.Event, report: Callable[[int], None] | None) -> None:
        self.total = total
        self.latencies: list[float] = []
        self.scheduled = 0
        self.failed = 0
        self._done = done
        self._report = report

    def attempted(self, attempt: Attempt) -> None:
        self.latencies.append(attempt.seconds)
        if attempt.result == "scheduled":
            self.scheduled += 1
        else:
            self.failed += 1
        if self._report is not None and self.scheduled and self.scheduled % 1000 == 0 and \
                attempt.result == "scheduled":
            self._report(self.scheduled)
        if self.scheduled >= self.total:
            self._done.set()


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def run_workload(workload: Workload, *, profile: ProfileConfig | None = None, registry: Registry | None = None,
                       seed: int = 0, progress: bool = False, timeout: float = 600.0) -> dict[str, Any]:
    registry = registry or full_registry()
    client = InMemoryClusterClient(record_events=False)
    done = asyncio.Event()

    def report(n: int) -> None:
        print(f"bench: {n}/{len(workload.pods)} pods scheduled", file=sys.stderr)

    observer = _Progress(len(workload.pods), done, report if progress else None)
    scheduler = Scheduler(cache=Cache(), client=client, registry=registry, clock=time.perf_counter,
                          rng=random.Random(seed), observer=observer)
    profile = profile or default_profile(registry)
    scheduler.set_profiles([profile])
    handlers = EventHandlers(scheduler)
    client.on_pod_change = lambda new, old: handlers.on_pod_upsert(new, old)
    client.on_pod_delete = handlers.on_pod_delete
    for node in workload.nodes:
        handlers.on_node_upsert(node)
    for pod in workload.init_pods:
        client.add_pod(pod)
        handlers.on_pod_upsert(pod)
    for pod in workload.pods:
        pod["spec"]["schedulerName"] = profile.scheduler_name
        client.add_pod(pod)
        handlers.on_pod_upsert(pod)
    started = time.perf_counter()
    loop_task = asyncio.ensure_future(scheduler.run())
    # Backoff expiry moves retried pods (e.g. preemptors) back to activeQ, as in a cluster.
    flush_task = asyncio.ensure_future(scheduler.queue.run())
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(done.wait(), timeout)
    elapsed = time.perf_counter() - started
    scheduler.queue.close()
    await loop_task
    await flush_task
    await scheduler.wait_for_tasks()
    return {
        "nodes": len(workload.nodes),
        "initPods": len(workload.init_pods),
        "pods": len(workload.pods),
        "scheduled": observer.scheduled,
        "failedAttempts": observer.failed,
        "seconds": round(elapsed, 3),
        "podsPerSecond": round(observer.scheduled / elapsed, 1) if elapsed else 0.0,
        "p50Ms": round(_percentile(observer.latencies, 0.50) * 1000, 3),
        "p99Ms": round(_percentile(observer.latencies, 0.99) * 1000, 3),
        "peakRssMiB": round(peak_rss_mib(), 1),
    }


def bench(*, workload: str, nodes: int, init_pods: int, pods: int, profile: ProfileConfig | None = None,
          registry: Registry | None = None, progress: bool = False) -> dict[str, Any]:
    built = WORKLOADS[workload](nodes, init_pods, pods)
    result = asyncio.run(run_workload(built, profile=profile, registry=registry, progress=progress))
    return {"workload": workload, **result}
