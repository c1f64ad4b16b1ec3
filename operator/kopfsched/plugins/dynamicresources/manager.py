"""DRA state shared by every profile of one scheduler (upstream's DefaultDRAManager): the
device inventory from ResourceSlices, the devices in use, and the claims this scheduler
has allocated in memory but not yet written (the in-flight, "assumed" claims).

Both are kept incrementally from the object store's change log, so a cycle costs what
changed since the last one, not the size of the cluster.

A device with `allowMultipleAllocations` is held by shares (results with a `shareID`,
DRAConsumableCapacity): those do not make it in use, but count per device with the
capacity they consume (upstream's AllocatedSharedDeviceIDs and AggregatedCapacity).

An assumed claim (Reserve) counts with its in-memory allocation until Unreserve forgets
it, or until the API's version of that claim changes (PreBind's write came back through
the watch, or someone else changed it): then the API object is the truth again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from kopfsched import features
from kopfsched.framework.handle import Handle, ObjectLister
from kopfsched.framework.labels import SelectorError, node_selector
from kopfsched.framework.quantity import QuantityError, parse_quantity
from kopfsched.framework.types import Obj, parse_time
from kopfsched.plugins.dynamicresources.cel import CELError, compile_expression, device_variable
from kopfsched.plugins.dynamicresources.inventory import Device, DeviceID, Inventory

RESOURCE_CLAIM = "ResourceClaim"
RESOURCE_SLICE = "ResourceSlice"
DEVICE_CLASS = "DeviceClass"
DEVICE_TAINT_RULE = "DeviceTaintRule"
DEVICE_CLASS_PREFIX = "deviceclass.resource.kubernetes.io/"
"""resourceapi.ResourceDeviceClassPrefix: a class's implicit extended resource name is this
plus the class's name."""

ClaimKey = tuple[str, str]
"""(namespace, name)."""


def allocated_devices(claim: Mapping[str, Any] | None) -> frozenset[DeviceID]:
    """The devices a claim's allocation holds exclusively (admin access shares, so it
    holds none, and so does a share of a device, which has a shareID), as upstream's
    GatherAllocatedState."""
    allocation = ((claim or {}).get("status") or {}).get("allocation") or {}
    return frozenset((r.get("driver") or "", r.get("pool") or "", r.get("device") or "")
                     for r in (allocation.get("devices") or {}).get("results") or ()
                     if not r.get("adminAccess") and r.get("shareID") is None)


Share = tuple[DeviceID, tuple[tuple[str, Fraction], ...]]
"""One shared result: the device and the capacity it consumes."""


def allocated_shares(claim: Mapping[str, Any] | None) -> tuple[Share, ...]:
    """The shares a claim's allocation holds (results with a shareID, not admin access)."""
    allocation = ((claim or {}).get("status") or {}).get("allocation") or {}
    shares = []
    for r in (allocation.get("devices") or {}).get("results") or ():
        if r.get("adminAccess") or r.get("shareID") is None:
            continue
        consumed = []
        for name, raw in sorted((r.get("consumedCapacity") or {}).items()):
            try:
                consumed.append((name, parse_quantity(raw)))
            except QuantityError:
                continue
        shares.append(((r.get("driver") or "", r.get("pool") or "", r.get("device") or ""), tuple(consumed)))
    return tuple(shares)


class Shares:
    """Device ID → how many shares hold it and the capacity they consume together."""

    def __init__(self) -> None:
        self.counts: dict[DeviceID, int] = {}
        self.consumed: dict[DeviceID, dict[str, Fraction]] = {}

    def __bool__(self) -> bool:
        return bool(self.counts)

    def add(self, shares: tuple[Share, ...], sign: int = 1) -> None:
        for device, consumed in shares:
            left = self.counts.get(device, 0) + sign
            if left > 0:
                self.counts[device] = left
            else:
                self.counts.pop(device, None)
            totals = self.consumed.setdefault(device, {})
            for name, amount in consumed:
                totals[name] = totals.get(name, 0) + sign * amount
            if left <= 0:
                self.consumed.pop(device, None)


@dataclass(slots=True)
class _Assumed:
    claim: Obj
    base: Obj | None
    """The API object the assumption was made over (identity: a new version voids it)."""


