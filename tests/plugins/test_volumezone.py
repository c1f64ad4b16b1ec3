import pytest

from kopfsched.framework.cycle_state import CycleState
from kopfsched.framework.events import ActionType, EventResource, QueueingHint
from kopfsched.framework.status import Code, Status
from kopfsched.framework.types import PodInfo
from kopfsched.plugins.volumezone import (
    PLUGIN,
    VolumeZone,
    is_schedulable_after_pv_change,
    is_schedulable_after_pvc_change,
    is_schedulable_after_storage_class_added,
    label_zones_to_set,
)
from tests.builders import make_node, make_pod, node_info
from tests.plugins.volumes import claim_volume, handle_with, pod_with, pv, pvc, storage_class

CONFLICT = "node(s) had no available volume zone"
BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
BETA_REGION = "failure-domain.beta.kubernetes.io/region"
ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"

# The objects of upstream's TestSingleZone / TestMultiZone, in one store.
OBJECTS = (
    pv("Vol_1", labels={BETA_ZONE: "us-west1-a"}),
    pv("Vol_2", labels={BETA_REGION: "us-west1", "uselessLabel": "none"}),
    pv("Vol_3", labels={BETA_REGION: "us-west1"}),
    pv("Vol_Stable_1", labels={ZONE: "us-west1-a"}),
    pv("Vol_Stable_2", labels={REGION: "us-west1", "uselessLabel": "none"}),
    pv("Vol_Multi", labels={BETA_ZONE: "us-west1-a__us-west1-b"}),
    pv("Vol_Bad_Label", labels={ZONE: "us-west1-a__"}),
    pv("Vol_No_Labels"),
    pvc("PVC_1", volume_name="Vol_1"),
    pvc("PVC_2", volume_name="Vol_2"),
    pvc("PVC_3", volume_name="Vol_3"),
    pvc("PVC_Stable_1", volume_name="Vol_Stable_1"),
    pvc("PVC_Stable_2", volume_name="Vol_Stable_2"),
    pvc("PVC_Multi", volume_name="Vol_Multi"),
    pvc("PVC_Bad_Label", volume_name="Vol_Bad_Label"),
    pvc("PVC_No_Labels", volume_name="Vol_No_Labels"),
    pvc("PVC_Missing_PV", volume_name="Vol_Not_There"),
    pvc("PVC_WFFC", storage_class="Class_WFFC"),
    pvc("PVC_Immediate", storage_class="Class_Immediate"),
    pvc("PVC_No_Mode", storage_class="Class_No_Mode"),
    pvc("PVC_Missing_Class", storage_class="Class_Not_There"),
    pvc("PVC_No_Class"),
    storage_class("Class_WFFC", mode="WaitForFirstConsumer"),
    storage_class("Class_Immediate", mode="Immediate"),
    storage_class("Class_No_Mode", mode=None),
)


def claims(*names: str) -> dict:
    return pod_with(*(claim_volume(n) for n in names))


def run(pod: dict, node_labels: dict[str, str]) -> Status | None:
    node = node_info(make_node("host1", labels=node_labels))
    plugin, state, info = VolumeZone(None, handle_with(*OBJECTS)), CycleState(), PodInfo(pod)
    answer = plugin.pre_filter(state, info, [node])
    if answer is not None:
        return answer
    return plugin.filter(state, info, node)


