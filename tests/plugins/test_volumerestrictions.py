import pytest

from kopfsched.framework.cycle_state import CycleState
from kopfsched.framework.events import ActionType, EventResource, QueueingHint
from kopfsched.framework.status import Code, Status
from kopfsched.framework.types import PodInfo
from kopfsched.plugins.volumerestrictions import (
    PLUGIN,
    VolumeRestrictions,
    is_schedulable_after_pod_deleted,
    is_schedulable_after_pvc_added,
)
from tests.builders import make_node, make_pod, node_info
from tests.plugins.volumes import claim_volume, handle_with, pod_with, pv, pvc

DISK_CONFLICT = "node(s) had no available disk"
RWOP_CONFLICT = ("node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already in-use "
                 "by another pod")  # v1.37.2's ErrReasonReadWriteOncePodConflict


def gce(pd: str, read_only: bool = False) -> dict:
    return {"name": f"gce-{pd}", "gcePersistentDisk": {"pdName": pd, "fsType": "ext4", "readOnly": read_only}}


def ebs(volume_id: str) -> dict:
    return {"name": f"ebs-{volume_id}", "awsElasticBlockStore": {"volumeID": volume_id}}


def rbd(monitors: list[str], pool: str = "foo", image: str = "bar", read_only: bool = False) -> dict:
    return {"name": "rbd", "rbd": {"monitors": monitors, "pool": pool, "image": image, "readOnly": read_only}}


def iscsi(iqn: str, read_only: bool = False) -> dict:
    return {"name": "iscsi", "iscsi": {"targetPortal": "127.0.0.1:3260", "iqn": iqn, "lun": 0,
                                        "readOnly": read_only}}


def run(pod: dict, *existing: dict, objs: tuple = ()) -> Status | None:
    """PreFilter then Filter on one node holding `existing`; the PreFilter answer if it is not success."""
    node = node_info(make_node("n"), *existing)
    plugin, state, info = VolumeRestrictions(None, handle_with(*objs)), CycleState(), PodInfo(pod)
    answer = plugin.pre_filter(state, info, [node])
    if answer is not None:
        return answer
    return plugin.filter(state, info, node)


# Upstream's TestGCEDiskConflicts, TestAWSDiskConflicts, TestRBDDiskConflicts, TestISCSIDiskConflicts.
@pytest.mark.parametrize(("pod", "existing", "fits"), [
    pytest.param(make_pod(), [], True, id="nothing"),
    pytest.param(make_pod(), [pod_with(gce("foo"), name="old")], True, id="gce-pod-without-volumes"),
    pytest.param(pod_with(gce("foo")), [pod_with(gce("foo"), name="old")], False, id="gce-same-disk"),
    pytest.param(pod_with(gce("bar")), [pod_with(gce("foo"), name="old")], True, id="gce-other-disk"),
    pytest.param(pod_with(gce("foo", True)), [pod_with(gce("foo", True), name="old")], True,
                 id="gce-same-disk-all-read-only"),
    pytest.param(pod_with(gce("foo", True)), [pod_with(gce("foo"), name="old")], False,
                 id="gce-same-disk-one-read-write"),
    pytest.param(pod_with(ebs("foo")), [pod_with(ebs("foo"), name="old")], False, id="aws-same-volume"),
    pytest.param(pod_with(ebs("bar")), [pod_with(ebs("foo"), name="old")], True, id="aws-other-volume"),
    pytest.param(pod_with(rbd(["a", "b"])), [pod_with(rbd(["b", "c"]), name="old")], False,
                 id="rbd-shared-monitor-same-image"),
    pytest.param(pod_with(rbd(["a", "b"])), [pod_with(rbd(["c", "d"]), name="old")], True,
                 id="rbd-no-shared-monitor"),
    pytest.param(pod_with(rbd(["a"], image="other")), [pod_with(rbd(["a"]), name="old")], True,
                 id="rbd-other-image"),
    pytest.param(pod_with(rbd(["a"], read_only=True)), [pod_with(rbd(["a"], read_only=True), name="old")], True,
                 id="rbd-all-read-only"),
    pytest.param(pod_with(iscsi("iqn.2016-12.server:storage.target01")),
                 [pod_with(iscsi("iqn.2016-12.server:storage.target01"), name="old")], False, id="iscsi-same-iqn"),
    pytest.param(pod_with(iscsi("iqn.2016-12.server:storage.target02")),
                 [pod_with(iscsi("iqn.2016-12.server:storage.target01"), name="old")], True, id="iscsi-other-iqn"),
    pytest.param(pod_with(iscsi("iqn.a", True)), [pod_with(iscsi("iqn.a", True), name="old")], True,
                 id="iscsi-all-read-only"),
    pytest.param(pod_with(gce("foo")), [pod_with(ebs("foo"), name="old")], True, id="different-volume-types"),
])
def test_disk_conflicts(pod: dict, existing: list[dict], fits: bool) -> None:
    status = run(pod, *existing)
    if fits:
        assert status is None or status.code is Code.SKIP
    else:
        assert status == Status(Code.UNSCHEDULABLE, (DISK_CONFLICT,))


