"""Where the real v1.37 control plane (tests/cluster) answered differently from the emulator,
the emulator now answers as the real one; each test names the upstream code it follows. The
expected answers are the real v1.37.2 kube-apiserver's, word for word, asked with the same
requests."""
from __future__ import annotations

import json
import re
from typing import Any

import aiohttp
import pytest
import yaml

from kopfsched.emulator.server import FastKubernetesEmulator
from tests.builders import make_pod
from tests.conftest import ROOT

pytestmark = pytest.mark.http(controller_kinds=False, crd=False, profiles=())

MERGE = 'application/merge-patch+json'
NS = 'going'


async def call(http: aiohttp.ClientSession, method: str, path: str, body: Any = None, *,
               content_type: str = 'application/json') -> tuple[int, dict[str, Any]]:
    data = json.dumps(body) if body is not None else None
    async with http.request(method, path, data=data, headers={'Content-Type': content_type}) as response:
        return response.status, await response.json()


def event(name: str, namespace: str) -> dict[str, Any]:
    return {'apiVersion': 'events.k8s.io/v1', 'kind': 'Event', 'metadata': {'name': name, 'namespace': namespace},
            'eventTime': '2026-01-01T00:00:00.000000Z', 'reportingController': 'kopfsched',
            'reportingInstance': 'kopfsched-0', 'action': 'Scheduling', 'reason': 'FailedScheduling',
            'type': 'Warning', 'note': 'no room',
            'regarding': {'kind': 'Pod', 'namespace': namespace, 'name': 'held', 'apiVersion': 'v1'}}


def terminating(resource: str, name: str, *, group: str = '') -> dict[str, Any]:
    """NamespaceLifecycle's 403 (apiserver's admission/plugin/namespace/lifecycle), as the real
    server sent it for an Event in tests/cluster."""
    qualified = f'{resource}.{group}' if group else resource
    return {'kind': 'Status', 'apiVersion': 'v1', 'metadata': {}, 'status': 'Failure', 'code': 403,
            'reason': 'Forbidden',
            'message': f'{qualified} "{name}" is forbidden: unable to create new content in namespace {NS} '
                       'because it is being terminated',
            'details': {'name': name, **({'group': group} if group else {}), 'kind': resource, 'causes': [
                {'reason': 'NamespaceTerminating', 'message': f'namespace {NS} is being terminated',
                 'field': 'metadata.namespace'}]}}


@pytest.mark.emulator(grace_period_scale=0)  # grace periods end when the test says
async def test_a_deleted_namespace_terminates_refuses_new_content_and_goes_once_empty(
        http: aiohttp.ClientSession, emulator: FastKubernetesEmulator) -> None:
    code, created = await call(http, 'POST', '/api/v1/namespaces',
                               {'apiVersion': 'v1', 'kind': 'Namespace', 'metadata': {'name': NS}})
    assert (code, created['metadata']['labels'], created['spec'], created['status']) == (
        201, {'kubernetes.io/metadata.name': NS}, {'finalizers': ['kubernetes']}, {'phase': 'Active'})
    pods = f'/api/v1/namespaces/{NS}/pods'
    running = make_pod('running', NS, node_name='node-1')
    held = make_pod('held', NS)
    held['metadata']['finalizers'] = ['example.dev/hold']
    for body in (running, held, make_pod('pending', NS)):
        assert (await call(http, 'POST', pods, body))[0] == 201

    code, deleted = await call(http, 'DELETE', f'/api/v1/namespaces/{NS}')
    assert (code, deleted['status']['phase'], bool(deleted['metadata'].get('deletionTimestamp'))) == \
        (200, 'Terminating', True)
    # The namespace controller's sweep: the unbound pod is gone, the one on a node terminates,
    # the one with a finalizer waits for it; they hold the namespace.
    assert emulator.get_object('pods', NS, 'pending') is None
    assert emulator.get_object('pods', NS, 'running')['metadata']['deletionGracePeriodSeconds'] == 30
    assert emulator.get_object('pods', NS, 'held')['metadata']['deletionTimestamp']
    assert (await call(http, 'GET', f'/api/v1/namespaces/{NS}'))[1]['status']['phase'] == 'Terminating'

    assert await call(http, 'POST', f'/apis/events.k8s.io/v1/namespaces/{NS}/events', event('e1', NS)) == \
        (403, terminating('events', 'e1', group='events.k8s.io'))
    core_event = {'apiVersion': 'v1', 'kind': 'Event', 'metadata': {'generateName': 'held.'},
                  'involvedObject': {'kind': 'Pod', 'namespace': NS, 'name': 'held'}, 'reason': 'Failed'}
    assert await call(http, 'POST', f'/api/v1/namespaces/{NS}/events', core_event) == \
        (403, terminating('events', 'held.'))
    assert await call(http, 'POST', pods, make_pod('late', NS)) == (403, terminating('pods', 'late'))
    binding = {'apiVersion': 'v1', 'kind': 'Binding', 'metadata': {'name': 'held'},
               'target': {'kind': 'Node', 'name': 'node-1'}}
    assert await call(http, 'POST', f'{pods}/held/binding', binding) == (403, terminating('pods', 'held'))
    # Updates pass admission: the finalizer can be taken off; the namespace's name label cannot.
    code, _ = await call(http, 'PATCH', f'/api/v1/namespaces/{NS}', {'metadata': {'labels': None}},
                         content_type=MERGE)
    assert (await call(http, 'GET', f'/api/v1/namespaces/{NS}'))[1]['metadata']['labels'] == {
        'kubernetes.io/metadata.name': NS}
    code, _ = await call(http, 'PATCH', f'{pods}/held', {'metadata': {'finalizers': None}}, content_type=MERGE)
    assert code == 200
    assert emulator.get_object('namespaces', None, NS) is not None  # the running pod still terminates

    emulator.end_grace_periods()
    assert (await call(http, 'GET', f'/api/v1/namespaces/{NS}'))[0] == 404
    code, again = await call(http, 'POST', '/api/v1/namespaces',
                             {'apiVersion': 'v1', 'kind': 'Namespace', 'metadata': {'name': NS}})
    assert (code, again['status']['phase']) == (201, 'Active')
    assert (await call(http, 'POST', f'/apis/events.k8s.io/v1/namespaces/{NS}/events', event('e2', NS)))[0] == 201


