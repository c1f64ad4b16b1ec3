"""The DRA allocator on its own: cases transcribed (behaviour, not code) from upstream's
structured allocator table tests (dynamic-resource-allocation/structured, allocator_testing.go),
with their names, plus the CEL selector library the DRA drivers' expressions use."""

from __future__ import annotations

import pytest

from kopfsched.plugins.dynamicresources.allocator import AllocationError, Allocator
from kopfsched.plugins.dynamicresources.cel import CELError, compile_expression, device_variable
from kopfsched.plugins.dynamicresources.inventory import Inventory
from tests.plugins.dra import (
    CLASS_A,
    CLASS_B,
    DRIVER_A,
    DRIVER_B,
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
)

NODE1, NODE2 = "node-1", "node-2"
REGION = "region"
LABELS = {NODE1: {REGION: "region-1", "planet": "earth"}, NODE2: {REGION: "region-2"}}
CLASSES = [device_class(CLASS_A, DRIVER_A), device_class(CLASS_B, DRIVER_B)]
MEMORY = 'device.capacity["driver-a"].memory.compareTo(quantity("{}")) >= 0'
NUMA = "driver-a/numa"


def one(name: str, pool: str = "pool-1", driver: str = DRIVER_A, node: str | None = NODE1, **kwargs) -> dict:
    return resource_slice(name, pool, driver, device("device-1"), node=node, **kwargs)


def allocate(claims, slices, *, node=NODE1, classes=CLASSES, allocated=()):
    by_name = {c["metadata"]["name"]: c for c in classes}
    allocator = Allocator(claims=list(claims), classes=by_name.get, inventory=Inventory(list(slices)),
                          in_use=set(allocated))
    placement = allocator.allocate(node, LABELS.get(node, {}))
    return None if placement is None else allocator.results(placement)


