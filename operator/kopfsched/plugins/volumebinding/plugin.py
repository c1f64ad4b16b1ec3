"""VolumeBinding: pods with PersistentVolumeClaims go only where their volumes can be, and
their WaitForFirstConsumer claims get bound to a PV (or provisioned) on the chosen node.

Extension points (upstream's volume_binding.go; the logic is in `binder.py`):

- PreFilter: Skip for pods without claims (their cycles never touch volumes). A missing or
  deleting claim, or an unbound claim with immediate binding, rejects the pod on every node
  (UnschedulableAndUnresolvable) until a PVC/PV event moves it.
- Filter: the node must fit the bound PVs' node affinity, and offer a matching available PV
  or allowed provisioning for every delayed claim (UnschedulableAndUnresolvable otherwise).
- PreScore/Score (StorageCapacityScoring, beta and on in v1.37): the node whose volumes would
  be least full scores best. Per storage class, utilization is what the pod's claims request
  over the capacity there: the matched PVs' capacity when any claim binds a static PV, else
  the CSIStorageCapacity that showed room for each claim to provision; the `shape` maps
  utilization to a score (default 0 -> 10, 100 -> 0, times 10), averaged over classes. A pod
  without claims scores 0 everywhere, as upstream. With the gate off: Skip.
- Reserve/Unreserve: assume (or revert) the node's PV↔PVC bindings in memory, so the next pod
  does not take the same PV before the API write lands.
- PreBindPreFlight: Skip when every claim is bound already.
- PreBind: write the bindings and wait, up to `bindTimeoutSeconds`, until they are bound.

Args: `bindTimeoutSeconds` (default 600, not negative); `shape` (utilization 0..100 increasing,
score 0..10; default [{0, 10}, {100, 0}]), refused when StorageCapacityScoring is off.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from kopfsched import features
from kopfsched.framework.cycle_state import CycleState, StateKey
from kopfsched.framework.events import ActionType, ClusterEvent, ClusterEventWithHint, EventResource, QueueingHint
from kopfsched.framework.handle import Handle
from kopfsched.framework.interface import ALLOW_PARALLEL, MAX_NODE_SCORE, PreBindPreFlightResult, SignFragment
from kopfsched.framework.node_table import NodeTable
from kopfsched.framework.quantity import QuantityError, parse_quantity
from kopfsched.framework.registry import ArgsError, PluginFactory, check_known_fields, int_field
from kopfsched.framework.status import SKIP, Status
from kopfsched.framework.types import NodeInfo, PodInfo
from kopfsched.plugins.helper import objects, signers
from kopfsched.plugins.helper.volumes import claim_class, ephemeral_claim_owned_error
from kopfsched.plugins.volumebinding.binder import (
    BindingInfo,
    PodVolumeClaims,
    PodVolumes,
    VolumeBinder,
    VolumeBindingError,
)
from kopfsched.plugins.volumebinding.volumes import pod_claims, requested_storage, volume_capacity

NAME = "VolumeBinding"
DEFAULT_BIND_TIMEOUT_SECONDS = 600
ERR_REASON_UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"
MIGRATED_PLUGINS_ANNOTATION = "storage.alpha.kubernetes.io/migrated-plugins"
MAX_CUSTOM_PRIORITY_SCORE = 10
MAX_UTILIZATION = 100
DEFAULT_SHAPE: tuple[tuple[int, int], ...] = ((0, MAX_CUSTOM_PRIORITY_SCORE), (100, 0))
"""SetDefaults_VolumeBindingArgs with StorageCapacityScoring: the emptier, the better."""


# --- args --------------------------------------------------------------------------------


@dataclass(frozen=True)
class VolumeBindingArgs:
    """Upstream's VolumeBindingArgs."""

    bind_timeout_seconds: int = DEFAULT_BIND_TIMEOUT_SECONDS
    """How long PreBind waits for the PV controller to bind the pod's claims; 0 checks once."""
    shape: tuple[tuple[int, int], ...] = ()
    """(utilization, score) points of Score's broken line; empty when StorageCapacityScoring
    is off (no Score)."""

    def __post_init__(self) -> None:
        if not self.shape and features.enabled(features.STORAGE_CAPACITY_SCORING):
            object.__setattr__(self, "shape", DEFAULT_SHAPE)

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> VolumeBindingArgs:
        problems: list[tuple[str, str]] = []
        check_known_fields(raw, {"bindTimeoutSeconds", "shape"}, problems)
        timeout = int_field(raw, "bindTimeoutSeconds", DEFAULT_BIND_TIMEOUT_SECONDS, problems)
        if timeout < 0:
            problems.append(("bindTimeoutSeconds",
                             f"Invalid value: {timeout}: invalid BindTimeoutSeconds, should not be a negative value"))
        shape: tuple[tuple[int, int], ...] = ()
        if not features.enabled(features.STORAGE_CAPACITY_SCORING):
            if raw.get("shape") is not None:
                problems.append(("shape", "unexpected field `shape`, remove it or turn on the feature gate "
                                          "StorageCapacityScoring"))
        elif raw.get("shape") is not None:
            shape = _decode_shape(raw["shape"], problems)
        if problems:
            raise ArgsError(problems)
        return cls(bind_timeout_seconds=timeout, shape=shape)


