"""What the dashboard and /debug/pending read from a running scheduler, computed without
holding the event loop.

Everything here runs in the scheduler's own loop (so it reads a consistent cache and
queue, with no locks), but in slices: after every few hundred nodes or a few dozen pods it
yields to the loop, so a scheduling cycle never waits behind a page refresh for more than one slice
(a few milliseconds at most, whatever the cluster size). JSON is encoded slice by slice
too. `python -m tests.observability.dashboard_cost` measures the longest slice at 5000 nodes.

Node utilization lists every node up to `NODE_ROWS` nodes; beyond that it aggregates per
zone (sums, a histogram of CPU use, the busiest nodes), so a page stays small with
thousands of nodes.
"""

from __future__ import annotations

import asyncio
import heapq
import json
from collections.abc import Iterable
from typing import Any

from kopfsched.cache.cache import Cache
from kopfsched.framework.queued import QueuedPodInfo
from kopfsched.framework.types import NodeInfo
from kopfsched.plugins.schedulinggates import SCHEDULING_GATED_MESSAGE
from kopfsched.scheduler.activity import Activity
from kopfsched.scheduler.pending import PendingPod, PendingPods
from kopfsched.scheduler.scheduler import Scheduler

NODE_SLICE = 250
"""Nodes summed between two yields to the loop."""
QUEUE_SLICE = 2000
"""Queued pods counted between two yields (a dict update each)."""
PENDING_SLICE = 40
"""Pending pods encoded between two yields (each costs more than a node's sum)."""
NODE_ROWS = 300
"""Above this many nodes, utilization is aggregated per zone."""
BUSIEST = 10
PENDING_ON_PAGE = 50
ZONE_LABELS = ("topology.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/zone")
NO_ZONE = "(no zone)"
QUEUES = ("active", "backoff", "unschedulable", "gated")


async def _yield() -> None:
    await asyncio.sleep(0)


def _zone(node: NodeInfo) -> str:
    labels = node.labels
    for key in ZONE_LABELS:
        value = labels.get(key)
        if value:
            return value
    return NO_ZONE


def _node_row(node: NodeInfo) -> dict[str, Any]:
    req, alloc = node.requested, node.allocatable
    return {"name": node.name, "cpu": [req.milli_cpu, alloc.milli_cpu], "memory": [req.memory, alloc.memory],
            "pods": [len(node.pods), alloc.allowed_pod_number], "unschedulable": node.unschedulable,
            "taints": [_taint_text(t) for t in node.taints],
            # Extended resources the node offers (nvidia.com/gpu, ...): [requested, allocatable].
            "extended": {r: [req.get(r), amount] for r, amount in sorted(alloc.scalar.items()) if amount > 0}}


def _taint_text(taint: dict[str, Any]) -> str:
    """As kubectl describe node prints a taint: key=value:Effect."""
    value = taint.get("value")
    return f"{taint.get('key', '')}{'=' + value if value else ''}:{taint.get('effect', '')}"


def _fraction(used: int, total: int) -> float:
    return used / total if total > 0 else 0.0


async def node_utilization(cache: Cache, *, rows_limit: int = NODE_ROWS) -> dict[str, Any]:
    """{"nodes": N, "aggregated": bool, "zones": [{"zone", "nodes", "cpu": [requested, allocatable]
    (millicores), "memory": [bytes, bytes], "pods": [count, allowed], "rows": [...] (per node, when
    not aggregated), "cpuHistogram": [10 counts of nodes by CPU requested 0-10%..90-100%+]}],
    "busiest": [node rows]} — requested as the scheduler's cache counts it (assumed pods included)."""
    nodes = cache.node_infos()
    aggregated = len(nodes) > rows_limit
    zones: dict[str, dict[str, Any]] = {}
    busiest: list[tuple[float, str, dict[str, Any]]] = []
    for start in range(0, len(nodes), NODE_SLICE):
        for node in nodes[start:start + NODE_SLICE]:
            if node.node is None:
                continue  # removed while we yielded
            zone = zones.get(_zone(node))
            if zone is None:
                zone = zones[_zone(node)] = {"zone": _zone(node), "nodes": 0, "cpu": [0, 0], "memory": [0, 0],
                                             "pods": [0, 0], "rows": [], "cpuHistogram": [0] * 10}
            req, alloc = node.requested, node.allocatable
            zone["nodes"] += 1
            zone["cpu"][0] += req.milli_cpu
            zone["cpu"][1] += alloc.milli_cpu
            zone["memory"][0] += req.memory
            zone["memory"][1] += alloc.memory
            zone["pods"][0] += len(node.pods)
            zone["pods"][1] += alloc.allowed_pod_number
            cpu = _fraction(req.milli_cpu, alloc.milli_cpu)
            zone["cpuHistogram"][min(int(cpu * 10), 9)] += 1
            if aggregated:
                busiest.append((max(cpu, _fraction(req.memory, alloc.memory)), node.name, node))  # type: ignore[arg-type]
            else:
                zone["rows"].append(_node_row(node))
        await _yield()
    top: list[dict[str, Any]] = []
    if aggregated:
        top = [_node_row(node) for _, _, node in  # type: ignore[arg-type]
               heapq.nsmallest(BUSIEST, busiest, key=lambda item: (-item[0], item[1]))]
    for zone in zones.values():
        if aggregated:
            del zone["rows"]
        else:
            zone["rows"].sort(key=lambda row: row["name"])
    return {"nodes": len(nodes), "aggregated": aggregated,
            "zones": sorted(zones.values(), key=lambda z: z["zone"]), "busiest": top}


