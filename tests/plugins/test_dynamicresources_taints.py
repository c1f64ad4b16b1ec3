"""Device taints and tolerations (DRADeviceTaints) and DeviceTaintRules (DRADeviceTaintRules),
v1.37.2: the allocator's "tainted-*" cases transcribed (behaviour, not code) from upstream's
structured allocator table (allocator_testing.go), the toleration rule of
resourceclaim.ToleratesTaint (devicetoleration_test.go and its code's branches), how a rule's
selector reaches devices (resourceslice/tracker), and the manager rebuilding its inventory when
a rule changes."""

from __future__ import annotations

import pytest

from kopfsched.cache.objects import ObjectStore
from kopfsched.plugins.dynamicresources.allocator import Allocator, tolerates
from kopfsched.plugins.dynamicresources.inventory import Inventory
from kopfsched.plugins.dynamicresources.manager import DraManager
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
    local_selector,
    request,
    resource_slice,
    result,
    sub_request,
    taint,
    taint_rule,
    toleration,
)

NODE1 = "node-1"
CLASSES = {c["metadata"]["name"]: c for c in (device_class(CLASS_A, DRIVER_A), device_class(CLASS_B, DRIVER_B))}
KEY, VALUE, VALUE2 = "taint-key", "taint-value", "taint-value-2"
NONE = taint(KEY, VALUE, "None")
NO_SCHEDULE = taint(KEY, VALUE, "NoSchedule")
NO_EXECUTE = taint(KEY, VALUE2, "NoExecute")
TOLERATE_NO_SCHEDULE = toleration(KEY, "Exists", effect="NoSchedule")
TOLERATE_NO_EXECUTE = toleration(KEY, "Equal", VALUE2, "NoExecute")


def two_devices(first: list[dict], second: list[dict] | None = None, *, pool: str = "pool-1",
                driver: str = DRIVER_A) -> dict:
    devices = [device("device-1", taints=first)]
    if second is not None:
        devices.append(device("device-2", taints=second))
    return resource_slice(f"slice-{pool}", pool, driver, *devices, node=NODE1)


def allocate(claims, slices, *, rules=(), taints=True, allocated=()):
    allocator = Allocator(claims=list(claims), classes=CLASSES.get, inventory=Inventory(list(slices), list(rules)),
                          in_use=set(allocated), device_taints=taints)
    placement = allocator.allocate(NODE1, {})
    return None if placement is None else allocator.results(placement)


def on_node1(*results: dict) -> list[dict]:
    return [allocation(local_selector(NODE1), *results)]


ADMIN_IN_USE = ((DRIVER_A, "pool-1", "device-1"), (DRIVER_A, "pool-1", "device-2"))

