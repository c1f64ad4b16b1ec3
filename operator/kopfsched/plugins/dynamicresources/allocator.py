"""The structured-parameters allocator (upstream's dynamic-resource-allocation/structured):
which devices on one node satisfy every pending claim of a pod.

The search is upstream's: claims in order, each claim's requests in order, each request's
devices one at a time; for every device slot it tries each eligible device (not in use, all
selectors true, no untolerated taint, every constraint still satisfied) and recurses; the
first complete solution wins, and a dead end backtracks. `firstAvailable` requests try their
sub-requests in order and keep the first that leads to a solution. `allocationMode: All`
takes every matching device of the node, and fails if any of them is in use or has a taint
the request does not tolerate.

Device taints (DRADeviceTaints, GA in v1.37, switchable): a taint with effect NoSchedule or
NoExecute keeps a request off the device unless one of the request's (or sub-request's)
tolerations tolerates it, as upstream's resourceclaim.ToleratesTaint; any other effect
(None, or one unknown) is ignored. The allocation result copies the request's tolerations.
Also on, as upstream: prioritized lists (firstAvailable), admin access, and devices with binding
conditions (DRADeviceBindingConditions: their pools come last, the results carry the conditions,
`bindsToNode` restricts the allocation to the node).

Partitionable devices (DRAPartitionableDevices, beta and on in v1.37): a device that consumes
counters is taken only while, for every counter of its pool's counter sets, what the
allocated devices (other claims', in-flight ones included) consume plus what the devices
picked so far in this allocation consume stays within the counter's value; a shared device
already in use has paid its counters. Per-device node selection is the inventory's.

Consumable capacity (DRAConsumableCapacity and DRAFractionalCapacityRange, beta and on):
every device is checked against the request's `capacity.requests` (capacity.py); a device
with `allowMultipleAllocations` is never in use, each allocation of it is a share with a
fresh `shareID` and the `consumedCapacity` of all its capacities, and shares fit while their
sum stays within the capacity. `distinctAttribute` constraints want pairwise different
values.

Claims and devices that use none of these take the fast paths (a greedy pass, the free-device
index), which the search would answer the same way. The search on one node is bounded by
the plugin's filterTimeout (AllocationTimeout).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Container, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Protocol

from kopfsched.framework.quantity import QuantityError
from kopfsched.plugins.dynamicresources.capacity import CapacityError, Quantity, consumption, fits, request_capacities
from kopfsched.plugins.dynamicresources.cel import CELError, compile_expression
from kopfsched.plugins.dynamicresources.inventory import Counters, Device, DeviceID, Inventory, Pool
from kopfsched.plugins.helper.tolerations import tolerates_taint

ALLOCATION_RESULTS_MAX_SIZE = 32
"""resourceapi.AllocationResultsMaxSize: devices per claim."""


FreeCounts = Callable[[Any, Callable[[Device], bool]], Mapping[str, int] | None]
"""(request key, selectable) -> free matching devices per node, or None (DraManager.free_counts)."""


class Shared(Protocol):
    """The shares other claims hold (DraManager.shares): per device, how many, and the
    capacity they consume together (upstream's AllocatedSharedDeviceIDs, AggregatedCapacity)."""

    @property
    def counts(self) -> Mapping[DeviceID, int]: ...

    @property
    def consumed(self) -> Mapping[DeviceID, Mapping[str, Fraction]]: ...


class _NoShares:
    counts: Mapping[DeviceID, int] = {}
    consumed: Mapping[DeviceID, Mapping[str, Fraction]] = {}


class AllocationError(Exception):
    """Something is wrong with a claim or class: scheduling the pod stops with an error."""


class AllocationTimeout(AllocationError):
    """The search on one node ran past the filter timeout (upstream's filterTimeout)."""


class InvalidPoolsError(AllocationError):
    """No allocation on this node, and some of its pools are invalid (upstream's
    ErrFailedAllocationOnNode): the node is unschedulable, the pod is not in error."""


class _MaxSizeExceeded(Exception):
    """Internal: the claim would get more than ALLOCATION_RESULTS_MAX_SIZE devices."""


def claim_ref(claim: Mapping[str, Any]) -> str:
    """klog.KObj: namespace/name."""
    meta = claim.get("metadata") or {}
    return f"{meta.get('namespace') or ''}/{meta.get('name') or ''}" if meta.get("namespace") else meta.get("name", "")


@dataclass(slots=True)
class _Request:
    """One request without sub-requests, or one sub-request."""

    name: str
    """The request's name, or "request/sub-request"."""
    base_name: str
    sub_name: str
    class_name: str
    device_class: Mapping[str, Any]
    mode: str
    count: int
    admin_access: bool
    admin_access_set: bool
    selectors: list[tuple[str, Any, str]]
    """(source, compiled expression or None, where): class selectors first, then the request's."""
    key: tuple[Any, ...]
    """What `selectable` checks: class, selectors and (with device taints on) tolerations."""
    tolerations: list[dict[str, Any]] = field(default_factory=list)
    capacity: dict[str, Quantity] | None = None
    """`capacity.requests`, None when not set."""
    all_devices: list[Device] = field(default_factory=list)
    num_devices: int = 0
    allocator: Any = None

    def selectable(self, device: Device) -> bool:
        """Selectors true and no untolerated taint: the devices an ExactCount request may take."""
        return self.allocator.selectable(self, device) and not (
            device.taints and self.allocator.device_taints and taint_prevents(device.taints, self.tolerations))

    @property
    def shown(self) -> str:
        """The name the allocator's errors give: a sub-request's own (upstream's request.name())."""
        return self.sub_name or self.name


@dataclass(slots=True)
class _Slot:
    """A request of a claim: one _Request, or the sub-requests to try in order."""

    options: list[_Request]
    chosen: int = 0


@dataclass(slots=True)
class _Constraint:
    """matchAttribute: every device the same value; distinct (distinctAttribute): all different."""

    requests: frozenset[str]
    attribute: str
    distinct: bool = False
    value: tuple[str, Any] | None = None
    count: int = 0
    values: list[tuple[str, Any]] = field(default_factory=list)

    def applies(self, base: str, sub: str) -> bool:
        return not self.requests or base in self.requests or (bool(sub) and f"{base}/{sub}" in self.requests)

    def add(self, request: _Request, device: Device) -> bool:
        if not self.applies(request.base_name, request.sub_name):
            return True
        value = device.attribute(self.attribute)
        if value is None:
            return False
        if self.distinct:
            if value in self.values:
                return False
            self.values.append(value)
            return True
        if self.count == 0:
            self.value, self.count = value, 1
            return True
        if value != self.value:
            return False
        self.count += 1
        return True

    def remove(self, request: _Request) -> None:
        if self.applies(request.base_name, request.sub_name):
            if self.distinct:
                self.values.pop()
            else:
                self.count -= 1


@dataclass(slots=True)
class _Chosen:
    request: _Request
    device: Device
    share: str | None = None
    """The shareID of an allocation of a device with allowMultipleAllocations."""
    consumed: dict[str, Quantity] | None = None


@dataclass(slots=True)
class Placement:
    """The devices one node gives the claims: per claim, the chosen devices and, per request,
    which option (sub-request) was taken. `Allocator.results` turns it into AllocationResults;
    Filter keeps placements and only the chosen node's is ever turned. `devices` None: the
    node is known to fit and the devices are picked by `results` (nothing changes in between:
    the cycle runs alone)."""

    devices: list[list[_Chosen]] | None
    options: list[list[int]]
    node_name: str = ""
    labels: Mapping[str, str] | None = None


class Allocator:
    """Built once per cycle (PreFilter) for the pod's unallocated claims; `allocate` per node.

    `classes` looks up a DeviceClass by name; `in_use` holds the devices allocated to other
    claims (including those this scheduler has assumed but not yet written)."""

    def __init__(self, *, claims: list[Mapping[str, Any]], classes: Callable[[str], Mapping[str, Any] | None],
                 inventory: Inventory, in_use: Container[DeviceID],
                 free_counts: FreeCounts | None = None, clock: Callable[[], float] | None = None,
                 timeout: float = 0.0, device_taints: bool = True, shares: Shared | None = None) -> None:
        self.claims = claims
        self.shares = shares if shares is not None else _NoShares()
        """The devices that other claims' shares hold, and the capacity those consume."""
        self._available: dict[tuple[str, str], Counters] = {}
        """Per pool, its counters less what the allocated devices consume (computed on first use)."""
        self.device_taints = device_taints
        """DRADeviceTaints: taints keep requests that do not tolerate them off devices."""
        self._clock = clock
        self._timeout = timeout
        """Seconds the backtracking search may take per node; 0 (or no clock): no limit."""
        self.inventory = inventory
        self.in_use = in_use
        self._free_counts = free_counts
        self._free: Mapping[str, int] | None = None
        self._free_known = False
        self._classes = classes
        self.error: AllocationError | None = None
        self._slots: list[list[_Slot]] = []
        self._constraint_specs: list[list[tuple[frozenset[str], str, bool]]] = []
        try:
            for claim in claims:
                self._slots.append(self._claim_slots(claim))
                self._constraint_specs.append(self._claim_constraints(claim))
        except AllocationError as exc:
            self.error = exc
        requests = [request for slots in self._slots for slot in slots for request in slot.options]
        self._per_node = any(request.mode == "All" for request in requests)
        """Only "All" makes the number of devices depend on the node."""
        self._simple = not self._per_node and not any(self._constraint_specs) and all(
            len(slot.options) == 1 and not slot.options[0].admin_access for slots in self._slots for slot in slots) \
            and self._plain(requests)
        """No choice between sub-requests, no constraint, no admin access, neither counters
        nor capacity to check: the first free devices are the search's first solution, so a
        greedy pass finds it (see _greedy)."""
        self._single = self._simple and len(requests) == 1 and not requests[0].sub_name
        """One plain request: the free-device index answers Filter, and no placement is kept.
        Not for a `firstAvailable` request, even of one sub-request: Score needs its placement."""
        if self.error is None and not self._per_node:
            try:
                self._check_sizes()
            except AllocationError as exc:
                self.error = exc

    def _plain(self, requests: list[_Request]) -> bool:
        """No request asks for capacity, no device has counters, shares or a request policy,
        and no share holds a device of the inventory: capacity and counters cannot matter."""
        if any(request.capacity is not None for request in requests) or not self.inventory.plain:
            return False
        devices = self.inventory.devices
        return not any(device in devices for device in self.shares.counts)

    # -- validation (once per cycle) -----------------------------------------------------------

    def _claim_slots(self, claim: Mapping[str, Any]) -> list[_Slot]:
        slots = []
        for request in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or ():
            name = request.get("name") or ""
            if request.get("firstAvailable"):
                options = [self._request(claim, sub, f"{name}/{sub.get('name') or ''}", name, sub.get("name") or "",
                                         admin=False) for sub in request["firstAvailable"]]
            elif request.get("exactly") is not None:
                options = [self._request(claim, request["exactly"], name, name, "", admin=True)]
            else:
                raise AllocationError(f"claim {claim_ref(claim)}, request {name}: missing device class name "
                                      "(unsupported request type?)")
            slots.append(_Slot(options))
        return slots

    def _request(self, claim: Mapping[str, Any], spec: Mapping[str, Any], name: str, base: str, sub: str, *,
                 admin: bool) -> _Request:
        ref, shown = claim_ref(claim), sub or name  # upstream's errors name a sub-request alone
        class_name = spec.get("deviceClassName") or ""
        if not class_name:
            raise AllocationError(f"claim {ref}, request {shown}: missing device class name "
                                  "(unsupported request type?)")
        device_class = self._classes(class_name)
        if device_class is None:
            raise AllocationError(f"claim {ref}, request {shown}: could not retrieve device class {class_name}: "
                                  f'deviceclass.resource.k8s.io "{class_name}" not found')
        selectors: list[tuple[str, Any, str]] = []
        for where, source_list in ((f"class {(device_class.get('metadata') or {}).get('name', class_name)}",
                                    (device_class.get("spec") or {}).get("selectors") or ()),
                                   (f"claim {ref}", spec.get("selectors") or ())):
            for index, selector in enumerate(source_list):
                expression = ((selector or {}).get("cel") or {}).get("expression")
                if expression is None:
                    raise AllocationError(f"claim {ref}, request {shown}, selector #{index}: CEL expression empty "
                                          "(unsupported selector type?)")
                try:
                    compiled: Any = compile_expression(expression)
                except CELError as exc:
                    compiled = f"{where}: selector #{index}: CEL compile error: {exc}"
                selectors.append((expression, compiled, f"{where}: selector #{index}"))
        mode = spec.get("allocationMode") or "ExactCount"
        count = int(spec.get("count") or 1) if mode == "ExactCount" else 0
        if mode not in ("ExactCount", "All"):
            raise AllocationError(f"claim {ref}, request {shown}: unsupported count mode {mode}")
        admin_set = admin and spec.get("adminAccess") is not None
        tolerations = [t for t in spec.get("tolerations") or () if isinstance(t, dict)]
        try:
            capacity = request_capacities(spec)
        except QuantityError as exc:
            raise AllocationError(f"claim {ref}, request {shown}: capacity: {exc}") from None
        key: tuple[Any, ...] = (class_name, *(source for source, _, _ in selectors))
        if self.device_taints:
            key += (tuple((t.get("key"), t.get("operator"), t.get("value"), t.get("effect")) for t in tolerations),)
        return _Request(name=name, base_name=base, sub_name=sub, class_name=class_name, device_class=device_class,
                        mode=mode, count=count, admin_access=bool(admin and spec.get("adminAccess")),
                        admin_access_set=admin_set, selectors=selectors, key=key, tolerations=tolerations,
                        capacity=capacity, num_devices=count, allocator=self)

    def _claim_constraints(self, claim: Mapping[str, Any]) -> list[tuple[frozenset[str], str, bool]]:
        constraints = []
        for index, spec in enumerate(((claim.get("spec") or {}).get("devices") or {}).get("constraints") or ()):
            attribute = (spec or {}).get("matchAttribute")
            distinct = False
            if not attribute:
                attribute, distinct = (spec or {}).get("distinctAttribute"), True
            if not attribute:
                raise AllocationError(f"claim {claim_ref(claim)}, constraint #{index}: empty constraint "
                                      "(unsupported constraint type?)")
            constraints.append((frozenset(spec.get("requests") or ()), attribute, distinct))
        return constraints

    # -- selection --------------------------------------------------------------------------------

    def selectable(self, request: _Request, device: Device) -> bool:
        """All class and request selectors accept the device (memoized per device)."""
        known = device.memo.get(request.key)
        if known is not None:
            return known
        result = device.usable and self._selectors_match(request, device)
        device.memo[request.key] = result
        return result

    def _selectors_match(self, request: _Request, device: Device) -> bool:
        for _, compiled, where in request.selectors:
            if isinstance(compiled, str):
                raise AllocationError(compiled)
            try:
                if not compiled.matches(device.variable()):
                    return False
            except CELError as exc:
                raise AllocationError(f"{where}: CEL runtime error: {exc}") from None
        return True

    # -- allocation per node ------------------------------------------------------------------

    def allocate(self, node_name: str, labels: Mapping[str, str]) -> Placement | None:
        """The devices of this node for every claim (see `results`), or None when the node
        cannot hold them. Raises AllocationError when the claims cannot be allocated anywhere."""
        if self.error is not None:
            raise self.error
        try:
            if self._per_node:
                self._prepare_node(node_name, labels)
            if self._single and self._free_counts is not None:
                fits = self._fits_by_count(node_name, labels)
                if isinstance(fits, Placement):
                    return fits
                if fits is False:
                    self._check_pools(node_name, labels)
                    return None
            if self._simple:
                placement = self._greedy(node_name, labels)
                if placement is not None:
                    return placement
                if self._single:
                    self._check_pools(node_name, labels)
                    return None
            run = _Run(self, node_name, labels)
            if self._clock is not None and self._timeout > 0:
                run.clock, run.deadline = self._clock, self._clock() + self._timeout
            try:
                found = run.claim(0)
            except _MaxSizeExceeded:
                found = False
        except ValueError as exc:
            raise AllocationError(str(exc)) from None
        if not found:
            self._check_pools(node_name, labels)
            return None
        return Placement(run.results, [[slot.chosen for slot in slots] for slots in self._slots], node_name, labels)

    def _check_pools(self, node_name: str, labels: Mapping[str, str]) -> None:
        """No allocation on the node: say so as upstream when some of its pools are invalid."""
        if any(pool.invalid for pool, _ in self.inventory.node_devices(node_name, labels)):
            # Not fatal for other nodes; surfaced as this node's reason.
            raise InvalidPoolsError("invalid resource pools were encountered")

    def quick(self) -> tuple[Mapping[str, int], int] | None:
        """(free devices per node, devices needed) when one plain request is all there is and
        the free-device index can answer for every node; then a node fits exactly when it
        has that many free. None otherwise (ask `allocate` per node)."""
        if self.error is not None or not self._single:
            return None
        request = self._slots[0][0].options[0]
        free = self._free_devices(request)
        return None if free is None else (free, request.count)

    def _free_devices(self, request: _Request) -> Mapping[str, int] | None:
        if not self._free_known and self._free_counts is not None:
            self._free, self._free_known = self._free_counts(request.key, request.selectable), True
        return self._free

    def lazy(self, node_name: str) -> Placement:
        """The placement for a node that `quick` said fits: its devices picked by `results`."""
        return Placement(None, [[0]], node_name, {})

    def _fits_by_count(self, node_name: str, labels: Mapping[str, str]) -> Placement | bool | None:
        """One claim, one plain request: the node fits when it has enough free devices for
        the request (the free-device index); None when there is no index to ask."""
        request = self._slots[0][0].options[0]
        free = self._free_devices(request)
        if free is None:
            return None
        if free.get(node_name, 0) < request.count:
            return False
        return Placement(None, [[0]], node_name, labels)

    def _greedy(self, node_name: str, labels: Mapping[str, str]) -> Placement | None:
        """The first free devices for each request in turn: what the search tries first, so
        when it completes it is the search's answer; None when it does not."""
        in_use, candidates = self.in_use, self.inventory.candidates
        taken: set[DeviceID] = set()
        placed: list[list[_Chosen]] = []
        for slots in self._slots:
            chosen: list[_Chosen] = []
            for slot in slots:
                request = slot.options[0]
                need = request.count
                for device in candidates(node_name, labels, request.key, request.selectable):
                    if device.id in in_use or device.id in taken:
                        continue
                    taken.add(device.id)
                    chosen.append(_Chosen(request, device))
                    need -= 1
                    if not need:
                        break
                if need:
                    return None
            placed.append(chosen)
        return Placement(placed, [[0] * len(slots) for slots in self._slots], node_name, labels)

    def results(self, placement: Placement) -> list[dict[str, Any]]:
        """One AllocationResult per claim, in claim order."""
        if placement.devices is None:
            picked = self._greedy(placement.node_name, placement.labels or {})
            if picked is None:
                raise AllocationError(f"internal error, node {placement.node_name} no longer has free devices")
            placement = picked
        devices = placement.devices or []
        return [self._result(index, chosen, placement.options[index], placement.node_name)
                for index, chosen in enumerate(devices)]

    def _check_sizes(self) -> None:
        for claim, slots in zip(self.claims, self._slots, strict=True):
            minimum = sum(min(request.num_devices for request in slot.options) for slot in slots)
            if minimum > ALLOCATION_RESULTS_MAX_SIZE:
                raise AllocationError(f"claim {claim_ref(claim)}: number of requested devices {minimum} exceeds the "
                                      f"claim limit of {ALLOCATION_RESULTS_MAX_SIZE}")

    def _prepare_node(self, node_name: str, labels: Mapping[str, str]) -> None:
        """Per-node request data: how many devices "All" means here, and the claim-size check."""
        node_pools = self.inventory.node_devices(node_name, labels)
        for claim, slots in zip(self.claims, self._slots, strict=True):
            for slot in slots:
                for request in slot.options:
                    if request.mode != "All":
                        continue
                    request.all_devices = []
                    for pool, devices in node_pools:
                        if pool.incomplete:
                            raise AllocationError(f"claim {claim_ref(claim)}, request {request.shown}: asks for all "
                                                  f"devices, but resource pool {pool.pool_id} is currently being "
                                                  "updated")
                        if pool.invalid:
                            raise AllocationError(f"claim {claim_ref(claim)}, request {request.shown}: asks for all "
                                                  f"devices, but resource pool {pool.pool_id} is currently invalid")
                        request.all_devices.extend(d for d in devices if self.selectable(request, d)
                                                   and self._fits_statically(claim, request, d))
                    request.num_devices = len(request.all_devices)
        self._check_sizes()

    def _fits_statically(self, claim: Mapping[str, Any], request: _Request, device: Device) -> bool:
        """For "All": the device's capacity alone holds the request (what others consume is
        checked when the device is taken, so a device held by others makes "All" fail)."""
        if device.plain and request.capacity is None:
            return True
        try:
            return fits(request.capacity, device.capacities(), None, None)
        except CapacityError as exc:
            raise AllocationError(f"claim {claim_ref(claim)}, request {request.shown}: checking capacity for device "
                                  f"{device.name}: {exc}") from None

    def available_counters(self, pool: Pool) -> Counters:
        """The pool's counters less what its allocated devices consume (upstream's
        availableCounters: a device counts when other claims hold it or share it)."""
        key = (pool.driver, pool.name)
        available = self._available.get(key)
        if available is None:
            available = {name: dict(counters) for name, counters in pool.counter_sets.items()}
            in_use, shared = self.in_use, self.shares.counts
            for device in pool.devices:
                if not device.counters or (device.id not in in_use and device.id not in shared):
                    continue
                for set_name, amounts in device.counters.items():
                    counters = available.get(set_name)
                    if counters is None:
                        continue
                    for counter, amount in amounts.items():
                        if counter in counters:
                            counters[counter] -= amount
            self._available[key] = available
        return available

    def _result(self, claim_index: int, chosen: list[_Chosen], options: list[int], node_name: str) -> dict[str, Any]:
        claim = self.claims[claim_index]
        results = []
        for item in chosen:
            result: dict[str, Any] = {"request": item.request.name, "driver": item.device.id[0],
                                      "pool": item.device.id[1], "device": item.device.id[2]}
            if item.request.admin_access:
                result["adminAccess"] = True
            if item.request.tolerations:
                result["tolerations"] = [dict(t) for t in item.request.tolerations]
            if item.share is not None:
                result["shareID"] = item.share
                if item.consumed:
                    result["consumedCapacity"] = {name: str(amount) for name, amount in item.consumed.items()}
            for field_name in ("bindingConditions", "bindingFailureConditions"):  # DRADeviceBindingConditions
                if item.device.raw.get(field_name):
                    result[field_name] = list(item.device.raw[field_name])
            results.append(result)
        allocation: dict[str, Any] = {"devices": {"results": results}}
        config = self._config(claim, claim_index, options)
        if config:
            allocation["devices"]["config"] = config
        node_selector = _node_selector([item.device for item in chosen], node_name)
        if node_name and any(item.device.raw.get("bindsToNode") for item in chosen):
            # A device that binds to the node it is used on: the allocation is for this node only.
            node_selector = {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [node_name]}]}]}
        if node_selector is not None:
            allocation["nodeSelector"] = node_selector
        return allocation

    def _config(self, claim: Mapping[str, Any], claim_index: int, options: list[int]) -> list[dict[str, Any]]:
        """Class configs once per class, then the claim's configs for the chosen requests."""
        config: list[dict[str, Any]] = []
        by_class: dict[str, tuple[int, int]] = {}
        slots = self._slots[claim_index]
        for slot, option in zip(slots, options, strict=True):
            request = slot.options[option]
            if request.class_name in by_class:
                start, end = by_class[request.class_name]
                for entry in config[start:end]:
                    entry["requests"].append(request.name)
                continue
            start = len(config)
            for entry in (request.device_class.get("spec") or {}).get("config") or ():
                config.append({"source": "FromClass", "requests": [request.name],
                               **{k: v for k, v in entry.items() if k != "requests"}})
            by_class[request.class_name] = (start, len(config))
        requests = ((claim.get("spec") or {}).get("devices") or {}).get("requests") or ()
        chosen_names = {slot.options[option].name for slot, option in zip(slots, options, strict=True)}
        for entry in ((claim.get("spec") or {}).get("devices") or {}).get("config") or ():
            wanted = entry.get("requests") or []
            body = {k: v for k, v in entry.items() if k != "requests"}
            if not wanted:
                config.append({"source": "FromClaim", **body})
                continue
            for request in requests:
                if request.get("name") in wanted or any(name in chosen_names for name in wanted
                                                        if name.startswith(f"{request.get('name')}/")):
                    config.append({"source": "FromClaim", "requests": list(wanted), **body})
        for entry in config:
            if len(entry.get("requests") or ()) == len(requests):
                entry.pop("requests", None)
        return config


