"""The snapshot's pods and terms grouped by content, kept up to date node by node.

PreFilter and PreScore need, for each incoming pod, which existing pods match its terms and
which existing pods' terms match it. Walking every pod of every node each cycle costs
O(pods); but the pods of one workload are alike, so the index keeps
- pod groups: existing pods by (namespace, labels), all a term can see of a pod, each with
  how many of its pods every node row hosts;
- term groups: existing pods' terms by content (kind, weight, the term as written with the
  owner's merged label values), each with how many such terms every row hosts.
A term is then evaluated once per group instead of once per pod, and only against the groups
that can match it: a selector's first matchLabels pair must be among a pod's labels, so
both kinds of group are found through a (label key, value) index. Which term groups match a
pod is kept by the pod's namespace, labels and namespace labels until a term group comes or
goes under one of its pairs.

Rows are refreshed when the node's generation (a NodeTable column, itself refreshed for the
nodes that changed) differs from the one indexed, and then only for the pods of the row that
changed; only the rows the table refreshed since are compared, and a new table rebuilds
everything. A group keeps, per topology key asked for, how many it has per label value, so
counting reads no node; a relabelled node drops those of the groups on its row.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kopfsched.framework.affinity import AffinityTerm
from kopfsched.framework.node_table import ColumnSpec, NodeTable
from kopfsched.framework.types import NodeInfo, PodInfo

GENERATION = ColumnSpec("InterPodAffinity:generation", lambda node: node.generation)
"""Per node, its NodeInfo generation: what the index compares to find the rows to redo."""

REQUIRED_ANTI = "required-anti"
"""Existing pods' required anti-affinity terms (PreFilter)."""
REQUIRED_AFFINITY = "required-affinity"
"""Existing pods' required affinity terms (PreScore, hardPodAffinityWeight)."""
PREFERRED_AFFINITY = "preferred-affinity"
PREFERRED_ANTI = "preferred-anti"

_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
_PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"

_MATCHED_KEPT = 4096
"""matching_term_groups' answers kept (all go when there would be more)."""

Pair = tuple[str, str] | None
"""A (label key, value) every matching pod carries; None when the selector names none."""


def required_pair(raw_term: Mapping[str, Any] | None) -> Pair:
    """The first matchLabels pair of a term as written (merged label keys only add
    expressions, which narrow it further)."""
    selector = (raw_term or {}).get("labelSelector")
    if not isinstance(selector, Mapping):
        return None
    for key, value in (selector.get("matchLabels") or {}).items():
        return (key, value) if isinstance(key, str) and isinstance(value, str) else None
    return None


_JSON = json.JSONEncoder(sort_keys=True, default=str)


def _term_key(raw: Mapping[str, Any], term: AffinityTerm, pod: PodInfo) -> Any:
    """What a term group is keyed by: terms alike have equal keys."""
    selector = raw.get("labelSelector")
    topology_key = raw.get("topologyKey")
    if len(raw) == 2 and type(selector) is dict and len(selector) == 1 and type(topology_key) is str:
        # The commonest term, a topology key and matchLabels alone, without the JSON encoding
        # of the general key (a str, so the two never collide).
        match_labels = selector.get("matchLabels")
        if type(match_labels) is dict:
            for key, value in match_labels.items():
                if type(key) is not str or type(value) is not str:
                    break
            else:
                return (topology_key, frozenset(match_labels.items()), term.namespaces)
    keys = [*(raw.get("matchLabelKeys") or ()), *(raw.get("mismatchLabelKeys") or ())]
    return _JSON.encode([raw, [pod.labels.get(k) for k in keys], sorted(term.namespaces)])


@dataclass(slots=True)
class Group:
    """Alike pods (or alike terms) and how many each row hosts."""

    representative: Any
    """A PodInfo (pod groups) or an AffinityTerm (term groups)."""
    pairs: tuple[Pair, ...]
    """Listed under these: a pod group under its labels, a term group under its required pair."""
    kind: str = ""
    weight: int = 0
    rows: dict[int, int] = field(default_factory=dict)
    values: dict[str, dict[str, int]] = field(default_factory=dict)
    """Per topology key asked for (AffinityIndex.per_value): its label value -> how many the
    rows with that value host, kept as the rows change."""


def _tally(values: dict[str, dict[str, int]], labels: Mapping[str, str], delta: int) -> None:
    for key, counts in values.items():
        value = labels.get(key)
        if value is not None:
            n = counts.get(value, 0) + delta
            if n:
                counts[value] = n
            else:
                del counts[value]


