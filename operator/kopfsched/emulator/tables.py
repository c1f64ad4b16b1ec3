"""Server-side printing: lists and objects as meta.k8s.io/v1 Tables, for `kubectl get`.

kubectl asks for `application/json;as=Table;v=v1;g=meta.k8s.io` and prints the columns the
server chooses; without a Table it falls back to NAME and AGE. The API server's printers
are reproduced for the kinds a sandbox user looks at (pods, nodes, events, namespaces), a
CRD's resources print its `additionalPrinterColumns`, everything else NAME and AGE — as
kube-apiserver does. Cells follow pkg/printers/internalversion/printers.go.
"""
from __future__ import annotations

import datetime
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

Obj = dict[str, Any]
NONE = '<none>'


def wants_table(accept: str) -> bool:
    return 'as=Table' in accept


def _column(name: str, type: str = 'string', *, priority: int = 0, format: str = '', description: str = '') -> Obj:
    return {'name': name, 'type': type, 'format': format, 'description': description or name, 'priority': priority}


def human_duration(seconds: float) -> str:
    """apimachinery's duration.HumanDuration."""
    s = int(seconds)
    if s < 0:
        return '<invalid>'
    if s < 120:
        return f'{s}s'
    minutes = s // 60
    if minutes < 10:
        return f'{minutes}m{s % 60}s' if s % 60 else f'{minutes}m'
    if minutes < 180:
        return f'{minutes}m'
    hours = s // 3600
    if hours < 8:
        return f'{hours}h{minutes % 60}m' if minutes % 60 else f'{hours}h'
    if hours < 48:
        return f'{hours}h'
    if hours < 24 * 8:
        return f'{hours // 24}d{hours % 24}h' if hours % 24 else f'{hours // 24}d'
    if hours < 24 * 365 * 2:
        return f'{hours // 24}d'
    return f'{hours // 24 // 365}y'


def _age(timestamp: str | None, now: datetime.datetime) -> str:
    if not timestamp:
        return NONE
    try:
        then = datetime.datetime.strptime(timestamp[:19], '%Y-%m-%dT%H:%M:%S').replace(tzinfo=datetime.UTC)
    except ValueError:
        return NONE
    return human_duration((now - then).total_seconds())


def _pod_cells(pod: Obj, now: datetime.datetime) -> list[Any]:
    spec, status, meta = pod.get('spec') or {}, pod.get('status') or {}, pod['metadata']
    containers = spec.get('containers') or ()
    statuses = status.get('containerStatuses') or ()
    ready = sum(1 for c in statuses if c.get('ready'))
    restarts = sum(int(c.get('restartCount') or 0) for c in statuses)
    reason = status.get('reason') or status.get('phase') or 'Pending'
    for c in statuses:
        waiting = (c.get('state') or {}).get('waiting') or {}
        if waiting.get('reason'):
            reason = waiting['reason']
    if meta.get('deletionTimestamp'):
        reason = 'Terminating'
    gates = spec.get('readinessGates') or ()
    return [meta['name'], f'{ready}/{len(containers)}', reason, restarts, _age(meta.get('creationTimestamp'), now),
            status.get('podIP') or NONE, spec.get('nodeName') or NONE, status.get('nominatedNodeName') or NONE,
            f'0/{len(gates)}' if gates else NONE]


POD_COLUMNS = [
    _column('Name', format='name'), _column('Ready'), _column('Status'), _column('Restarts', 'string'),
    _column('Age'), _column('IP', priority=1), _column('Node', priority=1), _column('Nominated Node', priority=1),
    _column('Readiness Gates', priority=1),
]


def _node_cells(node: Obj, now: datetime.datetime) -> list[Any]:
    meta, spec, status = node['metadata'], node.get('spec') or {}, node.get('status') or {}
    ready = next((c.get('status') for c in status.get('conditions') or () if c.get('type') == 'Ready'), None)
    state = {'True': 'Ready', 'False': 'NotReady'}.get(ready or '', 'Unknown')
    if spec.get('unschedulable'):
        state += ',SchedulingDisabled'
    labels = meta.get('labels') or {}
    roles = sorted(k.split('/', 1)[1] for k in labels if k.startswith('node-role.kubernetes.io/') and '/' in k)
    info = status.get('nodeInfo') or {}
    addresses = {a.get('type'): a.get('address') for a in status.get('addresses') or ()}
    return [meta['name'], state, ','.join(roles) or NONE, _age(meta.get('creationTimestamp'), now),
            info.get('kubeletVersion') or '', addresses.get('InternalIP') or NONE,
            addresses.get('ExternalIP') or NONE, info.get('osImage') or '<unknown>',
            info.get('kernelVersion') or '<unknown>', info.get('containerRuntimeVersion') or '<unknown>']