@pytest.mark.parametrize(("pod", "node_labels", "fits"), [
    pytest.param(claims("PVC_1"), {}, True, id="node-without-labels"),
    pytest.param(claims("PVC_1"), {"uselessLabel": "none"}, True, id="node-with-only-other-labels"),
    pytest.param(claims("PVC_1"), {BETA_ZONE: "us-west1-a", "uselessLabel": "none"}, True, id="beta-zone-matched"),
    pytest.param(claims("PVC_2"), {BETA_REGION: "us-west1", "uselessLabel": "none"}, True, id="beta-region-matched"),
    pytest.param(claims("PVC_1"), {BETA_ZONE: "no_us-west1-a"}, False, id="beta-zone-mismatch"),
    pytest.param(claims("PVC_2"), {BETA_REGION: "no_us-west1"}, False, id="beta-region-mismatch"),
    pytest.param(claims("PVC_1"), {BETA_REGION: "us-west1"}, False, id="node-has-region-pv-wants-zone"),
    pytest.param(claims("PVC_Stable_1"), {ZONE: "us-west1-a"}, True, id="ga-zone-matched"),
    pytest.param(claims("PVC_Stable_2"), {REGION: "us-west1"}, True, id="ga-region-matched"),
    pytest.param(claims("PVC_Stable_1"), {ZONE: "no_us-west1-a"}, False, id="ga-zone-mismatch"),
    pytest.param(claims("PVC_1"), {ZONE: "us-west1-a"}, True, id="beta-pv-label-matches-ga-node-label"),
    pytest.param(claims("PVC_Stable_1"), {BETA_ZONE: "us-west1-a"}, False, id="ga-pv-label-needs-ga-node-label"),
    pytest.param(claims("PVC_1", "PVC_2"), {BETA_ZONE: "us-west1-a", BETA_REGION: "us-west1"}, True,
                 id="zone-and-region-matched"),
    pytest.param(claims("PVC_1", "PVC_2"), {BETA_ZONE: "us-west1-a", BETA_REGION: "us-east1"}, False,
                 id="zone-matched-region-not"),
    pytest.param(claims("PVC_Multi"), {BETA_ZONE: "us-west1-b"}, True, id="multi-zone-volume"),
    pytest.param(claims("PVC_Multi"), {BETA_ZONE: "us-west1-c"}, False, id="multi-zone-volume-mismatch"),
])
def test_filter(pod: dict, node_labels: dict[str, str], fits: bool) -> None:
    status = run(pod, node_labels)
    if fits:
        assert status is None
    else:
        assert status == Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (CONFLICT,))


@pytest.mark.parametrize(("pod", "code", "reason"), [
    pytest.param(make_pod(), Code.SKIP, None, id="pod-without-volumes"),
    pytest.param(pod_with({"name": "scratch", "emptyDir": {}}), Code.SKIP, None, id="pod-without-claims"),
    pytest.param(claims("PVC_No_Labels"), Code.SKIP, None, id="volume-without-topology"),
    pytest.param(claims("PVC_Bad_Label"), Code.SKIP, None, id="unparsable-zone-label-ignored"),
    pytest.param(claims("PVC_WFFC"), Code.SKIP, None, id="wait-for-first-consumer-skipped"),
    pytest.param(claims(""), Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "PersistentVolumeClaim had no name",
                 id="claim-without-name"),
    pytest.param(claims("PVC_Not_There"), Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                 'persistentvolumeclaim "PVC_Not_There" not found', id="claim-missing"),
    pytest.param(claims("PVC_Missing_PV"), Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                 'persistentvolume "Vol_Not_There" not found', id="volume-missing"),
    pytest.param(claims("PVC_Immediate"), Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "PersistentVolume had no name",
                 id="immediate-claim-unbound"),
    pytest.param(claims("PVC_No_Class"), Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                 "PersistentVolumeClaim had no pv name and storageClass name", id="unbound-without-class"),
    pytest.param(claims("PVC_Missing_Class"), Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                 'storageclass.storage.k8s.io "Class_Not_There" not found', id="class-missing"),
    pytest.param(claims("PVC_No_Mode"), Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                 'VolumeBindingMode not set for StorageClass "Class_No_Mode"', id="class-without-mode"),
])
def test_pre_filter(pod: dict, code: Code, reason: str | None) -> None:
    answer = VolumeZone(None, handle_with(*OBJECTS)).pre_filter(CycleState(), PodInfo(pod), [])
    assert answer is not None
    assert answer.code is code
    assert answer.reasons == ((reason,) if reason else ())


def test_wait_for_first_consumer_claim_beside_a_zoned_one() -> None:
    assert run(claims("PVC_WFFC", "PVC_1"), {BETA_ZONE: "us-west1-b"}) == Status(
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (CONFLICT,))


def test_beta_storage_class_annotation_wins() -> None:
    claim = pvc("PVC_Annotated", storage_class="Class_Immediate")
    claim["metadata"]["annotations"] = {"volume.beta.kubernetes.io/storage-class": "Class_WFFC"}
    plugin = VolumeZone(None, handle_with(*OBJECTS, claim))
    answer = plugin.pre_filter(CycleState(), PodInfo(claims("PVC_Annotated")), [])
    assert answer is not None and answer.code is Code.SKIP