class FreeIndex:
    """For one request shape (class and selectors): how many of its devices each node has
    that no claim holds, kept up to date as devices are taken and freed. It answers the
    common Filter question (one claim, one request, N devices) without looking at devices."""

    def __init__(self, by_node: Mapping[str, list[DeviceID]], in_use: Mapping[DeviceID, int]) -> None:
        self.node_of = {device: node for node, devices in by_node.items() for device in devices}
        self.free = {node: sum(1 for device in devices if device not in in_use) for node, devices in by_node.items()}

    def taken(self, device: DeviceID) -> None:
        node = self.node_of.get(device)
        if node is not None:
            self.free[node] -= 1

    def freed(self, device: DeviceID) -> None:
        node = self.node_of.get(device)
        if node is not None:
            self.free[node] += 1


class InUse:
    """Device ID → how many claims hold it; `in` is the question the allocator asks."""

    def __init__(self) -> None:
        self.counts: dict[DeviceID, int] = {}
        self.indexes: list[FreeIndex] = []

    def __contains__(self, device: object) -> bool:
        return device in self.counts

    def add(self, devices: frozenset[DeviceID]) -> None:
        for device in devices:
            held = self.counts.get(device, 0)
            self.counts[device] = held + 1
            if not held:
                for index in self.indexes:
                    index.taken(device)

    def remove(self, devices: frozenset[DeviceID]) -> None:
        for device in devices:
            left = self.counts.get(device, 0) - 1
            if left > 0:
                self.counts[device] = left
            elif self.counts.pop(device, None) is not None:
                for index in self.indexes:
                    index.freed(device)

    def __iter__(self) -> Iterator[DeviceID]:
        return iter(self.counts)


class DeviceClassResolver:
    """Extended resource name -> the DeviceClass that provides it (DRAExtendedResource, GA
    in v1.37; upstream's extendedresourcecache.ExtendedResourceCache, fed by the same events).

    A class provides its `spec.extendedResourceName` and its implicit name
    `deviceclass.resource.kubernetes.io/<class name>`. Two classes naming the same resource:
    the one created last wins, on equal creation times the smaller name; a class that loses
    when it arrives gets neither mapping, not even its implicit one (upstream returns early).
    An update drops the class's old mappings, a deletion its mappings whoever holds them now.
    Changes are replayed in the order they happened, the first listing by name, as an
    informer delivers them, so the answers match upstream's even where they depend on it."""

    def __init__(self, objects: ObjectLister) -> None:
        self.objects = objects
        self._cursor: int | None = None
        self._seen: dict[str, Obj] = {}
        self._by_resource: dict[str, Obj] = {}

    def get(self, resource_name: str) -> Obj | None:
        """The class backing the resource, None when none does (GetDeviceClass)."""
        self._sync()
        return self._by_resource.get(resource_name)

    def any(self) -> bool:
        """Whether any class is known: without one no resource is backed."""
        self._sync()
        return bool(self._by_resource)

    def _sync(self) -> None:
        cursor, changed = self.objects.changes(DEVICE_CLASS, self._cursor)
        if changed is None:
            self._seen, self._by_resource = {}, {}
            for listed in sorted(self.objects.list(DEVICE_CLASS),
                                 key=lambda c: (c.get("metadata") or {}).get("name", "")):
                self._upsert(listed)
        else:
            for _, name in changed:
                obj = self.objects.get(DEVICE_CLASS, name)
                if obj is None:
                    old = self._seen.pop(name, None)
                    if old is not None:
                        self._remove(old)
                elif obj is not self._seen.get(name):
                    self._upsert(obj)
        self._cursor = cursor

    def _upsert(self, obj: Obj) -> None:
        name = (obj.get("metadata") or {}).get("name") or ""
        old = self._seen.get(name)
        self._seen[name] = obj
        explicit = _extended_resource_name(obj)
        holder = self._by_resource.get(explicit) if explicit is not None else None
        if holder is not None:
            created, held = _created(obj), _created(holder)
            holder_name = (holder.get("metadata") or {}).get("name") or ""
            if created < held or (created == held and name >= holder_name):
                return
        if old is not None:
            self._by_resource.pop(DEVICE_CLASS_PREFIX + name, None)
            old_explicit = _extended_resource_name(old)
            if old_explicit is not None:
                self._by_resource.pop(old_explicit, None)
        if explicit is not None:
            self._by_resource[explicit] = obj
        self._by_resource[DEVICE_CLASS_PREFIX + name] = obj

    def _remove(self, obj: Obj) -> None:
        name = (obj.get("metadata") or {}).get("name") or ""
        self._by_resource.pop(DEVICE_CLASS_PREFIX + name, None)
        explicit = _extended_resource_name(obj)
        if explicit is not None:
            self._by_resource.pop(explicit, None)


