"""TaintToleration: a pod may land only on nodes whose NoSchedule/NoExecute taints it
tolerates (Filter), and prefers nodes with fewer untolerated PreferNoSchedule taints
(Score, reversed by NormalizeScore so that 0 untolerated taints scores 100).

Most nodes carry no hard taint, so the batch Filter looks only at rows whose
`has_hard_taints` column is set, and judges each distinct set of hard taints among them once.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
from numpy import count_nonzero

from kopfsched.framework.cycle_state import CycleState, StateKey
from kopfsched.framework.events import ActionType, ClusterEvent, ClusterEventWithHint, EventResource, QueueingHint
from kopfsched.framework.interface import MAX_NODE_SCORE, SignFragment
from kopfsched.framework.node_table import ColumnSpec, NodeTable
from kopfsched.framework.registry import PluginFactory
from kopfsched.framework.status import Status, TalliedStatuses
from kopfsched.framework.types import NodeInfo, Obj, PodInfo
from kopfsched.plugins.helper import objects, signers
from kopfsched.plugins.helper.normalize_score import default_normalize_score
from kopfsched.plugins.helper.tolerations import (
    PREFER_NO_SCHEDULE,
    do_not_schedule_taint,
    find_matching_untolerated_taint,
    tolerations_tolerate_taint,
)

ERR_REASON_NOT_MATCH = "node(s) had untolerated taint(s)"
"""Since upstream PR #134740 the reason no longer names the taint's key and value."""

HAS_HARD_TAINTS = ColumnSpec("TaintToleration/hasHardTaints",
                             lambda n: any(do_not_schedule_taint(t) for t in n.taints), np.bool_, node_static=True)
HAS_PREFER_NO_SCHEDULE_TAINTS = ColumnSpec("TaintToleration/hasPreferNoScheduleTaints",
                                           lambda n: any(t.get("effect") == PREFER_NO_SCHEDULE for t in n.taints),
                                           np.bool_, node_static=True)

_taint_sets: dict[tuple[tuple[Any, Any, Any], ...], int] = {}
"""Every distinct list of NoSchedule/NoExecute taints ever seen on a node -> its code (>= 0)."""
_taint_set_taints: list[list[Obj]] = []
"""Code -> that list, as taints `find_matching_untolerated_taint` reads (key, value, effect)."""


def _hard_taint_set(node: NodeInfo) -> int:
    """The code of the node's NoSchedule/NoExecute taints, in order; -1 when it has none."""
    hard = tuple((t.get("key"), t.get("value"), t.get("effect")) for t in node.taints if do_not_schedule_taint(t))
    if not hard:
        return -1
    code = _taint_sets.get(hard)
    if code is None:
        code = _taint_sets[hard] = len(_taint_set_taints)
        _taint_set_taints.append([{"key": k, "value": v, "effect": e} for k, v, e in hard])
    return code


_soft_taint_sets: dict[tuple[tuple[Any, Any], ...], int] = {}
"""Every distinct list of PreferNoSchedule taints ever seen on a node -> its code (>= 0)."""
_soft_taint_set_taints: list[list[Obj]] = []
"""Code -> that list, as taints `count_intolerable_prefer_no_schedule` reads (key, value, effect)."""


def _soft_taint_set(node: NodeInfo) -> int:
    """The code of the node's PreferNoSchedule taints, in order; -1 when it has none."""
    soft = tuple((t.get("key"), t.get("value")) for t in node.taints if t.get("effect") == PREFER_NO_SCHEDULE)
    if not soft:
        return -1
    code = _soft_taint_sets.get(soft)
    if code is None:
        code = _soft_taint_sets[soft] = len(_soft_taint_set_taints)
        _soft_taint_set_taints.append([{"key": k, "value": v, "effect": PREFER_NO_SCHEDULE} for k, v in soft])
    return code


SOFT_TAINT_SET = ColumnSpec("TaintToleration/softTaintSet", _soft_taint_set, node_static=True)
"""Nodes with the same PreferNoSchedule taints score alike: Score counts each distinct set once."""

_INTOLERABLE = "TaintToleration/intolerablePreferNoSchedule"
"""NodeTable.derived's key (with the pod's PreferNoSchedule tolerations): Score's raw count."""


