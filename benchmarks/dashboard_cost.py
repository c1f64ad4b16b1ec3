"""What one dashboard refresh costs the scheduling loop, at cluster scale (a script, not a test).

    PYTHONPATH=operator python -m benchmarks.dashboard_cost [--nodes 5000] [--pods 20000] [--pending 10000]

Builds a scheduler's cache with N nodes in three zones and bound pods, fills PendingPods with
pending pods (the 32 latest with per-node detail over every node), then times what the metrics
port does per page refresh: /debug/overview (computed, then JSON-encoded) and /debug/pending.
A "slice" is a stretch without yielding to the loop, in CPU time of the loop's thread: the
most a scheduling cycle can wait behind a refresh (plus whatever preemption the OS adds).
Also prints the memory the pending store holds (tracemalloc).
"""
from __future__ import annotations

import argparse
import asyncio
import gc
import json
import statistics
import time
import tracemalloc

from kopfsched.cache import Cache
from kopfsched.config.defaults import default_profile
from kopfsched.framework.diagnosis import Diagnosis, FitError
from kopfsched.framework.interface import NodeToStatus
from kopfsched.framework.status import Status
from kopfsched.framework.types import PodInfo
from kopfsched.plugins.registry import in_tree_registry
from kopfsched.scheduler import view
from kopfsched.scheduler.activity import Activity
from kopfsched.scheduler.observer import Attempt
from kopfsched.scheduler.pending import PendingPods
from kopfsched.scheduler.scheduler import Scheduler
from kopfsched.simulate.client import InMemoryClusterClient
from kopfsched.testing import make_node, make_pod


class SliceTimer:
    """Wraps view._yield: records the time between two yields (the loop is held meanwhile)."""

    def __init__(self) -> None:
        self.slices: list[float] = []
        """CPU seconds of this thread per slice: a busy shared machine's preemptions left out."""
        self._since = time.thread_time()
        self._yield = view._yield

    def start(self) -> None:
        self._since = time.thread_time()

    def stop(self) -> None:
        self.slices.append(time.thread_time() - self._since)

    async def __call__(self) -> None:
        self.stop()
        await self._yield()
        self.start()


def build(nodes: int, pods: int, pending: int) -> tuple[Scheduler, Activity, float]:
    registry = in_tree_registry()
    scheduler = Scheduler(cache=Cache(), client=InMemoryClusterClient(), registry=registry)
    scheduler.set_profiles([default_profile(registry)])
    names = [f"node-{i:05d}" for i in range(nodes)]
    for i, name in enumerate(names):
        scheduler.cache.add_node(make_node(name, cpu="16", memory="64Gi",
                                           labels={"topology.kubernetes.io/zone": f"zone-{'abc'[i % 3]}"}))
    for i in range(pods):
        scheduler.cache.add_pod(make_pod(f"bound-{i}", uid=f"bound-{i}", node_name=names[i % nodes],
                                         requests={"cpu": f"{100 * (1 + i % 7)}m", "memory": "256Mi"}))
    activity = Activity()
    for i in range(600):
        activity.attempted(Attempt(pod=PodInfo(make_pod(f"b{i}", uid=f"b{i}")), profile="default-scheduler",
                                   result="scheduled", seconds=0.002 * (1 + i % 9), node=names[i % nodes]))
    reasons = ("Insufficient cpu", "node(s) had untolerated taint(s)",
               "node(s) didn't match Pod's node affinity/selector")
    plugins = ("NodeResourcesFit", "TaintToleration", "NodeAffinity")
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    store = PendingPods()
    for i in range(pending):
        pod = PodInfo(make_pod(f"pending-{i:05d}", uid=f"pending-{i}", requests={"cpu": "32"}))
        detailed = i >= pending - 32
        statuses = ({name: Status.unschedulable(reasons[j % 3]).with_plugin(plugins[j % 3])
                     for j, name in enumerate(names)} if detailed
                    else {names[0]: Status.unschedulable(reasons[0]).with_plugin(plugins[0])})
        diagnosis = Diagnosis(node_to_status=NodeToStatus(statuses))
        fit = FitError(pod_key=pod.key, num_all_nodes=nodes, diagnosis=diagnosis)
        store.record(Attempt(pod=pod, profile="default-scheduler", result="unschedulable", seconds=0.01,
                             message=str(fit), diagnosis=diagnosis, attempts=1 + i % 4), fit)
        del pod, statuses, diagnosis, fit
    gc.collect()
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    scheduler.pending = store
    # A long-running operator's heap is old: keep the cyclic GC's full passes over the objects
    # built here (pauses the operator has with or without a dashboard) out of the figures.
    gc.collect()
    gc.freeze()
    return scheduler, activity, held


async def measure(scheduler: Scheduler, activity: Activity, rounds: int) -> dict[str, list[float]]:
    timer = SliceTimer()
    view._yield = timer  # type: ignore[assignment]
    totals: dict[str, list[float]] = {"overview": [], "overview_bytes": [], "pending": [], "pending_bytes": [],
                                      "slices": []}
    for _ in range(rounds):
        timer.slices.clear()
        started = time.perf_counter()
        timer.start()
        data = await view.overview(scheduler, activity, scheduler.cache)
        body = json.dumps(data, separators=(",", ":")).encode()  # as DashboardRoutes, in one go
        timer.stop()
        totals["overview"].append(time.perf_counter() - started)
        totals["overview_bytes"].append(len(body))
        started = time.perf_counter()
        timer.start()
        pending = await view.pending_body(scheduler.pending)
        timer.stop()
        totals["pending"].append(time.perf_counter() - started)
        totals["pending_bytes"].append(len(pending))
        totals["slices"].extend(timer.slices)
    return totals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=20000)
    parser.add_argument("--pending", type=int, default=10000)
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    scheduler, activity, held = build(args.nodes, args.pods, args.pending)
    totals = asyncio.run(measure(scheduler, activity, args.rounds))
    ms = lambda values: f"median {statistics.median(values) * 1000:.1f} ms, max {max(values) * 1000:.1f} ms"  # noqa: E731
    print(f"{args.nodes} nodes, {args.pods} bound pods, {args.pending} pending pods, {args.rounds} refreshes")
    print(f"/debug/overview: {ms(totals['overview'])} in total, {totals['overview_bytes'][-1] / 1024:.0f} KiB")
    print(f"/debug/pending:  {ms(totals['pending'])} in total, {totals['pending_bytes'][-1] / 2**20:.1f} MiB")
    slices = sorted(totals["slices"])
    print(f"slices holding the loop: {len(slices)}, median {statistics.median(slices) * 1000:.2f} ms, "
          f"p99 {slices[int(len(slices) * 0.99)] * 1000:.1f} ms, max {slices[-1] * 1000:.1f} ms")
    if args.pending:
        print(f"pending store: {held / 2**20:.1f} MiB held, {held / args.pending / 1024:.2f} KiB per pending pod "
              f"({min(32, args.pending)} with per-node detail over {args.nodes} nodes)")


if __name__ == "__main__":
    main()
