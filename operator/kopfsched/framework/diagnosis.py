"""Why a pod fits nowhere: the per-node statuses and upstream's FitError message."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property

from kopfsched.framework.interface import NodeToStatus
from kopfsched.framework.status import Code, Status

NO_NODE_AVAILABLE_MSG = "0/{} nodes are available"
ERR_NO_NODES_AVAILABLE = "no nodes available to schedule pods"


@dataclass(slots=True)
class Diagnosis:
    node_to_status: NodeToStatus = field(default_factory=NodeToStatus)
    unschedulable_plugins: set[str] = field(default_factory=set)
    """Plugins that rejected the pod with Unschedulable or UnschedulableAndUnresolvable."""
    pending_plugins: set[str] = field(default_factory=set)
    """Plugins that answered Pending."""
    pre_filter_msg: str = ""
    post_filter_msg: str = ""
    evaluated_nodes: int = 0
    tally: list[tuple[Status, int]] | None = None
    """Each distinct status of `node_to_status.statuses` with how many nodes have it, in
    order of first appearance, when the Filter pass counted them (TalliedStatuses): the
    rejection counts then need no pass over the nodes. Whoever changes the statuses after
    the pass must reset it."""

    def add_plugin_status(self, status: Status) -> None:
        if not status.plugin:
            return
        if status.code is Code.PENDING:
            self.pending_plugins.add(status.plugin)
        elif status.is_rejection:
            self.unschedulable_plugins.add(status.plugin)


class FitError(Exception):
    """No node fits the pod; str() is upstream's "0/N nodes are available: ..." message."""

    def __init__(self, *, pod_key: str, num_all_nodes: int, diagnosis: Diagnosis) -> None:
        super().__init__(pod_key)
        self.pod_key = pod_key
        self.num_all_nodes = num_all_nodes
        self.diagnosis = diagnosis

    def __str__(self) -> str:
        message = NO_NODE_AVAILABLE_MSG.format(self.num_all_nodes) + ":"
        diagnosis = self.diagnosis
        if diagnosis.pre_filter_msg:
            message += f" {diagnosis.pre_filter_msg}."
        else:
            histogram = sorted(f"{count} {reason}" for reason, count in self.counts.reasons.items())
            if histogram:
                message += f" {', '.join(histogram)}."
        if diagnosis.post_filter_msg:
            message += f" {diagnosis.post_filter_msg}"
        return message


    @cached_property
    def counts(self) -> RejectionCounts:
        """How many nodes each reason and each plugin rejected: one pass over the nodes, shared
        by the message and by whoever keeps the diagnosis (the pending-pods store)."""
        tally = self.diagnosis.tally
        node_to_status = self.diagnosis.node_to_status
        if tally is not None and sum(count for _, count in tally) == len(node_to_status):
            return tallied_rejection_counts(node_to_status, tally, self.num_all_nodes)
        return rejection_counts(node_to_status, self.num_all_nodes)


@dataclass(frozen=True, slots=True)
class RejectionCounts:
    reasons: dict[str, int]
    """Nodes per reason string (a node rejected for two reasons counts under both)."""
    plugins: dict[str, int]
    """Nodes per rejecting plugin."""


def rejection_counts(node_to_status: NodeToStatus, num_all_nodes: int) -> RejectionCounts:
    reasons: dict[str, int] = {}
    plugins: dict[str, int] = {}
    # Nodes mostly share a few Status objects: count nodes per object (in C: Counter, map, zip),
    # then per reason.
    statuses = node_to_status.statuses.values()
    distinct = dict(zip(map(id, statuses), statuses, strict=True))
    for key, times in Counter(map(id, statuses)).items():
        _count(reasons, plugins, distinct[key], times)
    return _with_absent(reasons, plugins, node_to_status, num_all_nodes)


def tallied_rejection_counts(node_to_status: NodeToStatus, tally: list[tuple[Status, int]],
                             num_all_nodes: int) -> RejectionCounts:
    """`rejection_counts` from the statuses' tally (Diagnosis.tally): the same counts, in
    the same order, without a pass over the nodes."""
    reasons: dict[str, int] = {}
    plugins: dict[str, int] = {}
    for status, times in tally:
        _count(reasons, plugins, status, times)
    return _with_absent(reasons, plugins, node_to_status, num_all_nodes)


def uniform_rejection_counts(node_to_status: NodeToStatus, status: Status, num_all_nodes: int) -> RejectionCounts:
    """`rejection_counts` when every entry of `node_to_status.statuses` is `status`: the
    same counts, without a pass over the nodes."""
    reasons: dict[str, int] = {}
    plugins: dict[str, int] = {}
    if len(node_to_status):
        _count(reasons, plugins, status, len(node_to_status))
    return _with_absent(reasons, plugins, node_to_status, num_all_nodes)


def _count(reasons: dict[str, int], plugins: dict[str, int], status: Status, times: int) -> None:
    for reason in status.reasons:
        reasons[reason] = reasons.get(reason, 0) + times
    plugins[status.plugin] = plugins.get(status.plugin, 0) + times


def _with_absent(reasons: dict[str, int], plugins: dict[str, int], node_to_status: NodeToStatus,
                 num_all_nodes: int) -> RejectionCounts:
    """The counts with the nodes absent from `statuses` counted under `absent`."""
    absent = num_all_nodes - len(node_to_status)
    if absent > 0 and node_to_status.absent is not None:
        _count(reasons, plugins, node_to_status.absent, absent)
    plugins.pop("", None)
    return RejectionCounts(reasons, plugins)
