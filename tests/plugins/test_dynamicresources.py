"""DynamicResources at every extension point: cases transcribed (behaviour, not code) from
upstream's dynamicresources_test.go TestPlugin table, with its names and exact reasons, plus
the in-memory assume that keeps two pods off one device, and the queueing hints."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from kopfsched.cache.objects import ObjectStore
from kopfsched.framework.cycle_state import CycleState
from kopfsched.framework.events import QueueingHint
from kopfsched.framework.handle import Handle
from kopfsched.framework.interface import NodeToStatus
from kopfsched.framework.status import Code, Status
from kopfsched.framework.types import PodInfo
from kopfsched.plugins.dynamicresources import DynamicResources
from kopfsched.simulate.client import InMemoryClusterClient
from kopfsched.testing import FakeSnapshot, make_node, make_pod, node_info
from tests.plugins.dra import (
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
)

NS = "default"
POD_NAME, POD_UID = "my-pod", "1234"
CLAIM_NAME = "my-pod-my-resource"
CLASS = "my-resource-class"
DRIVER = "some-driver"
WORKER, WORKER2 = "worker", "worker-2"
UNRESOLVABLE = Code.UNSCHEDULABLE_AND_UNRESOLVABLE

DEVICE_CLASS = device_class(CLASS, DRIVER)
WORKER_SLICE = resource_slice("worker-some-driver", WORKER, DRIVER, device("instance-1"), node=WORKER)
WORKER2_SLICE = resource_slice("worker-2-some-driver", WORKER2, DRIVER, device("instance-1"), node=WORKER2)
ALLOCATION = allocation(local_selector(WORKER), result("req-1", DRIVER, WORKER, "instance-1"))
RESERVED = [{"resource": "pods", "name": POD_NAME, "uid": POD_UID}]
NOW = 1767225600.0
STAMPED = {**ALLOCATION, "allocationTimestamp": "2026-01-01T00:00:00Z"}
"""ALLOCATION as PreBind writes it (DRADeviceBindingConditions on): with the time of the write."""


def pending_claim(*requests: dict, **kwargs: Any) -> dict:
    return claim(CLAIM_NAME, *(requests or (request("req-1", CLASS),)), namespace=NS, owner_uid=POD_UID, **kwargs)


def allocated_claim(**kwargs: Any) -> dict:
    return pending_claim(allocation=copy.deepcopy(ALLOCATION), **kwargs)


def other_allocated_claim(*, admin: bool = False) -> dict:
    return claim("other", request("req-1", CLASS), namespace=NS,
                 allocation=allocation(local_selector(WORKER), result("req-1", DRIVER, WORKER, "instance-1", admin)))


def pod_with_claim_name() -> dict:
    return make_pod(POD_NAME, NS, uid=POD_UID, resourceClaims=[{"name": "my-resource",
                                                                "resourceClaimName": CLAIM_NAME}])


def pod_with_claim_template(*, status: bool = True) -> dict:
    pod = make_pod(POD_NAME, NS, uid=POD_UID, resourceClaims=[{"name": "my-resource",
                                                               "resourceClaimTemplateName": "my-template"}])
    if status:
        pod["status"] = {"resourceClaimStatuses": [{"name": "my-resource", "resourceClaimName": CLAIM_NAME}]}
    return pod


class Harness:
    """The plugin over a real object store fed back by the in-memory client, as in a
    scheduler: PreBind's writes come back as the store's new claim versions."""

    def __init__(self, objects: list[dict], nodes: tuple[str, ...] = (WORKER,)) -> None:
        self.store = ObjectStore()
        self.client = InMemoryClusterClient()
        self.client.on_object_change = self.store.upsert
        for obj in objects:
            self.store.upsert(obj["kind"], obj)
            self.client.add_object(obj)
        self.spawned: list[Any] = []
        self.nodes = [node_info(make_node(name)) for name in nodes]
        self.handle = Handle(snapshot=FakeSnapshot(self.nodes), client=self.client, objects=self.store,
                             spawn=lambda coro, name: self.spawned.append(coro))
        self.plugin = DynamicResources(None, self.handle)
        self.plugin.wall_clock = lambda: NOW

    def claim(self, name: str = CLAIM_NAME) -> dict:
        return self.store.get("ResourceClaim", name, NS)

    def run_spawned(self) -> None:
        for coro in self.spawned:
            asyncio.run(coro)
        self.spawned.clear()

    def cycle(self, pod: dict, *, bind: bool = True) -> dict[str, Any]:
        """One scheduling cycle of this plugin alone, as the runtime runs it; the outcome of
        each point that ran."""
        info, state, out = PodInfo(pod), CycleState(), {}
        out["preenqueue"] = self.plugin.pre_enqueue(info)
        if out["preenqueue"] is not None:
            return out
        out["prefilter"] = self.plugin.pre_filter(state, info, self.nodes)
        if out["prefilter"] is not None and out["prefilter"].is_skip:
            return out
        if out["prefilter"] is None:
            out["filter"] = {n.name: self.plugin.filter(state, info, n) for n in self.nodes}
        feasible = [name for name, status in out.get("filter", {}).items() if status is None]
        if not feasible:
            statuses = NodeToStatus({n: s for n, s in out.get("filter", {}).items() if s is not None})
            out["postfilter"] = self.plugin.post_filter(state, info, statuses)[1]
            return out
        node = feasible[0]
        out["reserve"] = self.plugin.reserve(state, info, node)
        out["state"], out["node"] = state, node
        if bind:
            out["prebind"] = asyncio.run(self.plugin.pre_bind(state, info, node))
            if out["prebind"] is not None:
                self.plugin.unreserve(state, info, node)
        return out


def unresolvable(reason: str) -> Status:
    return Status.unresolvable(reason)


@pytest.mark.parametrize(("pod", "objects", "point", "expected"), [
    pytest.param(make_pod("foo"), [], "prefilter", Status(Code.SKIP), id="empty"),
    pytest.param(pod_with_claim_template(status=False), [allocated_claim()], "preenqueue",
                 unresolvable('pod "default/my-pod": ResourceClaim not created yet'), id="missing-claim"),
    pytest.param(pod_with_claim_template(), [allocated_claim(deletionTimestamp="2026-01-01T00:00:00Z")], "preenqueue",
                 unresolvable('resourceclaim "my-pod-my-resource" is being deleted'), id="deleted-claim"),
    pytest.param(pod_with_claim_template(),
                 [claim(CLAIM_NAME, request("req-1", CLASS), namespace=NS, owner_uid=POD_UID + "123")], "preenqueue",
                 unresolvable("ResourceClaim default/my-pod-my-resource was not created for Pod default/my-pod "
                              "(Pod is not owner)"), id="wrong-claim"),
    # Not in upstream's table: the claim tracker's Get answers the assume cache's NotFoundError
    # (pkg/scheduler/util/assumecache), as v1.37.2's own framework prints it (tests/differential's oracle).
    pytest.param(pod_with_claim_name(), [], "preenqueue",
                 unresolvable('could not find ResourceClaim "default/my-pod-my-resource"'), id="claim-not-found"),
    pytest.param(pod_with_claim_name(), [pending_claim()], "prefilter",
                 unresolvable(f"request req-1: device class {CLASS} does not exist"), id="missing-class"),
    pytest.param(pod_with_claim_name(), [pending_claim(request("req-1", "does-not-exist"))], "prefilter",
                 unresolvable("request req-1: device class does-not-exist does not exist"),
                 id="claim-with-request-with-unknown-device-class"),
    pytest.param(pod_with_claim_name(),
                 [pending_claim({"name": "req-1", "firstAvailable": [{"name": "subreq-1",
                                                                     "deviceClassName": "does-not-exist"}]})],
                 "prefilter", unresolvable("request req-1/subreq-1: device class does-not-exist does not exist"),
                 id="claim-with-prioritized-list-unknown-device-class"),
    pytest.param(pod_with_claim_name(), [pending_claim(), DEVICE_CLASS], "filter",
                 {WORKER: unresolvable("cannot allocate all claims")}, id="no-resources"),
    pytest.param(pod_with_claim_name(), [pending_claim(), other_allocated_claim(), DEVICE_CLASS, WORKER_SLICE],
                 "filter", {WORKER: unresolvable("cannot allocate all claims")}, id="exhausted-resources"),
    pytest.param(pod_with_claim_name(),
                 [pending_claim(request("req-1", CLASS, 1, 'device.attributes["some-driver"].healthy')),
                  DEVICE_CLASS, WORKER_SLICE], "filter",
                 {WORKER: Status.as_error("claim default/my-pod-my-resource: selector #0: CEL runtime error: "
                                          "no such key: healthy")}, id="claim-parameters-CEL-runtime-error"),
    pytest.param(pod_with_claim_name(),
                 [pending_claim(), device_class(CLASS, selectors=['device.attributes["some-driver"].healthy']),
                  WORKER_SLICE], "filter",
                 {WORKER: Status.as_error("class my-resource-class: selector #0: CEL runtime error: "
                                          "no such key: healthy")}, id="class-parameters-CEL-runtime-error"),
    pytest.param(pod_with_claim_name(),
                 [pending_claim(allocation=allocation(local_selector("other-node"),
                                                      result("req-1", DRIVER, "other-node", "instance-1")))],
                 "filter", {WORKER: unresolvable("resourceclaim not available on the node")}, id="wrong-topology"),
    pytest.param(pod_with_claim_name(),
                 [pending_claim(allocation=copy.deepcopy(ALLOCATION),
                                reserved_for=[{"resource": "pods", "name": f"p{i}", "uid": f"u{i}"}
                                              for i in range(256)])],
                 "prefilter", unresolvable("resourceclaim in use"), id="claim-reserved-for-too-many-pods"),
])
def test_rejections(pod, objects, point, expected):
    harness = Harness(objects)
    assert outcome(harness.cycle(pod)[point]) == outcome(expected)
    for coro in harness.spawned:
        coro.close()


def outcome(answer: Any) -> Any:
    """Statuses by code and reasons (an Error status also carries its exception object)."""
    if isinstance(answer, dict):
        return {key: outcome(value) for key, value in answer.items()}
    return (answer.code, answer.reasons) if isinstance(answer, Status) else answer


# v1.37.2 dynamicresources_test.go: "missing-class" and "no-resources" expect a bare
# fwk.NewStatus(fwk.Unschedulable) from PostFilter (no reason, so no text in the FitError).
@pytest.mark.parametrize(("pod", "objects", "postfilter"), [
    pytest.param(make_pod("foo"), [], Status.unschedulable(), id="empty"),
    pytest.param(pod_with_claim_name(), [pending_claim()], Status.unschedulable(), id="missing-class"),
    pytest.param(pod_with_claim_name(), [pending_claim(), DEVICE_CLASS], Status.unschedulable(), id="no-resources"),
])
def test_post_filter_without_anything_to_deallocate(pod, objects, postfilter):
    harness = Harness(objects)
    info, state = PodInfo(pod), CycleState()
    harness.plugin.pre_filter(state, info, harness.nodes)
    for node in harness.nodes:
        harness.plugin.filter(state, info, node)
    assert harness.plugin.post_filter(state, info, NodeToStatus())[1] == postfilter
    assert harness.spawned == []


def test_wrong_topology_post_filter_deallocates_the_claim():
    wrong = pending_claim(allocation=allocation(local_selector("other-node"),
                                                result("req-1", DRIVER, "other-node", "instance-1")))
    harness = Harness([wrong])
    out = harness.cycle(pod_with_claim_name())
    assert out["postfilter"] == Status.unschedulable("deallocation of ResourceClaim completed")
    harness.run_spawned()
    assert "allocation" not in harness.claim()["status"]


@pytest.mark.parametrize("pod", [pod_with_claim_name(), pod_with_claim_template()],
                         ids=["claim-reference", "claim-template"])
def test_allocated_claim_is_reserved_for_the_pod_at_prebind(pod):
    harness = Harness([allocated_claim(), claim("another", request("req-1", CLASS), namespace=NS)])
    out = harness.cycle(pod)
    assert (out["prefilter"], out["filter"], out["reserve"], out["prebind"]) == (None, {WORKER: None}, None, None)
    # Allocated before: PreBind adds the pod to reservedFor and, the allocation having no time
    # yet, its allocationTimestamp (as upstream's bindClaim).
    assert harness.claim()["status"] == {"allocation": STAMPED, "reservedFor": RESERVED}
    assert harness.claim("another").get("status") is None


def test_with_resources_allocates_at_reserve_and_writes_at_prebind():
    harness = Harness([pending_claim(), DEVICE_CLASS, WORKER_SLICE])
    out = harness.cycle(pod_with_claim_name(), bind=False)
    assert out["reserve"] is None
    # Reserve assumed the allocation in memory: the API object is untouched so far.
    assert harness.plugin.manager.get_claim(NS, CLAIM_NAME)["status"]["allocation"] == ALLOCATION
    assert "status" not in harness.claim()
    status = asyncio.run(harness.plugin.pre_bind(out["state"], PodInfo(pod_with_claim_name()), WORKER))
    assert status is None
    written = harness.claim()
    assert written["metadata"]["finalizers"] == ["resource.kubernetes.io/delete-protection"]
    assert written["status"] == {"allocation": STAMPED, "reservedFor": RESERVED}


def test_with_resources_has_finalizer_writes_only_the_status():
    harness = Harness([pending_claim(finalizers=["resource.kubernetes.io/delete-protection"]), DEVICE_CLASS,
                       WORKER_SLICE])
    assert harness.cycle(pod_with_claim_name())["prebind"] is None
    patches = [c for c in harness.client.objects if c[0] == "ResourceClaim"]
    assert patches == [("ResourceClaim", NS, CLAIM_NAME)]
    assert harness.claim()["status"]["reservedFor"] == RESERVED


def test_skip_bind_unreserve_forgets_the_assumed_allocation():
    harness = Harness([pending_claim(), DEVICE_CLASS, WORKER_SLICE])
    out = harness.cycle(pod_with_claim_name(), bind=False)
    harness.plugin.unreserve(out["state"], PodInfo(pod_with_claim_name()), WORKER)
    assert harness.plugin.manager.get_claim(NS, CLAIM_NAME).get("status") is None
    assert (DRIVER, WORKER, "instance-1") not in harness.plugin.manager.sync()
    assert harness.spawned == []


def test_bind_failure_unreserve_removes_the_pod_from_reserved_for():
    harness = Harness([allocated_claim()])
    out = harness.cycle(pod_with_claim_name())
    assert harness.claim()["status"]["reservedFor"] == RESERVED
    harness.plugin.unreserve(out["state"], PodInfo(pod_with_claim_name()), WORKER)
    harness.run_spawned()
    assert harness.claim()["status"]["reservedFor"] == []


def test_reserved_okay():
    harness = Harness([allocated_claim(reserved_for=RESERVED)])
    out = harness.cycle(pod_with_claim_name())
    assert (out["filter"], out["prebind"]) == ({WORKER: None}, None)
    assert harness.client.objects[("ResourceClaim", NS, CLAIM_NAME)]["status"]["reservedFor"] == RESERVED


def test_request_admin_access_allocates_a_device_in_use():
    harness = Harness([pending_claim(request("req-1", CLASS, admin=True)), other_allocated_claim(), DEVICE_CLASS,
                       WORKER_SLICE])
    assert harness.cycle(pod_with_claim_name())["prebind"] is None
    assert harness.claim()["status"]["allocation"]["devices"]["results"] == [
        result("req-1", DRIVER, WORKER, "instance-1", admin=True)]


def test_structured_ignore_allocated_admin_access():
    harness = Harness([pending_claim(), other_allocated_claim(admin=True), DEVICE_CLASS, WORKER_SLICE])
    assert harness.cycle(pod_with_claim_name())["prebind"] is None
    assert harness.claim()["status"]["allocation"] == STAMPED


def test_claim_with_prioritized_list():
    prioritized = pending_claim({"name": "req-1", "firstAvailable": [
        {"name": "subreq-1", "deviceClassName": CLASS, "allocationMode": "ExactCount", "count": 1}]})
    harness = Harness([prioritized, DEVICE_CLASS, WORKER_SLICE])
    assert harness.cycle(pod_with_claim_name())["prebind"] is None
    assert harness.claim()["status"]["allocation"]["devices"]["results"] == [
        result("req-1/subreq-1", DRIVER, WORKER, "instance-1")]


def test_claim_allocated_elsewhere_in_the_meantime_is_an_error_at_prebind():
    harness = Harness([pending_claim(), DEVICE_CLASS, WORKER_SLICE])
    out = harness.cycle(pod_with_claim_name(), bind=False)
    raced = allocated_claim()
    harness.store.upsert("ResourceClaim", raced)
    status = asyncio.run(harness.plugin.pre_bind(out["state"], PodInfo(pod_with_claim_name()), WORKER))
    assert outcome(status) == (Code.ERROR,
                               ("claim default/my-pod-my-resource got allocated elsewhere in the meantime",))


# --- the assume: two pods, one device ---------------------------------------------------------


def second_pod() -> dict:
    return make_pod("pod-2", NS, uid="uid-2", resourceClaims=[{"name": "my-resource", "resourceClaimName": "claim-2"}])


def test_an_assumed_allocation_keeps_the_device_from_the_next_pod():
    harness = Harness([pending_claim(), claim("claim-2", request("req-1", CLASS), namespace=NS), DEVICE_CLASS,
                       WORKER_SLICE, WORKER2_SLICE], nodes=(WORKER, WORKER2))
    first = harness.cycle(pod_with_claim_name(), bind=False)
    assert first["node"] == WORKER
    second = harness.cycle(second_pod(), bind=False)
    assert second["filter"] == {WORKER: unresolvable("cannot allocate all claims"), WORKER2: None}
    # Forgetting the allocations gives the devices back.
    harness.plugin.unreserve(second["state"], PodInfo(second_pod()), WORKER2)
    harness.plugin.unreserve(first["state"], PodInfo(pod_with_claim_name()), WORKER)
    third = harness.cycle(second_pod(), bind=False)
    assert third["filter"] == {WORKER: None, WORKER2: None}


def test_two_profiles_share_one_assume_cache():
    harness = Harness([pending_claim(), claim("claim-2", request("req-1", CLASS), namespace=NS), DEVICE_CLASS,
                       WORKER_SLICE])
    harness.cycle(pod_with_claim_name(), bind=False)
    other_profile = DynamicResources(None, harness.handle)
    info, state = PodInfo(second_pod()), CycleState()
    assert other_profile.pre_filter(state, info, harness.nodes) is None
    assert other_profile.filter(state, info, harness.nodes[0]) == unresolvable("cannot allocate all claims")


def test_a_claim_shared_by_two_pods_is_allocated_once_and_reserved_for_both():
    shared = claim("shared", request("req-1", CLASS), namespace=NS)
    pods = [make_pod(f"p{i}", NS, uid=f"u{i}", resourceClaims=[{"name": "gpu", "resourceClaimName": "shared"}])
            for i in (1, 2)]
    harness = Harness([shared, DEVICE_CLASS, WORKER_SLICE, WORKER2_SLICE], nodes=(WORKER2, WORKER))
    first = harness.cycle(pods[0])
    second = harness.cycle(pods[1])
    assert (first["node"], second["node"]) == (WORKER2, WORKER2)
    assert second["filter"] == {WORKER2: None, WORKER: unresolvable("resourceclaim not available on the node")}
    written = harness.claim("shared")
    assert [r["device"] for r in written["status"]["allocation"]["devices"]["results"]] == ["instance-1"]
    assert [r["name"] for r in written["status"]["reservedFor"]] == ["p1", "p2"]


# --- queueing hints -----------------------------------------------------------------------------


def test_hint_claim_created_for_a_waiting_pod():
    harness = Harness([pending_claim()])
    hint = harness.plugin.is_schedulable_after_claim_change
    assert hint(pod_with_claim_name(), None, pending_claim()) is QueueingHint.QUEUE
    other = claim("other", request("req-1", CLASS), namespace=NS)
    assert hint(pod_with_claim_name(), None, other) is QueueingHint.SKIP


def test_hint_claim_status_change():
    harness = Harness([allocated_claim()])
    hint = harness.plugin.is_schedulable_after_claim_change
    assert hint(pod_with_claim_name(), allocated_claim(), allocated_claim(reserved_for=RESERVED)) is QueueingHint.QUEUE
    same_status = allocated_claim(labels={"x": "y"})
    assert hint(pod_with_claim_name(), allocated_claim(), same_status) is QueueingHint.SKIP


def test_hint_freed_claim_brings_back_any_pod_with_claims():
    harness = Harness([pending_claim()])
    freed_before = other_allocated_claim()
    freed_after = claim("other", request("req-1", CLASS), namespace=NS)
    assert harness.plugin.is_schedulable_after_claim_change(pod_with_claim_name(), freed_before,
                                                            freed_after) is QueueingHint.QUEUE


def test_hint_new_slice_brings_back_pods_with_claims_only():
    hint = Harness([]).plugin.is_schedulable_after_slice_change
    assert hint(pod_with_claim_name(), None, WORKER_SLICE) is QueueingHint.QUEUE
    assert hint(make_pod("plain"), None, WORKER_SLICE) is QueueingHint.SKIP


def test_hint_generated_claim_named_in_the_pod_status():
    harness = Harness([allocated_claim()])
    hint = harness.plugin.is_schedulable_after_pod_change
    waiting = pod_with_claim_template(status=False)
    assert hint(waiting, waiting, pod_with_claim_template()) is QueueingHint.QUEUE
    assert hint(waiting, waiting, waiting) is QueueingHint.SKIP


# --- filter_nodes agrees with filter ------------------------------------------------------------


@pytest.mark.parametrize("requests", [
    pytest.param((request("req-1", CLASS),), id="one-request-free-device-index"),
    pytest.param((request("req-1", CLASS), request("req-2", CLASS)), id="two-requests-allocator-per-node"),
])
def test_filter_nodes_agrees_with_filter(requests):
    from kopfsched.testing import make_handle, run_filter

    slices = [resource_slice(f"{n}-slice", n, DRIVER, *(device(f"d{i}") for i in range(k)), node=n)
              for n, k in (("full", 1), ("roomy", 3), ("empty", 0))]
    taken = claim("taken", request("req-1", CLASS), namespace=NS,
                  allocation=allocation(local_selector("full"), result("req-1", DRIVER, "full", "d0")))
    nodes = [make_node(n) for n in ("full", "roomy", "empty", "no-slice")]
    handle = make_handle(nodes, objects=[pending_claim(*requests), taken, DEVICE_CLASS, *slices])
    statuses = run_filter(DynamicResources(None, handle), pod_with_claim_name(), nodes)  # checks filter_nodes too
    cannot = (UNRESOLVABLE, ("cannot allocate all claims",))
    assert {n: outcome(s) if s is None else (s.code, s.reasons) for n, s in statuses.items()} == {
        "full": cannot, "roomy": None, "empty": cannot, "no-slice": cannot}


# --- filterTimeout (DRASchedulerFilterTimeout) ----------------------------------------------------


@pytest.mark.parametrize(("raw", "expected"), [({}, 10.0), ({"filterTimeout": "500ms"}, 0.5),
                                               ({"filterTimeout": "0s"}, 0.0), ({"filterTimeout": "1m"}, 60.0)])
def test_filter_timeout_args(raw, expected):
    from kopfsched.plugins.dynamicresources import DynamicResourcesArgs

    assert DynamicResourcesArgs.from_dict(raw).filter_timeout == expected


@pytest.mark.parametrize("bad", ["-1s", "ten seconds", 10])
def test_filter_timeout_args_rejected(bad):
    from kopfsched.framework.registry import ArgsError
    from kopfsched.plugins.dynamicresources import DynamicResourcesArgs

    with pytest.raises(ArgsError):
        DynamicResourcesArgs.from_dict({"filterTimeout": bad})


# v1.37.2 dynamicresources_test.go "timeout": fwk.AsStatus(fmt.Errorf("node %s: timed out trying
# to allocate devices", ...)), an Error so the pod retries via backoff.
@pytest.mark.parametrize(("timeout", "expected"), [
    (3.0, (Code.ERROR, (f"node {WORKER}: timed out trying to allocate devices",))),
    (0.0, (UNRESOLVABLE, ("cannot allocate all claims",))),
])
def test_a_search_past_the_filter_timeout_rejects_the_node(timeout, expected):
    from kopfsched.plugins.dynamicresources import DynamicResourcesArgs

    # Two requests that must share a numa value no two devices have: the search tries every pair.
    numa = "some-driver/numa"
    devices = [device(f"d{i}", attributes={"numa": i}) for i in range(6)]
    objects = [pending_claim(request("req-1", CLASS), request("req-2", CLASS),
                             constraints=[{"matchAttribute": numa}]),
               DEVICE_CLASS, resource_slice("worker-slice", WORKER, DRIVER, *devices, node=WORKER)]
    harness = Harness(objects)
    ticks = iter(range(10_000))  # a clock that moves one second per reading
    harness.handle.clock = lambda: float(next(ticks))
    harness.plugin = DynamicResources(DynamicResourcesArgs(filter_timeout=timeout), harness.handle)
    assert outcome(harness.cycle(pod_with_claim_name())["filter"][WORKER]) == expected


# --- Score (v1.37.2 dynamicresources_test.go, the *-prioritized-list-scoring cases) -----------------


WORKER3 = "worker-3"
CLAIM_NAME2 = "my-pod-my-resource-2"


def _devices(node: str, count: int, **attributes: Any) -> dict:
    return resource_slice(f"{node}-{DRIVER}", node, DRIVER,
                          *(device(f"instance-{i}", attributes=attributes or None) for i in range(1, count + 1)),
                          node=node)


def _pod_with_two_claim_names() -> dict:
    return make_pod(POD_NAME, NS, uid=POD_UID, resourceClaims=[
        {"name": "my-resource", "resourceClaimName": CLAIM_NAME},
        {"name": "my-resource-2", "resourceClaimName": CLAIM_NAME2}])


def _subs(*counts: int) -> list[dict]:
    return [sub_request(f"subreq-{i}", CLASS, count) for i, count in enumerate(counts, start=1)]


@pytest.mark.parametrize(("pod", "claims", "slices", "nodes", "scores", "normalized"), [
    pytest.param(pod_with_claim_name(),
                 [pending_claim(first_available("req-1", sub_request("subreq-1", CLASS, 1,
                                                                     f'device.attributes["{DRIVER}"].healthy'),
                                                sub_request("subreq-2", CLASS, 1)))],
                 [resource_slice(f"{WORKER}-{DRIVER}", WORKER, DRIVER,
                                 device("instance-1", attributes={"healthy": True}), node=WORKER),
                  resource_slice(f"{WORKER2}-{DRIVER}", WORKER2, DRIVER,
                                 device("instance-1", attributes={"healthy": False}), node=WORKER2)],
                 (WORKER, WORKER2), {WORKER: 8, WORKER2: 7}, {WORKER: 100, WORKER2: 87},
                 id="single-claim-prioritized-list-scoring"),
    pytest.param(_pod_with_two_claim_names(),
                 [pending_claim(first_available("req-1", *_subs(1))),
                  claim(CLAIM_NAME2, first_available("req-1", *_subs(4, 3, 2, 1)), namespace=NS, owner_uid=POD_UID)],
                 [_devices(WORKER, 4), _devices(WORKER2, 2), _devices(WORKER3, 1)],
                 (WORKER, WORKER2, WORKER3), {WORKER: 15, WORKER2: 13}, {WORKER: 100, WORKER2: 86},
                 id="multiple-claims-prioritized-list-scoring"),
    pytest.param(pod_with_claim_name(),
                 [pending_claim(first_available("req-1", *_subs(2, 1)), first_available("req-2", *_subs(2, 1)))],
                 [_devices(WORKER, 4), _devices(WORKER2, 3), _devices(WORKER3, 2)],
                 (WORKER, WORKER2, WORKER3), {WORKER: 16, WORKER2: 15, WORKER3: 14},
                 {WORKER: 100, WORKER2: 93, WORKER3: 87}, id="multiple-requests-prioritized-list-scoring"),
])
def test_score_prefers_earlier_sub_requests(pod, claims, slices, nodes, scores, normalized):
    import numpy as np

    harness = Harness([*claims, DEVICE_CLASS, *slices], nodes=nodes)
    info, state = PodInfo(pod), CycleState()
    assert harness.plugin.pre_filter(state, info, harness.nodes) is None
    feasible = [n for n in harness.nodes if harness.plugin.filter(state, info, n) is None]
    raw = {n.name: harness.plugin.score(state, info, n) for n in feasible}
    assert raw == scores
    out = harness.plugin.normalize_score(state, info, np.array(list(raw.values()), dtype=np.int64))
    assert dict(zip(raw, out.tolist(), strict=True)) == normalized


def test_score_is_zero_without_claims_and_for_plain_requests():
    harness = Harness([pending_claim(), DEVICE_CLASS, WORKER_SLICE])
    state = CycleState()
    plain = PodInfo(make_pod("foo"))
    harness.plugin.pre_filter(state, plain, harness.nodes)
    assert harness.plugin.score(state, plain, harness.nodes[0]) == 0
    info, state = PodInfo(pod_with_claim_name()), CycleState()
    harness.plugin.pre_filter(state, info, harness.nodes)
    assert harness.plugin.filter(state, info, harness.nodes[0]) is None
    assert harness.plugin.score(state, info, harness.nodes[0]) == 0
