"""The emulator's store: objects by resource, resourceVersions, watch history, and the event
fan-out to open watches. Every write ends in `_commit` or `_remove`, which publish the event.

`EmulatorStore` holds the state (attrs fields) the other layers work on, stacked one on the
other: store -> `list_watch` (reads, paging, watch streams) -> `verbs` (create, update, patch,
delete, bind, graceful deletion, CRD pruning and validation) -> `faults` (the test hooks that
inject failures) -> `server` (HTTP entry point, routing, discovery, hosting).
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import itertools
import json
import threading
from collections import Counter, deque
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import aiohttp.web
import attrs
import kmock

from kopfsched.emulator import core_events
from kopfsched.emulator.resources import ResourceDef, resources_of_crd

if TYPE_CHECKING:
    from kopfsched.emulator.faults import _Failure, _Throttle
    from kopfsched.emulator.list_watch import _ListSnapshot, _WatchFailure


ObjKey = tuple[str | None, str]  # (namespace, name)


StoreKey = tuple[str, str]  # (group, plural)


Obj = dict[str, Any]


_REASONS = {
    400: 'BadRequest', 401: 'Unauthorized', 403: 'Forbidden', 404: 'NotFound', 405: 'MethodNotAllowed',
    409: 'Conflict', 410: 'Expired', 415: 'UnsupportedMediaType', 422: 'Invalid', 429: 'TooManyRequests',
    500: 'InternalError', 503: 'ServiceUnavailable', 504: 'Timeout',
}


_MUTATING = frozenset({'POST', 'PUT', 'PATCH', 'DELETE'})


_DROP = object()  # a watch queue item: close the stream


_BOOKMARK = object()  # a watch queue item: send a bookmark now


MIN_REQUEST_TIMEOUT = 1800.0
"""kube-apiserver's --min-request-timeout: a watch without timeoutSeconds lasts this times 1 to 2."""


class ApiError(Exception):
    """An API failure answered as a v1 Status."""

    def __init__(self, code: int, message: str, *, reason: str | None = None, details: Mapping[str, Any] | None = None):
        super().__init__(message)
        self.code, self.message = code, message
        self.reason = reason or _REASONS.get(code, 'Unknown')
        self.details = dict(details or {})

    def status(self) -> Obj:
        return status_object(self.code, self.message, reason=self.reason, details=self.details)


def status_object(code: int, message: str = '', *, reason: str = '', details: Mapping[str, Any] | None = None) -> Obj:
    body: Obj = {'kind': 'Status', 'apiVersion': 'v1', 'metadata': {},
                 'status': 'Success' if code < 400 else 'Failure', 'code': code}
    if message:
        body['message'] = message
    if reason:
        body['reason'] = reason
    if details:
        body['details'] = dict(details)
    return body


@dataclasses.dataclass(frozen=True)
class Mutation:
    """One mutating request as the API received it, with the status it answered."""

    method: str
    path: str
    query: Mapping[str, str]
    content_type: str
    body: Any  # parsed JSON, or the raw text when it was not JSON
    status: int


@dataclasses.dataclass(frozen=True)
class ApiPath:
    """A resource URL: /api/v1/namespaces/ns/pods/name/status, /apis/group/version/plural, ..."""

    group: str
    version: str
    plural: str | None = None
    namespace: str | None = None
    name: str | None = None
    subresource: str | None = None

    @classmethod
    def parse(cls, path: str) -> ApiPath | None:
        parts = path.strip('/').split('/')
        if parts[0] == 'api' and len(parts) >= 2:
            group, rest = '', parts[1:]
        elif parts[0] == 'apis' and len(parts) >= 3:
            group, rest = parts[1], parts[2:]
        else:
            return None
        version, rest = rest[0], rest[1:]
        namespace = None
        # namespaces/{ns}/{plural}/... vs namespaces/{name}[/status|/finalize] (the namespace object itself)
        if len(rest) >= 3 and rest[0] == 'namespaces' and not (len(rest) == 3 and rest[2] in ('status', 'finalize')):
            namespace, rest = rest[1], rest[2:]
        if len(rest) > 3:
            return None
        plural, name, subresource = [*rest, None, None, None][:3]
        return cls(group, version, plural, namespace, name, subresource)


class _Event:
    """A stored watch event; its serialized lines are cached per event type (shared by all watchers)."""

    __slots__ = ('_lines', 'obj', 'old', 'rv', 'type')

    def __init__(self, rv: int, type: str, obj: Obj, old: Obj | None):
        self.rv, self.type, self.obj, self.old = rv, type, obj, old
        self._lines: dict[str, bytes] = {}

    def line(self, type: str) -> bytes:
        if type not in self._lines:
            self._lines[type] = _dumps({'type': type, 'object': self.obj}) + b'\n'
        return self._lines[type]


def _dumps(data: Any) -> bytes:
    return json.dumps(data, separators=(',', ':')).encode()