def _decode_shape(raw: Any, problems: list[tuple[str, str]]) -> tuple[tuple[int, int], ...]:
    """upstream's validateFunctionShape, over the raw points."""
    if not isinstance(raw, list) or not raw:
        problems.append(("shape", "Required value: at least one point must be specified"))
        return ()
    points = []
    for i, item in enumerate(raw):
        item = item if isinstance(item, Mapping) else {}
        point = []
        for key in ("utilization", "score"):
            value = item.get(key, 0)
            if isinstance(value, bool) or not isinstance(value, int):
                problems.append((f"shape[{i}].{key}", f"must be an integer, got {value!r}"))
                value = 0
            point.append(value)
        problems.extend((f"shape[{i}].{key}", "unknown field") for key in item if key not in ("utilization", "score"))
        points.append((point[0], point[1]))
    for i in range(1, len(points)):
        if points[i - 1][0] >= points[i][0]:
            problems.append((f"shape[{i}].utilization",
                             f"Invalid value: {points[i][0]}: values must be sorted in increasing order"))
            break
    for i, (utilization, score) in enumerate(points):
        if not 0 <= utilization <= MAX_UTILIZATION:
            problems.append((f"shape[{i}].utilization", f"Invalid value: {utilization}: not in valid range [0, 100]"))
        if not 0 <= score <= MAX_CUSTOM_PRIORITY_SCORE:
            problems.append((f"shape[{i}].score", f"Invalid value: {score}: not in valid range [0, 10]"))
    return tuple(points)


def _capacity_of(capacity: Mapping[str, Any]) -> Fraction:
    """A CSIStorageCapacity's `capacity` (not maximumVolumeSize: Score reads Capacity); none is 0."""
    try:
        return parse_quantity(capacity["capacity"]) if capacity.get("capacity") is not None else Fraction(0)
    except QuantityError:
        return Fraction(0)


def broken_linear(shape: Sequence[tuple[int, int]], p: int) -> int:
    """helper.BuildBrokenLinearFunction: the shape's value at utilization p (Go's division)."""
    for i, (utilization, score) in enumerate(shape):
        if p <= utilization:
            if i == 0:
                return score
            u0, s0 = shape[i - 1]
            return s0 + int((score - s0) * (p - u0) / (utilization - u0))
    return shape[-1][1]


