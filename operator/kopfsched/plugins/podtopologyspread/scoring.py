"""PodTopologySpread PreScore/Score/NormalizeScore: ScheduleAnyway constraints.

A node's raw score sums, over the constraints whose key it has,
`matching pods in its domain * log(domains + 2) + (maxSkew - 1)`; NormalizeScore inverts it so
the emptiest domains score 100: `100 * (max + min - score) / max`. Nodes lacking a topology key
(when the constraints are the pod's own or listed defaults) are ignored and score 0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from kopfsched.framework.interface import MAX_NODE_SCORE
from kopfsched.framework.node_table import NodeTable, label_column, label_value_codes, lookup_by_label
from kopfsched.framework.types import NodeInfo, PodInfo
from kopfsched.plugins.podtopologyspread.common import (
    LABEL_HOSTNAME,
    TopologySpreadConstraint,
    count_pods_match_selector,
    node_labels_match_spread_constraints,
)

_NO_NODES = np.zeros(0, dtype=bool)
_NO_NODES.flags.writeable = False


@dataclass(slots=True)
class PreScoreState:
    constraints: list[TopologySpreadConstraint]
    require_all_topologies: bool
    ignored: np.ndarray = field(default_factory=lambda: _NO_NODES)  # replaced, never written
    """Over the nodes given to PreScore (the order of the scores): nodes that are not scored."""
    ignored_nodes: frozenset[str] = frozenset()
    some_ignored: bool = True
    """Whether `ignored` holds a node (else NormalizeScore skips masking)."""
    topology_value_to_pod_counts: list[dict[str, int]] = field(default_factory=list)
    topology_normalizing_weight: list[float] = field(default_factory=list)
    domain_scores: list[np.ndarray | None] | None = None
    """Per constraint but hostname ones: `score_for_count` of each label code's domain count
    (index code; the last slot, for nodes without the label, scores a count of 0)."""
    domain_scores_of: tuple[NodeTable, int] | None = None
    """The table and its node_version whose label codes `domain_scores` are of."""
    host_counts: list[np.ndarray | None] | None = None
    """Per hostname constraint: its matching pods per row of the table of `counted_at`."""
    labelled: list[bool] | None = None
    """Per constraint: whether every row of that table has its key."""
    counted_at: tuple[NodeTable, int] | None = None
    """The table and its version that `host_counts` and `labelled` are of, with
    `domain_scores`: while it holds, Score reads them alone."""

    def clone(self) -> PreScoreState:
        return self  # read-only after PreScore


def topology_normalizing_weight(size: int) -> float:
    """Weight of a topology by its number of domains, so small topologies are not watered down."""
    return math.log(size + 2)


def score_for_count(count: int | np.ndarray, max_skew: int, weight: float) -> float | np.ndarray:
    return count * weight + float(max_skew - 1)


def init_pre_score_state(state: PreScoreState, filtered_nodes: Sequence[NodeInfo]) -> None:
    """Register the domains of the feasible nodes and weigh each constraint by their number."""
    constraints = state.constraints
    state.topology_value_to_pod_counts = [{} for _ in constraints]
    ignored = np.zeros(len(filtered_nodes), dtype=bool)
    for n, node in enumerate(filtered_nodes):
        labels = node.labels
        if state.require_all_topologies and not node_labels_match_spread_constraints(labels, constraints):
            ignored[n] = True
            continue
        for i, c in enumerate(constraints):
            if c.topology_key != LABEL_HOSTNAME:  # per-node counts are taken in Score
                state.topology_value_to_pod_counts[i].setdefault(labels.get(c.topology_key, ""), 0)
    state.ignored = ignored
    state.ignored_nodes = frozenset(filtered_nodes[n].name for n in np.flatnonzero(ignored).tolist())
    state.some_ignored = bool(ignored.any())
    kept = len(filtered_nodes) - int(ignored.sum())
    state.topology_normalizing_weight = [
        topology_normalizing_weight(kept if c.topology_key == LABEL_HOSTNAME else len(counts))
        for c, counts in zip(constraints, state.topology_value_to_pod_counts, strict=True)
    ]


def init_pre_score_state_rows(state: PreScoreState, table: NodeTable, rows: np.ndarray) -> None:
    """`init_pre_score_state` for the nodes `table.nodes[rows]`, with label columns."""
    constraints = state.constraints
    # Hostname codes are read only to ignore the nodes without the label.
    has = [table.column(label_column(c.topology_key))[rows]
           if state.require_all_topologies or c.topology_key != LABEL_HOSTNAME else None for c in constraints]
    ignored = np.zeros(len(rows), dtype=bool)
    if state.require_all_topologies:
        for codes in has:
            assert codes is not None
            ignored |= codes < 0
    some_ignored = bool(ignored.any())
    state.topology_value_to_pod_counts = []
    for c, codes in zip(constraints, has, strict=True):
        counts: dict[str, int] = {}
        if c.topology_key != LABEL_HOSTNAME:
            assert codes is not None
            if some_ignored:
                codes = codes[~ignored]
            values = list(label_value_codes(c.topology_key))
            # In the order of the nodes' first appearance, as the loop over nodes registers them.
            for code in first_appearance(codes):
                counts[values[code] if code >= 0 else ""] = 0
        state.topology_value_to_pod_counts.append(counts)
    state.ignored = ignored
    state.some_ignored = some_ignored
    nodes = table.nodes
    state.ignored_nodes = frozenset(nodes[r].name for r in rows[ignored].tolist()) if some_ignored else frozenset()
    n_kept = len(rows) - int(ignored.sum())
    state.topology_normalizing_weight = [
        topology_normalizing_weight(n_kept if c.topology_key == LABEL_HOSTNAME else len(counts))
        for c, counts in zip(constraints, state.topology_value_to_pod_counts, strict=True)
    ]


FIRST_FEW_ROWS = 8
"""Rows PreScore looks at before FIRST_ROWS (zones interleaved in the node order show up in them)."""

FIRST_ROWS = 64
"""Rows looked at first for the order of the distinct codes (a few zones show up in them)."""


def first_appearance(codes: np.ndarray) -> list[int]:
    """The distinct values of `codes` (>= -1) in the order of their first appearance."""
    if len(codes) == 0:
        return []
    distinct = int(np.count_nonzero(np.bincount(codes + 1)))
    # When the first rows hold every value, their first appearances are all among them.
    first = list(dict.fromkeys(codes[:FIRST_ROWS].tolist()))
    if len(first) == distinct:
        return first
    present, index = np.unique(codes, return_index=True)
    return present[np.argsort(index, kind="stable")].tolist()


def score_node(state: PreScoreState, pod: PodInfo, node: NodeInfo) -> int:
    if node.name in state.ignored_nodes:
        return 0
    labels = node.labels
    score = 0.0
    for i, c in enumerate(state.constraints):
        value = labels.get(c.topology_key)
        if value is None:
            continue
        if c.topology_key == LABEL_HOSTNAME:
            count = count_pods_match_selector(node, c.selector, pod.namespace)
        else:
            count = state.topology_value_to_pod_counts[i].get(value, 0)
        score += float(score_for_count(count, c.max_skew, state.topology_normalizing_weight[i]))
    return _round(score)


def _round(x: float) -> int:
    """Go's math.Round: half away from zero (scores here are never negative)."""
    return math.floor(x + 0.5)


