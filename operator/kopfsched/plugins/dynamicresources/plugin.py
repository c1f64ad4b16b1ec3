"""DynamicResources: pods with ResourceClaims go where their devices can be allocated, and
the scheduler allocates them (upstream's dynamicresources.go, resource.k8s.io/v1).

Extension points:

- PreEnqueue: every claim the pod names must exist ("pod \"ns/name\": ResourceClaim not
  created yet" while a template's claim is not in status.resourceClaimStatuses; "could not
  find ResourceClaim \"ns/name\"" for a claim by name that does not exist), must not be
  deleting, and a generated claim must be owned by the pod; otherwise the pod waits outside
  the active queue until a claim event or the pod's own status update lets it in.
- PreFilter: Skip for pods without claims (their cycles cost nothing more). An allocated
  claim must be reservable for the pod ("resourceclaim in use"); an unallocated one needs
  its device classes ("request <r>: device class <c> does not exist"). Then one allocator
  (allocator.py) is built for the unallocated claims against the ResourceSlices' devices,
  minus the devices other claims hold, including claims assumed by this scheduler.
- Filter: an allocated claim's node selector must match the node ("resourceclaim not
  available on the node"); the unallocated claims must fit the node's devices ("cannot
  allocate all claims"). Both UnschedulableAndUnresolvable: preemption does not free devices.
- PostFilter: deallocates one allocated claim that is not available on any node and not in
  use by another pod ("deallocation of ResourceClaim completed"); otherwise Unschedulable with
  no reason, so the FitError message carries no text of this plugin (v1.37.2, as upstream logs
  "No new claims to deallocate" but returns a bare status).
- PreScore/Score/NormalizeScore (v1.37, DRAPrioritizedList locked on): a node scores, per
  `firstAvailable` request, 8 minus the index of the sub-request its allocation takes there
  (FirstAvailableDeviceRequestMaxSize - i), normalized so the best node gets 100; every node
  scores 0 for a pod without claims, as upstream (there is no PreScore to skip it).
- Reserve/Unreserve: assume (or forget) the chosen allocation in memory, shared by every
  profile, so no other pod gets those devices before the API write lands.
- PreBindPreFlight: PreBind has work for any pod with claims (Skip without).
- PreBind: write the finalizer, `status.allocation` (with its allocationTimestamp) and the pod
  into `status.reservedFor`; create the pod's claim for its extended resources backed by DRA
  (extended.py) and record it in the pod's status; then, when an allocated device has binding
  conditions (DRADeviceBindingConditions), wait for them in the claims' `status.devices`.
- Extended resources backed by DRA (DRAExtendedResource): see extended.py; a pod asking for
  one that a DeviceClass provides has work here even without claims.
- Binding conditions: an allocated claim whose binding failed or timed out is unavailable on
  every node in Filter, so PostFilter deallocates it.

Args: `filterTimeout` (a duration, default 10s, 0 disables): how long the search may take on one
node before Filter answers an Error "node <name>: timed out trying to allocate devices" (the
pod retries with backoff); `bindingTimeout` (default 600s, at least 1s): how long PreBind waits
for binding conditions.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kopfsched import features
from kopfsched.framework.client import ClusterError, NotFoundError
from kopfsched.framework.cycle_state import CycleState, StateKey
from kopfsched.framework.duration import parse_duration
from kopfsched.framework.events import ActionType, ClusterEvent, ClusterEventWithHint, EventResource, QueueingHint
from kopfsched.framework.handle import Handle
from kopfsched.framework.interface import (
    ALLOW_PARALLEL,
    MAX_NODE_SCORE,
    NodeToStatus,
    PostFilterResult,
    PreBindPreFlightResult,
    SignFragment,
)
from kopfsched.framework.labels import NodePredicate, SelectorError, node_selector
from kopfsched.framework.node_table import NodeTable
from kopfsched.framework.registry import ArgsError, PluginFactory, check_known_fields
from kopfsched.framework.status import SKIP, Status
from kopfsched.framework.types import NodeInfo, Obj, PodInfo, parse_time, rfc3339
from kopfsched.plugins.dynamicresources import extended
from kopfsched.plugins.dynamicresources.allocator import (
    AllocationError,
    AllocationTimeout,
    Allocator,
    InvalidPoolsError,
    Placement,
    claim_ref,
)
from kopfsched.plugins.dynamicresources.manager import DEVICE_CLASS, RESOURCE_CLAIM, DraManager, manager_for
from kopfsched.plugins.helper import objects
from kopfsched.plugins.helper.normalize_score import default_normalize_score

NAME = "DynamicResources"
FINALIZER = "resource.kubernetes.io/delete-protection"
RESERVED_FOR_MAX_SIZE = 256
"""resourceapi.ResourceClaimReservedForMaxSize."""
FIRST_AVAILABLE_MAX_SIZE = 8
"""resourceapi.FirstAvailableDeviceRequestMaxSize: the score of a request's first sub-request."""