NODE_COLUMNS = [
    _column('Name', format='name'), _column('Status'), _column('Roles'), _column('Age'), _column('Version'),
    _column('Internal-IP', priority=1), _column('External-IP', priority=1), _column('OS-Image', priority=1),
    _column('Kernel-Version', priority=1), _column('Container-Runtime', priority=1),
]


def _event_cells(event: Obj, now: datetime.datetime) -> list[Any]:
    involved = event.get('involvedObject') or {}
    last = (event.get('series') or {}).get('lastObservedTime') or event.get('lastTimestamp') \
        or event.get('eventTime') or event['metadata'].get('creationTimestamp')
    kind = (involved.get('kind') or '').lower()
    return [_age(last, now), event.get('type') or '', event.get('reason') or '',
            f"{kind}/{involved.get('name', '')}", event.get('message') or '']


EVENT_COLUMNS = [_column('Last Seen'), _column('Type'), _column('Reason'), _column('Object'), _column('Message')]


def _namespace_cells(namespace: Obj, now: datetime.datetime) -> list[Any]:
    return [namespace['metadata']['name'], (namespace.get('status') or {}).get('phase') or 'Active',
            _age(namespace['metadata'].get('creationTimestamp'), now)]


NAMESPACE_COLUMNS = [_column('Name', format='name'), _column('Status'), _column('Age')]
DEFAULT_COLUMNS = [_column('Name', format='name'), _column('Age')]

PRINTERS: dict[tuple[str, str], tuple[list[Obj], Callable[[Obj, datetime.datetime], list[Any]]]] = {
    ('', 'pods'): (POD_COLUMNS, _pod_cells),
    ('', 'nodes'): (NODE_COLUMNS, _node_cells),
    ('', 'events'): (EVENT_COLUMNS, _event_cells),
    ('', 'namespaces'): (NAMESPACE_COLUMNS, _namespace_cells),
}


_SEGMENT = re.compile(r'\.([A-Za-z0-9_\-]+)|\[\?\(@\.([A-Za-z0-9_]+)=="([^"]*)"\)\]|\[(\d+)\]')


def json_path(obj: Any, path: str) -> Any:
    """The subset of JSONPath CRD printer columns use: `.a.b`, `[N]`, `[?(@.f=="v")]`."""
    values = [obj]
    for match in _SEGMENT.finditer(path):
        field, filter_field, filter_value, index = match.groups()
        out = []
        for value in values:
            if field is not None and isinstance(value, dict) and field in value:
                out.append(value[field])
            elif filter_field is not None and isinstance(value, list):
                out.extend(v for v in value if isinstance(v, dict) and str(v.get(filter_field)) == filter_value)
            elif index is not None and isinstance(value, list) and int(index) < len(value):
                out.append(value[int(index)])
        values = out
    return values[0] if len(values) == 1 else (values or None)


def _crd_printer(columns: Iterable[Mapping[str, Any]]) -> tuple[list[Obj], Callable[[Obj, datetime.datetime],
                                                                                    list[Any]]]:
    columns = list(columns)
    definitions = [_column('Name', format='name')] + [
        _column(c['name'], c.get('type', 'string'), priority=int(c.get('priority') or 0),
                description=c.get('description') or '') for c in columns]

    def cells(obj: Obj, now: datetime.datetime) -> list[Any]:
        row: list[Any] = [obj['metadata']['name']]
        for column in columns:
            value = json_path(obj, column.get('jsonPath') or '')
            if column.get('type') == 'date':
                row.append(_age(value if isinstance(value, str) else None, now))
            else:
                row.append(value if value is not None else None)
        return row
    return definitions, cells


def to_table(objects: list[Obj], *, group: str, plural: str, resource_version: str,
             printer_columns: Iterable[Mapping[str, Any]] | None = None,
             now: datetime.datetime | None = None, list_metadata: Obj | None = None) -> Obj:
    """A meta.k8s.io/v1 Table of `objects` (rows carry each object's metadata, as kubectl needs
    for its NAMESPACE column with --all-namespaces)."""
    now = now or datetime.datetime.now(datetime.UTC)
    if printer_columns is not None:
        columns, cells = _crd_printer(printer_columns)
    else:
        columns, cells = PRINTERS.get((group, plural), (DEFAULT_COLUMNS, _default_cells))
    rows = [{'cells': cells(obj, now), 'object': {'kind': 'PartialObjectMetadata', 'apiVersion': 'meta.k8s.io/v1',
                                                  'metadata': obj['metadata']}} for obj in objects]
    metadata = {'resourceVersion': resource_version, **(list_metadata or {})}
    return {'kind': 'Table', 'apiVersion': 'meta.k8s.io/v1', 'metadata': metadata, 'columnDefinitions': columns,
            'rows': rows}


def _default_cells(obj: Obj, now: datetime.datetime) -> list[Any]:
    return [obj['metadata']['name'], _age(obj['metadata'].get('creationTimestamp'), now)]
