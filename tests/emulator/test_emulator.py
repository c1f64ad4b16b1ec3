"""The API emulator, exercised only through real clients over HTTP: kubernetes_asyncio, aiohttp, kubectl."""
from __future__ import annotations

import asyncio
import json
import pathlib
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio import client, config, watch
from kubernetes_asyncio.client.rest import ApiException
from kubernetes_asyncio.leaderelection.leaderelectionrecord import LeaderElectionRecord
from kubernetes_asyncio.leaderelection.resourcelock.leaselock import LeaseLock

from kopfsched.emulator.server import FastKubernetesEmulator, RemoteEmulator
from tests.builders import make_node, make_pod
from tests.kubectl import kubectl
from tests.waiting import until

pytestmark = pytest.mark.http(controller_kinds=False, crd=False, profiles=())

GROUP, VERSION, PLURAL = 'example.dev', 'v1', 'widgets'
WIDGET_CRD: dict[str, Any] = {
    'apiVersion': 'apiextensions.k8s.io/v1', 'kind': 'CustomResourceDefinition',
    'metadata': {'name': f'{PLURAL}.{GROUP}'},
    'spec': {
        'group': GROUP, 'scope': 'Cluster',
        'names': {'plural': PLURAL, 'singular': 'widget', 'kind': 'Widget'},
        'versions': [{'name': VERSION, 'served': True, 'storage': True, 'subresources': {'status': {}},
                      'schema': {'openAPIV3Schema': {'type': 'object', 'x-kubernetes-preserve-unknown-fields': True}}}],
    },
}

MERGE = 'application/merge-patch+json'


@pytest.fixture
async def api(kubeconfig: pathlib.Path) -> AsyncIterator[client.ApiClient]:
    api_client = await config.new_client_from_config(config_file=str(kubeconfig))
    async with api_client:
        yield api_client


@pytest.fixture
async def widgets(api: client.ApiClient) -> client.CustomObjectsApi:
    """The Widget CRD registered: its resource is served from now on."""
    await client.ApiextensionsV1Api(api).create_custom_resource_definition(WIDGET_CRD)
    return client.CustomObjectsApi(api)


async def bind(api: client.ApiClient, name: str, node: str, namespace: str = 'default') -> client.V1Status:
    """POST pods/binding (the generated create_namespaced_pod_binding chokes on the Status it gets back)."""
    return await api.call_api(
        f'/api/v1/namespaces/{namespace}/pods/{name}/binding', 'POST',
        body={'apiVersion': 'v1', 'kind': 'Binding', 'metadata': {'name': name},
              'target': {'kind': 'Node', 'name': node}},
        header_params={'Content-Type': 'application/json', 'Accept': 'application/json'},
        response_types_map={201: 'V1Status'}, auth_settings=['BearerToken'], _return_http_data_only=True)