async def test_an_empty_namespace_goes_at_once_and_its_watchers_see_it_terminate_first(
        http: aiohttp.ClientSession, emulator: FastKubernetesEmulator) -> None:
    await call(http, 'POST', '/api/v1/namespaces', {'apiVersion': 'v1', 'kind': 'Namespace', 'metadata': {'name': NS}})
    since = emulator.resource_version
    code, deleted = await call(http, 'DELETE', f'/api/v1/namespaces/{NS}')
    assert (code, deleted['status']['phase']) == (200, 'Terminating')
    assert emulator.get_object('namespaces', None, NS) is None
    async with http.get('/api/v1/namespaces', params={'watch': 'true', 'resourceVersion': str(since),
                                                       'timeoutSeconds': '1'}) as response:
        events = [json.loads(line) async for line in response.content]
    assert [(e['type'], e['object']['status']['phase'], e['object']['spec']['finalizers']) for e in events] == [
        ('MODIFIED', 'Terminating', ['kubernetes']), ('DELETED', 'Terminating', [])]


OPERATOR = 'system:serviceaccount:kopfsched-system:kopfsched'
CLAIMS = '/apis/resource.k8s.io/v1/namespaces/default/resourceclaims'
ALLOCATED = {'allocation': {'devices': {'results': [
    {'request': 'gpu', 'driver': 'gpu.example.dev', 'pool': 'node-1', 'device': 'gpu-0'}]}},
    'reservedFor': [{'resource': 'pods', 'name': 'trainer', 'uid': 'u-1'}]}


def manifest_rbac(*, without: str | None = None) -> list[dict[str, Any]]:
    """manifests/' ClusterRole and its binding, the rule for the `without` resource left out."""
    documents = [yaml.safe_load((ROOT / 'manifests' / name).read_text())
                 for name in ('02-clusterrole.yaml', '03-clusterrolebinding.yaml')]
    documents[0]['rules'] = [r for r in documents[0]['rules'] if without not in r['resources']]
    return documents


async def as_operator(emulator: FastKubernetesEmulator, rbac: list[dict[str, Any]]) -> aiohttp.ClientSession:
    async with aiohttp.ClientSession(emulator.url) as admin:
        for body in rbac:
            plural = body['kind'].lower() + 's'
            assert (await call(admin, 'POST', f'/apis/rbac.authorization.k8s.io/v1/{plural}', body))[0] == 201
        claim = {'apiVersion': 'resource.k8s.io/v1', 'kind': 'ResourceClaim', 'metadata': {'name': 'gpu'},
                 'spec': {'devices': {'requests': [{'name': 'gpu', 'exactly': {'deviceClassName': 'gpu'}}]}}}
        assert (await call(admin, 'POST', CLAIMS, claim))[0] == 201
        assert (await call(admin, 'POST', '/api/v1/nodes', {'apiVersion': 'v1', 'kind': 'Node',
                                                            'metadata': {'name': 'node-1'}}))[0] == 201
    token = emulator.service_account_token('kopfsched-system', 'kopfsched')
    return aiohttp.ClientSession(emulator.url, headers={'Authorization': f'Bearer {token}'})


