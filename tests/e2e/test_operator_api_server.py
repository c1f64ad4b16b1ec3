"""What a real kube-apiserver does that a plain emulator does not, and the operator surviving it:
API Priority and Fairness throttling, graceful deletion, expiring list continuations, binding
details. Each behaviour is switched on in the emulator for the test."""
from __future__ import annotations

import asyncio
import json
import pathlib
import re

import aiohttp
import pytest

from kopfsched.emulator.server import FastKubernetesEmulator
from tests.builders import make_node, make_pod, taint
from tests.e2e.operator_harness import (
    binding_statuses,
    events_about,
    eventually,
    node_of,
    post,
    running_operator,
)

PODS = '/api/v1/namespaces/default/pods'


# -- API Priority and Fairness ---------------------------------------------------------------


async def test_binds_throttled_with_retry_after_wait_as_asked_and_succeed(
        emulator: FastKubernetesEmulator, kubeconfig: pathlib.Path, http: aiohttp.ClientSession) -> None:
    """3.5 s of 429 + Retry-After: 1 on binds: one call retries each second until it binds, no error
    (a fixed ~3 s of quick retries would give up, fail the attempt and send eight binds)."""
    await post(http, '/api/v1/nodes', make_node('node-0'))
    async with running_operator(kubeconfig) as operator:
        emulator.throttle(3.5, method='POST', path_regex=r'/binding$', retry_after=1)
        await post(http, PODS, make_pod('throttled', scheduler_name='kopfsched'))
        await eventually(lambda: node_of(emulator, 'throttled'), timeout=15, what='bound after the throttling')
        stats = operator.stats.of('kopfsched')
    statuses = binding_statuses(emulator, 'throttled')
    assert statuses[-1] == 201 and set(statuses[:-1]) == {429} and 4 <= len(statuses) <= 5
    assert (stats.scheduled, stats.errors) == (1, 0)


# -- graceful deletion and preemption over HTTP ----------------------------------------------


def pod(emulator: FastKubernetesEmulator, name: str) -> dict:
    return emulator.get_object('pods', 'default', name) or {}


def condition(emulator: FastKubernetesEmulator, name: str, kind: str) -> dict | None:
    return next((c for c in (pod(emulator, name).get('status') or {}).get('conditions') or ()
                 if c['type'] == kind), None)


def deletes(emulator: FastKubernetesEmulator, name: str) -> list[int]:
    return [m.status for m in emulator.mutations('DELETE', rf'/pods/{name}$')]


@pytest.mark.emulator(grace_period_scale=0)  # victims terminate until end_grace_periods()
async def test_preemption_evicts_gracefully_nominates_waits_and_binds_once_the_victim_is_gone(
        emulator: FastKubernetesEmulator, kubeconfig: pathlib.Path, http: aiohttp.ClientSession) -> None:
    await post(http, '/api/v1/nodes', make_node('node-0', cpu='2'))
    await post(http, PODS, make_pod('victim', node_name='node-0', priority=1, requests={'cpu': '2'}))
    async with running_operator(kubeconfig) as operator:
        await post(http, PODS, make_pod('preemptor', scheduler_name='kopfsched', priority=100,
                                        requests={'cpu': '2'}))
        await eventually(lambda: pod(emulator, 'victim')['metadata'].get('deletionTimestamp'), what='the eviction')
        nominated = await eventually(lambda: (pod(emulator, 'preemptor').get('status') or {}).get('nominatedNodeName'),
                                     what='the nomination')
        await asyncio.sleep(1.0)  # the victim terminates: nothing may bind meanwhile
        waiting = (binding_statuses(emulator, 'preemptor'), node_of(emulator, 'preemptor'))
        disruption = condition(emulator, 'victim', 'DisruptionTarget')
        emulator.end_grace_periods()
        bound = await eventually(lambda: node_of(emulator, 'preemptor'), what='bound once the victim is gone')
        uid = pod(emulator, 'preemptor')['metadata']['uid']
        # The binding cleared status.nominatedNodeName (v1.35): the operator's nominator follows.
        await eventually(lambda: operator.scheduler.queue.nominator.nominated_node(uid) == '', what='nomination gone')
        stats = operator.stats.of('kopfsched')
    assert 'nominatedNodeName' not in pod(emulator, 'preemptor')['status']
    assert (nominated, waiting, bound) == ('node-0', ([], None), 'node-0')
    assert deletes(emulator, 'victim') == [200]
    assert binding_statuses(emulator, 'preemptor') == [201]
    assert (stats.preemptions, stats.errors) == (1, 0)
    assert disruption is not None
    assert (disruption['status'], disruption['reason']) == ('True', 'PreemptionByScheduler')


