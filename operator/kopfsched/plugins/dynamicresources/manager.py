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
from kopfsched.framework.quantity import QuantityError, parse_quantity
from kopfsched.framework.types import Obj
from kopfsched.plugins.dynamicresources.inventory import Device, DeviceID, Inventory

RESOURCE_CLAIM = "ResourceClaim"
RESOURCE_SLICE = "ResourceSlice"
DEVICE_CLASS = "DeviceClass"
DEVICE_TAINT_RULE = "DeviceTaintRule"

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