@dataclass(frozen=True)
class DynamicResourcesArgs:
    """Upstream's DynamicResourcesArgs."""

    filter_timeout: float = 10.0
    """Seconds Filter may spend searching one node's devices (DRASchedulerFilterTimeout, on by
    default): past it Filter answers an Error, "node <name>: timed out trying to allocate devices".
    0 disables it."""
    binding_timeout: float = 600.0
    """Seconds PreBind waits for the binding conditions of the allocated devices
    (DRADeviceBindingConditions, beta and on), and after which an allocated claim whose
    conditions are still not met counts as unavailable in Filter. At least 1s."""

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> DynamicResourcesArgs:
        problems: list[tuple[str, str]] = []
        check_known_fields(raw, {"filterTimeout", "bindingTimeout"}, problems)
        timeout = _duration_arg(raw, "filterTimeout", 10.0, 0.0, 'must be a non-negative duration such as "10s"',
                                problems)
        binding = _duration_arg(raw, "bindingTimeout", 600.0, 1.0, "must be at least 1 second", problems)
        if problems:
            raise ArgsError(problems)
        return cls(filter_timeout=timeout, binding_timeout=binding)


def _duration_arg(raw: Mapping[str, Any], field_name: str, default: float, minimum: float, rule: str,
                  problems: list[tuple[str, str]]) -> float:
    """A duration argument in seconds: `default` when absent; below `minimum` or not a
    duration, a problem saying `rule` (and the default)."""
    value = raw.get(field_name)
    if value is None:
        return default
    parsed = parse_duration(value)
    if parsed is None or parsed < minimum:
        problems.append((field_name, f"Invalid value: {value!r}: {rule}"))
        return default
    return parsed


class ClaimError(Exception):
    """A pod's claim is missing, deleting or not the pod's: the message is upstream's."""


_CANNOT_ALLOCATE = Status.unresolvable("cannot allocate all claims")
_STALE_EXTENDED = Status.unresolvable("cannot schedule extended resource claim")
_CANNOT_FIT = Status.unresolvable("cannot fit resource")
_INVALID_POOLS = Status.unresolvable("invalid resource pools were encountered")


# --- claims of a pod ----------------------------------------------------------------------


