"""Partitionable devices (DRAPartitionableDevices) and consumable capacity (DRAConsumableCapacity,
DRAFractionalCapacityRange), all beta and on in v1.37: cases transcribed (behaviour, not code)
from upstream's structured allocator table tests (allocator_testing.go), with their names, and
through the plugin the in-flight allocations that use up counters and capacity."""

from __future__ import annotations

from typing import Any

import pytest

from kopfsched.plugins.dynamicresources.allocator import AllocationError, Allocator, InvalidPoolsError
from kopfsched.plugins.dynamicresources.capacity import BINARY_SI, DECIMAL_SI, format_quantity, quantity
from kopfsched.plugins.dynamicresources.inventory import Inventory
from kopfsched.plugins.dynamicresources.manager import Shares, allocated_shares
from tests.plugins.dra import (
    CLASS_A,
    DRIVER_A,
    allocation,
    claim,
    device,
    device_class,
    first_available,
    label_selector,
    local_selector,
    request,
    resource_slice,
    result,
    sub_request,
    taint,
)
from tests.plugins.test_dynamicresources import NS, Harness, unresolvable

NODE1, NODE2 = "node-1", "node-2"
LABELS = {NODE1: {"region": "region-1"}, NODE2: {"region": "region-2"}}
CLASSES = [device_class(CLASS_A, DRIVER_A)]
MEMORY = 'device.capacity["driver-a"].memory.compareTo(quantity("{}")) >= 0'


def consumer(name: str, **counters: str) -> dict:
    """A device consuming `counters` of counter set "counter-set-1"."""
    return device(name, consumesCounters=[{"counterSet": "counter-set-1",
                                           "counters": {k: {"value": v} for k, v in counters.items()}}])


def counter_slice(name: str, pool: str = "pool-1", *, node: str | None = NODE1, count: int = 2,
                  set_name: str = "counter-set-1", **counters: str) -> dict:
    obj = resource_slice(name, pool, DRIVER_A, node=node, count=count)
    obj["spec"].pop("devices")
    obj["spec"]["sharedCounters"] = [{"name": set_name, "counters": {k: {"value": v} for k, v in counters.items()}}]
    return obj


def per_device_slice(name: str, *devices: dict, count: int = 2) -> dict:
    obj = resource_slice(name, "pool-1", DRIVER_A, *devices, count=count)
    obj["spec"]["perDeviceNodeSelection"] = True
    return obj


def shared(name: str, policy: dict | None = None, **capacity: str) -> dict:
    """A device with allowMultipleAllocations and the given capacities (one policy for all)."""
    out = device(name, allowMultipleAllocations=True)
    if capacity:
        out["capacity"] = {k: {"value": v, **({"requestPolicy": policy} if policy else {})}
                           for k, v in capacity.items()}
    return out


def with_capacity(req: dict, **requests: str) -> dict:
    req["exactly"]["capacity"] = {"requests": dict(requests)}
    return req


STEP_POLICY = {"default": "2", "validRange": {"min": "2", "step": "2", "max": "4"}}
"""upstream's withCapacityRequestPolicyRange."""
FRACTIONAL_POLICY = {"default": "200m", "validRange": {"min": "200m", "step": "100m", "max": "1"}}
VALUES_POLICY = {"default": "1", "validValues": ["1", "2", "4"]}


def allocate(claims, slices, *, node=NODE1, allocated=(), shares=None):
    by_name = {c["metadata"]["name"]: c for c in CLASSES}
    allocator = Allocator(claims=list(claims), classes=by_name.get, inventory=Inventory(list(slices)),
                          in_use=set(allocated), shares=shares)
    placement = allocator.allocate(node, LABELS.get(node, {}))
    return None if placement is None else allocator.results(placement)


def without_share_ids(results: list[dict] | None) -> tuple[list[dict] | None, list[str]]:
    """The results with each shareID taken out, and the shareIDs in order."""
    ids = []
    for allocation_result in results or ():
        for item in allocation_result["devices"]["results"]:
            if "shareID" in item:
                ids.append(item.pop("shareID"))
    return results, ids


