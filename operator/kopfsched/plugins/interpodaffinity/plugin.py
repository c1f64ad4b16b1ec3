"""InterPodAffinity: required and preferred pod affinity / anti-affinity (upstream's plugin of that name).

Extension points: PreFilter (+ AddPod/RemovePod), Filter (also batched, with tallied statuses), PreScore, Score (also
batched), NormalizeScore, EnqueueExtensions.
Args: hardPodAffinityWeight (0..100, default 1), ignorePreferredTermsOfExistingPods (default false).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from kopfsched.framework.affinity import AffinityTerm, WeightedAffinityTerm
from kopfsched.framework.cycle_state import CycleState, StateKey
from kopfsched.framework.events import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    EventResource,
    QueueingHint,
)
from kopfsched.framework.handle import Handle
from kopfsched.framework.interface import SignFragment
from kopfsched.framework.labels import SelectorError
from kopfsched.framework.node_table import NodeTable
from kopfsched.framework.registry import ArgsError, check_known_fields, int_field
from kopfsched.framework.status import SKIP, Status
from kopfsched.framework.types import NodeInfo, PodInfo
from kopfsched.plugins.helper import signers
from kopfsched.plugins.interpodaffinity import filtering, scoring
from kopfsched.plugins.interpodaffinity import index as pod_index

NAME = "InterPodAffinity"

_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"

PRE_FILTER_STATE = StateKey[filtering.PreFilterState](NAME, "PreFilter")
PRE_SCORE_STATE = StateKey[scoring.PreScoreState](NAME, "PreScore")


@dataclass(slots=True)
class _LookedUp:
    """The term groups PreFilter found matching the pod, for its PreScore: right while the
    table is the one, at the version, the index was brought to, and the namespace labels are."""

    table: NodeTable
    version: int
    namespace_labels: dict[str, str]
    term_groups: list[pod_index.Group]


_LOOKED_UP = StateKey[_LookedUp](NAME, "term-groups")


@dataclass(frozen=True, slots=True)
class InterPodAffinityArgs:
    hard_pod_affinity_weight: int = 1
    """Score weight of existing pods' required affinity terms that the incoming pod matches (0..100)."""
    ignore_preferred_terms_of_existing_pods: bool = False
    """Skip existing pods' preferred terms when the incoming pod has no preferred terms itself."""

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> InterPodAffinityArgs:
        problems: list[tuple[str, str]] = []
        check_known_fields(raw, {"hardPodAffinityWeight", "ignorePreferredTermsOfExistingPods"}, problems)
        weight = int_field(raw, "hardPodAffinityWeight", 1, problems)
        if not 0 <= weight <= 100:
            problems.append(("hardPodAffinityWeight", f"Invalid value: {weight}: not in valid range [0, 100]"))
        ignore = raw.get("ignorePreferredTermsOfExistingPods", False)
        if not isinstance(ignore, bool):
            problems.append(("ignorePreferredTermsOfExistingPods", f"must be a boolean, got {ignore!r}"))
            ignore = False
        if problems:
            raise ArgsError(problems)
        return cls(hard_pod_affinity_weight=weight, ignore_preferred_terms_of_existing_pods=ignore)


def _pod_info(obj: Any) -> PodInfo | None:
    if obj is None or isinstance(obj, PodInfo):
        return obj
    return PodInfo(obj)


def _node_labels(obj: Any) -> Mapping[str, str]:
    if isinstance(obj, NodeInfo):
        return obj.labels
    return ((obj or {}).get("metadata") or {}).get("labels") or {}


