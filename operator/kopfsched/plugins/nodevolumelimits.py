"""NodeVolumeLimits: a node's CSI drivers can attach only so many volumes.

Upstream's CSILimits. The limits are CSINode `spec.drivers[].allocatable.count`, per
driver. A volume counts once per node however many pods use it, under the driver of:

- a claim's bound PersistentVolume (`spec.csi`, or an in-tree source migrated to CSI);
- an unbound claim's StorageClass provisioner (a volume of its own, not yet known);
- a generic ephemeral volume's claim (which must be owned by the pod);
- an inline in-tree volume migrated to CSI (AWS EBS, GCE PD, Azure Disk, Cinder, and
  Portworx where the CSINode lists it as migrated);
- a VolumeAttachment to the node not already counted through a pod (a volume still
  detaching from a deleted pod).

With VolumeLimitScaling (beta, on in v1.37), a node whose CSINode does not list a driver the
new pod's volumes need, where that driver's CSIDriver sets `preventPodSchedulingIfMissing`, is
"<driver> CSI driver is not installed on the node" (Unschedulable).

A node over a driver's limit is "node(s) exceed max volume count" (Unschedulable). A
claim the new pod names that does not exist is UnschedulableAndUnresolvable. PreFilter
answers Skip for a pod without claims, ephemeral or migratable inline volumes, so pods
without volumes cost one dict lookup.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable
from typing import Any

import numpy as np

from kopfsched import features
from kopfsched.framework.cycle_state import CycleState, StateKey
from kopfsched.framework.events import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    EventResource,
    QueueingHint,
)
from kopfsched.framework.interface import PreFilterResult, SignFragment
from kopfsched.framework.node_table import NodeTable
from kopfsched.framework.registry import PluginFactory
from kopfsched.framework.status import SKIP, Status
from kopfsched.framework.types import NodeInfo, Obj, PodInfo
from kopfsched.plugins.helper import objects, signers
from kopfsched.plugins.helper.volumes import (
    PVC_RESOURCE,
    bound_volume_name,
    claim_class,
    claim_hint,
    ephemeral_claim_name,
    ephemeral_claim_owned_error,
    not_found,
    pod_volumes,
)

NAME = "NodeVolumeLimits"
ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED = "node(s) exceed max volume count"
MIGRATED_PLUGINS_ANNOTATION = "storage.alpha.kubernetes.io/migrated-plugins"

AWS_EBS = "kubernetes.io/aws-ebs"
GCE_PD = "kubernetes.io/gce-pd"
AZURE_DISK = "kubernetes.io/azure-disk"
AZURE_FILE = "kubernetes.io/azure-file"
CINDER = "kubernetes.io/cinder"
VSPHERE = "kubernetes.io/vsphere-volume"
PORTWORX = "kubernetes.io/portworx-volume"

IN_TREE_SOURCES: dict[str, tuple[str, str]] = {
    "awsElasticBlockStore": (AWS_EBS, "ebs.csi.aws.com"),
    "gcePersistentDisk": (GCE_PD, "pd.csi.storage.gke.io"),
    "azureDisk": (AZURE_DISK, "disk.csi.azure.com"),
    "azureFile": (AZURE_FILE, "file.csi.azure.com"),
    "cinder": (CINDER, "cinder.csi.openstack.org"),
    "vsphereVolume": (VSPHERE, "csi.vsphere.vmware.com"),
    "portworxVolume": (PORTWORX, "pxd.portworx.com"),
}
"""Volume source field → (in-tree plugin name, CSI driver), as csi-translation-lib."""
CSI_DRIVER_OF_PLUGIN = {plugin: driver for plugin, driver in IN_TREE_SOURCES.values()}

_ALWAYS_MIGRATED = frozenset({AWS_EBS, GCE_PD, AZURE_DISK, CINDER})
"""Migration is GA and locked on for these; Portworx also needs the CSINode annotation."""
_UNSPECIFIED = "UNSPECIFIED"
_EBS_VOLUME_ID = re.compile(r"^vol-[^/]*$")
_LABEL_BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
_LABEL_ZONE = "topology.kubernetes.io/zone"

VolumeMap = dict[str, str]
"""Unique volume name ("driver/volumeHandle") → driver."""


class TranslationError(Exception):
    """An in-tree volume that csi-translation-lib cannot express as CSI."""


class _FilterError(Exception):
    def __init__(self, status: Status) -> None:
        super().__init__(status.message)
        self.status = status


class PreFilterState:
    """The node name → VolumeAttachments index, built once per cycle."""

    __slots__ = ("attachments",)

    def __init__(self, attachments: dict[str, list[Obj]]) -> None:
        self.attachments = attachments


PRE_FILTER_STATE = StateKey[PreFilterState](NAME, "PreFilterNodeVolumeLimits")


# -- csi-translation-lib, the parts the limit needs ---------------------------------------------


def in_tree_source(spec: Obj) -> tuple[str, Obj] | None:
    """The first in-tree migratable source set in a volume or PV spec: (field, source)."""
    for key in IN_TREE_SOURCES:
        source = spec.get(key)
        if source is not None:
            return key, source
    return None


def is_inline_migratable(volume: Obj) -> bool:
    return in_tree_source(volume) is not None


def is_csi_migration_on(csi_node: Obj | None, plugin: str) -> bool:
    if csi_node is None or not plugin:
        return False
    if plugin in _ALWAYS_MIGRATED:
        return True
    if plugin != PORTWORX:
        return False
    annotation = (objects.meta(csi_node).get("annotations") or {}).get(MIGRATED_PLUGINS_ANNOTATION) or ""
    return plugin in annotation.split(",")


def _ebs_volume_id(kubernetes_id: str) -> str:
    """KubernetesVolumeIDToEBSVolumeID: aws://zone/vol-123 → vol-123; bare ids pass."""
    if not kubernetes_id.startswith("aws://"):
        return kubernetes_id
    rest = kubernetes_id[len("aws://"):]  # host (the zone, maybe empty), then the path
    aws_id = rest[rest.index("/"):].strip("/") if "/" in rest else ""
    if not _EBS_VOLUME_ID.match(aws_id):
        raise TranslationError(f"failed to translate Kubernetes ID to EBS Volume ID Invalid format for AWS volume "
                               f"({kubernetes_id})")
    return aws_id


