"""A fast Kubernetes API emulator for the end-to-end tests: kmock's emulator with real API semantics.

`FastKubernetesEmulator` subclasses `kmock.KubernetesEmulator` but serves every Kubernetes request
itself, from objects indexed by (resource, namespace, name): no request re-scans the request history
or all objects, so its speed does not decay with the number of requests served. What it adds over
stock kmock 0.8 (each one is something kopf or kubernetes-asyncio breaks without):

- uid, creationTimestamp, a monotonically increasing resourceVersion on every write, generation
  bumped on changes outside metadata/status; create answers 201; lists carry a real resourceVersion;
- watches subscribe before the snapshot, resume from a resourceVersion using a bounded per-resource
  event history (an ERROR event with code 410 when too old), send BOOKMARKs when allowed, honour
  label and field selectors (objects leaving a selector are sent as DELETED, as the API does), end
  at timeoutSeconds or else, as the API server does, after 1-2x `min_request_timeout` (1800 s);
- pods/{name}/binding and namespaces/{ns}/bindings (201 + Status; 409 when bound, being deleted or
  scheduling-gated; 404 without a pod); binding clears status.nominatedNodeName (switchable);
- status subresources: /status writes change only status; main writes never change status;
- PATCH as merge, strategic merge (lists keyed per STRATEGIC_MERGE_KEYS; rejected for custom
  resources, like the API) and JSON patch; a body that is not of its Content-Type is a 400, an
  unknown Content-Type (including server-side apply) a 415; PUT with a resourceVersion
  precondition (409), enough for kubernetes_asyncio's LeaseLock;
- paged lists (limit/continue) served at the first page's revision; the token expires with etcd's
  compaction (`continue_ttl`, 5 min; `compact()` for tests) and then answers 410 Expired; list items
  carry no kind/apiVersion, as for built-in types on a real server;
- DELETE: immediate removal with a DELETED event, or deletionTimestamp while finalizers remain; a pod on
  a node is deleted gracefully (deletionTimestamp, DELETED after its grace period, `grace_period_scale`
  shortening it for tests, `end_grace_periods()` ending them at once);
- custom resources pruned to their CRD's structural schema (unknown fields dropped silently), then
  validated against it: a wrong type, enum, minimum or missing required field answers 422 Invalid;
- discovery for kopf, kubernetes_asyncio and kubectl; CRDs register their resources on create.
  /openapi/v3 lists each kind's operations (no schemas), enough for plain `kubectl apply`
  (openapi.py); lists and objects as Tables for `kubectl get` (tables.py);
- server-side checks a user notices: a pod without containers, a malformed quantity (validation.py);
  events.k8s.io/v1 Events are readable as core/v1 Events too (core_events.py), as kubectl describe reads them;
- test hooks: `fail_next()` injects failures (with Retry-After if asked), `throttle()` answers 429 with
  Retry-After for a while as API Priority and Fairness does, `drop_watches()` closes every open watch stream,
  `watch_error()` ends watches with an ERROR event of any Status code (and `heal_watches()`),
  `mutations()` is a bounded log of what the API received, `send_bookmarks()`.

Deliberate leniencies: namespaces need not exist; no defaults except a pod's
`spec.schedulerName` and `status.phase`; status given on create is kept.

It runs in the caller's loop (`await emulator.start()` ... `await emulator.stop()`), in a thread with its own loop
(`EmulatorThread`, what the `emulator` fixture uses), or in a subprocess
(`python -m kopfsched.emulator.server`, driven by `RemoteEmulator`).

Raw capacity (2 cores, shared with other work; kubernetes_asyncio 36.1.0 creating, then binding,
2000 pods on 100 nodes): `python -m tests.e2e.raw_capacity --pods 2000 [--concurrency 8]`

    hosting   one request in flight        8 in flight
    inloop    840 creates/s, 874 binds/s   1000 creates/s, 1370 binds/s
    thread    805 creates/s, 914 binds/s   1180 creates/s,  970 binds/s
    process   686 creates/s, 720 binds/s   1000 creates/s, 1340 binds/s

Flat in the number of pods (stock kmock: 9 creates/s at 1000 pods). With one client the client's own
deserialisation dominates. For an operator in the test process the hosting matters: a kopf
operator binding round-robin on @kopf.on.event (2000 pods, creates and binds overlapping) finished
at 410-690 binds/s with the emulator in a subprocess, ~470 in the same loop, 350-375 in a thread
(GIL contention). So end-to-end benchmarks should use `emulator_process()` (fixture
`remote_emulator`); the `emulator` fixture uses a thread for its direct, synchronous test hooks.

kopf finds no credentials in a kubeconfig by itself (it needs pykube or the sync kubernetes client):
register `@kopf.on.login()` returning `kopf.login_with_kubeconfig(**kwargs)`.
"""
from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import dataclasses
import datetime
import itertools
import json
import pathlib
import random
import re
import sys
import threading
import time
import urllib.request
import uuid
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import aiohttp.web
import attrs
import jsonschema
import kmock

from kopfsched.emulator import core_events, event_validation, openapi, patches, selectors, tables, validation
from kopfsched.emulator.resources import BUILTIN_RESOURCES, ResourceDef, crd_status, group_versions, resources_of_crd

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


@dataclasses.dataclass
class _Failure:
    method: str
    pattern: re.Pattern[str]
    status: int
    times: int
    message: str
    retry_after: int | None = None


@dataclasses.dataclass(frozen=True)
class _Throttle:
    """API Priority and Fairness rejecting matching requests until `until` (time.monotonic())."""

    method: str
    pattern: re.Pattern[str]
    until: float
    retry_after: int


