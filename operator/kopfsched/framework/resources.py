"""Resource accounting as upstream: a pod's effective requests and a node's totals.

CPU is counted in millicores, everything else in integer units (bytes, pods, devices).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kopfsched.framework.quantity import int_value, milli_value

CPU = "cpu"
MEMORY = "memory"
EPHEMERAL_STORAGE = "ephemeral-storage"
PODS = "pods"

DEFAULT_MILLI_CPU_REQUEST = 100
"""Assumed CPU request of a container that states none, for scoring (upstream's 0.1 core)."""
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024
"""Assumed memory request of a container that states none, for scoring (200 MiB)."""

_NON_MISSING = {CPU: DEFAULT_MILLI_CPU_REQUEST, MEMORY: DEFAULT_MEMORY_REQUEST}
_NAMED = frozenset((CPU, MEMORY, EPHEMERAL_STORAGE, PODS))
"""The resources Resource keeps as attributes; any other is a scalar."""
_POD_LEVEL_RESOURCES = (CPU, MEMORY)


def quantity_value(resource: str, quantity: Any) -> int:
    """A quantity in the unit the scheduler counts `resource` in."""
    try:
        return _cached_value(resource == CPU, quantity)
    except TypeError:  # unhashable: not a quantity at all; let the parser say so
        return milli_value(quantity) if resource == CPU else int_value(quantity)


@functools.lru_cache(maxsize=8192)
def _cached_value(milli: bool, quantity: Any) -> int:
    # The same few quantities ("100m", "512Mi") come back on every pod of a cluster: parsing
    # each into a Fraction again was most of the time spent loading 50 000 pods.
    return milli_value(quantity) if milli else int_value(quantity)


def resource_list(raw: Mapping[str, Any] | None) -> dict[str, int]:
    """A ResourceList (`{"cpu": "500m"}`) as scheduler units (`{"cpu": 500}`)."""
    if not raw:
        return {}
    return {name: quantity_value(name, value) for name, value in raw.items()}


class Resource:
    """Amounts of every resource a pod asks for or a node offers."""

    __slots__ = ("allowed_pod_number", "ephemeral_storage", "memory", "milli_cpu", "scalar")

    def __init__(
        self,
        milli_cpu: int = 0,
        memory: int = 0,
        ephemeral_storage: int = 0,
        allowed_pod_number: int = 0,
        scalar: dict[str, int] | None = None,
    ) -> None:
        self.milli_cpu = milli_cpu
        self.memory = memory
        self.ephemeral_storage = ephemeral_storage
        self.allowed_pod_number = allowed_pod_number
        self.scalar: dict[str, int] = scalar if scalar is not None else {}

    @classmethod
    def from_list(cls, amounts: Mapping[str, int]) -> Resource:
        get = amounts.get
        res = cls(get(CPU, 0), get(MEMORY, 0), get(EPHEMERAL_STORAGE, 0), get(PODS, 0))
        if len(amounts) > (CPU in amounts) + (MEMORY in amounts) + (EPHEMERAL_STORAGE in amounts) + (PODS in amounts):
            res.scalar = {name: value for name, value in amounts.items() if name not in _NAMED}
        return res

    def get(self, name: str) -> int:
        if name == CPU:
            return self.milli_cpu
        if name == MEMORY:
            return self.memory
        if name == EPHEMERAL_STORAGE:
            return self.ephemeral_storage
        if name == PODS:
            return self.allowed_pod_number
        return self.scalar.get(name, 0)

    def set(self, name: str, value: int) -> None:
        if name == CPU:
            self.milli_cpu = value
        elif name == MEMORY:
            self.memory = value
        elif name == EPHEMERAL_STORAGE:
            self.ephemeral_storage = value
        elif name == PODS:
            self.allowed_pod_number = value
        else:
            self.scalar[name] = value

    def add(self, other: Resource, sign: int = 1) -> None:
        self.milli_cpu += sign * other.milli_cpu
        self.memory += sign * other.memory
        self.ephemeral_storage += sign * other.ephemeral_storage
        self.allowed_pod_number += sign * other.allowed_pod_number
        for name, value in other.scalar.items():
            self.scalar[name] = self.scalar.get(name, 0) + sign * value

    def clone(self) -> Resource:
        return Resource(self.milli_cpu, self.memory, self.ephemeral_storage, self.allowed_pod_number,
                        dict(self.scalar))

    def names(self) -> Iterable[str]:
        """Every resource with a non-zero amount."""
        for name in (CPU, MEMORY, EPHEMERAL_STORAGE, PODS):
            if self.get(name):
                yield name
        yield from (name for name, value in self.scalar.items() if value)

    def as_dict(self) -> dict[str, int]:
        return {name: self.get(name) for name in self.names()}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Resource) and self.as_dict() == other.as_dict()

    def __repr__(self) -> str:
        return f"Resource({self.as_dict()})"


