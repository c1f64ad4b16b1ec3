"""Parsed pod (anti-)affinity terms, as upstream's framework.AffinityTerm.

A term is parsed once per PodInfo (see the `*_affinity_terms` properties there). Its label
selector already has the owning pod's `matchLabelKeys` / `mismatchLabelKeys` merged in, which
is what the API server does at pod creation; merging again is harmless, so pods that arrive
already merged keep their meaning.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from kopfsched.framework.labels import LabelPredicate, Labels, label_selector

if TYPE_CHECKING:
    from kopfsched.framework.types import PodInfo

_NO_LABELS: dict[str, str] = {}


def _nothing(_: Labels) -> bool:
    return False


@dataclass(frozen=True, slots=True)
class AffinityTerm:
    """One PodAffinityTerm: which pods (namespaces + selector) in which topology (key)."""

    namespaces: frozenset[str]
    selector: LabelPredicate
    topology_key: str
    namespace_selector: LabelPredicate = _nothing
    """Matches namespace labels; nothing when the term has no namespaceSelector."""
    raw_namespace_selector: Mapping[str, Any] | None = None
    """The namespaceSelector as written, to resolve it against the Namespaces once per cycle."""

    @property
    def namespace_selector_is_empty(self) -> bool:
        """`namespaceSelector: {}` selects every namespace (upstream's Selector.Empty())."""
        raw = self.raw_namespace_selector
        return raw is not None and not raw.get("matchLabels") and not raw.get("matchExpressions")

    def matches(self, pod: PodInfo, namespace_labels: Labels | None = None) -> bool:
        """Does `pod` (whose namespace has `namespace_labels`) fall under this term?"""
        if pod.namespace in self.namespaces or self.namespace_selector(namespace_labels or _NO_LABELS):
            return self.selector(pod.labels)
        return False

    def with_namespaces_resolved(self, namespaces: Iterable[Mapping[str, Any]]) -> AffinityTerm:
        """The term with its namespaceSelector unrolled into `namespaces` (given all Namespace
        objects), so matching no longer needs the other pod's namespace labels. An empty
        selector (all namespaces) is kept as is, as upstream does."""
        if self.raw_namespace_selector is None or self.namespace_selector_is_empty:
            return self
        names = {
            (ns.get("metadata") or {}).get("name", "")
            for ns in namespaces
            if self.namespace_selector((ns.get("metadata") or {}).get("labels") or _NO_LABELS)
        }
        return replace(self, namespaces=self.namespaces | names, namespace_selector=_nothing,
                       raw_namespace_selector=None)


@dataclass(frozen=True, slots=True)
class WeightedAffinityTerm:
    term: AffinityTerm
    weight: int


def merge_label_keys(selector: Mapping[str, Any] | None, pod_labels: Mapping[str, str],
                     match_label_keys: Iterable[str] = (),
                     mismatch_label_keys: Iterable[str] = ()) -> Mapping[str, Any] | None:
    """The selector with `key In (pod's value)` / `key NotIn (pod's value)` added for each key
    the pod has a label for. A nil selector stays nil (it selects nothing)."""
    extra = [
        {"key": k, "operator": "In", "values": [pod_labels[k]]} for k in match_label_keys if k in pod_labels
    ] + [
        {"key": k, "operator": "NotIn", "values": [pod_labels[k]]} for k in mismatch_label_keys if k in pod_labels
    ]
    if not extra or selector is None:
        return selector
    return {**selector, "matchExpressions": [*(selector.get("matchExpressions") or ()), *extra]}


def new_affinity_term(namespace: str, pod_labels: Mapping[str, str], term: Mapping[str, Any]) -> AffinityTerm:
    """Parse a v1.PodAffinityTerm of a pod in `namespace` with `pod_labels`."""
    selector = merge_label_keys(term.get("labelSelector"), pod_labels, term.get("matchLabelKeys") or (),
                                term.get("mismatchLabelKeys") or ())
    raw_ns_selector = term.get("namespaceSelector")
    namespaces = term.get("namespaces") or ()
    # No namespaces and no namespaceSelector means "the pod's own namespace".
    names = frozenset(namespaces) if namespaces or raw_ns_selector is not None else frozenset((namespace,))
    return AffinityTerm(
        namespaces=names,
        selector=label_selector(selector),
        topology_key=term.get("topologyKey", ""),
        namespace_selector=label_selector(raw_ns_selector) if raw_ns_selector is not None else _nothing,
        raw_namespace_selector=raw_ns_selector,
    )


def affinity_terms(namespace: str, pod_labels: Mapping[str, str],
                   terms: Iterable[Mapping[str, Any]] | None) -> tuple[AffinityTerm, ...]:
    return tuple(new_affinity_term(namespace, pod_labels, t) for t in terms or ())


def weighted_affinity_terms(namespace: str, pod_labels: Mapping[str, str],
                            terms: Iterable[Mapping[str, Any]] | None) -> tuple[WeightedAffinityTerm, ...]:
    return tuple(
        WeightedAffinityTerm(new_affinity_term(namespace, pod_labels, t.get("podAffinityTerm") or {}),
                             int(t.get("weight") or 0))
        for t in terms or ()
    )
