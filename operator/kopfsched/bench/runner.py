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

from kopfsched import gcpolicy
from kopfsched.bench.workloads import DEFAULT_SIZE, SIZES, WORKLOADS, Workload
from kopfsched.cache.cache import Cache
from kopfsched.config.defaults import default_profile
from kopfsched.config.types import ProfileConfig
from kopfsched.framework.registry import Registry
from kopfsched.plugins.registry import full_registry
from kopfsched.scheduler.event_handlers import EventHandlers
from kopfsched.scheduler.observer import Attempt, NullObserver, Observers, SchedulingObserver
from kopfsched.scheduler.scheduler import Scheduler
from kopfsched.simulate.client import InMemoryClusterClient


class _Progress(NullObserver):
    """Counts the measured pods scheduled; keeps every attempt's latency (churn pods' too, as
    scheduler_perf's attempt-duration histogram) and the time spent per extension point."""

    def __init__(self, measured: set[str], done: asyncio.Event, report: Callable[[int], None] | None, *,
                 settle: bool = False) -> None:
        self.measured = measured
        self.latencies: list[float] = []
        self.scheduled = 0
        self.failed = 0
        self.unschedulable: set[str] | None = set() if settle else None
        """With `settle`: the measured pods found unschedulable and not scheduled since."""
        self.points: dict[str, list[float]] = {}
        """extension point -> [calls, seconds]"""
        self._done = done
        self._report = report

    def attempted(self, attempt: Attempt) -> None:
        self.latencies.append(attempt.seconds)
        if attempt.result != "scheduled":
            self.failed += 1
            if self.unschedulable is not None and attempt.pod.uid in self.measured:
                self.unschedulable.add(attempt.pod.uid)
                self._check_done()
            return
        if attempt.pod.uid not in self.measured:
            return
        self.scheduled += 1
        if self.unschedulable is not None:
            self.unschedulable.discard(attempt.pod.uid)
        if self._report is not None and self.scheduled % 1000 == 0:
            self._report(self.scheduled)
        self._check_done()

    def _check_done(self) -> None:
        settled = self.scheduled + (len(self.unschedulable) if self.unschedulable is not None else 0)
        if settled >= len(self.measured):
            self._done.set()

    def extension_point(self, profile: str, point: str, code: str, seconds: float) -> None:
        entry = self.points.get(point)
        if entry is None:
            entry = self.points[point] = [0, 0.0]
        entry[0] += 1
        entry[1] += seconds


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def load_workload(workload: Workload, scheduler: Scheduler, client: InMemoryClusterClient,
                  profile: ProfileConfig) -> Callable[[dict[str, Any]], None]:
    """Give `scheduler` the workload's objects, nodes and running pods, queue its measured
    pods under `profile`; returns the function that creates one more pod (churn)."""
    scheduler.set_profiles([profile])
    handlers = EventHandlers(scheduler)
    client.on_pod_change = lambda new, old: handlers.on_pod_upsert(new, old)
    client.on_pod_delete = handlers.on_pod_delete
    client.on_object_change = handlers.on_object_upsert
    client.on_object_delete = handlers.on_object_delete
    for obj in workload.objects:
        client.add_object(obj)
        handlers.on_object_upsert(obj["kind"], obj)
    for node in workload.nodes:
        handlers.on_node_upsert(node)
    for pod in workload.init_pods:
        client.add_pod(pod)
        handlers.on_pod_upsert(pod)

    def create(pod: dict[str, Any]) -> None:
        pod["spec"]["schedulerName"] = profile.scheduler_name
        client.add_pod(pod)
        handlers.on_pod_upsert(pod)

    for pod in workload.pods:
        create(pod)
    return create