def consumed(req: str, dev: str, **capacity: str) -> dict:
    return {**result(req, DRIVER_A, "pool-1", dev), "consumedCapacity": dict(capacity)}


def share(dev: str, **capacity: str) -> dict:
    """An allocated result that is a share of a device."""
    out: dict[str, Any] = {**result("req-0", DRIVER_A, "pool-1", dev), "shareID": f"share-{dev}"}
    if capacity:
        out["consumedCapacity"] = dict(capacity)
    return out


def shares_of(*results: dict) -> Shares:
    held = Shares()
    held.add(allocated_shares({"status": {"allocation": allocation(None, *results)}}))
    return held


ONE = [claim("claim-0", request("req-0"))]

PARTITIONABLE = [
    pytest.param(ONE, [resource_slice("slice-1", "pool-1", DRIVER_A, consumer("device-1", memory="4Gi"),
                                      node=NODE1, count=2), counter_slice("slice-2", memory="8Gi")], (),
                 [allocation(local_selector(NODE1), result("req-0", DRIVER_A, "pool-1", "device-1"))],
                 id="partitionable-devices-single-device"),
    pytest.param(ONE, [resource_slice("slice-1", "pool-1", DRIVER_A, consumer("device-1", memory="4Gi"),
                                      consumer("device-2", memory="16Gi"), node=NODE1, count=2),
                       counter_slice("slice-2", memory="18Gi")], [(DRIVER_A, "pool-1", "device-2")], None,
                 id="partitionable-devices-no-capacity-available"),
    pytest.param(ONE, [resource_slice("slice-1", "pool-1", DRIVER_A, consumer("device-1", memory="4Gi"),
                                      consumer("device-2", memory="20Gi"), node=NODE1, count=2),
                       counter_slice("slice-2", memory="18Gi")], [(DRIVER_A, "pool-1", "device-2")], None,
                 id="partitionable-devices-overallocated-capacity-pool"),
    pytest.param([claim("claim-0", request("req-0", CLASS_A, 2))],
                 [resource_slice("slice-1", "pool-1", DRIVER_A, consumer("device-1", memory="4Gi"),
                                 consumer("device-2", memory="6Gi"), consumer("device-3", memory="4Gi"),
                                 node=NODE1, count=2), counter_slice("slice-2", memory="8Gi")], (),
                 [allocation(local_selector(NODE1), result("req-0", DRIVER_A, "pool-1", "device-1"),
                             result("req-0", DRIVER_A, "pool-1", "device-3"))],
                 id="counters-of-devices-picked-in-this-allocation-add-up"),
    pytest.param([claim("claim-0", request("req-0")), claim("claim-1", request("req-0"))],
                 [resource_slice("slice-1", "pool-1", DRIVER_A, consumer("device-1", memory="6Gi"),
                                 consumer("device-2", memory="6Gi"), node=NODE1, count=2),
                  counter_slice("slice-2", memory="8Gi")], (), None,
                 id="counters-run-out-across-claims"),
    pytest.param([claim("claim-0", first_available("req-0", sub_request("subreq-0", CLASS_A, 1, MEMORY.format("6Gi")),
                                                   sub_request("subreq-1", CLASS_A, 1, MEMORY.format("4Gi"))))],
                 [per_device_slice("slice-1",
                                   {**consumer("device-1", memory="4Gi"), "nodeName": NODE1,
                                    "capacity": {"memory": {"value": "4Gi"}}},
                                   {**consumer("device-2", memory="6Gi"), "nodeName": NODE2,
                                    "capacity": {"memory": {"value": "6Gi"}}}),
                  counter_slice("slice-2", node=None, memory="18Gi")], (),
                 [allocation(local_selector(NODE1), result("req-0/subreq-1", DRIVER_A, "pool-1", "device-1"))],
                 id="partitionable-devices-per-device-node-selection-nodename"),
    pytest.param(ONE, [per_device_slice("slice-1", {**consumer("device-1", memory="4Gi"),
                                                    "nodeSelector": label_selector("region", "region-1")}),
                       counter_slice("slice-2", node=None, memory="18Gi")], (),
                 [allocation(label_selector("region", "region-1"), result("req-0", DRIVER_A, "pool-1", "device-1"))],
                 id="partitionable-devices-per-device-node-selection-node-selector"),
    pytest.param(ONE, [per_device_slice("slice-1", {**device("device-1"), "allNodes": True}, count=1)], (),
                 [allocation(None, result("req-0", DRIVER_A, "pool-1", "device-1"))],
                 id="per-device-node-selection-all-nodes"),
    pytest.param(ONE, [per_device_slice("slice-1", {**device("device-1"), "nodeName": NODE2}, count=1)], (), None,
                 id="per-device-node-selection-other-node"),
    pytest.param([claim("claim-0", request("req-0", mode="All"))],
                 [resource_slice("slice-1", "pool-1", DRIVER_A, consumer("device-1", memory="4Gi"),
                                 consumer("device-2", memory="6Gi"), node=NODE1, count=2),
                  counter_slice("slice-2", memory="8Gi")], (), None,
                 id="all-devices-with-consumed-counters-beyond-the-counter-set"),
]


