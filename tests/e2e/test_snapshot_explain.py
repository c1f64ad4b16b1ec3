"""Snapshot, explain and simulate against a live (emulated) cluster the real operator has scheduled:
the snapshot round-trips into simulate with the operator's own reasons, and explain writes nothing."""
from __future__ import annotations

import asyncio
import contextlib
import io
import json
import pathlib
from typing import Any

import aiohttp
import pytest
import yaml
from kubernetes_asyncio import client as k8s

from kopfsched.cli import main
from kopfsched.emulator.server import FastKubernetesEmulator
from kopfsched.kube.client import KubeClusterClient
from kopfsched.kube.operator import load_configuration
from kopfsched.kube.snapshot import LAST_APPLIED, write_snapshot
from tests.builders import make_node, make_pod, taint
from tests.e2e.operator_harness import eventually, post, running_operator
from tests.kubectl import install

pytestmark = pytest.mark.http(controller_kinds=False, crd=False, profiles=())

PODS = '/api/v1/namespaces/default/pods'
FITS = [f'web-{i}' for i in range(5)]
PENDING = {'huge': dict(requests={'cpu': '3'}),
           'picky': dict(node_selector={'disk': 'ssd'}),
           'crowded': dict(requests={'cpu': '1500m'})}


def condition(emulator: FastKubernetesEmulator, name: str) -> dict[str, Any] | None:
    pod = emulator.get_object('pods', 'default', name) or {}
    return next((c for c in (pod.get('status') or {}).get('conditions') or () if c['type'] == 'PodScheduled'), None)


async def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """`kopfsched ...` as a user runs it (its own event loop, in a thread)."""
    code = await asyncio.to_thread(main, list(argv))
    out, err = capsys.readouterr()
    return code, out, err


async def scheduled_cluster(emulator: FastKubernetesEmulator, kubeconfig: pathlib.Path,
                            http: aiohttp.ClientSession) -> None:
    """Three 2-cpu nodes (one tainted); the operator binds FITS and leaves PENDING with reasons."""
    for name, extra in (('node-a', {}), ('node-b', {}), ('node-c', {'taints': [taint('dedicated', 'gpu')]})):
        await post(http, '/api/v1/nodes', make_node(name, cpu='2', **extra))
    for i, name in enumerate(FITS):
        pod = make_pod(name, scheduler_name='kopfsched', requests={'cpu': '500m'},
                       creation_timestamp=f'2026-01-01T00:00:0{i}Z')
        pod['metadata']['annotations'] = {LAST_APPLIED: '{"a": "lot"}', 'team': 'web'}
        pod['metadata']['managedFields'] = [{'manager': 'kubectl', 'operation': 'Update'}]
        await post(http, PODS, pod)
    async with running_operator(kubeconfig):
        await eventually(lambda: all(emulator.get_object('pods', 'default', n)['spec'].get('nodeName') for n in FITS),
                         what='the pods that fit bound')
        for name, extra in PENDING.items():
            await post(http, PODS, make_pod(name, scheduler_name='kopfsched', creation_timestamp='2026-01-01T00:01:00Z',
                                            **extra))
        await eventually(lambda: all((condition(emulator, n) or {}).get('reason') == 'Unschedulable' for n in PENDING),
                         timeout=20, what='the pending pods reported')


@pytest.fixture
async def cluster(emulator: FastKubernetesEmulator, kubeconfig: pathlib.Path, tmp_path: pathlib.Path,
                  http: aiohttp.ClientSession) -> pathlib.Path:
    install(kubeconfig, tmp_path, 'kopfsched')
    await scheduled_cluster(emulator, kubeconfig, http)
    return kubeconfig