@dataclasses.dataclass(frozen=True)
class _WatchError:
    """A watch queue item: send an ERROR event with this Status, then close the stream."""

    status: Obj

    def line(self) -> bytes:
        return _dumps({'type': 'ERROR', 'object': self.status}) + b'\n'


@dataclasses.dataclass
class _WatchFailure:
    """New watches of a resource answer an ERROR event right away (`times` more, or all when None)."""

    error: _WatchError
    times: int | None


@dataclasses.dataclass
class _ListSnapshot:
    """A paged list in progress: its items at the first page's revision."""

    rv: int
    created: float  # time.monotonic()
    items: list[Obj]


MAX_LIST_SNAPSHOTS = 256
EXPIRED_CONTINUE = ('The provided continue parameter is too old to display a consistent list result. You can start a '
                    'new list without the continue parameter.')


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


@attrs.define(kw_only=True, slots=False)
class FastKubernetesEmulator(kmock.KubernetesEmulator):
    """kmock's KubernetesEmulator with indexed objects, resumable watches and the API's write semantics."""

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
    _list_snapshots: dict[int, _ListSnapshot] = attrs.field(factory=dict, init=False)  # by continue-token id
    _list_snapshot_ids: Iterator[int] = attrs.field(factory=itertools.count, init=False)
    _compact_on_continue: int = attrs.field(default=0, init=False)
    _lists: Counter[StoreKey] = attrs.field(factory=Counter, init=False)
    _manager: str = attrs.field(default='unknown', init=False)  # the field manager of the request being served
    _guard: threading.Lock = attrs.field(factory=threading.Lock, init=False)  # for calls from test threads
    _builtin_payloads: set[int] = attrs.field(factory=set, init=False)
    _loop: asyncio.AbstractEventLoop | None = attrs.field(default=None, init=False)
    _runner: aiohttp.web.ServerRunner | None = attrs.field(default=None, init=False)

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        # kmock keeps every request in a list otherwise; a bounded deque serves its readers as well.
        self._requests = deque(maxlen=self.request_log_size)  # type: ignore[assignment]
        self._mutations = deque(maxlen=self.mutation_log_size)
        self._builtin_payloads = {id(payload) for payload in self._payloads}
        for resource in BUILTIN_RESOURCES:
            self.register(resource)
        for name in ('default', 'kube-system', 'kube-public', 'kube-node-lease'):
            self._insert(self._registry['', 'v1', 'namespaces'], {'metadata': {'name': name}}, namespace=None)

    # --- lifecycle -------------------------------------------------------------------------------

    async def start(self, *, host: str = '127.0.0.1', port: int = 0) -> str:
        """Serve on host:port (0: a free port) in the running loop; returns the base URL."""
        await self.__aenter__()  # kmock's stream feeder, for DSL reactions
        self._loop = asyncio.get_running_loop()
        self._runner = aiohttp.web.ServerRunner(aiohttp.web.Server(self.__call__), handle_signals=False,
                                                shutdown_timeout=1.0)
        await self._runner.setup()
        site = aiohttp.web.TCPSite(self._runner, host, port)
        await site.start()
        bound_host, bound_port = self._runner.addresses[0][:2]
        self._url = f'http://{bound_host}:{bound_port}'
        return self._url

    async def stop(self) -> None:
        self._drop_watches()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        await self.__aexit__(None, None, None)

    # --- test hooks (safe to call from any thread) --------------------------------------------------

    def fail_next(self, method: str, path_regex: str, *, status: int = 500, times: int = 1, message: str = '',
                  retry_after: int | None = None) -> None:
        """Answer the next `times` requests whose method and path (with query) match with `status`
        (with a Retry-After header when `retry_after` is given).

        `method` is an HTTP method or '*'; `path_regex` is searched in e.g. '/api/v1/pods?watch=true'.
        """
        failure = _Failure(method.upper(), re.compile(path_regex), status, times, message or 'injected failure',
                           retry_after)
        with self._guard:
            self._failures.append(failure)

    def throttle(self, seconds: float, *, method: str = '*', path_regex: str = '', retry_after: int = 1) -> None:
        """For `seconds` from now, answer every matching request as API Priority and Fairness does
        when the request's priority level is saturated: 429, `Retry-After: retry_after`, a text body."""
        throttle = _Throttle(method.upper(), re.compile(path_regex), time.monotonic() + seconds, retry_after)
        with self._guard:
            self._throttles.append(throttle)

    def compact(self, *, on_next_continue: int = 0) -> None:
        """Compact as etcd does: every paged list in progress expires (its next continue answers 410
        Expired); with `on_next_continue`, that happens right before each of the next N continues."""
        def run() -> None:
            if on_next_continue:
                self._compact_on_continue += on_next_continue
            else:
                self._list_snapshots.clear()
        self._in_loop(run)

    def end_grace_periods(self) -> None:
        """Delete every pod in its grace period now (DELETED events), as kubelets confirming it would."""
        self._in_loop(self._end_grace_periods)

    def _end_grace_periods(self) -> None:
        for key, uid in list(self._terminating.items()):
            self._finish_termination(key, uid)

    def drop_watches(self) -> None:
        """Close every open watch stream cleanly, as an API server restart would."""
        self._in_loop(self._drop_watches)

    def remove_unseen(self, plural: str, namespace: str | None, name: str, *, group: str = '') -> None:
        """Remove an object without a DELETED event, leaving histories and watches as they are:
        gone while a watch was away, not noticed yet (a relist or a reconcile must notice)."""
        def remove() -> None:
            self._store[group, plural].pop((namespace, name), None)
        self._in_loop(remove)

    def vanish_while_watches_are_away(self, *objects: tuple[str, str | None, str], group: str = '') -> None:
        """Remove (plural, namespace, name) objects without DELETED events, compact every
        history to now and end every watch: a watcher resuming gets 410 Gone and must relist,
        as after a long disconnection from a real API server (the relist lacks the objects)."""
        def vanish() -> None:
            for plural, namespace, name in objects:
                self._store[group, plural].pop((namespace, name), None)
            # The removal is a write: a watcher that saw everything before it is behind it too,
            # so resuming from its last resourceVersion must expire, not look up to date.
            self._rv += 1
            for key, history in self._history.items():
                history.clear()
                self._compacted_rv[key] = self._rv
            self._drop_watches()
        self._in_loop(vanish)

    def send_bookmarks(self) -> None:
        """Send a BOOKMARK now on every open watch that allowed bookmarks."""
        self._in_loop(lambda: self._broadcast(_BOOKMARK))

    def watch_error(self, plural: str, *, group: str = '', code: int = 500, message: str = '',
                    times: int | None = 0) -> None:
        """Send an ERROR event with a `code` Status into every open watch of the resource, then close
        it, as the API server does when its watch cache or etcd fails (e.g. 500 InternalError); the
        next `times` watches of it (None: every one until `heal_watches()`) get the same right away."""
        status = status_object(code, message or f'injected watch error {code}',
                               reason=_REASONS.get(code, 'InternalError'))
        self._in_loop(lambda: self._watch_error((group, plural), _WatchError(status), times))

    def heal_watches(self) -> None:
        """New watches succeed again after `watch_error(times=...)`."""
        self._in_loop(self._watch_failures.clear)

    def mutations(self, method: str | None = None, path_regex: str | None = None) -> list[Mutation]:
        """The most recent mutating requests (bounded), oldest first, optionally filtered."""
        with self._guard:
            logged = list(self._mutations)
        pattern = re.compile(path_regex) if path_regex else None
        return [m for m in logged
                if (method is None or m.method == method.upper()) and (pattern is None or pattern.search(m.path))]

    def lists(self) -> dict[str, int]:
        """LIST requests served so far per resource (`pods`, `csinodes.storage.k8s.io`), the pages of
        a paged LIST counted once."""
        return {f'{plural}.{group}' if group else plural: count for (group, plural), count in self._lists.items()}

    def get_object(self, plural: str, namespace: str | None, name: str, *, group: str = '') -> Obj | None:
        """The stored object (a read-only snapshot: never mutate it), or None."""
        return self._store.get((group, plural), {}).get((namespace, name))

    def list_objects(self, plural: str, *, group: str = '', namespace: str | None = None) -> list[Obj]:
        objects = list(self._store.get((group, plural), {}).values())
        return [obj for obj in objects if namespace is None or obj['metadata'].get('namespace') == namespace]

    @property
    def url(self) -> str:  # type: ignore[override]
        if self._url is None:
            raise RuntimeError('the emulator is not serving yet: await start() first')
        return self._url

    @property
    def resource_version(self) -> int:
        return self._rv

    def serves(self, group: str, version: str, plural: str) -> bool:
        """Whether the resource is served (built in, registered, or a CRD's)."""
        return (group, version, plural) in self._registry

    def register(self, resource: ResourceDef) -> None:
        """Serve a resource (CRDs call this on create; tests may too)."""
        self._registry[resource.group, resource.version, resource.plural] = resource
        key = resource.store_key
        self._store.setdefault(key, {})
        self._history.setdefault(key, deque(maxlen=self.history_size))
        self._compacted_rv.setdefault(key, 0)
        self._watchers.setdefault(key, set())

    def _in_loop(self, fn: Callable[[], None]) -> None:
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if self._loop is None or running is self._loop:
            fn()
        else:
            self._loop.call_soon_threadsafe(fn)

    def _drop_watches(self) -> None:
        self._broadcast(_DROP)

    def _watch_error(self, key: StoreKey, error: _WatchError, times: int | None) -> None:
        if key not in self._watchers:
            raise ApiError(404, f'no resource {key[1]} in group {key[0]!r}')
        if times is None or times > 0:
            self._watch_failures[key] = _WatchFailure(error, times)
        for queue in self._watchers[key]:
            queue.put_nowait(error)

    def _take_watch_failure(self, key: StoreKey) -> _WatchError | None:
        failure = self._watch_failures.get(key)
        if failure is None:
            return None
        if failure.times is not None:
            failure.times -= 1
            if failure.times <= 0:
                del self._watch_failures[key]
        return failure.error

    def _broadcast(self, item: object) -> None:
        for queues in self._watchers.values():
            for queue in queues:
                queue.put_nowait(item)

    # --- HTTP entry point ---------------------------------------------------------------------------

    async def __call__(self, raw: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        body = await raw.read()
        self.request_count += 1
        response: aiohttp.web.StreamResponse
        self._manager = raw.query.get('fieldManager') or (raw.headers.get('User-Agent') or 'unknown').split('/')[0]
        throttle = self._throttled(raw.method, raw.path_qs)
        failure = None if throttle is not None else self._take_failure(raw.method, raw.path_qs)
        if throttle is not None:
            response = _too_many_requests(throttle.retry_after)
        elif failure is not None:
            response = _json_response(ApiError(failure.status, failure.message).status(), failure.status)
            if failure.retry_after is not None:
                response.headers['Retry-After'] = str(failure.retry_after)
        elif self._has_user_reactions():
            response = await self._serve_with_reactions(raw, body)
        else:
            response = await self._serve(raw, body)
        if raw.method in _MUTATING and not raw.path.startswith('/_emulator/'):
            self._log_mutation(raw, body, response.status)
        return response

    def _take_failure(self, method: str, path_qs: str) -> _Failure | None:
        if not self._failures:
            return None
        with self._guard:
            for failure in self._failures:
                if failure.method in ('*', method) and failure.pattern.search(path_qs):
                    failure.times -= 1
                    if failure.times <= 0:
                        self._failures.remove(failure)
                    return failure
        return None

    def _throttled(self, method: str, path_qs: str) -> _Throttle | None:
        if not self._throttles or path_qs.startswith('/_emulator/'):
            return None
        now = time.monotonic()
        with self._guard:
            self._throttles = [t for t in self._throttles if t.until > now]
            return next((t for t in self._throttles if t.method in ('*', method) and t.pattern.search(path_qs)), None)

    def _log_mutation(self, raw: aiohttp.web.BaseRequest, body: bytes, status: int) -> None:
        try:
            parsed: Any = json.loads(body) if body else None
        except ValueError:
            parsed = body.decode(errors='replace')
        mutation = Mutation(raw.method, raw.path, dict(raw.query), raw.content_type, parsed, status)
        with self._guard:
            self._mutations.append(mutation)

    def _has_user_reactions(self) -> bool:
        return len(self._payloads) > len(self._builtin_payloads)

    async def _serve_with_reactions(self, raw: aiohttp.web.BaseRequest, body: bytes) -> aiohttp.web.StreamResponse:
        """kmock DSL reactions registered by a test (`emulator['get /x'] << 200`) come first."""
        request = await kmock.Request._parse(raw, id=self.request_count)
        self._requests.append(request)
        payloads = [p for p in self._payloads if id(p) not in self._builtin_payloads]
        for payload in sorted(payloads, key=lambda p: tuple(-x for x in p.priorities)):
            if request in payload._source and not payload._disabled.is_set():
                try:
                    return await payload(request)
                except kmock.ReactionMismatchError:
                    payload._disabled.set()
                except NotImplementedError:
                    pass
        return await self._serve(raw, body)

    async def _serve(self, raw: aiohttp.web.BaseRequest, body: bytes) -> aiohttp.web.StreamResponse:
        try:
            result = self._dispatch(raw, body)
            if isinstance(result, aiohttp.web.StreamResponse):
                return result
            if asyncio.iscoroutine(result):
                return await result
            payload, code = result
            return _json_response(payload, code)
        except ApiError as e:
            return _json_response(e.status(), e.code)

    # --- routing --------------------------------------------------------------------------------------

    def _dispatch(self, raw: aiohttp.web.BaseRequest, body: bytes) -> Any:
        path = raw.path.rstrip('/') or '/'
        method = raw.method
        if path.startswith('/_emulator/'):
            return self._serve_control(path, method, body)
        if method == 'GET' and (static := self._serve_static(path)) is not None:
            return static
        parsed = ApiPath.parse(path)
        if parsed is None:
            raise ApiError(404, f'the server could not find the requested resource ({method} {path})')
        if parsed.plural is None:
            if method != 'GET':
                raise ApiError(405, f'{method} is not allowed on {path}')
            return self._discover_version(parsed.group, parsed.version), 200
        resource = self._registry.get((parsed.group, parsed.version, parsed.plural))
        if resource is None:
            raise ApiError(404, f'the server could not find the requested resource ({method} {path})')
        if parsed.namespace is not None and not resource.namespaced:
            raise ApiError(404, f'{resource.plural} is not namespaced')
        return self._serve_resource(raw, body, resource, parsed)

    def _serve_resource(self, raw: aiohttp.web.BaseRequest, body: bytes, resource: ResourceDef,
                        parsed: ApiPath) -> Any:
        method, query, ns, name, sub = raw.method, raw.query, parsed.namespace, parsed.name, parsed.subresource
        if sub not in (None, 'status', 'binding') or (sub is not None and sub not in resource.subresources):
            raise ApiError(404, f'the server could not find the requested resource ({sub} of {resource.plural})')
        if method == 'GET' and (query.get('watch') or '').lower() in ('true', '1'):
            return self._watch(raw, resource, namespace=ns, name=name)
        match method, name, sub:
            case 'GET', None, None:
                if not query.get('continue'):  # the later pages belong to the same LIST
                    self._lists[resource.store_key] += 1
                return self._printed(raw, resource, self._list(resource, namespace=ns, query=query)), 200
            case 'GET', str(), _:
                return self._printed(raw, resource, self._get(resource, ns, name)), 200
            case 'POST', None, None if resource.plural == 'bindings':
                binding = _parse_json(raw, body, expect=dict)
                return self._bind(ns, (binding.get('metadata') or {}).get('name', ''), binding), 201
            case 'POST', None, None:
                return self._create(resource, ns, _parse_json(raw, body, expect=dict)), 201
            case 'POST', str(), 'binding':
                return self._bind(ns, name, _parse_json(raw, body, expect=dict)), 201
            case 'PUT', str(), _:
                return self._replace(resource, ns, name, _parse_json(raw, body, expect=dict), subresource=sub), 200
            case 'PATCH', str(), _:
                return self._patch(resource, ns, name, raw, body, subresource=sub), 200
            case 'DELETE', str(), None:
                options = _parse_json(raw, body, expect=dict) if body else {}
                if query.get('gracePeriodSeconds'):  # query parameters are DeleteOptions too
                    options['gracePeriodSeconds'] = _int_query(query, 'gracePeriodSeconds')
                return self._delete(resource, ns, name, options=options), 200
            case 'DELETE', None, None:
                return self._delete_collection(resource, namespace=ns, query=query), 200
            case _:
                raise ApiError(405, f'{method} is not supported on {raw.path}')

    def _printed(self, raw: aiohttp.web.BaseRequest, resource: ResourceDef, answer: Obj) -> Obj:
        """A list or object as a Table when the client asks for one (kubectl get)."""
        if not tables.wants_table(raw.headers.get('Accept', '')):
            return answer
        is_list = 'items' in answer and answer.get('kind', '').endswith('List')
        objects = answer['items'] if is_list else [answer]
        columns = None
        if resource.custom:
            crd = self._store['apiextensions.k8s.io', 'customresourcedefinitions'].get(
                (None, f'{resource.plural}.{resource.group}')) or {}
            version: Obj = next((v for v in (crd.get('spec') or {}).get('versions') or ()
                            if v.get('name') == resource.version), {})
            columns = version.get('additionalPrinterColumns') or [
                {'name': 'Age', 'type': 'date', 'jsonPath': '.metadata.creationTimestamp'}]
        list_metadata = {k: v for k, v in (answer.get('metadata') or {}).items() if k != 'resourceVersion'} \
            if is_list else None
        return tables.to_table(objects, group=resource.group, plural=resource.plural, resource_version=str(self._rv),
                               printer_columns=columns, now=self.clock(), list_metadata=list_metadata)

    def _openapi(self, path: str) -> tuple[Obj, int] | None:
        """/openapi/v3 and its per-group/version documents (see openapi.py); v2 stays 404."""
        if path != '/openapi/v3' and not path.startswith('/openapi/v3/'):
            return None
        docs = openapi.group_version_docs(r for r in self._registry.values() if r.plural != 'bindings')
        if path == '/openapi/v3':
            return openapi.root(docs), 200
        doc = docs.get(path.removeprefix('/openapi/v3/'))
        if doc is None:
            raise ApiError(404, f'the server could not find the requested resource ({path})')
        return doc, 200

    def _serve_static(self, path: str) -> tuple[Obj, int] | None:
        if (document := self._openapi(path)) is not None:
            return document
        match path:
            case '/version':
                return {'major': '1', 'minor': '34', 'gitVersion': 'v1.34.0-kmock', 'platform': 'linux/amd64',
                        'goVersion': 'go1.24', 'compiler': 'gc'}, 200
            case '/api':
                return {'kind': 'APIVersions', 'versions': ['v1'], 'serverAddressByClientCIDRs': []}, 200
            case '/apis':
                return self._discover_groups(), 200
            case '/healthz' | '/readyz' | '/livez':
                return {'status': 'ok'}, 200
        if path.startswith('/apis/') and path.count('/') == 2:
            return self._discover_group(path.split('/')[2]), 200
        return None

    def _serve_control(self, path: str, method: str, body: bytes) -> tuple[Any, int]:
        """What RemoteEmulator calls in a subprocess-hosted emulator."""
        args = json.loads(body) if body else {}
        match method, path:
            case 'POST', '/_emulator/fail_next':
                self.fail_next(args['method'], args['path_regex'], status=args.get('status', 500),
                               times=args.get('times', 1), message=args.get('message', ''),
                               retry_after=args.get('retry_after'))
            case 'POST', '/_emulator/throttle':
                self.throttle(args['seconds'], method=args.get('method', '*'), path_regex=args.get('path_regex', ''),
                              retry_after=args.get('retry_after', 1))
            case 'POST', '/_emulator/drop_watches':
                self._drop_watches()
            case 'POST', '/_emulator/send_bookmarks':
                self._broadcast(_BOOKMARK)
            case 'POST', '/_emulator/watch_error':
                status = status_object(args.get('code', 500), args.get('message') or 'injected watch error',
                                       reason=_REASONS.get(args.get('code', 500), 'InternalError'))
                self._watch_error((args.get('group', ''), args['plural']), _WatchError(status), args.get('times', 0))
            case 'POST', '/_emulator/heal_watches':
                self._watch_failures.clear()
            case 'GET', '/_emulator/mutations':
                return {'items': [dataclasses.asdict(m) for m in self.mutations()]}, 200
            case 'GET', '/_emulator/lists':
                return self.lists(), 200
            case _:
                raise ApiError(404, f'no control endpoint {method} {path}')
        return {}, 200

    # --- discovery ------------------------------------------------------------------------------------

    def _discover_groups(self) -> Obj:
        return {'kind': 'APIGroupList', 'apiVersion': 'v1',
                'groups': [_group_doc(group, versions) for group, versions in
                           group_versions(self._registry.values()).items()]}

    def _discover_group(self, group: str) -> Obj:
        versions = group_versions(self._registry.values()).get(group)
        if not versions:
            raise ApiError(404, f'the server could not find the requested resource (group {group})')
        return {'kind': 'APIGroup', 'apiVersion': 'v1', **_group_doc(group, versions)}

    def _discover_version(self, group: str, version: str) -> Obj:
        served = [r for r in self._registry.values() if r.group == group and r.version == version]
        if not served and group != '':
            raise ApiError(404, f'the server could not find the requested resource ({group}/{version})')
        return {'kind': 'APIResourceList', 'apiVersion': 'v1', 'groupVersion': f'{group}/{version}'.lstrip('/'),
                'resources': [entry for r in served for entry in r.discovery_entries()]}

    # --- reads ----------------------------------------------------------------------------------------

    def _get(self, resource: ResourceDef, namespace: str | None, name: str) -> Obj:
        obj = self._store[resource.store_key].get((namespace, name))
        if obj is None:
            raise _not_found(resource, name)
        return obj

    def _list(self, resource: ResourceDef, *, namespace: str | None, query: Mapping[str, str]) -> Obj:
        limit = _int_query(query, 'limit') if query.get('limit') else 0
        if query.get('continue'):
            snapshot_id, snapshot, offset = self._continued(query['continue'])
        else:
            matches = self._matcher(resource, namespace=namespace, query=query)
            objects = sorted(self._store[resource.store_key].items(), key=lambda item: (item[0][0] or '', item[0][1]))
            snapshot_id, snapshot, offset = -1, _ListSnapshot(self._rv, time.monotonic(),
                                                              [obj for _, obj in objects if matches(obj)]), 0
        items = snapshot.items
        metadata: Obj = {'resourceVersion': str(snapshot.rv)}
        if limit and offset + limit < len(items):
            if snapshot_id < 0:
                snapshot_id = self._keep_list_snapshot(snapshot)
            metadata['continue'] = _continue_token(snapshot_id, offset + limit)
            metadata['remainingItemCount'] = len(items) - offset - limit
        items = items[offset:offset + limit] if limit else items[offset:]
        if self.items_without_type and not resource.custom:
            items = [{k: v for k, v in obj.items() if k not in ('kind', 'apiVersion')} for obj in items]
        return {'kind': f'{resource.kind}List', 'apiVersion': resource.api_version, 'metadata': metadata,
                'items': items}

    # --- paged lists (continue tokens served at the first page's revision until compacted) ------------

    def _keep_list_snapshot(self, snapshot: _ListSnapshot) -> int:
        snapshot_id = next(self._list_snapshot_ids)
        self._list_snapshots[snapshot_id] = snapshot
        while len(self._list_snapshots) > MAX_LIST_SNAPSHOTS:
            del self._list_snapshots[next(iter(self._list_snapshots))]
        return snapshot_id

    def _continued(self, token: str) -> tuple[int, _ListSnapshot, int]:
        try:
            decoded = json.loads(base64.urlsafe_b64decode(token.encode()))
            snapshot_id, offset = int(decoded['id']), int(decoded['offset'])
        except (ValueError, KeyError, TypeError) as e:
            raise ApiError(400, f'continue key is not valid: {e}') from None
        if self._compact_on_continue:
            self._compact_on_continue -= 1
            self._list_snapshots.clear()
        snapshot = self._list_snapshots.get(snapshot_id)
        if snapshot is not None and self.continue_ttl is not None and \
                time.monotonic() - snapshot.created > self.continue_ttl:
            del self._list_snapshots[snapshot_id]
            snapshot = None
        if snapshot is None:
            raise ApiError(410, EXPIRED_CONTINUE, reason='Expired')
        return snapshot_id, snapshot, offset

    def _matcher(self, resource: ResourceDef, *, namespace: str | None, query: Mapping[str, str],
                 name: str | None = None) -> Callable[[Obj], bool]:
        try:
            by_label = selectors.parse_label_selector(query.get('labelSelector'))
            by_field = selectors.parse_field_selector(query.get('fieldSelector'), plural=resource.plural)
        except selectors.SelectorError as e:
            raise ApiError(400, str(e)) from e
        checks = [check for check in (by_label, by_field) if check is not None]
        if namespace is not None:
            checks.append(lambda obj: obj['metadata'].get('namespace') == namespace)
        if name is not None:
            checks.append(lambda obj: obj['metadata']['name'] == name)
        return lambda obj: all(check(obj) for check in checks)

    async def _watch(self, raw: aiohttp.web.BaseRequest, resource: ResourceDef, *, namespace: str | None,
                     name: str | None) -> aiohttp.web.StreamResponse:
        query = raw.query
        matches = self._matcher(resource, namespace=namespace, query=query, name=name)
        since = query.get('resourceVersion') or '0'
        if not since.isdigit():
            raise ApiError(400, f'invalid resourceVersion {since!r}')
        key = resource.store_key
        timeout = self._watch_timeout(query.get('timeoutSeconds'))
        bookmarks = (query.get('allowWatchBookmarks') or '').lower() in ('true', '1')

        # Subscribe and read the snapshot or backlog in one synchronous step: nothing falls in between.
        queue: asyncio.Queue[Any] = asyncio.Queue()
        self._watchers[key].add(queue)
        try:
            if (error := self._take_watch_failure(key)) is not None:
                lines = [error.line()]
                queue.put_nowait(_DROP)
            elif since == '0':
                initial = [obj for obj in self._store[key].values() if matches(obj)]
                lines = [_dumps({'type': 'ADDED', 'object': obj}) + b'\n' for obj in initial]
            elif int(since) < self._compacted_rv[key]:
                lines = [_dumps({'type': 'ERROR', 'object': status_object(
                    410, f'too old resource version: {since} ({self._compacted_rv[key] + 1})', reason='Expired')})
                    + b'\n']
                queue.put_nowait(_DROP)
            else:
                backlog = [event for event in self._history[key] if event.rv > int(since)]
                lines = [line for event in backlog if (line := _event_line(event, matches))]
            last_rv = self._rv
            response = aiohttp.web.StreamResponse(headers={'Content-Type': 'application/json'})
            await response.prepare(raw)
            if lines:
                await response.write(b''.join(lines))
            with contextlib.suppress(ConnectionError):
                await self._stream_events(response, queue, matches, last_rv=last_rv, timeout=timeout,
                                          bookmarks=bookmarks, resource=resource)
            return response
        finally:
            self._watchers[key].discard(queue)

    def _watch_timeout(self, timeout_seconds: str | None) -> float | None:
        """How long a watch lasts: timeoutSeconds, else the API server's random 1-2x --min-request-timeout."""
        try:
            seconds = int(timeout_seconds or 0)
        except ValueError:
            raise ApiError(400, f'invalid timeoutSeconds {timeout_seconds!r}') from None
        if seconds > 0:
            return float(seconds)
        if self.min_request_timeout is None:
            return None
        return self.min_request_timeout * (1.0 + random.random())

    async def _stream_events(self, response: aiohttp.web.StreamResponse, queue: asyncio.Queue[Any],
                             matches: Callable[[Obj], bool], *, last_rv: int, timeout: float | None,
                             bookmarks: bool, resource: ResourceDef) -> None:
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while True:
            wait = self.bookmark_interval if bookmarks else None
            if deadline is not None:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    break
                wait = remaining if wait is None else min(wait, remaining)
            try:
                item = await asyncio.wait_for(queue.get(), wait)
            except TimeoutError:
                item = _BOOKMARK if bookmarks else None
            if item is _DROP:
                break
            if isinstance(item, _WatchError):
                await response.write(item.line())
                break
            if item is None:
                continue
            if item is _BOOKMARK:
                if bookmarks and queue.empty():
                    await response.write(_dumps({'type': 'BOOKMARK', 'object': {
                        'kind': resource.kind, 'apiVersion': resource.api_version,
                        'metadata': {'resourceVersion': str(self._rv)}}}) + b'\n')
                continue
            if item.rv > last_rv and (line := _event_line(item, matches)):
                await response.write(line)
        await response.write_eof()

    # --- writes ---------------------------------------------------------------------------------------

    def _create(self, resource: ResourceDef, namespace: str | None, obj: Obj) -> Obj:
        if resource.namespaced:
            if namespace is None:
                raise ApiError(405, f'create of {resource.plural} needs a namespace in the path')
            body_ns = (obj.get('metadata') or {}).get('namespace')
            if body_ns and body_ns != namespace:
                raise ApiError(400, 'the namespace of the provided object does not match the namespace sent on '
                                    'the request')
        return self._insert(resource, obj, namespace=namespace)

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
        self._commit(resource, key, new, old=None)
        return new

    # --- pruning of custom resources (apiextensions' structural schemas) ---------------------------------

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

    # --- managedFields (what server-side field tracking records) ----------------------------------------

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
        return self._update(resource, old, obj, subresource=subresource)

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
        return self._update(resource, old, new, subresource=subresource)

    def _update(self, resource: ResourceDef, old: Obj, obj: Obj, *, subresource: str | None) -> Obj:
        """Write a new version of `old`: keeps identity fields, separates status, bumps generation/rv."""
        if 'status' in resource.subresources:
            if subresource == 'status':
                obj = {k: v for k, v in old.items() if k != 'status'} | (
                    {'status': obj['status']} if obj.get('status') is not None else {})
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
        if metadata.get('deletionTimestamp') and not metadata.get('finalizers') and not self._in_grace(resource, key):
            self._remove(resource, key, new)
        else:
            self._commit(resource, key, new, old=old)
        return new

    def _delete(self, resource: ResourceDef, namespace: str | None, name: str, *, options: Obj) -> Obj:
        old = self._get(resource, namespace, name)
        preconditions = options.get('preconditions') or {}
        _check_precondition(resource, old, preconditions.get('resourceVersion'))
        if preconditions.get('uid') and preconditions['uid'] != old['metadata'].get('uid'):
            raise ApiError(409, f'Precondition failed: UID in precondition: {preconditions["uid"]}, UID in object '
                                f'meta: {old["metadata"].get("uid")}')
        key = (old['metadata'].get('namespace'), name)
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

    # --- graceful deletion of pods (pkg/registry/core/pod/strategy.go CheckGracefulDelete) ----------------

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

    def _in_grace(self, resource: ResourceDef, key: ObjKey) -> bool:
        return resource.plural == 'pods' and resource.group == '' and key in self._terminating

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

    # kmock's stock object array would scan everything: expose the indexed store instead.
    @property
    def objects(self) -> Mapping[StoreKey, Mapping[ObjKey, Obj]]:  # type: ignore[override]
        return self._store


def _event_line(event: _Event, matches: Callable[[Obj], bool]) -> bytes | None:
    """The event as this watcher sees it: objects entering or leaving its selector are ADDED or DELETED."""
    now = event.type != 'DELETED' and matches(event.obj)
    before = event.old is not None and matches(event.old)
    if event.type == 'DELETED':
        return event.line('DELETED') if before else None
    if now and before:
        return event.line(event.type)
    if now:
        return event.line('ADDED')
    if before:
        return event.line('DELETED')
    return None


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


def _is_new_event(resource: ResourceDef) -> bool:
    return resource.plural == 'events' and resource.group == 'events.k8s.io'


def _is_crd(resource: ResourceDef) -> bool:
    return resource.plural == 'customresourcedefinitions' and resource.group == 'apiextensions.k8s.io'


def _spec_of(obj: Obj) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k not in ('metadata', 'status', 'apiVersion', 'kind')}


