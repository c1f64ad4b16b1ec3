"""PodGroupManager: the gang bookkeeping behind the Coscheduling plugin (scheduler-plugins'
pkg/coscheduling/core), kept apart from the plugin so it can be tested on its own.

A pod joins the PodGroup named by its `scheduling.x-k8s.io/pod-group` label, in its own
namespace. The manager reads PodGroups (`scheduling.x-k8s.io/v1alpha1`) from the handle's
object lister and pods from its pod lister, so it holds no copy of the cluster: only two
short-lived memories on the handle's clock, as upstream's TTL caches —
  * permitted groups: passed the minResources check, skip it for `schedule_timeout`;
  * backed-off groups: failed recently, refused at PreFilter for `podGroupBackoffSeconds`.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Container, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kopfsched.framework.handle import ObjectLister, PodLister, SnapshotLister
from kopfsched.framework.resources import CPU, PODS, Resource, resource_list
from kopfsched.framework.types import NodeInfo, Obj, PodInfo, parse_time

POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
POD_GROUP_KIND = "PodGroup"
POD_GROUP_API_VERSION = "scheduling.x-k8s.io/v1alpha1"
DEFAULT_WAIT_TIME = 60.0
"""Upstream's DefaultWaitTime, used when neither the PodGroup nor the args set a timeout."""


class PermitOutcome(enum.Enum):
    """The manager's Permit answer (upstream's core.Status values)."""

    POD_GROUP_NOT_SPECIFIED = "PodGroup not specified"
    POD_GROUP_NOT_FOUND = "PodGroup not found"
    SUCCESS = "Success"
    WAIT = "Wait"


@dataclass(frozen=True, slots=True)
class PodGroup:
    """A typed view of a PodGroup object's spec."""

    namespace: str
    name: str
    min_member: int
    schedule_timeout_seconds: int | None
    min_resources: dict[str, int] | None
    creation_time: float | None
    obj: Obj

    @property
    def full_name(self) -> str:
        return f"{self.namespace}/{self.name}"

    @classmethod
    def from_obj(cls, obj: Obj) -> PodGroup:
        meta = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        timeout = spec.get("scheduleTimeoutSeconds")
        min_resources = spec.get("minResources")
        return cls(
            namespace=meta.get("namespace") or "default",
            name=meta.get("name") or "",
            min_member=int(spec.get("minMember") or 0),
            schedule_timeout_seconds=int(timeout) if timeout is not None else None,
            min_resources=resource_list(min_resources) if min_resources is not None else None,
            creation_time=parse_time(meta.get("creationTimestamp")),
            obj=obj,
        )


def pod_group_label(pod: PodInfo) -> str:
    return pod.labels.get(POD_GROUP_LABEL, "")


def pod_group_full_name(pod: PodInfo) -> str:
    """"namespace/group" for a pod in a group, "" otherwise (upstream's GetPodGroupFullName)."""
    name = pod_group_label(pod)
    return f"{pod.namespace}/{name}" if name else ""


def wait_time(pod_group: PodGroup | None, schedule_timeout: float) -> float:
    """Upstream's GetWaitTimeDuration: the group's scheduleTimeoutSeconds, else the args'
    permitWaitingTimeSeconds, else DEFAULT_WAIT_TIME."""
    if pod_group is not None and pod_group.schedule_timeout_seconds is not None:
        return float(pod_group.schedule_timeout_seconds)
    return schedule_timeout or DEFAULT_WAIT_TIME


