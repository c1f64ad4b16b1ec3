"""Writes: create, replace, patch, update (status and other subresources), delete (pods
gracefully, as CheckGracefulDelete), deletecollection and pods/binding; custom resources
pruned and validated against their CRD's structural schema; managedFields tracked."""

from __future__ import annotations

import datetime
import json
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

import aiohttp.web
import attrs
import jsonschema

from kopfsched.emulator import authorization, event_validation, namespaces, patches, validation
from kopfsched.emulator.list_watch import EmulatorReads
from kopfsched.emulator.resources import ResourceDef, crd_status, resources_of_crd
from kopfsched.emulator.store import ApiError, Obj, ObjKey, _is_crd, _is_new_event, _qualified, _spec_of, status_object


def _apply_defaults(resource: ResourceDef, obj: Obj) -> None:
    if _is_crd(resource):
        try:
            resources_of_crd(obj)
        except (KeyError, TypeError) as e:
            raise ApiError(422, f'invalid CustomResourceDefinition: missing {e}') from e
        obj['status'] = crd_status(obj)  # what the apiextensions controller reports right away
    if resource.plural == 'pods' and resource.group == '':
        spec = obj['spec'] = dict(obj.get('spec') or {})
        spec.setdefault('schedulerName', 'default-scheduler')
        status = obj['status'] = dict(obj.get('status') or {})
        status.setdefault('phase', 'Pending')
        conditions = list(status.get('conditions') or ())
        if spec.get('schedulingGates') and not any(c.get('type') == 'PodScheduled' for c in conditions):
            # The API server's applySchedulingGatedCondition (pkg/registry/core/pod/strategy.go).
            conditions.append({'type': 'PodScheduled', 'status': 'False', 'lastProbeTime': None,
                               'lastTransitionTime': datetime.datetime.now(datetime.UTC).strftime('%Y-%m-%dT%H:%M:%SZ'),
                               'reason': 'SchedulingGated',
                               'message': 'Scheduling is blocked due to non-empty scheduling gates'})
            status['conditions'] = conditions


def _validate(resource: ResourceDef, obj: Obj) -> None:
    """What the API server refuses on create and update (see validation.py, event_validation.py)."""
    if resource.custom:
        return
    is_event = _is_new_event(resource)
    message = event_validation.decode_error(obj) if is_event else \
        validation.decode_error(resource.kind, resource.api_version, obj)
    if message is not None:
        raise ApiError(400, message)
    problems = event_validation.invalid_fields(obj) if is_event else validation.invalid_fields(resource.kind, obj)
    if problems:
        name = obj['metadata'].get('name', '')
        raise ApiError(422, validation.invalid_message(resource.kind, name, problems), details={
            'name': name, 'group': resource.group, 'kind': resource.kind,
            'causes': [{'reason': 'FieldValueRequired', 'message': p.split(': ', 1)[1], 'field': p.split(':', 1)[0]}
                       for p in problems]})


def _check_precondition(resource: ResourceDef, old: Obj, resource_version: str | None) -> None:
    if resource_version and resource_version != old['metadata']['resourceVersion']:
        raise ApiError(409, f'Operation cannot be fulfilled on {_qualified(resource)} "{old["metadata"]["name"]}": '
                            'the object has been modified; please apply your changes to the latest version and try '
                            'again', details={'name': old['metadata']['name'], 'kind': resource.plural})


def _parse_json(raw: aiohttp.web.BaseRequest, body: bytes, *, expect: type) -> Any:
    """Parse a body, insisting that POST/PUT are JSON and that patches are of their declared type."""
    if raw.method in ('POST', 'PUT', 'DELETE') and raw.content_type != 'application/json':
        raise ApiError(415, f'the body of the request was in an unknown format ({raw.content_type}) - accepted '
                            'media types include: application/json, application/yaml')
    try:
        data = json.loads(body)
    except ValueError as e:
        raise ApiError(400, f'the body is not valid JSON: {e}') from e
    if not isinstance(data, expect):
        raise ApiError(400, f'the body of {raw.content_type} must be a JSON {expect.__name__}, '
                            f'got {type(data).__name__}')
    return data


