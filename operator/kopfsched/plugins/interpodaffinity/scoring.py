"""InterPodAffinity PreScore/Score/NormalizeScore: preferred terms, both directions.

PreScore sums, per topology pair, the weights of
- the incoming pod's preferred affinity terms (+) and anti-affinity terms (-) matched by existing pods;
- existing pods' required affinity terms (+hardPodAffinityWeight), preferred affinity (+) and
  preferred anti-affinity (-) terms matched by the incoming pod.
A node's raw score is the sum over its topology labels; NormalizeScore rescales min..max to 0..100.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from kopfsched.framework.affinity import AffinityTerm, WeightedAffinityTerm
from kopfsched.framework.interface import MAX_NODE_SCORE
from kopfsched.framework.node_table import ColumnSpec, NodeTable, label_column, label_value_codes
from kopfsched.framework.types import NodeInfo, PodInfo

ScoreMap = dict[str, dict[str, int]]
"""topology key -> topology value -> summed weight."""


@dataclass(slots=True)
class PreScoreState:
    topology_score: ScoreMap
    pod: PodInfo
    namespace_labels: dict[str, str]

    def clone(self) -> PreScoreState:
        return self  # read-only after PreScore


def _scores_others(pod: PodInfo) -> bool:
    return bool(pod.required_affinity_terms or pod.preferred_affinity_terms or pod.preferred_anti_affinity_terms)


SCORING_PODS = ColumnSpec(
    "InterPodAffinity:scoring-pods",
    lambda node: sum(1 for p in node.pods_with_affinity.values() if _scores_others(p)) if node.node is not None else 0)
"""Per node, the pods whose own terms score incoming pods (see process_existing_pod)."""


def _process_term(scores: ScoreMap, term: AffinityTerm, weight: int, pod: PodInfo,
                  namespace_labels: Mapping[str, str] | None, node_labels: Mapping[str, str]) -> None:
    if term.matches(pod, namespace_labels):
        value = node_labels.get(term.topology_key)
        if value is not None:
            per_value = scores.setdefault(term.topology_key, {})
            per_value[value] = per_value.get(value, 0) + weight


def _process_terms(scores: ScoreMap, terms: tuple[WeightedAffinityTerm, ...], pod: PodInfo,
                   namespace_labels: Mapping[str, str] | None, node_labels: Mapping[str, str], sign: int) -> None:
    for weighted in terms:
        _process_term(scores, weighted.term, weighted.weight * sign, pod, namespace_labels, node_labels)


def process_existing_pod(scores: ScoreMap, *, incoming: PodInfo, preferred_affinity: tuple[WeightedAffinityTerm, ...],
                         preferred_anti_affinity: tuple[WeightedAffinityTerm, ...],
                         namespace_labels: Mapping[str, str], existing: PodInfo, node: NodeInfo,
                         hard_pod_affinity_weight: int) -> None:
    labels = node.labels
    if not labels:
        return
    # The incoming pod's terms have their namespaceSelector resolved: no namespace labels needed.
    _process_terms(scores, preferred_affinity, existing, None, labels, 1)
    _process_terms(scores, preferred_anti_affinity, existing, None, labels, -1)
    if hard_pod_affinity_weight > 0:
        for term in existing.required_affinity_terms:
            _process_term(scores, term, hard_pod_affinity_weight, incoming, namespace_labels, labels)
    _process_terms(scores, existing.preferred_affinity_terms, incoming, namespace_labels, labels, 1)
    _process_terms(scores, existing.preferred_anti_affinity_terms, incoming, namespace_labels, labels, -1)


def score_node(state: PreScoreState, node: NodeInfo) -> int:
    labels = node.labels
    score = 0
    for key, per_value in state.topology_score.items():
        value = labels.get(key)
        if value is not None:
            score += per_value.get(value, 0)
    return score


def score_rows(state: PreScoreState, table: NodeTable, rows: np.ndarray) -> np.ndarray:
    scores: np.ndarray | None = None
    for key, per_value in state.topology_score.items():
        # lookup_by_label's, for sums that are ints (no look for a float among them).
        codes = table.column(label_column(key))[rows]  # first: building it interns the values
        value_codes = label_value_codes(key)
        lookup = np.zeros(len(value_codes) + 1, dtype=np.int64)
        for value, amount in per_value.items():
            code = value_codes.get(value)
            if code is not None:
                lookup[code] = amount
        looked_up = lookup[codes]  # a new array: the first key's sums, added to in place
        if scores is None:
            scores = looked_up
        else:
            scores += looked_up
    return np.zeros(len(rows), dtype=np.int64) if scores is None else scores


def normalize(scores: np.ndarray) -> np.ndarray:
    """Min-max to 0..MAX_NODE_SCORE, truncating as upstream's int64(float) does."""
    if len(scores) == 0:
        return scores
    # a[a.argmin()]: the bound for less than a reduction costs; true_divide converts to float
    # as it divides, and x * 100.0 is 100.0 * x bit for bit.
    low, high = int(scores[scores.argmin()]), int(scores[scores.argmax()])
    spread = high - low
    if spread <= 0:
        return np.zeros(len(scores), dtype=np.int64)
    fraction = np.true_divide(np.subtract(scores, low), float(spread))
    fraction *= float(MAX_NODE_SCORE)
    return fraction.astype(np.int64)
