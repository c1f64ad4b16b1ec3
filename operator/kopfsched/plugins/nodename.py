"""NodeName: a pod that names a node in `spec.nodeName` fits only that node."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from kopfsched.framework.cycle_state import CycleState
from kopfsched.framework.events import NODE_ADD, ClusterEventWithHint
from kopfsched.framework.interface import SignFragment
from kopfsched.framework.node_table import NodeTable
from kopfsched.framework.registry import PluginFactory
from kopfsched.framework.status import Status, TalliedStatuses
from kopfsched.framework.types import NodeInfo, PodInfo
from kopfsched.plugins.helper import signers

ERR_REASON = "node(s) didn't match the requested node name"


def fits(pod: PodInfo, node: NodeInfo) -> bool:
    return not pod.node_name or pod.node_name == node.name


class NodeName:
    name = "NodeName"
    node_static_filter = True  # reads the Node object only: checked once per node in preemption

    def __init__(self, args: Any = None, handle: Any = None) -> None:
        pass

    def sign_pod(self, pod: PodInfo) -> list[SignFragment]:
        return [(signers.NODE_NAME, pod.spec.get("nodeName") or "")]

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        return None if fits(pod, node) else Status.unresolvable(ERR_REASON)

    def passes_every_node(self, state: CycleState, pod: PodInfo, table: NodeTable) -> bool:
        return not pod.node_name

    def filter_nodes(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        wanted = pod.node_name
        if not wanted:
            passed = np.empty(len(rows), dtype=bool)
            passed.fill(True)  # np.ones, without its Python wrapper: this runs every cycle
            return passed
        # Node names are unique, so at most one row can match.
        row = table.index.get(wanted, -1)
        if row >= 0 and table.nodes[row].name != wanted:
            row = -1
        return np.asarray(rows) == row

    def filter_statuses(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: np.ndarray) -> list[Status]:
        return TalliedStatuses.same(Status.unresolvable(ERR_REASON), len(rows))  # each is another node

    def events_to_register(self) -> Iterable[ClusterEventWithHint]:
        # Upstream has no hint: a new node may be the named one, so always requeue.
        return [ClusterEventWithHint(NODE_ADD)]


PLUGIN = PluginFactory(name=NodeName.name, factory=NodeName)