CASES = [
    pytest.param([claim("claim-0", request("req-0"))], [one("slice-1")], NODE1, (),
                 [allocation(local_selector(NODE1), result("req-0", DRIVER_A, "pool-1", "device-1"))], id="simple"),
    pytest.param([claim("claim-0", request("req-0"))], [one("slice-1", driver=DRIVER_B),
                                                        one("slice-2", pool="pool-2", node=NODE2)], NODE2, (),
                 [allocation(local_selector(NODE2), result("req-0", DRIVER_A, "pool-2", "device-1"))],
                 id="other-node"),
    pytest.param([claim("claim-0", request("req-0", CLASS_A, 1, MEMORY.format("1Gi")),
                        request("req-1", CLASS_A, 1, MEMORY.format("2Gi")))],
                 [resource_slice("slice-1", "pool-1", DRIVER_A, device("device-1", capacity={"memory": "1Gi"}),
                                 device("device-2", capacity={"memory": "2Gi"}), node=NODE1)], NODE1, (),
                 [allocation(local_selector(NODE1), result("req-0", DRIVER_A, "pool-1", "device-1"),
                             result("req-1", DRIVER_A, "pool-1", "device-2"))], id="small-and-large"),
    pytest.param([claim("claim-0", request("req-0", CLASS_A, 1, MEMORY.format("1Gi")),
                        request("req-1", CLASS_A, 1, MEMORY.format("2Gi")))],
                 [resource_slice("slice-1", "pool-1", DRIVER_A, device("device-2", capacity={"memory": "2Gi"}),
                                 device("device-1", capacity={"memory": "1Gi"}), node=NODE1)], NODE1, (),
                 [allocation(local_selector(NODE1), result("req-0", DRIVER_A, "pool-1", "device-1"),
                             result("req-1", DRIVER_A, "pool-1", "device-2"))],
                 id="small-and-large-backtrack-requests"),
    pytest.param([claim("claim-0", request("req-0", CLASS_A, 1, MEMORY.format("1Gi"))),
                  claim("claim-1", request("req-1", CLASS_A, 1, MEMORY.format("2Gi")))],
                 [resource_slice("slice-1", "pool-1", DRIVER_A, device("device-2", capacity={"memory": "2Gi"}),
                                 device("device-1", capacity={"memory": "1Gi"}), node=NODE1)], NODE1, (),
                 [allocation(local_selector(NODE1), result("req-0", DRIVER_A, "pool-1", "device-1")),
                  allocation(local_selector(NODE1), result("req-1", DRIVER_A, "pool-1", "device-2"))],
                 id="small-and-large-backtrack-claims"),
    pytest.param([claim("claim-0", request("req-0", CLASS_A, 2))],
                 [one("slice-1"), one("slice-2", pool="pool-2")], NODE1, (),
                 [allocation(local_selector(NODE1), result("req-0", DRIVER_A, "pool-1", "device-1"),
                             result("req-0", DRIVER_A, "pool-2", "device-1"))],
                 id="devices-split-across-different-slices"),
    pytest.param([claim("claim-0", request("req-0"))],
                 [resource_slice("slice-1-obsolete", "pool-1", DRIVER_A, device("device-1"), node=NODE1, count=2),
                  resource_slice("slice-1-new", "pool-1", DRIVER_A, device("device-2"), node=NODE1, count=2,
                                 generation=2)], NODE1, (), None, id="obsolete-slice"),
    pytest.param([claim("claim-0", request("req-0"))], [], NODE1, (), None, id="no-slices"),
    pytest.param([claim("claim-0", request("req-0")), claim("claim-1", request("req-1"))], [one("slice-1")],
                 NODE1, (), None, id="not-enough-suitable-devices"),
    pytest.param([claim("claim-0", request("req-0", mode="All"))], [one("slice-1")], NODE1, (),
                 [allocation(local_selector(NODE1), result("req-0", DRIVER_A, "pool-1", "device-1"))],
                 id="all-devices-single"),
    pytest.param([claim("claim-0", request("req-0", mode="All"))], [one("slice-1"), one("slice-1b", pool="pool-2")],
                 NODE1, (), [allocation(local_selector(NODE1), result("req-0", DRIVER_A, "pool-1", "device-1"),
                                        result("req-0", DRIVER_A, "pool-2", "device-1"))], id="all-devices-many"),
    pytest.param([claim("claim-0", request("req-0", mode="All")), claim("claim-1", request("req-0", CLASS_B))],
                 [one("slice-1"), one("slice-1b", driver=DRIVER_B)], NODE1, (),
                 [allocation(local_selector(NODE1), result("req-0", DRIVER_A, "pool-1", "device-1")),
                  allocation(local_selector(NODE1), result("req-0", DRIVER_B, "pool-1", "device-1"))],
                 id="all-devices-plus-another"),
    pytest.param([claim("claim-1", request("req-0")), claim("claim-0", request("req-0", mode="All"))],
                 [one("slice-1")], NODE1, (), None, id="all-devices-no-solution"),
    pytest.param([claim("claim-0", request("req-0", mode="All"))],
                 [resource_slice("slice-1", "pool-1", DRIVER_A, node=NODE1)], NODE1, (), None,
                 id="all-devices-slice-without-devices"),
    pytest.param([claim("claim-0", request("req-0", mode="All"))],
                 [resource_slice("slice-1", "pool-1", DRIVER_A, device("device-1"), device("device-2"), node=NODE1)],
                 NODE1, [(DRIVER_A, "pool-1", "device-1")], None, id="all-devices-some-allocated"),
    pytest.param([claim("claim-0", request("req-0", mode="All", admin=True))],
                 [resource_slice("slice-1", "pool-1", DRIVER_A, device("device-1"), device("device-2"), node=NODE1)],
                 NODE1, [(DRIVER_A, "pool-1", "device-1")],
                 [allocation(local_selector(NODE1), result("req-0", DRIVER_A, "pool-1", "device-1", True),
                             result("req-0", DRIVER_A, "pool-1", "device-2", True))],
                 id="all-devices-some-allocated-admin-access"),
    pytest.param([claim("claim-0", request("req-0", admin=True), request("req-1", mode="All", admin=True))],
                 [resource_slice("slice-1", "pool-1", DRIVER_A, device("device-1"), device("device-2"), node=NODE1)],
                 NODE1, (), None, id="all-devices-some-allocating-admin-access"),
    pytest.param([claim("claim-0", request("req-0", CLASS_A, 2, admin=True))],
                 [resource_slice("slice-1", "pool-1", DRIVER_A, device("device-1"), device("device-2"), node=NODE1)],
                 NODE1, [(DRIVER_A, "pool-1", "device-1")],
                 [allocation(local_selector(NODE1), result("req-0", DRIVER_A, "pool-1", "device-1", True),
                             result("req-0", DRIVER_A, "pool-1", "device-2", True))],
                 id="count-devices-some-allocated-admin-access"),
    pytest.param([claim("claim-0", request("req-0", admin=True)), claim("claim-1", request("req-0", admin=True))],
                 [resource_slice("slice-1", "pool-1", DRIVER_A, device("device-1"), device("device-2"), node=NODE1)],
                 NODE1, (),
                 [allocation(local_selector(NODE1), result("req-0", DRIVER_A, "pool-1", "device-1", True)),
                  allocation(local_selector(NODE1), result("req-0", DRIVER_A, "pool-1", "device-1", True))],
                 id="separate-claims-share-device-admin-access"),
    pytest.param([claim("claim-0", request("req-0")), claim("claim-1", request("req-0", admin=True))],
                 [resource_slice("slice-1", "pool-1", DRIVER_A, device("device-1"), device("device-2"), node=NODE1)],
                 NODE1, (),
                 [allocation(local_selector(NODE1), result("req-0", DRIVER_A, "pool-1", "device-1")),
                  allocation(local_selector(NODE1), result("req-0", DRIVER_A, "pool-1", "device-1", True))],
                 id="admin-access-claims-device-allocating-for-non-admin-access"),
    pytest.param([claim("claim-0", first_available("req-0", sub_request("subreq-0", CLASS_A, mode="All"),
                                                   sub_request("subreq-1", CLASS_B)))],
                 [resource_slice("slice-1", "pool-1", DRIVER_A, node=NODE1),
                  one("slice-2", pool="pool-2", driver=DRIVER_B)], NODE1, (),
                 [allocation(local_selector(NODE1), result("req-0/subreq-1", DRIVER_B, "pool-2", "device-1"))],
                 id="all-devices-slice-without-devices-prioritized-list"),
    pytest.param([claim("claim-0", first_available("req-0", sub_request("subreq-0", CLASS_A, mode="All"),
                                                   sub_request("subreq-1", CLASS_B)))],
                 [resource_slice("slice-1", "pool-1", DRIVER_A, device("device-1"), device("device-2"), node=NODE1),
                  one("slice-2", pool="pool-2", driver=DRIVER_B)], NODE1, [(DRIVER_A, "pool-1", "device-1")],
                 [allocation(local_selector(NODE1), result("req-0/subreq-1", DRIVER_B, "pool-2", "device-1"))],
                 id="all-devices-some-allocated-prioritized-list"),
    pytest.param([claim("claim-0", request("req-0"))],
                 [one("slice-1", node=None, node_selector=label_selector(REGION, "region-1"))], NODE1, (),
                 [allocation(label_selector(REGION, "region-1"), result("req-0", DRIVER_A, "pool-1", "device-1"))],
                 id="network-attached-device"),
    pytest.param([claim("claim-0", request("req-0"))],
                 [one("slice-1", node=None, node_selector=label_selector(REGION, "region-1"))], NODE2, (), None,
                 id="unsuccessful-allocation-network-attached-device"),
    pytest.param([claim("claim-0", request("req-0", CLASS_A, 4))],
                 [one("slice-1", node=None, node_selector=label_selector(REGION, "region-1")),
                  one("slice-2", pool="pool-2", node=None, all_nodes=True),
                  one("slice-3", pool="pool-3", node=None, node_selector=label_selector("planet", "earth")),
                  one("slice-4", pool="pool-4", node=None, node_selector=local_selector(NODE1))], NODE1, (),
                 [allocation({"nodeSelectorTerms": [{
                     "matchExpressions": [{"key": REGION, "operator": "In", "values": ["region-1"]},
                                          {"key": "planet", "operator": "In", "values": ["earth"]}],
                     "matchFields": [{"key": "metadata.name", "operator": "In", "values": [NODE1]}]}]},
                     *(result("req-0", DRIVER_A, f"pool-{i}", "device-1") for i in range(1, 5)))],
                 id="many-network-attached-devices"),
    pytest.param([claim("claim-0", request("req-0", CLASS_A, 2))],
                 [one("slice-1", node=None, node_selector=label_selector(REGION, "region-1")),
                  one("slice-2", pool="pool-2")], NODE1, (),
                 [allocation(local_selector(NODE1), result("req-0", DRIVER_A, "pool-1", "device-1"),
                             result("req-0", DRIVER_A, "pool-2", "device-1"))],
                 id="local-and-network-attached-devices"),
    pytest.param([claim("claim-0", request("req-0"), request("req-1"), constraints=[{"matchAttribute": NUMA}])],
                 [resource_slice("slice-1", "pool-1", DRIVER_A, device("device-1", attributes={"numa": 1}),
                                 device("device-2", attributes={"numa": 1}), node=NODE1)], NODE1, (),
                 [allocation(local_selector(NODE1), result("req-0", DRIVER_A, "pool-1", "device-1"),
                             result("req-1", DRIVER_A, "pool-1", "device-2"))], id="with-constraint"),
    pytest.param([claim("claim-0", request("req-0"), constraints=[{"matchAttribute": "driver-a/nonExistent"}])],
                 [one("slice-1")], NODE1, (), None, id="with-constraint-non-existent-attribute"),
    pytest.param([claim("claim-0", request("req-0", CLASS_A, 2), constraints=[{"matchAttribute": NUMA}])],
                 [resource_slice("slice-1", "pool-1", DRIVER_A, device("device-1", attributes={"numa": 1}),
                                 device("device-2", attributes={"numa": 2}), node=NODE1)], NODE1, (), None,
                 id="with-constraint-not-matching-int-attribute"),
    pytest.param([claim("claim-0", request("req-0", CLASS_A, 2), constraints=[{"matchAttribute": NUMA}])],
                 [resource_slice("slice-1", "pool-1", DRIVER_A, device("device-1", attributes={"numa": 1}),
                                 device("device-2", attributes={"numa": 2}),
                                 device("device-3", attributes={"numa": 2}), node=NODE1)], NODE1, (),
                 [allocation(local_selector(NODE1), result("req-0", DRIVER_A, "pool-1", "device-2"),
                             result("req-0", DRIVER_A, "pool-1", "device-3"))],
                 id="with-constraint-backtracks-to-a-matching-pair"),
    pytest.param([claim("claim-0", request("req-0"), request("req-1"),
                        constraints=[{"requests": ["req-0"], "matchAttribute": NUMA}])],
                 [resource_slice("slice-1", "pool-1", DRIVER_A, device("device-1", attributes={"numa": 1}),
                                 device("device-2", attributes={"numa": 2}), node=NODE1)], NODE1, (),
                 [allocation(local_selector(NODE1), result("req-0", DRIVER_A, "pool-1", "device-1"),
                             result("req-1", DRIVER_A, "pool-1", "device-2"))],
                 id="with-constraint-for-one-request-only"),
    pytest.param([claim("claim-0", first_available("req-0", sub_request("subreq-0", CLASS_A, 2),
                                                   sub_request("subreq-1", CLASS_A, 1)))],
                 [one("slice-1")], NODE1, (),
                 [allocation(local_selector(NODE1), result("req-0/subreq-1", DRIVER_A, "pool-1", "device-1"))],
                 id="prioritized-list-falls-back-to-the-second-subrequest"),
    pytest.param([claim("claim-0", first_available("req-0", sub_request("subreq-0", CLASS_A, 1),
                                                   sub_request("subreq-1", CLASS_B, 1)))],
                 [one("slice-1"), one("slice-2", driver=DRIVER_B)], NODE1, (),
                 [allocation(local_selector(NODE1), result("req-0/subreq-0", DRIVER_A, "pool-1", "device-1"))],
                 id="prioritized-list-takes-the-first-that-fits"),
    pytest.param([claim("claim-0", first_available("req-0", sub_request("subreq-0", CLASS_A, 1),
                                                   sub_request("subreq-1", CLASS_B, 1)),
                        request("req-1", CLASS_A, 1))],
                 [one("slice-1"), one("slice-2", driver=DRIVER_B)], NODE1, (),
                 [allocation(local_selector(NODE1), result("req-0/subreq-1", DRIVER_B, "pool-1", "device-1"),
                             result("req-1", DRIVER_A, "pool-1", "device-1"))],
                 id="prioritized-list-backtracks-when-a-later-request-needs-the-device"),
]


