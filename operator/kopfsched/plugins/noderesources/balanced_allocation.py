"""NodeResourcesBalancedAllocation: prefer nodes whose resources fill up evenly.

Score = 50 + (50 + balance with the pod - balance without it) / 2, a balance being (1 - standard
deviation of requested/allocatable over the configured resources)·100,
counting the node's plain requests plus the pod's (upstream's balanced_allocation.go, the
v1.37 form, which scores how much the pod improves the node). PreScore skips best-effort pods (no request among the
resources), so they do not pile onto one node (upstream #129138). Score also runs
vectorised over the NodeTable.

Args (`NodeResourcesBalancedAllocationArgs`): `resources` (default cpu and memory, weight 1).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from kopfsched.framework import (
    SKIP,
    ArgsError,
    CycleState,
    Handle,
    NodeInfo,
    NodeTable,
    PluginFactory,
    PodInfo,
    StateKey,
    Status,
)
from kopfsched.plugins.noderesources.args import NodeResourcesBalancedAllocationArgs
from kopfsched.plugins.noderesources.resource_allocation import Balanced, ResourceAllocationScorer

NAME = "NodeResourcesBalancedAllocation"


class PreScoreState:
    """The pod's requests, in the order of the configured resources (immutable)."""

    __slots__ = ("pod_requests",)

    def __init__(self, pod_requests: tuple[int, ...]) -> None:
        self.pod_requests = pod_requests


PRE_SCORE_STATE = StateKey[PreScoreState](NAME, "preScore")


class BalancedAllocation:
    """The NodeResourcesBalancedAllocation plugin."""

    name = NAME

    def __init__(self, args: NodeResourcesBalancedAllocationArgs | None, handle: Handle | None) -> None:
        args = args or NodeResourcesBalancedAllocationArgs()
        problems = args.problems()
        if problems:
            raise ArgsError(problems)
        self.args = args
        self.handle = handle
        self.scorer = ResourceAllocationScorer(
            resources=[spec.name for spec in args.resources], strategy=Balanced(), use_requested=True)

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> Status | None:
        requests = tuple(self.scorer.pod_requests(pod))
        if self.scorer.is_best_effort(requests):
            return SKIP
        state.write(PRE_SCORE_STATE, PreScoreState(requests))
        return None

    def _pod_requests(self, state: CycleState, pod: PodInfo) -> tuple[int, ...] | None:
        pre_score = state.get(PRE_SCORE_STATE)
        if pre_score is not None:
            return pre_score.pod_requests
        requests = tuple(self.scorer.pod_requests(pod))  # as upstream: Score works without PreScore
        return None if self.scorer.is_best_effort(requests) else requests

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        requests = self._pod_requests(state, pod)
        return 0 if requests is None else self.scorer.score(node, requests)

    def score_nodes(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        requests = self._pod_requests(state, pod)
        if requests is None:
            return np.zeros(len(rows), dtype=np.int64)
        return self.scorer.score_rows(table, rows, requests)


PLUGIN = PluginFactory(name=NAME, factory=BalancedAllocation, args_type=NodeResourcesBalancedAllocationArgs)
