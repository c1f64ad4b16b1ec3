import pytest

from kopfsched.framework.cycle_state import CycleState
from kopfsched.framework.events import ActionType, EventResource, QueueingHint
from kopfsched.framework.status import Code, Status
from kopfsched.framework.types import PodInfo
from kopfsched.plugins.nodevolumelimits import (
    PLUGIN,
    CSILimits,
    is_schedulable_after_csi_node_updated,
    is_schedulable_after_pod_deleted,
    is_schedulable_after_pvc_added,
    is_schedulable_after_volume_attachment_deleted,
    translate,
)
from tests.builders import make_node, make_pod, node_info
from tests.plugins.volumes import (
    claim_volume,
    csi_node,
    handle_with,
    pod_with,
    pv,
    pvc,
    storage_class,
    volume_attachment,
)

EXCEEDED = "node(s) exceed max volume count"
EBS = "ebs.csi.aws.com"
OTHER = "other.csi.example.com"


def claims(*names: str, name: str = "p", **kwargs) -> dict:
    return pod_with(*(claim_volume(n) for n in names), name=name, **kwargs)


def inline_ebs(volume_id: str) -> dict:
    return {"name": f"ebs-{volume_id}", "awsElasticBlockStore": {"volumeID": volume_id}}


# Claims bound to CSI volumes of two drivers, an in-tree EBS volume, and unbound claims.
OBJECTS = (
    *(pv(f"csi-ebs-{i}", csi=(EBS, f"vol-{i}")) for i in range(4)),
    *(pvc(f"csi-ebs-{i}", volume_name=f"csi-ebs-{i}") for i in range(4)),
    pv("csi-other-0", csi=(OTHER, "h0")),
    pvc("csi-other-0", volume_name="csi-other-0"),
    pv("intree-ebs", awsElasticBlockStore={"volumeID": "aws://us-east-1a/vol-intree"}),
    pvc("intree-ebs", volume_name="intree-ebs"),
    pv("nfs", nfs={"server": "s", "path": "/"}),
    pvc("nfs", volume_name="nfs"),
    pvc("unbound-ebs-class", storage_class="ebs-class"),
    pvc("unbound-intree-class", storage_class="intree-class"),
    pvc("unbound-no-class"),
    pvc("bound-to-missing-pv", volume_name="gone", storage_class="ebs-class"),
    storage_class("ebs-class", mode="WaitForFirstConsumer", provisioner=EBS),
    storage_class("intree-class", mode="WaitForFirstConsumer", provisioner="kubernetes.io/aws-ebs"),
)
LIMIT_2 = csi_node("n", (EBS, 2), (OTHER, None))


def run(pod: dict, *existing: dict, objs: tuple = (LIMIT_2,)) -> Status | None:
    node = node_info(make_node("n"), *existing)
    plugin, state, info = CSILimits(None, handle_with(*OBJECTS, *objs)), CycleState(), PodInfo(pod)
    answer = plugin.pre_filter(state, info, [node])
    if answer is not None:
        return answer
    return plugin.filter(state, info, node)