def kind(name: str, value: str, *, counter: bool = True, multiple: bool = False, color: str = "") -> dict:
    """A device of kind `value` (and `color`), consuming counter "c" when `counter`."""
    attributes = {"kind": value, **({"color": color} if color else {})}
    out = device(name, attributes=attributes, **({"allowMultipleAllocations": True} if multiple else {}))
    if counter:
        out["consumesCounters"] = [{"counterSet": "counter-set-1", "counters": {"c": {"value": "1"}}}]
    return out


def of_kind(name: str, *kinds: str, count: int = 1) -> dict:
    expression = " || ".join(f'device.attributes["driver-a"].kind == "{k}"' for k in kinds)
    return request(name, CLASS_A, count, expression)


COLOR = [{"matchAttribute": "driver-a/color"}]

PARTITIONABLE += [
    pytest.param(ONE, [resource_slice("slice-1", "pool-1", DRIVER_A, {**kind("device-1", "a"),
                                                                      "taints": [taint("ecc")]},
                                      kind("device-2", "a"), node=NODE1, count=2),
                       counter_slice("slice-2", c="1")], (),
                 [allocation(local_selector(NODE1), result("req-0", DRIVER_A, "pool-1", "device-2"))],
                 id="partitionable-devices-taint-releases-counter"),
    pytest.param([claim("claim-0", request("req-0", CLASS_A, 2), constraints=COLOR)],
                 [resource_slice("slice-1", "pool-1", DRIVER_A, kind("device-1", "a", color="red"),
                                 kind("device-2", "a", color="blue"), kind("device-3", "a", color="blue"),
                                 node=NODE1, count=2), counter_slice("slice-2", c="2")], (),
                 [allocation(local_selector(NODE1), result("req-0", DRIVER_A, "pool-1", "device-2"),
                             result("req-0", DRIVER_A, "pool-1", "device-3"))],
                 id="partitionable-devices-constraint-releases-counter"),
    pytest.param([claim("claim-0", of_kind("req-0", "shared"), of_kind("req-1", "counteronly"))],
                 [resource_slice("slice-1", "pool-1", DRIVER_A, kind("device-1", "shared", multiple=True),
                                 kind("device-2", "shared", counter=False), kind("device-3", "counteronly"),
                                 node=NODE1, count=2), counter_slice("slice-2", c="1")], (),
                 [allocation(local_selector(NODE1), result("req-0", DRIVER_A, "pool-1", "device-2"),
                             result("req-1", DRIVER_A, "pool-1", "device-3"))],
                 id="partitionable-consumable-capacity-backtrack-releases-counter"),
]


@pytest.mark.parametrize(("claims", "slices", "allocated", "expected"), PARTITIONABLE)
def test_partitionable(claims, slices, allocated, expected):
    assert allocate(claims, slices, allocated=allocated) == expected