class InterPodAffinity:
    name = NAME

    def __init__(self, args: InterPodAffinityArgs | None, handle: Handle) -> None:
        self.args = args or InterPodAffinityArgs()
        self.handle = handle
        self._index = pod_index.AffinityIndex()

    # -- namespaces ---------------------------------------------------------------------------

    def namespace_labels(self, namespace: str) -> dict[str, str]:
        ns = self.handle.objects.get("Namespace", namespace)
        return dict(((ns or {}).get("metadata") or {}).get("labels") or {})

    def _resolve(self, terms: tuple[AffinityTerm, ...]) -> tuple[AffinityTerm, ...]:
        if not any(t.raw_namespace_selector is not None for t in terms):
            return terms
        namespaces = self.handle.objects.list("Namespace")
        return tuple(t.with_namespaces_resolved(namespaces) for t in terms)

    def _resolve_weighted(self, terms: tuple[WeightedAffinityTerm, ...]) -> tuple[WeightedAffinityTerm, ...]:
        if not any(w.term.raw_namespace_selector is not None for w in terms):
            return terms  # what _resolve gives back unchanged
        resolved = self._resolve(tuple(w.term for w in terms))
        return tuple(WeightedAffinityTerm(t, w.weight) for t, w in zip(resolved, terms, strict=True))

    # -- PreFilter / Filter -------------------------------------------------------------------

    def sign_pod(self, pod: PodInfo) -> list[SignFragment] | None:
        """Pods with inter-pod affinity are not signed; the others by their labels, which
        existing pods' terms may match (unless those terms are ignored)."""
        if pod.has_pod_affinity:
            return None
        if self.args.ignore_preferred_terms_of_existing_pods:
            return []
        return [(signers.LABELS, pod.labels)]

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]) -> Status | None:
        affinity_terms: tuple[AffinityTerm, ...] = ()
        anti_affinity_terms: tuple[AffinityTerm, ...] = ()
        if pod.has_pod_affinity:  # without any term all four tuples are empty: skip the lazy parsing
            try:
                if pod_index.has_terms(pod, pod_index.REQUIRED_AFFINITY):
                    affinity_terms = pod.required_affinity_terms
                if pod.has_required_anti_affinity:
                    anti_affinity_terms = pod.required_anti_affinity_terms
            except SelectorError as error:
                return Status.unresolvable(f"parsing pod: {error}")
        with_anti_affinity = self.handle.snapshot.have_pods_with_required_anti_affinity()
        if not with_anti_affinity and not affinity_terms and not anti_affinity_terms:
            return SKIP  # nothing can reject this pod: don't even look at the namespace
        namespace_labels = self.namespace_labels(pod.namespace)
        table = self.handle.snapshot.table
        if affinity_terms:  # most pods have none: no look for namespaceSelectors
            affinity_terms = self._resolve(affinity_terms)
        if anti_affinity_terms:
            anti_affinity_terms = self._resolve(anti_affinity_terms)
        if len(table) == len(nodes) > 0:
            existing, affinity, anti = self._counts_by_index(state, table, pod, namespace_labels, affinity_terms,
                                                             anti_affinity_terms, with_anti_affinity)
            if not existing and not affinity_terms and not anti_affinity_terms:
                return SKIP
        else:
            existing = filtering.existing_anti_affinity_counts(pod, namespace_labels, with_anti_affinity)
            if not existing and not affinity_terms and not anti_affinity_terms:
                return SKIP
            affinity, anti = filtering.incoming_affinity_counts(affinity_terms, anti_affinity_terms, nodes)
        state.write(PRE_FILTER_STATE, filtering.PreFilterState(
            pod=pod, affinity_terms=affinity_terms, anti_affinity_terms=anti_affinity_terms,
            namespace_labels=namespace_labels, existing_anti_affinity_counts=existing,
            affinity_counts=affinity, anti_affinity_counts=anti,
        ))
        return None

    def _counts_by_index(
        self, state: CycleState, table: NodeTable, pod: PodInfo, namespace_labels: dict[str, str],
        affinity_terms: tuple[AffinityTerm, ...], anti_affinity_terms: tuple[AffinityTerm, ...],
        with_anti_affinity: list[NodeInfo],
    ) -> tuple[filtering.TopologyCounts, filtering.TopologyCounts, filtering.TopologyCounts]:
        """PreFilter's three counts from the index of alike pods and terms."""
        index = self._index
        index.update(table)
        existing: filtering.TopologyCounts = {}
        if with_anti_affinity:
            groups = index.term_groups(pod, namespace_labels)
            state.write(_LOOKED_UP, _LookedUp(table, table.version, namespace_labels, groups))
            for group in groups:
                if group.kind == pod_index.REQUIRED_ANTI:
                    index.per_value(group, group.representative.topology_key, 1, existing)
        affinity: filtering.TopologyCounts = {}
        if affinity_terms:
            raw = pod_index.raw_terms(pod, pod_index.REQUIRED_AFFINITY)
            for group in index.matching_pod_groups(raw, affinity_terms):
                for term in affinity_terms:
                    index.per_value(group, term.topology_key, 1, affinity)
        anti: filtering.TopologyCounts = {}
        if anti_affinity_terms:
            for raw_term, term in zip(pod_index.raw_terms(pod, pod_index.REQUIRED_ANTI), anti_affinity_terms,
                                      strict=True):
                for group in index.matching_pod_groups((raw_term,), (term,)):
                    index.per_value(group, term.topology_key, 1, anti)
        return existing, affinity, anti

    def add_pod(self, state: CycleState, pod: PodInfo, pod_to_add: PodInfo, node: NodeInfo) -> Status | None:
        state.read(PRE_FILTER_STATE).update_with_pod(pod_to_add, node, 1)
        return None

    def remove_pod(self, state: CycleState, pod: PodInfo, pod_to_remove: PodInfo, node: NodeInfo) -> Status | None:
        state.read(PRE_FILTER_STATE).update_with_pod(pod_to_remove, node, -1)
        return None

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        return filtering.filter_node(state.read(PRE_FILTER_STATE), node)

    def filter_nodes(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        return filtering.filter_rows(state.read(PRE_FILTER_STATE), table, rows)

    def filter_statuses(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: np.ndarray) -> list[Status]:
        return filtering.rejection_statuses(state.read(PRE_FILTER_STATE), table, np.asarray(rows))

    # -- PreScore / Score ---------------------------------------------------------------------

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> Status | None:
        preferred_affinity: tuple[WeightedAffinityTerm, ...] = ()
        preferred_anti_affinity: tuple[WeightedAffinityTerm, ...] = ()
        if pod.has_pod_affinity:
            if pod_index.has_terms(pod, pod_index.PREFERRED_AFFINITY):
                preferred_affinity = pod.preferred_affinity_terms
            if pod_index.has_terms(pod, pod_index.PREFERRED_ANTI):
                preferred_anti_affinity = pod.preferred_anti_affinity_terms
        has_constraints = bool(preferred_affinity or preferred_anti_affinity)
        if self.args.ignore_preferred_terms_of_existing_pods and not has_constraints:
            return SKIP
        snapshot = self.handle.snapshot
        table = snapshot.table
        if len(table) == len(snapshot.node_infos()) > 0:
            scores, namespace_labels = self._scores_by_index(state, table, pod, preferred_affinity,
                                                             preferred_anti_affinity)
            if not scores:
                return SKIP
            if namespace_labels is None:
                namespace_labels = self.namespace_labels(pod.namespace)
            state.write(PRE_SCORE_STATE, scoring.PreScoreState(scores, pod, namespace_labels))
            return None
        # Without preferred terms of its own, only existing pods with affinity can score the pod.
        all_nodes = snapshot.node_infos() if has_constraints else self._nodes_with_scoring_pods()
        if not all_nodes:
            return SKIP
        namespace_labels = self.namespace_labels(pod.namespace)
        scores = self._scores_by_walk(all_nodes, pod, namespace_labels, preferred_affinity, preferred_anti_affinity)
        if not scores:
            return SKIP
        state.write(PRE_SCORE_STATE, scoring.PreScoreState(scores, pod, namespace_labels))
        return None

    def _scores_by_walk(self, nodes: Sequence[NodeInfo], pod: PodInfo, namespace_labels: Mapping[str, str],
                        preferred_affinity: tuple[WeightedAffinityTerm, ...],
                        preferred_anti_affinity: tuple[WeightedAffinityTerm, ...]) -> scoring.ScoreMap:
        """PreScore's topology scores from a walk over the pods of `nodes` (when the snapshot's
        table does not cover them)."""
        has_constraints = bool(preferred_affinity or preferred_anti_affinity)
        preferred_affinity = self._resolve_weighted(preferred_affinity)
        preferred_anti_affinity = self._resolve_weighted(preferred_anti_affinity)
        weight = self.args.hard_pod_affinity_weight
        scores: scoring.ScoreMap = {}
        for node in nodes:
            if node.node is None:
                continue
            existing_pods = node.pods if has_constraints else node.pods_with_affinity
            for existing in existing_pods.values():
                scoring.process_existing_pod(
                    scores, incoming=pod, preferred_affinity=preferred_affinity,
                    preferred_anti_affinity=preferred_anti_affinity, namespace_labels=namespace_labels,
                    existing=existing, node=node, hard_pod_affinity_weight=weight)
        return scores

    def _scores_by_index(self, state: CycleState, table: NodeTable, pod: PodInfo,
                         preferred_affinity: tuple[WeightedAffinityTerm, ...],
                         preferred_anti_affinity: tuple[WeightedAffinityTerm, ...]
                         ) -> tuple[scoring.ScoreMap, dict[str, str] | None]:
        """PreScore's topology scores from the index of alike pods and terms, and the pod's
        namespace labels when they were read for them."""
        index = self._index
        looked_up = state.get(_LOOKED_UP)
        if looked_up is None or looked_up.table is not table or looked_up.version != table.version:
            index.update(table)
            looked_up = None
        scores: scoring.ScoreMap = {}
        if not index.terms.by_key and not preferred_affinity and not preferred_anti_affinity:
            return scores, None
        for kind, terms, sign in ((pod_index.PREFERRED_AFFINITY, preferred_affinity, 1),
                                  (pod_index.PREFERRED_ANTI, preferred_anti_affinity, -1)):
            if not terms:
                continue
            resolved = self._resolve_weighted(terms)
            for raw_term, weighted in zip(pod_index.raw_terms(pod, kind), resolved, strict=True):
                term = weighted.term
                for group in index.matching_pod_groups((raw_term,), (term,)):
                    index.per_value(group, term.topology_key, sign * weighted.weight, scores)
        namespace_labels = None
        if index.terms.by_key:
            hard = self.args.hard_pod_affinity_weight
            namespace_labels = self.namespace_labels(pod.namespace)
            groups = (looked_up.term_groups if looked_up is not None and looked_up.namespace_labels == namespace_labels
                      else index.term_groups(pod, namespace_labels))
            for group in groups:
                kind = group.kind
                if kind == pod_index.PREFERRED_AFFINITY:
                    scale = group.weight
                elif kind == pod_index.PREFERRED_ANTI:
                    scale = -group.weight
                elif kind == pod_index.REQUIRED_AFFINITY and hard > 0:
                    scale = hard
                else:
                    continue  # required anti-affinity never scores
                index.per_value(group, group.representative.topology_key, scale, scores)
        return scores, namespace_labels

    def _nodes_with_scoring_pods(self) -> list[NodeInfo]:
        """Nodes hosting pods whose terms can score another pod: required affinity (weighted by
        hardPodAffinityWeight) or preferred terms. Required anti-affinity alone never scores."""
        snapshot = self.handle.snapshot
        with_affinity = snapshot.have_pods_with_affinity()
        table = snapshot.table
        if not with_affinity or len(table) != len(snapshot.node_infos()):
            return with_affinity
        rows = np.flatnonzero(table.column(scoring.SCORING_PODS))
        return [table.nodes[r] for r in rows.tolist()]

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        return scoring.score_node(state.read(PRE_SCORE_STATE), node)

    def score_nodes(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        return scoring.score_rows(state.read(PRE_SCORE_STATE), table, rows)

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: np.ndarray) -> np.ndarray:
        pre_score = state.get(PRE_SCORE_STATE)
        if pre_score is None or not pre_score.topology_score:
            return scores
        return scoring.normalize(scores)

    # -- queueing hints -----------------------------------------------------------------------

    def events_to_register(self) -> Iterable[ClusterEventWithHint]:
        return (
            ClusterEventWithHint(
                ClusterEvent(EventResource.POD, ActionType.ADD | ActionType.UPDATE_POD_LABEL | ActionType.DELETE),
                self.is_schedulable_after_pod_change),
            ClusterEventWithHint(
                ClusterEvent(EventResource.NODE,
                             ActionType.ADD | ActionType.UPDATE_NODE_LABEL | ActionType.UPDATE_NODE_TAINT),
                self.is_schedulable_after_node_change),
        )

    def is_schedulable_after_pod_change(self, pod: Any, old: Any, new: Any) -> QueueingHint:
        target, original, modified = _pod_info(pod), _pod_info(old), _pod_info(new)
        assert target is not None
        if (modified is not None and not modified.node_name) or (original is not None and not original.node_name):
            return QueueingHint.SKIP  # unscheduled pods change nothing
        terms = target.required_affinity_terms
        anti_terms = target.required_anti_affinity_terms
        matches_all = filtering.pod_matches_all_terms
        if original is not None and modified is not None:
            if not matches_all(terms, original) and matches_all(terms, modified):
                return QueueingHint.QUEUE
            if matches_all(anti_terms, original) and not matches_all(anti_terms, modified):
                return QueueingHint.QUEUE
            return QueueingHint.SKIP
        if modified is not None:
            return QueueingHint.QUEUE if matches_all(terms, modified) else QueueingHint.SKIP
        assert original is not None
        if matches_all(anti_terms, original):
            return QueueingHint.QUEUE
        # The deleted pod's own anti-affinity may have been what rejected the target.
        if any(t.matches(target, self.namespace_labels(target.namespace))
               for t in original.required_anti_affinity_terms):
            return QueueingHint.QUEUE
        return QueueingHint.SKIP

    def is_schedulable_after_node_change(self, pod: Any, old: Any, new: Any) -> QueueingHint:
        target = _pod_info(pod)
        assert target is not None
        labels = _node_labels(new)
        for term in (*target.required_affinity_terms, *target.required_anti_affinity_terms):
            if term.topology_key in labels:
                return QueueingHint.QUEUE
        return QueueingHint.SKIP
