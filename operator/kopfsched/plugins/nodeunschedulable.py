"""NodeUnschedulable: cordoned nodes (`spec.unschedulable`) take only pods that tolerate the
`node.kubernetes.io/unschedulable:NoSchedule` taint."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from kopfsched.framework.cycle_state import CycleState
from kopfsched.framework.events import ActionType, ClusterEvent, ClusterEventWithHint, EventResource, QueueingHint
from kopfsched.framework.interface import SignFragment
from kopfsched.framework.node_table import ColumnSpec, NodeTable
from kopfsched.framework.registry import PluginFactory
from kopfsched.framework.status import Status, TalliedStatuses
from kopfsched.framework.types import NodeInfo, PodInfo
from kopfsched.plugins.helper import objects, signers
from kopfsched.plugins.helper.tolerations import UNSCHEDULABLE_TAINT, tolerations_tolerate_taint

ERR_REASON_UNKNOWN_CONDITION = "node(s) had unknown conditions"
ERR_REASON_UNSCHEDULABLE = "node(s) were unschedulable"

_SCHEDULABLE, _CORDONED, _NO_NODE = 0, 1, 2


def _node_state(node: NodeInfo) -> int:
    if node.node is None:
        return _NO_NODE
    return _CORDONED if node.unschedulable else _SCHEDULABLE


NODE_STATE = ColumnSpec("NodeUnschedulable/state", _node_state, np.int8, node_static=True)
"""0 schedulable, 1 cordoned, 2 no Node object (a ghost kept for its pods)."""


def tolerates_unschedulable(tolerations: Iterable[dict[str, Any]]) -> bool:
    return tolerations_tolerate_taint(tolerations, UNSCHEDULABLE_TAINT)


_PASSES = "NodeUnschedulable/passes"
_PASSES_TOLERATING = "NodeUnschedulable/passesTolerating"
"""NodeTable.derived's keys: whether a node passes a pod that does not (does) tolerate the unschedulable taint."""


def _passes(table: NodeTable, rows: np.ndarray) -> np.ndarray:
    return table.column(NODE_STATE)[rows] == _SCHEDULABLE


def _passes_one(table: NodeTable, row: int) -> bool:
    return table.column(NODE_STATE).item(row) == _SCHEDULABLE


def _passes_tolerating(table: NodeTable, rows: np.ndarray) -> np.ndarray:
    return table.column(NODE_STATE)[rows] != _NO_NODE


def _passes_tolerating_one(table: NodeTable, row: int) -> bool:
    return table.column(NODE_STATE).item(row) != _NO_NODE


class NodeUnschedulable:
    name = "NodeUnschedulable"
    node_static_filter = True  # reads the Node object only: checked once per node in preemption

    def __init__(self, args: Any = None, handle: Any = None) -> None:
        self._every: tuple[NodeTable, int, bool, bool] | None = None
        """(table, its node_version, every node schedulable, every node with its Node object)."""

    def passes_every_node(self, state: CycleState, pod: PodInfo, table: NodeTable) -> bool:
        """No node cordoned (or, for a pod tolerating that, none without its Node object):
        judged once per table and Node refresh."""
        if type(table) is not NodeTable:  # a WhatIfTable keeps no node_version of its own
            return False
        every = self._every
        if every is None or every[0] is not table or every[1] != table.node_version:
            states = table.column(NODE_STATE)
            every = self._every = (table, table.node_version, not np.count_nonzero(states != _SCHEDULABLE),
                                   not np.count_nonzero(states == _NO_NODE))
        return every[3] if tolerates_unschedulable(pod.tolerations) else every[2]

    def sign_pod(self, pod: PodInfo) -> list[SignFragment]:
        return [signers.tolerations(pod)]

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        if node.node is None:
            return Status.unresolvable(ERR_REASON_UNKNOWN_CONDITION)
        if node.unschedulable and not tolerates_unschedulable(pod.tolerations):
            return Status.unresolvable(ERR_REASON_UNSCHEDULABLE)
        return None

    def filter_nodes(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        # Two possible answers per node, kept by the table: one fancy index per cycle.
        if tolerates_unschedulable(pod.tolerations):
            return table.derived(_PASSES_TOLERATING, _passes_tolerating, rows, _passes_tolerating_one,
                                 node_static=True)
        return table.derived(_PASSES, _passes, rows, _passes_one, node_static=True)

    def filter_statuses(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: np.ndarray) -> list[Status]:
        """`filter`'s status for each of `rows` (rows it rejects): a node without its Node
        object has unknown conditions, any other is cordoned."""
        unknown = Status.unresolvable(ERR_REASON_UNKNOWN_CONDITION)
        cordoned = Status.unresolvable(ERR_REASON_UNSCHEDULABLE)
        ghosts = table.column(NODE_STATE)[rows] == _NO_NODE
        return TalliedStatuses.of_codes(ghosts, lambda ghost: unknown if ghost else cordoned)

    def events_to_register(self) -> Iterable[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(ClusterEvent(EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_TAINT),
                                 is_schedulable_after_node_change),
            ClusterEventWithHint(ClusterEvent(EventResource.POD, ActionType.UPDATE_POD_TOLERATION),
                                 is_schedulable_after_pod_toleration_change),
        ]


def is_schedulable_after_node_change(pod: Any, old: Any, new: Any) -> QueueingHint:
    """Queue only when a node becomes schedulable: added uncordoned, or uncordoned."""
    was_schedulable = old is not None and not objects.spec(objects.raw(old)).get("unschedulable")
    is_schedulable = not objects.spec(objects.raw(new)).get("unschedulable")
    return QueueingHint.QUEUE if not was_schedulable and is_schedulable else QueueingHint.SKIP


def is_schedulable_after_pod_toleration_change(pod: Any, old: Any, new: Any) -> QueueingHint:
    """Queue when the rejected pod itself now tolerates the unschedulable taint. Tolerations
    can only be added, so the pod did not tolerate it before (or it would not be here)."""
    modified = objects.raw(new)
    if objects.uid(objects.raw(pod)) != objects.uid(modified):
        return QueueingHint.SKIP
    tolerations = objects.spec(modified).get("tolerations") or ()
    return QueueingHint.QUEUE if tolerates_unschedulable(tolerations) else QueueingHint.SKIP


PLUGIN = PluginFactory(name=NodeUnschedulable.name, factory=NodeUnschedulable)
