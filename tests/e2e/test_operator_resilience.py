"""API failures, conflicts, dropped and expired watches, restarts and leader election."""
from __future__ import annotations

import contextlib
import pathlib

import aiohttp
import pytest

from kopfsched.emulator.server import FastKubernetesEmulator
from kopfsched.kube.leader import LeaseConfig
from tests.builders import make_node, make_pod
from tests.e2e.operator_harness import (
    binding_statuses,
    eventually,
    node_of,
    post,
    running_operator,
)

PODS = '/api/v1/namespaces/default/pods'


async def test_bind_answering_500_twice_then_succeeding_binds_once(
        emulator: FastKubernetesEmulator, kubeconfig: pathlib.Path, http: aiohttp.ClientSession) -> None:
    await post(http, '/api/v1/nodes', make_node('node-0'))
    emulator.fail_next('POST', r'/pods/flaky/binding$', status=500, times=2)
    async with running_operator(kubeconfig) as operator:
        await post(http, PODS, make_pod('flaky', scheduler_name='kopfsched'))
        await eventually(lambda: node_of(emulator, 'flaky'), what='flaky bound')
        await eventually(lambda: operator.stats.of('kopfsched').scheduled == 1, what='counted once')
    assert binding_statuses(emulator, 'flaky') == [500, 500, 201]
    assert operator.stats.of('kopfsched').errors == 0


async def test_bind_answering_409_is_not_retried_and_the_pod_is_forgotten(
        emulator: FastKubernetesEmulator, kubeconfig: pathlib.Path, http: aiohttp.ClientSession) -> None:
    await post(http, '/api/v1/nodes', make_node('node-0'))
    await post(http, '/api/v1/nodes', make_node('node-1'))
    emulator.fail_next('POST', r'/pods/contested/binding$', status=409)
    async with running_operator(kubeconfig) as operator:
        pod = await post(http, PODS, make_pod('contested', scheduler_name='kopfsched'))
        uid = pod['metadata']['uid']
        await eventually(lambda: binding_statuses(emulator, 'contested') == [409], what='the conflict')
        scheduler = operator.scheduler
        await eventually(lambda: scheduler.in_flight_tasks == 0 and scheduler.queue.where(uid) is None,
                         what='the pod forgotten')
        # Another scheduler won: it bound the pod; the watch tells us where.
        async with http.post(f'{PODS}/contested/binding', json={
                'apiVersion': 'v1', 'kind': 'Binding', 'metadata': {'name': 'contested'},
                'target': {'kind': 'Node', 'name': 'node-1'}}) as bound:
            assert bound.status == 201
        confirmed = await eventually(lambda: operator.cache.get_pod(uid), what='the winner seen')
        assumed = operator.cache.is_assumed(uid)
    assert binding_statuses(emulator, 'contested') == [409, 201]
    assert (confirmed.node_name, assumed) == ('node-1', False)


async def test_a_dropped_watch_stream_recovers_and_scheduling_continues(
        emulator: FastKubernetesEmulator, kubeconfig: pathlib.Path, http: aiohttp.ClientSession) -> None:
    await post(http, '/api/v1/nodes', make_node('node-0'))
    async with running_operator(kubeconfig) as operator:
        await post(http, PODS, make_pod('before', scheduler_name='kopfsched'))
        await eventually(lambda: node_of(emulator, 'before'), what='before bound')
        emulator.drop_watches()
        await post(http, PODS, make_pod('after', scheduler_name='kopfsched'))
        await post(http, '/api/v1/nodes', make_node('node-1'))
        await eventually(lambda: node_of(emulator, 'after'), what='after bound')
        await eventually(lambda: operator.cache.get_node('node-1'), what='the new node seen')
        healthy = operator.healthy()
    assert binding_statuses(emulator, 'before') == [201]
    assert binding_statuses(emulator, 'after') == [201]
    assert healthy


