"""What changed in a pod or node update, as upstream's cluster events.

Upstream's `PodSchedulingPropertiesChange` / `NodeSchedulingPropertiesChange`
(pkg/scheduler/framework/events.go): an update becomes one event per kind of change,
so a plugin that cares only about, say, node taints is not woken by a label change.
The functions here take the plain API dicts and are free of queue state, so the
event handlers, the cache and simulate can all call them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kopfsched.framework.events import (
    ASSIGNED_POD_DELETE,
    FORCE_ACTIVATE,
    NODE_ADD,
    UNSCHEDULABLE_TIMEOUT,
    ActionType,
    ClusterEvent,
    EventResource,
)
from kopfsched.framework.resources import pod_requests, resize_infeasible

Obj = Mapping[str, Any]

_LABELS = {
    ActionType.ADD: "Add",
    ActionType.DELETE: "Delete",
    ActionType.UPDATE_NODE_ALLOCATABLE: "UpdateNodeAllocatable",
    ActionType.UPDATE_NODE_LABEL: "UpdateNodeLabel",
    ActionType.UPDATE_NODE_TAINT: "UpdateNodeTaint",
    ActionType.UPDATE_NODE_CONDITION: "UpdateNodeCondition",
    ActionType.UPDATE_NODE_ANNOTATION: "UpdateNodeAnnotation",
    ActionType.UPDATE_NODE_DECLARED_FEATURE: "UpdateNodeDeclaredFeature",
    ActionType.UPDATE_POD_LABEL: "UpdatePodLabel",
    ActionType.UPDATE_POD_SCALE_DOWN: "UpdatePodScaleDown",
    ActionType.UPDATE_POD_TOLERATION: "UpdatePodToleration",
    ActionType.UPDATE_POD_SCHEDULING_GATES_ELIMINATED: "UpdatePodSchedulingGatesEliminated",
    ActionType.UPDATE_POD_GENERATED_RESOURCE_CLAIM: "UpdatePodGeneratedResourceClaim",
    ActionType.UPDATE_OTHER: "UpdatePodOther",
}


def _meta(obj: Obj) -> Obj:
    return obj.get("metadata") or {}


def _spec(obj: Obj) -> Obj:
    return obj.get("spec") or {}


def _status(obj: Obj) -> Obj:
    return obj.get("status") or {}


def event_for(resource: EventResource, action: ActionType) -> ClusterEvent:
    """A single-action event labelled as upstream's ClusterEvent.Label() ("NodeUpdateNodeTaint")."""
    return ClusterEvent(resource, action, f"{resource}{_LABELS.get(action, action.name or '')}")


def split_actions(actions: ActionType) -> list[ActionType]:
    """The single flags of `actions`, in declaration order."""
    return [flag for flag in _LABELS if flag & actions]


_EVENTS: dict[tuple[EventResource, ActionType], tuple[ClusterEvent, ...]] = {}
"""(resource, actions) -> one event per flag (of the few combinations updates give)."""


def _events_for(resource: EventResource, actions: ActionType) -> list[ClusterEvent]:
    """[event_for(resource, a) for a in split_actions(actions)]: the same (frozen) events each time."""
    events = _EVENTS.get((resource, actions))
    if events is None:
        events = _EVENTS[(resource, actions)] = tuple(event_for(resource, a) for a in split_actions(actions))
    return list(events)


# --- nodes ---------------------------------------------------------------------------


def _conditions(node: Obj) -> dict[str, str]:
    """Condition type -> status; heartbeat and transition times do not count as a change."""
    return {c.get("type", ""): c.get("status", "") for c in _status(node).get("conditions") or ()}


def node_update_actions(old: Obj, new: Obj) -> ActionType:
    """The UpdateNode* flags for what changed between two versions of a node (empty flag: nothing).

    As upstream, `spec.unschedulable` turning false counts as a taint change (the
    NodeUnschedulable plugin registers taint updates for it).
    """
    actions = ActionType(0)
    old_unschedulable = bool(_spec(old).get("unschedulable"))
    new_unschedulable = bool(_spec(new).get("unschedulable"))
    if old_unschedulable != new_unschedulable and not new_unschedulable:
        actions |= ActionType.UPDATE_NODE_TAINT
    if (_status(old).get("allocatable") or {}) != (_status(new).get("allocatable") or {}):
        actions |= ActionType.UPDATE_NODE_ALLOCATABLE
    if (_meta(old).get("labels") or {}) != (_meta(new).get("labels") or {}):
        actions |= ActionType.UPDATE_NODE_LABEL
    if (_spec(old).get("taints") or []) != (_spec(new).get("taints") or []):
        actions |= ActionType.UPDATE_NODE_TAINT
    if _conditions(old) != _conditions(new):
        actions |= ActionType.UPDATE_NODE_CONDITION
    if (_meta(old).get("annotations") or {}) != (_meta(new).get("annotations") or {}):
        actions |= ActionType.UPDATE_NODE_ANNOTATION
    # Kept sorted by the kubelet, so a list comparison is enough (NodeDeclaredFeatures, locked on).
    if (_status(old).get("declaredFeatures") or []) != (_status(new).get("declaredFeatures") or []):
        actions |= ActionType.UPDATE_NODE_DECLARED_FEATURE
    return actions


