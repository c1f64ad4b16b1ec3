"""Label and field selectors of list and watch requests, as the API server parses them."""
from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

Matcher = Callable[[Mapping[str, Any]], bool]

# Field labels the real API accepts per resource, beyond metadata.name and metadata.namespace.
# An unknown label is a 400 there, and so here: a typo must not silently match everything.
FIELD_LABELS: dict[str, frozenset[str]] = {
    'pods': frozenset({
        'spec.nodeName', 'spec.schedulerName', 'spec.restartPolicy', 'spec.serviceAccountName',
        'spec.hostNetwork', 'status.phase', 'status.podIP', 'status.nominatedNodeName',
    }),
    'nodes': frozenset({'spec.unschedulable'}),
    'events': frozenset({
        'involvedObject.kind', 'involvedObject.namespace', 'involvedObject.name', 'involvedObject.uid',
        'involvedObject.apiVersion', 'involvedObject.resourceVersion', 'involvedObject.fieldPath',
        'reason', 'reportingComponent', 'source', 'type',
        'regarding.kind', 'regarding.namespace', 'regarding.name', 'regarding.uid',
    }),
    'persistentvolumeclaims': frozenset({'status.phase'}),
    'persistentvolumes': frozenset({'status.phase'}),
}
_GENERIC_FIELD_LABELS = frozenset({'metadata.name', 'metadata.namespace'})

_LABEL_SET = re.compile(r'^\s*([^\s!=]+)\s+(in|notin)\s+\(([^)]*)\)\s*$')
_SPLIT_OUTSIDE_PARENS = re.compile(r',(?![^(]*\))')


class SelectorError(ValueError):
    """An unparsable selector or an unsupported field label (the API answers 400)."""


def parse_label_selector(text: str | None) -> Matcher | None:
    """`a=b`, `a==b`, `a!=b`, `a in (x,y)`, `a notin (x)`, `a`, `!a`, joined by commas (AND)."""
    if not text:
        return None
    requirements = [_label_requirement(part.strip()) for part in _SPLIT_OUTSIDE_PARENS.split(text) if part.strip()]

    def matches(obj: Mapping[str, Any]) -> bool:
        labels = (obj.get('metadata') or {}).get('labels') or {}
        return all(requirement(labels) for requirement in requirements)
    return matches


def _label_requirement(part: str) -> Callable[[Mapping[str, str]], bool]:
    if found := _LABEL_SET.match(part):
        key, operator, values = found[1], found[2], {v.strip() for v in found[3].split(',') if v.strip()}
        if operator == 'in':
            return lambda labels: labels.get(key) in values
        return lambda labels: labels.get(key) not in values
    for operator in ('!=', '==', '='):
        if operator in part:
            key, value = (s.strip() for s in part.split(operator, 1))
            if not key:
                raise SelectorError(f'invalid label selector: {part!r}')
            if operator == '!=':
                return lambda labels: labels.get(key) != value
            return lambda labels: labels.get(key) == value
    if part.startswith('!'):
        key = part[1:].strip()
        return lambda labels: key not in labels
    if re.fullmatch(r'[A-Za-z0-9./_-]+', part):
        return lambda labels: part in labels
    raise SelectorError(f'invalid label selector: {part!r}')


def parse_field_selector(text: str | None, *, plural: str) -> Matcher | None:
    """`field=value`, `field==value`, `field!=value`, joined by commas (AND); values compare as strings."""
    if not text:
        return None
    allowed = _GENERIC_FIELD_LABELS | FIELD_LABELS.get(plural, frozenset())
    requirements: list[tuple[list[str], bool, str]] = []
    for part in (p.strip() for p in text.split(',') if p.strip()):
        for operator in ('!=', '==', '='):
            if operator in part:
                field, value = (s.strip() for s in part.split(operator, 1))
                break
        else:
            raise SelectorError(f'invalid field selector: {part!r}')
        if field not in allowed:
            raise SelectorError(f'field label not supported: {field}')
        requirements.append((field.split('.'), operator != '!=', value))

    def matches(obj: Mapping[str, Any]) -> bool:
        return all((_field_value(obj, path) == value) is equal for path, equal, value in requirements)
    return matches


def _field_value(obj: Any, path: list[str]) -> str:
    for key in path:
        obj = obj.get(key) if isinstance(obj, dict) else None
    if obj is None:
        return ''
    if isinstance(obj, bool):
        return 'true' if obj else 'false'
    return str(obj)
