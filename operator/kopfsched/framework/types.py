"""PodInfo and NodeInfo: the scheduler's views of pods and nodes.

Objects stay the plain dicts the API returns. A `PodInfo` is built once per pod version
and carries what plugins read on the hot path; a `NodeInfo` aggregates a node with the
pods assigned (or assumed) to it.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property
from typing import Any

from kopfsched.framework.affinity import (
    AffinityTerm,
    WeightedAffinityTerm,
    affinity_terms,
    weighted_affinity_terms,
)
from kopfsched.framework.resources import Resource, pod_requests_and_non_zero, resource_list

Obj = dict[str, Any]

_generation = itertools.count(1)

_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
_PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


def next_generation() -> int:
    """A process-wide, monotonically increasing change counter for NodeInfos."""
    return next(_generation)


def parse_time(raw: Any) -> float | None:
    """An RFC 3339 timestamp ("2026-01-01T00:00:00Z") as epoch seconds; None when absent or unreadable."""
    if not raw:
        return None
    try:
        return datetime.fromisoformat(str(raw).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def rfc3339(seconds: float | None = None) -> str:
    """Epoch seconds (default: now) as a metav1.Time writes them, whole seconds truncated:
    "2026-01-01T00:00:00Z", which `parse_time` reads back."""
    whole = math.floor(time.time() if seconds is None else seconds)  # as gmtime rounds
    if whole != _LAST_RFC3339[0]:  # every failed pod's condition writes one: formatted once a second
        _LAST_RFC3339[:] = [whole, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(whole))]
    return str(_LAST_RFC3339[1])


_LAST_RFC3339: list[Any] = [None, ""]


def pod_key(pod: Mapping[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace', 'default')}/{meta.get('name', '')}"


def pod_priority(pod: Mapping[str, Any]) -> int:
    priority = (pod.get("spec") or {}).get("priority")
    return priority if isinstance(priority, int) else 0


def _pvc_keys(namespace: str, volumes: list[Obj] | None) -> tuple[str, ...]:
    if not volumes:
        return ()
    claims = ((volume.get("persistentVolumeClaim") or {}).get("claimName") for volume in volumes)
    return tuple(f"{namespace}/{claim}" for claim in claims if claim)


class PodInfo:
    """A pod with the parts plugins read, computed once.

    Treat it as immutable: a new pod version gets a new PodInfo.
    """

    __slots__ = (
        "__dict__",
        "affinity",
        "has_pod_affinity",
        "has_required_anti_affinity",
        "host_ports",
        "key",
        "labels",
        "name",
        "namespace",
        "non_zero_cpu",
        "non_zero_memory",
        "pod",
        "priority",
        "pvc_keys",
        "requests",
        "spec",
        "uid",
    )

    def __init__(self, pod: Obj) -> None:
        meta = pod.get("metadata") or {}
        spec = pod.get("spec") or {}
        self.pod = pod
        self.spec = spec
        self.name: str = meta.get("name", "")
        self.namespace: str = meta.get("namespace", "default")
        self.key = f"{self.namespace}/{self.name}"
        self.uid: str = meta.get("uid") or self.key
        self.labels: dict[str, str] = meta.get("labels") or {}
        # Read for every pod the cache adds: plain attributes, cheaper than cached properties.
        affinity: Obj = spec.get("affinity") or {}
        self.affinity = affinity
        anti: Obj = (affinity.get("podAntiAffinity") or {}) if affinity else {}
        self.has_pod_affinity = bool(affinity) and bool(affinity.get("podAffinity") or anti)
        """Any pod affinity or anti-affinity term, required or preferred."""
        self.has_required_anti_affinity = bool(anti) and bool(anti.get(_REQUIRED))
        self.pvc_keys = _pvc_keys(self.namespace, spec.get("volumes"))
        """"namespace/claim" of every persistentVolumeClaim volume, in spec order (repeats kept)."""
        priority = spec.get("priority")
        self.priority = priority if isinstance(priority, int) else 0  # pod_priority
        requests, self.non_zero_cpu, self.non_zero_memory = pod_requests_and_non_zero(pod)
        self.requests = Resource.from_list(requests)
        containers = spec.get("containers") or ()
        init_containers = spec.get("initContainers")
        if init_containers:
            containers = [*containers, *(c for c in init_containers if c.get("restartPolicy") == "Always")]
        self.host_ports: tuple[tuple[str, str, int], ...] = tuple(
            (p.get("hostIP") or "0.0.0.0", p.get("protocol") or "TCP", p["hostPort"])
            for c in containers if c.get("ports")
            for p in c["ports"]
            if p.get("hostPort")
        ) if any("ports" in c for c in containers) else ()

    def placed(self, pod: Obj) -> PodInfo:
        """This PodInfo for `pod`, a version of the same pod whose spec is this one's but for
        spec.nodeName and whose labels are this one's (the pod assumed on a node, the watch
        confirming it): the parts computed from them are shared, not computed again. The lazy
        parts are computed again when read (they may read status), but the affinity terms already
        parsed are shared too."""
        info = PodInfo.__new__(PodInfo)
        # _SHARED_WHEN_PLACED, written out: placed() runs twice per bind (assume, confirm).
        info.affinity = self.affinity
        info.has_pod_affinity = self.has_pod_affinity
        info.has_required_anti_affinity = self.has_required_anti_affinity
        info.host_ports = self.host_ports
        info.key = self.key
        info.labels = self.labels
        info.name = self.name
        info.namespace = self.namespace
        info.non_zero_cpu = self.non_zero_cpu
        info.non_zero_memory = self.non_zero_memory
        info.priority = self.priority
        info.pvc_keys = self.pvc_keys
        info.requests = self.requests
        info.uid = self.uid
        info.pod = pod
        info.spec = pod.get("spec") or {}
        if self.__dict__:  # affinity terms parsed already: from affinity, namespace and labels only
            for name in _TERMS:
                if name in self.__dict__:
                    info.__dict__[name] = self.__dict__[name]
        return info

    @property
    def node_name(self) -> str:
        return self.spec.get("nodeName") or ""

    @property
    def scheduler_name(self) -> str:
        return self.spec.get("schedulerName") or "default-scheduler"

    @cached_property
    def required_affinity_terms(self) -> tuple[AffinityTerm, ...]:
        """podAffinity.requiredDuringSchedulingIgnoredDuringExecution, parsed."""
        return affinity_terms(self.namespace, self.labels,
                              (self.affinity.get("podAffinity") or {}).get(_REQUIRED))

    @cached_property
    def required_anti_affinity_terms(self) -> tuple[AffinityTerm, ...]:
        return affinity_terms(self.namespace, self.labels,
                              (self.affinity.get("podAntiAffinity") or {}).get(_REQUIRED))

    @cached_property
    def preferred_affinity_terms(self) -> tuple[WeightedAffinityTerm, ...]:
        return weighted_affinity_terms(self.namespace, self.labels,
                                       (self.affinity.get("podAffinity") or {}).get(_PREFERRED))

    @cached_property
    def preferred_anti_affinity_terms(self) -> tuple[WeightedAffinityTerm, ...]:
        return weighted_affinity_terms(self.namespace, self.labels,
                                       (self.affinity.get("podAntiAffinity") or {}).get(_PREFERRED))

    @property
    def tolerations(self) -> list[Obj]:
        # A plain property: read by several Filter and Score plugins each cycle, where
        # cached_property's first read takes its class-wide lock, which cost more.
        return self.spec.get("tolerations") or _NO_TOLERATIONS

    @cached_property
    def creation_timestamp(self) -> str:
        return (self.pod.get("metadata") or {}).get("creationTimestamp") or ""

    @cached_property
    def start_time(self) -> float | None:
        """status.startTime in epoch seconds; None when the pod has not started."""
        return parse_time((self.pod.get("status") or {}).get("startTime"))

    @property
    def is_terminating(self) -> bool:
        return bool((self.pod.get("metadata") or {}).get("deletionTimestamp"))

    def __repr__(self) -> str:
        return f"PodInfo({self.key})"


_NO_TOLERATIONS: list[Obj] = []
"""PodInfo.tolerations of a pod without any (shared: never modified)."""

_SHARED_WHEN_PLACED = ("affinity", "has_pod_affinity", "has_required_anti_affinity", "host_ports", "key", "labels",
                       "name", "namespace", "non_zero_cpu", "non_zero_memory", "priority", "pvc_keys", "requests",
                       "uid")
"""Every attribute __init__ sets but pod and spec: all computed from the spec (but nodeName) and metadata."""
_TERMS = ("required_affinity_terms", "required_anti_affinity_terms", "preferred_affinity_terms",
          "preferred_anti_affinity_terms")
"""The lazy parts placed() shares once computed (they read affinity, namespace and labels)."""


@dataclass(slots=True)
class ImageStateSummary:
    """An image's size and on how many nodes it is present (shared across NodeInfos)."""

    size: int
    num_nodes: int