@pytest.mark.emulator(grace_period_scale=0)
async def test_a_second_preemptor_does_not_pick_the_victims_already_terminating(
        emulator: FastKubernetesEmulator, kubeconfig: pathlib.Path, http: aiohttp.ClientSession) -> None:
    for i in range(2):
        await post(http, '/api/v1/nodes', make_node(f'node-{i}', cpu='2'))
        await post(http, PODS, make_pod(f'victim-{i}', node_name=f'node-{i}', priority=1, requests={'cpu': '2'}))
    async with running_operator(kubeconfig) as operator:
        await post(http, PODS, make_pod('first', scheduler_name='kopfsched', priority=100, requests={'cpu': '2'}))
        first = await eventually(lambda: (pod(emulator, 'first').get('status') or {}).get('nominatedNodeName'),
                                 what='the first nomination')
        await post(http, PODS, make_pod('second', scheduler_name='kopfsched', priority=100, requests={'cpu': '2'}))
        second = await eventually(lambda: (pod(emulator, 'second').get('status') or {}).get('nominatedNodeName'),
                                  what='the second nomination')
        await asyncio.sleep(1.0)  # retries meanwhile must not evict anything more
        evicted = sorted(name for name in ('victim-0', 'victim-1')
                         if pod(emulator, name)['metadata'].get('deletionTimestamp'))
        emulator.end_grace_periods()
        bound = await eventually(lambda: (node_of(emulator, 'first'), node_of(emulator, 'second'))
                                 if node_of(emulator, 'first') and node_of(emulator, 'second') else None,
                                 what='both bound')
        stats = operator.stats.of('kopfsched')
    assert {first, second} == {'node-0', 'node-1'}
    assert bound == (first, second)
    assert evicted == ['victim-0', 'victim-1']
    assert [deletes(emulator, f'victim-{i}') for i in range(2)] == [[200], [200]]
    assert (stats.preemptions, stats.errors) == (2, 0)


# -- binding details ---------------------------------------------------------------------------


async def test_a_gated_pod_is_never_bound_and_binds_once_its_gates_are_removed(
        emulator: FastKubernetesEmulator, kubeconfig: pathlib.Path, http: aiohttp.ClientSession) -> None:
    """The API answers 409 to a binding of a pod with scheduling gates: the operator must not try."""
    await post(http, '/api/v1/nodes', make_node('node-0'))
    async with running_operator(kubeconfig) as operator:
        await post(http, PODS, make_pod('gated', scheduler_name='kopfsched', scheduling_gates=['example.com/wait']))
        await eventually(lambda: operator.scheduler.queue.pending_counts().get('gated') == 1, what='gated')
        # A pod created after it binds: the scheduler has had its chance at the gated one.
        await post(http, PODS, make_pod('later', scheduler_name='kopfsched'))
        await eventually(lambda: node_of(emulator, 'later'), what='the later pod bound')
        before = binding_statuses(emulator, 'gated')
        async with http.patch(f'{PODS}/gated', json=[{'op': 'remove', 'path': '/spec/schedulingGates'}],
                              headers={'Content-Type': 'application/json-patch+json'}) as patched:
            assert patched.status == 200
        await eventually(lambda: node_of(emulator, 'gated'), what='bound once ungated')
    assert before == []
    assert binding_statuses(emulator, 'gated') == [201]


# -- expiring list continuations ---------------------------------------------------------------


