"""A minimal OpenAPI v3 document: enough for `kubectl apply` without `--validate=false`.

kubectl validates with the server ("fieldValidation=Strict") when the OpenAPI v3 document of
the object's group/version lists that query parameter on the kind's operations; without any
OpenAPI document it refuses to apply ("failed to download openapi"). So each served
group/version gets a document whose paths name their kind (x-kubernetes-group-version-kind)
and accept fieldValidation, and no schemas: kubectl then leaves validation to the server
(validation.py) and builds apply patches from its compiled-in types (built-in kinds) or as
merge patches (custom resources).
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any

from kopfsched.emulator.resources import ResourceDef

Obj = dict[str, Any]
_QUERY = [{'name': name, 'in': 'query', 'schema': {'type': 'string', 'uniqueItems': True}}
          for name in ('dryRun', 'fieldManager', 'fieldValidation')]


def _gv_path(resource: ResourceDef) -> str:
    return f'apis/{resource.group}/{resource.version}' if resource.group else 'api/v1'


def group_version_docs(resources: Iterable[ResourceDef]) -> dict[str, Obj]:
    """{"api/v1": document, "apis/group/version": document, ...}."""
    docs: dict[str, Obj] = {}
    for resource in resources:
        gv = _gv_path(resource)
        doc = docs.setdefault(gv, {'openapi': '3.0.0', 'info': {'title': 'Kubernetes', 'version': 'v1.34.0'},
                                   'paths': {}, 'components': {'schemas': {}}})
        gvk = {'group': resource.group, 'version': resource.version, 'kind': resource.kind}
        scope = f'/{gv}/namespaces/{{namespace}}/{resource.plural}' if resource.namespaced \
            else f'/{gv}/{resource.plural}'
        operation = {'x-kubernetes-group-version-kind': gvk, 'parameters': _QUERY, 'responses': {}}
        doc['paths'][scope] = {'post': {**operation, 'x-kubernetes-action': 'post'},
                               'get': {**operation, 'x-kubernetes-action': 'list', 'parameters': []}}
        doc['paths'][f'{scope}/{{name}}'] = {
            'get': {**operation, 'x-kubernetes-action': 'get', 'parameters': []},
            'put': {**operation, 'x-kubernetes-action': 'put'},
            'patch': {**operation, 'x-kubernetes-action': 'patch'},
            'delete': {**operation, 'x-kubernetes-action': 'delete', 'parameters': []},
        }
    return docs


def _hash(doc: Obj) -> str:
    return hashlib.sha512(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:32].upper()


def root(docs: dict[str, Obj]) -> Obj:
    """/openapi/v3: where each group/version's document is (the hash changes with it)."""
    return {'paths': {gv: {'serverRelativeURL': f'/openapi/v3/{gv}?hash={_hash(doc)}'} for gv, doc in docs.items()}}
