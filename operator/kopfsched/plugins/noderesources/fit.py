"""NodeResourcesFit: does the node have room for the pod's requests, and how full would it be.

Extension points: PreFilter (the pod's effective requests into the cycle state), Filter
(`Insufficient <resource>` / `Too many pods`, every shortfall at once; Unschedulable, or
UnschedulableAndUnresolvable when the request exceeds the node's whole allocatable so
preemption cannot help), PreScore/Score (the configured scoring strategy over the non-zero
requests), and queueing hints for node additions / allocatable growth and for assigned pods
deleted or scaled down. Filter and Score also run vectorised over the NodeTable.

Args (`NodeResourcesFitArgs`): `ignoredResources`, `ignoredResourceGroups`, `scoringStrategy`
{`type`, `resources`, `requestedToCapacityRatio.shape`}.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from kopfsched.framework import (
    ActionType,
    ArgsError,
    ClusterEvent,
    ClusterEventWithHint,
    Code,
    ColumnSpec,
    CycleState,
    EventResource,
    Handle,
    NodeInfo,
    NodeTable,
    PluginFactory,
    PodInfo,
    QueueingHint,
    StateKey,
    Status,
)
from kopfsched.framework.interface import SignFragment
from kopfsched.framework.resources import Resource, pod_requests
from kopfsched.framework.status import TalliedStatuses
from kopfsched.plugins.dynamicresources.manager import DEVICE_CLASS_PREFIX, DraManager, manager_for
from kopfsched.plugins.helper import objects, signers
from kopfsched.plugins.noderesources.args import (
    LEAST_ALLOCATED,
    MOST_ALLOCATED,
    NodeResourcesFitArgs,
)
from kopfsched.plugins.noderesources.resource_allocation import (
    ALLOCATABLE_CPU,
    ALLOCATABLE_EPHEMERAL_STORAGE,
    ALLOCATABLE_MEMORY,
    ALLOCATABLE_PODS,
    POD_COUNT,
    REQUESTED_CPU,
    REQUESTED_EPHEMERAL_STORAGE,
    REQUESTED_MEMORY,
    LeastAllocated,
    MostAllocated,
    RequestedToCapacityRatio,
    ResourceAllocationScorer,
    ShapePoint,
    Strategy,
    is_extended_resource_name,
    is_scalar_resource_name,
    scalar_columns,
)

NAME = "NodeResourcesFit"
DYNAMIC_RESOURCES = "DynamicResources"
"""The plugin whose shared DRA state (handle.shared) Fit reads, as upstream's SharedDRAManager."""

TOO_MANY_PODS = "Too many pods"
INSUFFICIENT_CPU = "Insufficient cpu"
INSUFFICIENT_MEMORY = "Insufficient memory"
INSUFFICIENT_EPHEMERAL_STORAGE = "Insufficient ephemeral-storage"


@dataclass(frozen=True, slots=True)
class PreFilterState:
    """The pod's effective requests, as Filter checks them (immutable, so clones share it)."""

    milli_cpu: int
    memory: int
    ephemeral_storage: int
    scalars: tuple[tuple[str, int], ...]
    """Non-zero scalar requests Filter checks (ignored extended resources left out), by name."""
    dra_backed: frozenset[str] = frozenset()
    """Those of `scalars` a DeviceClass provides (DRAExtendedResource): on a node that does not
    advertise one (allocatable 0 or absent) DynamicResources allocates it from devices, so
    Filter does not check it there (upstream's shouldDelegateResourceToDRA)."""


@dataclass(frozen=True, slots=True)
class PreScoreState:
    pod_requests: tuple[int, ...]
    """The pod's scoring requests, in the order of the strategy's resources."""
    dra_backed: Mapping[int, Any] = dataclasses.field(default_factory=dict)
    """Resource index -> the DeviceClass backing it, for those the pod asks for (scored by
    devices on nodes that do not advertise them)."""


PRE_FILTER_STATE = StateKey[PreFilterState](NAME, "preFilter")
PRE_SCORE_STATE = StateKey[PreScoreState](NAME, "preScore")


@dataclass(frozen=True, slots=True)
class InsufficientResource:
    resource_name: str
    reason: str
    requested: int
    used: int
    capacity: int
    unresolvable: bool = False
    """The request exceeds the node's whole allocatable: evicting pods cannot help."""


