"""The devices that ResourceSlices publish, grouped into pools and indexed by node
(upstream's structured.GatherPools, done once per change of the slices instead of once per
node and cycle).

A pool is (driver, pool name); only the slices of its newest generation count. It is
incomplete while fewer slices of that generation exist than `resourceSliceCount` says, and
invalid when two of its devices share a name: nothing is allocated from such a pool. A
slice reaches a node by `nodeName`, `nodeSelector` or `allNodes`; with
`perDeviceNodeSelection` each device says so itself (its own `nodeName`, `nodeSelector` or
`allNodes`), and the slice reaches the nodes one of its devices reaches, offering there only
the devices that reach the node (DRAPartitionableDevices, beta and on in v1.37). Devices with
binding conditions (DRADeviceBindingConditions, beta and on) are allocated, their pools after
the others, as upstream's GatherPools orders them.

Partitionable devices (DRAPartitionableDevices): slices with `sharedCounters` publish the
pool's counter sets (and no devices); a device's `consumesCounters` names the sets and
amounts it takes while allocated. The pool is invalid when two counter sets share a name, or
a device consumes from a set or counter the pool does not have. Whether the counters still
allow a device is the allocator's question (allocator.py).

A device's taints are its own (`spec.devices[].taints`) followed by those of the
DeviceTaintRules that select it (upstream's resourceslice tracker, DRADeviceTaintRules): a
rule without `deviceSelector` selects nothing; its `driver`, `pool` and `device` each, when
set, must equal the slice's driver, pool name and the device's name. Whether a taint keeps a
request off the device is the allocator's question (allocator.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cached_property
from typing import Any

from kopfsched.framework.labels import NodePredicate, SelectorError, node_selector
from kopfsched.framework.quantity import QuantityError, parse_quantity
from kopfsched.plugins.dynamicresources.capacity import Capacity, device_capacities
from kopfsched.plugins.dynamicresources.cel import device_variable

DeviceID = tuple[str, str, str]
"""(driver, pool, device name), as upstream's DeviceID."""

Counters = dict[str, dict[str, Fraction]]
"""Counter set name → counter name → amount."""


@dataclass(slots=True, eq=False)
class Device:
    id: DeviceID
    raw: dict[str, Any]
    pool: Pool
    slice: dict[str, Any]
    usable: bool
    """False for what the alpha gates kopfsched leaves off would need (see the module doc)."""
    taints: tuple[dict[str, Any], ...] = ()
    """The device's taints, then those of the DeviceTaintRules that select it."""
    counters: Counters | None = None
    """What the device consumes of its pool's counter sets while allocated (consumesCounters)."""
    multiple: bool = False
    """allowMultipleAllocations: several claims may share it, each consuming capacity."""
    plain: bool = True
    """No counters, not shared, no capacity request policy: the consumable-capacity and
    counter checks can never turn a request away from it (the allocator's fast paths)."""
    target: _Target | None = None
    """Where the device is reachable, for a slice with perDeviceNodeSelection."""
    memo: dict[Any, bool] = field(default_factory=dict)
    """Selector results by selector key: a device's selectors never change its answer."""
    _variable: dict[str, Any] | None = None
    _capacities: dict[str, Capacity] | None = None

    @property
    def name(self) -> str:
        return self.id[2]

    def variable(self) -> dict[str, Any]:
        """The CEL `device` variable, built on first use."""
        if self._variable is None:
            self._variable = device_variable(self.id[0], self.raw)
        return self._variable

    def capacities(self) -> dict[str, Capacity]:
        """The device's capacities with their request policies, parsed on first use."""
        if self._capacities is None:
            self._capacities = device_capacities(self.raw)
        return self._capacities

    def attribute(self, qualified: str) -> tuple[str, Any] | None:
        """(type, value) of a fully qualified attribute (upstream's lookupAttribute)."""
        attributes = self.raw.get("attributes") or {}
        raw = attributes.get(qualified)
        if raw is None:
            domain, slash, ident = qualified.partition("/")
            if not slash or domain != self.id[0]:
                return None
            raw = attributes.get(ident)
        if not isinstance(raw, dict):
            return None
        for kind in ("string", "int", "bool", "version"):
            if kind in raw:
                return kind, raw[kind]
        return None


