"""The running operator's /debug/pending and dashboard, against the emulator, read over HTTP
and in a real headless Chromium."""
from __future__ import annotations

import json
import pathlib
from typing import Any

import aiohttp
import pytest

from kopfsched.emulator.server import FastKubernetesEmulator
from tests.browser import async_page
from tests.builders import make_node, make_pod, taint
from tests.e2e.operator_harness import eventually, post, running_operator

ROOT = pathlib.Path(__file__).parents[2]
PODS = '/api/v1/namespaces/default/pods'
MESSAGE = ('0/3 nodes are available: 1 Insufficient cpu, 2 node(s) had untolerated taint(s). '
           'preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.')


@pytest.fixture(autouse=True)
async def nodes(http: aiohttp.ClientSession) -> None:
    for node in (make_node('small', cpu='1', labels=zone('zone-a')),
                 make_node('gpu-1', labels=zone('zone-b'), taints=[taint('dedicated', 'gpu')]),
                 make_node('gpu-2', labels=zone('zone-b'), taints=[taint('dedicated', 'gpu')])):
        await post(http, '/api/v1/nodes', node)


def zone(name: str) -> dict[str, str]:
    return {'topology.kubernetes.io/zone': name}


async def get_json(url: str) -> tuple[int, Any]:
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        return response.status, await response.json()


async def pending_names(base: str) -> list[str]:
    _, body = await get_json(f'{base}/debug/pending')
    return [f"{p['namespace']}/{p['name']}" for p in body['pods']]


def pod_condition(emulator: FastKubernetesEmulator, name: str) -> dict[str, Any]:
    pod = emulator.get_object('pods', 'default', name) or {}
    return next((c for c in (pod.get('status') or {}).get('conditions') or () if c['type'] == 'PodScheduled'), {})


async def test_debug_pending_reports_the_last_attempt_and_forgets_bound_and_deleted_pods(
        emulator: FastKubernetesEmulator, kubeconfig: pathlib.Path, http: aiohttp.ClientSession) -> None:
    async with running_operator(kubeconfig) as operator:
        assert operator.health is not None
        base = f'http://127.0.0.1:{operator.health.port}'
        await post(http, PODS, make_pod('big', scheduler_name='kopfsched', requests={'cpu': '2'}))
        await post(http, PODS, make_pod('stuck', scheduler_name='kopfsched', requests={'cpu': '64'}))
        await eventually(lambda: pending_names(base), what='/debug/pending lists the pods')
        await eventually(lambda: len(operator.scheduler.pending) == 2, what='both pods tried')
        status, body = await get_json(f'{base}/debug/pending')
        assert status == 200
        big = next(p for p in body['pods'] if p['name'] == 'big')
        assert {k: big[k] for k in ('namespace', 'name', 'schedulerName', 'attempts', 'message', 'reasons',
                                    'plugins', 'nodes', 'result')} == {
            'namespace': 'default', 'name': 'big', 'schedulerName': 'kopfsched', 'attempts': 1, 'message': MESSAGE,
            'reasons': {'Insufficient cpu': 1, 'node(s) had untolerated taint(s)': 2},
            'plugins': {'NodeResourcesFit': 1, 'TaintToleration': 2}, 'nodes': 3, 'result': 'Unschedulable'}
        assert big['lastAttempt'].endswith('Z') and big['firstAttempt'] == big['lastAttempt']

        status, one = await get_json(f'{base}/debug/pending/default/big')
        assert status == 200
        assert one['filter'] == {
            'small': {'plugin': 'NodeResourcesFit', 'code': 'UnschedulableAndUnresolvable',
                      'reasons': ['Insufficient cpu']},
            'gpu-1': {'plugin': 'TaintToleration', 'code': 'UnschedulableAndUnresolvable',
                      'reasons': ['node(s) had untolerated taint(s)']},
            'gpu-2': {'plugin': 'TaintToleration', 'code': 'UnschedulableAndUnresolvable',
                      'reasons': ['node(s) had untolerated taint(s)']}}
        assert (await get_json(f'{base}/debug/pending/default/nobody'))[0] == 404
        # Upstream's message on the pod, and nothing of ours written to it.
        await eventually(lambda: pod_condition(emulator, 'big').get('message') == MESSAGE, what='the condition')
        pod = emulator.get_object('pods', 'default', 'big')
        assert not (pod['metadata'].get('annotations') or {})

        await post(http, '/api/v1/nodes', make_node('large', cpu='4', labels=zone('zone-a')))
        await eventually(lambda: (emulator.get_object('pods', 'default', 'big') or {}).get('spec', {}).get('nodeName'),
                         what='big bound to the new node')
        await eventually(lambda: pending_names(base), what='still pending: stuck')
        assert await pending_names(base) == ['default/stuck']

        async with http.delete(f'{PODS}/stuck') as response:
            assert response.status == 200
        await eventually(lambda: operator.scheduler is not None and not len(operator.scheduler.pending),
                         what='the deleted pod forgotten')
        assert (await get_json(f'{base}/debug/pending')) == (200, {'pods': []})


async def test_dashboard_in_chromium_shows_profiles_the_pending_reason_and_nodes(
        emulator: FastKubernetesEmulator, kubeconfig: pathlib.Path, http: aiohttp.ClientSession,
        tmp_path: pathlib.Path) -> None:
    async with running_operator(kubeconfig) as operator:
        assert operator.health is not None
        base = f'http://127.0.0.1:{operator.health.port}'
        await post(http, PODS, make_pod('web-0', scheduler_name='kopfsched', requests={'cpu': '500m'}))
        await post(http, PODS, make_pod('big', scheduler_name='kopfsched', requests={'cpu': '2'}))
        await eventually(lambda: len(operator.scheduler.pending) == 1 and operator.activity.bindings,
                         what='one pod bound, one pending')
        async with async_page() as page:
            errors: list[str] = []
            page.on('pageerror', lambda exc: errors.append(str(exc)))
            external: list[str] = []
            page.on('request', lambda req: None if req.url.startswith(base) else external.append(req.url))
            await page.goto(f'{base}/')
            pending = page.locator('#pending')
            await pending.get_by_text('Insufficient cpu').wait_for(timeout=15_000)
            row = pending.locator('tr.pod', has_text='default/big')
            assert await row.locator('.reason').all_inner_texts() == [
                '2 node(s) had untolerated taint(s)', '1 Insufficient cpu']
            assert 'Unschedulable · 3 nodes' in await row.inner_text()
            profiles = await page.locator('#profiles').inner_text()
            assert 'kopfsched' in profiles and 'Ready' in profiles
            bindings = await page.locator('#bindings').inner_text()
            assert 'default/web-0' in bindings
            nodes = await page.locator('#nodes').inner_text()
            assert 'zone-a' in nodes and 'zone-b' in nodes and 'small' in nodes
            # Clicking the pod shows each node's rejection, from /debug/pending/default/big.
            await page.locator('tr.pod', has_text='default/big').click()
            await page.locator('.detail').get_by_text('gpu-1, gpu-2').wait_for(timeout=10_000)
            assert await page.locator('svg').count() == 2  # throughput and latency plots
            await page.screenshot(path=str(tmp_path / 'dashboard.png'), full_page=True)
        assert errors == []
        assert external == []
    overview = json.loads(json.dumps(operator.activity.to_json()))
    assert sum(b['scheduled'] for b in overview['series']) >= 1