async def test_create_get_list_patch_delete(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    created, status, _ = await core.create_namespaced_pod_with_http_info('default', make_pod('p1'))
    assert status == 201
    assert created.metadata.uid and created.metadata.uid != 'uid-1'  # the server's, not the client's
    assert created.metadata.creation_timestamp is not None
    assert created.spec.scheduler_name == 'default-scheduler'
    assert created.status.phase == 'Pending'

    fetched = await core.read_namespaced_pod('p1', 'default')
    assert fetched.metadata.resource_version == created.metadata.resource_version
    listed = await core.list_namespaced_pod('default')
    assert [p.metadata.name for p in listed.items] == ['p1']
    assert int(listed.metadata.resource_version) >= int(created.metadata.resource_version)

    patched = await core.patch_namespaced_pod('p1', 'default', {'metadata': {'labels': {'app': 'x'}}},
                                              _content_type=MERGE)
    assert int(patched.metadata.resource_version) > int(created.metadata.resource_version)
    assert patched.metadata.uid == created.metadata.uid
    assert patched.metadata.creation_timestamp == created.metadata.creation_timestamp
    same = await core.patch_namespaced_pod('p1', 'default', {'metadata': {'labels': {'app': 'x'}}},
                                           _content_type=MERGE)
    assert same.metadata.resource_version == patched.metadata.resource_version  # no-op: no new version

    await core.delete_namespaced_pod('p1', 'default')
    with pytest.raises(ApiException) as err:
        await core.read_namespaced_pod('p1', 'default')
    assert err.value.status == 404
    with pytest.raises(ApiException) as err:
        await core.create_namespaced_pod('default', make_pod('dup'))
        await core.create_namespaced_pod('default', make_pod('dup'))
    assert (err.value.status, json.loads(err.value.body)['reason']) == (409, 'AlreadyExists')


async def test_a_pod_created_with_scheduling_gates_gets_the_scheduling_gated_condition(api: client.ApiClient) -> None:
    """As the API server's applySchedulingGatedCondition: PodScheduled=False, reason SchedulingGated."""
    core = client.CoreV1Api(api)
    gated = await core.create_namespaced_pod('default', make_pod('held', scheduling_gates=['example.com/quota']))
    [condition] = gated.status.conditions
    assert (condition.type, condition.status, condition.reason, condition.message) == (
        'PodScheduled', 'False', 'SchedulingGated', 'Scheduling is blocked due to non-empty scheduling gates')
    plain = await core.create_namespaced_pod('default', make_pod('free'))
    assert plain.status.conditions is None


async def test_generation_bumps_on_spec_changes_only(widgets: client.CustomObjectsApi) -> None:
    body = {'apiVersion': f'{GROUP}/{VERSION}', 'kind': 'Widget', 'metadata': {'name': 'w'}, 'spec': {'size': 1}}
    created = await widgets.create_cluster_custom_object(GROUP, VERSION, PLURAL, body)
    assert created['metadata']['generation'] == 1
    relabelled = await widgets.patch_cluster_custom_object(GROUP, VERSION, PLURAL, 'w',
                                                           {'metadata': {'labels': {'a': 'b'}}}, _content_type=MERGE)
    resized = await widgets.patch_cluster_custom_object(GROUP, VERSION, PLURAL, 'w', {'spec': {'size': 2}},
                                                        _content_type=MERGE)
    reported = await widgets.patch_cluster_custom_object_status(GROUP, VERSION, PLURAL, 'w', {'status': {'ok': True}},
                                                                _content_type=MERGE)
    assert [relabelled['metadata']['generation'], resized['metadata']['generation'],
            reported['metadata']['generation']] == [1, 2, 2]
    assert reported['status'] == {'ok': True}


@pytest.mark.parametrize('endpoint', ['pods/binding', 'bindings'])
async def test_binding_sets_node_once(api: client.ApiClient, http: aiohttp.ClientSession, endpoint: str) -> None:
    await client.CoreV1Api(api).create_namespaced_pod('default', make_pod('p'))
    path = f'/api/v1/namespaces/default/{"pods/p/binding" if endpoint == "pods/binding" else "bindings"}'
    body = {'apiVersion': 'v1', 'kind': 'Binding', 'metadata': {'name': 'p'}, 'target': {'kind': 'Node', 'name': 'n1'}}

    first = await http.post(path, json=body)
    second = await http.post(path, json={**body, 'target': {'kind': 'Node', 'name': 'n2'}})

    assert (first.status, (await first.json())['status']) == (201, 'Success')
    assert second.status == 409
    assert (await second.json())['message'] == (
        'Operation cannot be fulfilled on pods/binding "p": pod p is already assigned to node "n1"')
    pod = await client.CoreV1Api(api).read_namespaced_pod('p', 'default')
    assert pod.spec.node_name == 'n1'
    assert [(c.type, c.status) for c in pod.status.conditions] == [('PodScheduled', 'True')]


async def test_binding_through_kubernetes_asyncio(api: client.ApiClient) -> None:
    await client.CoreV1Api(api).create_namespaced_pod('default', make_pod('p'))
    assert (await bind(api, 'p', 'n1')).code == 201
    with pytest.raises(ApiException) as conflict:
        await bind(api, 'p', 'n2')
    with pytest.raises(ApiException) as missing:
        await bind(api, 'ghost', 'n1')
    assert (conflict.value.status, missing.value.status) == (409, 404)


async def test_watch_resumes_from_resource_version(api: client.ApiClient, emulator: FastKubernetesEmulator) -> None:
    core = client.CoreV1Api(api)
    await core.create_namespaced_pod('default', make_pod('old'))
    since = (await core.list_namespaced_pod('default')).metadata.resource_version
    await core.create_namespaced_pod('default', make_pod('new'))
    await bind(api, 'old', 'n1')

    seen = []
    async with watch.Watch().stream(core.list_namespaced_pod, 'default', resource_version=since) as stream:
        async for event in stream:
            seen.append((event['type'], event['object'].metadata.name))
            if len(seen) == 2:
                break
    assert seen == [('ADDED', 'new'), ('MODIFIED', 'old')]


@pytest.mark.emulator(history_size=2)
async def test_watch_from_a_compacted_version_is_gone(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    first = await core.create_namespaced_pod('default', make_pod('p0'))
    for i in range(1, 4):
        await core.create_namespaced_pod('default', make_pod(f'p{i}'))
    with pytest.raises(ApiException) as err:
        async with watch.Watch().stream(core.list_namespaced_pod, 'default',
                                        resource_version=first.metadata.resource_version) as stream:
            async for _ in stream:
                pass
    assert err.value.status == 410


async def _read_event(stream: aiohttp.ClientResponse) -> dict[str, Any]:
    return json.loads(await stream.content.readline())


async def test_watch_snapshot_then_events_then_bookmark_then_drop(
        http: aiohttp.ClientSession, emulator: FastKubernetesEmulator) -> None:
    await http.post('/api/v1/nodes', json=make_node('n0'))
    async with http.get('/api/v1/nodes', params={'watch': 'true', 'allowWatchBookmarks': 'true'}) as stream:
        snapshot = await _read_event(stream)  # the watch is subscribed by now
        await http.post('/api/v1/nodes', json=make_node('n1'))
        added = await _read_event(stream)
        emulator.send_bookmarks()
        bookmark = await _read_event(stream)
        emulator.drop_watches()
        rest = await stream.content.read()
    assert (snapshot['type'], snapshot['object']['metadata']['name']) == ('ADDED', 'n0')
    assert (added['type'], added['object']['metadata']['name']) == ('ADDED', 'n1')
    assert bookmark['type'] == 'BOOKMARK'
    assert bookmark['object']['metadata']['resourceVersion'] == added['object']['metadata']['resourceVersion']
    assert rest == b''


async def test_watch_with_field_selector_sees_pods_leave_it(api: client.ApiClient, http: aiohttp.ClientSession) -> None:
    await client.CoreV1Api(api).create_namespaced_pod('default', make_pod('p'))
    params = {'watch': 'true', 'fieldSelector': 'spec.nodeName=,status.phase!=Succeeded'}
    async with http.get('/api/v1/pods', params=params) as stream:
        initial = await _read_event(stream)
        await bind(api, 'p', 'n1')
        left = await _read_event(stream)
    assert [initial['type'], left['type']] == ['ADDED', 'DELETED']
    assert left['object']['spec']['nodeName'] == 'n1'


async def test_paged_list_pages_come_from_the_first_pages_snapshot(api: client.ApiClient,
                                                                   http: aiohttp.ClientSession) -> None:
    """As the API server pins a paged LIST's resourceVersion: a pod created between pages is
    not in the listing; after the last page the snapshot is gone and a new LIST sees it."""
    core = client.CoreV1Api(api)
    for name in ('a', 'b', 'c', 'd', 'e'):
        await core.create_namespaced_pod('default', make_pod(name))
    names: list[str] = []
    token = ''
    for _ in range(5):  # three pages of two; more means the continue token never ends
        params = {'limit': '2', **({'continue': token} if token else {})}
        async with http.get('/api/v1/namespaces/default/pods', params=params) as response:
            page = await response.json()
        names += [p['metadata']['name'] for p in page['items']]
        if not names[2:]:
            await core.create_namespaced_pod('default', make_pod('aa'))  # sorts among the first
        token = page['metadata'].get('continue', '')
        if not token:
            break
    else:
        pytest.fail(f'still paging after 5 pages: {names}')
    assert names == ['a', 'b', 'c', 'd', 'e']
    listed = await core.list_namespaced_pod('default', limit=10)
    assert [p.metadata.name for p in listed.items] == ['a', 'aa', 'b', 'c', 'd', 'e']


@pytest.mark.parametrize(('field_selector', 'expected'), [
    pytest.param('spec.schedulerName=kopfsched', ['a', 'b'], id='scheduler-name'),
    pytest.param('spec.schedulerName==kopfsched,spec.nodeName=', ['a'], id='pending-of-ours'),
    pytest.param('spec.nodeName!=', ['b', 'c'], id='bound'),
    pytest.param('status.phase!=Succeeded,status.phase!=Failed', ['a', 'b'], id='not-finished'),
    pytest.param('metadata.name=c', ['c'], id='name'),
    pytest.param('metadata.namespace=other', [], id='namespace'),
])
async def test_field_selectors_on_pods(api: client.ApiClient, field_selector: str, expected: list[str]) -> None:
    core = client.CoreV1Api(api)
    await core.create_namespaced_pod('default', make_pod('a', scheduler_name='kopfsched'))
    await core.create_namespaced_pod('default', make_pod('b', scheduler_name='kopfsched', node_name='n1'))
    done = make_pod('c', node_name='n2')
    done['status'] = {'phase': 'Succeeded'}
    await core.create_namespaced_pod('default', done)
    listed = await core.list_pod_for_all_namespaces(field_selector=field_selector)
    assert sorted(p.metadata.name for p in listed.items) == expected


@pytest.mark.parametrize(('selector', 'expected'), [
    pytest.param('tier=web', ['a'], id='equals'),
    pytest.param('tier!=web', ['b', 'c'], id='not-equals'),
    pytest.param('tier in (web,db)', ['a', 'b'], id='in'),
    pytest.param('tier,!canary', ['a', 'b'], id='exists-and-not'),
])
async def test_label_selectors(api: client.ApiClient, selector: str, expected: list[str]) -> None:
    core = client.CoreV1Api(api)
    for name, labels in [('a', {'tier': 'web'}), ('b', {'tier': 'db'}), ('c', {'canary': 'yes'})]:
        await core.create_namespaced_pod('default', make_pod(name, labels=labels))
    listed = await core.list_namespaced_pod('default', label_selector=selector)
    assert sorted(p.metadata.name for p in listed.items) == expected


async def test_unsupported_field_label_is_rejected(api: client.ApiClient) -> None:
    with pytest.raises(ApiException) as err:
        await client.CoreV1Api(api).list_pod_for_all_namespaces(field_selector='spec.nodename=x')
    assert err.value.status == 400


async def test_status_subresource_isolation_on_pods(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    await core.create_namespaced_pod('default', make_pod('p'))
    main = await core.patch_namespaced_pod('p', 'default', {'spec': {'priority': 5}, 'status': {'phase': 'Running'}},
                                           _content_type=MERGE)
    status = await core.patch_namespaced_pod_status('p', 'default', {'spec': {'priority': 9},
                                                                     'status': {'nominatedNodeName': 'n1'}},
                                                    _content_type=MERGE)
    assert (main.spec.priority, main.status.phase) == (5, 'Pending')
    assert (status.spec.priority, status.status.nominated_node_name) == (5, 'n1')


async def test_status_subresource_isolation_on_custom_resources(widgets: client.CustomObjectsApi) -> None:
    body = {'apiVersion': f'{GROUP}/{VERSION}', 'kind': 'Widget', 'metadata': {'name': 'w'}, 'spec': {'size': 1}}
    await widgets.create_cluster_custom_object(GROUP, VERSION, PLURAL, body)
    await widgets.patch_cluster_custom_object_status(GROUP, VERSION, PLURAL, 'w', {'status': {'ready': True}},
                                                     _content_type=MERGE)
    main = await widgets.patch_cluster_custom_object(GROUP, VERSION, PLURAL, 'w', {'status': {'ready': False}},
                                                     _content_type=MERGE)
    current = await widgets.get_cluster_custom_object(GROUP, VERSION, PLURAL, 'w')
    replaced = await widgets.replace_cluster_custom_object_status(
        GROUP, VERSION, PLURAL, 'w', {**current, 'spec': {'size': 7}, 'status': {'ready': 'yes'}})
    assert main['status'] == {'ready': True}
    assert (replaced['spec'], replaced['status']) == ({'size': 1}, {'ready': 'yes'})


async def test_strategic_merge_merges_conditions_by_type(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    await core.create_namespaced_pod('default', make_pod('p'))
    # kubernetes_asyncio sends a dict as a strategic merge patch to built-in resources.
    await core.patch_namespaced_pod_status('p', 'default', {'status': {'conditions': [
        {'type': 'Ready', 'status': 'False'}, {'type': 'PodScheduled', 'status': 'False', 'reason': 'Unschedulable'}]}})
    pod = await core.patch_namespaced_pod_status('p', 'default', {'status': {'conditions': [
        {'type': 'PodScheduled', 'status': 'False', 'reason': 'SchedulerError'}]}})
    assert [(c.type, c.reason) for c in pod.status.conditions] == [('Ready', None), ('PodScheduled', 'SchedulerError')]


async def test_json_patch_ops(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    await core.create_namespaced_pod('default', make_pod('p', labels={'a': '1', 'b': '2'}))
    pod = await core.patch_namespaced_pod('p', 'default', [
        {'op': 'test', 'path': '/metadata/labels/a', 'value': '1'},
        {'op': 'replace', 'path': '/metadata/labels/a', 'value': '10'},
        {'op': 'remove', 'path': '/metadata/labels/b'},
        {'op': 'add', 'path': '/metadata/labels/c~1d', 'value': '3'},
    ])
    assert pod.metadata.labels == {'a': '10', 'c/d': '3'}
    with pytest.raises(ApiException) as err:
        await core.patch_namespaced_pod('p', 'default', [{'op': 'test', 'path': '/metadata/labels/a', 'value': '1'}])
    assert err.value.status == 422


@pytest.mark.parametrize(('path', 'content_type', 'body', 'expected'), [
    pytest.param('/api/v1/namespaces/default/pods/p', 'application/json-patch+json', {'spec': {}}, 400,
                 id='json-patch-with-an-object'),
    pytest.param('/api/v1/namespaces/default/pods/p', MERGE, [{'op': 'remove', 'path': '/spec'}], 400,
                 id='merge-patch-with-a-list'),
    pytest.param('/api/v1/namespaces/default/pods/p', 'application/json', {'spec': {}}, 415,
                 id='plain-json-patch'),
    pytest.param('/api/v1/namespaces/default/pods/p', 'application/apply-patch+yaml', {'spec': {}}, 415,
                 id='server-side-apply'),
    pytest.param(f'/apis/{GROUP}/{VERSION}/{PLURAL}/w', 'application/strategic-merge-patch+json', {'spec': {}}, 415,
                 id='strategic-merge-on-a-custom-resource'),
])
async def test_patch_body_must_match_its_content_type(
        http: aiohttp.ClientSession, widgets: client.CustomObjectsApi,
        path: str, content_type: str, body: Any, expected: int) -> None:
    await http.post('/api/v1/namespaces/default/pods', json=make_pod('p'))
    await http.post(f'/apis/{GROUP}/{VERSION}/{PLURAL}', json={'metadata': {'name': 'w'}})
    response = await http.patch(path, data=json.dumps(body), headers={'Content-Type': content_type})
    assert response.status == expected


async def test_custom_objects_api_dict_patch_without_content_type_is_rejected(widgets: client.CustomObjectsApi) -> None:
    await widgets.create_cluster_custom_object(GROUP, VERSION, PLURAL, {'metadata': {'name': 'w'}})
    with pytest.raises(ApiException) as err:  # the client sends a dict as a JSON patch: a client bug to catch
        await widgets.patch_cluster_custom_object(GROUP, VERSION, PLURAL, 'w', {'spec': {'size': 1}})
    assert err.value.status == 400


async def test_put_with_a_stale_resource_version_conflicts(api: client.ApiClient) -> None:
    leases = client.CoordinationV1Api(api)
    lease = await leases.create_namespaced_lease('default', {'metadata': {'name': 'l'},
                                                             'spec': {'holderIdentity': 'a'}})
    lease.spec.holder_identity = 'b'
    renewed = await leases.replace_namespaced_lease('l', 'default', lease)
    lease.spec.holder_identity = 'c'
    with pytest.raises(ApiException) as err:
        await leases.replace_namespaced_lease('l', 'default', lease)  # still carries the first resourceVersion
    assert renewed.spec.holder_identity == 'b'
    assert err.value.status == 409


async def test_lease_lock_of_kubernetes_asyncio(api: client.ApiClient) -> None:
    first, second = LeaseLock('sched', 'default', 'a', api), LeaseLock('sched', 'default', 'b', api)
    acquired = LeaderElectionRecord('a', '15', '2026-01-01 00:00:00.000000', '2026-01-01 00:00:00.000000')
    renewed = LeaderElectionRecord('a', '15', '2026-01-01 00:00:00.000000', '2026-01-01 00:00:10.000000')
    taken = LeaderElectionRecord('b', '15', '2026-01-01 00:00:20.000000', '2026-01-01 00:00:20.000000')
    assert await first.create('sched', 'default', acquired)
    assert (await first.get('sched', 'default'))[0]
    assert (await second.get('sched', 'default'))[0]
    assert await first.update('sched', 'default', renewed)
    assert not await second.update('sched', 'default', taken)  # its copy is stale: 409
    assert (await second.get('sched', 'default'))[1].holder_identity == 'a'


async def test_deletion_waits_for_finalizers(widgets: client.CustomObjectsApi) -> None:
    await widgets.create_cluster_custom_object(GROUP, VERSION, PLURAL,
                                               {'metadata': {'name': 'w', 'finalizers': ['kopf.zalando.org/x']}})
    await widgets.delete_cluster_custom_object(GROUP, VERSION, PLURAL, 'w')
    marked = await widgets.get_cluster_custom_object(GROUP, VERSION, PLURAL, 'w')
    await widgets.patch_cluster_custom_object(GROUP, VERSION, PLURAL, 'w', {'metadata': {'finalizers': None}},
                                              _content_type=MERGE)
    with pytest.raises(ApiException) as err:
        await widgets.get_cluster_custom_object(GROUP, VERSION, PLURAL, 'w')
    assert marked['metadata']['deletionTimestamp']
    assert err.value.status == 404


async def test_events_of_both_apis_are_stored_and_patched(api: client.ApiClient) -> None:
    event = {'metadata': {'name': 'e1'}, 'reason': 'Scheduled', 'type': 'Normal', 'note': 'assigned',
             'eventTime': '2026-01-01T00:00:00.000000Z', 'reportingController': 'kopfsched',
             'reportingInstance': 'kopfsched-1', 'action': 'Binding',
             'regarding': {'kind': 'Pod', 'namespace': 'default', 'name': 'p'}}
    events = client.EventsV1Api(api)
    await events.create_namespaced_event('default', event)
    patched = await events.patch_namespaced_event('e1', 'default', {'series': {'count': 2,
                                                                               'lastObservedTime': event['eventTime']}})
    legacy = await client.CoreV1Api(api).create_namespaced_event('default', {
        'metadata': {'name': 'e2'}, 'reason': 'FailedScheduling', 'involvedObject': {'kind': 'Pod', 'name': 'p'}})
    assert patched.series.count == 2
    assert legacy.metadata.resource_version


async def test_failure_injection_and_the_mutation_log(api: client.ApiClient, emulator: FastKubernetesEmulator) -> None:
    emulator.fail_next('POST', r'/pods$', status=500, times=2)
    core = client.CoreV1Api(api)
    statuses = []
    for _ in range(3):
        try:
            await core.create_namespaced_pod('default', make_pod('p'))
            statuses.append(201)
        except ApiException as e:
            statuses.append(e.status)
    assert statuses == [500, 500, 201]
    logged = emulator.mutations('POST', r'/pods$')
    assert [(m.status, m.body['metadata']['name']) for m in logged] == [(500, 'p'), (500, 'p'), (201, 'p')]


@pytest.mark.emulator(mutation_log_size=2)
async def test_the_mutation_log_is_bounded(http: aiohttp.ClientSession, emulator: FastKubernetesEmulator) -> None:
    for i in range(4):
        await http.post('/api/v1/nodes', json=make_node(f'n{i}'))
    assert [m.body['metadata']['name'] for m in emulator.mutations()] == ['n2', 'n3']
    assert emulator.request_count == 4
    assert len(emulator._requests) == 0  # kmock's per-request history is not kept


async def test_kmock_reactions_still_take_precedence(http: aiohttp.ClientSession,
                                                     emulator: FastKubernetesEmulator) -> None:
    emulator['get /api/v1/nodes'] << 418 << {'kind': 'Teapot'}
    response = await http.get('/api/v1/nodes')
    assert (response.status, await response.json()) == (418, {'kind': 'Teapot'})


async def test_custom_resource_appears_in_discovery(http: aiohttp.ClientSession,
                                                    widgets: client.CustomObjectsApi) -> None:
    groups = await (await http.get('/apis')).json()
    resources = await (await http.get(f'/apis/{GROUP}/{VERSION}')).json()
    assert {'groupVersion': f'{GROUP}/{VERSION}', 'version': VERSION} in [
        g['preferredVersion'] for g in groups['groups'] if g['name'] == GROUP]
    assert [(r['name'], r['namespaced']) for r in resources['resources']] == [
        (PLURAL, False), (f'{PLURAL}/status', False)]


def test_kubectl_applies_a_crd_and_a_custom_resource(kubeconfig: pathlib.Path, tmp_path: pathlib.Path,
                                                     emulator: FastKubernetesEmulator) -> None:
    crd_file = pathlib.Path(__file__).parents[2] / 'crds' / 'schedulerprofile.yaml'
    crd = crd_file if crd_file.exists() else tmp_path / 'crd.json'
    if crd is not crd_file:
        crd.write_text(json.dumps(WIDGET_CRD))
    group, plural, kind, version = _names_of(crd)
    resource = tmp_path / 'resource.json'

    applied = [kubectl(kubeconfig, 'apply', '--validate=false', '-f', str(crd)).returncode]
    for size in (1, 2, 2):  # create, change (a merge patch), unchanged
        resource.write_text(json.dumps({'apiVersion': f'{group}/{version}', 'kind': kind,
                                        'metadata': {'name': 'x'}, 'spec': {'percentageOfNodesToScore': size}}))
        result = kubectl(kubeconfig, 'apply', '--validate=false', '-f', str(resource))
        applied.append(result.stdout.strip() or result.stderr)
    fetched = kubectl(kubeconfig, 'get', f'{plural}.{group}', 'x', '-o', 'json')

    assert applied == [0, f'{kind.lower()}.{group}/x created', f'{kind.lower()}.{group}/x configured',
                       f'{kind.lower()}.{group}/x unchanged']
    assert json.loads(fetched.stdout)['spec'] == {'percentageOfNodesToScore': 2}
    assert [m.content_type for m in emulator.mutations('PATCH')] == [MERGE]


def _names_of(crd_file: pathlib.Path) -> tuple[str, str, str, str]:
    import yaml
    crd = yaml.safe_load(crd_file.read_text())
    spec = crd['spec']
    return spec['group'], spec['names']['plural'], spec['names']['kind'], spec['versions'][0]['name']


async def test_emulator_in_a_subprocess(remote_emulator: RemoteEmulator, remote_kubeconfig: pathlib.Path) -> None:
    remote_emulator.fail_next('POST', r'/nodes$', status=503)
    async with await config.new_client_from_config(config_file=str(remote_kubeconfig)) as api:
        core = client.CoreV1Api(api)
        with pytest.raises(ApiException) as err:
            await core.create_node(make_node('n'))
        created = await core.create_node(make_node('n'))
        async with (aiohttp.ClientSession(remote_emulator.url) as session,
                    session.get('/api/v1/nodes', params={'watch': 'true'}) as stream):
            await _read_event(stream)
            remote_emulator.drop_watches()
            rest = await stream.content.read()
    assert (err.value.status, created.metadata.name, rest) == (503, 'n', b'')
    assert [m.status for m in remote_emulator.mutations()] == [503, 201]


async def test_watch_error_ends_open_watches_and_fails_the_next_ones_until_healed(
        http: aiohttp.ClientSession, emulator: FastKubernetesEmulator) -> None:
    await http.post('/api/v1/nodes', json=make_node('n0'))
    async with http.get('/api/v1/nodes', params={'watch': 'true'}) as stream:
        await _read_event(stream)  # subscribed
        emulator.watch_error('nodes', code=500, message='etcd cluster is unavailable', times=None)
        error = await _read_event(stream)
        rest = await stream.content.read()
    async with http.get('/api/v1/nodes', params={'watch': 'true', 'resourceVersion': '1'}) as again:
        status, next_error = again.status, await _read_event(again)
    emulator.heal_watches()
    async with http.get('/api/v1/nodes', params={'watch': 'true'}) as healed:
        snapshot = await _read_event(healed)
    assert error == {'type': 'ERROR', 'object': {
        'kind': 'Status', 'apiVersion': 'v1', 'metadata': {}, 'status': 'Failure', 'code': 500,
        'message': 'etcd cluster is unavailable', 'reason': 'InternalError'}}
    assert rest == b''
    assert (status, next_error['type'], next_error['object']['code']) == (200, 'ERROR', 500)
    assert (snapshot['type'], snapshot['object']['metadata']['name']) == ('ADDED', 'n0')


async def test_watch_ends_at_timeout_seconds(http: aiohttp.ClientSession) -> None:
    await http.post('/api/v1/nodes', json=make_node('n0'))
    async with http.get('/api/v1/nodes', params={'watch': 'true', 'timeoutSeconds': '1'}) as stream:
        body = await stream.content.read()  # returns only once the server closes the stream
    assert [json.loads(line)['type'] for line in body.splitlines()] == ['ADDED']


@pytest.mark.emulator(min_request_timeout=0.2)
async def test_watch_without_timeout_seconds_ends_after_the_minimum_request_timeout(
        http: aiohttp.ClientSession) -> None:
    async with http.get('/api/v1/nodes', params={'watch': 'true'}) as stream:
        body = await stream.content.read()
    assert body == b''


async def test_remote_watch_error(remote_emulator: RemoteEmulator) -> None:
    async with aiohttp.ClientSession(remote_emulator.url) as session:
        async with session.get('/api/v1/pods', params={'watch': 'true'}) as stream:
            remote_emulator.watch_error('pods', code=503, times=1)
            first = await _read_event(stream)
        async with session.get('/api/v1/pods', params={'watch': 'true'}) as again:
            second = await _read_event(again)
        remote_emulator.heal_watches()
    assert (first['object']['code'], first['object']['reason']) == (503, 'ServiceUnavailable')
    assert second['type'] == 'ERROR'


async def test_throttle_answers_429_with_retry_after_as_priority_and_fairness(
        api: client.ApiClient, emulator: FastKubernetesEmulator) -> None:
    core = client.CoreV1Api(api)
    emulator.throttle(30, method='POST', path_regex=r'/pods$', retry_after=3)
    with pytest.raises(ApiException) as err:
        await core.create_namespaced_pod('default', make_pod('p'))
    listed = await core.list_namespaced_pod('default')  # other requests pass
    assert (err.value.status, err.value.headers['Retry-After']) == (429, '3')
    assert err.value.body == 'Too many requests, please try again later.\n'
    assert listed.items == []


async def test_fail_next_with_retry_after(http: aiohttp.ClientSession, emulator: FastKubernetesEmulator) -> None:
    emulator.fail_next('GET', r'/api/v1/nodes$', status=503, retry_after=2)
    async with http.get('/api/v1/nodes') as failed:
        status, retry_after = failed.status, failed.headers.get('Retry-After')
    assert (status, retry_after) == (503, '2')


@pytest.mark.emulator(grace_period_scale=0)  # grace periods end only through end_grace_periods()
async def test_a_bound_pod_is_deleted_gracefully_and_an_unbound_one_at_once(
        api: client.ApiClient, http: aiohttp.ClientSession, emulator: FastKubernetesEmulator) -> None:
    core = client.CoreV1Api(api)
    await core.create_namespaced_pod('default', make_pod('bound', node_name='n1', terminationGracePeriodSeconds=45))
    await core.create_namespaced_pod('default', make_pod('pending'))
    since = (await core.list_namespaced_pod('default')).metadata.resource_version
    params = {'watch': 'true', 'resourceVersion': since}
    async with http.get('/api/v1/namespaces/default/pods', params=params) as stream:
        terminating = await core.delete_namespaced_pod('bound', 'default')
        await core.delete_namespaced_pod('pending', 'default')
        again = await core.delete_namespaced_pod('bound', 'default', grace_period_seconds=10)
        still_there = emulator.get_object('pods', 'default', 'bound')
        emulator.end_grace_periods()
        events = [await asyncio.wait_for(_read_event(stream), 5) for _ in range(4)]
    assert terminating.metadata.deletion_grace_period_seconds == 45
    assert terminating.metadata.deletion_timestamp is not None
    assert again.metadata.deletion_grace_period_seconds == 10  # a second delete may shorten it
    assert still_there is not None
    assert [(e['type'], e['object']['metadata']['name']) for e in events] == [
        ('MODIFIED', 'bound'), ('DELETED', 'pending'), ('MODIFIED', 'bound'), ('DELETED', 'bound')]
    assert emulator.get_object('pods', 'default', 'bound') is None


@pytest.mark.emulator(grace_period_scale=0.1)
async def test_a_grace_period_ends_by_itself_and_zero_deletes_at_once(
        api: client.ApiClient, emulator: FastKubernetesEmulator) -> None:
    core = client.CoreV1Api(api)
    # 30 s: 3 s here, long enough that the reads below, after two more requests, still find it.
    await core.create_namespaced_pod('default', make_pod('slow', node_name='n1'))
    await core.create_namespaced_pod('default', make_pod('forced', node_name='n1'))
    await core.delete_namespaced_pod('slow', 'default')
    await core.delete_namespaced_pod('forced', 'default', grace_period_seconds=0)
    forced_gone = emulator.get_object('pods', 'default', 'forced') is None
    slow_terminating = emulator.get_object('pods', 'default', 'slow') is not None
    await until(lambda: emulator.get_object('pods', 'default', 'slow') is None, what='the grace period over',
                interval=0.05)
    assert (forced_gone, slow_terminating) == (True, True)


@pytest.mark.emulator(graceful_deletion=False)
async def test_graceful_deletion_switched_off_deletes_at_once(
        api: client.ApiClient, emulator: FastKubernetesEmulator) -> None:
    core = client.CoreV1Api(api)
    await core.create_namespaced_pod('default', make_pod('bound', node_name='n1'))
    await core.delete_namespaced_pod('bound', 'default')
    assert emulator.get_object('pods', 'default', 'bound') is None


async def test_binding_a_gated_pod_conflicts_and_binding_clears_the_nomination(
        api: client.ApiClient, http: aiohttp.ClientSession) -> None:
    core = client.CoreV1Api(api)
    await core.create_namespaced_pod('default', make_pod('gated', scheduling_gates=['example.com/wait']))
    await core.create_namespaced_pod('default', make_pod('nominated'))
    await core.patch_namespaced_pod_status('nominated', 'default', {'status': {'nominatedNodeName': 'n1'}})
    body = {'apiVersion': 'v1', 'kind': 'Binding', 'metadata': {'name': 'gated'},
            'target': {'kind': 'Node', 'name': 'n1'}}
    async with http.post('/api/v1/namespaces/default/pods/gated/binding', json=body) as refused:
        status, message = refused.status, (await refused.json())['message']
    await bind(api, 'nominated', 'n1')
    bound = await core.read_namespaced_pod('nominated', 'default')
    assert (status, message) == (409, 'Operation cannot be fulfilled on pods/binding "gated": pod gated has '
                                      'non-empty .spec.schedulingGates')
    assert (bound.spec.node_name, bound.status.nominated_node_name) == ('n1', None)


async def test_pages_are_served_at_the_first_pages_revision_until_compacted(
        http: aiohttp.ClientSession, emulator: FastKubernetesEmulator) -> None:
    for i in range(3):
        await http.post('/api/v1/nodes', json=make_node(f'n{i}'))
    async with http.get('/api/v1/nodes', params={'limit': '2'}) as first_page:
        first = await first_page.json()
    await http.post('/api/v1/nodes', json=make_node('n3'))  # after the first page: not in this list
    token = first['metadata']['continue']
    async with http.get('/api/v1/nodes', params={'limit': '2', 'continue': token}) as second_page:
        second = await second_page.json()
    emulator.compact()
    async with http.get('/api/v1/nodes', params={'limit': '2', 'continue': token}) as expired:
        status, gone = expired.status, await expired.json()
    assert [n['metadata']['name'] for n in first['items'] + second['items']] == ['n0', 'n1', 'n2']
    assert second['metadata']['resourceVersion'] == first['metadata']['resourceVersion']
    assert 'continue' not in second['metadata']
    assert (first['kind'], first['apiVersion']) == ('NodeList', 'v1')
    assert not any('kind' in n or 'apiVersion' in n for n in first['items'])  # as a real server's list items
    assert (status, gone['reason']) == (410, 'Expired')


@pytest.mark.emulator(continue_ttl=0.0)
async def test_a_continue_token_older_than_the_compaction_interval_is_expired(http: aiohttp.ClientSession) -> None:
    for i in range(3):
        await http.post('/api/v1/nodes', json=make_node(f'n{i}'))
    async with http.get('/api/v1/nodes', params={'limit': '2'}) as first_page:
        token = (await first_page.json())['metadata']['continue']
    await asyncio.sleep(0.01)
    async with http.get('/api/v1/nodes', params={'limit': '2', 'continue': token}) as expired:
        assert expired.status == 410


def _event(**overrides: Any) -> dict[str, Any]:
    event = {'apiVersion': 'events.k8s.io/v1', 'kind': 'Event', 'metadata': {'name': 'e1', 'namespace': 'default'},
             'eventTime': '2026-01-01T00:00:00.123456Z', 'reportingController': 'kopfsched',
             'reportingInstance': 'replica-0', 'action': 'Scheduling', 'reason': 'FailedScheduling',
             'type': 'Warning', 'note': 'no nodes', 'regarding': {'kind': 'Pod', 'name': 'p', 'namespace': 'default'}}
    return {**event, **overrides}


@pytest.mark.parametrize(('overrides', 'status', 'message_part'), [
    pytest.param({'eventTime': '2026-01-01T00:00:00Z'}, 400, 'cannot be handled as a Event', id='no-microseconds'),
    pytest.param({'reportingController': 'x' * 64}, 422, 'reportingController: Invalid value', id='controller-64'),
    pytest.param({'reportingController': 'example.com/kopf sched'}, 422, 'name part must consist', id='controller'),
    pytest.param({'action': 'a' * 129}, 422, 'action: Invalid value: "": can have at most 128 characters',
                 id='action-129'),
    pytest.param({'reason': ''}, 422, 'reason: Required value', id='no-reason'),
    pytest.param({'note': 'n' * 1025}, 422, 'note: Invalid value: "": can have at most 1024 characters',
                 id='note-1025'),
    pytest.param({'series': {'count': 1, 'lastObservedTime': '2026-01-01T00:00:01.000000Z'}}, 422,
                 'series.count: Invalid value: 1: should be at least 2', id='series-count'),
    pytest.param({'series': {'count': 2}}, 422, 'series.lastObservedTime: Required value', id='series-time'),
])
async def test_events_are_validated_as_the_api_server_does(
        http: aiohttp.ClientSession, overrides: dict[str, Any], status: int, message_part: str) -> None:
    async with http.post('/apis/events.k8s.io/v1/namespaces/default/events', json=_event(**overrides)) as refused:
        answer = (refused.status, (await refused.json())['message'])
    async with http.post('/apis/events.k8s.io/v1/namespaces/default/events', json=_event()) as valid:
        accepted = valid.status
    assert answer[0] == status and message_part in answer[1], answer
    assert accepted == 201


async def test_custom_resources_are_pruned_to_their_schema(http: aiohttp.ClientSession) -> None:
    crd = json.loads(json.dumps(WIDGET_CRD).replace('widgets', 'gadgets').replace('Widget', 'Gadget')
                     .replace('"widget"', '"gadget"'))
    crd['spec']['versions'][0]['schema']['openAPIV3Schema'] = {'type': 'object', 'properties': {
        'spec': {'type': 'object', 'properties': {'size': {'type': 'integer'},
                                                   'extra': {'type': 'object',
                                                             'x-kubernetes-preserve-unknown-fields': True}}},
        'status': {'type': 'object', 'properties': {'items': {'type': 'array', 'items': {
            'type': 'object', 'properties': {'name': {'type': 'string'}}}}}}}}
    async with http.post('/apis/apiextensions.k8s.io/v1/customresourcedefinitions', json=crd) as created:
        assert created.status == 201
    path = f'/apis/{GROUP}/{VERSION}/gadgets'
    body = {'apiVersion': f'{GROUP}/{VERSION}', 'kind': 'Gadget', 'metadata': {'name': 'g'},
            'spec': {'size': 3, 'colour': 'red', 'extra': {'anything': {'goes': 1}}}}
    async with http.post(path, json=body) as created:
        stored = await created.json()
    async with http.patch(f'{path}/g/status', json={'status': {'items': [{'name': 'a', 'age': 3}], 'typo': 1}},
                          headers={'Content-Type': 'application/merge-patch+json'}) as patched:
        status = (await patched.json())['status']
    assert stored['spec'] == {'size': 3, 'extra': {'anything': {'goes': 1}}}
    assert status == {'items': [{'name': 'a'}]}


GIZMO_STATUS_SCHEMA: dict[str, Any] = {'type': 'object', 'properties': {
    'observedGeneration': {'type': 'integer', 'format': 'int64'},
    'queue': {'type': 'object', 'properties': {'active': {'type': 'integer', 'minimum': 0}}},
    'conditions': {'type': 'array', 'x-kubernetes-list-type': 'map', 'x-kubernetes-list-map-keys': ['type'],
                   'items': {'type': 'object', 'required': ['type', 'status'], 'properties': {
                       'type': {'type': 'string'},
                       'status': {'type': 'string', 'enum': ['True', 'False', 'Unknown']}}}}}}
BAD_GIZMO_STATUS: dict[str, Any] = {'observedGeneration': 'one', 'queue': {'active': -1},
                                    'conditions': [{'type': 'Ready', 'status': 'Maybe'}, {'status': 'True'}]}


async def _write_gizmo_status(http: aiohttp.ClientSession, status: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """Registers the Gizmo CRD, creates gizmo `g` and merge-patches its status: (HTTP status, answer)."""
    crd = json.loads(json.dumps(WIDGET_CRD).replace('widgets', 'gizmos').replace('Widget', 'Gizmo')
                     .replace('"widget"', '"gizmo"'))
    crd['spec']['versions'][0]['schema']['openAPIV3Schema'] = {'type': 'object', 'properties': {
        'spec': {'type': 'object', 'x-kubernetes-preserve-unknown-fields': True}, 'status': GIZMO_STATUS_SCHEMA}}
    path = f'/apis/{GROUP}/{VERSION}/gizmos'
    async with http.post('/apis/apiextensions.k8s.io/v1/customresourcedefinitions', json=crd) as created:
        assert created.status == 201
    async with http.post(path, json={'apiVersion': f'{GROUP}/{VERSION}', 'kind': 'Gizmo',
                                     'metadata': {'name': 'g'}, 'spec': {}}) as created:
        assert created.status == 201
    async with http.patch(f'{path}/g/status', json={'status': status}, headers={'Content-Type': MERGE}) as patched:
        return patched.status, await patched.json()


async def test_custom_resources_are_validated_against_their_schema(http: aiohttp.ClientSession) -> None:
    """A status that violates the CRD's schema is refused with 422 Invalid, one cause per field, as
    apiextensions' validation answers; a valid one is stored."""
    answer = await _write_gizmo_status(http, BAD_GIZMO_STATUS)
    good = {'observedGeneration': 1, 'queue': {'active': 0}, 'conditions': [{'type': 'Ready', 'status': 'True'}]}
    async with http.patch(f'/apis/{GROUP}/{VERSION}/gizmos/g/status', json={'status': good},
                          headers={'Content-Type': MERGE}) as accepted:
        stored = (accepted.status, (await accepted.json())['status'])
    causes = [
        {'reason': 'FieldValueNotSupported', 'field': 'status.conditions[0].status',
         'message': 'Unsupported value: "Maybe": supported values: "True", "False", "Unknown"'},
        {'reason': 'FieldValueRequired', 'field': 'status.conditions[1].type', 'message': 'Required value'},
        {'reason': 'FieldValueTypeInvalid', 'field': 'status.observedGeneration',
         'message': 'Invalid value: "string": status.observedGeneration in body must be of type integer: "string"'},
        {'reason': 'FieldValueInvalid', 'field': 'status.queue.active',
         'message': 'Invalid value: -1: status.queue.active in body should be greater than or equal to 0'},
    ]
    assert answer == (422, {
        'kind': 'Status', 'apiVersion': 'v1', 'metadata': {}, 'status': 'Failure', 'code': 422, 'reason': 'Invalid',
        'message': 'Gizmo.example.dev "g" is invalid: [' + ', '.join(f"{c['field']}: {c['message']}" for c in causes)
                   + ']',
        'details': {'name': 'g', 'group': GROUP, 'kind': 'Gizmo', 'causes': causes}})
    assert stored == (200, good)


async def test_custom_resource_validation_can_be_switched_off(
        emulator: FastKubernetesEmulator, http: aiohttp.ClientSession) -> None:
    emulator.validate_custom_resources = False
    code, answer = await _write_gizmo_status(http, BAD_GIZMO_STATUS)
    assert (code, answer['status']) == (200, BAD_GIZMO_STATUS)