RWOP_1 = pvc("claim-with-rwop-1", access_modes=["ReadWriteOncePod"])
RWOP_2 = pvc("claim-with-rwop-2", access_modes=["ReadWriteOncePod"])
RWX = pvc("claim-with-rwx", access_modes=["ReadWriteMany"])


# Upstream's TestAccessModeConflicts.
@pytest.mark.parametrize(("pod", "existing", "objs", "code", "reason"), [
    pytest.param(pod_with(claim_volume("claim-with-rwop-1")), [], (), Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                 'persistentvolumeclaim "claim-with-rwop-1" not found', id="failed-to-get-pvc"),
    pytest.param(pod_with(claim_volume("claim-with-rwop-2")), [pod_with(claim_volume("claim-with-rwop-1"), name="o")],
                 (RWOP_1, RWOP_2), Code.SKIP, None, id="no-access-mode-conflict"),
    pytest.param(pod_with(claim_volume("claim-with-rwop-1")), [pod_with(claim_volume("claim-with-rwop-1"), name="o")],
                 (RWOP_1,), Code.UNSCHEDULABLE, RWOP_CONFLICT, id="access-mode-conflict"),
    pytest.param(pod_with(claim_volume("claim-with-rwop-1"), claim_volume("claim-with-rwop-2")),
                 [pod_with(claim_volume("claim-with-rwop-1"), claim_volume("claim-with-rwop-2"), name="o")],
                 (RWOP_1, RWOP_2), Code.UNSCHEDULABLE, RWOP_CONFLICT, id="two-conflicts"),
    pytest.param(pod_with(claim_volume("claim-with-rwx")), [pod_with(claim_volume("claim-with-rwx"), name="o")],
                 (RWX,), Code.SKIP, None, id="read-write-many-shares"),
    pytest.param(pod_with(claim_volume("claim-with-rwop-1"), namespace="other"),
                 [pod_with(claim_volume("claim-with-rwop-1"), name="o")],
                 (pvc("claim-with-rwop-1", "other", access_modes=["ReadWriteOncePod"]), RWOP_1), Code.SKIP, None,
                 id="same-name-other-namespace"),
])
def test_read_write_once_pod(pod: dict, existing: list[dict], objs: tuple, code: Code, reason: str | None) -> None:
    status = run(pod, *existing, objs=objs)
    assert status is not None
    assert status.code is code
    if reason is not None:
        assert status.reasons == (reason,)


def test_read_write_once_pod_in_use_on_another_node_rejects_every_node() -> None:
    user = node_info(make_node("a"), pod_with(claim_volume("claim-with-rwop-1"), name="user"))
    empty = node_info(make_node("b"))
    plugin, state = VolumeRestrictions(None, handle_with(RWOP_1)), CycleState()
    pod = PodInfo(pod_with(claim_volume("claim-with-rwop-1")))
    assert plugin.pre_filter(state, pod, [user, empty]) is None
    assert plugin.filter(state, pod, empty) == Status(Code.UNSCHEDULABLE, (RWOP_CONFLICT,))