CASES = [
    pytest.param([claim("claim-0", request("req-0"))], [two_devices([NO_SCHEDULE], [NO_EXECUTE])], True, (), None,
                 id="tainted-two-devices"),
    pytest.param([claim("claim-0", request("req-0"))], [two_devices([NO_SCHEDULE, NO_EXECUTE])], True, (), None,
                 id="tainted-one-device-two-taints"),
    pytest.param([claim("claim-0", request("req-0", tolerations=[TOLERATE_NO_EXECUTE]))],
                 [two_devices([NO_SCHEDULE], [NO_EXECUTE])], True, (),
                 on_node1(result("req-0", DRIVER_A, "pool-1", "device-2", tolerations=[TOLERATE_NO_EXECUTE])),
                 id="tainted-two-devices-tolerated"),
    pytest.param([claim("claim-0", first_available("req-0", sub_request("subReq-0", CLASS_A),
                                                   sub_request("subReq-1", CLASS_A,
                                                               tolerations=[TOLERATE_NO_EXECUTE])))],
                 [two_devices([NO_SCHEDULE], [NO_EXECUTE])], True, (),
                 on_node1(result("req-0/subReq-1", DRIVER_A, "pool-1", "device-2",
                                 tolerations=[TOLERATE_NO_EXECUTE])),
                 id="tainted-two-devices-prioritized-list-tolerated"),
    pytest.param([claim("claim-0", request("req-0"))], [two_devices([NONE])], True, (),
                 on_node1(result("req-0", DRIVER_A, "pool-1", "device-1")), id="tainted-no-effect"),
    pytest.param([claim("claim-0", request("req-0", tolerations=[TOLERATE_NO_SCHEDULE, TOLERATE_NO_EXECUTE]))],
                 [two_devices([NO_SCHEDULE, NO_EXECUTE])], True, (),
                 on_node1(result("req-0", DRIVER_A, "pool-1", "device-1",
                                 tolerations=[TOLERATE_NO_SCHEDULE, TOLERATE_NO_EXECUTE])),
                 id="tainted-one-device-two-taints-both-tolerated"),
    pytest.param([claim("claim-0", request("req-0"))], [two_devices([NO_SCHEDULE, NO_EXECUTE])], False, (),
                 on_node1(result("req-0", DRIVER_A, "pool-1", "device-1")), id="tainted-disabled"),
    pytest.param([claim("claim-0", first_available("req-0", sub_request("subReq-0", CLASS_B),
                                                   sub_request("subReq-1", CLASS_A)))],
                 [two_devices([NO_SCHEDULE])], True, (), None, id="tainted-prioritized-list"),
    pytest.param([claim("claim-0", first_available("req-0", sub_request("subReq-0", CLASS_B),
                                                   sub_request("subReq-1", CLASS_A)))],
                 [two_devices([NO_SCHEDULE])], False, (),
                 on_node1(result("req-0/subReq-1", DRIVER_A, "pool-1", "device-1")),
                 id="tainted-prioritized-list-disabled"),
    pytest.param([claim("claim-0", request("req-0", admin=True))], [two_devices([NO_SCHEDULE])], True, ADMIN_IN_USE,
                 None, id="tainted-admin-access"),
    pytest.param([claim("claim-0", request("req-0", admin=True))], [two_devices([NO_SCHEDULE])], False, ADMIN_IN_USE,
                 on_node1(result("req-0", DRIVER_A, "pool-1", "device-1", admin=True)),
                 id="tainted-admin-access-disabled"),
    pytest.param([claim("claim-0", request("req-0", mode="All"))], [two_devices([NO_SCHEDULE])], True, (), None,
                 id="tainted-all-devices-single"),
    pytest.param([claim("claim-0", request("req-0", mode="All"))], [two_devices([NO_SCHEDULE])], False, (),
                 on_node1(result("req-0", DRIVER_A, "pool-1", "device-1")), id="tainted-all-devices-single-disabled"),
    # Beyond upstream's table: what its code does in these cases too.
    pytest.param([claim("claim-0", request("req-0"))], [two_devices([NO_SCHEDULE], [])], True, (),
                 on_node1(result("req-0", DRIVER_A, "pool-1", "device-2")), id="the-untainted-device-is-taken"),
    pytest.param([claim("claim-0", request("req-0"))], [two_devices([taint(KEY, VALUE, "PreferNoSchedule")])], True,
                 (), on_node1(result("req-0", DRIVER_A, "pool-1", "device-1")), id="an-unknown-effect-is-ignored"),
    pytest.param([claim("claim-0", request("req-0", mode="All"))], [two_devices([], [NO_SCHEDULE])], True, (), None,
                 id="all-devices-fails-when-any-is-tainted"),
    pytest.param([claim("claim-0", request("req-0", mode="All", tolerations=[toleration(operator="Exists")]))],
                 [two_devices([NO_SCHEDULE], [NO_EXECUTE])], True, (),
                 on_node1(result("req-0", DRIVER_A, "pool-1", "device-1", tolerations=[toleration(operator="Exists")]),
                          result("req-0", DRIVER_A, "pool-1", "device-2", tolerations=[toleration(operator="Exists")])),
                 id="all-devices-tolerating-everything"),
    pytest.param([claim("claim-0", request("req-0", CLASS_A, 2))], [two_devices([], [NO_SCHEDULE])], True, (), None,
                 id="two-devices-one-tainted"),
    pytest.param([claim("claim-0", request("req-0", CLASS_A, 1, tolerations=[TOLERATE_NO_SCHEDULE])),
                  claim("claim-1", request("req-1"))],
                 [two_devices([NO_SCHEDULE], [])], True, (),
                 [*on_node1(result("req-0", DRIVER_A, "pool-1", "device-1", tolerations=[TOLERATE_NO_SCHEDULE])),
                  *on_node1(result("req-1", DRIVER_A, "pool-1", "device-2"))],
                 id="the-tolerating-claim-takes-the-tainted-device"),
    pytest.param([claim("claim-0", request("req-0"), constraints=[{"matchAttribute": "driver-a/numa"}]),
                  ], [resource_slice("slice-1", "pool-1", DRIVER_A,
                                     device("device-1", attributes={"numa": 1}, taints=[NO_SCHEDULE]),
                                     device("device-2", attributes={"numa": 2}), node=NODE1)], True, (),
                 on_node1(result("req-0", DRIVER_A, "pool-1", "device-2")), id="taint-checked-with-constraints"),
]