def _intolerable_rows(table: NodeTable, rows: np.ndarray, tolerations: Sequence[Obj]) -> np.ndarray:
    """Per row: the node's PreferNoSchedule taints no toleration tolerates, counted per set."""
    codes = table.column(SOFT_TAINT_SET)[rows]
    counts = np.zeros(len(_soft_taint_set_taints) + 1, dtype=np.int64)  # the trailing slot: none (-1)
    for code in np.unique(codes[codes >= 0]).tolist():
        counts[code] = count_intolerable_prefer_no_schedule(_soft_taint_set_taints[code], tolerations)
    return counts[codes]


_JUDGE_ALL_SETS = 16
"""Up to this many distinct taint sets seen, Filter judges every one of them for each pod."""

HARD_TAINT_SET = ColumnSpec("TaintToleration/hardTaintSet", _hard_taint_set, node_static=True)
"""Nodes with the same hard taints are tolerated alike: Filter judges each distinct set once."""

_UNTAINTED = "TaintToleration/untainted"
"""NodeTable.derived's key: the node has no taint Filter looks at."""


def _untainted(table: NodeTable, rows: np.ndarray) -> np.ndarray:
    return ~table.column(HAS_HARD_TAINTS)[rows]


def _untainted_one(table: NodeTable, row: int) -> bool:
    return not table.column(HAS_HARD_TAINTS).item(row)


PRE_SCORE_STATE = StateKey[tuple[Obj, ...]]("TaintToleration", "PreScoreTaintToleration")
"""The pod's tolerations that can tolerate a PreferNoSchedule taint."""


def prefer_no_schedule_tolerations(tolerations: Iterable[Obj]) -> tuple[Obj, ...]:
    """Tolerations with effect PreferNoSchedule or no effect (which means every effect)."""
    return tuple(t for t in tolerations if not t.get("effect") or t.get("effect") == PREFER_NO_SCHEDULE)


def count_intolerable_prefer_no_schedule(taints: Sequence[Obj], tolerations: Sequence[Obj]) -> int:
    return sum(1 for t in taints
               if t.get("effect") == PREFER_NO_SCHEDULE and not tolerations_tolerate_taint(tolerations, t))


_TOLERATED = "TaintToleration/tolerated"
"""NodeTable.derived's key (with the pod's tolerations): the node's hard taints are tolerated."""


def _tolerated_rows(table: NodeTable, rows: np.ndarray, tolerations: Sequence[Obj]) -> np.ndarray:
    """Per row: every hard taint of the node is tolerated, judged once per distinct taint set."""
    codes = table.column(HARD_TAINT_SET)[rows]
    known = len(_taint_set_taints)
    if known <= _JUDGE_ALL_SETS:  # the usual few sets: judge them all rather than find those here
        judged: list[int] = list(range(known))
    else:
        judged = np.unique(codes[codes >= 0]).tolist()
    tolerated = np.ones(known + 1, dtype=bool)  # the trailing slot: no hard taint (-1)
    for code in judged:
        tolerated[code] = find_matching_untolerated_taint(_taint_set_taints[code], tolerations) is None
    return tolerated[codes]


