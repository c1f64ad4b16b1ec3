"""The operator end to end: install with kubectl, bind pods, report what does not fit."""
from __future__ import annotations

import collections
import json
import logging
import pathlib
import re

import aiohttp
import pytest

from kopfsched.emulator.server import FastKubernetesEmulator
from tests.builders import make_node, make_pod
from tests.e2e.operator_harness import events_about, eventually, node_of, post, running_operator
from tests.kubectl import install, kubectl

pytestmark = pytest.mark.http(crd=False, profiles=())

ROOT = pathlib.Path(__file__).parents[2]
PODS = '/api/v1/namespaces/default/pods'


async def test_pods_of_our_scheduler_are_bound_exactly_once_and_nothing_else_is_touched(
        emulator: FastKubernetesEmulator, kubeconfig: pathlib.Path, tmp_path: pathlib.Path,
        http: aiohttp.ClientSession) -> None:
    install(kubeconfig, tmp_path)
    for i in range(3):
        await post(http, '/api/v1/nodes', make_node(f'node-{i}'))
    ours = [f'ours-{i}' for i in range(12)]
    theirs = ['theirs-0', 'theirs-1', 'default-0']
    for name in ours[:6]:  # pending before the operator starts: found by the initial listing
        await post(http, PODS, make_pod(name, scheduler_name='kopfsched', requests={'cpu': '100m'}))
    await post(http, PODS, make_pod('theirs-0', scheduler_name='other-scheduler'))
    await post(http, PODS, make_pod('default-0'))

    async with running_operator(kubeconfig):
        for name in ours[6:]:
            await post(http, PODS, make_pod(name, scheduler_name='kopfsched', requests={'cpu': '100m'}))
        await post(http, PODS, make_pod('theirs-1', scheduler_name='other-scheduler'))
        await eventually(lambda: all(node_of(emulator, name) for name in ours), what='every pod of ours bound')
        await eventually(lambda: all(events_about(emulator, name, 'Scheduled') for name in ours),
                         what='a Scheduled event per pod')

    bindings = collections.Counter(m.path.split('/')[-2] for m in emulator.mutations('POST', r'/binding$'))
    assert bindings == collections.Counter(ours)
    assert all(m.status == 201 for m in emulator.mutations('POST', r'/binding$'))
    for name in ours:
        [event] = events_about(emulator, name, 'Scheduled')
        assert (event['type'], event['note'], event['reportingController'], event['action']) == (
            'Normal', f'Successfully assigned default/{name} to {node_of(emulator, name)}', 'kopfsched', 'Binding')
    assert [node_of(emulator, name) for name in theirs] == [None, None, None]
    assert not [m for m in emulator.mutations() if any(f'/pods/{name}' in m.path for name in theirs)]
    # kopf wrote nothing on pods or nodes: no PATCH/PUT at all, no annotations, no finalizers.
    assert not [m for m in emulator.mutations() if m.method in ('PATCH', 'PUT') and ('/pods/' in m.path or
                                                                                   '/nodes/' in m.path)]
    for obj in [*emulator.list_objects('pods'), *emulator.list_objects('nodes')]:
        assert not obj['metadata'].get('finalizers'), obj['metadata']
        assert not [a for a in obj['metadata'].get('annotations') or {} if 'kopf' in a], obj['metadata']


async def test_a_stop_says_how_long_each_step_took(
        emulator: FastKubernetesEmulator, kubeconfig: pathlib.Path, tmp_path: pathlib.Path,
        http: aiohttp.ClientSession, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger='kopfsched.kube.operator')
    install(kubeconfig, tmp_path)
    await post(http, '/api/v1/nodes', make_node('node-0'))
    async with running_operator(kubeconfig):
        await post(http, PODS, make_pod('web-0', scheduler_name='kopfsched'))
        await eventually(lambda: node_of(emulator, 'web-0'), what='web-0 bound')
    [stopped] = [r.getMessage() for r in caplog.records if r.getMessage().startswith('stopped: ')]
    assert re.fullmatch(r'stopped: bindings \d+\.\d s, profile status \d+\.\d s, watches \d+\.\d s', stopped), stopped