# In the spirit of upstream's TestCSILimits.
@pytest.mark.parametrize(("pod", "existing", "objs", "fits"), [
    pytest.param(claims("csi-ebs-0", "csi-ebs-1"), [], (LIMIT_2,), True, id="two-new-at-limit-2"),
    pytest.param(claims("csi-ebs-0", "csi-ebs-1", "csi-ebs-2"), [], (LIMIT_2,), False, id="three-new-over-limit-2"),
    pytest.param(claims("csi-ebs-2"), [claims("csi-ebs-0", "csi-ebs-1", name="o")], (LIMIT_2,), False,
                 id="node-full"),
    pytest.param(claims("csi-ebs-1"), [claims("csi-ebs-0", "csi-ebs-1", name="o")], (LIMIT_2,), True,
                 id="shared-volume-counts-once"),
    pytest.param(claims("csi-ebs-2", "csi-ebs-2"), [claims("csi-ebs-0", name="o")], (LIMIT_2,), True,
                 id="same-claim-twice-in-pod-counts-once"),
    pytest.param(claims("csi-ebs-2"), [claims("csi-ebs-0", "csi-ebs-1", name="o")], (), True, id="no-csinode"),
    pytest.param(claims("csi-other-0"), [], (csi_node("n", (OTHER, None)),), True, id="driver-without-count"),
    pytest.param(claims("csi-other-0"), [claims("csi-ebs-0", "csi-ebs-1", name="o")], (LIMIT_2,), True,
                 id="other-driver-not-limited"),
    pytest.param(claims("csi-ebs-2"), [claims("csi-ebs-0", name="o")], (csi_node("n", (EBS, 1)),), False,
                 id="limit-1"),
    pytest.param(claims("csi-ebs-2"), [claims("csi-ebs-0", name="o")], (csi_node("n", (EBS, 0)),), False,
                 id="limit-0"),
    pytest.param(claims("nfs"), [], (csi_node("n", (EBS, 0)),), True, id="non-csi-volume-not-counted"),
    pytest.param(claims("unbound-ebs-class"), [claims("csi-ebs-0", "csi-ebs-1", name="o")], (LIMIT_2,), False,
                 id="unbound-claim-counts-under-provisioner"),
    pytest.param(claims("bound-to-missing-pv"), [claims("csi-ebs-0", "csi-ebs-1", name="o")], (LIMIT_2,), False,
                 id="missing-pv-falls-back-to-class"),
    pytest.param(claims("unbound-no-class"), [claims("csi-ebs-0", "csi-ebs-1", name="o")], (LIMIT_2,), True,
                 id="unbound-without-class-not-counted"),
    pytest.param(claims("unbound-ebs-class"), [claims("unbound-ebs-class", name="o"), claims("csi-ebs-0", name="o2")],
                 (LIMIT_2,), True, id="unbound-claim-shared-counts-once"),
    pytest.param(claims("intree-ebs"), [claims("csi-ebs-0", "csi-ebs-1", name="o")], (LIMIT_2,), False,
                 id="migrated-intree-pv-counts-as-csi"),
    pytest.param(claims("csi-ebs-2"), [claims("intree-ebs", "csi-ebs-0", name="o")], (LIMIT_2,), False,
                 id="existing-migrated-intree-pv-counts"),
    pytest.param(claims("unbound-intree-class"), [claims("csi-ebs-0", "csi-ebs-1", name="o")], (LIMIT_2,), False,
                 id="intree-provisioner-counts-under-its-csi-driver"),
    pytest.param(pod_with(inline_ebs("vol-inline")), [claims("csi-ebs-0", "csi-ebs-1", name="o")], (LIMIT_2,), False,
                 id="inline-migrated-volume-counts"),
    pytest.param(claims("csi-ebs-2"), [claims("csi-ebs-0", "missing-claim", name="o")], (LIMIT_2,), True,
                 id="existing-pods-missing-claim-not-counted"),
])
def test_filter(pod: dict, existing: list[dict], objs: tuple, fits: bool) -> None:
    status = run(pod, *existing, objs=objs)
    if fits:
        assert status is None
    else:
        assert status == Status(Code.UNSCHEDULABLE, (EXCEEDED,))


def test_missing_claim_of_new_pod_is_unresolvable() -> None:
    assert run(claims("csi-ebs-0", "nope")) == Status(
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
        ('looking up PVC default/nope: persistentvolumeclaim "nope" not found',))


def test_claim_without_name_is_an_error() -> None:
    status = run(claims(""))
    assert status is not None
    assert (status.code, status.reasons) == (Code.ERROR, ("PersistentVolumeClaim had no name",))


def ephemeral_pod(uid: str = "uid-eph") -> dict:
    return pod_with({"name": "data", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}, name="eph", uid=uid)


@pytest.mark.parametrize(("owner", "expected"), [
    pytest.param("uid-eph", Status(Code.UNSCHEDULABLE, (EXCEEDED,)), id="owned-claim-counts"),
    pytest.param("someone-else", Status(Code.ERROR, ("PVC default/eph-data was not created for pod default/eph "
                                                     "(pod is not owner)",)), id="claim-not-owned"),
])
def test_ephemeral_volume(owner: str, expected: Status) -> None:
    claim = pvc("eph-data", volume_name="eph-pv", owner_uid=owner)
    status = run(ephemeral_pod(), claims("csi-ebs-0", "csi-ebs-1", name="o"),
                 objs=(LIMIT_2, claim, pv("eph-pv", csi=(EBS, "vol-eph"))))
    assert status is not None
    assert (status.code, status.reasons) == (expected.code, expected.reasons)


