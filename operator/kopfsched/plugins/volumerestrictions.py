"""VolumeRestrictions: volumes that cannot be shared the way the pod wants to share them.

- Inline GCE PD, AWS EBS, RBD and iSCSI volumes conflict with the same disk already
  mounted by a pod on the node (unless every mount is read-only, where the volume type
  allows that): "node(s) had no available disk".
- A ReadWriteOncePod claim already used by a scheduled pod (anywhere in the cluster)
  rejects every node; Unschedulable, so preempting that pod can help.

PreFilter reads the pod's claims (a missing claim is UnschedulableAndUnresolvable) and
counts the ReadWriteOncePod ones in use; it answers Skip when the pod has none of the
conflicting volume types and no such claim is in use, so pods without volumes cost one
dict lookup. AddPod/RemovePod keep the in-use count right in preemption's dry runs.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kopfsched.framework.cycle_state import CycleState, StateKey
from kopfsched.framework.events import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    EventResource,
    QueueingHint,
)
from kopfsched.framework.interface import PreFilterResult, SignFragment
from kopfsched.framework.registry import PluginFactory
from kopfsched.framework.status import SKIP, Status
from kopfsched.framework.types import NodeInfo, Obj, PodInfo
from kopfsched.plugins.helper import objects, signers
from kopfsched.plugins.helper.volumes import (
    PVC_RESOURCE,
    access_modes,
    claim_hint,
    claim_names,
    claimed_directly,
    not_found,
    pod_volumes,
)

NAME = "VolumeRestrictions"
ERR_REASON_DISK_CONFLICT = "node(s) had no available disk"
ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT = (
    "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already in-use by another pod"
)
READ_WRITE_ONCE_POD = "ReadWriteOncePod"
_CONFLICT_TYPES = ("gcePersistentDisk", "awsElasticBlockStore", "rbd", "iscsi")


class PreFilterState:
    """The pod's ReadWriteOncePod claim names and how many scheduled pods reference them."""

    __slots__ = ("conflicting_pvc_ref_count", "read_write_once_pod_pvcs")

    def __init__(self, pvcs: frozenset[str], conflicting_pvc_ref_count: int) -> None:
        self.read_write_once_pod_pvcs = pvcs
        self.conflicting_pvc_ref_count = conflicting_pvc_ref_count

    def update_with_pod(self, pod: PodInfo, multiplier: int) -> None:
        # By claim name only, whatever the pod's namespace, as upstream.
        self.conflicting_pvc_ref_count += multiplier * sum(
            1 for name in claim_names(pod.pod) if name in self.read_write_once_pod_pvcs
        )

    def clone(self) -> PreFilterState:
        return PreFilterState(self.read_write_once_pod_pvcs, self.conflicting_pvc_ref_count)


PRE_FILTER_STATE = StateKey[PreFilterState](NAME, "PreFilterVolumeRestrictions")


def needs_restrictions_check(volume: Obj) -> bool:
    return any(volume.get(kind) is not None for kind in _CONFLICT_TYPES)


def is_volume_conflict(volume: Obj, pod: Obj) -> bool:
    """Whether `volume` (of the pod being scheduled) conflicts with one of `pod`'s volumes."""
    for existing in pod_volumes(pod):
        disk, other = volume.get("gcePersistentDisk"), existing.get("gcePersistentDisk")
        if disk is not None and other is not None and disk.get("pdName") == other.get("pdName") \
                and not (disk.get("readOnly") and other.get("readOnly")):
            return True
        ebs, other = volume.get("awsElasticBlockStore"), existing.get("awsElasticBlockStore")
        if ebs is not None and other is not None and ebs.get("volumeID") == other.get("volumeID"):
            return True
        iscsi, other = volume.get("iscsi"), existing.get("iscsi")
        # Two iSCSI volumes are the same when they share the IQN; only read-only mounts may share.
        if iscsi is not None and other is not None and iscsi.get("iqn") == other.get("iqn") \
                and not (iscsi.get("readOnly") and other.get("readOnly")):
            return True
        rbd, other = volume.get("rbd"), existing.get("rbd")
        # The same RBD image: a common Ceph monitor, the same pool and the same image.
        if rbd is not None and other is not None \
                and set(rbd.get("monitors") or ()) & set(other.get("monitors") or ()) \
                and rbd.get("pool", "rbd") == other.get("pool", "rbd") and rbd.get("image") == other.get("image") \
                and not (rbd.get("readOnly") and other.get("readOnly")):
            return True
    return False


def satisfy_volume_conflicts(pod: Obj, pods: Iterable[PodInfo]) -> bool:
    checked = [v for v in pod_volumes(pod) if needs_restrictions_check(v)]
    if not checked:
        return True
    existing = list(pods)
    return not any(is_volume_conflict(volume, other.pod) for volume in checked for other in existing)


