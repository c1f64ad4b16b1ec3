"""Cluster events and queueing hints: what can make a rejected pod schedulable again.

A plugin that rejects pods declares, through `EnqueueExtensions.events_to_register`, the
events that may change its mind, each with an optional hint function that looks at the
change and says QUEUE or SKIP. The queue consults only the plugins that rejected a pod.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


class EventResource(enum.StrEnum):
    POD = "Pod"
    ASSIGNED_POD = "AssignedPod"
    UNSCHEDULED_POD = "UnscheduledPod"
    NODE = "Node"
    PERSISTENT_VOLUME = "PersistentVolume"
    PERSISTENT_VOLUME_CLAIM = "PersistentVolumeClaim"
    STORAGE_CLASS = "StorageClass"
    CSI_NODE = "CSINode"
    VOLUME_ATTACHMENT = "VolumeAttachment"
    CSI_DRIVER = "CSIDriver"
    CSI_STORAGE_CAPACITY = "CSIStorageCapacity"
    NAMESPACE = "Namespace"
    POD_DISRUPTION_BUDGET = "PodDisruptionBudget"
    RESOURCE_CLAIM = "ResourceClaim"
    RESOURCE_SLICE = "ResourceSlice"
    DEVICE_CLASS = "DeviceClass"
    POD_GROUP = "podgroups.v1alpha1.scheduling.x-k8s.io"
    """scheduler-plugins' PodGroup, named as upstream names a custom resource's events (GVK)."""
    WILDCARD = "*"


class ActionType(enum.Flag):
    ADD = enum.auto()
    DELETE = enum.auto()
    UPDATE_NODE_ALLOCATABLE = enum.auto()
    UPDATE_NODE_LABEL = enum.auto()
    UPDATE_NODE_TAINT = enum.auto()
    UPDATE_NODE_CONDITION = enum.auto()
    UPDATE_NODE_ANNOTATION = enum.auto()
    UPDATE_NODE_DECLARED_FEATURE = enum.auto()
    UPDATE_POD_LABEL = enum.auto()
    UPDATE_POD_SCALE_DOWN = enum.auto()
    UPDATE_POD_TOLERATION = enum.auto()
    UPDATE_POD_SCHEDULING_GATES_ELIMINATED = enum.auto()
    UPDATE_POD_GENERATED_RESOURCE_CLAIM = enum.auto()
    UPDATE_OTHER = enum.auto()
    UPDATE = (
        UPDATE_NODE_ALLOCATABLE | UPDATE_NODE_LABEL | UPDATE_NODE_TAINT | UPDATE_NODE_CONDITION
        | UPDATE_NODE_ANNOTATION | UPDATE_NODE_DECLARED_FEATURE | UPDATE_POD_LABEL | UPDATE_POD_SCALE_DOWN
        | UPDATE_POD_TOLERATION
        | UPDATE_POD_SCHEDULING_GATES_ELIMINATED | UPDATE_POD_GENERATED_RESOURCE_CLAIM | UPDATE_OTHER
    )
    ALL = ADD | DELETE | UPDATE


@dataclass(frozen=True, slots=True)
class ClusterEvent:
    resource: EventResource
    action: ActionType
    label: str = ""

    def matches(self, registered: ClusterEvent) -> bool:
        """Whether this concrete event is one the registered (possibly wider) event covers."""
        if registered.resource is EventResource.WILDCARD:
            return bool(self.action & registered.action)
        if registered.resource is EventResource.POD:
            resource_ok = self.resource in (EventResource.POD, EventResource.ASSIGNED_POD,
                                            EventResource.UNSCHEDULED_POD)
        else:
            resource_ok = self.resource is registered.resource
        return resource_ok and bool(self.action & registered.action)

    def __str__(self) -> str:
        return self.label or f"{self.resource}{self.action.name}"


UNSCHEDULABLE_TIMEOUT = ClusterEvent(EventResource.WILDCARD, ActionType.ALL, "UnschedulableTimeout")
FORCE_ACTIVATE = ClusterEvent(EventResource.WILDCARD, ActionType.ALL, "ForceActivate")
NODE_ADD = ClusterEvent(EventResource.NODE, ActionType.ADD, "NodeAdd")
ASSIGNED_POD_DELETE = ClusterEvent(EventResource.ASSIGNED_POD, ActionType.DELETE, "AssignedPodDelete")


class QueueingHint(enum.Enum):
    SKIP = 0
    QUEUE = 1


QueueingHintFn = Callable[[Any, Any, Any], QueueingHint]
"""(pod, old object or None, new object or None) -> QUEUE or SKIP."""


@dataclass(frozen=True, slots=True)
class ClusterEventWithHint:
    event: ClusterEvent
    hint: QueueingHintFn | None = None
    """None means always QUEUE."""