_JSON_TYPES: tuple[tuple[type, str], ...] = (
    (bool, 'boolean'), (int, 'integer'), (float, 'number'), (str, 'string'), (dict, 'object'), (list, 'array'))


def _validate_custom(resource: ResourceDef, name: str, body: Obj, schema: Obj) -> None:
    """422 Invalid when `body` violates the CRD's schema, with apiextensions' messages and causes
    (kubeOpenAPIResultToFieldErrors: Required, NotSupported for enums, TypeInvalid, Invalid otherwise)."""
    errors = sorted(jsonschema.Draft4Validator(_without_extensions(schema)).iter_errors(body),
                    key=lambda e: [str(p) for p in e.absolute_path])
    causes: list[Obj] = []
    for error in errors:
        path = _field_path(error.absolute_path)
        value = error.instance
        match error.validator:
            case 'required':
                for missing in [p for p in error.validator_value if p not in (value or {})]:
                    child = f'{path}.{missing}' if path else missing
                    causes.append({'reason': 'FieldValueRequired', 'message': 'Required value', 'field': child})
                continue
            case 'enum':
                supported = ', '.join(json.dumps(v) for v in error.validator_value)
                reason, message = 'FieldValueNotSupported', \
                    f'Unsupported value: {json.dumps(value)}: supported values: {supported}'
            case 'type':
                actual = next((t for cls, t in _JSON_TYPES if isinstance(value, cls)), 'null')
                reason, message = 'FieldValueTypeInvalid', \
                    f'Invalid value: "{actual}": {path} in body must be of type {error.validator_value}: "{actual}"'
            case 'minimum' | 'maximum':
                relation = 'greater' if error.validator == 'minimum' else 'less'
                reason, message = 'FieldValueInvalid', \
                    f'Invalid value: {json.dumps(value)}: {path} in body should be {relation} than or equal to ' \
                    f'{error.validator_value}'
            case _:
                reason, message = 'FieldValueInvalid', f'Invalid value: {json.dumps(value)}: {error.message}'
        causes.append({'reason': reason, 'message': message, 'field': path})
    if causes:
        kind = f'{resource.kind}.{resource.group}'
        problems = [f"{c['field']}: {c['message']}" for c in causes]
        raise ApiError(422, validation.invalid_message(kind, name, problems), details={
            'name': name, 'group': resource.group, 'kind': resource.kind, 'causes': causes})


def _field_path(parts: Iterable[str | int]) -> str:
    """A field path as the API server prints it: `status.conditions[0].status`."""
    path = ''
    for part in parts:
        path += f'[{part}]' if isinstance(part, int) else (f'.{part}' if path else part)
    return path


def _without_extensions(schema: Any) -> Any:
    """The schema without the x-kubernetes-* keys plain JSON Schema does not know."""
    if isinstance(schema, dict):
        plain = {k: _without_extensions(v) for k, v in schema.items() if not k.startswith('x-kubernetes-')}
        if plain.get('nullable') is True and isinstance(plain.get('type'), str):
            plain['type'] = [plain['type'], 'null']  # OpenAPI's nullable, in JSON Schema's words
        return plain
    if isinstance(schema, list):
        return [_without_extensions(v) for v in schema]
    return schema


def _prune(value: Any, schema: Obj) -> Any:
    """`value` with what `schema` does not declare removed (properties, additionalProperties, items;
    x-kubernetes-preserve-unknown-fields keeps the unknown)."""
    if isinstance(value, dict):
        properties = schema.get('properties') or {}
        additional = schema.get('additionalProperties')
        keep_unknown = schema.get('x-kubernetes-preserve-unknown-fields') is True or additional is True
        pruned: Obj = {}
        for key, item in value.items():
            if key in properties:
                pruned[key] = _prune(item, properties[key])
            elif isinstance(additional, dict):
                pruned[key] = _prune(item, additional)
            elif keep_unknown:
                pruned[key] = item
        return pruned
    if isinstance(value, list) and isinstance(schema.get('items'), dict):
        return [_prune(item, schema['items']) for item in value]
    return value


_UNTRACKED_METADATA = frozenset({'name', 'namespace', 'uid', 'resourceVersion', 'generation', 'creationTimestamp',
                                 'managedFields', 'generateName', 'deletionTimestamp', 'deletionGracePeriodSeconds'})