@dataclass(slots=True, eq=False)
class Pool:
    driver: str
    name: str
    generation: int
    slice_count: int
    slices: list[dict[str, Any]] = field(default_factory=list)
    incomplete: bool = False
    invalid: bool = False
    invalid_reason: str = ""
    counter_sets: Counters = field(default_factory=dict)
    """The counter sets of the pool's sharedCounters slices."""
    devices: list[Device] = field(default_factory=list)
    """Every device of the pool, whichever nodes it reaches (for the counters allocated ones hold)."""
    binding_conditions: bool = False
    """Some device of the pool has binding conditions: the pool comes after the others."""

    @property
    def pool_id(self) -> str:
        return f"{self.driver}/{self.name}"


@dataclass(slots=True)
class _Target:
    """Where one slice's devices are reachable from."""

    node_name: str = ""
    all_nodes: bool = False
    selector: NodePredicate | None = None
    selector_error: str = ""
    per_device: bool = False
    """perDeviceNodeSelection: each device's own target says."""

    def reaches(self, node_name: str, labels: Mapping[str, str]) -> bool:
        """upstream's NodeMatches (a selector error is the caller's to raise)."""
        if self.node_name:
            return self.node_name == node_name
        return self.all_nodes or (self.selector is not None and self.selector(labels, node_name))


def _spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("spec") or {}


def _name(obj: Mapping[str, Any]) -> str:
    return (obj.get("metadata") or {}).get("name") or ""