def _gce_volume_handle(source: Obj, pv: Obj | None) -> str:
    pd_name = source.get("pdName", "")
    if pv is None:
        return f"projects/{_UNSPECIFIED}/zones/{_UNSPECIFIED}/disks/{pd_name}"
    labels = objects.meta(pv).get("labels") or {}
    zones = [z for z in (labels.get(_LABEL_BETA_ZONE) or labels.get(_LABEL_ZONE) or "").split("__") if z]
    if len(zones) > 1:  # a regional disk
        return f"projects/{_UNSPECIFIED}/regions/{zones[0].rsplit('-', 1)[0]}/disks/{pd_name}"
    return f"projects/{_UNSPECIFIED}/zones/{zones[0] if zones else _UNSPECIFIED}/disks/{pd_name}"


def translate(key: str, source: Obj, pv: Obj | None) -> str:
    """The CSI volume handle of an in-tree source (inline when `pv` is None)."""
    if key == "awsElasticBlockStore":
        return _ebs_volume_id(source.get("volumeID", ""))
    if key == "gcePersistentDisk":
        return _gce_volume_handle(source, pv)
    if key == "azureDisk":
        kind = source.get("kind")
        if kind is not None and str(kind).lower() != "managed":
            raise TranslationError(f"kind({kind}) is not supported in csi migration")
        return source.get("diskURI", "")
    if key in ("cinder", "portworxVolume"):
        return source.get("volumeID", "")
    if key == "vsphereVolume":
        return source.get("volumePath", "")
    return source.get("shareName", "")  # azureFile


# -- the plugin ---------------------------------------------------------------------------------