def _devices_for_node(spec: Mapping[str, Any], node_name: str, labels: Mapping[str, str]) -> list[dict[str, Any]]:
    """The slice's devices that reach the node, as calculateDRAResourceTotals selects them."""
    devices = [d for d in spec.get("devices") or () if isinstance(d, dict)]
    if spec.get("perDeviceNodeSelection"):
        return [d for d in devices if d.get("allNodes") or (d.get("nodeName") and d.get("nodeName") == node_name)
                or (d.get("nodeSelector") is not None and _selects(d["nodeSelector"], node_name, labels))]
    if spec.get("allNodes"):
        return devices
    slice_node = spec.get("nodeName") or ""
    if slice_node != node_name and spec.get("nodeSelector") is not None:
        return devices if _selects(spec["nodeSelector"], node_name, labels) else []
    if slice_node and slice_node != node_name:
        return []
    return devices


def _selects(selector: Mapping[str, Any], node_name: str, labels: Mapping[str, str]) -> bool:
    try:
        return node_selector(selector.get("nodeSelectorTerms") or [])(labels, node_name)
    except SelectorError:
        return False


def _extended_resource_name(device_class: Obj) -> str | None:
    name = (device_class.get("spec") or {}).get("extendedResourceName")
    return name if isinstance(name, str) else None


def _created(obj: Obj) -> float:
    """creationTimestamp in seconds; a class without one is older than any with one (Go's zero time)."""
    stamp = parse_time((obj.get("metadata") or {}).get("creationTimestamp"))
    return float("-inf") if stamp is None else stamp