@pytest.mark.parametrize(("attachments", "fits"), [
    pytest.param([volume_attachment("va-0", node="n", attacher=EBS, pv_name="csi-ebs-0")], False,
                 id="detaching-volume-counts"),
    pytest.param([volume_attachment("va-1", node="n", attacher=EBS, pv_name="csi-ebs-1")], True,
                 id="attachment-of-a-pods-volume-counts-once"),
    pytest.param([volume_attachment("va-0", node="other", attacher=EBS, pv_name="csi-ebs-0")], True,
                 id="attachment-to-another-node"),
    pytest.param([volume_attachment("va-0", node="n", attacher=EBS, pv_name=None)], True,
                 id="inline-attachment-ignored"),
    pytest.param([volume_attachment("va-0", node="n", attacher=EBS, pv_name="nfs")], True,
                 id="non-csi-pv-ignored"),
])
def test_volume_attachments(attachments: list[dict], fits: bool) -> None:
    status = run(claims("csi-ebs-2"), claims("csi-ebs-1", name="o"), objs=(LIMIT_2, *attachments))
    assert status == (None if fits else Status(Code.UNSCHEDULABLE, (EXCEEDED,)))


@pytest.mark.parametrize(("migrated", "fits"), [
    pytest.param(None, True, id="portworx-not-migrated-on-node"),
    pytest.param("kubernetes.io/portworx-volume", False, id="portworx-migrated"),
])
def test_portworx_needs_migration_annotation(migrated: str | None, fits: bool) -> None:
    pod = pod_with({"name": "px", "portworxVolume": {"volumeID": "px-1"}})
    node = csi_node("n", ("pxd.portworx.com", 0), migrated=migrated)
    status = run(pod, objs=(node,))
    assert status == (None if fits else Status(Code.UNSCHEDULABLE, (EXCEEDED,)))


@pytest.mark.parametrize("pod", [
    pytest.param(make_pod(), id="no-volumes"),
    pytest.param(pod_with({"name": "s", "emptyDir": {}}, {"name": "c", "configMap": {"name": "x"}}),
                 id="only-local-volumes"),
])
def test_pre_filter_skips(pod: dict) -> None:
    answer = CSILimits(None, handle_with()).pre_filter(CycleState(), PodInfo(pod), [])
    assert answer is not None and answer.code is Code.SKIP


@pytest.mark.parametrize("volume", [
    pytest.param(claim_volume("c"), id="claim"),
    pytest.param({"name": "e", "ephemeral": {}}, id="ephemeral"),
    pytest.param(inline_ebs("vol-1"), id="inline-migratable"),
    pytest.param({"name": "f", "azureFile": {"shareName": "s"}}, id="inline-migratable-never-counted"),
])
def test_pre_filter_does_not_skip(volume: dict) -> None:
    assert CSILimits(None, handle_with()).pre_filter(CycleState(), PodInfo(pod_with(volume)), []) is None


@pytest.mark.parametrize(("key", "source", "pv_labels", "handle"), [
    pytest.param("awsElasticBlockStore", {"volumeID": "vol-1"}, None, "vol-1", id="ebs-bare"),
    pytest.param("awsElasticBlockStore", {"volumeID": "aws://us-east-1a/vol-1"}, None, "vol-1", id="ebs-url"),
    pytest.param("awsElasticBlockStore", {"volumeID": "aws:///vol-1"}, None, "vol-1", id="ebs-url-no-zone"),
    pytest.param("gcePersistentDisk", {"pdName": "d"}, None, "projects/UNSPECIFIED/zones/UNSPECIFIED/disks/d",
                 id="gce-inline"),
    pytest.param("gcePersistentDisk", {"pdName": "d"}, {"topology.kubernetes.io/zone": "us-central1-a"},
                 "projects/UNSPECIFIED/zones/us-central1-a/disks/d", id="gce-zonal-pv"),
    pytest.param("gcePersistentDisk", {"pdName": "d"},
                 {"failure-domain.beta.kubernetes.io/zone": "us-central1-a__us-central1-b"},
                 "projects/UNSPECIFIED/regions/us-central1/disks/d", id="gce-regional-pv"),
    pytest.param("azureDisk", {"diskURI": "/subs/d", "kind": "Managed"}, None, "/subs/d", id="azure-managed"),
    pytest.param("cinder", {"volumeID": "c1"}, None, "c1", id="cinder"),
])
def test_translate(key: str, source: dict, pv_labels: dict | None, handle: str) -> None:
    volume = pv("x", labels=pv_labels) if pv_labels is not None else None
    assert translate(key, source, volume) == handle