@pytest.mark.parametrize(("claims", "slices", "node", "allocated", "expected"), CASES)
def test_allocate(claims, slices, node, allocated, expected):
    assert allocate(claims, slices, node=node, allocated=allocated) == expected


@pytest.mark.parametrize(("claims", "slices", "classes", "message"), [
    pytest.param([claim("claim-0", request("req-0"))], [one("slice-1")], [],
                 'claim claim-0, request req-0: could not retrieve device class class-a: '
                 'deviceclass.resource.k8s.io "class-a" not found', id="no-classes"),
    pytest.param([claim("claim-0", request("req-0", ""))], [one("slice-1")], CLASSES,
                 "claim claim-0, request req-0: missing device class name (unsupported request type?)",
                 id="empty-class"),
    pytest.param([claim("claim-0", request("req-0", mode="All"))], [one("slice-1", count=2)], CLASSES,
                 "claim claim-0, request req-0: asks for all devices, but resource pool driver-a/pool-1 is currently "
                 "being updated", id="all-devices-of-the-incomplete-pool"),
    # upstream's errors name a sub-request alone (its request.name()), not "req-0/subreq-0".
    pytest.param([claim("claim-0", first_available("req-0", sub_request("subreq-0", CLASS_A, mode="All")))],
                 [one("slice-1", count=2)], CLASSES,
                 "claim claim-0, request subreq-0: asks for all devices, but resource pool driver-a/pool-1 is "
                 "currently being updated", id="a-sub-request-is-named-alone"),
    pytest.param([claim("claim-0", request("req-0", CLASS_A, 33))], [one("slice-1")], CLASSES,
                 "claim claim-0: number of requested devices 33 exceeds the claim limit of 32", id="too-many-devices"),
    pytest.param([claim("claim-0", request("req-0", CLASS_A, 1, 'device.attributes["driver-a"].healthy'))],
                 [one("slice-1")], CLASSES, "claim claim-0: selector #0: CEL runtime error: no such key: healthy",
                 id="claim-CEL-runtime-error"),
    pytest.param([claim("claim-0", request("req-0"))], [one("slice-1")],
                 [device_class(CLASS_A, selectors=['device.attributes["driver-a"].healthy'])],
                 "class class-a: selector #0: CEL runtime error: no such key: healthy", id="class-CEL-runtime-error"),
    pytest.param([claim("claim-0", request("req-0", CLASS_A, 1, "1 + 1"))], [one("slice-1")], CLASSES,
                 "claim claim-0: selector #0: CEL compile error: must evaluate to bool, got int",
                 id="claim-CEL-not-a-bool"),
    pytest.param([claim("claim-0", request("req-0"), request("req-1", mode="All"),
                        constraints=[{"matchAttribute": NUMA}])],
                 [resource_slice("slice-1", "pool-1", DRIVER_A, device("device-1", attributes={"numa": 1}),
                                 device("device-2", attributes={"numa": 2}), node=NODE1)], CLASSES,
                 "claim claim-0, request req-1: cannot add device driver-a/pool-1/device-1 because a claim constraint "
                 "would not be satisfied", id="with-constraint-not-matching-int-attribute-all-devices"),
])
def test_allocation_errors(claims, slices, classes, message):
    with pytest.raises(AllocationError) as caught:
        allocate(claims, slices, classes=classes)
    assert str(caught.value) == message