@pytest.mark.parametrize("slices", [
    pytest.param([resource_slice("slice-1", "pool-1", DRIVER_A, consumer("device-1", memory="4Gi"), node=NODE1,
                                 count=2), counter_slice("slice-2", set_name="other", memory="8Gi")],
                 id="counter-set-not-found"),
    pytest.param([resource_slice("slice-1", "pool-1", DRIVER_A, consumer("device-1", memory="4Gi"), node=NODE1,
                                 count=2), counter_slice("slice-2", cores="8")], id="counter-not-found"),
    pytest.param([resource_slice("slice-1", "pool-1", DRIVER_A, device("device-1"), node=NODE1, count=3),
                  counter_slice("slice-2", count=3, memory="8Gi"), counter_slice("slice-3", count=3, memory="8Gi")],
                 id="duplicate-counter-set-name"),
])
def test_invalid_counter_pools(slices):
    with pytest.raises(InvalidPoolsError) as caught:
        allocate(ONE, slices)
    assert str(caught.value) == "invalid resource pools were encountered"


CAPACITY = [
    pytest.param([claim("claim-0", with_capacity(request("req-0"), memory="1Gi"))],
                 [resource_slice("slice-1", "pool-1", DRIVER_A, shared("device-1", memory="4Gi"), node=NODE1)], None,
                 [allocation(local_selector(NODE1), consumed("req-0", "device-1", memory="1Gi"))],
                 id="consumable-capacity-multi-allocatable-device-without-policy-with-capacity-request"),
    pytest.param(ONE, [resource_slice("slice-1", "pool-1", DRIVER_A, shared("device-1", memory="4Gi"), node=NODE1)],
                 None, [allocation(local_selector(NODE1), consumed("req-0", "device-1", memory="4Gi"))],
                 id="consumable-capacity-multi-allocatable-device-without-policy-without-capacity-request"),
    pytest.param([claim("claim-0", request("req-0")), claim("claim-1", request("req-0"))],
                 [resource_slice("slice-1", "pool-1", DRIVER_A, shared("device-1", memory="4Gi"), node=NODE1)], None,
                 None, id="consumable-capacity-multi-allocatable-device-without-policy-without-capacity-request-block"),
    pytest.param(ONE, [resource_slice("slice-1", "pool-1", DRIVER_A, shared("device-1"), node=NODE1)], None,
                 [allocation(local_selector(NODE1), result("req-0", DRIVER_A, "pool-1", "device-1"))],
                 id="consumable-capacity-multi-allocatable-device-without-capacity-without-capacity-request"),
    pytest.param(ONE, [resource_slice("slice-1", "pool-1", DRIVER_A, shared("device-1", STEP_POLICY, memory="4"),
                                      node=NODE1)], None,
                 [allocation(local_selector(NODE1), consumed("req-0", "device-1", memory="2"))],
                 id="consumable-capacity-multi-allocatable-device-with-policy-without-capacity-request"),
    pytest.param([claim("claim-0", with_capacity(request("req-0"), memory="3"))],
                 [resource_slice("slice-1", "pool-1", DRIVER_A, shared("device-1", STEP_POLICY, memory="4"),
                                 node=NODE1)], None,
                 [allocation(local_selector(NODE1), consumed("req-0", "device-1", memory="4"))],
                 id="consumable-capacity-multi-allocatable-device-with-range-policy-step"),
    pytest.param([claim("claim-0", with_capacity(request("req-0"), memory="5"))],
                 [resource_slice("slice-1", "pool-1", DRIVER_A, shared("device-1", STEP_POLICY, memory="8"),
                                 node=NODE1)], None, None,
                 id="consumable-capacity-multi-allocatable-device-with-request-over-max-sharing-policy"),
    pytest.param([claim("claim-0", with_capacity(request("req-0"), memory="250m"))],
                 [resource_slice("slice-1", "pool-1", DRIVER_A, shared("device-1", FRACTIONAL_POLICY, memory="1"),
                                 node=NODE1)], None,
                 [allocation(local_selector(NODE1), consumed("req-0", "device-1", memory="300m"))],
                 id="fractional-capacity-range-rounds-up-in-thousandths"),
    pytest.param([claim("claim-0", with_capacity(request("req-0"), memory="3"))],
                 [resource_slice("slice-1", "pool-1", DRIVER_A, shared("device-1", VALUES_POLICY, memory="4"),
                                 node=NODE1)], None,
                 [allocation(local_selector(NODE1), consumed("req-0", "device-1", memory="4"))],
                 id="consumable-capacity-multi-allocatable-device-with-valid-values-policy-round-up"),
    pytest.param([claim("claim-0", with_capacity(request("req-0"), memory="5"))],
                 [resource_slice("slice-1", "pool-1", DRIVER_A, shared("device-1", VALUES_POLICY, memory="8"),
                                 node=NODE1)], None, None, id="valid-values-above-all-violates-the-policy"),
    pytest.param([claim("claim-0", with_capacity(request("req-0"), memory="2Gi"))],
                 [resource_slice("slice-1", "pool-1", DRIVER_A, shared("device-1", memory="4Gi"),
                                 shared("device-2", memory="4Gi"), node=NODE1)],
                 shares_of(share("device-1", memory="3Gi")),
                 [allocation(local_selector(NODE1), consumed("req-0", "device-2", memory="2Gi"))],
                 id="consumable-capacity-multi-allocatable-device-with-allocated-capacity-next-device"),
    pytest.param([claim("claim-0", with_capacity(request("req-0"), memory="1Gi"))],
                 [resource_slice("slice-1", "pool-1", DRIVER_A, shared("device-1", memory="4Gi"), node=NODE1)],
                 shares_of(share("device-1", memory="3Gi")),
                 [allocation(local_selector(NODE1), consumed("req-0", "device-1", memory="1Gi"))],
                 id="consumable-capacity-multi-allocatable-device-with-allocated-capacity-use-remaining"),
    pytest.param([claim("claim-0", with_capacity(request("req-0"), memory="2Gi")),
                  claim("claim-1", with_capacity(request("req-0"), memory="2Gi"))],
                 [resource_slice("slice-1", "pool-1", DRIVER_A, shared("device-1", memory="4Gi"), node=NODE1)], None,
                 [allocation(local_selector(NODE1), consumed("req-0", "device-1", memory="2Gi")),
                  allocation(local_selector(NODE1), consumed("req-0", "device-1", memory="2Gi"))],
                 id="two-claims-share-one-device"),
    pytest.param([claim("claim-0", with_capacity(request("req-0", CLASS_A, 2), memory="1Gi"))],
                 [resource_slice("slice-1", "pool-1", DRIVER_A, shared("device-1", memory="4Gi"), node=NODE1)], None,
                 None, id="one-request-never-takes-a-shared-device-twice"),
    pytest.param([claim("claim-0", with_capacity(request("req-0", CLASS_A, 2), memory="1Gi"))],
                 [resource_slice("slice-1", "pool-1", DRIVER_A, shared("device-1", memory="4Gi"),
                                 shared("device-2", memory="4Gi"), node=NODE1)], None,
                 [allocation(local_selector(NODE1), consumed("req-0", "device-1", memory="1Gi"),
                             consumed("req-0", "device-2", memory="1Gi"))],
                 id="one-request-takes-two-shared-devices"),
    pytest.param([claim("claim-0", with_capacity(request("req-0"), memory="1Gi"),
                        with_capacity(request("req-1"), memory="1Gi"))],
                 [resource_slice("slice-1", "pool-1", DRIVER_A, shared("device-1", memory="4Gi"), node=NODE1)], None,
                 [allocation(local_selector(NODE1), consumed("req-0", "device-1", memory="1Gi"),
                             consumed("req-1", "device-1", memory="1Gi"))],
                 id="two-requests-of-a-claim-share-one-device"),
    pytest.param([claim("claim-0", with_capacity(request("req-0"), memory="1Gi"),
                        with_capacity(request("req-1"), memory="1Gi"),
                        constraints=[{"distinctAttribute": "driver-a/card"}])],
                 [resource_slice("slice-1", "pool-1", DRIVER_A, {**shared("device-1", memory="4Gi"),
                                                                "attributes": {"card": {"int": 0}}},
                                 {**shared("device-2", memory="4Gi"), "attributes": {"card": {"int": 1}}},
                                 node=NODE1)], None,
                 [allocation(local_selector(NODE1), consumed("req-0", "device-1", memory="1Gi"),
                             consumed("req-1", "device-2", memory="1Gi"))],
                 id="distinct-attribute-keeps-requests-on-different-devices"),
    pytest.param([claim("claim-0", with_capacity(request("req-0"), memory="2Gi"))],
                 [resource_slice("slice-1", "pool-1", DRIVER_A, device("device-1", capacity={"memory": "4Gi"}),
                                 node=NODE1)], None,
                 [allocation(local_selector(NODE1), result("req-0", DRIVER_A, "pool-1", "device-1"))],
                 id="consumable-capacity-dedicated-device-with-consumable-capacity-request"),
    pytest.param([claim("claim-0", with_capacity(request("req-0"), memory="8Gi"))],
                 [resource_slice("slice-1", "pool-1", DRIVER_A, device("device-1", capacity={"memory": "4Gi"}),
                                 node=NODE1)], None, None, id="dedicated-device-with-too-small-a-capacity"),
    pytest.param([claim("claim-0", with_capacity(request("req-0"), cores="1"))],
                 [resource_slice("slice-1", "pool-1", DRIVER_A, shared("device-1", memory="4Gi"), node=NODE1)], None,
                 None, id="consumable-capacity-multi-allocatable-device-with-missing-capacity-request"),
    pytest.param([claim("claim-0", with_capacity(request("req-0", mode="All"), memory="2Gi"))],
                 [resource_slice("slice-1", "pool-1", DRIVER_A, shared("device-1", memory="4Gi"), node=NODE1)],
                 shares_of(share("device-1", memory="3Gi")), None,
                 id="consumable-capacity-multi-allocatable-device-allocation-mode-all-in-use-insufficient"),
    pytest.param([claim("claim-0", with_capacity(request("req-0", mode="All"), memory="2Gi"))],
                 [resource_slice("slice-1", "pool-1", DRIVER_A, shared("device-1", memory="4Gi"),
                                 shared("device-2", memory="1Gi"), node=NODE1)], None,
                 [allocation(local_selector(NODE1), consumed("req-0", "device-1", memory="2Gi"))],
                 id="consumable-capacity-multi-allocatable-device-allocation-mode-all-filter-out-insufficient-capacity"),
    pytest.param([claim("claim-0", request("req-0")), claim("claim-1", request("req-0"))],
                 [resource_slice("slice-1", "pool-1", DRIVER_A,
                                 {**shared("device-1", memory="1Gi", cores="2"),
                                  "consumesCounters": consumer("x", memory="6Gi")["consumesCounters"]},
                                 consumer("device-2", memory="6Gi"), node=NODE1, count=2),
                  counter_slice("slice-2", memory="8Gi")], None, None,
                 id="a-shared-device-pays-its-counters-once-then-blocks-its-siblings"),
]