def test_untranslatable_inline_volume_is_an_error() -> None:
    pod = pod_with({"name": "disk", "azureDisk": {"diskName": "d", "diskURI": "/d", "kind": "Shared"}})
    status = run(pod, objs=(csi_node("n", ("disk.csi.azure.com", 5)),))
    assert status is not None
    assert (status.code, status.reasons) == (
        Code.ERROR, ("converting volume(disk) from inline to csi: kind(Shared) is not supported in csi migration",))


def test_events() -> None:
    events = {(e.event.resource, e.event.action): e.hint for e in CSILimits(None, handle_with()).events_to_register()}
    assert set(events) == {
        (EventResource.CSI_NODE, ActionType.ADD), (EventResource.CSI_NODE, ActionType.UPDATE),
        (EventResource.ASSIGNED_POD, ActionType.DELETE), (EventResource.PERSISTENT_VOLUME_CLAIM, ActionType.ADD),
        (EventResource.VOLUME_ATTACHMENT, ActionType.DELETE)}
    assert events[(EventResource.CSI_NODE, ActionType.ADD)] is None
    assert PLUGIN.name == "NodeVolumeLimits"


@pytest.mark.parametrize(("old", "new", "expected"), [
    pytest.param(csi_node("n", (EBS, 2)), csi_node("n", (EBS, 3)), QueueingHint.QUEUE, id="count-raised"),
    pytest.param(csi_node("n", (EBS, 2)), csi_node("n", (EBS, 2), (OTHER, 1)), QueueingHint.QUEUE,
                 id="driver-added"),
    pytest.param(csi_node("n", (EBS, 3)), csi_node("n", (EBS, 2)), QueueingHint.SKIP, id="count-lowered"),
    pytest.param(csi_node("n", (EBS, 2)), csi_node("n", (EBS, 2)), QueueingHint.SKIP, id="unchanged"),
])
def test_hint_csi_node_updated(old: dict, new: dict, expected: QueueingHint) -> None:
    assert is_schedulable_after_csi_node_updated(claims("c"), old, new) is expected


@pytest.mark.parametrize(("deleted", "expected"), [
    pytest.param(claims("c", name="d", node_name="n"), QueueingHint.QUEUE, id="bound-with-claim"),
    pytest.param(claims("c", name="d"), QueueingHint.SKIP, id="never-bound"),
    pytest.param(make_pod("d", node_name="n"), QueueingHint.SKIP, id="no-volumes"),
    pytest.param(pod_with({"name": "s", "emptyDir": {}}, name="d", node_name="n"), QueueingHint.SKIP,
                 id="only-local-volumes"),
    pytest.param(pod_with(inline_ebs("vol-1"), name="d", node_name="n"), QueueingHint.QUEUE, id="inline-migratable"),
])
def test_hint_pod_deleted(deleted: dict, expected: QueueingHint) -> None:
    assert is_schedulable_after_pod_deleted(claims("c"), deleted, None) is expected


@pytest.mark.parametrize(("added", "expected"), [
    pytest.param(pvc("c"), QueueingHint.QUEUE, id="pods-claim"),
    pytest.param(pvc("eph-data"), QueueingHint.QUEUE, id="ephemeral-claim"),
    pytest.param(pvc("other"), QueueingHint.SKIP, id="other-claim"),
    pytest.param(pvc("c", "elsewhere"), QueueingHint.SKIP, id="other-namespace"),
])
def test_hint_pvc_added(added: dict, expected: QueueingHint) -> None:
    pod = pod_with(claim_volume("c"), {"name": "data", "ephemeral": {}}, name="eph")
    assert is_schedulable_after_pvc_added(pod, None, added) is expected