def _check_precondition(resource: ResourceDef, old: Obj, resource_version: str | None) -> None:
    if resource_version and resource_version != old['metadata']['resourceVersion']:
        raise ApiError(409, f'Operation cannot be fulfilled on {_qualified(resource)} "{old["metadata"]["name"]}": '
                            'the object has been modified; please apply your changes to the latest version and try '
                            'again', details={'name': old['metadata']['name'], 'kind': resource.plural})


def _qualified(resource: ResourceDef) -> str:
    return f'{resource.plural}.{resource.group}' if resource.group else resource.plural


def _not_found(resource: ResourceDef, name: str) -> ApiError:
    return ApiError(404, f'{_qualified(resource)} "{name}" not found',
                    details={'name': name, 'group': resource.group, 'kind': resource.plural})


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


def _continue_token(snapshot_id: int, offset: int) -> str:
    return base64.urlsafe_b64encode(_dumps({'id': snapshot_id, 'offset': offset})).decode()


def _int_query(query: Mapping[str, str], name: str) -> int:
    try:
        return int(query[name])
    except ValueError:
        raise ApiError(400, f'invalid {name} {query[name]!r}') from None


def _too_many_requests(retry_after: int) -> aiohttp.web.Response:
    """What kube-apiserver's APF and max-in-flight filters answer: plain text, not a Status."""
    return aiohttp.web.Response(status=429, text='Too many requests, please try again later.\n',
                                headers={'Retry-After': str(retry_after)})