def _fields_v1(value: Any, *, top: bool = False) -> Obj:
    """A FieldsV1 set: `f:<field>` per map key, `k:{"name":...}` per keyed list element, `{}` for leaves."""
    if isinstance(value, dict):
        fields: Obj = {}
        for key, item in value.items():
            if top and key in ('apiVersion', 'kind'):
                continue
            if top and key == 'metadata' and isinstance(item, dict):
                item = {k: v for k, v in item.items() if k not in _UNTRACKED_METADATA}
                if not item:
                    continue
            fields[f'f:{key}'] = _fields_v1(item)
        return fields
    if isinstance(value, list) and value and all(isinstance(v, dict) and 'name' in v for v in value):
        return {'.': {}, **{f'k:{{"name":{json.dumps(v["name"])}}}': {'.': {}, **_fields_v1(v)} for v in value}}
    return {}


@attrs.define(kw_only=True, slots=False)
class EmulatorWrites(EmulatorReads):
    """Writes: create, replace, patch, update (status and other subresources), delete (pods"""

    _user: authorization.User = attrs.field(default=authorization.ADMIN, init=False)  # the request's sender
    _tokens: dict[str, authorization.User] = attrs.field(factory=dict, init=False)

    def service_account_token(self, namespace: str, name: str) -> str:
        """A bearer token of the ServiceAccount, for `write_kubeconfig(token=...)` (authorization.py)."""
        token = f'{namespace}.{name}.{uuid.uuid4().hex}'
        self._tokens[token] = authorization.service_account(namespace, name)
        return token

    def _authenticate(self, header: str) -> authorization.User | None:
        """The sender of a request; None for a token nobody was given (401)."""
        scheme, _, token = header.partition(' ')
        if not header or (scheme.lower() == 'bearer' and token == authorization.ADMIN_TOKEN):
            return authorization.ADMIN
        return self._tokens.get(token) if scheme.lower() == 'bearer' else None

    def _create(self, resource: ResourceDef, namespace: str | None, obj: Obj) -> Obj:
        if resource.namespaced:
            if namespace is None:
                raise ApiError(405, f'create of {resource.plural} needs a namespace in the path')
            body_ns = (obj.get('metadata') or {}).get('namespace')
            if body_ns and body_ns != namespace:
                raise ApiError(400, 'the namespace of the provided object does not match the namespace sent on '
                                    'the request')
            metadata = obj.get('metadata') or {}
            self._admit_create(resource, namespace, metadata.get('name') or metadata.get('generateName') or 'Unknown')
        return self._insert(resource, obj, namespace=namespace)

    def _admit_create(self, resource: ResourceDef, namespace: str, name: str) -> None:
        """NamespaceLifecycle admission: no new content in a terminating namespace (namespaces.py)."""
        if self.namespace_lifecycle and namespace in self._terminating_namespaces:
            raise namespaces.terminating_forbidden(resource, name, namespace)

    def _insert(self, resource: ResourceDef, obj: Obj, *, namespace: str | None) -> Obj:
        metadata = dict(obj.get('metadata') or {})
        name = metadata.get('name') or (metadata.get('generateName') and
                                        metadata['generateName'] + uuid.uuid4().hex[:5])
        if not name:
            raise ApiError(422, 'metadata.name: Required value: name or generateName is required')
        key = (namespace if resource.namespaced else None, name)
        if key in self._store[resource.store_key]:
            raise ApiError(409, f'{_qualified(resource)} "{name}" already exists', reason='AlreadyExists',
                           details={'name': name, 'group': resource.group, 'kind': resource.plural})
        for field in ('deletionTimestamp', 'deletionGracePeriodSeconds', 'resourceVersion', 'managedFields'):
            metadata.pop(field, None)
        if resource.namespaced:
            metadata['namespace'] = namespace
        else:
            metadata.pop('namespace', None)
        self._rv += 1
        metadata.update(name=name, uid=str(uuid.uuid4()), resourceVersion=str(self._rv), generation=1,
                        creationTimestamp=self.clock().strftime('%Y-%m-%dT%H:%M:%SZ'))
        new = {**obj, 'apiVersion': resource.api_version, 'kind': resource.kind, 'metadata': metadata}
        _validate(resource, new)
        new = self._pruned(resource, new)
        if self.managed_fields:
            metadata['managedFields'] = [self._managed_entry(resource, obj, subresource=None)]
        _apply_defaults(resource, new)
        if self.namespace_lifecycle and namespaces.is_namespace(resource):
            new = namespaces.with_create_defaults(new)
        self._commit(resource, key, new, old=None)
        return new

    def _pruned(self, resource: ResourceDef, obj: Obj) -> Obj:
        """The custom resource without the fields its CRD's schema does not declare, as a real server
        stores it (silently: no error, unless the client asked for strict field validation)."""
        if not (self.prune_custom_resources and resource.custom):
            return obj
        crd = self._store['apiextensions.k8s.io', 'customresourcedefinitions'].get(
            (None, f'{resource.plural}.{resource.group}')) or {}
        version: Obj = next((v for v in (crd.get('spec') or {}).get('versions') or ()
                             if v.get('name') == resource.version), {})
        schema = (version.get('schema') or {}).get('openAPIV3Schema')
        if not isinstance(schema, dict):
            return obj
        body = _prune({k: v for k, v in obj.items() if k not in ('apiVersion', 'kind', 'metadata')}, schema)
        if self.validate_custom_resources:
            _validate_custom(resource, obj['metadata'].get('name', ''), body, schema)
        return {'apiVersion': obj['apiVersion'], 'kind': obj['kind'], 'metadata': obj['metadata'], **body}

    def _managed_entry(self, resource: ResourceDef, written: Obj, *, subresource: str | None) -> Obj:
        entry: Obj = {'manager': self._manager, 'operation': 'Update', 'apiVersion': resource.api_version,
                      'time': self.clock().strftime('%Y-%m-%dT%H:%M:%SZ'), 'fieldsType': 'FieldsV1',
                      'fieldsV1': _fields_v1(written, top=True)}
        if subresource:
            entry['subresource'] = subresource
        return entry

    def _track_fields(self, resource: ResourceDef, old: Obj, new: Obj, *, subresource: str | None) -> None:
        """The writer's entry replaces its previous one (same manager and subresource)."""
        written = {'status': new.get('status')} if subresource == 'status' else \
            {k: v for k, v in new.items() if k != 'status'}
        entries = [e for e in old['metadata'].get('managedFields') or ()
                   if (e.get('manager'), e.get('subresource')) != (self._manager, subresource)]
        new['metadata']['managedFields'] = [*entries, self._managed_entry(resource, written, subresource=subresource)]

    def _replace(self, resource: ResourceDef, namespace: str | None, name: str, obj: Obj, *,
                 subresource: str | None) -> Obj:
        old = self._get(resource, namespace, name)
        metadata = obj.get('metadata') or {}
        if metadata.get('name', name) != name:
            raise ApiError(400, f'the name of the object ({metadata.get("name")}) does not match the name on the URL '
                                f'({name})')
        _check_precondition(resource, old, metadata.get('resourceVersion'))
        return self._update(resource, old, obj, subresource=subresource, verb='update')

    def _patch(self, resource: ResourceDef, namespace: str | None, name: str, raw: aiohttp.web.BaseRequest,
               body: bytes, *, subresource: str | None) -> Obj:
        old = self._get(resource, namespace, name)
        content_type = raw.content_type
        try:
            match content_type:
                case patches.MERGE_PATCH:
                    patch = _parse_json(raw, body, expect=dict)
                    _check_precondition(resource, old, (patch.get('metadata') or {}).get('resourceVersion'))
                    new = patches.merge_patch(old, patch)
                case patches.STRATEGIC_MERGE_PATCH if not resource.custom:
                    patch = _parse_json(raw, body, expect=dict)
                    _check_precondition(resource, old, (patch.get('metadata') or {}).get('resourceVersion'))
                    new = patches.strategic_merge_patch(old, patch)
                case patches.JSON_PATCH:
                    new = patches.json_patch(old, _parse_json(raw, body, expect=list))
                case _:
                    raise ApiError(415, f'the body of the request was in an unknown format ({content_type}) - accepted '
                                        'media types include: application/json-patch+json, '
                                        'application/merge-patch+json' +
                                        ('' if resource.custom else ', application/strategic-merge-patch+json'))
        except patches.PatchError as e:
            raise ApiError(422, str(e)) from e
        if not isinstance(new, dict):
            raise ApiError(422, 'the patch does not produce an object')
        return self._update(resource, old, new, subresource=subresource, verb='patch')

    def _update(self, resource: ResourceDef, old: Obj, obj: Obj, *, subresource: str | None,
                verb: str = 'update') -> Obj:
        """Write a new version of `old`: keeps identity fields, separates status, bumps generation/rv."""
        if 'status' in resource.subresources:
            if subresource == 'status':
                obj = {k: v for k, v in old.items() if k != 'status'} | (
                    {'status': obj['status']} if obj.get('status') is not None else {})
                if self.authorization and resource.plural == 'resourceclaims' and resource.group == 'resource.k8s.io':
                    self._authorize_claim_binding(resource, old, obj, verb)
            else:
                obj = {k: v for k, v in obj.items() if k != 'status'} | (
                    {'status': old['status']} if 'status' in old else {})
        old_meta = old['metadata']
        metadata = dict(obj.get('metadata') or {})
        for field in ('name', 'namespace', 'uid', 'creationTimestamp', 'deletionTimestamp',
                      'deletionGracePeriodSeconds', 'generation', 'resourceVersion'):
            if field in old_meta:
                metadata[field] = old_meta[field]
            else:
                metadata.pop(field, None)
        new = {**obj, 'apiVersion': old['apiVersion'], 'kind': old['kind'], 'metadata': metadata}
        _validate(resource, new)
        new = self._pruned(resource, new)
        if self.namespace_lifecycle and namespaces.is_namespace(resource):
            new = namespaces.with_name_label(new)
            metadata = new['metadata']
        if self.managed_fields and 'managedFields' in old_meta:
            metadata['managedFields'] = old_meta['managedFields']
        if new == old:
            return old  # a no-op write: no new resourceVersion, no event (as the API does)
        if _spec_of(new) != _spec_of(old):
            metadata['generation'] = old_meta.get('generation', 1) + 1
        if self.managed_fields:
            self._track_fields(resource, old, new, subresource=subresource)
        self._rv += 1
        metadata['resourceVersion'] = str(self._rv)
        key = (old_meta.get('namespace'), old_meta['name'])
        if metadata.get('deletionTimestamp') and not metadata.get('finalizers') and not self._in_grace(resource, key) \
                and not (namespaces.is_namespace(resource) and key[1] in self._terminating_namespaces):
            self._remove(resource, key, new)
        else:
            self._commit(resource, key, new, old=old)
        return new

    def _authorize_claim_binding(self, resource: ResourceDef, old: Obj, new: Obj, verb: str) -> None:
        problem = authorization.claim_binding_problem(self._store, self._user, verb, old, new)
        if problem is not None:
            name = old['metadata']['name']
            raise ApiError(422, validation.invalid_message(f'{resource.kind}.{resource.group}', name, [problem]),
                           details={'name': name, 'group': resource.group, 'kind': resource.kind, 'causes': [
                               {'reason': 'FieldValueForbidden', 'message': problem.split(': ', 1)[1],
                                'field': 'status.allocation'}]})

    def _delete(self, resource: ResourceDef, namespace: str | None, name: str, *, options: Obj) -> Obj:
        old = self._get(resource, namespace, name)
        preconditions = options.get('preconditions') or {}
        _check_precondition(resource, old, preconditions.get('resourceVersion'))
        if preconditions.get('uid') and preconditions['uid'] != old['metadata'].get('uid'):
            raise ApiError(409, f'Precondition failed: UID in precondition: {preconditions["uid"]}, UID in object '
                                f'meta: {old["metadata"].get("uid")}')
        key = (old['metadata'].get('namespace'), name)
        if self.namespace_lifecycle and namespaces.is_namespace(resource):
            return self._delete_namespace(resource, old)
        if (grace := self._grace_period(resource, old, options)) is not None:
            return self._delete_gracefully(resource, key, old, grace)
        if old['metadata'].get('finalizers'):
            if old['metadata'].get('deletionTimestamp'):
                return old
            self._rv += 1
            metadata = {**old['metadata'], 'resourceVersion': str(self._rv),
                        'deletionTimestamp': self.clock().strftime('%Y-%m-%dT%H:%M:%SZ')}
            new = {**old, 'metadata': metadata}
            self._commit(resource, key, new, old=old)
            return new
        self._rv += 1
        gone = {**old, 'metadata': {**old['metadata'], 'resourceVersion': str(self._rv)}}
        self._remove(resource, key, gone)
        return gone

    def _delete_namespace(self, resource: ResourceDef, old: Obj) -> Obj:
        """Terminating, its content deleted; gone once nothing is left in it (namespaces.py)."""
        name = old['metadata']['name']
        if old['metadata'].get('deletionTimestamp'):
            return old
        self._rv += 1
        new = {**old, 'metadata': {**old['metadata'], 'resourceVersion': str(self._rv),
                                   'deletionTimestamp': self.clock().strftime('%Y-%m-%dT%H:%M:%SZ')},
               'status': {**(old.get('status') or {}), 'phase': namespaces.TERMINATING}}
        self._commit(resource, (None, name), new, old=old)
        self._terminating_namespaces.add(name)
        self._sweeping.add(name)  # one emptiness check after the sweep, not one per object removed
        try:
            for content in self._namespaced_stores():  # the namespace controller's sweep
                for (_, item), obj in list(self._store[content.store_key].items()):
                    if obj['metadata'].get('namespace') == name and (name, item) in self._store[content.store_key]:
                        self._delete(content, name, item, options={})
        finally:
            self._sweeping.discard(name)
        self._finalize_namespace(name)
        return new

    def _namespaced_stores(self) -> list[ResourceDef]:
        """One served resource per store of namespaced objects."""
        stores: dict[tuple[str, str], ResourceDef] = {}
        for served in self._registry.values():
            if served.namespaced and served.plural != 'bindings':
                stores.setdefault(served.store_key, served)
        return list(stores.values())

    def _finalize_namespace(self, name: str) -> None:
        """The namespace controller's last step, once the namespace is empty: its finalizer
        dropped, and the namespace gone unless metadata.finalizers still hold it."""
        if any(obj['metadata'].get('namespace') == name
               for served in self._namespaced_stores() for obj in self._store[served.store_key].values()):
            return
        self._terminating_namespaces.discard(name)
        resource = self._registry['', 'v1', 'namespaces']
        old = self._store[resource.store_key].get((None, name))
        if old is None:
            return
        spec = {**(old.get('spec') or {}), 'finalizers': [f for f in (old.get('spec') or {}).get('finalizers') or ()
                                                           if f != namespaces.FINALIZER]}
        self._rv += 1
        new = {**old, 'metadata': {**old['metadata'], 'resourceVersion': str(self._rv)}, 'spec': spec}
        if old['metadata'].get('finalizers'):
            self._commit(resource, (None, name), new, old=old)
        else:
            self._remove(resource, (None, name), new)

    def _remove(self, resource: ResourceDef, key: ObjKey, last: Obj) -> None:
        super()._remove(resource, key, last)
        if key[0] is not None and key[0] in self._terminating_namespaces and key[0] not in self._sweeping:
            self._finalize_namespace(key[0])

    def _grace_period(self, resource: ResourceDef, pod: Obj, options: Obj) -> int | None:
        """Seconds a deleted pod terminates for; None: deleted at once (no node, finished, or period 0)."""
        if not self.graceful_deletion or resource.plural != 'pods' or resource.group != '':
            return None
        spec, status = pod.get('spec') or {}, pod.get('status') or {}
        period = options.get('gracePeriodSeconds')
        if period is None:
            period = spec.get('terminationGracePeriodSeconds', 30)  # the API's default
        if not spec.get('nodeName') or status.get('phase') in ('Failed', 'Succeeded'):
            period = 0
        period = max(int(period), 0)
        if pod['metadata'].get('deletionTimestamp'):  # a second delete may only shorten the period
            current = pod['metadata'].get('deletionGracePeriodSeconds', 0)
            return None if period == 0 else min(period, current)
        return period or None

    def _delete_gracefully(self, resource: ResourceDef, key: ObjKey, old: Obj, grace: int) -> Obj:
        if old['metadata'].get('deletionGracePeriodSeconds') == grace:
            return old
        self._rv += 1
        deadline = self.clock() + datetime.timedelta(seconds=grace)
        metadata = {**old['metadata'], 'resourceVersion': str(self._rv), 'deletionGracePeriodSeconds': grace,
                    'deletionTimestamp': deadline.strftime('%Y-%m-%dT%H:%M:%SZ')}
        new = {**old, 'metadata': metadata}
        uid = metadata['uid']
        self._terminating[key] = uid
        self._commit(resource, key, new, old=old)
        if self.grace_period_scale > 0 and self._loop is not None:
            self._loop.call_later(grace * self.grace_period_scale, self._finish_termination, key, uid)
        return new

    def _finish_termination(self, key: ObjKey, uid: str) -> None:
        """The grace period is over: the pod goes (DELETED), unless finalizers still hold it."""
        if self._terminating.get(key) != uid:
            return  # gone meanwhile, or a new pod of that name
        del self._terminating[key]
        pods = self._registry['', 'v1', 'pods']
        pod = self._store[pods.store_key].get(key)
        if pod is None or pod['metadata'].get('finalizers'):
            return
        self._rv += 1
        self._remove(pods, key, {**pod, 'metadata': {**pod['metadata'], 'resourceVersion': str(self._rv)}})

    def _delete_collection(self, resource: ResourceDef, *, namespace: str | None, query: Mapping[str, str]) -> Obj:
        listed = self._list(resource, namespace=namespace, query={k: v for k, v in query.items() if k != 'limit'})
        for obj in listed['items']:
            self._delete(resource, obj['metadata'].get('namespace'), obj['metadata']['name'], options={})
        return {**listed, 'metadata': {'resourceVersion': str(self._rv)}}

    def _bind(self, namespace: str | None, name: str, binding: Obj) -> Obj:
        """pods/binding: the only way a scheduler assigns a node (kube-apiserver's BindingREST)."""
        pods = self._registry['', 'v1', 'pods']
        if namespace is not None:
            self._admit_create(pods, namespace, name)
        if (binding.get('metadata') or {}).get('namespace', namespace) != namespace:
            raise ApiError(400, 'the namespace of the provided object does not match the namespace sent on the '
                                'request')
        node = (binding.get('target') or {}).get('name')
        if not node:
            raise ApiError(422, 'target.name: Required value')
        pod = self._get(pods, namespace, name)
        uid = (binding.get('metadata') or {}).get('uid')
        if uid and uid != pod['metadata']['uid']:
            raise ApiError(409, f'Operation cannot be fulfilled on pods/binding "{name}": the UID in the '
                                'precondition does not match the UID in record')
        if pod['metadata'].get('deletionTimestamp'):
            raise ApiError(409, f'Operation cannot be fulfilled on pods/binding "{name}": pod {name} is being '
                                'deleted, cannot be assigned to a host')
        assigned = (pod.get('spec') or {}).get('nodeName')
        if assigned:
            raise ApiError(409, f'Operation cannot be fulfilled on pods/binding "{name}": pod {name} is already '
                                f'assigned to node "{assigned}"', details={'name': name, 'kind': 'pods/binding'})
        if (pod.get('spec') or {}).get('schedulingGates'):
            raise ApiError(409, f'Operation cannot be fulfilled on pods/binding "{name}": pod {name} has non-empty '
                                '.spec.schedulingGates', details={'name': name, 'kind': 'pods/binding'})
        conditions = [c for c in (pod.get('status') or {}).get('conditions') or () if c.get('type') != 'PodScheduled']
        conditions.append({'type': 'PodScheduled', 'status': 'True', 'lastProbeTime': None,
                           'lastTransitionTime': self.clock().strftime('%Y-%m-%dT%H:%M:%SZ')})
        self._rv += 1
        new = {**pod, 'metadata': {**pod['metadata'], 'resourceVersion': str(self._rv)},
               'spec': {**(pod.get('spec') or {}), 'nodeName': node},
               'status': {**(pod.get('status') or {}), 'conditions': conditions}}
        if self.clear_nominated_node_on_bind:
            new['status'].pop('nominatedNodeName', None)
        self._commit(pods, (namespace, name), new, old=pod)
        return status_object(201)
