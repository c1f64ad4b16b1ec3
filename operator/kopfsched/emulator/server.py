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
- namespaces as the API server and namespace controller run them: Active with the `kubernetes` finalizer
  and name label, Terminating on DELETE while their content goes, and NamespaceLifecycle's 403 for a create
  in a terminating one (namespaces.py);
- with `authorization=True`, RBAC from the stored roles and bindings for ServiceAccount tokens
  (`service_account_token`), upstream's 401/403 texts, and a ResourceClaim's allocation refused (422)
  without the verb on `resourceclaims/binding` (authorization.py); /version is the pinned v1.37.2;
- server-side checks a user notices: a pod without containers, a malformed quantity (validation.py);
  events.k8s.io/v1 Events are readable as core/v1 Events too (core_events.py), as kubectl describe reads them;
- test hooks: `fail_next()` injects failures (with Retry-After if asked), `throttle()` answers 429 with
  Retry-After for a while as API Priority and Fairness does, `drop_watches()` closes every open watch stream,
  `watch_error()` ends watches with an ERROR event of any Status code (and `heal_watches()`),
  `mutations()` is a bounded log of what the API received, `send_bookmarks()`.

Deliberate leniencies: namespaces need not exist (the real server answers 404); no defaults except a
pod's `spec.schedulerName` and `status.phase` and a namespace's; status given on create is kept (but a
namespace's); a namespace's content is deleted at once, inside its DELETE (the controller takes seconds);
without `authorization`, every request is the admin's.

It runs in the caller's loop (`await emulator.start()` ... `await emulator.stop()`), in a thread with its own loop
(`EmulatorThread`, what the `emulator` fixture uses), or in a subprocess
(`python -m kopfsched.emulator.server`, driven by `RemoteEmulator`).

Its speed is flat in the number of pods (stock kmock slows down with every request served);
`python -m tests.e2e.raw_capacity` measures it per hosting. For an operator in the test process
the hosting matters: with the emulator in a thread the two contend for the GIL, so end-to-end
benchmarks use `emulator_process()` (fixture `remote_emulator`); the `emulator` fixture uses a
thread for its direct, synchronous test hooks.

kopf finds no credentials in a kubeconfig by itself (it needs pykube or the sync kubernetes client):
register `@kopf.on.login()` returning `kopf.login_with_kubeconfig(**kwargs)`.
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import pathlib
import sys
import threading
import urllib.request
from collections import deque
from collections.abc import Iterator, Mapping
from typing import Any

import aiohttp.web
import attrs
import kmock

from kopfsched.emulator import openapi, tables
from kopfsched.emulator.authorization import ADMIN, ADMIN_TOKEN, allowed, forbidden, request_attributes
from kopfsched.emulator.faults import EmulatorFaults
from kopfsched.emulator.list_watch import _int_query, _WatchError
from kopfsched.emulator.resources import BUILTIN_RESOURCES, ResourceDef, group_versions
from kopfsched.emulator.store import (
    _BOOKMARK,
    _MUTATING,
    _REASONS,
    ApiError,
    ApiPath,
    Mutation,
    Obj,
    _dumps,
    status_object,
)
from kopfsched.emulator.verbs import _parse_json

VERSION = {'major': '1', 'minor': '37', 'emulationMajor': '1', 'emulationMinor': '37',
           'minCompatibilityMajor': '1', 'minCompatibilityMinor': '36', 'gitVersion': 'v1.37.2+kopfsched-emulator',
           'gitCommit': '', 'gitTreeState': 'clean', 'buildDate': '1970-01-01T00:00:00Z', 'goVersion': 'go1.26.8',
           'compiler': 'gc', 'platform': 'linux/amd64'}
"""/version: the release the test control plane pins (tests/kubeenv/go.mod), as its kube-apiserver
answers; the build metadata says it is the emulator."""


@attrs.define(kw_only=True, slots=False)
class FastKubernetesEmulator(EmulatorFaults):
    """kmock's KubernetesEmulator with indexed objects, resumable watches and the API's write semantics."""

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

    @property
    def url(self) -> str:  # type: ignore[override]
        if self._url is None:
            raise RuntimeError('the emulator is not serving yet: await start() first')
        return self._url

    async def __call__(self, raw: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        body = await raw.read()
        self.request_count += 1
        response: aiohttp.web.StreamResponse
        self._manager = raw.query.get('fieldManager') or (raw.headers.get('User-Agent') or 'unknown').split('/')[0]
        user = self._authenticate(raw.headers.get('Authorization', '')) if self.authorization else ADMIN
        if user is None and not raw.path.startswith('/_emulator/'):
            return _json_response(ApiError(401, 'Unauthorized').status(), 401)
        self._user = user or ADMIN
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
        if self.authorization and parsed.plural is not None:  # the authorization filter runs before routing
            attributes = request_attributes(self._user, method, raw.query, parsed)
            if not allowed(self._store, attributes):
                raise forbidden(attributes)
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
                return dict(VERSION), 200
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


def _too_many_requests(retry_after: int) -> aiohttp.web.Response:
    """What kube-apiserver's APF and max-in-flight filters answer: plain text, not a Status."""
    return aiohttp.web.Response(status=429, text='Too many requests, please try again later.\n',
                                headers={'Retry-After': str(retry_after)})


def _json_response(payload: Any, code: int) -> aiohttp.web.Response:
    return aiohttp.web.Response(body=_dumps(payload), status=code, content_type='application/json')


def _group_doc(group: str, versions: list[str]) -> Obj:
    entries = [{'groupVersion': f'{group}/{v}', 'version': v} for v in versions]
    return {'name': group, 'versions': entries, 'preferredVersion': entries[0]}


def write_kubeconfig(path: pathlib.Path, *, url: str, token: str = ADMIN_TOKEN) -> pathlib.Path:
    """A kubeconfig for kubernetes_asyncio, kopf and kubectl pointing at the emulator; the token is
    the admin's unless given (`service_account_token`)."""
    path.write_text(json.dumps({
        'apiVersion': 'v1', 'kind': 'Config', 'current-context': 'emulator', 'preferences': {},
        'clusters': [{'name': 'emulator', 'cluster': {'server': url}}],
        'users': [{'name': 'emulator', 'user': {'token': token}}],
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
