"""PATCH semantics of the emulated API: JSON merge, strategic merge (a subset) and JSON patch.

Every function returns new containers along the changed paths and never mutates its
inputs: stored objects are shared, read-only snapshots (watch streams and other
threads hold references to them).
"""
from __future__ import annotations

import copy
from typing import Any

MERGE_PATCH = 'application/merge-patch+json'
STRATEGIC_MERGE_PATCH = 'application/strategic-merge-patch+json'
JSON_PATCH = 'application/json-patch+json'
APPLY_PATCH = 'application/apply-patch+yaml'

# Lists that strategic merge patches merge by a key instead of replacing them. Upstream reads
# these from the Go types (patchMergeKey); this table covers what a scheduler and kubectl touch.
STRATEGIC_MERGE_KEYS: dict[str, str] = {
    'conditions': 'type',
    'containers': 'name',
    'initContainers': 'name',
    'ephemeralContainers': 'name',
    'env': 'name',
    'volumes': 'name',
    'volumeMounts': 'mountPath',
    'ports': 'containerPort',
    'containerStatuses': 'name',
    'initContainerStatuses': 'name',
}


class PatchError(ValueError):
    """The patch is malformed or a JSON-patch `test` failed (the API answers 422)."""


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, null deletes a key, anything else replaces."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    """Merge patch, except that lists named in STRATEGIC_MERGE_KEYS merge item by item on their key."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key.startswith('$'):
            continue  # directives ($patch, $retainKeys, ...) are not emulated
        if value is None:
            result.pop(key, None)
        elif key in STRATEGIC_MERGE_KEYS and isinstance(value, list) and isinstance(result.get(key), list):
            result[key] = _merge_list_by_key(result[key], value, merge_key=STRATEGIC_MERGE_KEYS[key])
        else:
            result[key] = strategic_merge_patch(result.get(key), value)
    return result


def _merge_list_by_key(items: list[Any], patches: list[Any], *, merge_key: str) -> list[Any]:
    merged = list(items)
    positions = {item.get(merge_key): i for i, item in enumerate(merged) if isinstance(item, dict)}
    for patch in patches:
        if not isinstance(patch, dict) or merge_key not in patch:
            raise PatchError(f'strategic merge patch: list item without its merge key {merge_key!r}')
        position = positions.get(patch[merge_key])
        if patch.get('$patch') == 'delete':
            if position is not None:
                merged[position] = None
            continue
        if position is None:
            positions[patch[merge_key]] = len(merged)
            merged.append(strategic_merge_patch({}, patch))
        else:
            merged[position] = strategic_merge_patch(merged[position], patch)
    return [item for item in merged if item is not None]


def json_patch(target: Any, operations: list[Any]) -> Any:
    """RFC 6902 with the ops add, replace, remove and test (what clients of a scheduler send)."""
    document = copy.deepcopy(target)
    for operation in operations:
        if not isinstance(operation, dict) or 'op' not in operation or 'path' not in operation:
            raise PatchError(f'json patch: malformed operation {operation!r}')
        document = _apply_operation(document, operation)
    return document


def _apply_operation(document: Any, operation: dict[str, Any]) -> Any:
    op, tokens = operation['op'], _pointer(operation['path'])
    if not tokens:  # the whole document
        if op in ('add', 'replace'):
            return copy.deepcopy(operation['value'])
        raise PatchError(f'json patch: op {op!r} on the whole document')
    parent = document
    for token in tokens[:-1]:
        parent = _child(parent, token, path=operation['path'])
    last = tokens[-1]
    match op:
        case 'add':
            if isinstance(parent, list):
                index = len(parent) if last == '-' else _index(parent, last, path=operation['path'], insert=True)
                parent.insert(index, copy.deepcopy(operation['value']))
            elif isinstance(parent, dict):
                parent[last] = copy.deepcopy(operation['value'])
            else:
                raise PatchError(f'json patch: cannot add under {operation["path"]!r}')
        case 'replace':
            _child(parent, last, path=operation['path'])  # must exist
            if isinstance(parent, list):
                parent[_index(parent, last, path=operation['path'])] = copy.deepcopy(operation['value'])
            else:
                parent[last] = copy.deepcopy(operation['value'])
        case 'remove':
            _child(parent, last, path=operation['path'])  # must exist
            if isinstance(parent, list):
                del parent[_index(parent, last, path=operation['path'])]
            else:
                del parent[last]
        case 'test':
            if _child(parent, last, path=operation['path']) != operation.get('value'):
                raise PatchError(f'json patch: test failed at {operation["path"]!r}')
        case _:
            raise PatchError(f'json patch: unsupported op {op!r}')
    return document


def _pointer(path: str) -> list[str]:
    if path == '':
        return []
    if not path.startswith('/'):
        raise PatchError(f'json patch: path {path!r} does not start with "/"')
    return [token.replace('~1', '/').replace('~0', '~') for token in path[1:].split('/')]


def _child(container: Any, token: str, *, path: str) -> Any:
    if isinstance(container, dict) and token in container:
        return container[token]
    if isinstance(container, list):
        return container[_index(container, token, path=path)]
    raise PatchError(f'json patch: path {path!r} does not exist')


def _index(container: list[Any], token: str, *, path: str, insert: bool = False) -> int:
    if not token.isdigit() or int(token) > len(container) - (0 if insert else 1):
        raise PatchError(f'json patch: bad list index in {path!r}')
    return int(token)
