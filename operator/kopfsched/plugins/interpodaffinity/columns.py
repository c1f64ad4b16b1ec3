"""PreFilter's topology counts from NodeTable columns instead of a walk over every pod.

Counting which pods match a term is per node and only changes when the node's pods change,
so each count is a NodeTable column, keyed by a signature of what is matched (the incoming
pod's labels and namespace, or a term's content). The table recomputes only the rows of nodes
that changed since the last cycle; summing a column into topology domains is a numpy
bincount over the node's label codes. Pods of one workload share a signature, so a stream of
replicas reuses the same columns.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from kopfsched.framework.affinity import AffinityTerm
from kopfsched.framework.node_table import ColumnSpec, NodeTable, label_column, label_value_codes
from kopfsched.framework.types import NodeInfo, PodInfo

MAX_COLUMNS = 64
"""Signature columns kept on the NodeTable (least recently used are dropped)."""
_MAX_KEYS = 62

_key_bits: dict[str, int] = {}


def _key_bit(key: str) -> int:
    bit = _key_bits.get(key)
    if bit is None:
        bit = _key_bits[key] = 1 << min(len(_key_bits), _MAX_KEYS)
    return bit


def _anti_affinity_key_bits(node: NodeInfo) -> int:
    bits = 0
    if node.node is not None:
        for existing in node.pods_with_required_anti_affinity.values():
            for term in existing.required_anti_affinity_terms:
                bits |= _key_bit(term.topology_key)
    return bits


ANTI_AFFINITY_KEYS = ColumnSpec("InterPodAffinity:anti-affinity-keys", _anti_affinity_key_bits)
"""Per node, a bit per topology key used by its pods' required anti-affinity terms."""


def _sorted_items(labels: Mapping[str, str]) -> list[list[str]]:
    return sorted([k, v] for k, v in labels.items())


def pod_signature(pod: PodInfo, namespace_labels: Mapping[str, str]) -> str:
    """What existing pods' terms can see of `pod`: its namespace, labels and namespace's labels."""
    return json.dumps([pod.namespace, _sorted_items(pod.labels), _sorted_items(namespace_labels)])


def term_signature(raw: Mapping[str, Any], term: AffinityTerm, pod: PodInfo) -> str:
    """A parsed term's content: the raw term, the owner's label values its label keys merged in,
    and the namespaces it resolved to."""
    keys = [*(raw.get("matchLabelKeys") or ()), *(raw.get("mismatchLabelKeys") or ())]
    return json.dumps([raw, [pod.labels.get(k) for k in keys], sorted(term.namespaces)], sort_keys=True,
                      default=str)


class CountColumns:
    """Per-signature NodeTable columns with least-recently-used eviction."""

    def __init__(self) -> None:
        self._specs: OrderedDict[str, ColumnSpec] = OrderedDict()

    def column(self, table: NodeTable, name: str, extract: Callable[[NodeInfo], int]) -> np.ndarray:
        spec = self._specs.get(name)
        if spec is None:
            spec = self._specs[name] = ColumnSpec(name, extract)
            if len(self._specs) > MAX_COLUMNS:
                _, oldest = self._specs.popitem(last=False)
                table.drop(oldest)
        else:
            self._specs.move_to_end(name)
        return table.column(spec)


def topology_keys(table: NodeTable) -> list[str] | None:
    """Topology keys of every required anti-affinity term in the cluster; None when there are
    too many distinct keys for the bit column (callers then walk the pods)."""
    if len(_key_bits) > _MAX_KEYS:
        return None
    bits = int(np.bitwise_or.reduce(table.column(ANTI_AFFINITY_KEYS))) if len(table) else 0
    return [key for key, bit in _key_bits.items() if bits & bit]


def domain_counts(table: NodeTable, key: str, per_node: np.ndarray) -> dict[str, int]:
    """Sum a per-node count column into {value of label `key`: total}, skipping zeros and
    nodes without the label."""
    codes = table.column(label_column(key))
    mask = (per_node > 0) & (codes >= 0)
    if not mask.any():
        return {}
    totals = np.bincount(codes[mask], weights=per_node[mask])
    values = list(label_value_codes(key))
    return {values[c]: int(totals[c]) for c in np.flatnonzero(totals).tolist()}


def existing_anti_affinity_column(columns: CountColumns, table: NodeTable, pod: PodInfo,
                                  namespace_labels: Mapping[str, str], key: str) -> np.ndarray:
    """Per node: terms with topology `key` of its pods' required anti-affinity that match `pod`."""
    ns_labels = dict(namespace_labels)

    def extract(node: NodeInfo) -> int:
        if node.node is None:
            return 0
        return sum(1 for existing in node.pods_with_required_anti_affinity.values()
                   for term in existing.required_anti_affinity_terms
                   if term.topology_key == key and term.matches(pod, ns_labels))

    name = f"InterPodAffinity:existing:{key}:{pod_signature(pod, ns_labels)}"
    return columns.column(table, name, extract)


def matching_pods_column(columns: CountColumns, table: NodeTable, terms: tuple[AffinityTerm, ...],
                         signature: str) -> np.ndarray:
    """Per node: its pods that match every one of `terms` (already namespace-resolved)."""

    def extract(node: NodeInfo) -> int:
        if node.node is None:
            return 0
        return sum(1 for existing in node.pods.values() if all(t.matches(existing) for t in terms))

    return columns.column(table, f"InterPodAffinity:matching:{signature}", extract)