class HostPortInfo:
    """Host ports in use on a node: ip -> {(protocol, port)}; 0.0.0.0 conflicts with every ip.

    A set, as upstream's HostPortInfo: removing a pod's port frees it even when another pod on
    the node holds the same one (pods bound without the scheduler can share a port), so a
    preemption dry run or a deletion makes that port look free, as in v1.37.2."""

    __slots__ = ("_ports",)
    WILDCARD = "0.0.0.0"

    def __init__(self) -> None:
        self._ports: dict[str, set[tuple[str, int]]] = {}

    def add(self, ip: str, protocol: str, port: int) -> None:
        self._ports.setdefault(ip, set()).add((protocol, port))

    def remove(self, ip: str, protocol: str, port: int) -> None:
        slot = self._ports.get(ip)
        if not slot:
            return
        slot.discard((protocol, port))
        if not slot:
            del self._ports[ip]

    def check_conflict(self, ip: str, protocol: str, port: int) -> bool:
        if port <= 0:
            return False
        want = (protocol, port)
        if ip == self.WILDCARD:
            return any(want in slot for slot in self._ports.values())
        return want in self._ports.get(ip, ()) or want in self._ports.get(self.WILDCARD, ())

    def __len__(self) -> int:
        return sum(len(slot) for slot in self._ports.values())

    def clone(self) -> HostPortInfo:
        other = HostPortInfo()
        if self._ports:
            other._ports = {ip: set(slot) for ip, slot in self._ports.items()}
        return other