def test_duplicate_device_names_make_the_pool_invalid():
    slices = [one("slice-1", count=2), one("slice-1-2", count=2)]
    with pytest.raises(AllocationError, match="invalid resource pools were encountered"):
        allocate([claim("claim-0", request("req-0"))], slices)


def test_config_from_class_and_claim_goes_with_the_allocation():
    opaque = {"opaque": {"driver": DRIVER_A, "parameters": {"mode": "shared"}}}
    claim_config = {"requests": ["req-0"], "opaque": {"driver": DRIVER_A, "parameters": {"sharing": 2}}}
    got = allocate([claim("claim-0", request("req-0"), config=[claim_config])], [one("slice-1")],
                   classes=[device_class(CLASS_A, DRIVER_A, config=[opaque])])
    assert got[0]["devices"]["config"] == [{"source": "FromClass", **opaque},
                                           {"source": "FromClaim", "opaque": claim_config["opaque"]}]


# --- CEL -------------------------------------------------------------------------------------

GPU = device_variable("gpu.example.com", {"name": "gpu-0", "attributes": {
    "model": {"string": "A100"}, "index": {"int": 0}, "driverVersion": {"version": "1.2.3"},
    "other.example.com/healthy": {"bool": True}}, "capacity": {"memory": {"value": "80Gi"}, "cores": {"value": "4"}}})