CAPACITY += [
    pytest.param([claim("claim-0", of_kind("req-0", "shared")),
                  claim("claim-1", of_kind("req-1", "shared", "fallback"), of_kind("req-2", "gate"),
                        of_kind("req-3", "shared"), constraints=[{"matchAttribute": "driver-a/color",
                                                                  "requests": ["req-1", "req-2"]}])],
                 [resource_slice("slice-1", "pool-1", DRIVER_A, kind("device-1", "shared", multiple=True, color="red"),
                                 kind("device-2", "fallback", counter=False, color="blue"),
                                 kind("device-3", "gate", counter=False, color="blue"), node=NODE1, count=2),
                  counter_slice("slice-2", c="1")], None,
                 [allocation(local_selector(NODE1), result("req-0", DRIVER_A, "pool-1", "device-1")),
                  allocation(local_selector(NODE1), result("req-1", DRIVER_A, "pool-1", "device-2"),
                             result("req-2", DRIVER_A, "pool-1", "device-3"),
                             result("req-3", DRIVER_A, "pool-1", "device-1"))],
                 id="partitionable-empty-capacity-multiple-share-backtrack-keeps-counter-ownership"),
    pytest.param([claim("claim-0", with_capacity(of_kind("req-0", "cap"), memory="2")),
                  claim("claim-1", first_available(
                      "req-0", {**sub_request("subreq-0", CLASS_A, 1, 'device.attributes["driver-a"].kind == "cap"',
                                              mode="All"), "capacity": {"requests": {"memory": "2"}}},
                      sub_request("subreq-1", CLASS_A, 1, 'device.attributes["driver-a"].kind == "fb"')),
                        constraints=[{"matchAttribute": "driver-a/kind"}])],
                 [resource_slice("slice-1", "pool-1", DRIVER_A,
                                 {**shared("device-1", memory="2"), "attributes": {"kind": {"string": "cap"}}},
                                 device("device-2", attributes={"kind": "fb"}), node=NODE1)], None,
                 [allocation(local_selector(NODE1), consumed("req-0", "device-1", memory="2")),
                  allocation(local_selector(NODE1), result("req-0/subreq-1", DRIVER_A, "pool-1", "device-2"))],
                 id="consumable-capacity-rejection-rolls-back-constraints"),
]