def _add_into(total: dict[str, int], amounts: Mapping[str, int]) -> None:
    for name, value in amounts.items():
        total[name] = total.get(name, 0) + value


def _max_into(total: dict[str, int], amounts: Mapping[str, int]) -> None:
    for name, value in amounts.items():
        if value > total.get(name, 0):
            total[name] = value


def _container_requests(container: Mapping[str, Any], non_missing: Mapping[str, int] | None) -> dict[str, int]:
    requests = resource_list((container.get("resources") or {}).get("requests"))
    if non_missing:
        for name, default in non_missing.items():
            requests.setdefault(name, default)
    return requests


def _container_statuses(pod: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """The containers' and init containers' statuses by name (a container's first, as
    upstream's findContainerStatus looks them up)."""
    status = pod.get("status") or {}
    out: dict[str, Mapping[str, Any]] = {}
    for field in ("initContainerStatuses", "containerStatuses"):
        for cs in status.get(field) or ():
            if isinstance(cs, Mapping):
                out[str(cs.get("name"))] = cs
    return out


def resize_infeasible(pod: Mapping[str, Any]) -> bool:
    """The first PodResizePending condition says Infeasible: the spec's new size will never be applied."""
    for condition in (pod.get("status") or {}).get("conditions") or ():
        if condition.get("type") == "PodResizePending":
            return bool(condition.get("reason") == "Infeasible")
    return False


def _status_counts(pod: Mapping[str, Any]) -> bool:
    """Whether the pod's status can change its requests: a resize is Infeasible, or a container's
    status reports an allocation or resources other than its spec's requests, written as in the
    spec (a kubelet after a resize; a different spelling of the same amount also takes the long
    way, which gives the same answer)."""
    status = pod.get("status")
    if not status:
        return False
    if not (status.get("containerStatuses") or status.get("initContainerStatuses")):
        return resize_infeasible(pod)
    if resize_infeasible(pod):
        return True
    spec = pod.get("spec") or {}
    statuses = _container_statuses(pod)
    for field in ("containers", "initContainers"):
        for container in spec.get(field) or ():
            cs = statuses.get(str(container.get("name")))
            if cs is None:
                continue
            requests = (container.get("resources") or {}).get("requests") or {}
            allocated = cs.get("allocatedResources")
            actual = (cs.get("resources") or {}).get("requests")
            if (allocated is not None and allocated != requests) or (actual is not None and actual != requests):
                return True
    return False


def _spec_requests(container: Mapping[str, Any], _status: Mapping[str, Any] | None, _infeasible: bool) -> Any:
    return (container.get("resources") or {}).get("requests")


def _allocated_requests(container: Mapping[str, Any], status: Mapping[str, Any] | None, infeasible: bool) -> Any:
    """upstream's containerAllocatedRequests: what the kubelet allocated, else the spec (nothing
    when the resize is infeasible)."""
    if status is not None and status.get("allocatedResources") is not None:
        return status["allocatedResources"]
    return None if infeasible else _spec_requests(container, status, infeasible)


def _actuated_requests(container: Mapping[str, Any], status: Mapping[str, Any] | None, infeasible: bool) -> Any:
    """upstream's containerActuatedRequests: what the container runs with, else what was allocated."""
    if status is not None and ((status.get("resources") or {}).get("requests")) is not None:
        return status["resources"]["requests"]
    return _allocated_requests(container, status, infeasible)


def _aggregate(spec: Mapping[str, Any], statuses: Mapping[str, Mapping[str, Any]] | None, infeasible: bool,
               requests_of: Callable[[Mapping[str, Any], Mapping[str, Any] | None, bool], Any],
               non_missing: Mapping[str, int] | None) -> dict[str, int]:
    """upstream's aggregateContainerResourcesByFn: regular and sidecar containers add up, each
    classic init container runs beside the sidecars started before it, the larger total wins."""

    def of(container: Mapping[str, Any]) -> dict[str, int]:
        status = statuses.get(str(container.get("name"))) if statuses else None
        requests = resource_list(requests_of(container, status, infeasible))
        if non_missing:
            for name, default in non_missing.items():
                requests.setdefault(name, default)
        return requests

    total: dict[str, int] = {}
    for container in spec.get("containers") or ():
        _add_into(total, of(container))
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for container in spec.get("initContainers") or ():
        requests = of(container)
        if container.get("restartPolicy") == "Always":
            _add_into(total, requests)
            _add_into(sidecars, requests)
            running = dict(sidecars)
        else:
            running = dict(requests)
            _add_into(running, sidecars)
        _max_into(init_peak, running)
    _max_into(total, init_peak)
    return total


def pod_requests(pod: Mapping[str, Any], *, non_missing: Mapping[str, int] | None = None) -> dict[str, int]:
    """A pod's effective requests, as upstream's resourcehelper.PodRequests (v1.37, in-place
    resize on: UseStatusResources).

    Regular containers and restartable (sidecar) init containers add up; each classic init
    container runs alone beside the sidecars started before it, so the pod needs the larger
    of the two totals. That sum is taken three times, of what the spec asks, of what the kubelet
    allocated (status allocatedResources, else the spec) and of what the containers run with
    (status resources, else allocated), and the pod counts the larger of the three per resource;
    when the resize is Infeasible (PodResizePending) the spec is left out (and a container
    without status counts nothing). Pod-level requests replace the sum for cpu, memory and huge
    pages (during a pod-level resize, `_effective_pod_level_requests`), and the RuntimeClass
    overhead is added last. `non_missing` fills in requests a container leaves out
    (the scoring defaults), in each of the three sums.
    """
    spec = pod.get("spec") or {}
    counts = _status_counts(pod)
    infeasible = counts and resize_infeasible(pod)
    total = {} if infeasible else _aggregate(spec, None, False, _spec_requests, non_missing)
    if counts:
        statuses = _container_statuses(pod)
        _max_into(total, _aggregate(spec, statuses, infeasible, _allocated_requests, non_missing))
        _max_into(total, _aggregate(spec, statuses, infeasible, _actuated_requests, non_missing))
    pod_level = (spec.get("resources") or {}).get("requests")
    if pod_level and any(map(_is_pod_level_resource, pod_level)):
        for name, value in _effective_pod_level_requests(pod, pod_level).items():
            if _is_pod_level_resource(name):
                total[name] = value
    _add_into(total, resource_list(spec.get("overhead")))
    return total


def _is_pod_level_resource(name: str) -> bool:
    """upstream's IsSupportedPodLevelResource: cpu, memory and huge pages."""
    return name in _POD_LEVEL_RESOURCES or name.startswith("hugepages-")


def _effective_pod_level_requests(pod: Mapping[str, Any], requests: Mapping[str, Any]) -> dict[str, int]:
    """The pod-level requests the pod counts: while a pod-level resize is under way
    (InPlacePodLevelResourcesVerticalScaling, `status.resources` set) the larger, per
    resource, of the spec (left out when the resize is Infeasible), `status.resources` and
    `status.allocatedResources`, as upstream's effectivePodLevelResources."""
    status = pod.get("status") or {}
    running = status.get("resources")
    if running is None:
        return resource_list(requests)
    effective = {} if resize_infeasible(pod) else resource_list(requests)
    for other in (running.get("requests"), status.get("allocatedResources")):
        for name, value in resource_list(other).items():
            if name not in effective or value > effective[name]:  # maxResourceList: a 0 is kept too
                effective[name] = value
    return effective


def pod_non_zero_requests(pod: Mapping[str, Any], requests: Mapping[str, int] | None = None) -> tuple[int, int]:
    """(milli-CPU, memory) with upstream's defaults for containers that state no request.

    `requests`: the pod's `pod_requests`, already computed; when every container states both a
    cpu and a memory request (and no resize is infeasible) no default applies, and they are the
    answer without summing the containers a second time."""
    if requests is None or not _states_cpu_and_memory(pod):
        requests = pod_requests(pod, non_missing=_NON_MISSING)
    return requests.get(CPU, 0), requests.get(MEMORY, 0)


def container_non_zero_requests(pod: Mapping[str, Any]) -> tuple[int, int]:
    """`pod_non_zero_requests` with the pod-level requests left out: what v1.37.2's
    NodeResourcesFit scores a pod by (its scorer is built without the PodLevelResources
    switch, so resourcehelper.PodRequests skips them; BalancedAllocation's is not)."""
    spec = {k: v for k, v in (pod.get("spec") or {}).items() if k != "resources"}
    requests = pod_requests({**pod, "spec": spec}, non_missing=_NON_MISSING)
    return requests.get(CPU, 0), requests.get(MEMORY, 0)


def pod_requests_and_non_zero(pod: Mapping[str, Any]) -> tuple[dict[str, int], int, int]:
    """`pod_requests(pod)` and `pod_non_zero_requests(pod)` at once: (requests, milli-CPU, memory).

    A pod with regular containers only (no init containers, pod-level requests, overhead or
    container statuses reporting other resources than its spec: nearly every pod) is summed in one pass over
    its containers; any other pod the long way, by the two functions."""
    spec = pod.get("spec") or {}
    status = pod.get("status")
    if (spec.get("initContainers") or spec.get("resources") or spec.get("overhead")
            or (status and _status_counts(pod))):
        requests = pod_requests(pod)
        return (requests, *pod_non_zero_requests(pod, requests))
    total: dict[str, int] = {}
    non_zero_cpu = non_zero_memory = 0
    for container in spec.get("containers") or ():
        stated = (container.get("resources") or {}).get("requests")
        if not stated:
            non_zero_cpu += DEFAULT_MILLI_CPU_REQUEST
            non_zero_memory += DEFAULT_MEMORY_REQUEST
            continue
        for name, quantity in stated.items():
            total[name] = total.get(name, 0) + quantity_value(name, quantity)
        # What the container states, else the default (a stated 0 stays 0), as _container_requests.
        non_zero_cpu += quantity_value(CPU, stated[CPU]) if CPU in stated else DEFAULT_MILLI_CPU_REQUEST
        non_zero_memory += quantity_value(MEMORY, stated[MEMORY]) if MEMORY in stated else DEFAULT_MEMORY_REQUEST
    return total, non_zero_cpu, non_zero_memory


def _states_cpu_and_memory(pod: Mapping[str, Any]) -> bool:
    spec = pod.get("spec") or {}
    for field in ("containers", "initContainers"):
        for container in spec.get(field) or ():
            requests = (container.get("resources") or {}).get("requests")
            if not requests or CPU not in requests or MEMORY not in requests:
                return False
    # Container statuses (in-place resize) count what the kubelet allocated and what runs, where
    # a request may be missing; an infeasible resize counts no spec at all.
    return not _status_counts(pod)
