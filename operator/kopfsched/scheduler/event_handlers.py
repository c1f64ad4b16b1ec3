"""Cluster events in, cache and queue updates out (upstream's eventhandlers.go).

The kube layer's watch handlers and the offline simulator both call these, so the
scheduler reacts the same way to a real watch and to a simulated one.
"""

from __future__ import annotations

from kopfsched import features
from kopfsched.framework.events import ActionType, ClusterEvent, EventResource
from kopfsched.framework.types import Obj, PodInfo
from kopfsched.plugins.dynamicresources import DEVICE_TAINT_RULE, RESOURCE_SLICE, rule_selects
from kopfsched.queue.events import same_requests
from kopfsched.scheduler.scheduler import Scheduler

_TERMINAL_PHASES = ("Succeeded", "Failed")

OBJECT_RESOURCES: dict[str, EventResource] = {
    "PersistentVolume": EventResource.PERSISTENT_VOLUME,
    "PersistentVolumeClaim": EventResource.PERSISTENT_VOLUME_CLAIM,
    "StorageClass": EventResource.STORAGE_CLASS,
    "CSINode": EventResource.CSI_NODE,
    "VolumeAttachment": EventResource.VOLUME_ATTACHMENT,
    "CSIDriver": EventResource.CSI_DRIVER,
    "CSIStorageCapacity": EventResource.CSI_STORAGE_CAPACITY,
    "Namespace": EventResource.NAMESPACE,
    "PodDisruptionBudget": EventResource.POD_DISRUPTION_BUDGET,
    "PodGroup": EventResource.POD_GROUP,
    "ResourceClaim": EventResource.RESOURCE_CLAIM,
    "ResourceSlice": EventResource.RESOURCE_SLICE,
    "DeviceClass": EventResource.DEVICE_CLASS,
}

_OBJECT_ADDED = {resource: ClusterEvent(resource, ActionType.ADD) for resource in OBJECT_RESOURCES.values()}
_OBJECT_UPDATED = {resource: ClusterEvent(resource, ActionType.UPDATE) for resource in OBJECT_RESOURCES.values()}
_OBJECT_DELETED = {resource: ClusterEvent(resource, ActionType.DELETE) for resource in OBJECT_RESOURCES.values()}
"""The events of on_object_upsert and on_object_delete, built once (a PreBind's volume writes
echo several per pod)."""


def _assigned(pod: Obj) -> bool:
    return bool((pod.get("spec") or {}).get("nodeName"))


def _uid(pod: Obj) -> str:
    """The pod's PodInfo.uid, without building the PodInfo."""
    meta = pod.get("metadata") or {}
    uid: str = meta.get("uid") or f"{meta.get('namespace', 'default')}/{meta.get('name', '')}"
    return uid


def _confirming(assumed: PodInfo, pod: Obj) -> PodInfo:
    """The PodInfo of the bound pod the watch shows for an assumed one: the assumed one's
    computed parts when spec and labels are what was assumed (the usual case: our own bind),
    else built anew."""
    unchanged = (pod.get("spec") == assumed.spec
                 and ((pod.get("metadata") or {}).get("labels") or {}) == assumed.labels)
    return assumed.placed(pod) if unchanged else PodInfo(pod)


def _status_patched(old: Obj | None, pod: Obj) -> bool:
    """`pod` is `old` with another status, and none of the parts of it that requests read changed:
    the same metadata and spec objects (a merge of a status patch keeps them)."""
    return (old is not None and pod.get("metadata") is old.get("metadata") and pod.get("spec") is old.get("spec")
            and same_requests(old, pod))


