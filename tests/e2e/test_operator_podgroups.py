"""Coscheduling through the operator: PodGroups (the optional CRD, installed with kubectl) join
the cache, gangs bind all or nothing, and the scheduler writes the PodGroups' status."""
from __future__ import annotations

import itertools
import logging
import pathlib
from typing import Any

import aiohttp
import pytest

from kopfsched.emulator.server import FastKubernetesEmulator
from tests.builders import make_node, make_pod
from tests.e2e.operator_harness import (
    PROFILES,
    eventually,
    node_of,
    post,
    profile,
    running_operator,
)
from tests.kubectl import apply

pytestmark = pytest.mark.http(crd=False, profiles=())


ROOT = pathlib.Path(__file__).parents[2]
PODS = '/api/v1/namespaces/default/pods'
POD_GROUPS = '/apis/scheduling.x-k8s.io/v1alpha1/namespaces/default/podgroups'
GROUP_LABEL = 'scheduling.x-k8s.io/pod-group'
GANG_PROFILE = profile('gang', plugins={'multiPoint': {'enabled': [{'name': 'Coscheduling'}]},
                                        'queueSort': {'disabled': [{'name': 'PrioritySort'}]}},
                       pluginConfig=[{'name': 'Coscheduling', 'args': {'permitWaitingTimeSeconds': 10,
                                                                       'podGroupBackoffSeconds': 60}}])


def pod_group(name: str, *, min_member: int) -> dict[str, Any]:
    return {'apiVersion': 'scheduling.x-k8s.io/v1alpha1', 'kind': 'PodGroup', 'metadata': {'name': name},
            'spec': {'minMember': min_member, 'scheduleTimeoutSeconds': 10}}


async def gang(http: aiohttp.ClientSession, group: str, size: int, *, cpu: str, scheduler: str = 'gang') -> list[str]:
    names = [f'{group}-{i}' for i in range(size)]
    for name in names:
        await post(http, PODS, make_pod(name, scheduler_name=scheduler, labels={GROUP_LABEL: group},
                                        requests={'cpu': cpu}))
    return names


def status_of(emulator: FastKubernetesEmulator, group: str) -> dict[str, Any]:
    obj = emulator.get_object('podgroups', 'default', group, group='scheduling.x-k8s.io') or {}
    return obj.get('status') or {}


def unschedulable(emulator: FastKubernetesEmulator, name: str) -> bool:
    conditions = ((emulator.get_object('pods', 'default', name) or {}).get('status') or {}).get('conditions') or ()
    return any(c['type'] == 'PodScheduled' and c['status'] == 'False' for c in conditions)


def status_writes(emulator: FastKubernetesEmulator, group: str) -> list[dict[str, Any]]:
    return [m.body['status'] for m in emulator.mutations('PATCH', rf'/podgroups/{group}/status$')]


def scheduled(count: int) -> dict[str, Any]:
    return {'phase': 'Scheduled', 'scheduled': count, 'running': 0, 'succeeded': 0, 'failed': 0}


PRE_SCHEDULING = {'phase': 'PreScheduling', 'scheduled': 0, 'running': 0, 'succeeded': 0, 'failed': 0}


async def test_a_gang_binds_together_one_that_cannot_fit_binds_none_and_statuses_say_so(
        emulator: FastKubernetesEmulator, kubeconfig: pathlib.Path, http: aiohttp.ClientSession) -> None:
    apply(kubeconfig, ROOT / 'crds', ROOT / 'crds' / 'optional')
    await post(http, PROFILES, GANG_PROFILE)
    for i in range(2):
        await post(http, '/api/v1/nodes', make_node(f'node-{i}', cpu='4'))
    for name, size in (('web', 2), ('trainer', 3), ('theirs', 1)):
        await post(http, POD_GROUPS, pod_group(name, min_member=size))

    async with running_operator(kubeconfig) as operator:
        web = await gang(http, 'web', 2, cpu='1')
        # Two of three fit (3 cpu each on two 4-cpu nodes): they wait at Permit, the third fits
        # nowhere, so PostFilter rejects the waiting two and the group backs off.
        trainer = await gang(http, 'trainer', 3, cpu='3')
        theirs = await gang(http, 'theirs', 1, cpu='1', scheduler='other-scheduler')

        await eventually(lambda: all(node_of(emulator, name) for name in web), what='the web gang bound')
        await eventually(lambda: status_of(emulator, 'web') == scheduled(2), what='web Scheduled')
        await eventually(lambda: all(unschedulable(emulator, name) for name in trainer),
                         what='every trainer pod reported unschedulable')
        await eventually(lambda: status_of(emulator, 'trainer') == PRE_SCHEDULING, what='trainer PreScheduling')
        # A few more rounds of the status writer: nothing changed, so nothing more is written.
        rounds = operator.pod_groups.rounds
        await eventually(lambda: operator.pod_groups.rounds >= rounds + 3, what='three more status rounds')

    assert [node_of(emulator, name) for name in trainer] == [None, None, None]
    assert not emulator.mutations('POST', r'/pods/trainer-\d/binding$')
    assert not emulator.mutations('PATCH', r'/podgroups/theirs/status$'), 'a group of another scheduler'
    assert [node_of(emulator, name) for name in theirs] == [None]
    for group in ('web', 'trainer'):
        writes = status_writes(emulator, group)
        assert all(before != after for before, after in itertools.pairwise(writes)), writes
        assert all(m.content_type == 'application/merge-patch+json'
                   for m in emulator.mutations('PATCH', rf'/podgroups/{group}/status$'))
    assert status_writes(emulator, 'web')[-1] == scheduled(2)