def compute_pod_resource_request(pod: PodInfo, *, ignored_resources: frozenset[str] = frozenset(),
                                 ignored_groups: frozenset[str] = frozenset()) -> PreFilterState:
    """upstream computePodResourceRequest, with the ignored extended resources dropped up front."""
    requests = pod.requests
    scalars = []
    for name in sorted(requests.scalar):
        quantity = requests.scalar[name]
        if quantity == 0 or not is_scalar_resource_name(name):
            continue
        if is_extended_resource_name(name) and (
            name in ignored_resources or (ignored_groups and name.split("/")[0] in ignored_groups)
        ):
            continue
        scalars.append((name, quantity))
    return PreFilterState(requests.milli_cpu, requests.memory, requests.ephemeral_storage, tuple(scalars))


def fits_request(request: PreFilterState, node: NodeInfo) -> list[InsufficientResource]:
    """upstream fitsRequest: every resource the node lacks, in upstream's order."""
    insufficient: list[InsufficientResource] = []
    allocatable, requested = node.allocatable, node.requested
    pod_count = len(node.pods)
    if pod_count + 1 > allocatable.allowed_pod_number:
        insufficient.append(InsufficientResource("pods", TOO_MANY_PODS, 1, pod_count, allocatable.allowed_pod_number))
    cpu = request.milli_cpu
    if cpu > 0 and cpu > allocatable.milli_cpu - requested.milli_cpu:
        insufficient.append(InsufficientResource("cpu", INSUFFICIENT_CPU, cpu, requested.milli_cpu,
                                                 allocatable.milli_cpu, cpu > allocatable.milli_cpu))
    memory = request.memory
    if memory > 0 and memory > allocatable.memory - requested.memory:
        insufficient.append(InsufficientResource("memory", INSUFFICIENT_MEMORY, memory, requested.memory,
                                                 allocatable.memory, memory > allocatable.memory))
    storage = request.ephemeral_storage
    if storage > 0 and storage > allocatable.ephemeral_storage - requested.ephemeral_storage:
        insufficient.append(InsufficientResource("ephemeral-storage", INSUFFICIENT_EPHEMERAL_STORAGE, storage,
                                                 requested.ephemeral_storage, allocatable.ephemeral_storage,
                                                 storage > allocatable.ephemeral_storage))
    for name, quantity in request.scalars:
        offered = allocatable.scalar.get(name, 0)
        if offered <= 0 and name in request.dra_backed:
            continue
        used = requested.scalar.get(name, 0)
        if quantity > offered - used:
            insufficient.append(InsufficientResource(name, f"Insufficient {name}", quantity, used, offered,
                                                     quantity > offered))
    return insufficient


def build_strategy(args: NodeResourcesFitArgs) -> Strategy:
    strategy = args.scoring_strategy
    weights = [spec.weight for spec in strategy.resources]
    if strategy.type == LEAST_ALLOCATED:
        return LeastAllocated(weights)
    if strategy.type == MOST_ALLOCATED:
        return MostAllocated(weights)
    assert strategy.requested_to_capacity_ratio is not None  # validated
    shape = [ShapePoint(p.utilization, p.score) for p in strategy.requested_to_capacity_ratio.shape]
    return RequestedToCapacityRatio(weights, shape)


def fits_rows(request: PreFilterState, table: NodeTable, rows: np.ndarray) -> np.ndarray:
    """Whether each of `rows` has room for `request` (fits_request over the table's columns)."""
    fits = table.column(POD_COUNT)[rows] < table.column(ALLOCATABLE_PODS)[rows]
    for quantity, allocatable, requested in (
        (request.milli_cpu, ALLOCATABLE_CPU, REQUESTED_CPU),
        (request.memory, ALLOCATABLE_MEMORY, REQUESTED_MEMORY),
        (request.ephemeral_storage, ALLOCATABLE_EPHEMERAL_STORAGE, REQUESTED_EPHEMERAL_STORAGE),
    ):
        if quantity > 0:
            fits &= quantity <= table.column(allocatable)[rows] - table.column(requested)[rows]
    for name, quantity in request.scalars:
        allocatable, requested = scalar_columns(name)
        offered = table.column(allocatable)[rows]
        enough = quantity <= offered - table.column(requested)[rows]
        fits &= enough | (offered <= 0) if name in request.dra_backed else enough
    return fits


