"""Coscheduling: gang scheduling of PodGroups, as scheduler-plugins' Coscheduling.

Extension points (enable it with multiPoint, and disable PrioritySort at queueSort):
  * QueueSort — priority, then the PodGroup's creation time (a pod's own creation time
    outside a group), then namespace/name, so a gang's pods leave the queue together.
  * PreFilter — refuses, UnschedulableAndUnresolvable, a pod whose group failed recently,
    has fewer pods than minMember, or whose minResources the cluster cannot hold.
  * PostFilter — when a member fits nowhere and the group is far from its quorum, rejects
    the group's waiting members so they release their nodes (and backs the group off).
  * Permit — waits until minMember members are assumed or bound, then allows them all;
    the wait lasts the group's scheduleTimeoutSeconds (default permitWaitingTimeSeconds).
  * Reserve/Unreserve — when one member fails after Reserve (timeout, rejection, bind
    error), every waiting member of its group is rejected and backs off.

Args (CoschedulingArgs): permitWaitingTimeSeconds (60), podGroupBackoffSeconds (0, off),
podGroupRejectPercentage (10).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kopfsched.framework.cycle_state import CycleState
from kopfsched.framework.events import ActionType, ClusterEvent, ClusterEventWithHint, EventResource
from kopfsched.framework.handle import Handle
from kopfsched.framework.interface import NodeToStatus, PostFilterResult
from kopfsched.framework.queued import QueuedPodInfo
from kopfsched.framework.registry import PluginFactory, check_known_fields, checked_args, int_field
from kopfsched.framework.status import Status
from kopfsched.framework.types import NodeInfo, PodInfo, parse_time
from kopfsched.plugins.coscheduling.core import (
    PermitOutcome,
    PodGroupManager,
    pod_group_full_name,
    pod_group_label,
    wait_time,
)

NAME = "Coscheduling"

_WAIT = "permitWaitingTimeSeconds"
_BACKOFF = "podGroupBackoffSeconds"
_REJECT = "podGroupRejectPercentage"


@dataclass(frozen=True, slots=True)
class CoschedulingArgs:
    permit_waiting_time_seconds: int = 60
    """How long members wait at Permit for their quorum when the PodGroup sets no scheduleTimeoutSeconds."""
    pod_group_backoff_seconds: int = 0
    """After PostFilter rejects a group, refuse its pods at PreFilter this long (0: off)."""
    pod_group_reject_percentage: int = 10
    """PostFilter leaves the group's waiting members alone while at most this percentage of
    minMember is unassigned (0..100)."""

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> CoschedulingArgs:
        problems: list[tuple[str, str]] = []
        check_known_fields(raw, {_WAIT, _BACKOFF, _REJECT}, problems)
        args = cls(permit_waiting_time_seconds=int_field(raw, _WAIT, 60, problems),
                   pod_group_backoff_seconds=int_field(raw, _BACKOFF, 0, problems),
                   pod_group_reject_percentage=int_field(raw, _REJECT, 10, problems))
        return checked_args(args, problems)

    def problems(self) -> list[tuple[str, str]]:
        """Upstream's ValidateCoschedulingArgs, word for word."""
        found: list[tuple[str, str]] = []
        if self.permit_waiting_time_seconds < 0:
            found.append((_WAIT, f"Invalid value: {self.permit_waiting_time_seconds}: must be greater than 0"))
        if self.pod_group_backoff_seconds < 0:
            found.append((_BACKOFF, f"Invalid value: {self.pod_group_backoff_seconds}: must be greater than 0"))
        if not 0 <= self.pod_group_reject_percentage <= 100:
            found.append((_REJECT, f"Invalid value: {self.pod_group_reject_percentage}: must be between 0 and 100"))
        return found


