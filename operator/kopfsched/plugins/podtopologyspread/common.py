"""Spread constraints as the plugin reads them: parsed selectors, inclusion policies, defaulting."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kopfsched.framework.handle import ObjectLister
from kopfsched.framework.labels import LabelPredicate, NodePredicate, label_selector, node_selector
from kopfsched.framework.types import NodeInfo, PodInfo

LABEL_HOSTNAME = "kubernetes.io/hostname"
LABEL_TOPOLOGY_ZONE = "topology.kubernetes.io/zone"
DO_NOT_SCHEDULE = "DoNotSchedule"
SCHEDULE_ANYWAY = "ScheduleAnyway"
HONOR = "Honor"
IGNORE = "Ignore"

SYSTEM_DEFAULT_CONSTRAINTS: tuple[dict[str, Any], ...] = (
    {"topologyKey": LABEL_HOSTNAME, "whenUnsatisfiable": SCHEDULE_ANYWAY, "maxSkew": 3},
    {"topologyKey": LABEL_TOPOLOGY_ZONE, "whenUnsatisfiable": SCHEDULE_ANYWAY, "maxSkew": 5},
)
"""Upstream's constraints for `defaultingType: System`."""


@dataclass(frozen=True, slots=True)
class Selector:
    """A compiled label selector that remembers whether it is empty (no requirements):
    upstream counts no pods for an empty selector, though it matches every pod."""

    matches: LabelPredicate
    empty: bool
    signature: str
    """Canonical text of the selector, to cache per-node counts by."""

    @classmethod
    def of(cls, raw: Mapping[str, Any] | None) -> Selector:
        if raw is None:
            return cls(label_selector(None), False, "null")
        empty = not raw.get("matchLabels") and not raw.get("matchExpressions")
        return cls(label_selector(raw), empty, json.dumps(raw, sort_keys=True, separators=(",", ":")))


@dataclass(frozen=True, slots=True)
class TopologySpreadConstraint:
    max_skew: int
    topology_key: str
    selector: Selector
    min_domains: int = 1
    node_affinity_policy: str = HONOR
    node_taints_policy: str = IGNORE


def _merge_match_label_keys(raw: Mapping[str, Any] | None, keys: Sequence[str],
                            pod_labels: Mapping[str, str]) -> Mapping[str, Any] | None:
    match = {k: pod_labels[k] for k in keys if k in pod_labels}
    if not match or raw is None:
        # A nil selector stays nil (upstream cannot add requirements to Nothing()).
        return raw
    return {**raw, "matchLabels": {**(raw.get("matchLabels") or {}), **match}}


def filter_constraints(raw_constraints: Iterable[Mapping[str, Any]], pod_labels: Mapping[str, str],
                       action: str) -> list[TopologySpreadConstraint]:
    """The constraints with `whenUnsatisfiable == action`, parsed, matchLabelKeys merged in."""
    result = []
    for c in raw_constraints:
        if c.get("whenUnsatisfiable", DO_NOT_SCHEDULE) != action:
            continue
        raw = _merge_match_label_keys(c.get("labelSelector"), c.get("matchLabelKeys") or (), pod_labels)
        min_domains = c.get("minDomains")
        result.append(TopologySpreadConstraint(
            max_skew=int(c.get("maxSkew") or 0),
            topology_key=c.get("topologyKey", ""),
            selector=Selector.of(raw),
            min_domains=1 if min_domains is None else int(min_domains),
            node_affinity_policy=c.get("nodeAffinityPolicy") or HONOR,
            node_taints_policy=c.get("nodeTaintsPolicy") or IGNORE,
        ))
    return result


def node_labels_match_spread_constraints(labels: Mapping[str, str],
                                         constraints: Iterable[TopologySpreadConstraint]) -> bool:
    return all(c.topology_key in labels for c in constraints)


def count_pods_match_selector(node: NodeInfo, selector: Selector, namespace: str) -> int:
    if selector.empty:
        return 0
    matches = selector.matches
    return sum(
        1 for p in node.pods.values()
        if p.namespace == namespace and not p.is_terminating and matches(p.labels)
    )