class EventHandlers:
    def __init__(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler
        self.cache = scheduler.cache
        self.queue = scheduler.queue

    # -- pods --------------------------------------------------------------------------------

    def on_pod_upsert(self, pod: Obj, old: Obj | None = None, *, timestamp: float | None = None) -> None:
        """ADDED or MODIFIED (old is None on the watch's first sight of the pod).
        `timestamp` is the queue timestamp of a new pending pod (default: now)."""
        # Phase and nodeName read inline: every watch event of a pod (our own bind's echo
        # among them) comes this way.
        if (pod.get("status") or {}).get("phase") in _TERMINAL_PHASES:
            self.on_pod_delete(pod)
            return
        uid = _uid(pod)
        if (pod.get("spec") or {}).get("nodeName"):
            assumed = self.cache.assumed_pod(uid)
            known = assumed if assumed is not None else self.cache.get_pod(uid)
            bound_before = known is not None and assumed is None
            placed = None
            if old is None or not _assigned(old):
                placed = _confirming(assumed, pod) if assumed is not None else PodInfo(pod)
                # A pod first seen bound (a listing: most of a cluster's pods) that neither the
                # cache nor any queue knows has nothing to delete (and no binding cycle to stop).
                if old is not None or known is not None or self.queue.where(uid) is not None:
                    self.queue.delete(placed)
                self.scheduler.unmanaged.discard(uid)
                self.scheduler.pending.forget(uid)
            # One PodInfo for both: building it (resource sums) was most of loading a large snapshot.
            pod_info = self.cache.add_pod(pod, pod_info=placed)
            if known is not None and bound_before:
                self.queue.assigned_pod_updated(known, pod_info)
            else:
                self.queue.assigned_pod_added(pod_info)
            return
        if self.cache.is_assumed(uid):
            # Being bound (by one of our profiles: schedulerName cannot change): an update (e.g.
            # our own status patch) must not queue it again. Checked before building a PodInfo.
            return
        # The queue's PodInfo of `old` when it has that very object (e.g. the echo of our own
        # status patch of a pod that failed): not built again, and the new version's computed
        # parts taken from it when only the status changed, and none of what requests read.
        known = self.queue.pod_info(uid) if old is not None else None
        if known is not None and known.pod is not old:
            known = None
        pod_info = known.placed(pod) if known is not None and _status_patched(old, pod) else PodInfo(pod)
        if not self.scheduler.profiles.responsible_for(pod_info):
            self.scheduler.unmanaged.add(pod_info)
            self.scheduler.pending.forget(pod_info.uid)  # e.g. its schedulerName changed
            return
        if old is None:
            self.queue.add(pod_info, timestamp=timestamp)
        else:
            self.queue.update(known if known is not None else PodInfo(old), pod_info)

    def on_pod_delete(self, pod: Obj) -> None:
        pod_info = PodInfo(pod)
        self.scheduler.unmanaged.discard(pod_info.uid)
        self.scheduler.pending.forget(pod_info.uid)
        removed = self.cache.remove_pod(pod)
        if removed is not None:
            self.queue.assigned_pod_deleted(removed)
        self.queue.delete(pod_info)
        waiting = self.scheduler.waiting_pods.get(pod_info.uid)
        if waiting is not None:
            waiting.reject("", "pod was deleted")

    # -- nodes --------------------------------------------------------------------------------

    def on_node_upsert(self, node: Obj, old: Obj | None = None) -> None:
        known = self.cache.get_node(node["metadata"]["name"])
        previous = old if old is not None else (known.node if known is not None else None)
        self.cache.add_node(node)
        if previous is None:
            self.queue.node_added(node)
        else:
            self.queue.node_updated(previous, node)

    def on_node_delete(self, node: Obj) -> None:
        self.cache.remove_node(node["metadata"]["name"])
        self.queue.node_deleted(node)

    # -- other objects -----------------------------------------------------------------------

    def on_object_upsert(self, kind: str, obj: Obj) -> None:
        old = self.cache.objects.upsert(kind, obj)
        if kind == DEVICE_TAINT_RULE:
            self._taint_rule_changed(old, obj)
            return
        resource = OBJECT_RESOURCES.get(kind)
        if resource is not None:
            event = (_OBJECT_ADDED if old is None else _OBJECT_UPDATED)[resource]
            self.queue.move_all_to_active_or_backoff(event, old, obj)

    def on_object_delete(self, kind: str, obj: Obj) -> None:
        old = self.cache.objects.delete(kind, obj)
        if kind == DEVICE_TAINT_RULE:
            if old is not None:
                self._taint_rule_changed(old, None)
            return
        resource = OBJECT_RESOURCES.get(kind)
        if resource is not None and old is not None:
            self.queue.move_all_to_active_or_backoff(_OBJECT_DELETED[resource], old, None)

    def _taint_rule_changed(self, old: Obj | None, new: Obj | None) -> None:
        """A DeviceTaintRule changes the taints of the devices it selects: upstream's
        ResourceSlice tracker reports that as an update of their ResourceSlices, and only when
        some device's taints did change (not for a status update, nor a rule that selects
        nothing). Nothing at all with DRADeviceTaintRules off: no informer watches the rules."""
        if not features.enabled(features.DRA_DEVICE_TAINT_RULES):
            return
        def effect(rule: Obj | None) -> object:
            spec = (rule or {}).get("spec") or {}
            return (spec.get("deviceSelector"), spec.get("taint")) if spec.get("deviceSelector") is not None else None
        if effect(old) == effect(new):
            return
        slices = self.cache.objects.list(RESOURCE_SLICE)
        if rule_selects(old, slices) or rule_selects(new, slices):
            self.queue.move_all_to_active_or_backoff(
                ClusterEvent(EventResource.RESOURCE_SLICE, ActionType.UPDATE), old, new)