@pytest.mark.emulator(history_size=3)
async def test_objects_that_vanished_during_a_relist_do_not_linger(
        emulator: FastKubernetesEmulator, kubeconfig: pathlib.Path, http: aiohttp.ClientSession) -> None:
    """After 410 Gone kopf relists without DELETED events: a ghost pod would keep holding cpu."""
    await post(http, '/api/v1/nodes', make_node('node-0', cpu='4'))
    await post(http, '/api/v1/nodes', make_node('gone-node', cpu='64'))
    ghost = await post(http, PODS, make_pod('ghost', node_name='node-0', requests={'cpu': '3'}))
    async with running_operator(kubeconfig) as operator:
        await eventually(lambda: operator.cache.get_pod(ghost['metadata']['uid']), what='the ghost cached')

        # Gone while no watch was looking, and the history compacted past the watchers' resume points:
        # they get 410 Gone and kopf relists, without DELETED events for what vanished.
        emulator.vanish_while_watches_are_away(('pods', 'default', 'ghost'), ('nodes', None, 'gone-node'))
        await eventually(lambda: operator.cache.get_pod(ghost['metadata']['uid']) is None, what='the ghost removed')
        await eventually(lambda: operator.cache.get_node('gone-node') is None, what='the node removed')
        await post(http, PODS, make_pod('needs-room', scheduler_name='kopfsched', requests={'cpu': '2'}))
        placed = await eventually(lambda: node_of(emulator, 'needs-room'), what='bound where the ghost was')
    assert placed == 'node-0'


async def test_a_restart_counts_bound_pods_and_binds_nothing_twice(
        emulator: FastKubernetesEmulator, kubeconfig: pathlib.Path, http: aiohttp.ClientSession) -> None:
    await post(http, '/api/v1/nodes', make_node('small', cpu='2'))
    await post(http, '/api/v1/nodes', make_node('large', cpu='8'))
    async with running_operator(kubeconfig):
        await post(http, PODS, make_pod('one', scheduler_name='kopfsched', requests={'cpu': '1500m'},
                                        node_selector={'kubernetes.io/hostname': 'small'}))
        await eventually(lambda: node_of(emulator, 'one'), what='one bound')
    for name in ('two', 'three'):  # pending while no scheduler runs
        await post(http, PODS, make_pod(name, scheduler_name='kopfsched', requests={'cpu': '1'}))
    async with running_operator(kubeconfig):
        await eventually(lambda: node_of(emulator, 'two') and node_of(emulator, 'three'), what='both bound')
    assert [node_of(emulator, name) for name in ('one', 'two', 'three')] == ['small', 'large', 'large']
    assert [binding_statuses(emulator, name) for name in ('one', 'two', 'three')] == [[201], [201], [201]]


async def test_only_the_leader_schedules_and_a_follower_takes_over(
        emulator: FastKubernetesEmulator, kubeconfig: pathlib.Path, http: aiohttp.ClientSession) -> None:
    await post(http, '/api/v1/nodes', make_node('node-0'))
    # Generous enough that a loaded machine never lets a's lease lapse before it stops: the
    # takeover measured here follows a clean release, which needs no expiry at all.
    lease = LeaseConfig(name='kopfsched', namespace='default', lease_duration=4.0, renew_deadline=3.0,
                        retry_period=0.1)
    second_context = running_operator(kubeconfig, leader_elect=True, lease=lease, identity='b')
    async with contextlib.AsyncExitStack() as first_context:
        first = await first_context.enter_async_context(
            running_operator(kubeconfig, leader_elect=True, lease=lease, identity='a'))
        await eventually(lambda: first.leading, what='a leads')
        second = await second_context.__aenter__()
        try:
            await post(http, PODS, make_pod('p1', scheduler_name='kopfsched'))
            await eventually(lambda: node_of(emulator, 'p1'), what='p1 bound')
            uid = emulator.get_object('pods', 'default', 'p1')['metadata']['uid']
            await eventually(lambda: second.cache.get_pod(uid), what='the follower saw it')
            follower_idle = not second.leading
            await first_context.aclose()  # a stops cleanly and releases the lease
            await eventually(lambda: second.leading, what='b takes over')
            await post(http, PODS, make_pod('p2', scheduler_name='kopfsched'))
            await eventually(lambda: node_of(emulator, 'p2'), what='p2 bound')
        finally:
            await second_context.__aexit__(None, None, None)
    holder = emulator.get_object('leases', 'default', 'kopfsched', group='coordination.k8s.io')['spec']
    assert follower_idle
    assert (binding_statuses(emulator, 'p1'), binding_statuses(emulator, 'p2')) == ([201], [201])
    assert holder['holderIdentity'] is None  # released on a clean stop