@pytest.mark.emulator(authorization=True)
async def test_with_authorization_the_operator_account_gets_what_the_manifests_grant_and_upstreams_403(
        emulator: FastKubernetesEmulator) -> None:
    async with await as_operator(emulator, manifest_rbac()) as operator:
        assert (await call(operator, 'GET', '/api/v1/pods'))[0] == 200
        assert (await call(operator, 'GET', '/apis'))[0] == 200  # discovery is open to everyone signed in
        assert await call(operator, 'DELETE', '/api/v1/nodes/node-1') == (403, {
            'kind': 'Status', 'apiVersion': 'v1', 'metadata': {}, 'status': 'Failure', 'code': 403,
            'reason': 'Forbidden', 'details': {'name': 'node-1', 'kind': 'nodes'},
            'message': f'nodes "node-1" is forbidden: User "{OPERATOR}" cannot delete resource "nodes" in API '
                       'group "" at the cluster scope'})
        code, refused = await call(operator, 'GET', '/apis/coordination.k8s.io/v1/namespaces/kube-system/leases')
        assert (code, refused['message']) == (403, f'leases.coordination.k8s.io is forbidden: User "{OPERATOR}" '
                                                   'cannot list resource "leases" in API group '
                                                   '"coordination.k8s.io" in the namespace "kube-system"')
        # The claim's allocation through the status subresource: `patch resourceclaims/binding` granted.
        code, patched = await call(operator, 'PATCH', f'{CLAIMS}/gpu/status', {'status': ALLOCATED},
                                   content_type=MERGE)
        assert (code, patched['status']) == (200, ALLOCATED)
        # A PUT is the update verb, which the ClusterRole does not grant on resourceclaims/status.
        assert (await call(operator, 'PUT', f'{CLAIMS}/gpu/status', patched))[0] == 403
    async with aiohttp.ClientSession(emulator.url, headers={'Authorization': 'Bearer nobody'}) as stranger:
        assert await call(stranger, 'GET', '/api/v1/pods') == (401, {
            'kind': 'Status', 'apiVersion': 'v1', 'metadata': {}, 'status': 'Failure', 'code': 401,
            'message': 'Unauthorized', 'reason': 'Unauthorized'})


@pytest.mark.emulator(authorization=True)
async def test_a_claims_allocation_needs_patch_on_resourceclaims_binding_as_a_v1_37_server_checks(
        emulator: FastKubernetesEmulator) -> None:
    async with await as_operator(emulator, manifest_rbac(without='resourceclaims/binding')) as operator:
        code, refused = await call(operator, 'PATCH', f'{CLAIMS}/gpu/status', {'status': ALLOCATED},
                                   content_type=MERGE)
        # Labels and conditions still pass: only allocation and reservedFor need the binding permission.
        unrelated = await call(operator, 'PATCH', f'{CLAIMS}/gpu/status', {'status': {'devices': []}},
                               content_type=MERGE)
    detail = ('changing status.allocation or status.reservedFor requires resource="resourceclaims/binding", '
              f'verb="patch" permission: resourceclaims.resource.k8s.io is forbidden: User "{OPERATOR}" cannot '
              'patch resource "resourceclaims/binding" in API group "resource.k8s.io" at the cluster scope')
    assert (code, refused) == (422, {
        'kind': 'Status', 'apiVersion': 'v1', 'metadata': {}, 'status': 'Failure', 'code': 422, 'reason': 'Invalid',
        'message': f'ResourceClaim.resource.k8s.io "gpu" is invalid: status.allocation: Forbidden: {detail}',
        'details': {'name': 'gpu', 'group': 'resource.k8s.io', 'kind': 'ResourceClaim', 'causes': [
            {'reason': 'FieldValueForbidden', 'message': f'Forbidden: {detail}', 'field': 'status.allocation'}]}})
    assert unrelated[0] == 200
    assert 'allocation' not in emulator.get_object('resourceclaims', 'default', 'gpu', group='resource.k8s.io')[
        'status']


async def test_version_is_the_release_the_test_control_plane_pins(http: aiohttp.ClientSession) -> None:
    pinned = re.search(r'^\s*k8s\.io/kubernetes (v[0-9.]+)$', (ROOT / 'tests' / 'kubeenv' / 'go.mod').read_text(),
                       re.MULTILINE)
    assert pinned is not None
    code, version = await call(http, 'GET', '/version')
    major, minor = pinned.group(1)[1:].split('.')[:2]
    assert (code, version['gitVersion'], version['major'], version['minor'], version['emulationMinor']) == (
        200, f'{pinned.group(1)}+kopfsched-emulator', major, minor, minor)