async def test_without_the_crd_the_operator_schedules_and_serves_pod_groups_once_it_is_installed(
        emulator: FastKubernetesEmulator, kubeconfig: pathlib.Path, http: aiohttp.ClientSession,
        caplog: pytest.LogCaptureFixture) -> None:
    apply(kubeconfig, ROOT / 'crds')
    await post(http, PROFILES, GANG_PROFILE)
    await post(http, '/api/v1/nodes', make_node('node-0', cpu='4'))
    caplog.set_level(logging.WARNING)
    # kopf's own logger too: an in-process `kopfsched sandbox` earlier in the run leaves it at ERROR.
    caplog.set_level(logging.WARNING, logger='kopf')

    async with running_operator(kubeconfig) as operator:
        await post(http, PODS, make_pod('solo', scheduler_name='gang', requests={'cpu': '1'}))
        await eventually(lambda: node_of(emulator, 'solo'), what='a pod outside any group bound')

        apply(kubeconfig, ROOT / 'crds' / 'optional')
        await post(http, POD_GROUPS, pod_group('late', min_member=2))
        await eventually(lambda: operator.cache.objects.get('PodGroup', 'late', 'default'),
                         what='the PodGroup watched once its CRD exists')
        late = await gang(http, 'late', 2, cpu='1')
        await eventually(lambda: all(node_of(emulator, name) for name in late), what='the late gang bound')
        await eventually(lambda: status_of(emulator, 'late') == scheduled(2), what='late Scheduled')

    unresolved = [r for r in caplog.records if 'Unresolved resources' in r.getMessage()]
    # kopf warns when it scans CRDs (at start and on a CRD change), not per watch attempt.
    assert [r.getMessage().rsplit(': ', 1)[-1] for r in unresolved] == [
        "Selector(group='scheduling.x-k8s.io', version='v1alpha1', any_name='podgroups')"]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], [r.getMessage() for r in caplog.records]


async def test_a_gang_member_waiting_at_permit_times_out_in_the_operator(
        emulator: FastKubernetesEmulator, kubeconfig: pathlib.Path, http: aiohttp.ClientSession) -> None:
    """The other member is gated, so the first one waits at Permit until scheduleTimeoutSeconds
    runs out on the operator's clock; then it is rejected and nothing is bound."""
    apply(kubeconfig, ROOT / 'crds', ROOT / 'crds' / 'optional')
    await post(http, PROFILES, GANG_PROFILE)
    await post(http, '/api/v1/nodes', make_node('node-0', cpu='4'))
    group = pod_group('slow', min_member=2)
    group['spec']['scheduleTimeoutSeconds'] = 1
    await post(http, POD_GROUPS, group)
    async with running_operator(kubeconfig) as operator:
        await post(http, PODS, make_pod('slow-1', scheduler_name='gang', labels={GROUP_LABEL: 'slow'},
                                        requests={'cpu': '1'}, scheduling_gates=['example.com/hold']))
        await eventually(lambda: operator.scheduler.queue.gated_pods(), what='slow-1 gated')
        await post(http, PODS, make_pod('slow-0', scheduler_name='gang', labels={GROUP_LABEL: 'slow'},
                                        requests={'cpu': '1'}))
        await eventually(lambda: len(operator.scheduler.waiting_pods) == 1, what='slow-0 waiting at Permit')

        def reported() -> dict[str, Any] | None:
            conditions = (emulator.get_object('pods', 'default', 'slow-0')['status'] or {}).get('conditions') or ()
            return next((c for c in conditions if c['type'] == 'PodScheduled' and c['status'] == 'False'), None)
        condition = await eventually(reported, timeout=10, what='the Permit wait timed out')
    # The pod is retried (and may wait again) afterwards; the first report is the timeout's.
    assert 'rejected due to timeout after waiting 1s at plugin Coscheduling' in condition['message']
    assert not emulator.mutations('POST', r'/pods/slow-\d/binding$')