def _utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _is_new_event(resource: ResourceDef) -> bool:
    return resource.plural == 'events' and resource.group == 'events.k8s.io'


def _is_crd(resource: ResourceDef) -> bool:
    return resource.plural == 'customresourcedefinitions' and resource.group == 'apiextensions.k8s.io'


def _spec_of(obj: Obj) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k not in ('metadata', 'status', 'apiVersion', 'kind')}


def _qualified(resource: ResourceDef) -> str:
    return f'{resource.plural}.{resource.group}' if resource.group else resource.plural


def _not_found(resource: ResourceDef, name: str) -> ApiError:
    return ApiError(404, f'{_qualified(resource)} "{name}" not found',
                    details={'name': name, 'group': resource.group, 'kind': resource.plural})


@attrs.define(kw_only=True, slots=False)
class EmulatorStore(kmock.KubernetesEmulator):
    """The emulator's store: objects by resource, resourceVersions, watch history, and the event"""

    history_size: int = 10_000  # watch events kept per resource for resuming
    mutation_log_size: int = 10_000  # mutating requests kept for assertions
    request_log_size: int = 1_000  # kmock Request objects kept, only while DSL reactions are registered
    bookmark_interval: float = 60.0  # seconds between BOOKMARKs on watches that allow them
    # A watch without timeoutSeconds is closed after this times 1 to 2 (random), as the API server does
    # with its --min-request-timeout; None: never.
    min_request_timeout: float | None = MIN_REQUEST_TIMEOUT
    # Pods on a node are deleted gracefully, as the API server does (CheckGracefulDelete): DELETE sets
    # deletionTimestamp and the DELETED event follows after the grace period, as if the kubelet confirmed it.
    graceful_deletion: bool = True
    grace_period_scale: float = 1.0  # real seconds per grace-period second (tests: small; 0 waits for a hook)
    # Binding clears status.nominatedNodeName (ClearingNominatedNodeNameAfterBinding, beta and on from v1.35).
    clear_nominated_node_on_bind: bool = True
    # Paged lists are served from the first page's revision; etcd compacts it away after this many seconds
    # (the API server's default --etcd-compaction-interval), then a continue token answers 410 Expired.
    continue_ttl: float | None = 300.0
    # List items carry no kind/apiVersion (only the list does), as a real server answers for built-in types.
    items_without_type: bool = True
    # Objects carry metadata.managedFields (one entry per manager and subresource, fieldsV1 mirroring what it
    # wrote), often larger than the spec, as server-side field tracking does.
    managed_fields: bool = True
    # Custom resources lose the fields their CRD's structural schema does not declare (apiextensions' pruning).
    prune_custom_resources: bool = True
    # Custom resources (spec and status writes alike) are validated against the CRD's openAPIV3Schema after
    # pruning: a violation answers 422 Invalid with one cause per field, as apiextensions' validation does.
    validate_custom_resources: bool = True
    # Namespaces as the API server and the namespace controller run them (namespaces.py): created Active with
    # the `kubernetes` finalizer, Terminating on DELETE while their content is deleted, gone once empty; a
    # create in a terminating namespace is refused with NamespaceLifecycle admission's 403.
    namespace_lifecycle: bool = True
    # RBAC from the stored (Cluster)Roles and bindings for the users that tokens name (authorization.py);
    # off: every request is the admin's.
    authorization: bool = False
    clock: Callable[[], datetime.datetime] = _utcnow

    request_count: int = attrs.field(default=0, init=False)
    _url: str | None = attrs.field(default=None, init=False)
    _rv: int = attrs.field(default=0, init=False)
    _registry: dict[tuple[str, str, str], ResourceDef] = attrs.field(factory=dict, init=False)
    _store: dict[StoreKey, dict[ObjKey, Obj]] = attrs.field(factory=dict, init=False)
    _history: dict[StoreKey, deque[_Event]] = attrs.field(factory=dict, init=False)
    _compacted_rv: dict[StoreKey, int] = attrs.field(factory=dict, init=False)
    _watchers: dict[StoreKey, set[asyncio.Queue[Any]]] = attrs.field(factory=dict, init=False)
    _mutations: deque[Mutation] = attrs.field(init=False)
    _failures: list[_Failure] = attrs.field(factory=list, init=False)
    _watch_failures: dict[StoreKey, _WatchFailure] = attrs.field(factory=dict, init=False)
    _throttles: list[_Throttle] = attrs.field(factory=list, init=False)
    _terminating: dict[ObjKey, str] = attrs.field(factory=dict, init=False)  # pod key -> uid, in its grace period
    _terminating_namespaces: set[str] = attrs.field(factory=set, init=False)
    _sweeping: set[str] = attrs.field(factory=set, init=False)  # namespaces whose content is being deleted
    _list_snapshots: dict[int, _ListSnapshot] = attrs.field(factory=dict, init=False)  # by continue-token id
    _list_snapshot_ids: Iterator[int] = attrs.field(factory=itertools.count, init=False)
    _compact_on_continue: int = attrs.field(default=0, init=False)
    _lists: Counter[StoreKey] = attrs.field(factory=Counter, init=False)
    _manager: str = attrs.field(default='unknown', init=False)  # the field manager of the request being served
    _guard: threading.Lock = attrs.field(factory=threading.Lock, init=False)  # for calls from test threads
    _builtin_payloads: set[int] = attrs.field(factory=set, init=False)
    _loop: asyncio.AbstractEventLoop | None = attrs.field(default=None, init=False)
    _runner: aiohttp.web.ServerRunner | None = attrs.field(default=None, init=False)

    def register(self, resource: ResourceDef) -> None:
        """Serve a resource (CRDs call this on create; tests may too)."""
        self._registry[resource.group, resource.version, resource.plural] = resource
        key = resource.store_key
        self._store.setdefault(key, {})
        self._history.setdefault(key, deque(maxlen=self.history_size))
        self._compacted_rv.setdefault(key, 0)
        self._watchers.setdefault(key, set())

    def serves(self, group: str, version: str, plural: str) -> bool:
        """Whether the resource is served (built in, registered, or a CRD's)."""
        return (group, version, plural) in self._registry

    def get_object(self, plural: str, namespace: str | None, name: str, *, group: str = '') -> Obj | None:
        """The stored object (a read-only snapshot: never mutate it), or None."""
        return self._store.get((group, plural), {}).get((namespace, name))

    def list_objects(self, plural: str, *, group: str = '', namespace: str | None = None) -> list[Obj]:
        objects = list(self._store.get((group, plural), {}).values())
        return [obj for obj in objects if namespace is None or obj['metadata'].get('namespace') == namespace]

    @property
    def resource_version(self) -> int:
        return self._rv

    # kmock's stock object array would scan everything: expose the indexed store instead.
    @property
    def objects(self) -> Mapping[StoreKey, Mapping[ObjKey, Obj]]:  # type: ignore[override]
        return self._store

    def lists(self) -> dict[str, int]:
        """LIST requests served so far per resource (`pods`, `csinodes.storage.k8s.io`), the pages of
        a paged LIST counted once."""
        return {f'{plural}.{group}' if group else plural: count for (group, plural), count in self._lists.items()}

    def open_watches(self, plural: str, *, group: str = '') -> int:
        """Watch streams of the resource open now: a fault aimed at open watches waits for one."""
        return len(self._watchers.get((group, plural), ()))

    def _in_loop(self, fn: Callable[[], None]) -> None:
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if self._loop is None or running is self._loop:
            fn()
        else:
            self._loop.call_soon_threadsafe(fn)

    def _broadcast(self, item: object) -> None:
        for queues in self._watchers.values():
            for queue in queues:
                queue.put_nowait(item)

    def _commit(self, resource: ResourceDef, key: ObjKey, new: Obj, *, old: Obj | None) -> None:
        self._store[resource.store_key][key] = new
        self._publish(resource, _Event(self._rv, 'ADDED' if old is None else 'MODIFIED', new, old))
        if _is_new_event(resource):  # one Event, two API versions: core/v1 sees it too
            core = self._registry['', 'v1', 'events']
            mirrored = self._store[core.store_key].get(key)
            self._store[core.store_key][key] = converted = core_events.to_core(new)
            self._publish(core, _Event(self._rv, 'ADDED' if mirrored is None else 'MODIFIED', converted, mirrored))
        if _is_crd(resource):
            for served in resources_of_crd(new):
                self.register(served)

    def _in_grace(self, resource: ResourceDef, key: ObjKey) -> bool:
        """A pod in its grace period: deleted, its DELETED event not sent yet."""
        return resource.plural == 'pods' and resource.group == '' and key in self._terminating

    def _remove(self, resource: ResourceDef, key: ObjKey, last: Obj) -> None:
        old = self._store[resource.store_key].pop(key)
        if self._in_grace(resource, key):
            del self._terminating[key]
        self._publish(resource, _Event(self._rv, 'DELETED', last, old))
        if _is_new_event(resource):
            core = self._registry['', 'v1', 'events']
            mirrored = self._store[core.store_key].pop(key, None)
            if mirrored is not None:
                self._publish(core, _Event(self._rv, 'DELETED', mirrored, mirrored))
        if _is_crd(resource):
            for served in resources_of_crd(last):
                self._registry.pop((served.group, served.version, served.plural), None)
                self._store[served.store_key].clear()

    def _publish(self, resource: ResourceDef, event: _Event) -> None:
        key = resource.store_key
        history = self._history[key]
        if len(history) == history.maxlen:
            self._compacted_rv[key] = history[0].rv
        history.append(event)
        for queue in self._watchers[key]:
            queue.put_nowait(event)
