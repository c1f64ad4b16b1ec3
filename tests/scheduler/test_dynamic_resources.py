"""DynamicResources through the whole scheduler on the default profile: the FitError messages
and PreEnqueue texts users see, as kube-scheduler v1.37.2 prints them (each expected string was
printed by v1.37.2's own framework, tests/differential's oracle, for the same objects), and a
pod whose template's claim is not generated yet kept out of the queue until its status names it."""

from __future__ import annotations

import copy

import pytest

from kopfsched.simulate.client import InMemoryClusterClient
from tests.builders import make_node, make_pod
from tests.harness import Harness
from tests.plugins.dra import (
    CLASS_A,
    DRIVER_A,
    allocation,
    claim,
    device,
    device_class,
    request,
    resource_slice,
    result,
)

NOT_HELPFUL = "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."


def _by_name(claim_name: str, **spec: object) -> dict:
    return make_pod("p", uid="uid-p", resourceClaims=[{"name": "gpu", "resourceClaimName": claim_name}], **spec)


def _harness(*claims: dict) -> Harness:
    h = Harness([make_node("n1"), make_node("n2")])
    h.add_objects("DeviceClass", device_class(CLASS_A, DRIVER_A))
    h.add_objects("ResourceSlice", resource_slice("n1-slice", "n1", DRIVER_A, device("gpu-0"), node="n1"))
    h.add_objects("ResourceClaim", *claims)
    return h


@pytest.mark.parametrize(("claims", "pod", "message"), [
    pytest.param([claim("eight", request("g", CLASS_A, 8), namespace="default")], _by_name("eight"),
                 f"0/2 nodes are available: 2 cannot allocate all claims. {NOT_HELPFUL}", id="cannot-allocate"),
    pytest.param([claim("noclass", request("g", "missing.example.com"), namespace="default")], _by_name("noclass"),
                 "0/2 nodes are available: request g: device class missing.example.com does not exist. "
                 f"{NOT_HELPFUL}", id="missing-class"),
    pytest.param([claim("eight", request("g", CLASS_A, 8), namespace="default")],
                 _by_name("eight", requests={"cpu": "100"}),
                 f"0/2 nodes are available: 2 Insufficient cpu. {NOT_HELPFUL}", id="claims-and-no-cpu"),
    pytest.param([], make_pod("p", requests={"cpu": "100"}),
                 f"0/2 nodes are available: 2 Insufficient cpu. {NOT_HELPFUL}", id="no-claims"),
    pytest.param([claim("elsewhere", request("g", CLASS_A), namespace="default",
                        allocation=allocation({"nodeSelectorTerms": [{"matchFields": [
                            {"key": "metadata.name", "operator": "In", "values": ["n9"]}]}]},
                            result("g", DRIVER_A, "n9", "gpu-0")))],
                 _by_name("elsewhere"),
                 "0/2 nodes are available: 2 resourceclaim not available on the node. deallocation of ResourceClaim "
                 f"completed, {NOT_HELPFUL}", id="deallocates"),
])
async def test_the_fit_error_carries_dynamic_resources_postfilter_text_only_when_it_deallocates(claims, pod, message):
    h = _harness(*claims)
    h.add_pods(pod)
    await h.settle()
    assert h.recorder.attempts[0].message == message  # the first attempt: a deallocated claim lets the next one fit


async def test_a_claim_by_name_that_does_not_exist_keeps_the_pod_out_with_upstreams_message():
    h = _harness()
    pod = _by_name("nope")
    h.add_pods(pod)
    await h.settle()
    [gated] = h.scheduler.queue.gated_pods()
    assert (gated.key, gated.gating_plugin) == ("default/p", "DynamicResources")
    profile = h.scheduler.queue._profile(gated)  # the PreEnqueue the queue ran
    assert profile.pre_enqueue is not None
    assert str(profile.pre_enqueue(gated.pod_info).reasons) == "('could not find ResourceClaim \"default/nope\"',)"
    h.add_objects("ResourceClaim", claim("nope", request("g", CLASS_A), namespace="default"))
    await h.settle()
    assert h.node_of("p") == "n1"