def test_remove_and_add_pod_update_the_conflict_count() -> None:
    user_pod = pod_with(claim_volume("claim-with-rwop-1"), name="user")
    node = node_info(make_node("a"), user_pod)
    plugin, state = VolumeRestrictions(None, handle_with(RWOP_1)), CycleState()
    pod = PodInfo(pod_with(claim_volume("claim-with-rwop-1")))
    assert plugin.pre_filter(state, pod, [node]) is None
    trial = state.clone()
    victim = PodInfo(user_pod)
    assert plugin.remove_pod(trial, pod, victim, node) is None
    assert plugin.filter(trial, pod, node) is None  # preempting the user frees the claim
    assert plugin.filter(state, pod, node) is not None  # the original state is untouched
    assert plugin.add_pod(trial, pod, victim, node) is None
    assert plugin.filter(trial, pod, node) == Status(Code.UNSCHEDULABLE, (RWOP_CONFLICT,))


def test_pre_filter_skips_pods_without_volumes_or_conflicts() -> None:
    plugin = VolumeRestrictions(None, handle_with())
    empty_dir = pod_with({"name": "scratch", "emptyDir": {}})
    for pod in (make_pod(), empty_dir):
        answer = plugin.pre_filter(CycleState(), PodInfo(pod), [])
        assert answer is not None and answer.code is Code.SKIP


def test_filter_without_pre_filter_state_is_an_error() -> None:
    status = VolumeRestrictions(None, handle_with()).filter(CycleState(), PodInfo(make_pod()), node_info(make_node()))
    assert status is not None and status.code is Code.ERROR


def test_events() -> None:
    events = {(e.event.resource, e.event.action): e.hint for e in VolumeRestrictions(None, None).events_to_register()}
    assert set(events) == {(EventResource.POD, ActionType.DELETE), (EventResource.NODE, ActionType.ADD),
                           (EventResource.PERSISTENT_VOLUME_CLAIM, ActionType.ADD)}
    assert events[(EventResource.NODE, ActionType.ADD)] is None
    assert PLUGIN.name == "VolumeRestrictions"


@pytest.mark.parametrize(("deleted", "expected"), [
    pytest.param(pod_with(gce("foo"), name="d"), QueueingHint.QUEUE, id="held-the-disk"),
    pytest.param(pod_with(gce("bar"), name="d"), QueueingHint.SKIP, id="other-disk"),
    pytest.param(pod_with(claim_volume("claim-with-rwop-1"), name="d"), QueueingHint.QUEUE, id="shared-claim"),
    pytest.param(pod_with(gce("foo"), name="d", namespace="other"), QueueingHint.SKIP, id="other-namespace"),
    pytest.param(make_pod("d"), QueueingHint.SKIP, id="no-volumes"),
])
def test_hint_pod_deleted(deleted: dict, expected: QueueingHint) -> None:
    pod = pod_with(gce("foo"), claim_volume("claim-with-rwop-1"))
    assert is_schedulable_after_pod_deleted(pod, deleted, None) is expected


@pytest.mark.parametrize(("added", "expected"), [
    pytest.param(pvc("claim-with-rwop-1"), QueueingHint.QUEUE, id="pods-claim"),
    pytest.param(pvc("unrelated"), QueueingHint.SKIP, id="other-claim"),
    pytest.param(pvc("claim-with-rwop-1", "other"), QueueingHint.SKIP, id="other-namespace"),
])
def test_hint_pvc_added(added: dict, expected: QueueingHint) -> None:
    pod = pod_with(claim_volume("claim-with-rwop-1"))
    assert is_schedulable_after_pvc_added(pod, None, added) is expected


async def test_end_to_end_disk_and_read_write_once_pod_conflicts() -> None:
    from tests.harness import Harness

    h = Harness([make_node("n1"), make_node("n2")])
    h.add_objects("PersistentVolume", pv("pv-rwop"))
    h.add_objects("PersistentVolumeClaim", pvc("claim-with-rwop-1", volume_name="pv-rwop",
                                               access_modes=["ReadWriteOncePod"]))
    h.add_pods(pod_with(gce("foo"), claim_volume("claim-with-rwop-1"), name="holder", node_name="n1"))
    h.add_pods(pod_with(gce("foo"), name="same-disk"), pod_with(claim_volume("claim-with-rwop-1"), name="same-claim"))
    await h.settle()
    assert h.node_of("same-disk") == "n2"
    assert h.node_of("same-claim") is None
    assert h.condition("same-claim")["message"].startswith(f"0/2 nodes are available: 2 {RWOP_CONFLICT}. preemption: ")