def capacity_score(shape: Sequence[tuple[int, int]], classes: Mapping[str, tuple[int, int]]) -> int:
    """buildScorerFunction: per class (requested, capacity), the shape's score of its
    utilization (100 when it does not fit), averaged over classes and rounded."""
    if not classes:
        return 0
    total = 0
    for requested, capacity in classes.values():
        fits = capacity != 0 and requested <= capacity
        utilization = requested * MAX_UTILIZATION // capacity if fits else MAX_UTILIZATION
        total += broken_linear(shape, utilization)
    return math.floor(total / len(classes) + 0.5)


# --- cycle state -------------------------------------------------------------------------


@dataclass(slots=True)
class _StateData:
    """Written by PreFilter, filled per node by Filter, read by Reserve, PreBind and Unreserve.
    Shared, not copied, by preemption's dry runs, as upstream."""

    claims: PodVolumeClaims
    pod_volumes_by_node: dict[str, PodVolumes] = field(default_factory=dict)
    all_bound: bool = False
    every_node: PodVolumes | None = None
    """When Filter's answer was the same on every node and they passed: the bindings each
    node it judged gets (a copy, on first read), instead of one entry per node."""
    uniform: tuple[PodVolumes | None, Status | None] | None = None
    """Filter's one answer for every node, when it does not depend on the node (computed at
    the first batch Filter); None until then or when it depends on the node."""
    uniform_known: bool = False
    statuses: dict[str, Status] = field(default_factory=dict)
    """Node name → the rejection the batch Filter found there, for filter_statuses."""

    def clone(self) -> _StateData:
        return self

    def volumes_on(self, node_name: str) -> PodVolumes | None:
        """The bindings Filter found for the node: None when it did not pass there."""
        volumes = self.pod_volumes_by_node.get(node_name)
        if volumes is None and self.every_node is not None:
            every = self.every_node
            volumes = self.pod_volumes_by_node[node_name] = PodVolumes(
                static_bindings=[BindingInfo(pvc=b.pvc, pv=b.pv) for b in every.static_bindings],
                dynamic_provisions=list(every.dynamic_provisions), node_capacities=list(every.node_capacities))
        return volumes

    def peek(self, node_name: str) -> PodVolumes | None:
        """`volumes_on` without the copy, for reading only."""
        volumes = self.pod_volumes_by_node.get(node_name)
        return volumes if volumes is not None else self.every_node


STATE_KEY = StateKey[_StateData](NAME, "stateData")


# --- plugin ------------------------------------------------------------------------------


