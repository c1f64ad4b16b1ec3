"""Device binding conditions (DRADeviceBindingConditions, beta and on in v1.37, with
DRAResourceClaimDeviceStatus): devices that a controller must attach before use are allocated
(their pools after the others), PreBind stamps the allocation's time and waits up to
bindingTimeout for the devices' binding conditions in the claim's status.devices, and Filter
counts an allocated claim whose binding failed or timed out as unavailable, so that PostFilter
deallocates it. Cases and words from upstream's dynamicresources.go and its tests."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from kopfsched.cache.objects import ObjectStore
from kopfsched.framework.cycle_state import CycleState
from kopfsched.framework.handle import Handle
from kopfsched.framework.interface import NodeToStatus
from kopfsched.framework.registry import ArgsError
from kopfsched.framework.status import Code, Status
from kopfsched.framework.types import PodInfo
from kopfsched.plugins.dynamicresources import DynamicResources
from kopfsched.plugins.dynamicresources.plugin import DynamicResourcesArgs
from kopfsched.simulate.client import InMemoryClusterClient
from kopfsched.testing import FakeSnapshot, make_node, make_pod, node_info
from tests.plugins.dra import claim, device, device_class, request, resource_slice

NS, POD_NAME, POD_UID = "default", "my-pod", "1234"
CLASS, DRIVER, WORKER = "my-resource-class", "some-driver", "worker"
ATTACHED, FAILED = "dra.example.com/attached", "dra.example.com/failed"
NOW = 1767225600.0  # 2026-01-01T00:00:00Z


def bound_device(name: str, *, binds_to_node: bool = False) -> dict:
    return device(name, bindingConditions=[ATTACHED], bindingFailureConditions=[FAILED],
                  **({"bindsToNode": True} if binds_to_node else {}))


def pod() -> dict:
    return make_pod(POD_NAME, NS, uid=POD_UID, resourceClaims=[{"name": "r", "resourceClaimName": "c"}])


def allocated(stamp: str, conditions: list[tuple[str, str]] | None) -> dict:
    """Claim `c`, allocated to the worker's bound device at `stamp`; its status.devices entry
    holds `conditions` (type, status), or there is none (None)."""
    out = claim("c", request("req-1", CLASS), namespace=NS, allocation={
        "devices": {"results": [{"request": "req-1", "driver": DRIVER, "pool": WORKER, "device": "gpu-0",
                                 "bindingConditions": [ATTACHED], "bindingFailureConditions": [FAILED]}]},
        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": [WORKER]}]}]},
        "allocationTimestamp": stamp})
    if conditions is not None:
        out["status"]["devices"] = [{"driver": DRIVER, "pool": WORKER, "device": "gpu-0", "conditions": [
            {"type": kind, "status": status, "reason": "Fabric", "message": 'port "7" is down',
             "lastTransitionTime": stamp} for kind, status in conditions]}]
    return out


class Harness:
    def __init__(self, objects: list[dict], *, binding_timeout: float = 600.0) -> None:
        self.store = ObjectStore()
        self.client = InMemoryClusterClient()
        self.client.on_object_change = self.store.upsert
        for obj in [device_class(CLASS, DRIVER), *objects]:
            self.store.upsert(obj["kind"], obj)
            self.client.add_object(obj)
        self.now = 0.0
        self.slept: list[float] = []
        self.on_sleep: list[Any] = []
        """Callables run at each sleep, in turn: the cluster's answers while PreBind waits."""
        self.spawned: list[Any] = []
        self.nodes = [node_info(make_node(WORKER))]
        self.handle = Handle(snapshot=FakeSnapshot(self.nodes), client=self.client, objects=self.store,
                             spawn=lambda coro, name: self.spawned.append(coro), clock=lambda: self.now,
                             sleep=self.sleep)
        self.plugin = DynamicResources(DynamicResourcesArgs(binding_timeout=binding_timeout), self.handle)
        self.plugin.wall_clock = lambda: NOW + self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds
        if self.on_sleep:
            self.on_sleep.pop(0)()

    def cycle(self, pod_obj: dict) -> dict[str, Any]:
        info, state, out = PodInfo(pod_obj), CycleState(), {}
        self.client.add_pod(pod_obj)
        out["prefilter"] = self.plugin.pre_filter(state, info, self.nodes)
        out["filter"] = {n.name: self.plugin.filter(state, info, n) for n in self.nodes}
        out["state"] = state
        if out["filter"][WORKER] is not None:
            out["postfilter"] = self.plugin.post_filter(state, info, NodeToStatus(out["filter"]))[1]
            return out
        out["reserve"] = self.plugin.reserve(state, info, WORKER)
        out["prebind"] = asyncio.run(self.plugin.pre_bind(state, info, WORKER))
        for coro in self.spawned:  # the Event PreBind posted
            asyncio.run(coro)
        self.spawned.clear()
        return out

    def claim(self) -> dict:
        return self.store.get("ResourceClaim", "c", NS)

    def answer(self, conditions: list[tuple[str, str]]) -> None:
        """A controller sets the device's conditions in the claim's status."""
        current = copy.deepcopy(self.claim())
        current["status"]["devices"] = [{"driver": DRIVER, "pool": WORKER, "device": "gpu-0", "conditions": [
            {"type": kind, "status": status, "reason": "Fabric", "message": "done"} for kind, status in conditions]}]
        self.store.upsert("ResourceClaim", current)


def pending() -> dict:
    return claim("c", request("req-1", CLASS), namespace=NS)