class _Run:
    """One `allocate` call's search state (upstream's allocator struct)."""

    def __init__(self, allocator: Allocator, node_name: str, labels: Mapping[str, str]) -> None:
        self.a = allocator
        self.node_name = node_name
        self.labels = labels
        self.allocating: dict[DeviceID, set[int]] = {}
        self.results: list[list[_Chosen]] = [[] for _ in allocator.claims]
        self.constraints = [[_Constraint(requests, attribute, distinct) for requests, attribute, distinct in specs]
                            for specs in allocator._constraint_specs]
        self.counters: dict[tuple[str, str], Counters] = {}
        """Per pool, what the devices picked so far consume of its counters."""
        self.capacity: dict[DeviceID, dict[str, Fraction]] = {}
        """Per shared device, what the shares picked so far consume."""
        self.sharing: dict[DeviceID, int] = {}
        """Per shared device, how many shares picked so far."""
        self.clock: Callable[[], float] | None = None
        self.deadline = 0.0

    def claim(self, claim_index: int) -> bool:
        if claim_index >= len(self.a.claims):
            return True
        try:
            return self.request(claim_index, 0)
        except _MaxSizeExceeded:
            # Not fatal: another solution for an earlier claim may pick smaller sub-requests.
            return False

    def request(self, claim_index: int, slot_index: int) -> bool:
        slots = self.a._slots[claim_index]
        if slot_index >= len(slots):
            return self.claim(claim_index + 1)
        slot = slots[slot_index]
        if len(slot.options) == 1:
            return self.device(claim_index, slot_index, slot.options[0], 0)
        all_exceeded = True
        for option_index, option in enumerate(slot.options):
            try:
                found = self.device(claim_index, slot_index, option, 0)
            except _MaxSizeExceeded:
                continue
            all_exceeded = False
            if found:
                slot.chosen = option_index
                return True
        if all_exceeded:
            raise _MaxSizeExceeded
        return False

    def device(self, claim_index: int, slot_index: int, request: _Request, device_index: int, start: int = 0) -> bool:
        """Pick the request's device `device_index` and go on. Its candidates are tried from
        `start`, past the one the previous device of the request took, as upstream's
        startLocation: combinations, not permutations, so one request never takes a shared
        device twice."""
        if self.clock is not None and self.clock() > self.deadline:
            raise AllocationTimeout("timed out trying to allocate devices")
        if request.mode == "All" and not request.all_devices:
            return False
        if device_index >= request.num_devices:
            return self.request(claim_index, slot_index + 1)
        if len(self.results[claim_index]) + request.num_devices - device_index > ALLOCATION_RESULTS_MAX_SIZE:
            raise _MaxSizeExceeded
        if request.mode == "All":
            device = request.all_devices[device_index]
            undo = self.take(claim_index, request, device, must=True)
            if undo is None:
                return False
            if self.device(claim_index, slot_index, request, device_index + 1):
                return True
            undo()
            return False
        candidates = self.a.inventory.candidates(self.node_name, self.labels, request.key, request.selectable)
        for position in range(start, len(candidates)):
            device = candidates[position]
            if self.busy(claim_index, request, device.id):
                continue
            if not (device.plain and request.capacity is None) and not self.fits(claim_index, request, device):
                continue
            undo = self.take(claim_index, request, device, must=False)
            if undo is None:
                continue
            if self.device(claim_index, slot_index, request, device_index + 1, position + 1):
                return True
            undo()
        return False

    def busy(self, claim_index: int, request: _Request, device_id: DeviceID) -> bool:
        if request.admin_access:
            # Admin access may share a device with other claims, never within one claim.
            return claim_index in self.allocating.get(device_id, ())
        return device_id in self.a.in_use or bool(self.allocating.get(device_id))

    def fits(self, claim_index: int, request: _Request, device: Device) -> bool:
        """The request's capacity fits beside what other claims' shares and this allocation's
        consume (capacity.fits); an unrepresentable request stops the attempt."""
        try:
            return fits(request.capacity, device.capacities(), self.a.shares.consumed.get(device.id),
                        self.capacity.get(device.id))
        except CapacityError as exc:
            raise AllocationError(f"claim {claim_ref(self.a.claims[claim_index])}, request {request.shown}: checking "
                                  f"capacity for device {'/'.join(device.id)}: {exc}") from None

    def take(self, claim_index: int, request: _Request, device: Device, *, must: bool) -> Callable[[], None] | None:
        if self.busy(claim_index, request, device.id) or not device.usable:
            return None
        multiple = device.multiple
        # A shared device already in use has its counters accounted for.
        counted = bool(device.counters) and not (multiple and (device.id in self.a.shares.counts
                                                                or device.id in self.sharing))
        if counted and not self.reserve_counters(device):
            return None
        if device.taints and self.a.device_taints and taint_prevents(device.taints, request.tolerations):
            if counted:
                self.release_counters(device)
            return None  # checked before the constraints, as upstream: never the "must" error
        constraints = self.constraints[claim_index]
        for index, constraint in enumerate(constraints):
            if not constraint.add(request, device):
                for earlier in reversed(constraints[:index]):
                    earlier.remove(request)
                if counted:
                    self.release_counters(device)
                if must:
                    raise AllocationError(f"claim {claim_ref(self.a.claims[claim_index])}, request {request.shown}: "
                                          f"cannot add device {'/'.join(device.id)} because a claim constraint would "
                                          "not be satisfied")
                return None
        if not multiple:
            self.allocating.setdefault(device.id, set()).add(claim_index)
        share: str | None = None
        consumed: dict[str, Quantity] | None = None
        if not device.plain or request.capacity is not None:
            if not self.fits(claim_index, request, device):  # "All" has checked only the device's own capacity
                for constraint in reversed(constraints):
                    constraint.remove(request)
                if not multiple:
                    self.allocating[device.id].discard(claim_index)
                if counted:
                    self.release_counters(device)
                return None
            if multiple:
                try:
                    consumed = consumption(request.capacity, device.capacities())
                except CapacityError as exc:  # fits() would have raised it first
                    raise AllocationError(str(exc)) from None
                share = str(uuid.uuid1())
                totals = self.capacity.setdefault(device.id, {})
                for name, amount in consumed.items():
                    totals[name] = totals.get(name, 0) + amount.value
                self.sharing[device.id] = self.sharing.get(device.id, 0) + 1
        results = self.results[claim_index]
        results.append(_Chosen(request, device, share, consumed))
        size = len(results) - 1

        def undo() -> None:
            del results[size:]
            if share is not None:
                left = self.sharing[device.id] - 1
                if left:
                    self.sharing[device.id] = left
                    totals = self.capacity[device.id]
                    for name, amount in (consumed or {}).items():
                        totals[name] -= amount.value
                else:
                    del self.sharing[device.id]
                    del self.capacity[device.id]
            if not multiple:
                self.allocating[device.id].discard(claim_index)
            for constraint in reversed(constraints):
                constraint.remove(request)
            if counted:
                self.release_counters(device)

        return undo

    def reserve_counters(self, device: Device) -> bool:
        """Add the device's counters to this allocation's; False (and nothing added) when some
        counter of the pool would then exceed what is available (upstream's checkAvailableCounters:
        every counter of every set of the pool, so one already overdrawn blocks them all)."""
        pool = device.pool
        available = self.a.available_counters(pool)
        picked = self.counters.setdefault((pool.driver, pool.name), {})
        for set_name, amounts in (device.counters or {}).items():
            counters = picked.setdefault(set_name, {})
            for counter, amount in amounts.items():
                counters[counter] = counters.get(counter, 0) + amount
        for set_name, counters in available.items():
            used = picked.get(set_name) or {}
            if any(value < used.get(counter, 0) for counter, value in counters.items()):
                self.release_counters(device)
                return False
        return True

    def release_counters(self, device: Device) -> None:
        picked = self.counters[(device.pool.driver, device.pool.name)]
        for set_name, amounts in (device.counters or {}).items():
            counters = picked[set_name]
            for counter, amount in amounts.items():
                counters[counter] -= amount


def tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """Whether a DeviceToleration tolerates a DeviceTaint (upstream's resourceclaim.ToleratesTaint):
    a node taint's rules (an empty effect or key matches any; Equal, or no operator, compares
    the values; Exists any value) without the comparison operators."""
    return tolerates_taint(toleration, taint, comparison_operators=False)


TAINT_EFFECTS = ("NoSchedule", "NoExecute")
"""The effects that keep a request off a device; None and effects unknown are ignored."""


def taint_prevents(taints: Sequence[Mapping[str, Any]], tolerations: Sequence[Mapping[str, Any]]) -> bool:
    """Some NoSchedule or NoExecute taint is tolerated by none of the tolerations
    (upstream's taintPreventsAllocation)."""
    return any(taint.get("effect") in TAINT_EFFECTS and not any(tolerates(t, taint) for t in tolerations)
               for taint in taints if isinstance(taint, dict))


def _node_selector(devices: list[Device], node_name: str) -> dict[str, Any] | None:
    """Where the allocation is usable (upstream's createNodeSelector): the node allocated for
    when a device is node-local, else the union of the slices' (with perDeviceNodeSelection,
    the devices') node selectors, else nowhere in particular."""
    fields: list[dict[str, Any]] = []
    expressions: list[dict[str, Any]] = []
    for device in devices:
        spec = device.slice.get("spec") or {}
        if spec.get("perDeviceNodeSelection"):
            spec = device.raw
        if spec.get("nodeName"):
            return {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [node_name or spec["nodeName"]]}]}]}
        terms = (spec.get("nodeSelector") or {}).get("nodeSelectorTerms") or []
        if len(terms) > 1:
            raise AllocationError(f"create NodeSelector for claim: unsupported ResourceSlice.NodeSelector with "
                                  f"{len(terms)} terms")
        if terms:
            _add_new(terms[0].get("matchFields") or (), fields)
            _add_new(terms[0].get("matchExpressions") or (), expressions)
    if not fields and not expressions:
        return None
    term: dict[str, Any] = {}
    if expressions:
        term["matchExpressions"] = expressions
    if fields:
        term["matchFields"] = fields
    return {"nodeSelectorTerms": [term]}


def _add_new(source: Any, into: list[dict[str, Any]]) -> None:
    for requirement in source:
        if not any(r.get("key") == requirement.get("key") and r.get("operator") == requirement.get("operator")
                   and set(r.get("values") or ()) == set(requirement.get("values") or ()) for r in into):
            into.append(requirement)