class TaintToleration:
    name = "TaintToleration"
    node_static_filter = True  # reads the Node object only: checked once per node in preemption

    def __init__(self, args: Any = None, handle: Any = None) -> None:
        self._every: tuple[NodeTable, int, list[int], dict[str, bool]] | None = None
        """(table, its node_version, the codes of its nodes' distinct hard taint sets, tolerations
        key -> every node's hard taints tolerated)."""

    def passes_every_node(self, state: CycleState, pod: PodInfo, table: NodeTable) -> bool:
        """Every node's hard taints tolerated (the GPU pods of a cluster that taints its GPU
        nodes): judged once per tolerations, table and Node refresh."""
        if type(table) is not NodeTable:  # a WhatIfTable keeps no node_version of its own
            return False
        every = self._every
        if every is None or every[0] is not table or every[1] != table.node_version:
            codes = table.column(HARD_TAINT_SET)
            every = self._every = (table, table.node_version, np.unique(codes[codes >= 0]).tolist(), {})
        tainted, answers = every[2], every[3]
        if not tainted:
            return True  # no node with a hard taint: any pod passes, no look at its tolerations
        tolerations = pod.tolerations
        key = repr(tolerations)
        answer = answers.get(key)
        if answer is None:
            if len(answers) >= 256:
                answers.clear()
            answer = answers[key] = all(
                find_matching_untolerated_taint(_taint_set_taints[code], tolerations) is None for code in tainted)
        return answer

    def sign_pod(self, pod: PodInfo) -> list[SignFragment]:
        return [signers.tolerations(pod)]

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        if find_matching_untolerated_taint(node.taints, pod.tolerations) is None:
            return None
        return Status.unresolvable(ERR_REASON_NOT_MATCH)

    def filter_nodes(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        rows = np.asarray(rows)
        # Nodes without NoSchedule/NoExecute taints pass any pod: that mask is the table's to
        # keep (one fancy index per cycle); only the tainted nodes need the pod's tolerations.
        passed = table.derived(_UNTAINTED, _untainted, rows, _untainted_one, node_static=True)
        if count_nonzero(passed) == len(passed):
            return passed
        tolerations = pod.tolerations
        # Pods of one shape tolerate alike: the table keeps each node's answer per tolerations.
        # repr rather than a sorted JSON dump (a third of the cost, every cycle): the same
        # tolerations written in another key order only make a key of their own.
        key = (_TOLERATED, repr(tolerations))
        return table.derived(key, lambda table, rows: _tolerated_rows(table, rows, tolerations), rows,
                             lambda table, row: find_matching_untolerated_taint(
                                 table.nodes[row].taints, tolerations) is None, node_static=True)

    def filter_statuses(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: np.ndarray) -> list[Status]:
        return TalliedStatuses.same(Status.unresolvable(ERR_REASON_NOT_MATCH), len(rows))  # one reason, any taint

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> Status | None:
        state.write(PRE_SCORE_STATE, prefer_no_schedule_tolerations(pod.tolerations))
        return None

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        return count_intolerable_prefer_no_schedule(node.taints, self._tolerations(state, pod))

    def score_nodes(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        rows = np.asarray(rows)
        scores = np.zeros(len(rows), dtype=np.int64)
        column = table.column(HAS_PREFER_NO_SCHEDULE_TAINTS)
        if not count_nonzero(column):  # no node has such a taint: no per-row look
            return scores
        tolerations = self._tolerations(state, pod)
        # Pods of one shape tolerate alike: the table keeps each node's count per tolerations.
        return table.derived((_INTOLERABLE, repr(tolerations)),
                             lambda table, rows: _intolerable_rows(table, rows, tolerations), rows,
                             lambda table, row: count_intolerable_prefer_no_schedule(table.nodes[row].taints,
                                                                                     tolerations),
                             node_static=True)

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: np.ndarray) -> np.ndarray:
        return default_normalize_score(scores, max_priority=MAX_NODE_SCORE, reverse=True)

    @staticmethod
    def _tolerations(state: CycleState, pod: PodInfo) -> tuple[Obj, ...]:
        tolerations = state.get(PRE_SCORE_STATE)
        return prefer_no_schedule_tolerations(pod.tolerations) if tolerations is None else tolerations

    def events_to_register(self) -> Iterable[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(ClusterEvent(EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_TAINT),
                                 is_schedulable_after_node_change),
            ClusterEventWithHint(ClusterEvent(EventResource.POD, ActionType.UPDATE_POD_TOLERATION),
                                 is_schedulable_after_pod_toleration_change),
        ]


def _untolerated(node: Obj | None, tolerations: Sequence[Obj]) -> bool:
    taints = objects.spec(node).get("taints") or ()
    return find_matching_untolerated_taint(taints, tolerations) is not None


def is_schedulable_after_node_change(pod: Any, old: Any, new: Any) -> QueueingHint:
    """Queue only when the node goes from untolerated (or absent) to tolerated."""
    tolerations = objects.spec(objects.raw(pod)).get("tolerations") or ()
    was_untolerated = old is None or _untolerated(objects.raw(old), tolerations)
    is_untolerated = _untolerated(objects.raw(new), tolerations)
    return QueueingHint.QUEUE if was_untolerated and not is_untolerated else QueueingHint.SKIP


def is_schedulable_after_pod_toleration_change(pod: Any, old: Any, new: Any) -> QueueingHint:
    """Queue when the rejected pod itself gained tolerations; other pods don't matter."""
    same = objects.uid(objects.raw(pod)) == objects.uid(objects.raw(new))
    return QueueingHint.QUEUE if same else QueueingHint.SKIP


PLUGIN = PluginFactory(name=TaintToleration.name, factory=TaintToleration)
