"""What a user of the sandbox meets in the emulator: kubectl's plain commands work, server-side
defaults are there, and mistakes are refused with the API server's Status bodies."""
from __future__ import annotations

import json
import pathlib
from typing import Any

import aiohttp
import pytest
import yaml

from kopfsched.emulator.server import FastKubernetesEmulator
from tests.builders import make_node, make_pod
from tests.kubectl import kubectl

pytestmark = pytest.mark.http(controller_kinds=False, crd=False, profiles=())

PODS = '/api/v1/namespaces/default/pods'


async def send(http: aiohttp.ClientSession, method: str, path: str, body: Any = None) -> tuple[int, dict[str, Any]]:
    async with http.request(method, path, json=body) as response:
        return response.status, await response.json()


async def test_server_side_defaults_of_a_new_pod(http: aiohttp.ClientSession) -> None:
    status, pod = await send(http, 'POST', PODS, {'apiVersion': 'v1', 'kind': 'Pod', 'metadata': {'name': 'p'},
                                                  'spec': {'containers': [{'name': 'c', 'image': 'nginx'}]}})
    assert status == 201
    assert pod['metadata']['uid'] and pod['metadata']['creationTimestamp'].endswith('Z')
    assert int(pod['metadata']['resourceVersion']) > 0
    assert (pod['spec']['schedulerName'], pod['status']['phase']) == ('default-scheduler', 'Pending')


@pytest.mark.parametrize(('pod', 'code', 'reason', 'message'), [
    pytest.param({'spec': {}}, 422, 'Invalid', 'Pod "bad" is invalid: spec.containers: Required value',
                 id='no-containers'),
    pytest.param({'spec': {'containers': [{'name': 'c'}]}}, 422, 'Invalid',
                 'Pod "bad" is invalid: spec.containers[0].image: Required value', id='no-image'),
    pytest.param({'spec': {'containers': [{'name': 'c', 'image': 'i', 'resources': {'requests': {'cpu': 'lots'}}}]}},
                 400, 'BadRequest', 'Pod in version "v1" cannot be handled as a Pod: quantities must match the regular '
                 "expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'", id='malformed-quantity'),
])
async def test_what_the_api_server_refuses(http: aiohttp.ClientSession, pod: dict[str, Any], code: int, reason: str,
                                           message: str) -> None:
    status, body = await send(http, 'POST', PODS, {'apiVersion': 'v1', 'kind': 'Pod', 'metadata': {'name': 'bad'},
                                                   **pod})
    assert status == code
    assert (body['kind'], body['status'], body['code'], body['reason'], body['message']) == (
        'Status', 'Failure', code, reason, message)
    assert (await send(http, 'GET', f'{PODS}/bad'))[0] == 404


async def test_a_duplicate_name_is_a_conflict(http: aiohttp.ClientSession) -> None:
    assert (await send(http, 'POST', PODS, make_pod('twin')))[0] == 201
    status, body = await send(http, 'POST', PODS, make_pod('twin'))
    assert (status, body['reason'], body['message']) == (409, 'AlreadyExists', 'pods "twin" already exists')


async def test_a_malformed_node_quantity_is_refused_on_update_too(http: aiohttp.ClientSession) -> None:
    assert (await send(http, 'POST', '/api/v1/nodes', make_node('n1')))[0] == 201
    async with http.patch('/api/v1/nodes/n1/status', data=json.dumps({'status': {'allocatable': {'cpu': '4 cores'}}}),
                          headers={'Content-Type': 'application/merge-patch+json'}) as response:
        assert response.status == 400
        assert 'Node in version "v1" cannot be handled as a Node: quantities must match' in (
            await response.json())['message']


