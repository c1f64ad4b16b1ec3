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
from typing import Any

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
from kopfsched.framework.interface import SignFragment
from kopfsched.framework.resources import pod_requests
from kopfsched.plugins.dynamicresources.manager import DraManager, manager_for
from kopfsched.plugins.helper import signers
from kopfsched.plugins.noderesources.args import NodeResourcesBalancedAllocationArgs
from kopfsched.plugins.noderesources.fit import DYNAMIC_RESOURCES, dra_backed_resources, dra_totals
from kopfsched.plugins.noderesources.resource_allocation import Balanced, ResourceAllocationScorer

NAME = "NodeResourcesBalancedAllocation"


class PreScoreState:
    """The pod's requests, in the order of the configured resources, and the DeviceClasses
    backing those it asks for (DRAExtendedResource) by index (immutable)."""

    __slots__ = ("dra_backed", "pod_requests")

    def __init__(self, pod_requests: tuple[int, ...], dra_backed: dict[int, Any] | None = None) -> None:
        self.pod_requests = pod_requests
        self.dra_backed = dra_backed or {}


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
        self.dra: DraManager | None = manager_for(handle, DYNAMIC_RESOURCES) if handle is not None else None

    def sign_pod(self, pod: PodInfo) -> list[SignFragment] | None:
        return signers.resources(pod_requests(pod.pod), self.dra.resolver.get if self.dra is not None else None)

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> Status | None:
        requests = tuple(self.scorer.pod_requests(pod))
        if self.scorer.is_best_effort(requests):
            return SKIP
        state.write(PRE_SCORE_STATE, PreScoreState(requests, dra_backed_resources(self.scorer, self.dra, requests)))
        return None

    def _pre_score(self, state: CycleState, pod: PodInfo) -> PreScoreState | None:
        pre_score = state.get(PRE_SCORE_STATE)
        if pre_score is not None:
            return pre_score
        requests = tuple(self.scorer.pod_requests(pod))  # as upstream: Score works without PreScore
        if self.scorer.is_best_effort(requests):
            return None
        return PreScoreState(requests, dra_backed_resources(self.scorer, self.dra, requests))

    def _pod_requests(self, state: CycleState, pod: PodInfo) -> tuple[int, ...] | None:
        pre_score = self._pre_score(state, pod)
        return None if pre_score is None else pre_score.pod_requests

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        pre_score = self._pre_score(state, pod)
        if pre_score is None:
            return 0
        if pre_score.dra_backed and self.dra is not None:
            return self.scorer.score_dra(node, pre_score.pod_requests, pre_score.dra_backed, dra_totals(self.dra))
        return self.scorer.score(node, pre_score.pod_requests)

    def score_nodes(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        pre_score = self._pre_score(state, pod)
        if pre_score is None:
            return np.zeros(len(rows), dtype=np.int64)
        if pre_score.dra_backed:  # a DRA-backed resource among the scored ones: node by node
            nodes = table.nodes
            return np.fromiter((self.score(state, pod, nodes[row]) for row in rows.tolist()), dtype=np.int64,
                               count=len(rows))
        return self.scorer.score_rows(table, rows, pre_score.pod_requests)


PLUGIN = PluginFactory(name=NAME, factory=BalancedAllocation, args_type=NodeResourcesBalancedAllocationArgs)