@pytest.mark.parametrize(("expression", "expected"), [
    ('device.driver == "gpu.example.com" && device.attributes["gpu.example.com"].model == "A100"', True),
    ('device.attributes["gpu.example.com"].model == "H100"', False),
    ('device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) >= 0', True),
    ('device.capacity["gpu.example.com"].memory.compareTo(quantity("80Gi")) == 0', True),
    ('device.capacity["gpu.example.com"].memory.isLessThan(quantity("100Gi"))', True),
    ('device.capacity["gpu.example.com"].cores.asInteger() == 4', True),
    ('device.attributes["gpu.example.com"].driverVersion.isGreaterThan(semver("1.2.0"))', True),
    ('device.attributes["gpu.example.com"].driverVersion.compareTo(semver("1.10.0")) < 0', True),
    ('device.attributes["other.example.com"].healthy', True),
    ('"model" in device.attributes["gpu.example.com"]', True),
    ('device.attributes["gpu.example.com"].model.lowerAscii().startsWith("a1")', True),
    ('has(device.attributes["nvidia.com"].model)', False),
])
def test_cel_selectors_as_dra_drivers_write_them(expression, expected):
    assert compile_expression(expression).matches(GPU) is expected


@pytest.mark.parametrize(("expression", "message"), [
    ('device.attributes["gpu.example.com"].healthy', "no such key: healthy"),
    ('device.attributes["nvidia.com"].model == "x"', "no such key: model"),
    ('device.capacity["gpu.example.com"].memory', "must evaluate to bool, got int"),
])
def test_cel_runtime_errors_are_worded_as_upstream(expression, message):
    with pytest.raises(CELError, match=f"^{message}$"):
        compile_expression(expression).matches(GPU)


def test_cel_compile_errors_are_reported_not_raised_as_something_else():
    with pytest.raises(CELError, match="undeclared reference to 'nosuch'"):
        compile_expression("nosuch == 1")
    assert compile_expression("true") is compile_expression("true")  # compiled once