@pytest.mark.parametrize(("claims", "slices", "shares", "expected"), CAPACITY)
def test_consumable_capacity(claims, slices, shares, expected):
    results, ids = without_share_ids(allocate(claims, slices, shares=shares))
    assert results == expected
    shared_results = sum(1 for s in slices for d in s["spec"].get("devices") or () if d.get("allowMultipleAllocations"))
    if expected is not None and shared_results:
        assert ids and len(set(ids)) == len(ids)  # a fresh shareID for every share


@pytest.mark.parametrize(("request_quantity", "message"), [
    pytest.param("18446744073709551616", 'claim claim-0, request req-0: checking capacity for device '
                 'driver-a/pool-1/device-1: capacity "memory": capacity request cannot be represented in the '
                 "device's range arithmetic: request 18446744073709551616 is not a representable milli value",
                 id="consumable-capacity-range-policy-overflow-aborts-not-skip"),
    pytest.param("-5", 'claim claim-0, request req-0: checking capacity for device driver-a/pool-1/device-1: '
                 'capacity "memory": capacity value is negative', id="consumable-capacity-negative-request-aborts"),
])
def test_capacity_errors_stop_the_attempt(request_quantity, message):
    # device-2 would hold the request, but an unrepresentable one stops the attempt at device-1.
    slices = [resource_slice("slice-1", "pool-1", DRIVER_A, shared("device-1", STEP_POLICY, memory="4"),
                             shared("device-2"), node=NODE1)]
    if request_quantity.startswith("-"):
        slices = [resource_slice("slice-1", "pool-1", DRIVER_A, shared("device-1", memory="10"), node=NODE1)]
    with pytest.raises(AllocationError) as caught:
        allocate([claim("claim-0", with_capacity(request("req-0"), memory=request_quantity))], slices)
    assert str(caught.value) == message