def score_rows(state: PreScoreState, pod: PodInfo, table: NodeTable, rows: np.ndarray,
               host_counts: list[np.ndarray | None], labelled: Sequence[bool] | None = None,
               domain_scores: Sequence[np.ndarray | None] | None = None) -> np.ndarray:
    """`score_node` over rows; host_counts[i] holds per-row pod counts for hostname constraints;
    labelled[i], when given, tells that every row has constraint i's key; domain_scores[i],
    when given, is `state.domain_scores[i]` for the table's current label codes."""
    score: np.ndarray | None = None
    has_all: np.ndarray | None = None
    nonnegative = True  # every part is >= 0 unless some maxSkew is below 1
    for i, c in enumerate(state.constraints):
        nonnegative = nonnegative and c.max_skew >= 1
        hosts = host_counts[i]
        codes: np.ndarray | None = None
        # Each part is a new array: the first is the sum itself (0.0 + part is part).
        if hosts is not None:
            part = hosts * state.topology_normalizing_weight[i]
            part += float(c.max_skew - 1)  # score_for_count, without a second temporary
        elif domain_scores is not None and (per_code := domain_scores[i]) is not None:
            codes = table.column(label_column(c.topology_key))[rows]
            part = per_code[codes]
        else:
            count = lookup_by_label(table, rows, c.topology_key, state.topology_value_to_pod_counts[i])
            part = np.asarray(score_for_count(count, c.max_skew, state.topology_normalizing_weight[i]),
                              dtype=np.float64)
        if labelled is None or not labelled[i]:
            has = (table.column(label_column(c.topology_key))[rows] if codes is None else codes) >= 0
            has_all = has if has_all is None else has_all & has
            part = np.where(has, part, 0.0)
        if score is None:
            score = part
        else:
            score += part
    if score is None:
        return np.zeros(len(rows), dtype=np.int64)
    score += 0.5
    # Go's math.Round; for scores >= 0 the cast's truncation is the floor.
    result = score.astype(np.int64) if nonnegative else np.floor(score, out=score).astype(np.int64)
    if state.require_all_topologies and has_all is not None:
        result[~has_all] = 0
    return result


def normalize(state: PreScoreState, scores: np.ndarray) -> np.ndarray:
    scores = np.asarray(scores, dtype=np.int64)  # read only: the answer is a new array
    ignored = state.ignored if state.some_ignored and len(state.ignored) == len(scores) else None
    kept = scores if ignored is None else scores[~ignored]
    if len(kept) == 0:
        return np.zeros(len(scores), dtype=np.int64)
    # a[a.argmin()] is the minimum for a third of the fixed cost of a reduction.
    low, high = int(kept[kept.argmin()]), max(int(kept[kept.argmax()]), 0)
    if high == 0:
        result = np.full(len(scores), MAX_NODE_SCORE, dtype=np.int64)
    else:
        # Integer arithmetic, as upstream: MaxNodeScore * (max + min - s) / max, in place.
        result = (high + low) - scores
        result *= MAX_NODE_SCORE
        result //= high
    if ignored is not None:
        result[ignored] = 0
    return result