async def test_an_expired_continue_at_start_up_falls_back_to_a_full_list(
        emulator: FastKubernetesEmulator, kubeconfig: pathlib.Path, http: aiohttp.ClientSession) -> None:
    for i in range(5):
        await post(http, '/api/v1/nodes', make_node(f'node-{i}'))
    emulator.compact(on_next_continue=1)  # etcd compacts between the first page and the second
    async with running_operator(kubeconfig, list_page_size=2) as operator:
        nodes = sorted(operator.cache.node_names())
        await post(http, PODS, make_pod('last', scheduler_name='kopfsched',
                                        node_selector={'kubernetes.io/hostname': 'node-4'}))
        await eventually(lambda: node_of(emulator, 'last'), what='bound on the last page\'s node')
    assert nodes == [f'node-{i}' for i in range(5)]
    assert node_of(emulator, 'last') == 'node-4'


async def test_an_expired_continue_in_a_reconcile_falls_back_to_a_full_list(
        emulator: FastKubernetesEmulator, kubeconfig: pathlib.Path, http: aiohttp.ClientSession) -> None:
    for i in range(5):
        await post(http, '/api/v1/nodes', make_node(f'node-{i}'))
    async with running_operator(kubeconfig, list_page_size=2) as operator:
        # Gone without a DELETED event (as while a watch was away): only a reconcile notices.
        emulator.remove_unseen('nodes', None, 'node-3')
        emulator.compact(on_next_continue=1)
        removed = await operator.informer.reconcile()
        nodes = sorted(operator.cache.node_names())
    assert removed == 1
    assert nodes == ['node-0', 'node-1', 'node-2', 'node-4']


# -- real objects ------------------------------------------------------------------------------


async def test_the_cache_keeps_no_managed_fields_nor_last_applied_configuration(
        emulator: FastKubernetesEmulator, kubeconfig: pathlib.Path, http: aiohttp.ClientSession) -> None:
    """The API server's objects carry managedFields (often larger than the spec): none in the cache."""
    listed = make_node('listed')  # seen by the start-up LIST
    listed['metadata']['annotations'] = {'kubectl.kubernetes.io/last-applied-configuration': '{"big": "copy"}',
                                         'kept': 'yes'}
    await post(http, '/api/v1/nodes', listed)
    async with running_operator(kubeconfig) as operator:
        await post(http, '/api/v1/nodes', make_node('watched'))  # seen by kopf's watch
        created = await post(http, PODS, make_pod('bound', node_name='watched'))
        cached = await eventually(lambda: operator.cache.get_pod(created['metadata']['uid']), what='pod cached')
        # The node's watch event may come after the pod's: wait for both nodes, not only the pod.
        nodes = await eventually(lambda: (found := [operator.cache.get_node(name) for name in ('listed', 'watched')])
                                 and all(found) and found, what='both nodes cached')
    stored = emulator.get_object('nodes', None, 'listed')
    assert stored is not None and stored['metadata']['managedFields'][0]['fieldsV1']['f:metadata']
    assert 'managedFields' in created['metadata']
    assert 'managedFields' not in cached.pod['metadata']
    assert [('managedFields' in info.node['metadata']) for info in nodes] == [False, False]  # type: ignore[union-attr]
    assert nodes[0].node['metadata']['annotations'] == {'kept': 'yes'}  # type: ignore[union-attr]


async def test_the_operators_events_pass_the_api_servers_validation(
        emulator: FastKubernetesEmulator, kubeconfig: pathlib.Path, http: aiohttp.ClientSession) -> None:
    """A FailedScheduling note over 1024 characters is truncated as upstream does (the API answers
    422 otherwise); eventTime carries microseconds, reportingController is a qualified name."""
    await post(http, '/api/v1/nodes', make_node('node-0'))
    # 40 extended resources no node has: 40 distinct "Insufficient ..." reasons, far past 1024 characters.
    requests = {f'example.com/a-resource-with-a-rather-long-name-{i}': '1' for i in range(40)}
    async with running_operator(kubeconfig) as operator:
        await post(http, PODS, make_pod('nowhere', scheduler_name='kopfsched', requests=requests))
        await eventually(lambda: operator.stats.of('kopfsched').unschedulable >= 1, what='a failure')
        event = await eventually(lambda: next((e for e in emulator.list_objects('events', group='events.k8s.io')
                                               if e['regarding']['name'] == 'nowhere'), None), what='the event')
    statuses = [m.status for m in emulator.mutations(path_regex=r'/apis/events\.k8s\.io/')]
    assert statuses and all(status in (200, 201) for status in statuses), statuses
    assert len(event['note']) == 1024 and event['note'].endswith(' ...')