class Inventory:
    """Every pool and device of a set of ResourceSlices, and which reach which node."""

    def __init__(self, slices: list[dict[str, Any]], rules: Sequence[Mapping[str, Any]] = ()) -> None:
        selectors = [(selector, taint) for rule in sorted(rules, key=_name)
                     if (selector := _spec(rule).get("deviceSelector")) is not None
                     and isinstance(taint := _spec(rule).get("taint"), dict)]
        self.pools: dict[tuple[str, str], Pool] = {}
        for slice_obj in sorted(slices, key=_name):
            spec = _spec(slice_obj)
            pool_spec = spec.get("pool") or {}
            key = (spec.get("driver") or "", pool_spec.get("name") or "")
            generation = int(pool_spec.get("generation") or 0)
            pool = self.pools.get(key)
            if pool is None or generation > pool.generation:
                pool = self.pools[key] = Pool(key[0], key[1], generation, int(pool_spec.get("resourceSliceCount") or 0))
            elif generation < pool.generation:
                continue  # outdated
            pool.slices.append(slice_obj)
        self._by_node: dict[str, list[tuple[Pool, list[Device]]]] = {}
        self._elsewhere: list[tuple[_Target, Pool, list[Device]]] = []
        self.devices: dict[DeviceID, Device] = {}
        self.plain = True
        """No device that consumes counters, is shared or has a capacity request policy."""
        for pool in self.pools.values():
            pool.binding_conditions = any(raw.get("bindingConditions") is not None for slice_obj in pool.slices
                                          for raw in _spec(slice_obj).get("devices") or ())
        for pool in sorted(self.pools.values(), key=_pool_order):
            pool.incomplete = len(pool.slices) != pool.slice_count
            seen: set[str] = set()
            for slice_obj in pool.slices:
                devices: list[Device] = []
                if _spec(slice_obj).get("sharedCounters"):
                    self._add_counter_sets(pool, _spec(slice_obj)["sharedCounters"])
                    target = _target(_spec(slice_obj))
                    if target is not None:  # the pool reaches the node, with no devices of this slice
                        self._place(target, pool, devices)
                    continue
                per_device = bool(_spec(slice_obj).get("perDeviceNodeSelection"))
                slice_rules = [(selector.get("device"), taint) for selector, taint in selectors
                               if selector.get("driver") in (None, pool.driver)
                               and selector.get("pool") in (None, pool.name)]
                for raw in _spec(slice_obj).get("devices") or ():
                    name = raw.get("name") or ""
                    if name in seen and not pool.invalid:
                        pool.invalid, pool.invalid_reason = True, f"duplicate device name {name}"
                    seen.add(name)
                    usable = True  # counters, shares and binding conditions are all on in v1.37
                    taints = tuple(raw.get("taints") or ()) + tuple(
                        taint for device_name, taint in slice_rules if device_name in (None, name))
                    device = Device((pool.driver, pool.name, name), raw, pool, slice_obj, usable, taints)
                    capacities = (raw.get("capacity") or {}).values()
                    if raw.get("consumesCounters") or raw.get("allowMultipleAllocations") or any(
                            isinstance(c, dict) and c.get("requestPolicy") for c in capacities):
                        device.counters = _consumption(raw.get("consumesCounters") or ())
                        device.multiple = raw.get("allowMultipleAllocations") is True
                        device.plain = self.plain = False
                    if per_device:
                        device.target = _target(raw) or _Target()
                    devices.append(device)
                    pool.devices.append(device)
                    self.devices.setdefault(device.id, device)
                target = _Target(per_device=True) if per_device else _target(_spec(slice_obj))
                if target is None:
                    continue  # a future way of selecting nodes: not ours to guess
                self._place(target, pool, devices)
            if not pool.invalid:
                _check_consumption(pool)
        self._candidates: dict[tuple[str, Any], list[Device]] = {}

    def _place(self, target: _Target, pool: Pool, devices: list[Device]) -> None:
        if target.node_name:
            self._by_node.setdefault(target.node_name, []).append((pool, devices))
        else:
            self._elsewhere.append((target, pool, devices))

    @staticmethod
    def _add_counter_sets(pool: Pool, counter_sets: Sequence[Any]) -> None:
        for counter_set in counter_sets:
            if not isinstance(counter_set, dict):
                continue
            name = counter_set.get("name") or ""
            if name in pool.counter_sets and not pool.invalid:
                pool.invalid, pool.invalid_reason = True, f"duplicate counter set name {name}"
            pool.counter_sets[name] = _amounts(counter_set.get("counters"))

    @property
    def node_local_only(self) -> bool:
        """Every slice names its node (nodeName): no selector or allNodes slices."""
        return not self._elsewhere

    @cached_property
    def invalid_nodes(self) -> frozenset[str]:
        """Nodes that a nodeName slice of an invalid pool reaches."""
        return frozenset(node for node, entries in self._by_node.items() if any(p.invalid for p, _ in entries))

    def nodes(self) -> list[str]:
        """The nodes that nodeName slices publish devices for."""
        return list(self._by_node)

    def node_devices(self, node_name: str, labels: Mapping[str, str]) -> list[tuple[Pool, list[Device]]]:
        """(pool, devices of one slice) for every slice that reaches the node, pools in
        (driver, pool) order. Raises ValueError for a node selector that cannot be parsed."""
        local = self._by_node.get(node_name, [])
        if not self._elsewhere:
            return local
        found = list(local)
        for target, pool, devices in self._elsewhere:
            if target.all_nodes:
                found.append((pool, devices))
            elif target.per_device:
                reached = [device for device in devices if _device_reaches(device, node_name, labels)]
                if reached:
                    found.append((pool, reached))
            elif target.selector_error:
                slice_name = _name(devices[0].slice) if devices else ""
                raise ValueError(f"failed to perform node selection for slice {slice_name}: {target.selector_error}")
            elif target.selector is not None and target.selector(labels, node_name):
                found.append((pool, devices))
        # Pools by ID, those with binding conditions last (GatherPools), a pool's slices by name
        # (upstream's buildPool).
        found.sort(key=lambda entry: (*_pool_order(entry[0]), _name(entry[1][0].slice) if entry[1] else ""))
        return found

    def candidates(self, node_name: str, labels: Mapping[str, str], key: Any,
                   selectable: Any) -> list[Device]:
        """The devices on the node for which `selectable(device)` holds, from complete and
        valid pools, in pool and slice order. Cached by (node, key) for nodes that only
        nodeName slices reach: `key` must identify what `selectable` checks."""
        cache_key = (node_name, key)
        if not self._elsewhere and (cached := self._candidates.get(cache_key)) is not None:
            return cached
        found = [device for pool, devices in self.node_devices(node_name, labels)
                 if not pool.incomplete and not pool.invalid
                 for device in devices if selectable(device)]
        if not self._elsewhere:
            self._candidates[cache_key] = found
        return found


