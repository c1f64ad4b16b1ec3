"""PodTopologySpread PreFilter/Filter: DoNotSchedule constraints.

PreFilter counts, per constraint, the matching pods in each eligible topology domain and keeps
the two smallest domains ("critical paths"), which is enough to keep the global minimum exact
when preemption adds or removes pods on one node at a time. Filter checks
`matching in the node's domain + self-match - global minimum <= maxSkew`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from kopfsched.framework.labels import NodePredicate
from kopfsched.framework.node_table import NodeTable, label_column, lookup_by_label
from kopfsched.framework.status import Status
from kopfsched.framework.types import NodeInfo, PodInfo
from kopfsched.plugins.podtopologyspread.common import (
    TopologySpreadConstraint,
    match_node_inclusion_policies,
    node_labels_match_spread_constraints,
)

ERR_REASON_CONSTRAINTS_NOT_MATCH = "node(s) didn't match pod topology spread constraints"
ERR_REASON_NODE_LABEL_NOT_MATCH = ERR_REASON_CONSTRAINTS_NOT_MATCH + " (missing required label)"

_MAX_INT32 = 2**31 - 1


class CriticalPaths:
    """The two domains with the fewest matching pods; paths[0] always holds the minimum."""

    __slots__ = ("paths",)

    def __init__(self, paths: list[list] | None = None) -> None:
        self.paths: list[list] = paths or [["", _MAX_INT32], ["", _MAX_INT32]]

    def update(self, value: str, num: int) -> None:
        p = self.paths
        i = 0 if value == p[0][0] else 1 if value == p[1][0] else -1
        if i >= 0:
            p[i][1] = num
            if p[0][1] > p[1][1]:
                p[0], p[1] = p[1], p[0]
        elif num < p[0][1]:
            p[1] = p[0]
            p[0] = [value, num]
        elif num < p[1][1]:
            p[1] = [value, num]

    @property
    def min_match_num(self) -> int:
        return self.paths[0][1]

    def clone(self) -> CriticalPaths:
        return CriticalPaths([list(self.paths[0]), list(self.paths[1])])


@dataclass(slots=True)
class PreFilterState:
    constraints: list[TopologySpreadConstraint]
    critical_paths: list[CriticalPaths] = field(default_factory=list)
    tp_value_to_match_num: list[dict[str, int]] = field(default_factory=list)
    """Per constraint: eligible topology value -> matching pods there."""

    def min_match_num(self, i: int) -> int:
        """The global minimum for constraint i, 0 while there are fewer domains than minDomains."""
        if len(self.tp_value_to_match_num[i]) < self.constraints[i].min_domains:
            return 0
        return self.critical_paths[i].min_match_num

    def clone(self) -> PreFilterState:
        return PreFilterState(self.constraints, [p.clone() for p in self.critical_paths],
                              [dict(m) for m in self.tp_value_to_match_num])

    def update_with_pod(self, updated: PodInfo, preemptor: PodInfo, node: NodeInfo, delta: int,
                        affinity: NodePredicate | None) -> None:
        if updated.namespace != preemptor.namespace or node.node is None:
            return
        if not node_labels_match_spread_constraints(node.labels, self.constraints):
            return
        for i, c in enumerate(self.constraints):
            if not c.selector.matches(updated.labels):
                continue
            if not match_node_inclusion_policies(c, preemptor, node, affinity):
                continue
            value = node.labels[c.topology_key]
            counts = self.tp_value_to_match_num[i]
            counts[value] = counts.get(value, 0) + delta
            self.critical_paths[i].update(value, counts[value])

    def finish(self) -> PreFilterState:
        self.critical_paths = []
        for counts in self.tp_value_to_match_num:
            paths = CriticalPaths()
            for value, num in counts.items():
                paths.update(value, num)
            self.critical_paths.append(paths)
        return self


def filter_node(state: PreFilterState, pod: PodInfo, node: NodeInfo) -> Status | None:
    labels = node.labels
    for i, c in enumerate(state.constraints):
        value = labels.get(c.topology_key)
        if value is None:
            return Status.unresolvable(ERR_REASON_NODE_LABEL_NOT_MATCH)
        self_match = 1 if c.selector.matches(pod.labels) else 0
        skew = state.tp_value_to_match_num[i].get(value, 0) + self_match - state.min_match_num(i)
        if skew > c.max_skew:
            return Status.unschedulable(ERR_REASON_CONSTRAINTS_NOT_MATCH)
    return None


def filter_rows(state: PreFilterState, pod: PodInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray:
    ok = np.ones(len(rows), dtype=bool)
    for i, c in enumerate(state.constraints):
        has_label = table.column(label_column(c.topology_key))[rows] >= 0
        self_match = 1 if c.selector.matches(pod.labels) else 0
        match_num = lookup_by_label(table, rows, c.topology_key, state.tp_value_to_match_num[i])
        ok &= has_label & (match_num + self_match - state.min_match_num(i) <= c.max_skew)
    return ok