async def queue_depths(scheduler: Scheduler) -> dict[str, dict[str, int]]:
    """Queue depths per scheduler name, plus "*" for the whole queue."""
    queue = scheduler.queue
    depths: dict[str, dict[str, int]] = {"*": {q: 0 for q in QUEUES}}
    depths["*"].update(queue.pending_counts())
    for where, pods in (("active", queue.active_pods()), ("backoff", queue.backoff_pods()),
                        ("unschedulable", queue.unschedulable_pods()), ("gated", queue.gated_pods())):
        pods = list(pods)
        for start in range(0, len(pods), QUEUE_SLICE):
            for qpi in pods[start:start + QUEUE_SLICE]:
                counts = depths.setdefault(qpi.pod_info.scheduler_name, {q: 0 for q in QUEUES})
                counts[where] += 1
            await _yield()
    return depths


def served_profiles(scheduler: Scheduler) -> list[dict[str, Any]]:
    return [{"schedulerName": name, "plugins": profile.framework.effective_plugins(),
             "extenders": len(profile.extenders)} for name, profile in scheduler.profiles.items()]


async def pending_body(pending: PendingPods) -> bytes:
    """The /debug/pending document, encoded slice by slice."""
    entries = list(pending)
    entries.reverse()  # most recently attempted first
    parts: list[bytes] = []
    for start in range(0, len(entries), PENDING_SLICE):
        parts.extend(_dumps(entry.to_json()) for entry in entries[start:start + PENDING_SLICE])
        await _yield()
    return b'{"pods":[' + b",".join(parts) + b"]}"


def pending_summary(pending: PendingPods, *, limit: int = PENDING_ON_PAGE,
                    gated: Iterable[QueuedPodInfo] = ()) -> dict[str, Any]:
    """The dashboard's pending list: the `limit` most recently attempted, then gated pods
    (never attempted: PodScheduled=False, reason SchedulingGated), and the totals."""
    latest: list[PendingPod] = []
    for entry in pending.latest():
        latest.append(entry)
        if len(latest) >= limit:
            break
    # A pod gated after an attempt (a preemptor waiting for its victims) is listed as attempted.
    gated = [qpi for qpi in gated if pending.get(qpi.uid) is None]
    pods = [entry.to_json() for entry in latest]
    pods += [_gated_entry(qpi) for qpi in gated[:max(limit - len(pods), 0)]]
    return {"total": len(pending) + len(gated), "pods": pods}


def _gated_entry(qpi: QueuedPodInfo) -> dict[str, Any]:
    pod = qpi.pod_info
    gates = [g.get("name", "") for g in (pod.pod.get("spec") or {}).get("schedulingGates") or ()]
    return {"namespace": pod.namespace, "name": pod.name, "schedulerName": pod.scheduler_name, "attempts": 0,
            "lastAttempt": None, "message": SCHEDULING_GATED_MESSAGE if gates else "gated by a PreEnqueue plugin",
            "reasons": {}, "result": "SchedulingGated", "gates": gates, "nodes": 0, "plugins": {},
            "preemption": None, "detail": False}


def pending_pod(pending: PendingPods, namespace: str, name: str) -> dict[str, Any] | None:
    """One pod's entry with its per-node `filter` map (empty when its detail is no longer held)."""
    entry = pending.find(namespace, name)
    if entry is None:
        return None
    return {**entry.to_json(), "filter": entry.detail_json()}


async def overview(scheduler: Scheduler, activity: Activity, cache: Cache) -> dict[str, Any]:
    """The dashboard's data, except what only the kube layer knows (profile conditions)."""
    depths = await queue_depths(scheduler)
    nodes = await node_utilization(cache)
    return {"profiles": served_profiles(scheduler), "queues": depths, "activity": activity.to_json(),
            "pending": pending_summary(scheduler.pending, gated=scheduler.queue.gated_pods()), "nodes": nodes,
            "cache": cache.stats()}


def _dumps(data: Any) -> bytes:
    return json.dumps(data, separators=(",", ":")).encode()