class _ExpiringSet:
    """Names that expire at a clock time (upstream's go-cache with a TTL)."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._until: dict[str, float] = {}

    def add(self, name: str, ttl: float) -> None:
        self._until[name] = self._clock() + ttl

    def __contains__(self, name: object) -> bool:
        until = self._until.get(name) if isinstance(name, str) else None
        if until is None:
            return False
        if self._clock() >= until:
            del self._until[name]  # type: ignore[arg-type]
            return False
        return True

    def discard(self, name: str) -> None:
        self._until.pop(name, None)


class PodGroupManager:
    """PreFilter and Permit decisions for pods of PodGroups, and the group lookups the
    plugin's QueueSort, PostFilter and Unreserve need."""

    def __init__(self, *, objects: ObjectLister, pods: PodLister, snapshot: SnapshotLister,
                 clock: Callable[[], float], schedule_timeout: float) -> None:
        self.objects = objects
        self.pods = pods
        self.snapshot = snapshot
        self.schedule_timeout = schedule_timeout
        self.permitted = _ExpiringSet(clock)
        self.backed_off = _ExpiringSet(clock)

    # -- lookups ---------------------------------------------------------------------------

    def get_pod_group(self, pod: PodInfo) -> tuple[str, PodGroup | None]:
        """(full name or "" when the pod is in no group, the group or None when not found)."""
        name = pod_group_label(pod)
        if not name:
            return "", None
        obj = self.objects.get(POD_GROUP_KIND, name, pod.namespace)
        return f"{pod.namespace}/{name}", PodGroup.from_obj(obj) if obj is not None else None

    def members(self, namespace: str, group: str) -> list[PodInfo]:
        """Every known pod labelled for the group (upstream lists them from the pod informer)."""
        return [p for p in self.pods.list(namespace) if pod_group_label(p) == group]

    def assigned_count(self, namespace: str, group: str) -> int:
        """Members assumed or bound to a node (the pod at Permit is assumed already)."""
        return sum(1 for p in self.members(namespace, group) if p.node_name)

    def creation_timestamp(self, pod: PodInfo, default: float) -> float:
        """The group's creation time for QueueSort, or `default` for pods outside a
        (known, timestamped) group."""
        _, pod_group = self.get_pod_group(pod)
        if pod_group is None or pod_group.creation_time is None:
            return default
        return pod_group.creation_time

    # -- PreFilter / Permit ------------------------------------------------------------------

    def pre_filter(self, pod: PodInfo) -> str | None:
        """Why the pod cannot be scheduled now (upstream's error text), or None.

        A pod of a group that does not exist passes here; Permit refuses it."""
        full_name, pod_group = self.get_pod_group(pod)
        if pod_group is None:
            return None
        if full_name in self.backed_off:
            return f"podGroup {full_name} failed recently"
        total = len(self.members(pod.namespace, pod_group.name))
        if total < pod_group.min_member:
            return (f"pre-filter pod {pod.name} cannot find enough sibling pods, "
                    f"current pods number: {total}, minMember of group: {pod_group.min_member}")
        if pod_group.min_resources is None or full_name in self.permitted:
            return None
        wanted = dict(pod_group.min_resources)
        wanted[PODS] = pod_group.min_member
        gap = cluster_resource_gap(self.snapshot.node_infos(), wanted, full_name)
        if gap:
            return f"resource gap: {format_resource_map(gap)}"
        self.permitted.add(full_name, self.schedule_timeout)
        return None

    def permit(self, pod: PodInfo) -> PermitOutcome:
        full_name, pod_group = self.get_pod_group(pod)
        if not full_name:
            return PermitOutcome.POD_GROUP_NOT_SPECIFIED
        if pod_group is None:
            return PermitOutcome.POD_GROUP_NOT_FOUND
        if self.assigned_count(pod.namespace, pod_group.name) >= pod_group.min_member:
            return PermitOutcome.SUCCESS
        return PermitOutcome.WAIT

    def siblings_to_activate(self, pod: PodInfo) -> list[PodInfo]:
        """The first member to wait asks the queue to bring back its unassigned siblings
        (upstream's ActivateSiblings, only for the 0th assigned pod: scheduler-plugins #682)."""
        group = pod_group_label(pod)
        if not group:
            return []
        members = self.members(pod.namespace, group)
        if sum(1 for p in members if p.node_name) != 1:
            return []
        return [p for p in members if p.uid != pod.uid and not p.node_name]

    def delete_permitted_pod_group(self, full_name: str) -> None:
        self.permitted.discard(full_name)

    def backoff_pod_group(self, full_name: str, seconds: float) -> None:
        if seconds > 0:
            self.backed_off.add(full_name, seconds)


def _left_on_node(node: NodeInfo, full_name: str) -> Resource:
    """What the node has left once the group's own pods on it are taken off (they count
    towards the group's minResources rather than against it)."""
    requested = node.requested.clone()
    pods = 0
    for pod in node.pods.values():
        if pod_group_full_name(pod) == full_name:
            requested.add(pod.requests, -1)
        else:
            pods += 1
    left = node.allocatable.clone()
    left.add(requested, -1)
    left.allowed_pod_number = node.allocatable.allowed_pod_number - pods
    return left