async def test_snapshot_round_trips_into_simulate_with_the_operators_reasons(
        emulator: FastKubernetesEmulator, cluster: pathlib.Path, tmp_path: pathlib.Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / 'snapshot.yaml'
    mutations = len(emulator.mutations())
    code, _, err = await cli(capsys, 'snapshot', '--kubeconfig', str(cluster), '-o', str(out))
    assert code == 0, err
    assert 'snapshot: pods: 8 in ' in err and 'objects written' in err
    assert len(emulator.mutations()) == mutations  # read-only
    docs = [d for d in yaml.safe_load_all(out.read_text()) if d]
    kinds = [d['kind'] for d in docs]
    assert kinds.count('Node') == 3 and kinds.count('Pod') == 8 and kinds.count('SchedulerProfile') == 1
    web = next(d for d in docs if d['kind'] == 'Pod' and d['metadata']['name'] == 'web-0')
    assert 'managedFields' not in web['metadata']
    assert web['metadata']['annotations'] == {'team': 'web'}

    code, report, err = await cli(capsys, 'simulate', str(out), '-o', 'json')
    assert code == 0, err
    report = json.loads(report)
    results = {p['name']: p for p in report['pods']}
    for name in PENDING:
        written = condition(emulator, name)
        assert written is not None
        assert results[name]['result'] == 'Unschedulable'
        assert results[name]['message'] == written['message'], name
    bound = {n: sum(1 for p in FITS if emulator.get_object('pods', 'default', p)['spec']['nodeName'] == n)
             for n in ('node-a', 'node-b', 'node-c')}
    assert {n['name']: n['pods'] for n in report['nodes']} == bound  # running pods stay where they were put
    assert not set(results) & set(FITS)


async def test_explain_live_writes_nothing_and_gives_the_operators_reason(
        emulator: FastKubernetesEmulator, cluster: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = len(emulator.mutations())
    code, out, err = await cli(capsys, 'explain', 'default/crowded', '--kubeconfig', str(cluster), '-o', 'json')
    assert code == 0, err
    entry = json.loads(out)
    assert entry['message'] == condition(emulator, 'crowded')['message']
    assert entry['filter']['node-c']['reasons'] == ['node(s) had untolerated taint(s)']
    assert set(entry['filter']) == {'node-a', 'node-b', 'node-c'}
    code, table, err = await cli(capsys, 'explain', 'default/web-0', '--kubeconfig', str(cluster))
    assert code == 0, err
    assert 'Note: the pod is bound to node-' in table
    assert len(emulator.mutations()) == before, emulator.mutations()[before:]


async def test_snapshot_pages_with_limit_and_continue(emulator: FastKubernetesEmulator, kubeconfig: pathlib.Path,
                                                      http: aiohttp.ClientSession) -> None:
    for i in range(7):
        await post(http, '/api/v1/nodes', make_node(f'n{i}'))
    for i in range(11):
        await post(http, PODS, make_pod(f'p{i}'))
    lines: list[str] = []
    out = io.StringIO()
    async with contextlib.AsyncExitStack() as stack:
        api = await stack.enter_async_context(k8s.ApiClient(await load_configuration(str(kubeconfig))))
        written = await write_snapshot(KubeClusterClient(api), out, page_size=3, progress=lines.append)
    docs = [d for d in yaml.safe_load_all(out.getvalue()) if d]
    names = [(d['kind'], d['metadata']['name']) for d in docs]
    assert written == len(docs)
    assert sorted(n for k, n in names if k == 'Pod') == sorted(f'p{i}' for i in range(11))
    assert sorted(n for k, n in names if k == 'Node') == sorted(f'n{i}' for i in range(7))
    assert len(names) == len(set(names))
    assert any(line.startswith('pods: 11 in ') for line in lines)


@pytest.mark.parametrize('command', [['snapshot'], ['simulate'], ['explain', 'default/web']], ids=str)
def test_an_unusable_kubeconfig_is_one_line(command: list[str], tmp_path: pathlib.Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*command, '--kubeconfig', str(tmp_path / 'missing')]) == 1
    assert capsys.readouterr().err == f'{tmp_path / "missing"}: cannot read: No such file or directory\n'