def pod_labels_match_spread_constraints(constraints: Iterable[TopologySpreadConstraint],
                                        labels: Mapping[str, str]) -> bool:
    return any(c.selector.matches(labels) for c in constraints)


# -- node inclusion policies -----------------------------------------------------------------


def required_node_affinity(pod: PodInfo) -> NodePredicate | None:
    """The pod's nodeSelector AND required node affinity as one predicate; None matches every node."""
    node_selector_labels = pod.spec.get("nodeSelector") or {}
    node_affinity = (pod.affinity.get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
    if not node_selector_labels and node_affinity is None:
        return None
    terms = node_selector(node_affinity.get("nodeSelectorTerms") or ()) if node_affinity is not None else None

    def match(labels: Mapping[str, str], name: str) -> bool:
        if any(labels.get(k) != v for k, v in node_selector_labels.items()):
            return False
        return terms is None or terms(labels, name)

    return match


def _tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    if key and key != taint.get("key"):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    return operator == "Equal" and (toleration.get("value") or "") == (taint.get("value") or "")


def has_untolerated_do_not_schedule_taint(node: NodeInfo, tolerations: Sequence[Mapping[str, Any]]) -> bool:
    """A NoSchedule/NoExecute taint none of the tolerations tolerates (PreferNoSchedule is ignored)."""
    return any(
        taint.get("effect") in ("NoSchedule", "NoExecute") and not any(_tolerates(t, taint) for t in tolerations)
        for taint in node.taints
    )


def match_node_inclusion_policies(constraint: TopologySpreadConstraint, pod: PodInfo, node: NodeInfo,
                                  affinity: NodePredicate | None) -> bool:
    if constraint.node_affinity_policy == HONOR and affinity is not None and not affinity(node.labels, node.name):
        return False
    return not (constraint.node_taints_policy == HONOR
                and has_untolerated_do_not_schedule_taint(node, pod.tolerations))


# -- defaulting ------------------------------------------------------------------------------


DEFAULT_SELECTOR_KINDS = ("Service", "ReplicationController", "ReplicaSet", "StatefulSet")
"""The kinds `default_selector` reads."""


def controller_of(pod: PodInfo) -> Mapping[str, Any] | None:
    for ref in (pod.pod.get("metadata") or {}).get("ownerReferences") or ():
        if ref.get("controller"):
            return ref
    return None


def default_selector(pod: PodInfo, objects: ObjectLister) -> Mapping[str, Any]:
    """Upstream's helper.DefaultSelector: the selectors of the Services selecting the pod and
    of its controlling ReplicationController, ReplicaSet or StatefulSet, ANDed together."""
    match_labels: dict[str, str] = {}
    for service in objects.list("Service", pod.namespace):
        selector = (service.get("spec") or {}).get("selector")
        if selector is None:
            continue
        if all(pod.labels.get(k) == v for k, v in selector.items()):
            match_labels.update(selector)
    expressions: list[Mapping[str, Any]] = []
    owner = controller_of(pod)
    if owner is not None:
        group = (owner.get("apiVersion") or "").rpartition("/")[0] if "/" in (owner.get("apiVersion") or "") else ""
        kind = owner.get("kind")
        if group == "" and kind == "ReplicationController":
            rc = objects.get("ReplicationController", owner.get("name", ""), pod.namespace)
            if rc is not None:
                match_labels.update((rc.get("spec") or {}).get("selector") or {})
        elif group == "apps" and kind in ("ReplicaSet", "StatefulSet"):
            owner_obj = objects.get(kind, owner.get("name", ""), pod.namespace)
            owner_selector = ((owner_obj or {}).get("spec") or {}).get("selector")
            if owner_selector is not None:
                expressions.extend({"key": k, "operator": "In", "values": [v]}
                                   for k, v in (owner_selector.get("matchLabels") or {}).items())
                expressions.extend(owner_selector.get("matchExpressions") or ())
    combined: dict[str, Any] = {}
    if match_labels:
        combined["matchLabels"] = match_labels
    if expressions:
        combined["matchExpressions"] = expressions
    return combined