@pytest.mark.parametrize(("claims", "slices", "taints", "allocated", "expected"), CASES)
def test_allocate_with_taints(claims, slices, taints, allocated, expected):
    assert allocate(claims, slices, taints=taints, allocated=allocated) == expected


@pytest.mark.parametrize(("tol", "tnt", "expected"), [
    # devicetoleration_test.go
    pytest.param(toleration("foo", "Exists", effect="NoSchedule"), taint("foo"), True, id="exists-taint-no-value"),
    pytest.param(toleration("foo", "Exists", effect="NoSchedule"), taint("foo", "bar"), True,
                 id="exists-taint-with-value"),
    pytest.param(toleration("", "Exists", effect="NoSchedule"), taint("foo", "bar"), True, id="exists-empty-key"),
    pytest.param(toleration("foo", "Equal", "bar", "NoSchedule"), taint("foo", "bar"), True, id="equal-same-value"),
    pytest.param(toleration("foo", "Equal", "value1", "NoSchedule"), taint("foo", "value2"), False,
                 id="equal-other-value"),
    pytest.param(toleration("foo", "Equal", "bar", "NoSchedule"), taint("foo", "bar", "NoExecute"), False,
                 id="equal-other-effect"),
    # The other branches of ToleratesTaint.
    pytest.param(toleration("foo", "", "bar"), taint("foo", "bar", "NoExecute"), True,
                 id="empty-operator-is-equal-empty-effect-matches-any"),
    pytest.param(toleration("foo", ""), taint("foo", "bar"), False, id="empty-operator-compares-values"),
    pytest.param(toleration("foo", "Equal"), taint("foo"), True, id="equal-both-values-empty"),
    pytest.param(toleration("other", "Exists"), taint("foo"), False, id="other-key"),
    pytest.param(toleration(operator="Exists"), taint("foo", "bar", "NoExecute"), True, id="exists-matches-all"),
    pytest.param(toleration("foo", "Gt", "1"), taint("foo", "2"), False, id="unknown-operator"),
    pytest.param({**toleration("foo", "Exists", effect="NoExecute"), "tolerationSeconds": 0},
                 taint("foo", effect="NoExecute"), True, id="toleration-seconds-do-not-matter-to-the-scheduler"),
])
def test_tolerates_as_upstreams_tolerates_taint(tol, tnt, expected):
    assert tolerates(tol, tnt) is expected


POOLS = [two_devices([], [], pool="pool-1"), two_devices([], [], pool="pool-2"),
         two_devices([], [], pool="pool-1", driver=DRIVER_B)]


def tainted(rules) -> set[str]:
    inventory = Inventory(POOLS, rules)
    return {"/".join(d.id) for d in inventory.devices.values() if d.taints}