async def test_events_k8s_io_events_are_core_events_too(http: aiohttp.ClientSession) -> None:
    event = {'apiVersion': 'events.k8s.io/v1', 'kind': 'Event', 'metadata': {'name': 'e1', 'namespace': 'default'},
             'regarding': {'kind': 'Pod', 'namespace': 'default', 'name': 'p', 'uid': 'u1'}, 'reason': 'Scheduled',
             'note': 'Successfully assigned default/p to n1', 'type': 'Normal', 'action': 'Binding',
             'reportingController': 'kopfsched', 'reportingInstance': 'kopfsched-x',
             'eventTime': '2026-01-01T00:00:00.000000Z'}
    assert (await send(http, 'POST', '/apis/events.k8s.io/v1/namespaces/default/events', event))[0] == 201
    status, listed = await send(
        http, 'GET', '/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3Dp,involvedObject.uid%3Du1')
    assert status == 200
    [core] = listed['items']
    assert (core['involvedObject']['name'], core['reason'], core['message'], core['reportingComponent'],
            core['source']) == ('p', 'Scheduled', 'Successfully assigned default/p to n1', 'kopfsched',
                                {'component': 'kopfsched'})
    assert (await send(http, 'DELETE', '/apis/events.k8s.io/v1/namespaces/default/events/e1'))[0] == 200
    assert (await send(http, 'GET', '/api/v1/namespaces/default/events'))[1]['items'] == []


async def test_kubectl_apply_get_wide_and_describe_without_flags(
        emulator: FastKubernetesEmulator, kubeconfig: pathlib.Path, http: aiohttp.ClientSession,
        tmp_path: pathlib.Path) -> None:
    manifest = tmp_path / 'pod.yaml'
    manifest.write_text(yaml.safe_dump({'apiVersion': 'v1', 'kind': 'Pod', 'metadata': {'name': 'web'},
                                        'spec': {'containers': [{'name': 'main', 'image': 'nginx'}]}}))
    applied = kubectl(kubeconfig, 'apply', '-f', str(manifest))
    assert (applied.returncode, applied.stdout.strip()) == (0, 'pod/web created'), applied.stderr
    again = kubectl(kubeconfig, 'apply', '-f', str(manifest))
    assert (again.returncode, again.stdout.strip()) == (0, 'pod/web unchanged'), again.stderr
    await send(http, 'POST', f'{PODS}/web/binding', {'apiVersion': 'v1', 'kind': 'Binding',
                                                     'metadata': {'name': 'web'}, 'target': {'name': 'node-1'}})
    wide = kubectl(kubeconfig, 'get', 'pods', '-o', 'wide')
    assert wide.returncode == 0, wide.stderr
    header, row = wide.stdout.splitlines()
    assert header.split()[:6] == ['NAME', 'READY', 'STATUS', 'RESTARTS', 'AGE', 'IP']
    assert 'NODE' in header and row.split()[0:3] == ['web', '0/1', 'Pending'] and 'node-1' in row.split()

    bad = tmp_path / 'bad.yaml'
    bad.write_text(yaml.safe_dump({'apiVersion': 'v1', 'kind': 'Pod', 'metadata': {'name': 'empty'}, 'spec': {}}))
    refused = kubectl(kubeconfig, 'apply', '-f', str(bad))
    assert refused.returncode != 0
    assert refused.stderr.strip() == 'The Pod "empty" is invalid: spec.containers: Required value'

    event = {'apiVersion': 'events.k8s.io/v1', 'kind': 'Event', 'metadata': {'name': 'web.1', 'namespace': 'default'},
             'regarding': {'kind': 'Pod', 'namespace': 'default', 'name': 'web',
                           'uid': emulator.get_object('pods', 'default', 'web')['metadata']['uid']},
             'reason': 'Scheduled', 'note': 'Successfully assigned default/web to node-1', 'type': 'Normal',
             'action': 'Binding', 'reportingController': 'kopfsched', 'reportingInstance': 'x',
             'eventTime': '2026-01-01T00:00:00.000000Z'}
    assert (await send(http, 'POST', '/apis/events.k8s.io/v1/namespaces/default/events', event))[0] == 201
    described = kubectl(kubeconfig, 'describe', 'pod', 'web')
    assert described.returncode == 0, described.stderr
    events = described.stdout.split('Events:', 1)[1]
    assert 'Scheduled' in events and 'kopfsched' in events and 'Successfully assigned default/web to node-1' in events