def _json_response(payload: Any, code: int) -> aiohttp.web.Response:
    return aiohttp.web.Response(body=_dumps(payload), status=code, content_type='application/json')


def _group_doc(group: str, versions: list[str]) -> Obj:
    entries = [{'groupVersion': f'{group}/{v}', 'version': v} for v in versions]
    return {'name': group, 'versions': entries, 'preferredVersion': entries[0]}


def write_kubeconfig(path: pathlib.Path, *, url: str) -> pathlib.Path:
    """A kubeconfig for kubernetes_asyncio, kopf and kubectl pointing at the emulator (no auth)."""
    path.write_text(json.dumps({
        'apiVersion': 'v1', 'kind': 'Config', 'current-context': 'emulator', 'preferences': {},
        'clusters': [{'name': 'emulator', 'cluster': {'server': url}}],
        'users': [{'name': 'emulator', 'user': {'token': 'emulator'}}],
        'contexts': [{'name': 'emulator', 'context': {'cluster': 'emulator', 'user': 'emulator',
                                                      'namespace': 'default'}}],
    }))
    return path


class EmulatorThread:
    """Runs an emulator in a daemon thread with its own event loop, so test code may block freely."""

    def __init__(self, emulator: FastKubernetesEmulator):
        self.emulator = emulator
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name='kube-emulator', daemon=True)

    def start(self) -> str:
        self._thread.start()
        return asyncio.run_coroutine_threadsafe(self.emulator.start(), self._loop).result(timeout=10)

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.emulator.stop(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()

    def __enter__(self) -> FastKubernetesEmulator:
        self.start()
        return self.emulator

    def __exit__(self, *exc: object) -> None:
        self.stop()


class RemoteEmulator:
    """The test hooks of an emulator served by `python -m kopfsched.emulator.server` in another process."""

    def __init__(self, url: str):
        self.url = url

    def _call(self, method: str, path: str, args: Mapping[str, Any] | None = None) -> Any:
        data = json.dumps(args or {}).encode() if method == 'POST' else None
        request = urllib.request.Request(f'{self.url}{path}', data=data, method=method,
                                         headers={'Content-Type': 'application/json'})
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())

    def fail_next(self, method: str, path_regex: str, *, status: int = 500, times: int = 1, message: str = '',
                  retry_after: int | None = None) -> None:
        self._call('POST', '/_emulator/fail_next', {'method': method, 'path_regex': path_regex, 'status': status,
                                                    'times': times, 'message': message, 'retry_after': retry_after})

    def throttle(self, seconds: float, *, method: str = '*', path_regex: str = '', retry_after: int = 1) -> None:
        self._call('POST', '/_emulator/throttle', {'seconds': seconds, 'method': method, 'path_regex': path_regex,
                                                   'retry_after': retry_after})

    def drop_watches(self) -> None:
        self._call('POST', '/_emulator/drop_watches')

    def send_bookmarks(self) -> None:
        self._call('POST', '/_emulator/send_bookmarks')

    def watch_error(self, plural: str, *, group: str = '', code: int = 500, message: str = '',
                    times: int | None = 0) -> None:
        self._call('POST', '/_emulator/watch_error', {'plural': plural, 'group': group, 'code': code,
                                                      'message': message, 'times': times})

    def heal_watches(self) -> None:
        self._call('POST', '/_emulator/heal_watches')

    def mutations(self) -> list[Mutation]:
        return [Mutation(**item) for item in self._call('GET', '/_emulator/mutations')['items']]

    def lists(self) -> dict[str, int]:
        return dict(self._call('GET', '/_emulator/lists'))


@contextlib.contextmanager
def emulator_process(*, history_size: int = 10_000) -> Iterator[RemoteEmulator]:
    """Serve an emulator from a subprocess (its own GIL) for as long as the context lasts."""
    import subprocess
    process = subprocess.Popen([sys.executable, '-m', 'kopfsched.emulator.server', '--history-size', str(history_size)],
                               stdout=subprocess.PIPE, text=True, cwd=pathlib.Path(__file__).parents[2])
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip()
        if not url.startswith('http'):
            raise RuntimeError(f'the emulator process did not start: {url!r}')
        yield RemoteEmulator(url)
    finally:
        process.terminate()
        process.wait(timeout=10)


async def _serve_forever(args: argparse.Namespace) -> None:
    emulator = FastKubernetesEmulator(history_size=args.history_size)
    url = await emulator.start(host=args.host, port=args.port)
    print(url, flush=True)
    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.Event().wait()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description='Serve the Kubernetes API emulator until terminated.')
    parser.add_argument('--host', default='127.0.0.1')
    parser.add_argument('--port', type=int, default=0)
    parser.add_argument('--history-size', type=int, default=10_000)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve_forever(parser.parse_args(argv)))


if __name__ == '__main__':
    main()