class NodeInfo:
    """A node and the pods on it, with their summed requests and used host ports.

    Only the cache (and preemption's dry runs, on clones) mutates a NodeInfo; every change
    bumps `generation` so the snapshot knows what to refresh.
    """

    __slots__ = (
        "allocatable",
        "generation",
        "image_states",
        "labels",
        "name",
        "node",
        "non_zero_requested",
        "pods",
        "pods_with_affinity",
        "pods_with_required_anti_affinity",
        "pvc_ref_counts",
        "requested",
        "taints",
        "unschedulable",
        "used_ports",
    )

    def __init__(self, node: Obj | None = None) -> None:
        self.node: Obj | None = None
        self.name = ""
        self.labels: dict[str, str] = {}
        self.taints: list[Obj] = []
        self.unschedulable = False
        self.allocatable = Resource()
        self.image_states: dict[str, ImageStateSummary] = {}
        self.pods: dict[str, PodInfo] = {}
        self.pods_with_affinity: dict[str, PodInfo] = {}
        self.pods_with_required_anti_affinity: dict[str, PodInfo] = {}
        self.requested = Resource()
        self.non_zero_requested = Resource()
        self.used_ports = HostPortInfo()
        self.pvc_ref_counts: dict[str, int] = {}
        self.generation = next_generation()
        if node is not None:
            self.set_node(node)

    def set_node(self, node: Obj) -> None:
        meta = node.get("metadata") or {}
        spec = node.get("spec") or {}
        self.node = node
        self.name = meta.get("name", "")
        self.labels = meta.get("labels") or {}
        self.taints = spec.get("taints") or []
        self.unschedulable = bool(spec.get("unschedulable"))
        self.allocatable = Resource.from_list(resource_list((node.get("status") or {}).get("allocatable")))
        self.generation = next_generation()

    def remove_node(self) -> None:
        """Keep the pods (a ghost) until they are removed too, as upstream."""
        self.node = None
        self.generation = next_generation()

    def add_pod(self, pod_info: PodInfo) -> None:
        self.pods[pod_info.uid] = pod_info
        if pod_info.has_pod_affinity:
            self.pods_with_affinity[pod_info.uid] = pod_info
        if pod_info.has_required_anti_affinity:
            self.pods_with_required_anti_affinity[pod_info.uid] = pod_info
        self._account(pod_info, +1)

    def remove_pod(self, pod_info: PodInfo) -> bool:
        """Remove the pod with this uid; False when it was not here."""
        current = self.pods.pop(pod_info.uid, None)
        if current is None:
            return False
        self.pods_with_affinity.pop(current.uid, None)
        self.pods_with_required_anti_affinity.pop(current.uid, None)
        self._account(current, -1)
        return True

    def replace_pod(self, old: PodInfo, new: PodInfo) -> bool:
        """remove_pod(old) then add_pod(new), for a `new` that counts as `old` does (its requests
        the very same object: the assumed pod confirmed bound): the summed requests are left as
        they are. False, and nothing done, when `old` is not this node's or `new` may count otherwise."""
        uid = old.uid
        if (self.pods.get(uid) is not old or new.uid != uid or new.requests is not old.requests
                or new.non_zero_cpu != old.non_zero_cpu or new.non_zero_memory != old.non_zero_memory
                or new.host_ports != old.host_ports or new.pvc_keys != old.pvc_keys):
            return False
        pods = self.pods
        del pods[uid]
        pods[uid] = new
        self.pods_with_affinity.pop(uid, None)
        self.pods_with_required_anti_affinity.pop(uid, None)
        if new.has_pod_affinity:
            self.pods_with_affinity[uid] = new
        if new.has_required_anti_affinity:
            self.pods_with_required_anti_affinity[uid] = new
        # Ports and claims as removing then adding leaves them, down to their dicts' order.
        for ip, protocol, port in old.host_ports:
            self.used_ports.remove(ip, protocol, port)
        for ip, protocol, port in new.host_ports:
            self.used_ports.add(ip, protocol, port)
        counts = self.pvc_ref_counts
        for key in old.pvc_keys:
            count = counts.get(key, 0) - 1
            if count > 0:
                counts[key] = count
            else:
                counts.pop(key, None)
        for key in new.pvc_keys:
            counts[key] = counts.get(key, 0) + 1
        self.generation = next(_generation)
        return True

    def _account(self, pod_info: PodInfo, sign: int) -> None:
        # Hot in preemption's dry runs: the per-pod parts (claims) are precomputed on the PodInfo.
        self.requested.add(pod_info.requests, sign)
        non_zero = self.non_zero_requested
        non_zero.milli_cpu += sign * pod_info.non_zero_cpu
        non_zero.memory += sign * pod_info.non_zero_memory
        if pod_info.host_ports:
            for ip, protocol, port in pod_info.host_ports:
                if sign > 0:
                    self.used_ports.add(ip, protocol, port)
                else:
                    self.used_ports.remove(ip, protocol, port)
        for key in pod_info.pvc_keys:
            count = self.pvc_ref_counts.get(key, 0) + sign
            if count > 0:
                self.pvc_ref_counts[key] = count
            else:
                self.pvc_ref_counts.pop(key, None)
        self.generation = next(_generation)

    def iter_pods(self) -> Iterator[PodInfo]:
        return iter(self.pods.values())

    def _same_node(self) -> NodeInfo:
        """A NodeInfo sharing this one's node-level fields (never mutated in place), without pods."""
        other = NodeInfo.__new__(NodeInfo)
        other.node = self.node
        other.name = self.name
        other.labels = self.labels
        other.taints = self.taints
        other.unschedulable = self.unschedulable
        other.allocatable = self.allocatable
        other.image_states = self.image_states
        return other

    def clone(self) -> NodeInfo:
        """A copy for dry runs (preemption, nominated pods): pods are shared, totals are not."""
        other = self._same_node()
        other.pods = dict(self.pods)
        other.pods_with_affinity = dict(self.pods_with_affinity) if self.pods_with_affinity else {}
        other.pods_with_required_anti_affinity = (
            dict(self.pods_with_required_anti_affinity) if self.pods_with_required_anti_affinity else {})
        other.requested = self.requested.clone()
        other.non_zero_requested = self.non_zero_requested.clone()
        other.used_ports = self.used_ports.clone()
        other.pvc_ref_counts = dict(self.pvc_ref_counts) if self.pvc_ref_counts else {}
        other.generation = self.generation
        return other

    def without_pods(self, gone: Iterable[PodInfo]) -> NodeInfo:
        """A copy for dry runs without the given pods: the totals are summed afresh over the
        pods that stay, cheaper than a clone when most pods go (preemption's victims)."""
        gone = list(gone)
        uids = {pod.uid for pod in gone}
        other = self._same_node()
        other.pods = {}
        other.pods_with_affinity = {}
        other.pods_with_required_anti_affinity = {}
        other.requested = Resource()
        other.non_zero_requested = Resource()
        other.used_ports = HostPortInfo()
        other.pvc_ref_counts = {}
        other.generation = self.generation
        for uid, pod in self.pods.items():
            if uid not in uids:
                other.add_pod(pod)
        # As removing them one by one would: a gone pod's ports are free even if a pod that
        # stays holds the same one (HostPortInfo is a set).
        for pod in gone:
            for ip, protocol, port in pod.host_ports:
                other.used_ports.remove(ip, protocol, port)
        return other

    def __repr__(self) -> str:
        return f"NodeInfo({self.name}, pods={len(self.pods)})"