def node_update_events(old: Obj, new: Obj) -> list[ClusterEvent]:
    """One Node event per kind of change; empty when nothing the scheduler reads changed."""
    return _events_for(EventResource.NODE, node_update_actions(old, new))


# --- pods ----------------------------------------------------------------------------


_REQUESTS_STATUS = ("containerStatuses", "initContainerStatuses", "resources", "allocatedResources")
"""The parts of a pod's status pod_requests reads, besides its PodResizePending condition."""


def same_requests(old: Obj, new: Obj) -> bool:
    """Whether pod_requests must give the same for both versions: the very same spec and status
    parts it reads (e.g. a status patch of the PodScheduled condition)."""
    if _spec(old) is not _spec(new):
        return False
    old_status, new_status = _status(old), _status(new)
    for part in _REQUESTS_STATUS:
        if old_status.get(part) is not new_status.get(part):
            return False
    return resize_infeasible(old) == resize_infeasible(new)


def _scaled_down(old: Obj, new: Obj) -> bool:
    """Any resource request removed or lowered (upstream's extractPodScaleDown)."""
    if same_requests(old, new):
        return False
    new_requests = pod_requests(new)
    return any(name not in new_requests or new_requests[name] < amount
               for name, amount in pod_requests(old).items())


def pod_update_actions(old: Obj, new: Obj) -> ActionType:
    """The UpdatePod* flags for what changed between two versions of a pod.

    UPDATE_OTHER when none of the specific changes happened, so plugins that registered
    a general Pod Update still hear about it.
    """
    actions = ActionType(0)
    if (_meta(old).get("labels") or {}) != (_meta(new).get("labels") or {}):
        actions |= ActionType.UPDATE_POD_LABEL
    if _scaled_down(old, new):
        actions |= ActionType.UPDATE_POD_SCALE_DOWN
    if _spec(old).get("schedulingGates") and not _spec(new).get("schedulingGates"):
        actions |= ActionType.UPDATE_POD_SCHEDULING_GATES_ELIMINATED
    # The API only lets tolerations be added, so a different count is a change.
    if len(_spec(old).get("tolerations") or ()) != len(_spec(new).get("tolerations") or ()):
        actions |= ActionType.UPDATE_POD_TOLERATION
    if (_status(old).get("resourceClaimStatuses") != _status(new).get("resourceClaimStatuses")
            or _status(old).get("extendedResourceClaimStatus") != _status(new).get("extendedResourceClaimStatus")):
        actions |= ActionType.UPDATE_POD_GENERATED_RESOURCE_CLAIM
    return actions or ActionType.UPDATE_OTHER


def pod_update_events(old: Obj, new: Obj) -> list[ClusterEvent]:
    """One event per kind of change, on AssignedPod when `new` has a node, else UnscheduledPod."""
    resource = EventResource.ASSIGNED_POD if _spec(new).get("nodeName") else EventResource.UNSCHEDULED_POD
    return _events_for(resource, pod_update_actions(old, new))


ASSIGNED_POD_ADD = event_for(EventResource.ASSIGNED_POD, ActionType.ADD)
NODE_DELETE = event_for(EventResource.NODE, ActionType.DELETE)
UNSCHEDULED_POD_ADD = event_for(EventResource.UNSCHEDULED_POD, ActionType.ADD)
UNSCHEDULED_POD_UPDATE = ClusterEvent(EventResource.UNSCHEDULED_POD, ActionType.UPDATE, "UnscheduledPodUpdate")

__all__ = [
    "ASSIGNED_POD_ADD",
    "ASSIGNED_POD_DELETE",
    "BACKOFF_COMPLETE",
    "FORCE_ACTIVATE",
    "NODE_ADD",
    "NODE_DELETE",
    "SCHEDULE_ATTEMPT_FAILURE",
    "UNSCHEDULABLE_TIMEOUT",
    "UNSCHEDULED_POD_ADD",
    "UNSCHEDULED_POD_UPDATE",
    "event_for",
    "node_update_actions",
    "node_update_events",
    "pod_update_actions",
    "pod_update_events",
    "split_actions",
]

# Labels of queue moves that are not cluster events (upstream's framework constants).
SCHEDULE_ATTEMPT_FAILURE = "ScheduleAttemptFailure"
BACKOFF_COMPLETE = "BackoffComplete"