async def run_workload(workload: Workload, *, profile: ProfileConfig | None = None, registry: Registry | None = None,
                       seed: int = 0, progress: bool = False, timeout: float = 600.0,
                       also_observe: SchedulingObserver | None = None) -> dict[str, Any]:
    """Schedule the workload's pods in real time; `also_observe` sees every attempt too."""
    registry = registry or full_registry()
    client = InMemoryClusterClient(record_events=False)
    done = asyncio.Event()

    def report(n: int) -> None:
        print(f"bench: {n}/{len(workload.pods)} pods scheduled", file=sys.stderr)

    measured = {pod["metadata"]["uid"] for pod in workload.pods}
    observer = _Progress(measured, done, report if progress else None, settle=workload.settle)
    scheduler = Scheduler(cache=Cache(), client=client, registry=registry, clock=time.perf_counter,
                          rng=random.Random(seed),
                          observer=observer if also_observe is None else Observers(observer, also_observe))
    create = load_workload(workload, scheduler, client, profile or default_profile(registry))
    # As the operator after its initial listing: the loaded cluster leaves the GC's
    # generations, so that no full collection traverses it again while measuring.
    with gcpolicy.frozen_heap():
        return await _measure(workload, scheduler, observer, done, create, timeout)


async def _measure(workload: Workload, scheduler: Scheduler, observer: _Progress, done: asyncio.Event,
                   create: Callable[[dict[str, Any]], None], timeout: float) -> dict[str, Any]:
    started = time.perf_counter()
    cpu_started = time.process_time()
    loop_task = asyncio.ensure_future(scheduler.run())
    # Backoff expiry moves retried pods (e.g. preemptors) back to activeQ, as in a cluster.
    flush_task = asyncio.ensure_future(scheduler.queue.run())
    churned: list[int] = [0]
    churn_task = asyncio.ensure_future(_churn(workload, create, done, churned)) if workload.churn else None
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(done.wait(), timeout)
    elapsed = time.perf_counter() - started
    cpu = time.process_time() - cpu_started
    timed_out = not done.is_set()
    done.set()
    if churn_task is not None:
        await churn_task
    scheduler.queue.close()
    await loop_task
    await flush_task
    await scheduler.wait_for_tasks()
    return {
        "nodes": len(workload.nodes),
        "initPods": len(workload.init_pods),
        "pods": len(workload.pods),
        "scheduled": observer.scheduled,
        **({"unschedulable": len(observer.unschedulable)} if observer.unschedulable is not None else {}),
        "failedAttempts": observer.failed,
        # Stopped after `timeout` with measured pods neither bound nor (settle) found pending.
        "timedOut": timed_out,
        "seconds": round(elapsed, 3),
        "podsPerSecond": round(observer.scheduled / elapsed, 1) if elapsed else 0.0,
        "cpuSeconds": round(cpu, 3),
        "churnPods": churned[0],
        "p50Ms": round(_percentile(observer.latencies, 0.50) * 1000, 3),
        "p90Ms": round(_percentile(observer.latencies, 0.90) * 1000, 3),
        "p99Ms": round(_percentile(observer.latencies, 0.99) * 1000, 3),
        "extensionPoints": {point: {"calls": calls, "ms": round(seconds * 1000, 1)}
                            for point, (calls, seconds) in sorted(observer.points.items())},
        "peakRssMiB": round(peak_rss_mib(), 1),
    }


async def _churn(workload: Workload, create: Callable[[dict[str, Any]], None], done: asyncio.Event,
                 churned: list[int]) -> None:
    """One churn pod now, then one every interval, until the measured pods are done."""
    assert workload.churn is not None
    while not done.is_set():
        create(workload.churn(churned[0]))
        churned[0] += 1
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(done.wait(), workload.churn_interval)


def bench(*, workload: str, nodes: int | None = None, init_pods: int | None = None, pods: int | None = None,
          profile: ProfileConfig | None = None, registry: Registry | None = None,
          progress: bool = False, churn: bool = True) -> dict[str, Any]:
    """Run a named workload; a size not given is the workload's own (SIZES) or DEFAULT_SIZE.
    `churn=False` leaves out a churn workload's churn pods (to see what they cost)."""
    default_nodes, default_init, default_pods = SIZES.get(workload, DEFAULT_SIZE)
    built = WORKLOADS[workload](default_nodes if nodes is None else nodes,
                                default_init if init_pods is None else init_pods,
                                default_pods if pods is None else pods)
    if not churn:
        built.churn = None
    result = asyncio.run(run_workload(built, profile=profile, registry=registry, progress=progress))
    return {"workload": workload, **result}
