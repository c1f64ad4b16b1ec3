"""The API server's checks a user would notice, with its messages.

Not a schema validator: what a hand-written manifest typically gets wrong. A malformed
quantity fails decoding (400 BadRequest, "cannot be handled as a Pod: quantities must
match ..."); a pod without containers, or a container without name or image, fails
validation (422 Invalid, `Pod "x" is invalid: spec.containers: Required value`).
"""
from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

Obj = dict[str, Any]

QUANTITY_MESSAGE = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
_QUANTITY = re.compile(r'^[+-]?(\d+(\.\d*)?|\.\d+)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?\d+)?$')


def is_quantity(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int | float):
        return True
    return isinstance(value, str) and bool(_QUANTITY.match(value.strip()))


def _resource_lists(kind: str, obj: Obj) -> Iterator[Any]:
    spec, status = obj.get('spec') or {}, obj.get('status') or {}
    if kind == 'Pod':
        for key in ('initContainers', 'containers', 'ephemeralContainers'):
            for container in spec.get(key) or ():
                if isinstance(container, dict):
                    resources = container.get('resources') or {}
                    yield resources.get('requests')
                    yield resources.get('limits')
        yield spec.get('overhead')
        yield (spec.get('resources') or {}).get('requests')
        yield (spec.get('resources') or {}).get('limits')
    elif kind == 'Node':
        yield status.get('capacity')
        yield status.get('allocatable')
    elif kind == 'PersistentVolumeClaim':
        yield (spec.get('resources') or {}).get('requests')
    elif kind == 'PersistentVolume':
        yield spec.get('capacity')


def decode_error(kind: str, api_version: str, obj: Obj) -> str | None:
    """The 400 message when a quantity does not parse, else None."""
    for amounts in _resource_lists(kind, obj):
        if isinstance(amounts, dict) and not all(is_quantity(v) for v in amounts.values()):
            return f'{kind} in version "{api_version.split("/")[-1]}" cannot be handled as a {kind}: {QUANTITY_MESSAGE}'
    return None


def invalid_fields(kind: str, obj: Obj) -> list[str]:
    """`field: Required value`-style problems (422), empty when valid."""
    if kind != 'Pod':
        return []
    spec = obj.get('spec') or {}
    containers = spec.get('containers')
    if not isinstance(containers, list) or not containers:
        return ['spec.containers: Required value']
    problems: list[str] = []
    names: set[str] = set()
    for i, container in enumerate(containers):
        if not isinstance(container, dict):
            problems.append(f'spec.containers[{i}]: Invalid value: must be an object')
            continue
        name = container.get('name')
        if not name:
            problems.append(f'spec.containers[{i}].name: Required value')
        elif name in names:
            problems.append(f'spec.containers[{i}].name: Duplicate value: "{name}"')
        names.add(name or '')
        if not container.get('image'):
            problems.append(f'spec.containers[{i}].image: Required value')
    return problems


def invalid_message(kind: str, name: str, problems: list[str]) -> str:
    detail = problems[0] if len(problems) == 1 else '[' + ', '.join(problems) + ']'
    return f'{kind} "{name}" is invalid: {detail}'