_WRITTEN_AT = {
    REQUIRED_ANTI: ("podAntiAffinity", _REQUIRED), REQUIRED_AFFINITY: ("podAffinity", _REQUIRED),
    PREFERRED_AFFINITY: ("podAffinity", _PREFERRED), PREFERRED_ANTI: ("podAntiAffinity", _PREFERRED),
}
"""Kind -> (side, field) of the pod's spec.affinity where its terms are written."""


def _written(pod: PodInfo, kind: str) -> Any:
    """The pod's terms of `kind` as written (preferred ones with their weights); empty if none."""
    side, written_as = _WRITTEN_AT[kind]
    return (pod.affinity.get(side) or {}).get(written_as) or ()


def raw_terms(pod: PodInfo, kind: str) -> list[Mapping[str, Any]]:
    written = _written(pod, kind)
    if kind in (REQUIRED_ANTI, REQUIRED_AFFINITY):
        return list(written)
    return [t.get("podAffinityTerm") or {} for t in written]


def has_terms(pod: PodInfo, kind: str) -> bool:
    """Whether the pod has terms of `kind` as written: its parsed terms of a kind, even of none,
    are parsed on their first read."""
    return bool(_written(pod, kind))


def _terms_of(pod: PodInfo) -> Iterator[tuple[str, int, AffinityTerm, Mapping[str, Any]]]:
    """(kind, weight, parsed term, term as written) of every term of an existing pod."""
    # Most pods have terms of one kind: the others are neither parsed nor listed.
    written = _written(pod, REQUIRED_ANTI)
    if written:
        for term, raw in zip(pod.required_anti_affinity_terms, written, strict=True):
            yield REQUIRED_ANTI, 0, term, raw
    written = _written(pod, REQUIRED_AFFINITY)
    if written:
        for term, raw in zip(pod.required_affinity_terms, written, strict=True):
            yield REQUIRED_AFFINITY, 0, term, raw
    written = _written(pod, PREFERRED_AFFINITY)
    if written:
        for weighted, raw in zip(pod.preferred_affinity_terms, written, strict=True):
            yield PREFERRED_AFFINITY, weighted.weight, weighted.term, raw.get("podAffinityTerm") or {}
    written = _written(pod, PREFERRED_ANTI)
    if written:
        for weighted, raw in zip(pod.preferred_anti_affinity_terms, written, strict=True):
            yield PREFERRED_ANTI, weighted.weight, weighted.term, raw.get("podAffinityTerm") or {}


class _Groups:
    """Groups by key, each also listed under its required pair."""

    def __init__(self) -> None:
        self.by_key: dict[Any, Group] = {}
        self.by_pair: dict[Pair, dict[Any, Group]] = {}
        self.matched: dict[Any, list[Group]] = {}
        """AffinityIndex.matching_term_groups' groups by what they were matched against (a
        group's rows are read where it is used): right until a group comes or goes under one
        of the pairs the pod was looked up by."""
        self.matched_under: dict[Pair, list[Any]] = {}
        """Pair -> the keys of `matched` looked up by it (some may be gone already)."""
        self._matched_size = 0

    def count(self, key: Any, row: int, labels: Mapping[str, str]) -> bool:
        """One more of the group of `key` at `row` (whose node has `labels`); False when there
        is no such group (then `create` it)."""
        group = self.by_key.get(key)
        if group is None:
            return False
        rows = group.rows
        rows[row] = rows.get(row, 0) + 1
        if group.values:
            _tally(group.values, labels, 1)
        return True

    def create(self, key: Any, row: int, group: Group) -> None:
        self.by_key[key] = group
        for pair in group.pairs:
            self.by_pair.setdefault(pair, {})[key] = group
        self._forget_matched(group.pairs)
        group.rows[row] = 1

    def remove(self, key: Any, row: int, labels: Mapping[str, str]) -> None:
        group = self.by_key[key]
        if group.values:
            _tally(group.values, labels, -1)
        n = group.rows[row] - 1
        if n:
            group.rows[row] = n
            return
        del group.rows[row]
        if not group.rows:
            del self.by_key[key]
            self._forget_matched(group.pairs)
            for pair in group.pairs:
                same_pair = self.by_pair[pair]
                del same_pair[key]
                if not same_pair:
                    del self.by_pair[pair]

    def keep_matched(self, key: Any, pairs: list[Pair], groups: list[Group]) -> None:
        if len(self.matched) >= _MATCHED_KEPT or self._matched_size >= 4 * _MATCHED_KEPT:
            self.matched.clear()
            self.matched_under.clear()
            self._matched_size = 0
        self.matched[key] = groups
        for pair in pairs:
            self.matched_under.setdefault(pair, []).append(key)
        self._matched_size += len(pairs)

    def _forget_matched(self, pairs: tuple[Pair, ...]) -> None:
        """Drop the answers a group listed under `pairs` would have been among."""
        if not self.matched:
            return
        for pair in pairs:
            for key in self.matched_under.pop(pair, ()):
                self.matched.pop(key, None)

    def candidates(self, pairs: Iterable[Pair]) -> Iterator[Group]:
        """The groups listed under any of `pairs`."""
        for pair in pairs:
            yield from (self.by_pair.get(pair) or {}).values()