@pytest.mark.parametrize(("text", "value", "fmt", "shown"), [
    ("1024Mi", 2**30, BINARY_SI, "1Gi"), ("1536Mi", 1536 * 2**20, BINARY_SI, "1536Mi"),
    ("0.5Gi", 2**29, BINARY_SI, "512Mi"), ("512", 512, DECIMAL_SI, "512"), ("1000m", 1, DECIMAL_SI, "1"),
    ("0.25", 0.25, DECIMAL_SI, "250m"), ("2e3", 2000, "DecimalExponent", "2e3"),
    ("1500k", 1500000, DECIMAL_SI, "1500k"), ("100M", 10**8, DECIMAL_SI, "100M"),
])
def test_quantities_print_as_upstream(text, value, fmt, shown):
    parsed = quantity(text)
    assert (float(parsed.value), parsed.format, str(parsed)) == (float(value), fmt, shown)
    assert format_quantity(parsed.value, parsed.format) == shown


# -- through the plugin: in-flight allocations count ----------------------------------------------

CLASS = "my-resource-class"
DRIVER = "some-driver"
WORKER = "worker"


def _pod(name: str, claim_name: str) -> dict:
    from kopfsched.testing import make_pod

    return make_pod(name, NS, uid=f"uid-{name}", resourceClaims=[{"name": "r", "resourceClaimName": claim_name}])