def pod_claim_names(pod: Obj) -> Iterator[tuple[str, bool]]:
    """(claim name, generated from a template) per pod claim that has one (upstream's
    resourceclaim.Name), in the pod's order; raises ClaimError when it reaches a template's
    claim not generated yet, so that an earlier claim's error comes first, as upstream's
    foreachPodResourceClaim checks each claim before it names the next."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    statuses = {s.get("name"): s for s in (pod.get("status") or {}).get("resourceClaimStatuses") or ()}
    for pod_claim in spec.get("resourceClaims") or ():
        if pod_claim.get("resourceClaimName"):
            yield pod_claim["resourceClaimName"], False
        elif pod_claim.get("resourceClaimTemplateName"):
            status = statuses.get(pod_claim.get("name"))
            if status is None:
                raise ClaimError(f'pod "{meta.get("namespace", "default")}/{meta.get("name", "")}": '
                                 "ResourceClaim not created yet")
            if status.get("resourceClaimName"):  # none generated: nothing to allocate
                yield status["resourceClaimName"], True
        else:
            raise ClaimError(f'pod "{meta.get("namespace", "default")}/{meta.get("name", "")}", spec.resourceClaim '
                             f'"{pod_claim.get("name", "")}": none of the supported fields are set')


def _controlled_by(claim: Obj, pod: PodInfo) -> bool:
    return any(ref.get("controller") and ref.get("uid") == pod.uid
               for ref in (claim.get("metadata") or {}).get("ownerReferences") or ())


def reserved_for(claim: Obj, pod_uid: str) -> bool:
    return any(ref.get("uid") == pod_uid for ref in (claim.get("status") or {}).get("reservedFor") or ())


def _allocation(claim: Obj) -> Obj | None:
    return (claim.get("status") or {}).get("allocation")


def _key(claim: Obj) -> tuple[str, str]:
    meta = claim.get("metadata") or {}
    return meta.get("namespace") or "", meta.get("name") or ""


def _versioned(claim: Obj, patch: dict[str, Any]) -> dict[str, Any]:
    """The patch with the claim's resourceVersion: the API server answers 409 Conflict when
    the claim changed since we read it (upstream updates with the same precondition)."""
    version = (claim.get("metadata") or {}).get("resourceVersion")
    if version:
        patch.setdefault("metadata", {})["resourceVersion"] = version
    return patch


# --- binding conditions (DRADeviceBindingConditions) ---------------------------------------


BINDING_POLL_SECONDS = 5.0
"""How often PreBind looks at the claims while it waits for binding conditions (upstream's 5s)."""


class BindingError(Exception):
    """A device's binding failed or timed out: PreBind's and Filter's words are upstream's."""


def _device_status(claim: Obj, result: Obj) -> Obj | None:
    for device in (claim.get("status") or {}).get("devices") or ():
        if (device.get("device"), device.get("driver"), device.get("pool")) == (
                result.get("device"), result.get("driver"), result.get("pool")):
            return device
    return None


def _condition_true(device: Obj, kind: str) -> Obj | None:
    return next((c for c in device.get("conditions") or () if c.get("type") == kind and c.get("status") == "True"),
                None)


def _go_quote(text: str) -> str:
    """Go's %q of a printable string."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def ready_for_binding(claim: Obj) -> bool:
    """upstream isClaimReadyForBinding: every device's binding conditions true in the claim's
    status.devices (no conditions: ready); raises BindingError when a binding failure
    condition is true."""
    allocation = _allocation(claim)
    if allocation is None:
        return False
    for result in (allocation.get("devices") or {}).get("results") or ():
        if not result.get("bindingConditions"):
            continue
        device = _device_status(claim, result)
        if device is None:
            return False
        for kind in result.get("bindingFailureConditions") or ():
            failed = _condition_true(device, kind)
            if failed is not None:
                raise BindingError(f"device binding failed: claim={_key(claim)[1]}, reason={failed.get('reason', '')}, "
                                   f"message={_go_quote(failed.get('message') or '')}")
        if any(_condition_true(device, kind) is None for kind in result["bindingConditions"]):
            return False
    return True


def binding_timed_out(claim: Obj, timeout: float, now: float) -> bool:
    """upstream isClaimTimeout: a device of the claim has binding conditions and the claim was
    allocated more than `timeout` seconds ago."""
    allocation = _allocation(claim) or {}
    stamp = parse_time(allocation.get("allocationTimestamp"))
    if stamp is None:
        return False
    return any(r.get("bindingConditions") is not None and stamp + timeout < now
               for r in (allocation.get("devices") or {}).get("results") or ())


def has_binding_conditions(claims: Iterable[Obj]) -> bool:
    return any(r.get("bindingConditions") for claim in claims
               for r in ((_allocation(claim) or {}).get("devices") or {}).get("results") or ())


# --- cycle state --------------------------------------------------------------------------


@dataclass(slots=True)
class _Extended:
    """The pod's claim for its extended resources backed by DRA (extended.py)."""

    claim: Obj
    """The claim of an earlier cycle (in the API), or the in-memory one; PreBind's once created."""
    requests: dict[str, int]
    """The pod's non-zero requests of DRA-extended resource names."""
    backed: frozenset[str]
    """Those a DeviceClass provides."""
    found: bool
    """The claim is one an earlier cycle created (it is in the API)."""
    per_node: dict[str, tuple[Obj, list[Obj]]] = field(default_factory=dict)
    """Node -> (the claim with the requests the node needs from DRA, the request mappings)."""
    allocators: dict[Any, Allocator] = field(default_factory=dict)
    """The pod's unallocated claims plus a node's extended claim, by that claim's requests."""
    allocator_of: dict[str, Allocator] = field(default_factory=dict)
    """Node -> the allocator its placement came from."""
    allocation: Obj | None = None
    """Reserve's allocation for the node's extended claim."""
    assumed_as: str = ""
    """The name Reserve assumed the in-memory claim under (unique per pod)."""
    created: bool = False
    """PreBind created the claim in the API (Unreserve then deletes it)."""


@dataclass(slots=True)
class _StateData:
    claims: list[Obj]
    available_on: list[NodePredicate | None] = field(default_factory=list)
    """Per claim: the allocated claim's node selector (None: any node, or not allocated)."""
    pending: list[int] = field(default_factory=list)
    """Indices of the claims to allocate."""
    allocator: Allocator | None = None
    node_allocations: dict[str, Placement] = field(default_factory=dict)
    unavailable: set[int] = field(default_factory=set)
    allocations: dict[int, Obj] = field(default_factory=dict)
    """Claim index → the allocation Reserve assumed for it."""
    quick: tuple[Mapping[str, int], int] | None = None
    """Allocator.quick: (free devices per node, devices needed) for the one-request case."""
    invalid_nodes: frozenset[str] = frozenset()
    rejections: dict[str, Status] = field(default_factory=dict)
    """Filter answers computed by filter_nodes, so the runtime's follow-up asks cost nothing."""
    extended: _Extended | None = None
    """The pod's claim for extended resources backed by DRA (DRAExtendedResource), if any."""
    not_ready: frozenset[int] = frozenset()
    """Allocated claims whose binding failed or timed out: unavailable on every node, so that
    PostFilter may deallocate them (DRADeviceBindingConditions)."""

    @property
    def empty(self) -> bool:
        """Nothing for the plugin to do: no claims, no extended resources backed by DRA."""
        return not self.claims and self.extended is None

    def clone(self) -> _StateData:
        return self  # shared with preemption's dry runs, as upstream


STATE_KEY = StateKey[_StateData](NAME, "stateData")
_NO_CLAIMS = _StateData(claims=[])
"""The state of every pod without claims: read-only, as nothing is done for such a pod."""


class DynamicResources:
    name = NAME

    def __init__(self, args: DynamicResourcesArgs | None, handle: Handle) -> None:
        self.args = args or DynamicResourcesArgs()
        self.handle = handle
        self.manager: DraManager = manager_for(handle, NAME)
        self.device_taints = features.enabled(features.DRA_DEVICE_TAINTS)
        """Read once, as upstream's plugin reads its feature.Features when it is built."""
        self.wall_clock: Callable[[], float] = time.time
        """What allocationTimestamp and the binding timeout are measured on (upstream's time.Now)."""

    def _claims(self, pod: PodInfo) -> list[Obj]:
        """The pod's claims as this scheduler sees them (assumed allocations included);
        raises ClaimError with upstream's words (foreachPodResourceClaim)."""
        claims = []
        for name, generated in pod_claim_names(pod.pod):
            claim = self.manager.get_claim(pod.namespace, name)
            if claim is None:  # the assume cache's NotFoundError, as upstream's claim tracker returns it
                raise ClaimError(f'could not find ResourceClaim "{pod.namespace}/{name}"')
            if (claim.get("metadata") or {}).get("deletionTimestamp"):
                raise ClaimError(f'resourceclaim "{name}" is being deleted')
            if generated and not _controlled_by(claim, pod):
                raise ClaimError(f"ResourceClaim {claim_ref(claim)} was not created for Pod {pod.key} "
                                 "(Pod is not owner)")
            claims.append(claim)
        return claims

    # PreEnqueue

    def pre_enqueue(self, pod: PodInfo) -> Status | None:
        if not pod.spec.get("resourceClaims"):
            return None
        try:
            self._claims(pod)
        except ClaimError as exc:
            return Status.unresolvable(str(exc))
        return None

    # PreFilter / Filter

    def sign_pod(self, pod: PodInfo) -> list[SignFragment] | None:
        """Pods with claims are not signed."""
        return None if pod.spec.get("resourceClaims") else []

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]) -> Status | None:
        if not pod.spec.get("resourceClaims") and not (pod.requests.scalar and self.manager.resolver.any()):
            state.write(STATE_KEY, _NO_CLAIMS)  # the common case: the shared empty state, nothing built
            return SKIP
        try:
            claims = self._claims(pod)
        except ClaimError as exc:
            state.write(STATE_KEY, _NO_CLAIMS)  # upstream writes its state before it looks at claims
            return Status.unresolvable(str(exc))
        ext = self._extended(pod)
        if not claims and ext is None:
            state.write(STATE_KEY, _NO_CLAIMS)
            return SKIP
        # Upstream keeps the claims in its state only once PreFilter passed: after a rejection
        # here PostFilter finds none, so it neither deallocates nor deletes anything.
        state.write(STATE_KEY, _NO_CLAIMS)
        data = _StateData(claims=claims, extended=ext)
        for index, claim in enumerate(claims):
            allocation = _allocation(claim)
            if allocation is not None:
                reserved = (claim.get("status") or {}).get("reservedFor") or ()
                if len(reserved) >= RESERVED_FOR_MAX_SIZE and not reserved_for(claim, pod.uid):
                    return Status.unresolvable("resourceclaim in use")
                data.available_on.append(self._selector(allocation))
                if self._binding_stuck(claim):
                    data.not_ready |= {index}
                continue
            data.available_on.append(None)
            data.pending.append(index)
            problem = self._check_requests(claim)
            if problem is not None:
                return problem
        if ext is not None and ext.found and _allocation(ext.claim) is not None:
            reserved = (ext.claim.get("status") or {}).get("reservedFor") or ()
            if len(reserved) >= RESERVED_FOR_MAX_SIZE and not reserved_for(ext.claim, pod.uid):
                return Status.unresolvable("resourceclaim in use")
        state.write(STATE_KEY, data)
        if data.pending or (ext is not None and _allocation(ext.claim) is None):
            data.allocator = self._allocator([claims[i] for i in data.pending])
            if len(data.pending) == len(claims) and ext is None:
                try:
                    data.quick = data.allocator.quick()
                except AllocationError:
                    data.quick = None  # Filter reports it, node by node
                data.invalid_nodes = self.manager.inventory().invalid_nodes
        return None

    def _allocator(self, claims: list[Mapping[str, Any]]) -> Allocator:
        objects = self.handle.objects
        return Allocator(claims=claims, classes=lambda name: objects.get(DEVICE_CLASS, name),
                         inventory=self.manager.inventory(), in_use=self.manager.sync().counts,
                         shares=self.manager.shares,
                         free_counts=self.manager.free_counts, clock=self.handle.clock,
                         timeout=self.args.filter_timeout, device_taints=self.device_taints)

    def _extended(self, pod: PodInfo) -> _Extended | None:
        """preFilterExtendedResources: the pod's extended-resource claim when a DeviceClass
        backs one of its extended resources, None otherwise."""
        if not pod.requests.scalar:
            return None
        requests = extended.dra_requests(pod)
        resolver = self.manager.resolver
        backed = frozenset(name for name in requests if resolver.get(name) is not None)
        if not backed:
            return None
        found = extended.find_claim(pod, self.handle.objects.list(RESOURCE_CLAIM))
        if found is not None:
            return _Extended(claim=found, requests=requests, backed=backed, found=True)
        return _Extended(claim=extended.in_memory_claim(pod), requests=requests, backed=backed, found=False)

    def _binding_stuck(self, claim: Obj) -> bool:
        """Filter's check of an allocated claim (upstream's, per node; the answer is the same
        on every node): a binding failure condition is true, or the conditions are not met in
        bindingTimeout."""
        try:
            ready = ready_for_binding(claim)
        except BindingError:
            return True
        return not ready and binding_timed_out(claim, self.args.binding_timeout, self.wall_clock())

    @staticmethod
    def _selector(allocation: Obj) -> NodePredicate | None:
        terms = (allocation.get("nodeSelector") or {}).get("nodeSelectorTerms")
        if terms is None:
            return None
        try:
            return node_selector(terms)
        except SelectorError:
            return lambda labels, name: False

    def _check_requests(self, claim: Obj) -> Status | None:
        for request in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or ():
            name = request.get("name") or ""
            if request.get("exactly") is not None:
                problem = self._check_class(request["exactly"].get("deviceClassName") or "", name)
            elif request.get("firstAvailable"):
                problem = next((p for sub in request["firstAvailable"]
                                if (p := self._check_class(sub.get("deviceClassName") or "",
                                                           f"{name}/{sub.get('name') or ''}")) is not None), None)
            else:
                problem = Status.unresolvable(f"resource claim {claim_ref(claim)}, request {name}: "
                                              "unknown request type")
            if problem is not None:
                return problem
        return None

    def _check_class(self, class_name: str, request_name: str) -> Status | None:
        if not class_name:
            return Status.as_error(f"request {request_name}: unsupported request type")
        if self.handle.objects.get(DEVICE_CLASS, class_name) is None:
            # Waits in the unschedulable pool until a DeviceClass event.
            return Status.unresolvable(f"request {request_name}: device class {class_name} does not exist")
        return None

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        data = state.get(STATE_KEY)
        if data is None or data.empty:
            return None
        allocator = data.allocator
        ext = data.extended
        if ext is not None:
            rejected, node_claim = self._filter_extended(ext, pod, node, user_claims=bool(data.claims))
            if rejected is not None:
                return rejected
            if node_claim is None and not data.claims:
                return None  # every extended resource comes from the node's device plugins
            if node_claim is not None:
                allocator = self._extended_allocator(data, ext, node_claim)
                ext.allocator_of[node.name] = allocator
        if data.quick is not None:
            free, need = data.quick
            if free.get(node.name, 0) >= need:
                return None
            return _INVALID_POOLS if node.name in data.invalid_nodes else _CANNOT_ALLOCATE
        known = data.rejections.get(node.name)
        if known is not None:
            return known
        labels = node.labels
        unavailable = [index for index, selector in enumerate(data.available_on)
                       if (selector is not None and not selector(labels, node.name)) or index in data.not_ready]
        if allocator is not None and (data.pending or allocator is not data.allocator):
            try:
                allocations = allocator.allocate(node.name, labels)
            except AllocationTimeout:
                # An Error, not a rejection: a timeout may be transient, so the pod retries
                # with backoff rather than waiting for a cluster event (v1.37.2).
                return Status.as_error(f"node {node.name}: timed out trying to allocate devices")
            except InvalidPoolsError as exc:
                return Status.unresolvable(str(exc))
            except AllocationError as exc:
                return Status.as_error(str(exc))
            if allocations is None:
                return _CANNOT_ALLOCATE
            data.node_allocations[node.name] = allocations
        if unavailable:
            if ext is not None:
                ext.per_node.pop(node.name, None)
            data.unavailable.update(unavailable)
            return Status.unresolvable("resourceclaim not available on the node")
        return None

    def _filter_extended(self, ext: _Extended, pod: PodInfo, node: NodeInfo, *,
                         user_claims: bool) -> tuple[Status | None, Obj | None]:
        """filterExtendedResources: (a rejection, or None and the claim with what the node
        needs from DRA, None when it needs nothing)."""
        if ((ext.claim.get("spec") or {}).get("devices") or {}).get("requests") is not None:
            return _STALE_EXTENDED, None  # from an earlier cycle: PostFilter deletes it, the pod retries
        allocatable = node.allocatable.scalar
        needed = []
        for name in ext.requests:
            if name in ext.backed and allocatable.get(name, 0) == 0:
                needed.append(name)
            elif name not in allocatable:
                return _CANNOT_FIT, None
        if (not needed and not user_claims) or _allocation(ext.claim) is not None:
            ext.per_node.pop(node.name, None)
            return None, None
        # With claims of its own the pod gets the claim even where the node's device plugins
        # provide everything: with no request (v1.37.2, whose PreBind then creates it and fails
        # on its empty request mappings, so that such a pod never binds there).
        known = ext.per_node.get(node.name)
        if known is None:
            requests, mappings = extended.requests_and_mappings(pod.pod, needed, self.manager.resolver.get)
            known = ext.per_node[node.name] = (extended.node_claim(ext.claim, requests), mappings)
        return None, known[0]

    def _extended_allocator(self, data: _StateData, ext: _Extended, node_claim: Obj) -> Allocator:
        """The allocator for the pod's unallocated claims and this node's extended claim,
        shared by the nodes that need the same requests."""
        requests = node_claim["spec"]["devices"].get("requests") or ()
        key = tuple((r["name"], r["exactly"]["deviceClassName"], r["exactly"]["count"]) for r in requests)
        allocator = ext.allocators.get(key)
        if allocator is None:
            allocator = ext.allocators[key] = self._allocator([*(data.claims[i] for i in data.pending), node_claim])
        return allocator

    def filter_nodes(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        """Filter over many nodes: one dict lookup per node in the one-request case (the
        free-device index), else Filter per node with its rejections kept for the runtime."""
        data = state.get(STATE_KEY)
        nodes = table.nodes
        if data is None or data.empty:
            return np.ones(len(rows), dtype=bool)
        if data.quick is not None:
            free, need = data.quick
            return np.fromiter((free.get(nodes[row].name, 0) >= need for row in rows.tolist()), dtype=bool,
                               count=len(rows))
        passed = np.ones(len(rows), dtype=bool)
        for position, row in enumerate(rows.tolist()):
            status = self.filter(state, pod, nodes[row])
            if status is not None:
                data.rejections[nodes[row].name] = status
                passed[position] = False
        return passed

    # PreScore / Score

    def score_nodes(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        """Score over many nodes: zeros at once for the usual pod, one without claims."""
        data = state.get(STATE_KEY)
        if data is None or data.allocator is None or not data.node_allocations:
            return np.zeros(len(rows), dtype=np.int64)
        nodes = table.nodes
        return np.fromiter((self.score(state, pod, nodes[row]) for row in rows.tolist()), dtype=np.int64,
                           count=len(rows))

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        """computeScore: the sub-requests this node's allocation takes, earlier ones worth more.
        Zero where Filter made no allocation (no claim to allocate, or the one-request case)."""
        data = state.get(STATE_KEY)
        if data is None or data.allocator is None:
            return 0
        placement = data.node_allocations.get(node.name)
        if placement is None:
            return 0
        pending = {index: position for position, index in enumerate(data.pending)}
        score = 0
        for index, claim in enumerate(data.claims):
            requests = ((claim.get("spec") or {}).get("devices") or {}).get("requests") or ()
            position = pending.get(index)
            if position is not None:
                chosen = placement.options[position] if position < len(placement.options) else ()
                pairs = zip(requests, chosen, strict=False)
                score += sum(FIRST_AVAILABLE_MAX_SIZE - option
                             for request, option in pairs if request.get("firstAvailable"))
                continue
            allocated = {result.get("request") for result in
                         (((_allocation(claim) or {}).get("devices") or {}).get("results") or ())}
            for request in requests:
                for i, sub in enumerate(request.get("firstAvailable") or ()):
                    if f"{request.get('name') or ''}/{sub.get('name') or ''}" in allocated:
                        score += FIRST_AVAILABLE_MAX_SIZE - i
        return score

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: np.ndarray) -> np.ndarray:
        return default_normalize_score(scores, max_priority=MAX_NODE_SCORE)

    # PostFilter

    def post_filter(self, state: CycleState, pod: PodInfo,
                    statuses: NodeToStatus) -> tuple[PostFilterResult | None, Status | None]:
        data = state.get(STATE_KEY)
        if data is None:
            # PreFilter never ran (an earlier PreFilter plugin rejected the pod): upstream's
            # getStateData fails, and its Error ends PostFilter before preemption.
            return None, Status.as_error("not found")
        if data.empty:
            return None, Status.unschedulable()
        for index in sorted(data.unavailable):
            claim = data.claims[index]
            reserved = (claim.get("status") or {}).get("reservedFor") or ()
            if not reserved or (len(reserved) == 1 and reserved[0].get("uid") == pod.uid):
                self.handle.spawn(self._deallocate(claim), f"deallocate ResourceClaim {claim_ref(claim)}")
                return None, Status.unschedulable("deallocation of ResourceClaim completed")
        if data.extended is not None and data.extended.found:
            # Made by an earlier cycle whose binding failed: delete it, and the pod tries anew.
            claim = data.extended.claim
            self.handle.spawn(self._delete_claim(claim), f"delete ResourceClaim {claim_ref(claim)}")
            return None, Status.unschedulable("deletion of ResourceClaim completed")
        return None, Status.unschedulable()

    async def _deallocate(self, claim: Obj) -> None:
        await self.handle.client.patch_object(kind=RESOURCE_CLAIM, obj=claim, patch=_versioned(claim, {
            "status": {"allocation": None, "reservedFor": None, "devices": None}}))

    async def _delete_claim(self, claim: Obj) -> None:
        """upstream deleteClaim: drop the scheduler's finalizer (so that the deletion is not
        held up), then delete; a claim already gone is fine."""
        namespace, name = _key(claim)
        current = self.handle.objects.get(RESOURCE_CLAIM, name, namespace) or claim
        client = self.handle.client
        finalizers = list((current.get("metadata") or {}).get("finalizers") or ())
        try:
            if FINALIZER in finalizers:
                finalizers.remove(FINALIZER)
                current = await client.patch_object(kind=RESOURCE_CLAIM, obj=current, patch=_versioned(current, {
                    "metadata": {"finalizers": finalizers}}))
            await client.delete_object(kind=RESOURCE_CLAIM, obj=current)
        except NotFoundError:
            pass

    # Reserve / Unreserve

    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        data = state.get(STATE_KEY)
        ext = data.extended if data is not None else None
        node_claim = ext.per_node.get(node_name) if ext is not None else None
        if data is None or (not data.pending and node_claim is None):
            return None  # nothing to allocate (extended resources from the node's device plugins)
        placement = data.node_allocations.get(node_name)
        if placement is None and data.quick is not None and data.allocator is not None:
            placement = data.allocator.lazy(node_name)
        allocator = ext.allocator_of.get(node_name) if node_claim is not None and ext is not None else data.allocator
        if placement is None or allocator is None:
            return Status.as_error("claim allocation not found for node")
        try:
            allocations = allocator.results(placement)
        except AllocationError as exc:
            return Status.as_error(str(exc))
        wanted = len(data.pending) + (node_claim is not None)
        if len(allocations) != wanted:
            return Status.as_error(f"internal error, have {len(allocations)} allocations, {wanted} claims to "
                                   f"allocate, want {wanted} claims")
        if node_claim is not None and ext is not None:
            ext.allocation = allocations.pop()
            ext.assumed_as = f"{extended.SPECIAL_CLAIM_NAME}/{pod.uid}"
            claim = node_claim[0]
            meta = claim.get("metadata") or {}
            self.manager.assume({**claim, "metadata": {**meta, "name": ext.assumed_as, "finalizers": [FINALIZER]},
                                 "status": {"allocation": ext.allocation}})
        for index, allocation in zip(data.pending, allocations, strict=True):
            data.allocations[index] = allocation
            # A new claim object sharing the unchanged parts: API objects are never mutated.
            claim = data.claims[index]
            meta = claim.get("metadata") or {}
            finalizers = list(meta.get("finalizers") or ())
            if FINALIZER not in finalizers:
                finalizers.append(FINALIZER)
            self.manager.assume({**claim, "metadata": {**meta, "finalizers": finalizers},
                                 "status": {**(claim.get("status") or {}), "allocation": allocation}})
        return None

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        data = state.get(STATE_KEY)
        if data is None:
            return
        ext = data.extended
        if ext is not None:
            if ext.assumed_as:
                self.manager.forget(ext.claim["metadata"].get("namespace") or "", ext.assumed_as)
            if ext.created:
                # Written to the API by PreBind: delete it, or it would hold its devices.
                ext.created = False
                self.handle.spawn(self._delete_claim(ext.claim), f"delete ResourceClaim {claim_ref(ext.claim)}")
        for claim in data.claims:
            namespace, name = _key(claim)
            self.manager.forget(namespace, name)
            api = self.handle.objects.get(RESOURCE_CLAIM, name, namespace)
            if api is not None and _allocation(api) is not None and reserved_for(api, pod.uid):
                self.handle.spawn(self._unreserve_claim(api, pod), f"unreserve ResourceClaim {claim_ref(api)}")

    async def _unreserve_claim(self, claim: Obj, pod: PodInfo) -> None:
        remaining = [ref for ref in (claim.get("status") or {}).get("reservedFor") or () if ref.get("uid") != pod.uid]
        await self.handle.client.patch_object(kind=RESOURCE_CLAIM, obj=claim, patch=_versioned(claim, {
            "status": {"reservedFor": remaining}}))

    # PreBind

    def pre_bind_pre_flight(self, state: CycleState, pod: PodInfo,
                            node_name: str) -> tuple[PreBindPreFlightResult, Status | None]:
        """PreBind has work whenever the pod has claims (Skip otherwise), as upstream's; may
        run beside VolumeBinding's PreBind."""
        data = state.get(STATE_KEY)
        if data is None or data.empty:
            return ALLOW_PARALLEL, SKIP
        return ALLOW_PARALLEL, None

    async def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        data = state.get(STATE_KEY)
        if data is None or data.empty:
            return None
        for index, claim in enumerate(data.claims):
            if reserved_for(claim, pod.uid):
                continue
            try:
                data.claims[index] = await self._bind_claim(claim, data.allocations.get(index), pod)
            except (ClusterError, ClaimError) as exc:
                return Status.as_error(str(exc))
        ext = data.extended
        if ext is not None and ext.allocation is not None and not reserved_for(ext.claim, pod.uid):
            try:
                await self._bind_extended(ext, pod, node_name)
            except (ClusterError, ClaimError) as exc:
                return Status.as_error(str(exc))
        claims = [*data.claims, *([ext.claim] if ext is not None and ext.created else [])]
        if not has_binding_conditions(claims):
            return None
        return await self._wait_for_binding(claims, pod, node_name)

    async def _wait_for_binding(self, claims: list[Obj], pod: PodInfo, node_name: str) -> Status | None:
        """Wait until every allocated device's binding conditions are true (a driver or
        controller sets them in the claim's status.devices), up to bindingTimeout, looking
        every 5s (upstream's PreBind with DRADeviceBindingConditions)."""
        self.handle.spawn(self.handle.client.record_event(
            regarding=pod.pod, type="Normal", reason="BindingConditionsPending", action="Scheduling",
            message=f"waiting for binding conditions for device on node {node_name}",
            reporting_controller=self._profile_name(pod)), "BindingConditionsPending event")
        clock = self.handle.clock
        deadline = clock() + self.args.binding_timeout
        while True:
            try:
                if self._ready_for_binding(claims):
                    return None
            except BindingError as exc:
                return Status.as_error(str(exc))
            remaining = deadline - clock()
            if remaining <= BINDING_POLL_SECONDS:  # no look at the deadline itself, as wait.PollUntilContextTimeout
                await self.handle.sleep(max(remaining, 0.0))
                return Status.as_error("device binding timeout: context deadline exceeded")
            await self.handle.sleep(BINDING_POLL_SECONDS)

    def _profile_name(self, pod: PodInfo) -> str:
        framework = self.handle.framework
        return framework.profile_name if framework is not None else pod.spec.get("schedulerName") or ""

    def _ready_for_binding(self, claims: list[Obj]) -> bool:
        """upstream isPodReadyForBinding, over the claims as the watch last showed them."""
        for index, claim in enumerate(claims):
            namespace, name = _key(claim)
            current = self.manager.get_claim(namespace, name)
            if current is None:
                raise BindingError(f'resourceclaim.resource.k8s.io "{name}" not found')
            claims[index] = current
            if not ready_for_binding(current):
                if binding_timed_out(current, self.args.binding_timeout, self.wall_clock()):
                    raise BindingError(f"device binding timeout: claim={name}")
                return False
        return True

    async def _bind_extended(self, ext: _Extended, pod: PodInfo, node_name: str) -> None:
        """Create the node's extended-resource claim, allocate and reserve it, and record it in
        the pod's status.extendedResourceClaimStatus (upstream's bindClaim for that claim)."""
        node_claim, mappings = ext.per_node[node_name]
        namespace = (node_claim.get("metadata") or {}).get("namespace") or ""
        if not ext.created and not ext.found:
            try:
                ext.claim = await self.handle.client.create_object(kind=RESOURCE_CLAIM,
                                                                   obj=extended.creation_body(node_claim))
            except ClusterError as exc:
                raise ClaimError(f"create claim for extended resources {namespace}/: {exc}") from exc
            ext.created = True
        ext.claim = await self._bind_claim(ext.claim, ext.allocation, pod)
        # The API's claim holds the devices now; the in-memory one goes, the written one counts
        # until the watch brings it.
        if ext.assumed_as:
            self.manager.forget(namespace, ext.assumed_as)
            ext.assumed_as = ""
        self.manager.assume(ext.claim)
        if not mappings:
            raise ClaimError(f"nil or empty request mappings, no update of pod {pod.key} ExtendedResourceClaimStatus")
        status = {"requestMappings": mappings, "resourceClaimName": (ext.claim.get("metadata") or {}).get("name")}
        try:
            await self.handle.client.patch_pod_status(pod=pod.pod, extended_resource_claim_status=status)
        except ClusterError as exc:
            raise ClaimError(f"update pod {pod.key} ExtendedResourceClaimStatus: {exc}") from exc

    async def _bind_claim(self, claim: Obj, allocation: Obj | None, pod: PodInfo) -> Obj:
        """Write the allocation (if this cycle made one) and add the pod to reservedFor; the
        resourceVersion in each patch makes a concurrent change a conflict, not an overwrite."""
        namespace, name = _key(claim)
        current = self.handle.objects.get(RESOURCE_CLAIM, name, namespace) or claim
        client = self.handle.client
        if allocation is not None:
            if _allocation(current) is not None:
                raise ClaimError(f"claim {claim_ref(current)} got allocated elsewhere in the meantime")
            finalizers = list((current.get("metadata") or {}).get("finalizers") or ())
            if FINALIZER not in finalizers:
                current = await client.patch_object(kind=RESOURCE_CLAIM, obj=current, patch=_versioned(current, {
                    "metadata": {"finalizers": [*finalizers, FINALIZER]}}))
        status: dict[str, Any] = {"reservedFor": [
            *((current.get("status") or {}).get("reservedFor") or ()),
            {"resource": "pods", "name": pod.name, "uid": pod.uid}]}
        if allocation is not None:
            status["allocation"] = allocation
        # DRADeviceBindingConditions with DRAResourceClaimDeviceStatus (both on in v1.37): the
        # allocation gets its time, from which the binding timeout counts.
        written = allocation if allocation is not None else _allocation(current)
        if written is None:
            raise ClaimError(f"claim {claim_ref(current)} got deallocated elsewhere in the meantime")
        if not written.get("allocationTimestamp"):
            stamp = rfc3339(self.wall_clock())
            status["allocation"] = {**allocation, "allocationTimestamp": stamp} if allocation is not None else {
                "allocationTimestamp": stamp}
        return await client.patch_object(kind=RESOURCE_CLAIM, obj=current, patch=_versioned(current, {
            "status": status}))

    # Queueing

    def events_to_register(self) -> Iterable[ClusterEventWithHint]:
        return [
            # A node's labels may matter to a device's node selector, its allocatable to whether
            # it advertises an extended resource itself (DRAExtendedResource).
            ClusterEventWithHint(ClusterEvent(EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL
                                              | ActionType.UPDATE_NODE_ALLOCATABLE)),
            ClusterEventWithHint(ClusterEvent(EventResource.RESOURCE_CLAIM, ActionType.ADD | ActionType.UPDATE),
                                 self.is_schedulable_after_claim_change),
            ClusterEventWithHint(ClusterEvent(EventResource.POD, ActionType.UPDATE_POD_GENERATED_RESOURCE_CLAIM),
                                 self.is_schedulable_after_pod_change),
            ClusterEventWithHint(ClusterEvent(EventResource.DEVICE_CLASS, ActionType.ADD | ActionType.UPDATE)),
            ClusterEventWithHint(ClusterEvent(EventResource.RESOURCE_SLICE, ActionType.ADD | ActionType.UPDATE),
                                 self.is_schedulable_after_slice_change),
        ]

    def is_schedulable_after_claim_change(self, pod: Any, old: Any, new: Any) -> QueueingHint:
        """A claim of the pod was created or its status changed, or any claim freed its devices."""
        pod_info = PodInfo(objects.raw(pod) or {})
        old, new = objects.raw(old), objects.raw(new)
        if new is None:
            return QueueingHint.SKIP
        try:
            names = {name for name, _ in pod_claim_names(pod_info.pod)}
            self._claims(pod_info)
        except ClaimError:
            return QueueingHint.SKIP  # the pod still waits for something else
        if old is not None and _allocation(old) is not None and _allocation(new) is None:
            return QueueingHint.QUEUE  # deallocated: devices became free
        namespace, name = _key(new)
        if namespace != pod_info.namespace or name not in names:
            return QueueingHint.SKIP
        if old is None:
            return QueueingHint.QUEUE
        return QueueingHint.SKIP if (old.get("status") or {}) == (new.get("status") or {}) else QueueingHint.QUEUE

    def is_schedulable_after_pod_change(self, pod: Any, old: Any, new: Any) -> QueueingHint:
        """The pod's own claim statuses changed and every claim now exists."""
        if new is None:
            return QueueingHint.SKIP
        pod_info, new_info = PodInfo(objects.raw(pod) or {}), PodInfo(objects.raw(new) or {})
        if new_info.uid != pod_info.uid:
            return QueueingHint.SKIP
        try:
            self._claims(new_info)
        except ClaimError:
            return QueueingHint.SKIP
        return QueueingHint.QUEUE

    def is_schedulable_after_slice_change(self, pod: Any, old: Any, new: Any) -> QueueingHint:
        """New or changed devices may fit any pod with claims."""
        return QueueingHint.QUEUE if objects.spec(objects.raw(pod)).get("resourceClaims") else QueueingHint.SKIP


PLUGIN = PluginFactory(name=NAME, factory=DynamicResources, args_type=DynamicResourcesArgs)