class Coscheduling:
    name = NAME

    def __init__(self, args: CoschedulingArgs | None, handle: Handle) -> None:
        self.args = checked_args(args or CoschedulingArgs())
        self.handle = handle
        self.schedule_timeout = float(self.args.permit_waiting_time_seconds)
        self.manager = PodGroupManager(objects=handle.objects, pods=handle.pods, snapshot=handle.snapshot,
                                       clock=handle.clock, schedule_timeout=self.schedule_timeout)

    def events_to_register(self) -> Iterable[ClusterEventWithHint]:
        return (
            ClusterEventWithHint(ClusterEvent(EventResource.POD, ActionType.ADD)),
            ClusterEventWithHint(ClusterEvent(EventResource.POD_GROUP, ActionType.ADD | ActionType.UPDATE)),
        )

    # -- QueueSort ---------------------------------------------------------------------------

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        if a.priority != b.priority:
            return a.priority > b.priority
        time_a = self.manager.creation_timestamp(a.pod_info, _pod_time(a))
        time_b = self.manager.creation_timestamp(b.pod_info, _pod_time(b))
        if time_a == time_b:
            return a.key < b.key
        return time_a < time_b

    # -- PreFilter / PostFilter ----------------------------------------------------------------

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]) -> Status | None:
        # UnschedulableAndUnresolvable: preemption cannot make a gang whole.
        reason = self.manager.pre_filter(pod)
        return Status.unresolvable(reason) if reason is not None else None

    def post_filter(self, state: CycleState, pod: PodInfo,
                    statuses: NodeToStatus) -> tuple[PostFilterResult | None, Status | None]:
        full_name, pod_group = self.manager.get_pod_group(pod)
        if pod_group is None:
            return PostFilterResult(), Status.unschedulable("can not find pod group")
        assigned = self.manager.assigned_count(pod.namespace, pod_group.name)
        if assigned >= pod_group.min_member:
            return PostFilterResult(), Status.unschedulable()  # the quorum holds: leave the group be
        not_assigned_percentage = (pod_group.min_member - assigned) * 100 / pod_group.min_member
        if not_assigned_percentage <= self.args.pod_group_reject_percentage:
            return PostFilterResult(), Status.unschedulable()  # close to the quorum: let later members try
        # If this member fits nowhere its siblings likely will not either: free what they hold.
        self._reject_waiting(pod.namespace, pod_group.name, "optimistic rejection in PostFilter")
        if (self.args.pod_group_backoff_seconds > 0
                and len(self.manager.members(pod.namespace, pod_group.name)) >= pod_group.min_member):
            self.manager.backoff_pod_group(full_name, self.args.pod_group_backoff_seconds)
        self.manager.delete_permitted_pod_group(full_name)
        return PostFilterResult(), Status.unschedulable(
            f"PodGroup {full_name} gets rejected due to Pod {pod.name} is unschedulable even after PostFilter")

    # -- Reserve / Permit ----------------------------------------------------------------------

    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        return None  # only here to be told, in unreserve, that a member failed

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        full_name, pod_group = self.manager.get_pod_group(pod)
        if pod_group is None:
            return
        self._reject_waiting(pod.namespace, pod_group.name, "rejection in Unreserve")
        self.manager.delete_permitted_pod_group(full_name)

    def permit(self, state: CycleState, pod: PodInfo, node_name: str) -> tuple[Status | None, float]:
        outcome = self.manager.permit(pod)
        if outcome is PermitOutcome.POD_GROUP_NOT_SPECIFIED:
            return None, 0.0
        if outcome is PermitOutcome.POD_GROUP_NOT_FOUND:
            return Status.unschedulable("PodGroup not found"), 0.0
        if outcome is PermitOutcome.WAIT:
            _, pod_group = self.manager.get_pod_group(pod)
            siblings = self.manager.siblings_to_activate(pod)
            if siblings:
                self.handle.activate(siblings)
            return Status.wait(), wait_time(pod_group, self.schedule_timeout)
        full_name = pod_group_full_name(pod)
        for waiting in self.handle.waiting_pods:
            if pod_group_full_name(waiting.pod) == full_name:
                waiting.allow(self.name)
        return None, 0.0

    def _reject_waiting(self, namespace: str, group: str, message: str) -> None:
        for waiting in self.handle.waiting_pods:
            if waiting.pod.namespace == namespace and pod_group_label(waiting.pod) == group:
                waiting.reject(self.name, message)


def _pod_time(qpi: QueuedPodInfo) -> float:
    """A pod's own place in time for QueueSort: its creation time (upstream uses the first
    attempt's time, but our queue clock is monotonic and PodGroup times are wall-clock; the
    two are close for a pod), else its first attempt on the queue's clock."""
    created = parse_time(qpi.pod_info.creation_timestamp)
    if created is not None:
        return created
    return qpi.initial_attempt_timestamp if qpi.initial_attempt_timestamp is not None else qpi.timestamp


PLUGIN = PluginFactory(name=NAME, factory=Coscheduling, args_type=CoschedulingArgs)