class DraManager:
    def __init__(self, objects: ObjectLister, *, taint_rules: bool = True) -> None:
        self.objects = objects
        self.taint_rules = taint_rules
        """DRADeviceTaintRules: the rules' taints count as the devices' own (upstream's tracker)."""
        self._rules_cursor: int | None = None
        self.in_use = InUse()
        self.shares = Shares()
        self._held: dict[ClaimKey, frozenset[DeviceID]] = {}
        self._shared: dict[ClaimKey, tuple[Share, ...]] = {}
        self._claims_cursor: int | None = None
        self._assumed: dict[ClaimKey, _Assumed] = {}
        self._slices_cursor: int | None = None
        self._inventory: Inventory | None = None
        self._indexes: dict[Any, FreeIndex] = {}
        self.resolver = DeviceClassResolver(objects)
        """Which DeviceClass backs an extended resource (DRAExtendedResource)."""

    # -- inventory ---------------------------------------------------------------------------

    def inventory(self) -> Inventory:
        """The devices of the ResourceSlices, tainted by the DeviceTaintRules; rebuilt when
        either kind changed."""
        cursor, changed = self.objects.changes(RESOURCE_SLICE, self._slices_cursor)
        stale = changed is None or bool(changed)
        rules_cursor = None
        if self.taint_rules:
            rules_cursor, rules_changed = self.objects.changes(DEVICE_TAINT_RULE, self._rules_cursor)
            stale = stale or rules_changed is None or bool(rules_changed)
        inventory = self._inventory
        if stale or inventory is None:
            rules = self.objects.list(DEVICE_TAINT_RULE) if self.taint_rules else []
            inventory = self._inventory = Inventory(self.objects.list(RESOURCE_SLICE), rules)
            self._indexes = {}
            self.in_use.indexes = []
        self._slices_cursor = cursor
        self._rules_cursor = rules_cursor
        return inventory

    def free_counts(self, key: Any, selectable: Callable[[Device], bool]) -> Mapping[str, int] | None:
        """Per node, how many devices that `selectable` accepts are free (see FreeIndex); None
        when some slice reaches nodes by selector or allNodes (then the allocator looks).
        `key` identifies what `selectable` checks, as for Inventory.candidates."""
        inventory = self.inventory()
        if not inventory.node_local_only:
            return None
        index = self._indexes.get(key)
        if index is None:
            by_node = {node: [device.id for device in inventory.candidates(node, {}, key, selectable)]
                       for node in inventory.nodes()}
            index = self._indexes[key] = FreeIndex(by_node, self.in_use.counts)
            self.in_use.indexes.append(index)
        return index.free

    # -- claims ------------------------------------------------------------------------------

    def sync(self) -> InUse:
        """Bring the in-use devices up to date with the claims; returns them."""
        cursor, changed = self.objects.changes(RESOURCE_CLAIM, self._claims_cursor)
        self._claims_cursor = cursor
        if changed is None:
            self.in_use = InUse()
            self.shares = Shares()
            self._held = {}
            self._shared = {}
            self._indexes = {}
            for claim in self.objects.list(RESOURCE_CLAIM):
                meta = claim.get("metadata") or {}
                self._refresh((meta.get("namespace") or "", meta.get("name") or ""))
            for key in [key for key in self._assumed if key not in self._held]:
                self._refresh(key)  # assumed and not in the API: an extended-resource claim in flight
        else:
            for key in dict.fromkeys(changed):
                self._refresh(key)
        return self.in_use

    def _refresh(self, key: ClaimKey) -> None:
        api = self.objects.get(RESOURCE_CLAIM, key[1], key[0])
        assumed = self._assumed.get(key)
        if assumed is not None and assumed.base is not api:
            del self._assumed[key]  # the cluster moved on
            assumed = None
        self._hold(key, assumed.claim if assumed is not None else api)

    def _hold(self, key: ClaimKey, claim: Mapping[str, Any] | None) -> None:
        shares = allocated_shares(claim)
        before_shares = self._shared.get(key, ())
        if shares != before_shares:
            self.shares.add(before_shares, -1)
            self.shares.add(shares)
            if shares:
                self._shared[key] = shares
            else:
                self._shared.pop(key, None)
        devices = allocated_devices(claim)
        before = self._held.get(key, frozenset())
        if before == devices:
            return
        self.in_use.remove(before)
        self.in_use.add(devices)
        if devices:
            self._held[key] = devices
        else:
            self._held.pop(key, None)

    def get_claim(self, namespace: str, name: str) -> Obj | None:
        """The claim as this scheduler believes it is: assumed if in flight, else the API's."""
        api = self.objects.get(RESOURCE_CLAIM, name, namespace)
        assumed = self._assumed.get((namespace, name))
        if assumed is not None:
            if assumed.base is api:
                return assumed.claim
            del self._assumed[(namespace, name)]
            self._hold((namespace, name), api)
        return api

    def assume(self, claim: Obj) -> None:
        """Reserve: the claim is allocated as `claim` says until written or forgotten."""
        meta = claim.get("metadata") or {}
        key = (meta.get("namespace") or "", meta.get("name") or "")
        self.sync()
        self._assumed[key] = _Assumed(claim, self.objects.get(RESOURCE_CLAIM, key[1], key[0]))
        self._hold(key, claim)

    def extended_resource_totals(self, node_name: str, labels: Mapping[str, str],
                                 device_class: Obj) -> tuple[int, int] | None:
        """(devices, devices allocated) of the class on the node, as NodeResourcesFit and
        BalancedAllocation score a DRA-backed extended resource (upstream's
        calculateDRAResourceTotals): every slice that reaches the node, of any generation, every
        device the class's selectors accept, allocated when some claim holds it (assumed ones
        too). None when a selector cannot be evaluated (upstream logs it and scores the
        resource as absent)."""
        in_use = self.sync()
        expressions = [((s or {}).get("cel") or {}).get("expression")
                       for s in (device_class.get("spec") or {}).get("selectors") or ()]
        try:
            compiled = [compile_expression(e) for e in expressions if e is not None]
        except CELError:
            return None
        total = allocated = 0
        for slice_obj in self.objects.list(RESOURCE_SLICE):
            spec = slice_obj.get("spec") or {}
            driver, pool = spec.get("driver") or "", (spec.get("pool") or {}).get("name") or ""
            for device in _devices_for_node(spec, node_name, labels):
                try:
                    if compiled and not all(e.matches(device_variable(driver, device)) for e in compiled):
                        continue
                except CELError:
                    return None
                total += 1
                if (driver, pool, device.get("name") or "") in in_use:
                    allocated += 1
        return total, allocated

    def forget(self, namespace: str, name: str) -> bool:
        """Unreserve: drop an in-flight allocation; True when there was one."""
        assumed = self._assumed.pop((namespace, name), None)
        if assumed is None:
            return False
        self._hold((namespace, name), self.objects.get(RESOURCE_CLAIM, name, namespace))
        return True

def manager_for(handle: Handle, name: str) -> DraManager:
    """The scheduler's one manager (upstream's SharedDRAManager), kept in `handle.shared` under
    the plugin's `name`: every profile shares the in-flight allocations, so two profiles never
    hand out one device twice."""
    manager = handle.shared.get(name)
    if not isinstance(manager, DraManager):
        manager = handle.shared[name] = DraManager(handle.objects,
                                                   taint_rules=features.enabled(features.DRA_DEVICE_TAINT_RULES))
    return manager