@pytest.mark.parametrize(("pod", "expected"), [
    pytest.param(claims("c"), QueueingHint.QUEUE, id="pod-with-claims"),
    pytest.param(pod_with(inline_ebs("vol-1")), QueueingHint.QUEUE, id="inline-of-attacher"),
    pytest.param(pod_with({"name": "g", "gcePersistentDisk": {"pdName": "d"}}), QueueingHint.SKIP,
                 id="inline-of-other-driver"),
])
def test_hint_volume_attachment_deleted(pod: dict, expected: QueueingHint) -> None:
    va = volume_attachment("va", node="n", attacher=EBS, pv_name="pv")
    assert is_schedulable_after_volume_attachment_deleted(pod, va, None) is expected


async def test_end_to_end_node_at_its_csi_limit_is_skipped() -> None:
    from tests.harness import Harness

    h = Harness([make_node("n1"), make_node("n2")])
    h.add_objects("PersistentVolume", *(o for o in OBJECTS if o["kind"] == "PersistentVolume"))
    h.add_objects("PersistentVolumeClaim", *(o for o in OBJECTS if o["kind"] == "PersistentVolumeClaim"))
    h.add_objects("CSINode", csi_node("n1", (EBS, 1)), csi_node("n2", (EBS, 1)))
    h.add_pods(claims("csi-ebs-0", name="holder", node_name="n1"))
    h.add_pods(claims("csi-ebs-1", name="fits"))
    await h.settle()
    assert h.node_of("fits") == "n2"
    h.add_pods(claims("csi-ebs-2", name="full"))
    await h.settle()
    assert h.node_of("full") is None
    assert h.condition("full")["message"].startswith(f"0/2 nodes are available: 2 {EXCEEDED}. preemption: ")
    h.add_objects("CSINode", csi_node("n1", (EBS, 2)))  # the driver reports room for one more
    await h.settle()
    assert h.node_of("full") == "n1"


# --- VolumeLimitScaling: v1.37.2 csi_test.go TestVolumeLimitScalingGate ---------------------------------


def csi_driver(name: str, *, prevent: bool | None) -> dict:
    spec = {} if prevent is None else {"preventPodSchedulingIfMissing": prevent}
    return {"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver", "metadata": {"name": name}, "spec": spec}


@pytest.fixture
def gates():
    from kopfsched import features

    saved = features.GATES
    yield lambda text: features.set_gates(features.parse(text))
    features.set_gates(saved)


NO_CSI_DRIVER = (csi_node("n"),)  # upstream's limitSource "no-csi-driver": a CSINode without drivers
NOT_INSTALLED = (Code.UNSCHEDULABLE, f"{EBS} CSI driver is not installed on the node")


@pytest.mark.parametrize(("enabled", "csi_node_objs", "driver", "expected"), [
    pytest.param(True, NO_CSI_DRIVER, csi_driver(EBS, prevent=None), None,
                 id="gate enabled - allow scheduling when CSIDriver exists but PreventPodSchedulingIfMissing is "
                    "not set"),
    pytest.param(True, NO_CSI_DRIVER, csi_driver(EBS, prevent=True), NOT_INSTALLED,
                 id="gate enabled - fail when driver not installed and PreventPodSchedulingIfMissing is true"),
    pytest.param(False, NO_CSI_DRIVER, csi_driver(EBS, prevent=True), None,
                 id="gate disabled - skip driver presence check (regardless of CSIDriver presence)"),
    pytest.param(True, (csi_node("n", (EBS, 2)),), csi_driver(EBS, prevent=True), None,
                 id="gate enabled - driver installed within limit"),
    pytest.param(True, NO_CSI_DRIVER, None, None, id="gate enabled - allow scheduling when CSIDriver object missing"),
    pytest.param(True, (), csi_driver(EBS, prevent=True), NOT_INSTALLED, id="no CSINode at all"),
])
def test_volume_limit_scaling_gate(gates, enabled, csi_node_objs, driver, expected):
    gates("" if enabled else "VolumeLimitScaling=false")
    plugin = CSILimits(None, handle_with(*OBJECTS, *csi_node_objs, *((driver,) if driver else ())))
    state, info = CycleState(), PodInfo(claims("csi-ebs-0"))
    assert plugin.pre_filter(state, info, []) is None
    status = plugin.filter(state, info, node_info(make_node("n")))
    assert (None if status is None else (status.code, status.message)) == expected
