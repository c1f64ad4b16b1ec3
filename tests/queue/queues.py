"""What queue tests build queues from: a PrioritySort-like less, profiles with hints, pods, the
cluster events plugins register for, and readers of the queue's contents."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kopfsched.framework.events import ActionType, ClusterEvent, ClusterEventWithHint, EventResource, QueueingHint
from kopfsched.framework.queued import QueuedPodInfo
from kopfsched.framework.status import Status
from kopfsched.framework.types import PodInfo
from kopfsched.queue import QueueProfile, SchedulingQueue
from tests.builders import make_pod


def priority_less(a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
    """PrioritySort: higher priority first, then the earlier queue timestamp."""
    if a.priority != b.priority:
        return a.priority > b.priority
    return a.timestamp < b.timestamp


def scheduling_gates(pod: PodInfo) -> Status | None:
    """What the runtime's PreEnqueue would return with the SchedulingGates plugin enabled."""
    gates = pod.spec.get("schedulingGates")
    if not gates:
        return None
    names = " ".join(g["name"] for g in gates)
    return Status.unresolvable(f"waiting for scheduling gates: [{names}]").with_plugin("SchedulingGates")


def make_profile(hints: dict[str, list[ClusterEventWithHint]] | None = None, **kwargs: Any) -> QueueProfile:
    return QueueProfile(pre_enqueue=scheduling_gates, hints=dict(hints or {}), **kwargs)


def pod(name: str, *, priority: int | None = None, scheduler_name: str | None = None, **kwargs: Any) -> PodInfo:
    return PodInfo(make_pod(name, priority=priority, scheduler_name=scheduler_name, uid=f"uid-{name}", **kwargs))


def names(pods: list[Any]) -> list[str]:
    return [p.pod_info.name if isinstance(p, QueuedPodInfo) else p.name for p in pods]


def contents(queue: SchedulingQueue) -> dict[str, list[str]]:
    """Every queue's pods by name: activeQ in pop order, backoffQ by expiry, pools by name."""
    return {
        "active": names(queue.active_pods()),
        "backoff": names(queue.backoff_pods()),
        "unschedulable": sorted(names(queue.unschedulable_pods())),
        "gated": sorted(names(queue.gated_pods())),
    }


NODE_TAINT_UPDATE = ClusterEvent(EventResource.NODE, ActionType.UPDATE_NODE_TAINT)
NODE_LABEL_UPDATE = ClusterEvent(EventResource.NODE, ActionType.UPDATE_NODE_LABEL)
POD_DELETE_OR_SCALE_DOWN = ClusterEvent(EventResource.POD, ActionType.DELETE | ActionType.UPDATE_POD_SCALE_DOWN)
POD_LABEL_UPDATE = ClusterEvent(EventResource.POD, ActionType.UPDATE_POD_LABEL)
GATES_ELIMINATED = ClusterEvent(EventResource.POD, ActionType.UPDATE_POD_SCHEDULING_GATES_ELIMINATED)


def untainted_node(pod: Any, old: Any, new: Any) -> QueueingHint:
    """A TaintToleration-like hint: only a node without taints helps."""
    return QueueingHint.SKIP if (new.get("spec") or {}).get("taints") else QueueingHint.QUEUE


def broken_hint(pod: Any, old: Any, new: Any) -> QueueingHint:
    raise RuntimeError("hint bug")


HINTS = {
    "NodeResourcesFit": [ClusterEventWithHint(ClusterEvent(EventResource.NODE, ActionType.ADD)),
                         ClusterEventWithHint(POD_DELETE_OR_SCALE_DOWN)],
    "NodeAffinity": [ClusterEventWithHint(NODE_LABEL_UPDATE)],
    "TaintToleration": [ClusterEventWithHint(NODE_TAINT_UPDATE, untainted_node)],
    "Broken": [ClusterEventWithHint(NODE_TAINT_UPDATE, broken_hint)],
    "InterPodAffinity": [ClusterEventWithHint(POD_LABEL_UPDATE)],
    "SchedulingGates": [ClusterEventWithHint(GATES_ELIMINATED)],
    "Coscheduling": [ClusterEventWithHint(ClusterEvent(EventResource.POD, ActionType.ADD))],
    "Gang": [ClusterEventWithHint(ClusterEvent(EventResource.NODE, ActionType.ADD))],
}


def fail(queue: SchedulingQueue, *, unschedulable: Iterable[str] = (), pending: Iterable[str] = (),
         expect: str | None = None) -> QueuedPodInfo:
    """Pop the head pod and report its attempt failed, rejected by the given plugins."""
    qpi = queue.pop()
    assert qpi is not None
    if expect is not None:
        assert qpi.pod_info.name == expect
    qpi.unschedulable_plugins = set(unschedulable)
    qpi.pending_plugins = set(pending)
    queue.add_unschedulable_if_not_present(qpi)
    return qpi


def empty(**overrides: list[str]) -> dict[str, list[str]]:
    return {"active": [], "backoff": [], "unschedulable": [], "gated": [], **overrides}