async def test_a_template_claim_not_yet_in_the_pods_status_waits_outside_the_queue_until_it_is():
    h = _harness()
    pod = make_pod("p", uid="uid-p", resourceClaims=[{"name": "gpu", "resourceClaimTemplateName": "gpu-template"}])
    h.add_pods(pod)
    await h.settle()
    [gated] = h.scheduler.queue.gated_pods()
    assert gated.gating_plugin == "DynamicResources"
    assert h.recorder.attempts == []
    profile = h.scheduler.queue._profile(gated)
    assert profile.pre_enqueue is not None
    assert profile.pre_enqueue(gated.pod_info).reasons == ('pod "default/p": ResourceClaim not created yet',)

    # The resourceclaim controller creates the claim first: the pod's status does not name it yet.
    h.add_objects("ResourceClaim", claim("p-gpu-x1", request("g", CLASS_A), namespace="default", owner_uid="uid-p"))
    await h.settle()
    assert [q.key for q in h.scheduler.queue.gated_pods()] == ["default/p"]
    assert h.node_of("p") is None

    # ... then records it in status.resourceClaimStatuses: that pod update lets the pod in.
    updated = copy.deepcopy(pod)
    updated["status"] = {**updated.get("status", {}),
                         "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "p-gpu-x1"}]}
    assert isinstance(h.client, InMemoryClusterClient)
    h.client.pods["default/p"] = updated
    h.handlers.on_pod_upsert(updated, pod)
    await h.settle()
    assert h.node_of("p") == "n1"


# --- device taints (DRADeviceTaints, DRADeviceTaintRules; GA and on in v1.37) ----------------

NO_SCHEDULE = {"key": "example.com/unhealthy", "value": "ecc", "effect": "NoSchedule"}
TOLERATE = {"key": "example.com/unhealthy", "operator": "Exists", "effect": "NoSchedule"}
RULE = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule", "metadata": {"name": "n1-maintenance"},
        "spec": {"deviceSelector": {"driver": DRIVER_A, "pool": "n1"}, "taint": NO_SCHEDULE}}


@pytest.fixture
def gates():
    from kopfsched import features

    saved = features.GATES
    yield lambda text: features.set_gates(features.parse(text))
    features.set_gates(saved)


def _tainted_harness(*, device_taints: list[dict] = (), tolerations: list[dict] = ()) -> Harness:
    h = Harness([make_node("n1"), make_node("n2")])
    h.add_objects("DeviceClass", device_class(CLASS_A, DRIVER_A))
    h.add_objects("ResourceSlice", resource_slice("n1-slice", "n1", DRIVER_A,
                                                  device("gpu-0", taints=list(device_taints)), node="n1"))
    h.add_objects("ResourceClaim", claim("gpu", request("g", CLASS_A, tolerations=list(tolerations)),
                                         namespace="default"))
    h.add_pods(_by_name("gpu"))
    return h


async def test_a_pod_whose_only_device_is_tainted_is_told_cannot_allocate_all_claims():
    h = _tainted_harness(device_taints=[NO_SCHEDULE])
    await h.settle()
    assert h.node_of("p") is None
    assert h.recorder.attempts[0].message == f"0/2 nodes are available: 2 cannot allocate all claims. {NOT_HELPFUL}"


async def test_a_tolerating_claim_gets_the_tainted_device_and_its_tolerations_in_the_allocation():
    h = _tainted_harness(device_taints=[NO_SCHEDULE], tolerations=[TOLERATE])
    await h.settle()
    assert h.node_of("p") == "n1"
    allocated = h.scheduler.cache.objects.get("ResourceClaim", "gpu", "default")["status"]["allocation"]
    assert allocated["devices"]["results"] == [{"request": "g", "driver": DRIVER_A, "pool": "n1", "device": "gpu-0",
                                                "tolerations": [TOLERATE]}]


async def test_device_taints_switched_off_are_ignored(gates):
    gates("DRADeviceTaints=false,DRADeviceTaintRules=false")
    h = _tainted_harness(device_taints=[NO_SCHEDULE])
    await h.settle()
    assert h.node_of("p") == "n1"


async def test_a_device_taint_rule_keeps_the_pod_off_until_it_is_deleted():
    h = _tainted_harness()
    h.add_objects("DeviceTaintRule", RULE)
    await h.settle()
    assert h.node_of("p") is None
    assert h.recorder.attempts[0].message == f"0/2 nodes are available: 2 cannot allocate all claims. {NOT_HELPFUL}"
    attempts = len(h.recorder.attempts)
    h.handlers.on_object_upsert("DeviceTaintRule", {**RULE, "status": {"conditions": []}})
    await h.settle()
    assert len(h.recorder.attempts) == attempts  # a status update changes no device's taints: no event
    h.handlers.on_object_delete("DeviceTaintRule", RULE)
    await h.settle()
    assert h.node_of("p") == "n1"


async def test_a_rule_that_selects_no_device_moves_no_pod():
    h = _tainted_harness(device_taints=[NO_SCHEDULE])
    await h.settle()
    attempts = len(h.recorder.attempts)
    h.add_objects("DeviceTaintRule", {**RULE, "spec": {**RULE["spec"], "deviceSelector": {"pool": "n9"}}})
    await h.settle()
    assert len(h.recorder.attempts) == attempts


async def test_device_taint_rules_switched_off_are_not_read(gates):
    gates("DRADeviceTaintRules=false")
    h = _tainted_harness()
    h.add_objects("DeviceTaintRule", RULE)
    await h.settle()
    assert h.node_of("p") == "n1"