def cluster_resource_gap(nodes: Iterable[NodeInfo], wanted: Mapping[str, int], full_name: str) -> dict[str, int]:
    """Upstream's CheckClusterResource: take what each node has left off the request until
    nothing is missing; returns what is still missing (empty when it all fits)."""
    missing = {name: amount for name, amount in wanted.items() if amount > 0}
    for node in nodes:
        if node.node is None:
            continue
        left = _left_on_node(node, full_name)
        for name in list(missing):
            remaining = missing[name] - left.get(name)
            if remaining <= 0:
                del missing[name]
            else:
                missing[name] = remaining
        if not missing:
            break
    return missing


def format_resource_map(amounts: Mapping[str, int]) -> str:
    """Go's `map[cpu:2 memory:1Gi]` form, with quantities as Kubernetes writes them."""
    def quantity(name: str, value: int) -> str:
        if name == CPU:
            return str(value // 1000) if value % 1000 == 0 else f"{value}m"
        for suffix, size in (("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
            if value >= size and value % size == 0:
                return f"{value // size}{suffix}"
        return str(value)

    return "map[" + " ".join(f"{name}:{quantity(name, amounts[name])}" for name in sorted(amounts)) + "]"


# -- PodGroup status ------------------------------------------------------------------------------

def pod_group_status(pod_group: Obj, members: Iterable[PodInfo], *,
                     is_assumed: Callable[[str], bool] = lambda uid: False) -> dict[str, Any]:
    """The PodGroup's `status` as the scheduler sees it: phase and counts.

    `scheduled` counts members bound to a node (assumed ones are still Scheduling);
    `running`/`succeeded`/`failed` count pod phases. Phases, from the first that holds:
    Pending (fewer than minMember pods exist), Finished, Failed, Running, Scheduled (as
    upstream's controller), Scheduling (some member assumed or bound), PreScheduling."""
    view = PodGroup.from_obj(pod_group)
    pods = list(members)
    phases = [(p.pod.get("status") or {}).get("phase") for p in pods]
    running, succeeded, failed = (phases.count(phase) for phase in ("Running", "Succeeded", "Failed"))
    assigned = [p for p in pods if p.node_name]
    scheduled = sum(1 for p in assigned if not is_assumed(p.uid))
    minimum = view.min_member
    if len(pods) < minimum or not pods:
        phase = "Pending"
    elif succeeded >= minimum:
        phase = "Finished"
    elif failed and failed + running + succeeded >= minimum:
        phase = "Failed"
    elif running + succeeded >= minimum:
        phase = "Running"
    elif scheduled >= minimum:
        phase = "Scheduled"
    elif assigned:
        phase = "Scheduling"
    else:
        phase = "PreScheduling"
    return {"phase": phase, "scheduled": scheduled, "running": running, "succeeded": succeeded,
            "failed": failed}


def pod_group_statuses(objects: ObjectLister, pods: PodLister, *,
                       is_assumed: Callable[[str], bool] = lambda uid: False) -> dict[str, dict[str, Any]]:
    """"namespace/name" → status for every PodGroup in the lister (simulate's report)."""
    found = served_pod_group_statuses(objects, pods, served=None, is_assumed=is_assumed)
    return {key: status for key, (_, status) in sorted(found.items())}


def served_pod_group_statuses(objects: ObjectLister, pods: PodLister, *, served: Container[str] | None,
                              is_assumed: Callable[[str], bool] = lambda uid: False
                              ) -> dict[str, tuple[Obj, dict[str, Any]]]:
    """"namespace/name" → (PodGroup, status) for every PodGroup with at least one member whose
    schedulerName is in `served` (None: every PodGroup): what the kube layer writes. The pods
    are grouped in one pass, not one per group."""
    groups = objects.list(POD_GROUP_KIND)
    if not groups:
        return {}
    members: dict[str, list[PodInfo]] = {}
    for pod in pods.list():
        name = pod_group_label(pod)
        if name:
            members.setdefault(f"{pod.namespace}/{name}", []).append(pod)
    out: dict[str, tuple[Obj, dict[str, Any]]] = {}
    for obj in groups:
        key = PodGroup.from_obj(obj).full_name
        group = members.get(key, [])
        if served is None or any(p.scheduler_name in served for p in group):
            out[key] = (obj, pod_group_status(obj, group, is_assumed=is_assumed))
    return out