@pytest.mark.emulator(grace_period_scale=0.01)  # the filler's 30 s of termination in 0.3 s
async def test_a_pod_that_fits_nowhere_is_reported_once_and_bound_when_a_node_fits(
        emulator: FastKubernetesEmulator, kubeconfig: pathlib.Path, tmp_path: pathlib.Path,
        http: aiohttp.ClientSession) -> None:
    install(kubeconfig, tmp_path)
    await post(http, '/api/v1/nodes', make_node('small-0', cpu='4'))
    await post(http, '/api/v1/nodes', make_node('small-1', cpu='4'))
    await post(http, PODS, make_pod('filler', node_name='small-0', requests={'cpu': '1'}))
    # Upstream's FitError message; its preemption part comes from DefaultPreemption.
    message_start = '0/2 nodes are available: 2 Insufficient cpu. preemption: 0/2 nodes are available: 2 '

    async with running_operator(kubeconfig) as operator:
        await post(http, PODS, make_pod('big', scheduler_name='kopfsched', requests={'cpu': '10'}))

        def condition() -> dict | None:
            pod = emulator.get_object('pods', 'default', 'big') or {}
            return next((c for c in pod.get('status', {}).get('conditions') or () if c['type'] == 'PodScheduled'),
                        None)
        reported = await eventually(condition, what='PodScheduled=False')
        await eventually(lambda: events_about(emulator, 'big', 'FailedScheduling'), what='FailedScheduling')
        # An event that could help (a running pod's cpu is freed) but does not: a second, identical failure.
        async with http.delete(f'{PODS}/filler') as deleted:
            assert deleted.status == 200
        await eventually(lambda: operator.stats.of('kopfsched').unschedulable >= 2, what='a second attempt')
        await eventually(lambda: (events_about(emulator, 'big', 'FailedScheduling')[0].get('series') or {})
                         .get('count') == 2, what='the series counted')
        failed = events_about(emulator, 'big', 'FailedScheduling')

        def status() -> dict:
            return emulator.get_object('schedulerprofiles', None, 'kopfsched', group='kopfsched.dev')['status']
        pending = await eventually(lambda: status().get('queue', {}).get('unschedulable') == 1
                                   and status().get('counters', {}).get('unschedulable') == 2 and status(),
                                   what='the pending pod in the status, back in the unschedulable pool')

        await post(http, '/api/v1/nodes', make_node('large', cpu='16'))
        await eventually(lambda: node_of(emulator, 'big') == 'large', timeout=15, what='bound to the new node')

    assert (reported['status'], reported['reason']) == ('False', 'Unschedulable')
    assert reported['message'].startswith(message_start), reported['message']
    assert len(failed) == 1
    assert (failed[0]['type'], failed[0]['note'], failed[0]['action']) == ('Warning', reported['message'], 'Scheduling')
    assert pending['queue'] == {'active': 0, 'backoff': 0, 'unschedulable': 1, 'gated': 0, 'pending': 1}
    assert pending['counters']['unschedulable'] == 2


