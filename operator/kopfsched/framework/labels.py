"""Label selectors (metav1.LabelSelector) and node selector terms (v1.NodeSelectorTerm).

Selectors are compiled once into predicates, so matching many nodes or pods is cheap.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

Labels = Mapping[str, str]
LabelPredicate = Callable[[Labels], bool]


class SelectorError(ValueError):
    """A selector that the API server would reject."""


def _everything(_: Labels) -> bool:
    return True


def _nothing(_: Labels) -> bool:
    return False


def _requirement(key: str, operator: str, values: Sequence[str]) -> LabelPredicate:
    if operator == "In":
        allowed = frozenset(values)
        return lambda labels: key in labels and labels[key] in allowed
    if operator == "NotIn":
        banned = frozenset(values)
        return lambda labels: key not in labels or labels[key] not in banned
    if operator == "Exists":
        return lambda labels: key in labels
    if operator == "DoesNotExist":
        return lambda labels: key not in labels
    if operator in ("Gt", "Lt"):
        if len(values) != 1:
            raise SelectorError(f"{operator} requires exactly one value for key {key!r}")
        try:
            bound = int(values[0])
        except ValueError:
            raise SelectorError(f"{operator} value {values[0]!r} for key {key!r} is not an integer") from None

        def compare(labels: Labels) -> bool:
            try:
                value = int(labels[key])
            except (KeyError, ValueError):
                return False
            return value > bound if operator == "Gt" else value < bound

        return compare
    raise SelectorError(f"{operator!r} is not a valid selector operator")


def _all_of(predicates: list[LabelPredicate]) -> LabelPredicate:
    if not predicates:
        return _everything
    if len(predicates) == 1:
        return predicates[0]
    return lambda labels: all(p(labels) for p in predicates)


def label_selector(selector: Mapping[str, Any] | None) -> LabelPredicate:
    """A metav1.LabelSelector as a predicate. None selects nothing; `{}` selects everything."""
    if selector is None:
        return _nothing
    predicates: list[LabelPredicate] = []
    match_labels = selector.get("matchLabels") or {}
    if match_labels:
        wanted = dict(match_labels)
        predicates.append(lambda labels: all(labels.get(k) == v for k, v in wanted.items()))
    for expr in selector.get("matchExpressions") or ():
        operator = expr.get("operator")
        if operator not in ("In", "NotIn", "Exists", "DoesNotExist"):
            raise SelectorError(f"{operator!r} is not a valid label selector operator")
        predicates.append(_requirement(expr.get("key", ""), operator, expr.get("values") or ()))
    return _all_of(predicates)


NodePredicate = Callable[[Labels, str], bool]
"""Matches a node by its labels and its name (the only field selectors allow)."""


def node_selector_term(term: Mapping[str, Any]) -> NodePredicate:
    """A NodeSelectorTerm: all its expressions and fields must match. An empty term matches nothing."""
    label_preds = [
        _requirement(e.get("key", ""), e.get("operator", ""), e.get("values") or ())
        for e in term.get("matchExpressions") or ()
    ]
    field_preds: list[LabelPredicate] = []
    for e in term.get("matchFields") or ():
        if e.get("key") != "metadata.name":
            raise SelectorError(f"unsupported field selector key {e.get('key')!r}")
        if e.get("operator") not in ("In", "NotIn"):
            raise SelectorError(f"{e.get('operator')!r} is not a valid field selector operator")
        field_preds.append(_requirement("metadata.name", e["operator"], e.get("values") or ()))
    if not label_preds and not field_preds:
        return lambda labels, name: False
    match_labels = _all_of(label_preds)
    match_fields = _all_of(field_preds)
    if not field_preds:
        return lambda labels, name: match_labels(labels)
    return lambda labels, name: match_labels(labels) and match_fields({"metadata.name": name})


def node_selector(terms: Sequence[Mapping[str, Any]]) -> NodePredicate:
    """A NodeSelector: its terms are ORed. No terms matches nothing."""
    compiled = [node_selector_term(t) for t in terms]
    return lambda labels, name: any(term(labels, name) for term in compiled)
