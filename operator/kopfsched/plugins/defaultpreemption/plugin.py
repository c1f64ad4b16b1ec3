"""DefaultPreemption: the PostFilter that makes room for a pod by evicting lower-priority pods.

Extension points: PreEnqueue (async preemption, on by default upstream: a pod whose victims are
still being deleted waits, "waiting for the preemption for this pod to be finished"), PostFilter,
EnqueueExtensions (an assigned pod's deletion, with a hint that always skips: the pods it gated
are requeued by the plugins whose failures preemption tried to resolve).
Args: minCandidateNodesPercentage (0..100, default 10) and minCandidateNodesAbsolute
(>= 0, default 100), not both 0: the dry run stops after
max(nodes * percentage / 100, absolute) candidates.

The logic lives in `kopfsched.framework.preemption.Evaluator`; this class adapts it to the framework and
prefixes its messages with "preemption: " as upstream.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kopfsched.framework.cycle_state import CycleState
from kopfsched.framework.events import ActionType, ClusterEvent, ClusterEventWithHint, EventResource, QueueingHint
from kopfsched.framework.handle import Handle
from kopfsched.framework.interface import NodeToStatus, PostFilterResult
from kopfsched.framework.preemption import Evaluator
from kopfsched.framework.registry import check_known_fields, checked_args, int_field
from kopfsched.framework.status import Status
from kopfsched.framework.types import PodInfo

NAME = "DefaultPreemption"
MSG_WAITING_FOR_PREEMPTION = "waiting for the preemption for this pod to be finished"

_PERCENTAGE = "minCandidateNodesPercentage"
_ABSOLUTE = "minCandidateNodesAbsolute"


def _prefixed(result: PostFilterResult | None, status: Status | None) -> tuple[PostFilterResult | None, Status | None]:
    """Upstream prefixes preemption's message so it reads apart from the FitError's."""
    if status is not None and status.message:
        return result, Status(status.code, (f"preemption: {status.message}",), error=status.error)
    return result, status


@dataclass(frozen=True, slots=True)
class DefaultPreemptionArgs:
    min_candidate_nodes_percentage: int = 10
    """Candidates to find in the dry run, as a percentage of the nodes where preemption might help (0..100)."""
    min_candidate_nodes_absolute: int = 100
    """The least number of candidates to find in the dry run (>= 0); both 0 is invalid."""

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> DefaultPreemptionArgs:
        problems: list[tuple[str, str]] = []
        check_known_fields(raw, {_PERCENTAGE, _ABSOLUTE}, problems)
        percentage = int_field(raw, _PERCENTAGE, 10, problems)
        absolute = int_field(raw, _ABSOLUTE, 100, problems)
        args = cls(min_candidate_nodes_percentage=percentage, min_candidate_nodes_absolute=absolute)
        return checked_args(args, problems)

    def problems(self) -> list[tuple[str, str]]:
        """Upstream's ValidateDefaultPreemptionArgs, word for word."""
        found: list[tuple[str, str]] = []
        percentage, absolute = self.min_candidate_nodes_percentage, self.min_candidate_nodes_absolute
        if not 0 <= percentage <= 100:
            found.append((_PERCENTAGE, f"Invalid value: {percentage}: not in valid range [0, 100]"))
        if absolute < 0:
            found.append((_ABSOLUTE, f"Invalid value: {absolute}: not in valid range [0, inf)"))
        if percentage == 0 and absolute == 0:
            found.append((_PERCENTAGE, f"Invalid value: 0: cannot be zero at the same time as {_ABSOLUTE}"))
            found.append((_ABSOLUTE, f"Invalid value: 0: cannot be zero at the same time as {_PERCENTAGE}"))
        return found


class DefaultPreemption:
    name = NAME

    def __init__(self, args: DefaultPreemptionArgs | None, handle: Handle) -> None:
        self.args = checked_args(args or DefaultPreemptionArgs())
        self.handle = handle
        self.evaluator = Evaluator(
            plugin_name=NAME, handle=handle,
            min_candidate_nodes_percentage=self.args.min_candidate_nodes_percentage,
            min_candidate_nodes_absolute=self.args.min_candidate_nodes_absolute,
        )

    def post_filter(self, state: CycleState, pod: PodInfo,
                    statuses: NodeToStatus) -> tuple[PostFilterResult | None, Status | None]:
        return _prefixed(*self.evaluator.preempt(state, pod, statuses))

    async def post_filter_async(self, state: CycleState, pod: PodInfo,
                                statuses: NodeToStatus) -> tuple[PostFilterResult | None, Status | None]:
        """In a profile with extenders: as post_filter, the extenders' preempt verb consulted
        on the candidates before the best is picked (upstream's callExtenders)."""
        return _prefixed(*await self.evaluator.preempt_with_extenders(state, pod, statuses))

    def pre_enqueue(self, pod: PodInfo) -> Status | None:
        """Upstream's PreEnqueue with async preemption: hold the pod back while its victims
        are being deleted (until the last one is gone or terminating)."""
        if self.evaluator.is_pod_running_preemption(pod.uid):
            return Status.unresolvable(MSG_WAITING_FOR_PREEMPTION)
        return None

    def events_to_register(self) -> Iterable[ClusterEventWithHint]:
        # So that an assigned pod's deletion reaches the pods this plugin gated; the hint
        # skips: the pod's other rejectors decide when it comes back (as upstream).
        return (ClusterEventWithHint(ClusterEvent(EventResource.ASSIGNED_POD, ActionType.DELETE), _skip),)


def _skip(pod: PodInfo, old: Any, new: Any) -> QueueingHint:
    """Upstream's isPodSchedulableAfterAssignedPodDeletion."""
    return QueueingHint.SKIP