# -- in-place pod resize -----------------------------------------------------------------------


async def test_a_pod_resized_in_place_counts_what_it_runs_with(
        emulator: FastKubernetesEmulator, kubeconfig: pathlib.Path, http: aiohttp.ClientSession) -> None:
    """The spec was resized down to 1 cpu; the kubelet still runs (and reports) 3: a 2-cpu pod does not fit."""
    await post(http, '/api/v1/nodes', make_node('node-0', cpu='4'))
    resized = make_pod('resized', node_name='node-0', requests={'cpu': '1'})
    resized['status'] = {'phase': 'Running', 'containerStatuses': [
        {'name': 'c0', 'image': 'registry.k8s.io/pause:3.10', 'ready': True, 'restartCount': 0,
         'resources': {'requests': {'cpu': '3'}}, 'allocatedResources': {'cpu': '3'}}]}
    await post(http, PODS, resized)
    async with running_operator(kubeconfig) as operator:
        await post(http, PODS, make_pod('two-cpus', scheduler_name='kopfsched', requests={'cpu': '2'}))
        await eventually(lambda: operator.stats.of('kopfsched').unschedulable >= 1, what='the rejection')
        # The condition is patched after the attempt is counted: wait for the write, not the count.
        rejected = await eventually(lambda: condition(emulator, 'two-cpus', 'PodScheduled'),
                                    what='the PodScheduled condition')
        # The kubelet finished the resize: the status says 1 cpu now, and the pod fits.
        async with http.patch(f'{PODS}/resized/status', json={'status': {'containerStatuses': [
                {'name': 'c0', 'image': 'registry.k8s.io/pause:3.10', 'ready': True, 'restartCount': 0,
                 'resources': {'requests': {'cpu': '1'}}, 'allocatedResources': {'cpu': '1'}}]}},
                headers={'Content-Type': 'application/merge-patch+json'}) as patched:
            assert patched.status == 200
        await eventually(lambda: node_of(emulator, 'two-cpus'), what='bound once the resize is done')
    assert rejected is not None and rejected['message'].startswith('0/1 nodes are available: 1 Insufficient cpu.')


async def test_the_schedulerprofile_status_the_operator_writes_survives_the_crds_pruning(
        emulator: FastKubernetesEmulator, kubeconfig: pathlib.Path, http: aiohttp.ClientSession) -> None:
    """A real server silently drops status fields the CRD's schema does not declare: every field
    the operator reports must be declared, or `kubectl get` would never show it."""
    await post(http, '/api/v1/nodes', make_node('node-0'))
    async with running_operator(kubeconfig) as operator:
        await post(http, PODS, make_pod('p', scheduler_name='kopfsched'))
        await eventually(lambda: node_of(emulator, 'p'), what='bound')

        def written() -> tuple[dict, dict] | None:
            stored = (emulator.get_object('schedulerprofiles', None, 'kopfsched', group='kopfsched.dev') or {})
            wanted = operator.profiles.statuses()['kopfsched']
            status = stored.get('status') or {}
            return (wanted, status) if status.get('counters', {}).get('scheduled') == 1 else None
        # Equal once the writer caught up, unless the API dropped something the operator wrote.
        wanted, stored = await eventually(lambda: (w := written()) and w[1] == json.loads(json.dumps(w[0])) and w,
                                          what='the status written as wanted')
    assert stored['counters']['scheduled'] == 1
    assert set(stored) == set(wanted)


