"""SchedulingGates: PreEnqueue keeps a pod with `spec.schedulingGates` out of activeQ until
the gates are all removed (the UpdatePodSchedulingGatesEliminated pod event)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kopfsched.framework.events import ActionType, ClusterEvent, ClusterEventWithHint, EventResource, QueueingHint
from kopfsched.framework.registry import PluginFactory
from kopfsched.framework.status import Status
from kopfsched.framework.types import PodInfo

SCHEDULING_GATED = "SchedulingGated"
SCHEDULING_GATED_MESSAGE = "Scheduling is blocked due to non-empty scheduling gates"
"""The PodScheduled=False condition the API server puts on a pod created with schedulingGates
(pkg/registry/core/pod/strategy.go, applySchedulingGatedCondition): what a user sees on it."""


class SchedulingGates:
    name = "SchedulingGates"

    def __init__(self, args: Any = None, handle: Any = None) -> None:
        pass

    def pre_enqueue(self, pod: PodInfo) -> Status | None:
        gates = pod.spec.get("schedulingGates")
        if not gates:
            return None
        names = " ".join(gate.get("name", "") for gate in gates)
        # Go's %v of a []string: "[a b]".
        return Status.unresolvable(f"waiting for scheduling gates: [{names}]")

    def events_to_register(self) -> Iterable[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(
                ClusterEvent(EventResource.POD, ActionType.UPDATE_POD_SCHEDULING_GATES_ELIMINATED),
                _gates_eliminated,
            ),
        ]


def _gates_eliminated(pod: Any, old: Any, new: Any) -> QueueingHint:
    return QueueingHint.QUEUE


PLUGIN = PluginFactory(name=SchedulingGates.name, factory=SchedulingGates)
