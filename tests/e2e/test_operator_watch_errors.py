"""What a real API server does inside watch streams: ERROR events other than 410, streams closed at
timeoutSeconds, BOOKMARKs. The operator keeps scheduling through all of them, and its health says
so only while its watches really work."""
from __future__ import annotations

import asyncio
import pathlib

import aiohttp
import pytest

from kopfsched.emulator.server import FastKubernetesEmulator
from kopfsched.kube.operator import Operator
from tests.builders import make_node, make_pod
from tests.e2e.operator_harness import (
    binding_statuses,
    eventually,
    node_of,
    post,
    running_operator,
)

PODS = '/api/v1/namespaces/default/pods'


@pytest.mark.parametrize('code', [500, 503, 429])
async def test_an_error_event_in_the_pods_watch_does_not_stop_scheduling(
        emulator: FastKubernetesEmulator, kubeconfig: pathlib.Path, http: aiohttp.ClientSession, code: int) -> None:
    await post(http, '/api/v1/nodes', make_node('node-0'))
    async with running_operator(kubeconfig) as operator:
        await post(http, PODS, make_pod('before', scheduler_name='kopfsched'))
        await eventually(lambda: node_of(emulator, 'before'), what='before bound')
        emulator.watch_error('pods', code=code)
        emulator.watch_error('nodes', code=code)
        # Only the watches may bring what follows: the reconcile after kopf's initial listing is over.
        await asyncio.sleep(1.0)
        await post(http, PODS, make_pod('after', scheduler_name='kopfsched'))
        await post(http, '/api/v1/nodes', make_node('node-1'))
        await eventually(lambda: node_of(emulator, 'after'), timeout=15, what='after bound')
        await eventually(lambda: operator.cache.get_node('node-1'), what='the new node seen')
        healthy = operator.healthy()
    assert healthy


async def healthz(operator: Operator) -> tuple[int, str]:
    assert operator.health is not None
    async with aiohttp.ClientSession() as session, \
            session.get(f'http://127.0.0.1:{operator.health.port}/healthz') as response:
        return response.status, await response.text()


async def test_health_fails_while_the_pods_watch_keeps_failing_and_recovers_with_it(
        emulator: FastKubernetesEmulator, kubeconfig: pathlib.Path, http: aiohttp.ClientSession) -> None:
    await post(http, '/api/v1/nodes', make_node('node-0'))
    async with running_operator(kubeconfig, watch_down_after=1.0, watch_max_backoff=0.5) as operator:
        before = await healthz(operator)
        emulator.watch_error('pods', code=500, message='etcd cluster is unavailable', times=None)

        async def answering(code: int) -> str | None:
            status, text = await healthz(operator)
            return text if status == code else None
        failing = await eventually(lambda: answering(503), what='/healthz failing')
        emulator.heal_watches()
        await post(http, PODS, make_pod('after', scheduler_name='kopfsched'))
        await eventually(lambda: node_of(emulator, 'after'), timeout=15, what='after bound')
        # Back at the first watch event, or once the new watch has stayed open for 10 s (SETTLE).
        await eventually(lambda: answering(200), timeout=25, what='/healthz ok again')
    assert before == (200, 'ok')
    assert failing.startswith('healthz check failed: the watch of pods has failed for ')
    assert 'last: Error in the watch-stream' in failing and 'etcd cluster is unavailable' in failing


@pytest.mark.emulator(min_request_timeout=0.3, bookmark_interval=0.1)
async def test_streams_closed_at_their_timeout_and_bookmarks_keep_the_operator_scheduling(
        emulator: FastKubernetesEmulator, kubeconfig: pathlib.Path, http: aiohttp.ClientSession) -> None:
    """The API server ends every watch after its timeout (here 0.3-0.6 s) and sends BOOKMARKs: kopf
    watches again from the last resourceVersion seen, without relisting."""
    await post(http, '/api/v1/nodes', make_node('node-0'))
    async with running_operator(kubeconfig) as operator:
        for i in range(4):
            await post(http, PODS, make_pod(f'p{i}', scheduler_name='kopfsched'))
            await eventually(lambda i=i: node_of(emulator, f'p{i}'), what=f'p{i} bound')
            await asyncio.sleep(0.7)  # at least one stream closed meanwhile
        healthy = operator.healthy()
    assert healthy
    assert [binding_statuses(emulator, f'p{i}') for i in range(4)] == [[201]] * 4


async def test_a_kind_relisted_empty_drops_what_vanished_meanwhile(
        emulator: FastKubernetesEmulator, kubeconfig: pathlib.Path, http: aiohttp.ClientSession) -> None:
    """kopf forwards nothing when a relist comes back empty: the relist itself must trigger the
    reconcile of that kind (no 300 s timer any more)."""
    await post(http, '/apis/policy/v1/namespaces/default/poddisruptionbudgets', {
        'apiVersion': 'policy/v1', 'kind': 'PodDisruptionBudget', 'metadata': {'name': 'pdb'},
        'spec': {'minAvailable': 1, 'selector': {'matchLabels': {'app': 'x'}}}})
    async with running_operator(kubeconfig) as operator:
        feed = operator.informer.feed
        await eventually(lambda: feed.count('PodDisruptionBudget') == 1, what='the PDB known')
        # Gone without a DELETED event; the PDB watch then ends with 410 Expired and kopf relists it.
        emulator.remove_unseen('poddisruptionbudgets', 'default', 'pdb', group='policy')
        # The listing can end before kopf's watch request is open: an error injected then reaches
        # no stream, so it is injected again until a relist has happened.
        def relisted_without_the_pdb() -> bool:
            if feed.count('PodDisruptionBudget') == 0:
                return True
            emulator.watch_error('poddisruptionbudgets', group='policy', code=410)
            return False
        await eventually(relisted_without_the_pdb, what='the PDB forgotten')