def fits_some(request: PreFilterState, table: NodeTable, rows: list[int]) -> list[bool]:
    """fits_rows for each of `rows`, on Python ints, the columns looked up once."""
    checks = [(quantity, table.column(allocatable), table.column(requested)) for quantity, allocatable, requested in (
        (request.milli_cpu, ALLOCATABLE_CPU, REQUESTED_CPU),
        (request.memory, ALLOCATABLE_MEMORY, REQUESTED_MEMORY),
        (request.ephemeral_storage, ALLOCATABLE_EPHEMERAL_STORAGE, REQUESTED_EPHEMERAL_STORAGE),
    ) if quantity > 0]
    for name, quantity in request.scalars:
        allocatable, requested = scalar_columns(name)
        checks.append((quantity, table.column(allocatable), table.column(requested)))
    pods, allowed = table.column(POD_COUNT), table.column(ALLOCATABLE_PODS)
    out: list[bool] = []
    for row in rows:
        fits = pods.item(row) < allowed.item(row)
        if fits:
            for quantity, offered, used in checks:
                if quantity > offered.item(row) - used.item(row):
                    fits = False
                    break
        out.append(fits)
    return out


_FitsChecks = tuple[tuple[ColumnSpec, ColumnSpec, bool], ...]
_FitsFamily = tuple[tuple[int, ...], object, Callable[[NodeTable, np.ndarray, np.ndarray], np.ndarray]]
_fits_families: dict[tuple[Any, ...], object] = {}
"""The checks of a request (which of cpu, memory, ephemeral storage; the scalars; those DRA-backed) -> the
NodeTable.derived_family family of the requests with those checks (an object: it hashes by identity)."""
_fits_family_of: dict[tuple[Any, ...], _FitsFamily] = {}


def fits_family(request: PreFilterState) -> _FitsFamily:
    """(the request's quantities that Filter checks, the NodeTable.derived_family family of the
    requests that check the same resources, its compute: fits_many)."""
    # The request's fields as the key: a tuple of ints hashes and compares in C.
    key = (request.milli_cpu, request.memory, request.ephemeral_storage, request.scalars, request.dra_backed)
    found = _fits_family_of.get(key)
    if found is None:
        if len(_fits_family_of) >= 4096:
            _fits_family_of.clear()
        checked = (request.milli_cpu > 0, request.memory > 0, request.ephemeral_storage > 0,
                   tuple(name for name, _ in request.scalars), request.dra_backed)
        family = _fits_families.get(checked)
        if family is None:
            if len(_fits_families) >= 256:
                _fits_families.clear()
            family = _fits_families[checked] = object()
        checks: _FitsChecks = tuple((allocatable, requested, False) for quantity, allocatable, requested in (
            (request.milli_cpu, ALLOCATABLE_CPU, REQUESTED_CPU),
            (request.memory, ALLOCATABLE_MEMORY, REQUESTED_MEMORY),
            (request.ephemeral_storage, ALLOCATABLE_EPHEMERAL_STORAGE, REQUESTED_EPHEMERAL_STORAGE),
        ) if quantity > 0) + tuple((*scalar_columns(name), name in request.dra_backed) for name, _ in request.scalars)
        quantities = tuple(q for q in (request.milli_cpu, request.memory, request.ephemeral_storage) if q > 0) + tuple(
            q for _, q in request.scalars)
        found = _fits_family_of[key] = (
            quantities, family, lambda table, rows, parameters: fits_many(checks, table, rows, parameters))
    return found


def fits_many(checks: _FitsChecks, table: NodeTable, rows: np.ndarray, parameters: np.ndarray) -> np.ndarray:
    """fits_rows for each row of `parameters` (the quantities `checks` compare, in order: a
    check's flag is a DRA-backed resource's), as one (len(parameters), len(rows)) array."""
    out = np.empty((len(parameters), len(rows)), dtype=bool)
    out[:] = table.column(POD_COUNT)[rows] < table.column(ALLOCATABLE_PODS)[rows]
    for i, (allocatable, requested, delegated) in enumerate(checks):
        offered = table.column(allocatable)[rows]
        enough = parameters[:, i:i + 1] <= offered - table.column(requested)[rows]
        if delegated:
            enough |= offered <= 0
        out &= enough
    return out


