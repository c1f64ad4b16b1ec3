"""VolumeZone: a pod's bound PersistentVolumes must be in the node's zone and region.

PreFilter follows each of the pod's claims to its bound volume and collects the volume's
zone/region labels (GA and beta keys; a value may list several zones joined by "__").
Claims still waiting for their first consumer are left to VolumeBinding. A missing claim,
volume or class is UnschedulableAndUnresolvable. With no labelled volume, PreFilter
answers Skip, so pods without claims cost one dict lookup.

Filter passes nodes without any topology label (single-zone clusters); otherwise every
volume label must be on the node (a beta volume label may match the node's GA label) with
one of the volume's values: "node(s) had no available volume zone",
UnschedulableAndUnresolvable.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
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
    PV_RESOURCE,
    PVC_RESOURCE,
    STORAGE_CLASS_RESOURCE,
    WAIT_FOR_FIRST_CONSUMER,
    bound_volume_name,
    claim_class,
    claim_hint,
    claim_names,
    claimed_directly,
    go_quote,
    not_found,
)

NAME = "VolumeZone"
ERR_REASON_CONFLICT = "node(s) had no available volume zone"

LABEL_FAILURE_DOMAIN_BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
LABEL_FAILURE_DOMAIN_BETA_REGION = "failure-domain.beta.kubernetes.io/region"
LABEL_TOPOLOGY_ZONE = "topology.kubernetes.io/zone"
LABEL_TOPOLOGY_REGION = "topology.kubernetes.io/region"
TOPOLOGY_LABELS = (LABEL_FAILURE_DOMAIN_BETA_ZONE, LABEL_FAILURE_DOMAIN_BETA_REGION,
                   LABEL_TOPOLOGY_ZONE, LABEL_TOPOLOGY_REGION)
_GA_LABEL = {LABEL_FAILURE_DOMAIN_BETA_ZONE: LABEL_TOPOLOGY_ZONE,
             LABEL_FAILURE_DOMAIN_BETA_REGION: LABEL_TOPOLOGY_REGION}
MULTI_ZONE_DELIMITER = "__"


@dataclass(frozen=True, slots=True)
class PVTopology:
    """One topology label of a bound volume: its key and the zones (or regions) it allows."""

    pv_name: str
    key: str
    values: frozenset[str]


PRE_FILTER_STATE = StateKey[tuple[PVTopology, ...]](NAME, "PreFilterVolumeZone")


def label_zones_to_set(value: str) -> frozenset[str] | None:
    """volumehelpers.LabelZonesToSet; None when an element is empty (the label is ignored)."""
    zones = [zone.strip() for zone in value.split(MULTI_ZONE_DELIMITER)]
    return None if any(not zone for zone in zones) else frozenset(zones)


def pv_topologies(pv: Obj) -> list[PVTopology]:
    """The volume's zone/region labels; spec.nodeAffinity is NodeAffinity's (VolumeBinding's) job."""
    labels = objects.meta(pv).get("labels") or {}
    name = objects.meta(pv).get("name", "")
    found = []
    for key in TOPOLOGY_LABELS:
        if key in labels:
            values = label_zones_to_set(labels[key])
            if values is not None:
                found.append(PVTopology(name, key, values))
    return found


class VolumeZone:
    name = NAME

    def __init__(self, args: Any = None, handle: Any = None) -> None:
        self.handle = handle

    def sign_pod(self, pod: PodInfo) -> list[SignFragment]:
        return [signers.volumes(pod)]

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]) -> PreFilterResult | Status | None:
        if not pod.spec.get("volumes"):
            return SKIP
        topologies, status = self._pv_topologies_of(pod)
        if status is not None:
            return status
        if not topologies:
            return SKIP
        state.write(PRE_FILTER_STATE, topologies)
        return None

    def _pv_topologies_of(self, pod: PodInfo) -> tuple[tuple[PVTopology, ...], Status | None]:
        lister = self.handle.objects if self.handle is not None else None
        found: list[PVTopology] = []
        for claim in claim_names(pod.pod):
            if not claim:
                return (), Status.unresolvable("PersistentVolumeClaim had no name")
            pvc = lister.get("PersistentVolumeClaim", claim, pod.namespace) if lister is not None else None
            if pvc is None:
                return (), Status.unresolvable(not_found(PVC_RESOURCE, claim))
            pv_name = bound_volume_name(pvc)
            if not pv_name:
                status = self._unbound_claim_status(pvc)
                if status is not None:
                    return (), status
                continue  # WaitForFirstConsumer: VolumeBinding picks the volume
            pv = lister.get("PersistentVolume", pv_name) if lister is not None else None
            if pv is None:
                return (), Status.unresolvable(not_found(PV_RESOURCE, pv_name))
            found.extend(pv_topologies(pv))
        return tuple(found), None

    def _unbound_claim_status(self, pvc: Obj) -> Status | None:
        class_name = claim_class(pvc)
        if not class_name:
            return Status.unresolvable("PersistentVolumeClaim had no pv name and storageClass name")
        storage_class = self.handle.objects.get("StorageClass", class_name) if self.handle is not None else None
        if storage_class is None:
            return Status.unresolvable(not_found(STORAGE_CLASS_RESOURCE, class_name))
        mode = storage_class.get("volumeBindingMode")
        if not mode:
            return Status.unresolvable(f"VolumeBindingMode not set for StorageClass {go_quote(class_name)}")
        if mode == WAIT_FOR_FIRST_CONSUMER:
            return None
        return Status.unresolvable("PersistentVolume had no name")

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        if not pod.spec.get("volumes"):
            return None
        topologies = state.get(PRE_FILTER_STATE)
        if topologies is None:  # PreFilter did not run: compute here.
            topologies, status = self._pv_topologies_of(pod)
            if status is not None:
                return status
        labels = node.labels
        if not any(key in labels for key in TOPOLOGY_LABELS):
            return None  # a node without topology labels: a single-zone cluster
        for topology in topologies:
            value = labels.get(topology.key)
            if value is None:
                value = labels.get(_GA_LABEL.get(topology.key, topology.key))
            if value is None or value not in topology.values:
                return Status.unresolvable(ERR_REASON_CONFLICT)
        return None

    def events_to_register(self) -> Iterable[ClusterEventWithHint]:
        return [
            # A WaitForFirstConsumer class lets the claim wait for VolumeBinding; the mode is immutable.
            ClusterEventWithHint(ClusterEvent(EventResource.STORAGE_CLASS, ActionType.ADD),
                                 is_schedulable_after_storage_class_added),
            ClusterEventWithHint(ClusterEvent(EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL)),
            # A new claim, or one that got its volumeName.
            ClusterEventWithHint(
                ClusterEvent(EventResource.PERSISTENT_VOLUME_CLAIM, ActionType.ADD | ActionType.UPDATE),
                is_schedulable_after_pvc_change),
            # A new volume, or new zone labels on one.
            ClusterEventWithHint(ClusterEvent(EventResource.PERSISTENT_VOLUME, ActionType.ADD | ActionType.UPDATE),
                                 is_schedulable_after_pv_change),
        ]


def is_schedulable_after_pvc_change(pod: Any, old: Any, new: Any) -> QueueingHint:
    return claim_hint(pod, new, claimed_directly)


def is_schedulable_after_storage_class_added(pod: Any, old: Any, new: Any) -> QueueingHint:
    added = objects.raw(new)
    if added is None:
        return QueueingHint.QUEUE
    return QueueingHint.QUEUE if added.get("volumeBindingMode") == WAIT_FOR_FIRST_CONSUMER else QueueingHint.SKIP


def is_schedulable_after_pv_change(pod: Any, old: Any, new: Any) -> QueueingHint:
    before, after = objects.raw(old), objects.raw(new)
    if before is None or after is None:
        return QueueingHint.QUEUE
    return QueueingHint.QUEUE if pv_topologies(before) != pv_topologies(after) else QueueingHint.SKIP


PLUGIN = PluginFactory(name=NAME, factory=VolumeZone)