def _pool_order(pool: Pool) -> tuple[bool, str, str]:
    """Pools by ID, those with binding conditions last (upstream's GatherPools)."""
    return pool.binding_conditions, pool.driver, pool.name


def rule_selects(rule: Mapping[str, Any] | None, slices: Sequence[Mapping[str, Any]]) -> bool:
    """Whether a DeviceTaintRule selects some device of the slices (its taint changes theirs)."""
    selector = _spec(rule or {}).get("deviceSelector")
    if selector is None:
        return False
    for slice_obj in slices:
        spec = _spec(slice_obj)
        if selector.get("driver") not in (None, spec.get("driver") or ""):
            continue
        if selector.get("pool") not in (None, (spec.get("pool") or {}).get("name") or ""):
            continue
        if any(selector.get("device") in (None, raw.get("name") or "") for raw in spec.get("devices") or ()):
            return True
    return False


def _device_reaches(device: Device, node_name: str, labels: Mapping[str, str]) -> bool:
    target = device.target
    if target is None:
        return False
    if target.selector_error:
        raise ValueError(f"failed to perform node selection for device {device.name} in slice "
                         f"{_name(device.slice)}: {target.selector_error}")
    return target.reaches(node_name, labels)


def _amounts(raw: Any) -> dict[str, Fraction]:
    """A `counters` map (name → {value}); a malformed value reads as zero."""
    out = {}
    for name, counter in (raw or {}).items():
        try:
            out[name] = parse_quantity((counter or {}).get("value", 0))
        except (QuantityError, AttributeError):
            out[name] = Fraction(0)
    return out


def _consumption(raw: Sequence[Any]) -> Counters:
    return {entry.get("counterSet") or "": _amounts(entry.get("counters")) for entry in raw if isinstance(entry, dict)}


def _check_consumption(pool: Pool) -> None:
    """upstream's validateDeviceCounterConsumption: every consumed counter exists in the pool."""
    for device in pool.devices:
        for set_name, amounts in (device.counters or {}).items():
            counter_set = pool.counter_sets.get(set_name)
            if counter_set is None:
                pool.invalid, pool.invalid_reason = True, f"counter set {set_name} not found"
                return
            for counter in amounts:
                if counter not in counter_set:
                    pool.invalid, pool.invalid_reason = True, f"counter {counter} not found in counter set {set_name}"
                    return


def _target(spec: Mapping[str, Any]) -> _Target | None:
    if spec.get("nodeName"):
        return _Target(node_name=spec["nodeName"])
    if spec.get("allNodes"):
        return _Target(all_nodes=True)
    selector = spec.get("nodeSelector")
    if selector is not None:
        try:
            return _Target(selector=node_selector((selector or {}).get("nodeSelectorTerms") or ()))
        except SelectorError as exc:
            return _Target(selector_error=str(exc))
    return None
