"""Label selectors (metav1.LabelSelector) and node selector terms (v1.NodeSelectorTerm).

Selectors are compiled once into predicates, so matching many nodes or pods is cheap.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from typing import Any

Labels = Mapping[str, str]
LabelPredicate = Callable[[Labels], bool]


class SelectorError(ValueError):
    """A selector that the API server would reject."""


def _everything(_: Labels) -> bool:
    return True


def _nothing(_: Labels) -> bool:
    return False


_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


@lru_cache(maxsize=4096)
def key_problem(key: str) -> str | None:
    """Why `key` is not a label key (upstream's IsQualifiedName), or None."""
    parts = key.split("/")
    if len(parts) > 2:
        return (f'key: Invalid value: "{key}": a qualified name must consist of alphanumeric characters, '
                "'-', '_' or '.', and must start and end with an alphanumeric character")
    name = parts[-1]
    if len(parts) == 2 and (not parts[0] or len(parts[0]) > 253 or not _SUBDOMAIN.match(parts[0])):
        return f'key: Invalid value: "{key}": prefix part must be a lowercase RFC 1123 subdomain'
    if not name:
        return f'key: Invalid value: "{key}": name part must be non-empty'
    if len(name) > 63:
        return f'key: Invalid value: "{key}": name part must be no more than 63 characters'
    if not _NAME.match(name):
        return (f'key: Invalid value: "{key}": name part must consist of alphanumeric characters, '
                "'-', '_' or '.', and must start and end with an alphanumeric character")
    return None


@lru_cache(maxsize=4096)
def value_problem(value: str) -> str | None:
    """Why `value` is not a label value (upstream's IsValidLabelValue), or None."""
    if len(value) > 63:
        return f'values: Invalid value: "{value}": must be no more than 63 characters'
    if not _VALUE.match(value):
        return (f'values: Invalid value: "{value}": a valid label must be an empty string or consist of '
                "alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character")
    return None


def _validate(key: str, operator: str, values: Sequence[str]) -> None:
    """What labels.NewRequirement rejects: a selector built from it fails to parse, so
    (depending on the caller, as upstream) its term matches nothing or the pod errors."""
    problem = key_problem(key) if isinstance(key, str) else f"key: Invalid value: {key!r}"
    if problem is None:
        problem = next((p for v in values if (p := value_problem(v) if isinstance(v, str)
                                              else f"values: Invalid value: {v!r}") is not None), None)
    if problem is not None:
        raise SelectorError(problem)


def _requirement(key: str, operator: str, values: Sequence[str]) -> LabelPredicate:
    if operator in ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"):
        _validate(key, operator, values)
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
        for key, value in match_labels.items():
            _validate(key, "=", [value])
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