async def test_profile_status_is_populated(emulator: FastKubernetesEmulator, kubeconfig: pathlib.Path,
                                           tmp_path: pathlib.Path, http: aiohttp.ClientSession) -> None:
    install(kubeconfig, tmp_path)
    await post(http, '/api/v1/nodes', make_node('node-0'))
    async with running_operator(kubeconfig) as operator:
        for i in range(5):
            await post(http, PODS, make_pod(f'p{i}', scheduler_name='kopfsched'))

        def status() -> dict:
            return emulator.get_object('schedulerprofiles', None, 'kopfsched', group='kopfsched.dev')['status']
        current = await eventually(lambda: status().get('counters', {}).get('scheduled') == 5 and status(),
                                   what='five pods counted')
        healthz = await _get(f'http://127.0.0.1:{operator.health.port}/healthz')
        readyz = await _get(f'http://127.0.0.1:{operator.health.port}/readyz')
        metrics = await _get(f'http://127.0.0.1:{operator.health.port}/metrics')

    [ready] = current['conditions']
    assert (ready['type'], ready['status'], ready['reason'], ready['observedGeneration']) == (
        'Ready', 'True', 'Serving', 1)
    assert current['observedGeneration'] == 1
    assert current['counters'] == {'scheduled': 5, 'unschedulable': 0, 'preemptions': 0, 'errors': 0}
    assert current['queue'] == {'active': 0, 'backoff': 0, 'unschedulable': 0, 'gated': 0, 'pending': 0}
    assert current['lastScheduleTime'].endswith('Z')
    assert 0 < current['latency']['p50Ms'] <= current['latency']['p99Ms']
    assert {'name': 'NodeResourcesFit', 'weight': 1} in current['plugins']['score']
    assert {'name': 'TaintToleration', 'weight': 3} in current['plugins']['score']
    assert current['plugins']['bind'] == [{'name': 'DefaultBinder'}]
    assert (healthz, readyz) == ((200, 'ok'), (200, 'ok'))
    assert 'scheduler_schedule_attempts_total{profile="kopfsched",result="scheduled"} 5.0' in metrics[1]
    printed = kubectl(pathlib.Path(kubeconfig), 'get', 'schedulerprofiles', '-o', 'json')
    assert json.loads(printed.stdout)['items'][0]['status']['counters']['scheduled'] == 5
    # The profile leaves spec.schedulerName out: the Scheduler column still shows the name pods use.
    assert current['schedulerName'] == 'kopfsched'
    table = kubectl(pathlib.Path(kubeconfig), 'get', 'schedulerprofiles')
    assert [line.split()[:5] for line in table.stdout.splitlines()] == [
        ['NAME', 'SCHEDULER', 'READY', 'SCHEDULED', 'PENDING'],
        ['kopfsched', 'kopfsched', 'True', '5', '0']], table.stderr


async def _get(url: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        return response.status, await response.text()


async def test_whole_install_in_one_apply_then_the_default_profile_serves(
        emulator: FastKubernetesEmulator, kubeconfig: pathlib.Path, http: aiohttp.ClientSession) -> None:
    """`kubectl apply -f crds/ -f manifests/` is the whole install; on a cluster with no
    SchedulerProfile the operator creates `kopfsched` and pods that name it are bound."""
    applied = kubectl(kubeconfig, 'apply', '--validate=false', '-f', str(ROOT / 'crds'), '-f', str(ROOT / 'manifests'))
    assert applied.returncode == 0, applied.stderr
    assert 'deployment.apps/kopfsched created' in applied.stdout
    assert emulator.list_objects('schedulerprofiles', group='kopfsched.dev') == []
    await post(http, '/api/v1/nodes', make_node('node-0'))
    await post(http, PODS, make_pod('web', scheduler_name='kopfsched', requests={'cpu': '100m'}))
    async with running_operator(kubeconfig):
        await eventually(lambda: node_of(emulator, 'web') == 'node-0', what='the pod bound by the default profile')
        await eventually(lambda: any(c.get('type') == 'Ready' and c.get('status') == 'True' for p in
                                     emulator.list_objects('schedulerprofiles', group='kopfsched.dev')
                                     for c in (p.get('status') or {}).get('conditions') or ()),
                         what='the default profile Ready')
    [seeded] = emulator.list_objects('schedulerprofiles', group='kopfsched.dev')
    assert (seeded['metadata']['name'], seeded['spec']['schedulerName']) == ('kopfsched', 'kopfsched')
    printed = kubectl(kubeconfig, 'get', 'schedulerprofile', 'kopfsched', '-o',
                      'jsonpath={.status.conditions[?(@.type=="Ready")].status}')
    assert printed.stdout == 'True', printed.stderr