class VolumeRestrictions:
    name = NAME

    def __init__(self, args: Any = None, handle: Any = None) -> None:
        self.handle = handle

    def sign_pod(self, pod: PodInfo) -> list[SignFragment]:
        return [signers.volumes(pod)]

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]) -> PreFilterResult | Status | None:
        volumes = pod.spec.get("volumes")
        if not volumes:
            return SKIP
        needs_check = any(needs_restrictions_check(v) for v in volumes)
        pvcs, status = self._read_write_once_pod_pvcs(pod)
        if status is not None:
            return status
        # At most one pod can use a ReadWriteOncePod claim, so one user is a conflict.
        in_use = sum(1 for name in pvcs if _used_by_pods(f"{pod.namespace}/{name}", nodes))
        if not needs_check and in_use == 0:
            return SKIP
        state.write(PRE_FILTER_STATE, PreFilterState(pvcs, in_use))
        return None

    def _read_write_once_pod_pvcs(self, pod: PodInfo) -> tuple[frozenset[str], Status | None]:
        names: set[str] = set()
        lister = self.handle.objects if self.handle is not None else None
        for claim in claim_names(pod.pod):
            pvc = lister.get("PersistentVolumeClaim", claim, pod.namespace) if lister is not None else None
            if pvc is None:
                return frozenset(), Status.unresolvable(not_found(PVC_RESOURCE, claim))
            if READ_WRITE_ONCE_POD in access_modes(pvc):
                names.add((pvc.get("metadata") or {}).get("name", claim))
        return frozenset(names), None

    def add_pod(self, state: CycleState, pod: PodInfo, pod_to_add: PodInfo, node: NodeInfo) -> Status | None:
        return self._update(state, pod_to_add, +1)

    def remove_pod(self, state: CycleState, pod: PodInfo, pod_to_remove: PodInfo, node: NodeInfo) -> Status | None:
        return self._update(state, pod_to_remove, -1)

    @staticmethod
    def _update(state: CycleState, other: PodInfo, multiplier: int) -> Status | None:
        s = state.get(PRE_FILTER_STATE)
        if s is None:
            return Status.as_error(f'cannot read "PreFilter{NAME}" from cycleState')
        s.update_with_pod(other, multiplier)
        return None

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        if not satisfy_volume_conflicts(pod.pod, node.pods.values()):
            return Status.unschedulable(ERR_REASON_DISK_CONFLICT)
        s = state.get(PRE_FILTER_STATE)
        if s is None:
            return Status.as_error(f'cannot read "PreFilter{NAME}" from cycleState')
        if s.conflicting_pvc_ref_count > 0:
            return Status.unschedulable(ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT)
        return None

    def events_to_register(self) -> Iterable[ClusterEventWithHint]:
        return [
            # Volumes are immutable: only a deleted pod releases a disk or a claim.
            ClusterEventWithHint(ClusterEvent(EventResource.POD, ActionType.DELETE), is_schedulable_after_pod_deleted),
            # Every new node may fit; no hint.
            ClusterEventWithHint(ClusterEvent(EventResource.NODE, ActionType.ADD)),
            # The claim must exist for its access modes to be checked.
            ClusterEventWithHint(ClusterEvent(EventResource.PERSISTENT_VOLUME_CLAIM, ActionType.ADD),
                                 is_schedulable_after_pvc_added),
        ]


def _used_by_pods(key: str, nodes: Iterable[NodeInfo]) -> bool:
    return any(key in node.pvc_ref_counts for node in nodes)


def is_schedulable_after_pvc_added(pod: Any, old: Any, new: Any) -> QueueingHint:
    """Queue when the new claim is one the pod uses."""
    return claim_hint(pod, new, claimed_directly)


def is_schedulable_after_pod_deleted(pod: Any, old: Any, new: Any) -> QueueingHint:
    """Queue when the deleted pod held a disk ours conflicts with, or shared one of its claims
    (the claim's access mode is not looked up, as upstream)."""
    deleted, target = objects.raw(old) or objects.raw(new), objects.raw(pod)
    if deleted is None or target is None:
        return QueueingHint.QUEUE
    if objects.meta(deleted).get("namespace", "default") != objects.meta(target).get("namespace", "default"):
        return QueueingHint.SKIP
    if not satisfy_volume_conflicts(target, [PodInfo(deleted)]):
        return QueueingHint.QUEUE
    claims = set(claim_names(target))
    return QueueingHint.QUEUE if any(name in claims for name in claim_names(deleted)) else QueueingHint.SKIP


PLUGIN = PluginFactory(name=NAME, factory=VolumeRestrictions)