@pytest.mark.parametrize(("rule", "expected"), [
    pytest.param(taint_rule("r", NO_SCHEDULE, pool="pool-1"),
                 {"driver-a/pool-1/device-1", "driver-a/pool-1/device-2", "driver-b/pool-1/device-1",
                  "driver-b/pool-1/device-2"}, id="a-pool-of-any-driver"),
    pytest.param(taint_rule("r", NO_SCHEDULE, driver=DRIVER_A, pool="pool-1"),
                 {"driver-a/pool-1/device-1", "driver-a/pool-1/device-2"}, id="a-drivers-pool"),
    pytest.param(taint_rule("r", NO_SCHEDULE, driver=DRIVER_A, pool="pool-2", dev="device-2"),
                 {"driver-a/pool-2/device-2"}, id="one-device"),
    pytest.param(taint_rule("r", NO_SCHEDULE, dev="device-1"),
                 {"driver-a/pool-1/device-1", "driver-a/pool-2/device-1", "driver-b/pool-1/device-1"},
                 id="a-device-name-in-every-pool"),
    pytest.param(taint_rule("r", NO_SCHEDULE), {f"{d}/{p}/device-{i}" for d, p in
                                                (("driver-a", "pool-1"), ("driver-a", "pool-2"), ("driver-b", "pool-1"))
                                                for i in (1, 2)}, id="the-empty-selector-selects-all"),
    pytest.param(taint_rule("r", NO_SCHEDULE, selector=False), set(), id="no-selector-selects-none"),
    pytest.param(taint_rule("r", NO_SCHEDULE, driver="driver-c"), set(), id="other-driver"),
])
def test_a_rules_selector_reaches_devices_as_upstreams_tracker(rule, expected):
    assert tainted([rule]) == expected


def test_a_rule_tainting_a_pool_keeps_a_claim_off_its_devices_unless_tolerated():
    rule = taint_rule("maintenance", NO_EXECUTE, driver=DRIVER_A, pool="pool-1")
    slices = [two_devices([], [], pool="pool-1"), two_devices([], pool="pool-2")]
    assert allocate([claim("claim-0", request("req-0", CLASS_A, 2))], slices, rules=[rule]) is None
    assert allocate([claim("claim-0", request("req-0"))], slices, rules=[rule]) == on_node1(
        result("req-0", DRIVER_A, "pool-2", "device-1"))
    tolerating = [claim("claim-0", request("req-0", CLASS_A, 2, tolerations=[TOLERATE_NO_EXECUTE]))]
    assert allocate(tolerating, slices, rules=[rule]) == on_node1(
        result("req-0", DRIVER_A, "pool-1", "device-1", tolerations=[TOLERATE_NO_EXECUTE]),
        result("req-0", DRIVER_A, "pool-1", "device-2", tolerations=[TOLERATE_NO_EXECUTE]))
    # A rule's taint adds to the device's own: both must be tolerated.
    own = [two_devices([NO_SCHEDULE], pool="pool-1")]
    assert allocate(tolerating, own, rules=[rule]) is None


def test_the_manager_rebuilds_its_inventory_when_a_rule_changes_and_ignores_rules_when_switched_off():
    store = ObjectStore()
    store.upsert("ResourceSlice", two_devices([], pool="pool-1"))
    manager, without = DraManager(store), DraManager(store, taint_rules=False)
    one_claim = [claim("claim-0", request("req-0"))]

    def fits(m: DraManager) -> bool:
        allocator = Allocator(claims=one_claim, classes=CLASSES.get, inventory=m.inventory(), in_use=m.sync(),
                              free_counts=m.free_counts)
        assert allocator.quick() is not None  # the free-device index answers: it must see taints too
        return allocator.allocate(NODE1, {}) is not None

    assert fits(manager) and fits(without)
    rule = taint_rule("r", NO_SCHEDULE, pool="pool-1")
    store.upsert("DeviceTaintRule", rule)
    assert not fits(manager)
    assert fits(without)
    store.upsert("DeviceTaintRule", taint_rule("r", NONE, pool="pool-1"))
    assert fits(manager)
    store.upsert("DeviceTaintRule", rule)
    assert not fits(manager)
    store.delete("DeviceTaintRule", rule)
    assert fits(manager)