def test_a_device_with_binding_conditions_is_allocated_and_prebind_waits_for_them():
    harness = Harness([pending(), resource_slice("s", WORKER, DRIVER, bound_device("gpu-0"), node=WORKER)])
    harness.on_sleep = [lambda: None, lambda: harness.answer([(ATTACHED, "True")])]
    out = harness.cycle(pod())
    assert out["prebind"] is None
    assert harness.slept == [5.0, 5.0]  # looked at once, twice more, then the condition was true
    allocation = harness.claim()["status"]["allocation"]
    assert allocation["devices"]["results"] == [{
        "request": "req-1", "driver": DRIVER, "pool": WORKER, "device": "gpu-0",
        "bindingConditions": [ATTACHED], "bindingFailureConditions": [FAILED]}]
    assert allocation["allocationTimestamp"] == "2026-01-01T00:00:00Z"
    [event] = harness.client.events
    assert (event.type, event.reason, event.action, event.message) == (
        "Normal", "BindingConditionsPending", "Scheduling", "waiting for binding conditions for device on node worker")


def test_a_true_binding_failure_condition_fails_prebind():
    harness = Harness([pending(), resource_slice("s", WORKER, DRIVER, bound_device("gpu-0"), node=WORKER)])
    harness.on_sleep = [lambda: harness.answer([(FAILED, "True")])]
    out = harness.cycle(pod())
    assert (out["prebind"].code, out["prebind"].reasons) == (
        Code.ERROR, ('device binding failed: claim=c, reason=Fabric, message="done"',))


def test_binding_conditions_never_met_time_out_at_the_binding_timeout():
    harness = Harness([pending(), resource_slice("s", WORKER, DRIVER, bound_device("gpu-0"), node=WORKER)],
                      binding_timeout=12)
    out = harness.cycle(pod())
    assert (out["prebind"].code, out["prebind"].reasons) == (
        Code.ERROR, ("device binding timeout: context deadline exceeded",))
    assert harness.slept == [5.0, 5.0, 2.0]


def test_plain_devices_come_before_devices_with_binding_conditions():
    harness = Harness([pending(), resource_slice("a-bound", "a-pool", DRIVER, bound_device("gpu-0"), node=WORKER),
                       resource_slice("b-plain", "b-pool", DRIVER, device("gpu-0"), node=WORKER)])
    assert harness.cycle(pod())["prebind"] is None
    assert harness.claim()["status"]["allocation"]["devices"]["results"] == [
        {"request": "req-1", "driver": DRIVER, "pool": "b-pool", "device": "gpu-0"}]
    assert harness.slept == []  # nothing to wait for


def test_a_device_that_binds_to_the_node_makes_the_allocation_the_nodes():
    everywhere = resource_slice("s", "shared", DRIVER, bound_device("gpu-0", binds_to_node=True), all_nodes=True)
    harness = Harness([pending(), everywhere])
    harness.on_sleep = [lambda: harness.answer([(ATTACHED, "True")])]
    harness.cycle(pod())
    assert harness.claim()["status"]["allocation"]["nodeSelector"] == {"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": [WORKER]}]}]}


@pytest.mark.parametrize(("stamp", "conditions", "available"), [
    pytest.param("2025-01-01T00:00:00Z", None, False, id="timed-out-no-status"),
    pytest.param("2025-01-01T00:00:00Z", [(ATTACHED, "False")], False, id="timed-out-not-attached"),
    pytest.param("2025-12-31T23:59:00Z", None, True, id="still-waiting"),
    pytest.param("2025-12-31T23:59:00Z", [(FAILED, "True")], False, id="failed"),
    pytest.param("2025-01-01T00:00:00Z", [(ATTACHED, "True")], True, id="attached"),
])
def test_filter_counts_a_claim_whose_binding_failed_or_timed_out_as_unavailable(stamp, conditions, available):
    harness = Harness([allocated(stamp, conditions), resource_slice("s", WORKER, DRIVER, bound_device("gpu-0"),
                                                                    node=WORKER)])
    harness.on_sleep = [lambda: harness.answer([(ATTACHED, "True")])]
    out = harness.cycle(pod())
    if available:
        assert out["filter"] == {WORKER: None}
        return
    assert out["filter"] == {WORKER: Status.unresolvable("resourceclaim not available on the node")}
    assert out["postfilter"] == Status.unschedulable("deallocation of ResourceClaim completed")
    asyncio.run(harness.spawned.pop())
    assert "allocation" not in harness.claim()["status"] and "devices" not in harness.claim()["status"]


@pytest.mark.parametrize(("raw", "expected"), [({}, 600.0), ({"bindingTimeout": "1s"}, 1.0),
                                               ({"bindingTimeout": "10m"}, 600.0), ({"bindingTimeout": "90s"}, 90.0)])
def test_binding_timeout_args(raw, expected):
    assert DynamicResourcesArgs.from_dict(raw).binding_timeout == expected


def test_binding_timeout_below_a_second_is_refused():
    with pytest.raises(ArgsError) as caught:
        DynamicResourcesArgs.from_dict({"bindingTimeout": "500ms"})
    assert caught.value.problems == [("bindingTimeout", "Invalid value: '500ms': must be at least 1 second")]


def test_both_timeouts_are_checked_and_reported_together():
    with pytest.raises(ArgsError) as caught:
        DynamicResourcesArgs.from_dict({"filterTimeout": "soon", "bindingTimeout": "0s"})
    assert caught.value.problems == [
        ("filterTimeout", "Invalid value: 'soon': must be a non-negative duration such as \"10s\""),
        ("bindingTimeout", "Invalid value: '0s': must be at least 1 second")]
    args = DynamicResourcesArgs.from_dict({"filterTimeout": "0s"})
    assert (args.filter_timeout, args.binding_timeout) == (0.0, 600.0)