class VolumeBinding:
    name = NAME

    def __init__(self, args: VolumeBindingArgs | None, handle: Handle) -> None:
        args = args or VolumeBindingArgs()
        self.handle = handle
        scale = MAX_NODE_SCORE // MAX_CUSTOM_PRIORITY_SCORE
        self.shape: tuple[tuple[int, int], ...] | None = (
            tuple((u, s * scale) for u, s in args.shape)
            if args.shape and features.enabled(features.STORAGE_CAPACITY_SCORING) else None)
        self.binder = VolumeBinder(objects=handle.objects, client=handle.client,
                                   bind_timeout=float(args.bind_timeout_seconds),
                                   node_labels=self._node_labels, clock=handle.clock)

    def _node_labels(self, node_name: str) -> Mapping[str, str] | None:
        node = self.handle.snapshot.get(node_name)
        return node.labels if node is not None and node.node is not None else None

    # PreFilter / Filter

    def sign_pod(self, pod: PodInfo) -> list[SignFragment]:
        return [signers.volumes(pod)]

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]) -> Status | None:
        if not pod.spec.get("volumes"):
            return SKIP  # the common case: no claims, nothing to do anywhere in the cycle
        problem = self._claims_problem(pod)
        if problem is not None:
            return problem
        if not pod_claims(pod.pod):
            return SKIP
        try:
            claims = self.binder.get_pod_volume_claims(pod.pod)
        except VolumeBindingError as exc:
            return Status.as_error(exc)
        if claims.unbound_claims_immediate:
            # The PV controller binds these; a PVC/PV event brings the pod back.
            return Status.unresolvable(ERR_REASON_UNBOUND_IMMEDIATE)
        state.write(STATE_KEY, _StateData(claims=claims))
        return None

    def _claims_problem(self, pod: PodInfo) -> Status | None:
        """podHasPVCs: every claim exists, is not lost or being deleted, and an ephemeral
        volume's claim belongs to the pod."""
        for claim_name, ephemeral in pod_claims(pod.pod):
            pvc = self.handle.objects.get("PersistentVolumeClaim", claim_name, pod.namespace)
            if pvc is None:
                if ephemeral:
                    return Status.unresolvable("waiting for ephemeral volume controller to create the "
                                               f'persistentvolumeclaim "{claim_name}"')
                return Status.unresolvable(f'persistentvolumeclaim "{claim_name}" not found')
            if (pvc.get("status") or {}).get("phase") == "Lost":
                volume = (pvc.get("spec") or {}).get("volumeName") or ""
                return Status.unresolvable(f'persistentvolumeclaim "{claim_name}" bound to non-existent '
                                           f'persistentvolume "{volume}"')
            if (pvc.get("metadata") or {}).get("deletionTimestamp"):
                return Status.unresolvable(f'persistentvolumeclaim "{claim_name}" is being deleted')
            if ephemeral and (error := ephemeral_claim_owned_error(pod.pod, pvc)) is not None:
                return Status.unresolvable(error)
        return None

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        data = state.get(STATE_KEY)
        if data is None:
            return Status.as_error(f"{NAME}: no stateData in the cycle state")
        try:
            volumes, reasons = self.binder.find_pod_volumes(data.claims, node.node or {})
        except VolumeBindingError as exc:
            return Status.as_error(exc)
        if reasons:
            return Status.unresolvable(*reasons)
        data.pod_volumes_by_node[node.name] = volumes
        return None

    def _uniform(self, data: _StateData) -> tuple[PodVolumes | None, Status | None] | None:
        """Filter's answer on every node when it is the same everywhere (else None), once a cycle."""
        if not data.uniform_known:
            data.uniform_known = True
            if self.binder.node_independent(data.claims):
                try:
                    volumes, reasons = self.binder.find_pod_volumes(data.claims, {"metadata": {"name": ""}})
                except VolumeBindingError as exc:
                    data.uniform = None, Status.as_error(exc)
                else:
                    data.uniform = (None, Status.unresolvable(*reasons)) if reasons else (volumes, None)
        return data.uniform

    def passes_every_node(self, state: CycleState, pod: PodInfo, table: NodeTable) -> bool:
        data = state.get(STATE_KEY)
        if data is None:
            return False
        uniform = self._uniform(data)
        if uniform is None or uniform[1] is not None:
            return False
        data.every_node = uniform[0]
        return True

    def filter_nodes(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        """Filter over rows: one answer for all when it does not depend on the node, else per
        node (the rejections kept for filter_statuses)."""
        data = state.get(STATE_KEY)
        if data is None:
            return np.zeros(len(rows), dtype=bool)
        uniform = self._uniform(data)
        if uniform is not None:
            if uniform[1] is None:
                data.every_node = uniform[0]
            return np.full(len(rows), uniform[1] is None, dtype=bool)
        nodes = table.nodes
        passed = np.ones(len(rows), dtype=bool)
        for i, row in enumerate(rows.tolist()):
            node = nodes[row]
            status = self.filter(state, pod, node)
            if status is not None:
                passed[i] = False
                data.statuses[node.name] = status
        return passed

    def filter_statuses(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: np.ndarray) -> list[Status]:
        data = state.get(STATE_KEY)
        uniform = self._uniform(data) if data is not None else None
        if uniform is not None and uniform[1] is not None:
            return [uniform[1]] * len(rows)
        nodes = table.nodes
        out: list[Status] = []
        for row in rows.tolist():
            node = nodes[row]
            found = data.statuses.get(node.name) if data is not None else None
            if found is None:
                found = self.filter(state, pod, node) or Status.as_error(
                    f"{NAME}: node {node.name} passed the filter it was rejected by")
            out.append(found)
        return out

    # PreScore / Score

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> Status | None:
        return SKIP if self.shape is None else None

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        data = state.get(STATE_KEY)
        volumes = data.peek(node.name) if data is not None else None
        if self.shape is None or volumes is None:
            return 0
        classes: dict[str, tuple[int, int]] = {}
        if volumes.static_bindings:
            for binding in volumes.static_bindings:
                class_name = (binding.pv.get("spec") or {}).get("storageClassName") or ""
                requested, capacity = classes.get(class_name, (0, 0))
                classes[class_name] = (requested + math.ceil(requested_storage(binding.pvc)),
                                       capacity + math.ceil(volume_capacity(binding.pv)))
        else:
            for pvc, found in zip(volumes.dynamic_provisions, volumes.node_capacities, strict=False):
                if found is None:
                    continue
                class_name = claim_class(pvc) or ""
                requested, _ = classes.get(class_name, (0, 0))
                # The class's capacity on the node, once: two claims of one class share it.
                classes[class_name] = (requested + math.ceil(requested_storage(pvc)),
                                       math.ceil(_capacity_of(found)))
        return capacity_score(self.shape, classes)

    def score_nodes(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        """Zeros at once for a pod without claims (the usual pod), one score for all when
        Filter found the same bindings everywhere, else Score per node."""
        data = state.get(STATE_KEY)
        if data is None:
            return np.zeros(len(rows), dtype=np.int64)
        nodes = table.nodes
        if data.every_node is not None and len(rows):
            return np.full(len(rows), self.score(state, pod, nodes[int(rows[0])]), dtype=np.int64)
        return np.fromiter((self.score(state, pod, nodes[row]) for row in rows.tolist()), dtype=np.int64,
                           count=len(rows))

    # Reserve / Unreserve

    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        data = state.get(STATE_KEY)
        if data is None:
            return None  # no claims
        volumes = data.volumes_on(node_name)
        if volumes is None:
            data.all_bound = True
            return None
        try:
            data.all_bound = self.binder.assume_pod_volumes(pod.pod, node_name, volumes)
        except VolumeBindingError as exc:
            return Status.as_error(exc)
        return None

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        data = state.get(STATE_KEY)
        volumes = data.volumes_on(node_name) if data is not None else None
        if volumes is not None:
            self.binder.revert_assumed_pod_volumes(volumes)

    # PreBind

    def pre_bind_pre_flight(self, state: CycleState, pod: PodInfo,
                            node_name: str) -> tuple[PreBindPreFlightResult, Status | None]:
        """Whether PreBind has claims to bind on `node_name` (Skip when Reserve found them
        all bound, or the pod has none); may run beside DynamicResources' PreBind."""
        data = state.get(STATE_KEY)
        if data is None or data.all_bound:
            return ALLOW_PARALLEL, SKIP
        if data.volumes_on(node_name) is None:
            return ALLOW_PARALLEL, Status.as_error(f'no pod volume found for node "{node_name}"')
        return ALLOW_PARALLEL, None

    async def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        data = state.get(STATE_KEY)
        if data is None or data.all_bound:
            return None
        volumes = data.volumes_on(node_name)
        if volumes is None:
            return Status.as_error(f'no pod volume found for node "{node_name}"')
        try:
            await self.binder.bind_pod_volumes(pod.pod, node_name, volumes)
        except VolumeBindingError as exc:
            return Status.as_error(exc)
        return None

    # Queueing

    def events_to_register(self) -> Iterable[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(ClusterEvent(EventResource.STORAGE_CLASS, ActionType.ADD | ActionType.UPDATE),
                                 self.is_schedulable_after_storage_class_change),
            ClusterEventWithHint(ClusterEvent(EventResource.PERSISTENT_VOLUME_CLAIM,
                                              ActionType.ADD | ActionType.UPDATE),
                                 self.is_schedulable_after_persistent_volume_claim_change),
            ClusterEventWithHint(ClusterEvent(EventResource.PERSISTENT_VOLUME, ActionType.ADD | ActionType.UPDATE)),
            ClusterEventWithHint(ClusterEvent(EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL)),
            ClusterEventWithHint(ClusterEvent(EventResource.CSI_NODE, ActionType.ADD | ActionType.UPDATE),
                                 self.is_schedulable_after_csi_node_change),
            ClusterEventWithHint(ClusterEvent(EventResource.CSI_DRIVER, ActionType.UPDATE),
                                 self.is_schedulable_after_csi_driver_change),
            ClusterEventWithHint(ClusterEvent(EventResource.CSI_STORAGE_CAPACITY, ActionType.ADD | ActionType.UPDATE),
                                 self.is_schedulable_after_csi_storage_capacity_change),
        ]

    def is_schedulable_after_csi_storage_capacity_change(self, pod: Any, old: Any, new: Any) -> QueueingHint:
        """A new capacity object, one that now covers other nodes or another class, or more room."""
        old, new = objects.raw(old), objects.raw(new)
        if old is None or new is None:
            return QueueingHint.QUEUE
        if old.get("nodeTopology") != new.get("nodeTopology") or old.get("storageClassName") != new.get(
                "storageClassName"):
            return QueueingHint.QUEUE
        for field_name in ("capacity", "maximumVolumeSize"):
            if _more_room(old.get(field_name), new.get(field_name)):
                return QueueingHint.QUEUE
        return QueueingHint.SKIP

    def is_schedulable_after_csi_driver_change(self, pod: Any, old: Any, new: Any) -> QueueingHint:
        """A driver that stops publishing capacity no longer limits provisioning."""
        before = ((objects.raw(old) or {}).get("spec") or {}).get("storageCapacity")
        after = ((objects.raw(new) or {}).get("spec") or {}).get("storageCapacity")
        return QueueingHint.QUEUE if before and not after else QueueingHint.SKIP

    def is_schedulable_after_storage_class_change(self, pod: Any, old: Any, new: Any) -> QueueingHint:
        """A new class, or new allowedTopologies (the binding mode cannot change)."""
        if old is None:
            return QueueingHint.QUEUE
        if (objects.raw(old) or {}).get("allowedTopologies") != (objects.raw(new) or {}).get("allowedTopologies"):
            return QueueingHint.QUEUE
        return QueueingHint.SKIP

    def is_schedulable_after_persistent_volume_claim_change(self, pod: Any, old: Any, new: Any) -> QueueingHint:
        """A claim of this pod was created or changed."""
        raw_pod, pvc = objects.raw(pod), objects.raw(new)
        pod_namespace = objects.meta(raw_pod).get("namespace") or "default"
        if objects.meta(pvc).get("namespace") != pod_namespace:
            return QueueingHint.SKIP
        name = objects.meta(pvc).get("name")
        if any(claim == name for claim, _ in pod_claims(raw_pod or {})):
            return QueueingHint.QUEUE
        return QueueingHint.SKIP

    def is_schedulable_after_csi_node_change(self, pod: Any, old: Any, new: Any) -> QueueingHint:
        """A new CSINode, or a change of its migrated-plugins annotation."""
        if old is None:
            return QueueingHint.QUEUE
        before = (objects.meta(objects.raw(old)).get("annotations") or {}).get(MIGRATED_PLUGINS_ANNOTATION)
        after = (objects.meta(objects.raw(new)).get("annotations") or {}).get(MIGRATED_PLUGINS_ANNOTATION)
        return QueueingHint.QUEUE if before != after else QueueingHint.SKIP


def _more_room(old: Any, new: Any) -> bool:
    if new is None:
        return False
    if old is None:
        return True
    try:
        return parse_quantity(new) > parse_quantity(old)
    except QuantityError:
        return True


PLUGIN = PluginFactory(name=NAME, factory=VolumeBinding, args_type=VolumeBindingArgs)