class CSILimits:
    name = NAME

    def __init__(self, args: Any = None, handle: Any = None) -> None:
        self.handle = handle
        # Unbound claims get a volume handle of their own that no real volume can have.
        self.random_volume_id_prefix = uuid.uuid4().hex
        self.enable_volume_limit_scaling = features.enabled(features.VOLUME_LIMIT_SCALING)

    @property
    def _objects(self) -> Any:
        return self.handle.objects

    def sign_pod(self, pod: PodInfo) -> list[SignFragment]:
        return [signers.volumes(pod)]

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]) -> PreFilterResult | Status | None:
        volumes = pod.spec.get("volumes")
        if not volumes or not any(_counted_kind(v) for v in volumes):
            return SKIP
        state.write(PRE_FILTER_STATE, PreFilterState(self._attachments_by_node()))
        return None

    def _attachments_by_node(self) -> dict[str, list[Obj]]:
        by_node: dict[str, list[Obj]] = {}
        for va in self._objects.list("VolumeAttachment"):
            by_node.setdefault(objects.spec(va).get("nodeName") or "", []).append(va)
        return by_node

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        return self._filter_on(state, pod, node, self._objects.get("CSINode", node.name))

    def passes_every_node(self, state: CycleState, pod: PodInfo, table: NodeTable) -> bool:
        """No CSINode anywhere (so no limit) and the pod's own volumes pass without one."""
        return not self._objects.list("CSINode") and self._filter_on(state, pod, None, None) is None

    def filter_nodes(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        """Nodes without a CSINode have no limit and judge the pod's volumes alike: one answer
        for all of them; the others node by node."""
        nodes = table.nodes
        passed = np.ones(len(rows), dtype=bool)
        without: Status | bool | None = False  # False: not computed yet
        for i, row in enumerate(rows.tolist()):
            node = nodes[row]
            csi_node = self._objects.get("CSINode", node.name)
            if csi_node is None:
                if without is False:
                    without = self._filter_on(state, pod, node, None)
                status = without
            else:
                status = self._filter_on(state, pod, node, csi_node)
            if status is not None:
                passed[i] = False
        return passed

    def filter_statuses(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: np.ndarray) -> list[Status]:
        nodes = table.nodes
        out: list[Status] = []
        without: Status | bool | None = False
        for row in rows.tolist():
            node = nodes[row]
            csi_node = self._objects.get("CSINode", node.name)
            if csi_node is None:
                if without is False:
                    without = self._filter_on(state, pod, node, None)
                status = without
            else:
                status = self._filter_on(state, pod, node, csi_node)
            out.append(status if isinstance(status, Status) else Status.as_error(
                f"{NAME}: node {node.name} passed the filter it was rejected by"))
        return out

    def _filter_on(self, state: CycleState, pod: PodInfo, node: NodeInfo | None,
                   csi_node: Obj | None) -> Status | None:
        """Filter on `node` and its CSINode; without a CSINode (no limits) the node is not read."""
        if not pod.spec.get("volumes"):
            return None
        try:
            new_volumes = self.attachable_volumes(pod, csi_node, new_pod=True)
            if not new_volumes:
                return None
            if self.enable_volume_limit_scaling:
                for driver in new_volumes.values():
                    if not self._driver_installed(driver, csi_node):
                        return Status.unschedulable(f"{driver} CSI driver is not installed on the node")
            limits = volume_limits(csi_node)
            if not limits:
                return None
            assert node is not None  # a CSINode's limits are a node's
            attached: VolumeMap = {}
            for existing in node.pods.values():
                attached.update(self.attachable_volumes(existing, csi_node, new_pod=False))
        except _FilterError as exc:
            return exc.status
        used: dict[str, int] = {}
        for unique, driver in attached.items():
            new_volumes.pop(unique, None)  # a volume shared with a pod on the node counts once
            used[driver] = used.get(driver, 0) + 1
        for unique, driver in self._node_attachments(state, node.name).items():
            if unique not in attached:
                used[driver] = used.get(driver, 0) + 1
        wanted: dict[str, int] = {}
        for driver in new_volumes.values():
            wanted[driver] = wanted.get(driver, 0) + 1
        for driver, count in wanted.items():
            limit = limits.get(driver)
            if limit is not None and used.get(driver, 0) + count > limit:
                return Status.unschedulable(ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED)
        return None

    def _driver_installed(self, driver: str, csi_node: Obj | None) -> bool:
        """checkCSIDriverOnNode: only a CSIDriver that opts in (preventPodSchedulingIfMissing)
        must be on the node's CSINode; an unknown driver may not be CSI at all."""
        csi_driver = self._objects.get("CSIDriver", driver)
        if csi_driver is None or not objects.spec(csi_driver).get("preventPodSchedulingIfMissing"):
            return True
        if csi_node is None:
            return False
        return any(entry.get("name") == driver for entry in objects.spec(csi_node).get("drivers") or ())

    def attachable_volumes(self, pod: PodInfo, csi_node: Obj | None, *, new_pod: bool) -> VolumeMap:
        """filterAttachableVolumes. Raises _FilterError with the status Filter returns."""
        result: VolumeMap = {}
        for volume in pod_volumes(pod.pod):
            if volume.get("persistentVolumeClaim") is not None:
                claim, ephemeral = volume["persistentVolumeClaim"].get("claimName") or "", False
            elif volume.get("ephemeral") is not None:
                claim, ephemeral = ephemeral_claim_name(pod.pod, volume), True
            else:
                self._add_inline(volume, csi_node, result)
                continue
            if not claim:
                raise _FilterError(Status.as_error("PersistentVolumeClaim had no name"))
            pvc = self._objects.get("PersistentVolumeClaim", claim, pod.namespace)
            if pvc is None:
                if new_pod:  # the pod cannot run without it
                    raise _FilterError(Status.unresolvable(
                        f"looking up PVC {pod.namespace}/{claim}: {not_found(PVC_RESOURCE, claim)}"))
                continue  # an existing pod's missing claim is not counted
            if ephemeral:
                problem = ephemeral_claim_owned_error(pod.pod, pvc)
                if problem is not None:
                    raise _FilterError(Status.as_error(problem))
            driver, handle = self._csi_driver_info(csi_node, pvc)
            if driver and handle:
                result[f"{driver}/{handle}"] = driver
        return result

    def _add_inline(self, volume: Obj, csi_node: Obj | None, result: VolumeMap) -> None:
        """checkAttachableInlineVolume: counted only when its plugin is migrated on the node."""
        found = in_tree_source(volume)
        if found is None:
            return
        key, source = found
        plugin, driver = IN_TREE_SOURCES[key]
        if not is_csi_migration_on(csi_node, plugin):
            return
        try:
            handle = translate(key, source, None)
        except TranslationError as exc:
            raise _FilterError(Status.as_error(
                f"converting volume({volume.get('name', '')}) from inline to csi: {exc}")) from None
        result[f"{driver}/{handle}"] = driver

    def _csi_driver_info(self, csi_node: Obj | None, pvc: Obj) -> tuple[str, str]:
        """getCSIDriverInfo: (driver, volume handle) of the claim's volume, or ("", "")."""
        pv_name = bound_volume_name(pvc)
        pv = self._objects.get("PersistentVolume", pv_name) if pv_name else None
        if pv is None:  # unbound, or bound to a volume not yet (or no longer) there
            return self._csi_driver_info_from_class(csi_node, pvc)
        pv_spec = objects.spec(pv)
        csi = pv_spec.get("csi")
        if csi is not None:
            return csi.get("driver") or "", csi.get("volumeHandle") or ""
        found = in_tree_source(pv_spec)
        if found is None:
            return "", ""
        key, source = found
        plugin, driver = IN_TREE_SOURCES[key]
        if not is_csi_migration_on(csi_node, plugin):
            return "", ""
        try:
            return driver, translate(key, source, pv)
        except TranslationError:
            return "", ""

    def _csi_driver_info_from_class(self, csi_node: Obj | None, pvc: Obj) -> tuple[str, str]:
        class_name = claim_class(pvc)
        if not class_name:  # no class: immediate binding, so it is bound before scheduling
            return "", ""
        storage_class = self._objects.get("StorageClass", class_name)
        if storage_class is None:
            return "", ""
        meta = objects.meta(pvc)
        handle = f"{self.random_volume_id_prefix}-{meta.get('namespace', 'default')}/{meta.get('name', '')}"
        provisioner = storage_class.get("provisioner") or ""
        if provisioner in CSI_DRIVER_OF_PLUGIN:
            if not is_csi_migration_on(csi_node, provisioner):
                return "", ""
            return CSI_DRIVER_OF_PLUGIN[provisioner], handle
        return provisioner, handle

    def _node_attachments(self, state: CycleState, node_name: str) -> VolumeMap:
        """getNodeVolumeAttachmentInfo: CSI volumes attached to the node, by their attacher."""
        s = state.get(PRE_FILTER_STATE)
        vas = s.attachments.get(node_name, ()) if s is not None else [
            va for va in self._objects.list("VolumeAttachment") if objects.spec(va).get("nodeName") == node_name]
        result: VolumeMap = {}
        for va in vas:
            spec = objects.spec(va)
            attacher, pv_name = spec.get("attacher") or "", (spec.get("source") or {}).get("persistentVolumeName")
            if not attacher or not pv_name:
                continue
            pv = self._objects.get("PersistentVolume", pv_name)
            csi = objects.spec(pv).get("csi") if pv is not None else None
            if csi is not None:
                result[f"{attacher}/{csi.get('volumeHandle') or ''}"] = attacher
        return result

    def events_to_register(self) -> Iterable[ClusterEventWithHint]:
        return [
            # Any new CSINode may have room; no hint.
            ClusterEventWithHint(ClusterEvent(EventResource.CSI_NODE, ActionType.ADD)),
            ClusterEventWithHint(ClusterEvent(EventResource.CSI_NODE, ActionType.UPDATE),
                                 is_schedulable_after_csi_node_updated),
            ClusterEventWithHint(ClusterEvent(EventResource.ASSIGNED_POD, ActionType.DELETE),
                                 is_schedulable_after_pod_deleted),
            ClusterEventWithHint(ClusterEvent(EventResource.PERSISTENT_VOLUME_CLAIM, ActionType.ADD),
                                 is_schedulable_after_pvc_added),
            ClusterEventWithHint(ClusterEvent(EventResource.VOLUME_ATTACHMENT, ActionType.DELETE),
                                 is_schedulable_after_volume_attachment_deleted),
        ]


def _counted_kind(volume: Obj) -> bool:
    return volume.get("persistentVolumeClaim") is not None or volume.get("ephemeral") is not None \
        or is_inline_migratable(volume)


def volume_limits(csi_node: Obj | None) -> dict[str, int]:
    """Driver → allocatable.count from the CSINode; a driver without a count has no limit."""
    limits: dict[str, int] = {}
    for driver in objects.spec(csi_node).get("drivers") or ():
        count = (driver.get("allocatable") or {}).get("count")
        if count is not None:
            limits[driver.get("name") or ""] = int(count)
    return limits


# -- queueing hints -----------------------------------------------------------------------------


def is_schedulable_after_csi_node_updated(pod: Any, old: Any, new: Any) -> QueueingHint:
    """Queue when some driver's count went up."""
    before, after = objects.raw(old), objects.raw(new)
    if before is None or after is None:
        return QueueingHint.QUEUE
    old_counts = {d.get("name"): (d.get("allocatable") or {}).get("count") or 0
                  for d in objects.spec(before).get("drivers") or ()}
    for driver in objects.spec(after).get("drivers") or ():
        count = (driver.get("allocatable") or {}).get("count")
        if count is not None and count > old_counts.get(driver.get("name"), 0):
            return QueueingHint.QUEUE
    return QueueingHint.SKIP


def is_schedulable_after_pod_deleted(pod: Any, old: Any, new: Any) -> QueueingHint:
    """Queue when the deleted pod was on (or nominated to) a node with a volume that counts."""
    deleted = objects.raw(old) or objects.raw(new)
    if deleted is None:
        return QueueingHint.QUEUE
    volumes = pod_volumes(deleted)
    nominated = (deleted.get("status") or {}).get("nominatedNodeName")
    if not volumes or (not objects.spec(deleted).get("nodeName") and not nominated):
        return QueueingHint.SKIP
    return QueueingHint.QUEUE if any(_counted_kind(v) for v in volumes) else QueueingHint.SKIP


def is_schedulable_after_pvc_added(pod: Any, old: Any, new: Any) -> QueueingHint:
    """Queue when the new claim is one of the pod's, directly or as an ephemeral volume's."""
    return claim_hint(pod, new, _uses_claim)


def _uses_claim(pvc: Obj, pod: Obj) -> bool:
    name = objects.meta(pvc).get("name")
    for volume in pod_volumes(pod):
        if volume.get("persistentVolumeClaim") is not None:
            claim = volume["persistentVolumeClaim"].get("claimName")
        elif volume.get("ephemeral") is not None:
            claim = ephemeral_claim_name(pod, volume)
        else:
            continue
        if claim == name:
            return True
    return False


def is_schedulable_after_volume_attachment_deleted(pod: Any, old: Any, new: Any) -> QueueingHint:
    """Queue when a detached volume may free a slot the pod needs: the pod uses claims, or an
    inline volume of the attacher's driver."""
    va, target = objects.raw(old) or objects.raw(new), objects.raw(pod)
    if va is None or target is None:
        return QueueingHint.QUEUE
    attacher = objects.spec(va).get("attacher")
    for volume in pod_volumes(target):
        if volume.get("persistentVolumeClaim") is not None or volume.get("ephemeral") is not None:
            return QueueingHint.QUEUE
        found = in_tree_source(volume)
        if found is not None and IN_TREE_SOURCES[found[0]][1] == attacher:
            return QueueingHint.QUEUE
    return QueueingHint.SKIP


PLUGIN = PluginFactory(name=NAME, factory=CSILimits)
