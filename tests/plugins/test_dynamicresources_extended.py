"""Extended resources backed by DRA (DRAExtendedResource, GA and locked on in v1.37): cases
transcribed (behaviour, not code) from upstream's dynamicresources_test.go TestPlugin table
("extended-resource-name-...") with their exact reasons and the objects the API receives;
createRequestsAndMappings' request naming; the DeviceClass resolver's tie rules; and
NodeResourcesFit leaving such a resource to DynamicResources on nodes that do not advertise it."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import numpy as np
import pytest

from kopfsched.cache.objects import ObjectStore
from kopfsched.framework.cycle_state import CycleState
from kopfsched.framework.events import QueueingHint
from kopfsched.framework.handle import Handle
from kopfsched.framework.interface import NodeToStatus
from kopfsched.framework.status import Code, Status
from kopfsched.framework.types import PodInfo
from kopfsched.plugins.dynamicresources import DynamicResources
from kopfsched.plugins.dynamicresources.extended import requests_and_mappings
from kopfsched.plugins.dynamicresources.manager import DeviceClassResolver
from kopfsched.plugins.noderesources.fit import Fit
from kopfsched.simulate.client import InMemoryClusterClient
from kopfsched.testing import FakeSnapshot, make_node, make_pod, node_info
from tests.plugins.dra import device, device_class, resource_slice
from tests.plugins.outcomes import filter_outcomes

NS = "default"
POD_NAME, POD_UID = "my-pod", "1234"
CLASS, DRIVER = "my-resource-class", "some-driver"
GPU = "example.com/gpu"
WORKER = "worker"
FINALIZER = "resource.kubernetes.io/delete-protection"


def extended_class(name: str = CLASS, resource: str | None = GPU, **meta: Any) -> dict:
    out = device_class(name, DRIVER)
    out["metadata"].update(meta)
    if resource is not None:
        out["spec"]["extendedResourceName"] = resource
    return out


def worker_slice(devices: int = 1, node: str = WORKER) -> dict:
    return resource_slice(f"{node}-{DRIVER}", node, DRIVER, *(device(f"instance-{i}") for i in range(devices)),
                          node=node)


def extended_pod(resource: str = GPU, count: str = "1", **kwargs: Any) -> dict:
    return make_pod(POD_NAME, NS, uid=POD_UID, requests={"cpu": "100m", resource: count}, **kwargs)


def leftover_claim() -> dict:
    """A claim PreBind created in an earlier cycle whose binding then failed."""
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {
        "name": f"{POD_NAME}-extended-resources-xyz12", "namespace": NS, "uid": "uid-leftover",
        "generateName": f"{POD_NAME}-extended-resources-", "finalizers": [FINALIZER],
        "annotations": {"resource.kubernetes.io/extended-resource-claim": "true"},
        "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": POD_NAME, "uid": POD_UID,
                             "controller": True}]},
        "spec": {"devices": {"requests": [{"name": "container-0-request-1", "exactly": {
            "deviceClassName": CLASS, "allocationMode": "ExactCount", "count": 1}}]}}}


class Harness:
    """The plugin over an object store the in-memory client feeds back, as in a scheduler."""

    def __init__(self, objects: list[dict], nodes: list[dict] | None = None) -> None:
        self.store = ObjectStore()
        self.client = InMemoryClusterClient()
        self.client.on_object_change = self.store.upsert
        self.client.on_object_delete = self.store.delete
        for obj in objects:
            self.store.upsert(obj["kind"], obj)
            self.client.add_object(obj)
        self.spawned: list[Any] = []
        self.nodes = [node_info(n) for n in (nodes or [make_node(WORKER)])]
        self.handle = Handle(snapshot=FakeSnapshot(self.nodes), client=self.client, objects=self.store,
                             spawn=lambda coro, name: self.spawned.append(coro))
        self.plugin = DynamicResources(None, self.handle)
        self.plugin.wall_clock = lambda: 1767225600.0  # 2026-01-01T00:00:00Z

    def claims(self) -> list[dict]:
        return self.store.list("ResourceClaim", NS)

    def run_spawned(self) -> None:
        for coro in self.spawned:
            asyncio.run(coro)
        self.spawned.clear()

    def cycle(self, pod: dict, *, bind: bool = True) -> dict[str, Any]:
        info, state, out = PodInfo(pod), CycleState(), {}
        self.client.add_pod(pod)
        out["prefilter"] = self.plugin.pre_filter(state, info, self.nodes)
        if out["prefilter"] is not None:
            return out
        out["filter"] = {n.name: self.plugin.filter(state, info, n) for n in self.nodes}
        feasible = [name for name, status in out["filter"].items() if status is None]
        out["state"] = state
        if not feasible:
            statuses = NodeToStatus({n: s for n, s in out["filter"].items() if s is not None})
            out["postfilter"] = self.plugin.post_filter(state, info, statuses)[1]
            return out
        node = out["node"] = feasible[0]
        out["reserve"] = self.plugin.reserve(state, info, node)
        if bind:
            out["prebind"] = asyncio.run(self.plugin.pre_bind(state, info, node))
        return out


ALLOCATION = {"devices": {"results": [{"request": "container-0-request-1", "driver": DRIVER, "pool": WORKER,
                                       "device": "instance-0"}]},
              "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                  {"key": "metadata.name", "operator": "In", "values": [WORKER]}]}]}}


def test_extended_resource_name_with_resources_creates_allocates_and_records_the_claim():
    harness = Harness([extended_class(), worker_slice()])
    out = harness.cycle(extended_pod())
    assert (out["prefilter"], out["filter"], out["reserve"], out["prebind"]) == (None, {WORKER: None}, None, None)
    [created] = harness.claims()
    # What the API received: the pod's claim, named by the server from generateName, owned
    # by the pod, with one request per container asking for the resource.
    assert created == {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"namespace": NS, "name": "my-pod-extended-resources-cbbbb",
                     "generateName": "my-pod-extended-resources-",
                     "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": POD_NAME, "uid": POD_UID,
                                          "controller": True}],
                     "annotations": {"resource.kubernetes.io/extended-resource-claim": "true"},
                     "uid": "uid-default-my-pod-extended-resources-cbbbb", "resourceVersion": "1",
                     "finalizers": [FINALIZER]},
        "spec": {"devices": {"requests": [{"name": "container-0-request-1", "exactly": {
            "deviceClassName": CLASS, "allocationMode": "ExactCount", "count": 1}}]}},
        "status": {"allocation": {**ALLOCATION, "allocationTimestamp": "2026-01-01T00:00:00Z"},
                   "reservedFor": [{"resource": "pods", "name": POD_NAME, "uid": POD_UID}]}}
    pod = harness.client.pods[f"{NS}/{POD_NAME}"]
    assert pod["status"]["extendedResourceClaimStatus"] == {
        "requestMappings": [{"containerName": "c0", "resourceName": GPU, "requestName": "container-0-request-1"}],
        "resourceClaimName": "my-pod-extended-resources-cbbbb"}
    # The device is the created claim's now: the next pod finds none.
    second = make_pod("second", NS, uid="5678", requests={GPU: "1"})
    assert harness.cycle(second)["filter"] == {WORKER: Status.unresolvable("cannot allocate all claims")}


def test_implicit_extended_resource_name_with_resources():
    harness = Harness([extended_class(resource=None), worker_slice(2)])
    out = harness.cycle(extended_pod(f"deviceclass.resource.kubernetes.io/{CLASS}", "2"))
    assert out["prebind"] is None
    [created] = harness.claims()
    assert created["spec"]["devices"]["requests"] == [{"name": "container-0-request-1", "exactly": {
        "deviceClassName": CLASS, "allocationMode": "ExactCount", "count": 2}}]
    assert [r["device"] for r in created["status"]["allocation"]["devices"]["results"]] == ["instance-0",
                                                                                          "instance-1"]


def test_extended_resource_name_with_node_resource_is_the_device_plugins():
    harness = Harness([extended_class(), worker_slice()], nodes=[make_node(WORKER, extended={GPU: 2})])
    out = harness.cycle(extended_pod())
    assert (out["prefilter"], out["filter"], out["reserve"], out["prebind"]) == (None, {WORKER: None}, None, None)
    assert harness.claims() == []
    assert "extendedResourceClaimStatus" not in harness.client.pods[f"{NS}/{POD_NAME}"].get("status", {})


def test_extended_resource_name_with_zero_allocatable_comes_from_devices():
    harness = Harness([extended_class(), worker_slice()], nodes=[make_node(WORKER, extended={GPU: 0})])
    assert harness.cycle(extended_pod())["prebind"] is None
    assert [c["metadata"]["name"] for c in harness.claims()] == ["my-pod-extended-resources-cbbbb"]


def test_non_dra_extended_resource_name_skips_the_plugin():
    harness = Harness([extended_class(resource=None), worker_slice()])
    assert harness.cycle(extended_pod())["prefilter"].is_skip


def test_extended_resource_name_no_resource():
    harness = Harness([extended_class()])
    out = harness.cycle(extended_pod())
    assert out["filter"] == {WORKER: Status.unresolvable("cannot allocate all claims")}
    assert out["postfilter"] == Status.unschedulable()


def test_a_dra_named_resource_neither_advertised_nor_backed_cannot_fit():
    """Only DynamicResources sees it when NodeResourcesFit ignores the resource."""
    harness = Harness([extended_class(), worker_slice()])
    pod = make_pod(POD_NAME, NS, uid=POD_UID, requests={GPU: "1", "other.com/fpga": "1"})
    assert harness.cycle(pod)["filter"] == {WORKER: Status.unresolvable("cannot fit resource")}


def test_extended_resource_name_with_resources_has_claim_deletes_it_in_postfilter():
    harness = Harness([extended_class(), worker_slice(), leftover_claim()])
    out = harness.cycle(extended_pod())
    assert out["filter"] == {WORKER: Status.unresolvable("cannot schedule extended resource claim")}
    assert out["postfilter"] == Status.unschedulable("deletion of ResourceClaim completed")
    harness.run_spawned()
    assert harness.claims() == []
    assert harness.client.deleted_objects == [("ResourceClaim", NS, f"{POD_NAME}-extended-resources-xyz12")]


def test_extended_resource_name_bind_failure_unreserve_deletes_the_created_claim():
    harness = Harness([extended_class(), worker_slice()])
    pod = extended_pod()
    out = harness.cycle(pod)
    assert len(harness.claims()) == 1
    harness.plugin.unreserve(out["state"], PodInfo(pod), WORKER)
    harness.run_spawned()
    assert harness.claims() == []
    assert (DRIVER, WORKER, "instance-0") not in harness.plugin.manager.sync()


def test_extended_resource_name_skip_bind_forgets_the_in_memory_claim():
    harness = Harness([extended_class(), worker_slice()])
    pod = extended_pod()
    out = harness.cycle(pod, bind=False)
    assert (DRIVER, WORKER, "instance-0") in harness.plugin.manager.sync()
    harness.plugin.unreserve(out["state"], PodInfo(pod), WORKER)
    assert harness.spawned == [] and harness.claims() == []
    assert (DRIVER, WORKER, "instance-0") not in harness.plugin.manager.sync()


def test_extended_resource_name_claim_creation_failure_is_an_error():
    harness = Harness([extended_class(), worker_slice()])

    async def refuse(**kwargs: Any) -> dict:
        from kopfsched.framework.client import ClusterError
        raise ClusterError("claim creation errors")

    harness.client.create_object = refuse  # type: ignore[method-assign]
    out = harness.cycle(extended_pod())
    assert (out["prebind"].code, out["prebind"].reasons) == (
        Code.ERROR, ("create claim for extended resources default/: claim creation errors",))
    assert harness.claims() == []


@pytest.mark.parametrize(("spec", "requests", "mappings"), [
    pytest.param({"containers": [{"name": "a", "resources": {"requests": {"cpu": "1", GPU: "2"}}},
                                 {"name": "b", "resources": {"requests": {GPU: "1"}}}]},
                 [("container-0-request-1", 2), ("container-1-request-0", 1)],
                 [("a", "container-0-request-1"), ("b", "container-1-request-0")], id="two-containers"),
    pytest.param({"initContainers": [{"name": "i", "resources": {"requests": {GPU: "1"}}}],
                  "containers": [{"name": "a", "resources": {"requests": {GPU: "2"}}}]},
                 [("container-1-request-0", 2)],
                 [("a", "container-1-request-0"), ("i", "container-1-request-0")], id="init-reuses-the-container"),
    pytest.param({"initContainers": [{"name": "i0", "resources": {"requests": {GPU: "3"}}},
                                     {"name": "i1", "resources": {"requests": {GPU: "4"}}}],
                  "containers": [{"name": "a", "resources": {"requests": {GPU: "1"}}}]},
                 [("container-1-request-0", 3), ("container-2-request-0", 1)],
                 # Each init container counts the later container's device, then asks for the rest; the
                 # larger of the two rests is the one request both map to.
                 [("a", "container-2-request-0"), ("i0", "container-2-request-0"), ("i0", "container-1-request-0"),
                  ("i1", "container-2-request-0"), ("i1", "container-1-request-0")],
                 id="init-containers-share-the-largest"),
    pytest.param({"initContainers": [{"name": "side", "restartPolicy": "Always",
                                      "resources": {"requests": {GPU: "1"}}}],
                  "containers": [{"name": "a", "resources": {"requests": {GPU: "1"}}}]},
                 [("container-0-request-0", 1), ("container-1-request-0", 1)],
                 [("side", "container-0-request-0"), ("a", "container-1-request-0")], id="a-sidecar-has-its-own"),
    pytest.param({"containers": [{"name": "a", "resources": {"requests": {GPU: "500m"}}}]}, [], [],
                 id="not-a-whole-number"),
])
def test_requests_and_mappings(spec, requests, mappings):
    got, got_mappings = requests_and_mappings({"spec": spec}, [GPU], lambda name: extended_class())
    assert [(r["name"], r["exactly"]["count"]) for r in got] == requests
    assert {r["exactly"]["deviceClassName"] for r in got} <= {CLASS}
    assert [(m["containerName"], m["requestName"]) for m in got_mappings] == mappings


def resolve(*classes: dict) -> dict[str, str | None]:
    store = ObjectStore()
    for obj in classes:
        store.upsert("DeviceClass", obj)
    resolver = DeviceClassResolver(store)
    names = [GPU, *(f"deviceclass.resource.kubernetes.io/{c['metadata']['name']}" for c in classes)]
    return {name: (resolver.get(name) or {}).get("metadata", {}).get("name") for name in names}


def test_the_newer_class_provides_a_resource_two_classes_name():
    older = extended_class("a-older", creationTimestamp="2025-01-01T00:00:00Z")
    newer = extended_class("b-newer", creationTimestamp="2025-02-01T00:00:00Z")
    # b-newer arrives after a-older (the listing is by name) and wins; a-older keeps its implicit name.
    assert resolve(older, newer) == {GPU: "b-newer", "deviceclass.resource.kubernetes.io/a-older": "a-older",
                                     "deviceclass.resource.kubernetes.io/b-newer": "b-newer"}


def test_on_equal_creation_times_the_smaller_name_wins_and_the_other_has_no_mapping_at_all():
    assert resolve(extended_class("a"), extended_class("b")) == {
        GPU: "a", "deviceclass.resource.kubernetes.io/a": "a", "deviceclass.resource.kubernetes.io/b": None}


def _fit(objects: list[dict], nodes: list[dict]) -> Fit:
    store = ObjectStore()
    for obj in objects:
        store.upsert(obj["kind"], obj)
    return Fit(None, Handle(snapshot=FakeSnapshot([node_info(n) for n in nodes]), client=None, objects=store))


NODES = [make_node("plain"), make_node("zero", extended={GPU: 0}), make_node("one", extended={GPU: 1}),
         make_node("two", extended={GPU: 2})]


@pytest.mark.parametrize(("objects", "expected"), [
    pytest.param([extended_class()], {"one": ("UNSCHEDULABLE_AND_UNRESOLVABLE", ("Insufficient example.com/gpu",))},
                 id="backed: only nodes advertising too little"),
    pytest.param([extended_class(resource=None)], {
        name: ("UNSCHEDULABLE_AND_UNRESOLVABLE", ("Insufficient example.com/gpu",)) for name in ("plain", "zero",
                                                                                                  "one")},
                 id="not-backed"),
])
def test_fit_leaves_a_backed_resource_to_dra_where_the_node_does_not_advertise_it(objects, expected):
    plugin = _fit(objects, NODES)
    infos = plugin.handle.snapshot.node_infos()
    assert filter_outcomes(plugin, extended_pod(count="2"), infos) == expected


def test_fit_scores_a_backed_resource_by_the_devices_of_the_class():
    """MostAllocated over the GPU alone: the node with 1 of 2 devices in use scores (1+1)/2 = 100,
    the node with 2 free of 4 devices 50 (2 would be in use of 4 after the pod... ) — read off
    upstream's formula: requested = allocated devices + the pod's request."""
    args = {"scoringStrategy": {"type": "MostAllocated", "resources": [{"name": GPU, "weight": 1}]}}
    from kopfsched.plugins.noderesources.fit import PLUGIN
    store = ObjectStore()
    held = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": "held", "namespace": NS},
            "status": {"allocation": {"devices": {"results": [
                {"request": "r", "driver": DRIVER, "pool": "a", "device": "instance-0"}]}}}}
    for obj in (extended_class(), worker_slice(2, "a"), worker_slice(4, "b"), held):
        store.upsert(obj["kind"], obj)
    nodes = [node_info(make_node("a")), node_info(make_node("b")), node_info(make_node("c", extended={GPU: 4}))]
    plugin = Fit(PLUGIN.decode_args(args), Handle(snapshot=FakeSnapshot(nodes), client=None, objects=store))
    state, pod = CycleState(), PodInfo(extended_pod())
    plugin.pre_score(state, pod, nodes)
    scores = {n.name: plugin.score(state, pod, n) for n in nodes}
    # a: (1 held + 1) of 2 = 100; b: 1 of 4 = 25; c (device plugin): 1 of 4 = 25.
    assert scores == {"a": 100, "b": 25, "c": 25}
    table = plugin.handle.snapshot.table
    assert plugin.score_nodes(state, pod, table, np.arange(len(table))).tolist() == [100, 25, 25]


def test_fit_hint_a_class_providing_the_pods_resource_queues_it():
    plugin = _fit([], NODES)
    pod = extended_pod()
    added = extended_class()
    assert plugin.is_schedulable_after_device_class_event(pod, None, added) is QueueingHint.QUEUE
    assert plugin.is_schedulable_after_device_class_event(pod, added, copy.deepcopy(added)) is QueueingHint.SKIP
    assert plugin.is_schedulable_after_device_class_event(pod, None, extended_class("x", resource="o.com/y")) \
        is QueueingHint.SKIP
    implicit = extended_pod(f"deviceclass.resource.kubernetes.io/{CLASS}")
    assert plugin.is_schedulable_after_device_class_event(implicit, None, extended_class(resource=None)) \
        is QueueingHint.QUEUE


def test_claims_of_its_own_and_a_device_plugin_node_fail_at_prebind_as_upstream():
    """v1.37.2 gives such a pod its extended-resource claim on that node too, with no request:
    PreBind creates it, allocates it (no device) and then fails on the empty request mappings;
    Unreserve deletes the claim, and the pod never binds there."""
    user_claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                  "metadata": {"name": "mine", "namespace": NS, "uid": "uid-mine"},
                  "spec": {"devices": {"requests": [{"name": "r", "exactly": {
                      "deviceClassName": CLASS, "allocationMode": "ExactCount", "count": 1}}]}}}
    harness = Harness([extended_class(), worker_slice(), user_claim], nodes=[make_node(WORKER, extended={GPU: 1})])
    pod = extended_pod(resourceClaims=[{"name": "mine", "resourceClaimName": "mine"}])
    out = harness.cycle(pod)
    assert (out["filter"], out["reserve"]) == ({WORKER: None}, None)
    assert (out["prebind"].code, out["prebind"].reasons) == (Code.ERROR, (
        "nil or empty request mappings, no update of pod default/my-pod ExtendedResourceClaimStatus",))
    created = next(c for c in harness.claims() if c["metadata"]["name"] != "mine")
    assert (created["spec"], created["status"]["allocation"]) == (
        {"devices": {}}, {"devices": {"results": []}, "allocationTimestamp": "2026-01-01T00:00:00Z"})
    harness.plugin.unreserve(out["state"], PodInfo(pod), WORKER)
    harness.run_spawned()
    assert [c["metadata"]["name"] for c in harness.claims()] == ["mine"]