def test_filter_without_pre_filter_state_computes_it() -> None:
    node = node_info(make_node("host1", labels={ZONE: "us-west1-b"}))
    status = VolumeZone(None, handle_with(*OBJECTS)).filter(CycleState(), PodInfo(claims("PVC_Stable_1")), node)
    assert status == Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (CONFLICT,))


def test_label_zones_to_set() -> None:
    assert label_zones_to_set("a__b") == frozenset({"a", "b"})
    assert label_zones_to_set(" a ") == frozenset({"a"})
    assert label_zones_to_set("a____b") is None


def test_events() -> None:
    events = {e.event.resource: (e.event.action, e.hint) for e in VolumeZone(None, None).events_to_register()}
    assert events[EventResource.NODE] == (ActionType.ADD | ActionType.UPDATE_NODE_LABEL, None)
    assert events[EventResource.STORAGE_CLASS][0] == ActionType.ADD
    assert events[EventResource.PERSISTENT_VOLUME_CLAIM][0] == ActionType.ADD | ActionType.UPDATE
    assert events[EventResource.PERSISTENT_VOLUME][0] == ActionType.ADD | ActionType.UPDATE
    assert PLUGIN.name == "VolumeZone"


@pytest.mark.parametrize(("old", "new", "expected"), [
    pytest.param(None, pv("v", labels={ZONE: "a"}), QueueingHint.QUEUE, id="pv-added"),
    pytest.param(pv("v", labels={ZONE: "a"}), pv("v", labels={ZONE: "b"}), QueueingHint.QUEUE, id="zone-changed"),
    pytest.param(pv("v", labels={ZONE: "a"}), pv("v", labels={ZONE: "a", "x": "y"}), QueueingHint.SKIP,
                 id="other-label-changed"),
])
def test_hint_pv_change(old: dict | None, new: dict, expected: QueueingHint) -> None:
    assert is_schedulable_after_pv_change(claims("PVC_1"), old, new) is expected


@pytest.mark.parametrize(("new", "expected"), [
    pytest.param(pvc("PVC_1"), QueueingHint.QUEUE, id="pods-claim"),
    pytest.param(pvc("PVC_2"), QueueingHint.SKIP, id="other-claim"),
    pytest.param(pvc("PVC_1", "other"), QueueingHint.SKIP, id="other-namespace"),
])
def test_hint_pvc_change(new: dict, expected: QueueingHint) -> None:
    assert is_schedulable_after_pvc_change(claims("PVC_1"), None, new) is expected


@pytest.mark.parametrize(("new", "expected"), [
    pytest.param(storage_class("c", mode="WaitForFirstConsumer"), QueueingHint.QUEUE, id="wait-for-first-consumer"),
    pytest.param(storage_class("c", mode="Immediate"), QueueingHint.SKIP, id="immediate"),
    pytest.param(storage_class("c", mode=None), QueueingHint.SKIP, id="no-mode"),
])
def test_hint_storage_class_added(new: dict, expected: QueueingHint) -> None:
    assert is_schedulable_after_storage_class_added(claims("PVC_1"), None, new) is expected


async def test_end_to_end_pod_lands_in_its_volumes_zone() -> None:
    from tests.harness import Harness

    h = Harness([make_node("node-a", labels={ZONE: "zone-a"}), make_node("node-b", labels={ZONE: "zone-b"})])
    h.add_objects("PersistentVolume", pv("pv-b", labels={ZONE: "zone-b"}), pv("pv-c", labels={ZONE: "zone-c"}))
    h.add_objects("PersistentVolumeClaim", pvc("data-b", volume_name="pv-b"), pvc("data-c", volume_name="pv-c"))
    h.add_pods(pod_with(claim_volume("data-b"), name="web"), pod_with(claim_volume("data-c"), name="lost"))
    await h.settle()
    assert h.node_of("web") == "node-b"
    assert h.node_of("lost") is None
    assert h.condition("lost")["message"] == (
        "0/2 nodes are available: 2 node(s) had no available volume zone. "
        "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.")