class Fit:
    """The NodeResourcesFit plugin."""

    name = NAME

    def __init__(self, args: NodeResourcesFitArgs | None, handle: Handle | None) -> None:
        args = args or NodeResourcesFitArgs()
        problems = args.problems()
        if problems:
            raise ArgsError(problems)
        self.args = args
        self.handle = handle
        self._statuses: dict[tuple[bool, tuple[str, ...]], Status] = {}
        self._statuses_by_code: dict[tuple[tuple[str, ...], int], Status] = {}
        """filter_statuses' (the checks' reasons, code of a row) -> the Status of `_statuses`."""
        self.ignored_resources = frozenset(args.ignored_resources)
        self.ignored_resource_groups = frozenset(args.ignored_resource_groups)
        self.scorer = ResourceAllocationScorer(
            resources=[spec.name for spec in args.scoring_strategy.resources],
            strategy=build_strategy(args),
            use_requested=False,
        )
        self.dra: DraManager | None = manager_for(handle, DYNAMIC_RESOURCES) if handle is not None else None
        """The scheduler's DRA state: which DeviceClass backs an extended resource, and the
        devices a DRA-backed resource is scored by (DRAExtendedResource, GA and locked on)."""

    # --- PreFilter / Filter ---------------------------------------------------------------

    def sign_pod(self, pod: PodInfo) -> list[SignFragment] | None:
        return signers.resources(pod_requests(pod.pod), self.dra.resolver.get if self.dra is not None else None)

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]) -> None:
        request = compute_pod_resource_request(
            pod, ignored_resources=self.ignored_resources, ignored_groups=self.ignored_resource_groups)
        state.write(PRE_FILTER_STATE, self._with_dra(request))

    def _with_dra(self, request: PreFilterState) -> PreFilterState:
        """The request with the scalars a DeviceClass backs marked (only pods asking for an
        extended resource look: the others cost nothing more)."""
        if not request.scalars or self.dra is None or not self.dra.resolver.any():
            return request
        resolver = self.dra.resolver
        backed = frozenset(name for name, _ in request.scalars if resolver.get(name) is not None)
        return dataclasses.replace(request, dra_backed=backed) if backed else request

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        insufficient = fits_request(state.read(PRE_FILTER_STATE), node)
        if not insufficient:
            return None
        key = (any(r.unresolvable for r in insufficient), tuple(r.reason for r in insufficient))
        status = self._statuses.get(key)
        if status is None:
            # Statuses are immutable and few distinct ones exist: preemption's dry runs and
            # unschedulable pods reject thousands of nodes per attempt with the same one.
            code = Code.UNSCHEDULABLE_AND_UNRESOLVABLE if key[0] else Code.UNSCHEDULABLE
            status = self._statuses[key] = Status(code, key[1], self.name)
        return status

    def filter_nodes(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        # Whether a node fits depends on its own columns and the request alone: the table keeps
        # the answer of every node for requests it saw before (see NodeTable.derived).
        # Requests that check the same resources share a family: brought up to date together.
        request = state.read(PRE_FILTER_STATE)
        quantities, family, compute = fits_family(request)
        return table.derived_family(family, quantities, quantities, compute, rows,
                                    lambda table, rows: fits_some(request, table, rows))

    def filter_statuses(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: np.ndarray) -> list[Status]:
        """`filter`'s status for each of `rows` (rows it rejects), from the table's columns:
        one bit per check in fits_request's order, one Status per distinct combination."""
        request = state.read(PRE_FILTER_STATE)
        pod_count = table.column(POD_COUNT)[rows]
        checks = [(TOO_MANY_PODS, pod_count + 1 > table.column(ALLOCATABLE_PODS)[rows], None)]
        for quantity, reason, allocatable, requested in (
            (request.milli_cpu, INSUFFICIENT_CPU, ALLOCATABLE_CPU, REQUESTED_CPU),
            (request.memory, INSUFFICIENT_MEMORY, ALLOCATABLE_MEMORY, REQUESTED_MEMORY),
            (request.ephemeral_storage, INSUFFICIENT_EPHEMERAL_STORAGE, ALLOCATABLE_EPHEMERAL_STORAGE,
             REQUESTED_EPHEMERAL_STORAGE),
        ):
            if quantity > 0:
                offered = table.column(allocatable)[rows]
                checks.append((reason, quantity > offered - table.column(requested)[rows], quantity > offered))
        for name, quantity in request.scalars:
            allocatable, requested = scalar_columns(name)
            offered = table.column(allocatable)[rows]
            insufficient = quantity > offered - table.column(requested)[rows]
            if name in request.dra_backed:
                insufficient &= offered > 0
            checks.append((f"Insufficient {name}", insufficient, quantity > offered))
        codes = np.zeros(len(rows), dtype=np.int64)
        unresolvable = np.zeros(len(rows), dtype=bool)
        for bit, (_, insufficient, beyond) in enumerate(checks):
            codes |= insufficient.astype(np.int64) << bit
            if beyond is not None:
                unresolvable |= insufficient & beyond
        codes |= unresolvable.astype(np.int64) << len(checks)

        reasons = tuple(reason for reason, _, _ in checks)
        by_code = self._statuses_by_code
        if len(by_code) >= 4096:
            by_code.clear()

        def status_of(code: int) -> Status:  # few distinct codes: one Status each, kept
            status = by_code.get((reasons, code))
            if status is None:
                key = (bool(code >> len(reasons) & 1),
                       tuple(reason for bit, reason in enumerate(reasons) if code >> bit & 1))
                status = self._statuses.get(key)
                if status is None:
                    status = self._statuses[key] = Status(
                        Code.UNSCHEDULABLE_AND_UNRESOLVABLE if key[0] else Code.UNSCHEDULABLE, key[1], self.name)
                by_code[reasons, code] = status
            return status

        return TalliedStatuses.of_codes(codes, status_of)

    # --- PreScore / Score -----------------------------------------------------------------

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> None:
        state.write(PRE_SCORE_STATE, self._pre_score_state(pod))

    def _pre_score_state(self, pod: PodInfo) -> PreScoreState:
        requests = tuple(self.scorer.pod_requests(pod))
        backed = dra_backed_resources(self.scorer, self.dra, requests)
        return PreScoreState(requests, backed) if backed else PreScoreState(requests)

    def _pre_score(self, state: CycleState, pod: PodInfo) -> PreScoreState:
        pre_score = state.get(PRE_SCORE_STATE)
        if pre_score is None:  # as upstream: Score works without PreScore
            return self._pre_score_state(pod)
        return pre_score

    def _pod_requests(self, state: CycleState, pod: PodInfo) -> tuple[int, ...]:
        return self._pre_score(state, pod).pod_requests

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        pre_score = self._pre_score(state, pod)
        if pre_score.dra_backed and self.dra is not None:
            return self.scorer.score_dra(node, pre_score.pod_requests, pre_score.dra_backed, dra_totals(self.dra))
        return self.scorer.score(node, pre_score.pod_requests)

    def score_nodes(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        pre_score = self._pre_score(state, pod)
        if pre_score.dra_backed:  # a DRA-backed resource among the scored ones: node by node
            nodes = table.nodes
            return np.fromiter((self.score(state, pod, nodes[row]) for row in rows.tolist()), dtype=np.int64,
                               count=len(rows))
        return self.scorer.score_rows(table, rows, pre_score.pod_requests)

    # --- queueing hints -------------------------------------------------------------------

    def events_to_register(self) -> Iterable[ClusterEventWithHint]:
        # With queueing hints, node label/taint updates need not be registered (upstream #109437).
        return (
            ClusterEventWithHint(ClusterEvent(EventResource.POD, ActionType.DELETE | ActionType.UPDATE_POD_SCALE_DOWN),
                                 self.is_schedulable_after_pod_event),
            ClusterEventWithHint(ClusterEvent(EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_ALLOCATABLE),
                                 self.is_schedulable_after_node_change),
            # A pod may wait for a class to provide its extended resource (DRAExtendedResource).
            ClusterEventWithHint(ClusterEvent(EventResource.DEVICE_CLASS, ActionType.ADD | ActionType.UPDATE),
                                 self.is_schedulable_after_device_class_event),
        )

    def is_schedulable_after_pod_event(self, pod: Any, old: Any, new: Any) -> QueueingHint:
        original, modified = _pod_dict(old), _pod_dict(new)
        if modified is None:
            if original is None:
                return QueueingHint.QUEUE
            spec, status = original.get("spec") or {}, original.get("status") or {}
            if not spec.get("nodeName") and not status.get("nominatedNodeName"):
                return QueueingHint.SKIP  # an unscheduled pod frees nothing
            return QueueingHint.QUEUE
        if original is None:
            return QueueingHint.QUEUE
        target = _pod_dict(pod) or {}
        return QueueingHint.QUEUE if _is_scale_down_relevant(target, original, modified) else QueueingHint.SKIP

    def is_schedulable_after_node_change(self, pod: Any, old: Any, new: Any) -> QueueingHint:
        original, modified = _node_dict(old), _node_dict(new)
        target = pod if isinstance(pod, PodInfo) else PodInfo(_pod_dict(pod) or {})
        # Upstream's hint checks the bare node with no ignored resources.
        request = self._with_dra(compute_pod_resource_request(target))
        if modified is None or fits_request(request, NodeInfo(modified)):
            return QueueingHint.SKIP
        if original is None:
            return QueueingHint.QUEUE
        if not _requested_resources_increased(request, NodeInfo(original).allocatable, NodeInfo(modified).allocatable):
            return QueueingHint.SKIP
        return QueueingHint.QUEUE


    def is_schedulable_after_device_class_event(self, pod: Any, old: Any, new: Any) -> QueueingHint:
        """upstream isSchedulableAfterDeviceClassEvent: a class now provides, by its explicit
        or (when added) its implicit name, an extended resource the pod asks for."""
        original, modified = objects.raw(old), objects.raw(new)
        if modified is None:
            return QueueingHint.SKIP
        requests = pod_requests(_pod_dict(pod) or {})
        explicit = (modified.get("spec") or {}).get("extendedResourceName")
        if original is not None:
            if (original.get("spec") or {}).get("extendedResourceName") == explicit:
                return QueueingHint.SKIP
        elif DEVICE_CLASS_PREFIX + ((modified.get("metadata") or {}).get("name") or "") in requests:
            return QueueingHint.QUEUE
        return QueueingHint.QUEUE if explicit is not None and explicit in requests else QueueingHint.SKIP


def dra_backed_resources(scorer: ResourceAllocationScorer, dra: DraManager | None,
                         pod_requests: tuple[int, ...]) -> dict[int, Any]:
    """The scored resources the pod asks for that a DeviceClass backs (none without DRA state)."""
    if dra is None or not dra.resolver.any() or not any(
            pod_requests[i] for i in range(len(pod_requests)) if scorer.resources[i] not in ("cpu", "memory")):
        return {}
    return scorer.dra_backed(pod_requests, dra.resolver.get)


def dra_totals(dra: DraManager) -> Callable[[NodeInfo, Any], tuple[int, int] | None]:
    """(devices, allocated devices) of a class on a node, for ResourceAllocationScorer.score_dra."""
    return lambda node, device_class: dra.extended_resource_totals(node.name, node.labels, device_class)


def _pod_dict(obj: Any) -> dict[str, Any] | None:
    if obj is None or isinstance(obj, dict):
        return obj
    return getattr(obj, "pod", None)


def _node_dict(obj: Any) -> dict[str, Any] | None:
    if obj is None or isinstance(obj, dict):
        return obj
    return getattr(obj, "node", None)


def _is_scale_down_relevant(target: Mapping[str, Any], original: Mapping[str, Any],
                            modified: Mapping[str, Any]) -> bool:
    """upstream isSchedulableAfterPodScaleDown."""
    uid = lambda p: (p.get("metadata") or {}).get("uid")  # noqa: E731
    if uid(modified) is not None and uid(modified) == uid(target):
        return True
    if not (modified.get("spec") or {}).get("nodeName"):
        return False
    before = Resource.from_list(pod_requests(original))
    after = Resource.from_list(pod_requests(modified))
    for name, value in pod_requests(target).items():
        if value == 0:
            continue
        known = name in ("cpu", "memory", "ephemeral-storage") or is_scalar_resource_name(name)
        if known and before.get(name) > after.get(name):
            return True
    return False


def _requested_resources_increased(request: PreFilterState, before: Resource, after: Resource) -> bool:
    """upstream haveAnyRequestedResourcesIncreased."""
    if after.allowed_pod_number > before.allowed_pod_number:
        return True
    return (
        (request.milli_cpu > 0 and after.milli_cpu > before.milli_cpu)
        or (request.memory > 0 and after.memory > before.memory)
        or (request.ephemeral_storage > 0 and after.ephemeral_storage > before.ephemeral_storage)
        or any(after.scalar.get(name, 0) > before.scalar.get(name, 0)
               or (name in request.dra_backed and after.scalar.get(name, 0) <= 0) for name, _ in request.scalars)
    )


PLUGIN = PluginFactory(name=NAME, factory=Fit, args_type=NodeResourcesFitArgs)