async def test_the_schedulerprofile_status_the_operator_writes_is_valid_for_the_crds_schema(
        emulator: FastKubernetesEmulator, kubeconfig: pathlib.Path, http: aiohttp.ClientSession) -> None:
    """A real server refuses (422) a status whose values violate the CRD's schema: every status write
    the operator makes, while it schedules and while a pod stays unschedulable, must be accepted."""
    assert emulator.validate_custom_resources
    await post(http, '/api/v1/nodes', make_node('node-0', cpu='2'))
    async with running_operator(kubeconfig) as operator:
        await post(http, PODS, make_pod('p', scheduler_name='kopfsched'))
        await post(http, PODS, make_pod('too-big', scheduler_name='kopfsched', requests={'cpu': '64'}))
        await eventually(lambda: node_of(emulator, 'p'), what='bound')
        await eventually(lambda: operator.stats.of('kopfsched').unschedulable >= 1, what='the rejection')

        def written() -> dict | None:
            stored = (emulator.get_object('schedulerprofiles', None, 'kopfsched', group='kopfsched.dev') or {})
            status = stored.get('status') or {}
            return status if status.get('counters', {}).get('scheduled') == 1 else None
        status = await eventually(written, what='the status written')
    writes = emulator.mutations(path_regex=r'/schedulerprofiles/kopfsched/status$')
    assert writes and all(200 <= w.status < 300 for w in writes), [(w.status, w.body) for w in writes]
    # The schema is strict enough to catch a wrong type: the same status with one counter as a string is refused.
    status['counters']['scheduled'] = '1'
    async with http.patch(f'{writes[-1].path}', json={'status': status},
                          headers={'Content-Type': 'application/merge-patch+json'}) as refused:
        answer = (refused.status, (await refused.json())['details']['causes'])
    assert answer == (422, [{'reason': 'FieldValueTypeInvalid', 'field': 'status.counters.scheduled',
                             'message': 'Invalid value: "string": status.counters.scheduled in body must be of type '
                                        'integer: "string"'}])


async def test_a_pod_failing_twice_turns_its_event_into_a_series_the_api_accepts(
        emulator: FastKubernetesEmulator, kubeconfig: pathlib.Path, http: aiohttp.ClientSession) -> None:
    """A second identical failure updates the FailedScheduling event with `series` (count 2,
    lastObservedTime in microseconds) instead of a new event; the emulator's Events validation accepts it.
    The second attempt comes from the pod's own toleration update (TaintToleration queues it), with a
    toleration that does not match the node's taint, so it fails with the very same message."""
    await post(http, '/api/v1/nodes', make_node('node-0', taints=[taint('dedicated', 'gpu')]))
    async with running_operator(kubeconfig) as operator:
        await post(http, PODS, make_pod('tainted-out', scheduler_name='kopfsched'))
        await eventually(lambda: operator.stats.of('kopfsched').unschedulable >= 1, what='the first failure')
        first = await eventually(lambda: events_about(emulator, 'tainted-out', 'FailedScheduling'), what='the event')
        async with http.patch(f'{PODS}/tainted-out', json={'spec': {'tolerations': [
                {'key': 'other', 'operator': 'Exists', 'effect': 'NoSchedule'}]}},
                headers={'Content-Type': 'application/merge-patch+json'}) as patched:
            assert patched.status == 200
        await eventually(lambda: operator.stats.of('kopfsched').unschedulable >= 2, what='a second attempt')
        events = await eventually(
            lambda: (e := events_about(emulator, 'tainted-out', 'FailedScheduling')) and
            (e[0].get('series') or {}).get('count', 0) >= 2 and e, what='the series')
    writes = emulator.mutations(path_regex=r'/apis/events\.k8s\.io/')
    assert writes and all(w.status in (200, 201) for w in writes), [(w.status, w.body) for w in writes]
    assert [w.method for w in writes][:2] == ['POST', 'PATCH']
    assert len(events) == 1 and events[0]['metadata']['name'] == first[0]['metadata']['name']
    assert events[0]['note'] == first[0]['note']
    assert events[0]['note'] == ('0/1 nodes are available: 1 node(s) had untolerated taint(s). preemption: 0/1 nodes '
                                 'are available: 1 Preemption is not helpful for scheduling.')
    assert re.fullmatch(r'\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z', events[0]['series']['lastObservedTime'])