def _claim(name: str, **capacity: str) -> dict:
    req = request("req-1", CLASS)
    if capacity:
        req = with_capacity(req, **capacity)
    return claim(name, req, namespace=NS)


def _slices(*devices: dict, counters: dict[str, str] | None = None) -> list[dict]:
    out = [resource_slice("worker-dev", WORKER, DRIVER, *devices, node=WORKER, count=2 if counters else 1)]
    if counters:
        counter_set = counter_slice("worker-counters", WORKER, node=WORKER, **counters)
        counter_set["spec"]["driver"] = DRIVER
        out.append(counter_set)
    return out


def test_an_assumed_allocation_uses_up_the_counters_for_the_next_pod():
    harness = Harness([_claim("claim-1"), _claim("claim-2"), device_class(CLASS, DRIVER),
                       *_slices(consumer("gpu-0", memory="6Gi"), consumer("gpu-1", memory="6Gi"),
                                counters={"memory": "8Gi"})])
    first = harness.cycle(_pod("pod-1", "claim-1"), bind=False)
    assert first["filter"] == {WORKER: None}
    assert harness.plugin.manager.get_claim(NS, "claim-1")["status"]["allocation"]["devices"]["results"] == [
        result("req-1", DRIVER, WORKER, "gpu-0")]
    second = harness.cycle(_pod("pod-2", "claim-2"), bind=False)
    assert second["filter"] == {WORKER: unresolvable("cannot allocate all claims")}
    harness.plugin.unreserve(first["state"], _info("pod-1", "claim-1"), WORKER)
    assert harness.cycle(_pod("pod-2", "claim-2"), bind=False)["filter"] == {WORKER: None}


def _info(name: str, claim_name: str) -> Any:
    from kopfsched.framework.types import PodInfo

    return PodInfo(_pod(name, claim_name))


def test_an_assumed_share_uses_up_capacity_for_the_next_pod():
    harness = Harness([_claim("claim-1", memory="3Gi"), _claim("claim-2", memory="2Gi"),
                       _claim("claim-3", memory="1Gi"), device_class(CLASS, DRIVER),
                       *_slices(shared("gpu-0", memory="4Gi"))])
    first = harness.cycle(_pod("pod-1", "claim-1"), bind=False)
    assert first["filter"] == {WORKER: None}
    (held,) = harness.plugin.manager.get_claim(NS, "claim-1")["status"]["allocation"]["devices"]["results"]
    assert held["consumedCapacity"] == {"memory": "3Gi"} and held["shareID"]
    assert harness.cycle(_pod("pod-2", "claim-2"), bind=False)["filter"] == {
        WORKER: unresolvable("cannot allocate all claims")}
    third = harness.cycle(_pod("pod-3", "claim-3"), bind=True)
    assert third["filter"] == {WORKER: None} and third["prebind"] is None
    (written,) = harness.claim("claim-3")["status"]["allocation"]["devices"]["results"]
    assert written["consumedCapacity"] == {"memory": "1Gi"} and written["shareID"] != held["shareID"]


def test_a_pools_slices_are_tried_by_name_whatever_their_node_selection():
    """One pool, a per-device slice named before a nodeName slice: its device comes first."""
    slices = [resource_slice("slice-b", "pool-1", DRIVER_A, device("device-b"), node=NODE1, count=2),
              per_device_slice("slice-a", {**device("device-a"), "nodeName": NODE1})]
    assert allocate(ONE, slices) == [allocation(local_selector(NODE1), result("req-0", DRIVER_A, "pool-1", "device-a"))]