@dataclass(slots=True)
class _Indexed:
    """One pod of a row as indexed: its PodInfo and the group keys it added."""

    pod: PodInfo
    pod_key: Any
    term_keys: tuple[Any, ...]


def _same_keys(indexed: PodInfo, pod: PodInfo) -> bool:
    """Whether `pod` has the group keys of `indexed`: they are computed from the labels, the
    namespace and the affinity alone, which a pod placed on its node (assumed, then confirmed)
    shares with the PodInfo it was placed from."""
    return pod.labels is indexed.labels and pod.affinity is indexed.affinity and pod.namespace == indexed.namespace


class AffinityIndex:
    """Pod groups and term groups over one NodeTable's rows."""

    def __init__(self) -> None:
        self._table: NodeTable | None = None
        self._generations = np.zeros(0, dtype=np.int64)
        self._table_version = -1
        """The table's refresh count when last looked at: equal, no row can have changed."""
        self._refresh_position = 0
        """How far into the table's refreshed rows (NodeTable.refreshed_since) the index is."""
        self._row_pods: list[dict[str, _Indexed]] = []
        """Per row: its pods by uid, as indexed."""
        self._row_labels: list[Mapping[str, str]] = []
        """Per row: its node's labels, as the groups' values were counted with."""
        self.pods = _Groups()
        self.terms = _Groups()

    def update(self, table: NodeTable) -> None:
        if table is self._table and table.version == self._table_version:
            return
        self._table_version = table.version
        generations = table.column(GENERATION)
        position, refreshed = table.refreshed_since(self._refresh_position)
        self._refresh_position = position
        if table is not self._table or len(generations) != len(self._generations):
            self._table = table
            self._row_pods = [{} for _ in range(len(table))]
            self._row_labels = [node.labels for node in table.nodes]
            self.pods = _Groups()
            self.terms = _Groups()
            changed: Iterable[int] = range(len(table))
            self._generations = generations.copy()
        elif refreshed is None:
            changed = np.flatnonzero(generations != self._generations).tolist()
            self._generations = generations.copy()
        else:
            # The generation column changes in refresh alone: only the rows refreshed since can
            # differ (in row order, as the comparison of every row gives them).
            indexed = self._generations
            if len(refreshed) == 1:  # one node changed since (a pod bound, its bind confirmed)
                row = refreshed[0]
                generation = generations.item(row)
                changed = [] if generation == indexed.item(row) else [row]
                indexed[row] = generation
            else:
                changed = [row for row in sorted(set(refreshed)) if generations.item(row) != indexed.item(row)]
                for row in changed:
                    indexed[row] = generations.item(row)
        nodes = table.nodes
        for row in changed:
            self._reindex(row, nodes[row])

    def _reindex(self, row: int, node: NodeInfo) -> None:
        """Bring the row's groups to its node's pods: only the pods added, removed or replaced
        (by a PodInfo with other keys) since the row was last indexed are looked at again."""
        indexed = self._row_pods[row]
        labels = node.labels
        if labels is not self._row_labels[row]:
            if labels != self._row_labels[row]:
                for kept in indexed.values():  # counted by the old values: counted again when asked
                    self.pods.by_key[kept.pod_key].values.clear()
                    for key in kept.term_keys:
                        self.terms.by_key[key].values.clear()
            self._row_labels[row] = labels
        pods = node.pods if node.node is not None else {}
        if not indexed.keys() <= pods.keys():  # some pod left (a bind only adds one)
            for uid in [uid for uid in indexed if uid not in pods]:
                self._unindex(row, indexed.pop(uid), labels)
        with_affinity = node.pods_with_affinity
        for uid, pod in pods.items():
            entry = indexed.get(uid)
            if entry is not None:
                if entry.pod is pod:
                    continue
                if _same_keys(entry.pod, pod):
                    entry.pod = pod
                    continue
                self._unindex(row, entry, labels)
            indexed[uid] = self._index(row, pod, uid in with_affinity, labels)

    def _index(self, row: int, pod: PodInfo, with_affinity: bool, labels: Mapping[str, str]) -> _Indexed:
        pod_key = (pod.namespace, frozenset(pod.labels.items()))
        pods = self.pods
        if not pods.count(pod_key, row, labels):
            pods.create(pod_key, row, Group(pod, tuple(pod.labels.items())))
        if not with_affinity:
            return _Indexed(pod, pod_key, ())
        term_keys = []
        terms = self.terms
        for kind, weight, term, raw in _terms_of(pod):
            key = (kind, weight, _term_key(raw, term, pod))
            if not terms.count(key, row, labels):
                terms.create(key, row, Group(term, (required_pair(raw),), kind, weight))
            term_keys.append(key)
        return _Indexed(pod, pod_key, tuple(term_keys))

    def _unindex(self, row: int, entry: _Indexed, labels: Mapping[str, str]) -> None:
        self.pods.remove(entry.pod_key, row, labels)
        for key in entry.term_keys:
            self.terms.remove(key, row, labels)

    def per_value(self, group: Group, key: str, scale: int, into: dict[str, dict[str, int]]) -> None:
        """Add `scale` x each of the group's rows' counts to into[key][its value of label key]
        (rows without the label add nothing; an entry is created even when it sums to zero)."""
        counts = group.values.get(key)
        if counts is None:  # first asked: counted from the rows, then kept as they change
            counts = group.values[key] = {}
            row_labels = self._row_labels
            for row, n in group.rows.items():
                value = row_labels[row].get(key)
                if value is not None:
                    counts[value] = counts.get(value, 0) + n
        if counts:
            target = into.setdefault(key, {})
            for value, n in counts.items():
                target[value] = target.get(value, 0) + n * scale

    def matching_pod_groups(self, raw_terms: Iterable[Mapping[str, Any] | None],
                            terms: tuple[AffinityTerm, ...]) -> list[Group]:
        """Pod groups matching every one of `terms` (namespaces resolved), found through the
        required pair of any of them."""
        pair: Pair = None
        for raw in raw_terms:
            pair = required_pair(raw)
            if pair is not None:
                break
        candidates: Iterable[Group] = (
            (self.pods.by_pair.get(pair) or {}).values() if pair is not None else self.pods.by_key.values())
        if len(terms) == 1:  # a term of its own: no generator per group
            matches = terms[0].matches
            return [g for g in candidates if matches(g.representative)]
        return [g for g in candidates if all(t.matches(g.representative) for t in terms)]

    def matching_term_groups(self, pod: PodInfo, namespace_labels: Mapping[str, str],
                             kinds: frozenset[str]) -> list[Group]:
        """Term groups of `kinds` whose term matches `pod`."""
        return [g for g in self.term_groups(pod, namespace_labels) if g.kind in kinds]

    def term_groups(self, pod: PodInfo, namespace_labels: Mapping[str, str]) -> list[Group]:
        """Term groups of every kind whose term matches `pod` (kept: not to be changed), right
        until the next update."""
        # A term reads the pod's namespace and labels alone, and the namespace's labels: pods
        # alike (PreFilter, then PreScore, of one pod; the pods of one workload) match once
        # until a term group comes or goes under one of their pairs. Labels in their order,
        # which orders the candidates.
        terms = self.terms
        try:
            key: Any = (pod.namespace, tuple(pod.labels.items()), tuple(namespace_labels.items()))
            matched = terms.matched.get(key)
        except TypeError:  # a label value that does not hash: nothing kept
            key, matched = None, None
        if matched is None:
            pairs: list[Pair] = [None, *pod.labels.items()]
            matched = [g for g in terms.candidates(pairs) if g.representative.matches(pod, namespace_labels)]
            if key is not None:
                terms.keep_matched(key, pairs, matched)
        return matched
