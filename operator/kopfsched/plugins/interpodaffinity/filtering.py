"""InterPodAffinity PreFilter/Filter: required pod affinity and anti-affinity.

PreFilter counts, per topology pair (key, value):
- existing pods whose required anti-affinity terms match the incoming pod (symmetry);
- existing pods matching all of the incoming pod's required affinity terms;
- existing pods matching each of the incoming pod's required anti-affinity terms.
Filter then only looks up the node's labels in those counts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np

from kopfsched.framework.affinity import AffinityTerm
from kopfsched.framework.node_table import NodeTable, label_column, label_value_codes
from kopfsched.framework.status import Status, TalliedStatuses
from kopfsched.framework.types import NodeInfo, PodInfo

ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH = "node(s) didn't satisfy existing pods anti-affinity rules"
ERR_REASON_AFFINITY_RULES_NOT_MATCH = "node(s) didn't match pod affinity rules"
ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH = "node(s) didn't match pod anti-affinity rules"

# Built once, already naming the plugin: Filter runs per rejected node, and the runtime then
# has nothing to copy.
_AFFINITY_REJECTION = Status.unresolvable(ERR_REASON_AFFINITY_RULES_NOT_MATCH).with_plugin("InterPodAffinity")
_ANTI_AFFINITY_REJECTION = Status.unschedulable(ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH).with_plugin(
    "InterPodAffinity")
_EXISTING_ANTI_AFFINITY_REJECTION = Status.unschedulable(ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH
                                                         ).with_plugin("InterPodAffinity")

TopologyCounts = dict[str, dict[str, int]]
"""topology key -> topology value -> number of matching pods (entries at zero are dropped)."""


def _update(counts: TopologyCounts, node_labels: Mapping[str, str], key: str, delta: int) -> None:
    value = node_labels.get(key)
    if value is None:
        return
    per_value = counts.setdefault(key, {})
    total = per_value.get(value, 0) + delta
    if total:
        per_value[value] = total
    else:
        per_value.pop(value, None)
        if not per_value:
            del counts[key]


def _clone(counts: TopologyCounts) -> TopologyCounts:
    return {key: dict(values) for key, values in counts.items()}


def pod_matches_all_terms(terms: Iterable[AffinityTerm], pod: PodInfo) -> bool:
    """True iff there is at least one term and the pod matches every one (namespaces already
    merged into the incoming pod's terms, so no namespace labels are needed)."""
    terms = tuple(terms)
    return bool(terms) and all(t.matches(pod) for t in terms)


def update_with_affinity_terms(counts: TopologyCounts, terms: tuple[AffinityTerm, ...], pod: PodInfo,
                               node_labels: Mapping[str, str], delta: int) -> None:
    if pod_matches_all_terms(terms, pod):
        for term in terms:
            _update(counts, node_labels, term.topology_key, delta)


def update_with_anti_affinity_terms(counts: TopologyCounts, terms: tuple[AffinityTerm, ...], pod: PodInfo,
                                    namespace_labels: Mapping[str, str] | None, node_labels: Mapping[str, str],
                                    delta: int) -> None:
    for term in terms:
        if term.matches(pod, namespace_labels):
            _update(counts, node_labels, term.topology_key, delta)


@dataclass(slots=True)
class PreFilterState:
    pod: PodInfo
    affinity_terms: tuple[AffinityTerm, ...]
    """The incoming pod's required affinity terms, namespaceSelector resolved."""
    anti_affinity_terms: tuple[AffinityTerm, ...]
    namespace_labels: dict[str, str]
    """The incoming pod's namespace labels, for matching existing pods' namespaceSelectors."""
    existing_anti_affinity_counts: TopologyCounts = field(default_factory=dict)
    affinity_counts: TopologyCounts = field(default_factory=dict)
    anti_affinity_counts: TopologyCounts = field(default_factory=dict)
    lookups: dict[tuple[str, str], np.ndarray] = field(default_factory=dict)
    """filter_rows' per-label-code arrays of the counts, built on first use (one cycle filters
    in several chunks); dropped whenever the counts change."""

    def clone(self) -> PreFilterState:
        return PreFilterState(
            pod=self.pod, affinity_terms=self.affinity_terms, anti_affinity_terms=self.anti_affinity_terms,
            namespace_labels=self.namespace_labels,
            existing_anti_affinity_counts=_clone(self.existing_anti_affinity_counts),
            affinity_counts=_clone(self.affinity_counts),
            anti_affinity_counts=_clone(self.anti_affinity_counts),
        )

    def update_with_pod(self, other: PodInfo, node: NodeInfo, delta: int) -> None:
        """Account for `other` appearing on (delta=1) or leaving (delta=-1) `node`."""
        labels = node.labels
        self.lookups.clear()
        update_with_anti_affinity_terms(self.existing_anti_affinity_counts, other.required_anti_affinity_terms,
                                        self.pod, self.namespace_labels, labels, delta)
        update_with_affinity_terms(self.affinity_counts, self.affinity_terms, other, labels, delta)
        update_with_anti_affinity_terms(self.anti_affinity_counts, self.anti_affinity_terms, other, None,
                                        labels, delta)


def existing_anti_affinity_counts(pod: PodInfo, namespace_labels: Mapping[str, str],
                                  nodes: Iterable[NodeInfo]) -> TopologyCounts:
    """Over nodes hosting pods with required anti-affinity: which of their terms match `pod`."""
    counts: TopologyCounts = {}
    for node in nodes:
        if node.node is None:
            continue
        for existing in node.pods_with_required_anti_affinity.values():
            update_with_anti_affinity_terms(counts, existing.required_anti_affinity_terms, pod,
                                            namespace_labels, node.labels, 1)
    return counts


def incoming_affinity_counts(affinity_terms: tuple[AffinityTerm, ...], anti_affinity_terms: tuple[AffinityTerm, ...],
                             nodes: Iterable[NodeInfo]) -> tuple[TopologyCounts, TopologyCounts]:
    """Over every pod of every node: which match the incoming pod's (anti-)affinity terms."""
    affinity: TopologyCounts = {}
    anti: TopologyCounts = {}
    if not affinity_terms and not anti_affinity_terms:
        return affinity, anti
    for node in nodes:
        if node.node is None or not node.pods:
            continue
        labels = node.labels
        for existing in node.pods.values():
            if affinity_terms:
                update_with_affinity_terms(affinity, affinity_terms, existing, labels, 1)
            if anti_affinity_terms:
                update_with_anti_affinity_terms(anti, anti_affinity_terms, existing, None, labels, 1)
    return affinity, anti


def _positive(counts: TopologyCounts, key: str, value: str | None) -> bool:
    return value is not None and counts.get(key, {}).get(value, 0) > 0


def satisfy_existing_pods_anti_affinity(state: PreFilterState, labels: Mapping[str, str]) -> bool:
    return not any(_positive(state.existing_anti_affinity_counts, key, labels.get(key))
                   for key in state.existing_anti_affinity_counts)


def satisfy_pod_anti_affinity(state: PreFilterState, labels: Mapping[str, str]) -> bool:
    if not state.anti_affinity_counts:
        return True
    return not any(_positive(state.anti_affinity_counts, t.topology_key, labels.get(t.topology_key))
                   for t in state.anti_affinity_terms)


def satisfy_pod_affinity(state: PreFilterState, labels: Mapping[str, str]) -> bool:
    pods_exist = True
    for term in state.affinity_terms:
        value = labels.get(term.topology_key)
        if value is None:
            # All topology labels must exist on the node.
            return False
        if not _positive(state.affinity_counts, term.topology_key, value):
            pods_exist = False
    # The first pod of a group with affinity to itself: when no pod anywhere matches, the pod
    # may go to any node with the topology labels, as long as it matches its own terms.
    return pods_exist or _first_of_group(state)


def _first_of_group(state: PreFilterState) -> bool:
    return not state.affinity_counts and pod_matches_all_terms(state.affinity_terms, state.pod)


def filter_node(state: PreFilterState, node: NodeInfo) -> Status | None:
    labels = node.labels
    if not satisfy_pod_affinity(state, labels):
        return _AFFINITY_REJECTION
    if not satisfy_pod_anti_affinity(state, labels):
        return _ANTI_AFFINITY_REJECTION
    if not satisfy_existing_pods_anti_affinity(state, labels):
        return _EXISTING_ANTI_AFFINITY_REJECTION
    return None


def _positive_rows(state: PreFilterState, which: str, counts: TopologyCounts, key: str, table: NodeTable,
                   rows: np.ndarray) -> np.ndarray:
    """True for rows whose value of label `key` has a positive count."""
    codes = table.column(label_column(key))[rows]
    value_codes = label_value_codes(key)
    lookup = state.lookups.get((which, key))
    if lookup is None or len(lookup) <= len(value_codes):
        lookup = np.zeros(len(value_codes) + 1, dtype=bool)
        for value, n in counts.get(key, {}).items():
            code = value_codes.get(value)
            if code is not None and n > 0:
                lookup[code] = True
        state.lookups[(which, key)] = lookup
    # Missing labels (-1) read the trailing False slot.
    return lookup[codes]


def _passing_rows(state: PreFilterState, table: NodeTable, rows: np.ndarray
                  ) -> tuple[np.ndarray | None, np.ndarray | None, np.ndarray | None]:
    """Per row, whether it passes the pod's affinity, its anti-affinity, and the existing pods'
    anti-affinity: `filter_node`'s three checks, in its order (None: every row passes it)."""
    affinity_ok = None
    if state.affinity_terms:
        has_all = np.ones(len(rows), dtype=bool)
        pods_exist = np.ones(len(rows), dtype=bool)
        for term in state.affinity_terms:
            key = term.topology_key
            has_all &= table.column(label_column(key))[rows] >= 0
            pods_exist &= _positive_rows(state, "affinity", state.affinity_counts, key, table, rows)
        affinity_ok = has_all & (pods_exist | _first_of_group(state))
    anti_ok = None
    if state.anti_affinity_counts:
        for term in state.anti_affinity_terms:
            rejected = _positive_rows(state, "anti", state.anti_affinity_counts, term.topology_key, table, rows)
            if anti_ok is None:
                anti_ok = ~rejected
            else:
                anti_ok &= ~rejected
    existing_ok = None
    for key in state.existing_anti_affinity_counts:
        rejected = _positive_rows(state, "existing", state.existing_anti_affinity_counts, key, table, rows)
        if existing_ok is None:
            existing_ok = ~rejected
        else:
            existing_ok &= ~rejected
    return affinity_ok, anti_ok, existing_ok


def filter_rows(state: PreFilterState, table: NodeTable, rows: np.ndarray) -> np.ndarray:
    """`filter_node` over many rows at once: True where the pod passes."""
    passing = None
    for ok in _passing_rows(state, table, rows):
        if ok is not None:
            passing = ok if passing is None else passing & ok
    return np.ones(len(rows), dtype=bool) if passing is None else passing


_REJECTIONS = (_AFFINITY_REJECTION, _ANTI_AFFINITY_REJECTION, _EXISTING_ANTI_AFFINITY_REJECTION)


def rejection_statuses(state: PreFilterState, table: NodeTable, rows: np.ndarray) -> TalliedStatuses:
    """`filter_node`'s status for each of `rows` (rows `filter_rows` rejected), tallied: the
    first check each row fails names its reason."""
    every = np.ones(len(rows), dtype=bool)
    affinity_ok, anti_ok, existing_ok = (every if ok is None else ok for ok in _passing_rows(state, table, rows))
    codes = np.where(~affinity_ok, 0, np.where(~anti_ok, 1, np.where(~existing_ok, 2, 3)))

    def status_of(code: int) -> Status:
        if code < len(_REJECTIONS):
            return _REJECTIONS[code]
        return Status.as_error("InterPodAffinity: filter_statuses asked about a node that passes").with_plugin(
            "InterPodAffinity")

    return TalliedStatuses.of_codes(codes, status_of)
