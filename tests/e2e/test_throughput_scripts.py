"""The end-to-end throughput script and its ideal scheduler run, small, as docs/performance.md and
CONTRIBUTING.md show them (their figures are measured by hand: nothing here times anything)."""
from __future__ import annotations

import json

import pytest

from kopfsched.emulator.server import emulator_process
from tests.builders import make_node
from tests.e2e import e2e_throughput
from tests.e2e.e2e_throughput import SCHEDULER, _ideal_phase, _run_all, driver_for


async def test_the_ideal_scheduler_binds_each_pod_once_and_posts_its_scheduled_event() -> None:
    with emulator_process() as remote:
        async with driver_for(remote.url, 8) as driver:
            await _run_all([lambda i=i: driver.create_node(make_node(f'node-{i}')) for i in range(3)], concurrency=8)
            rate, cpu = await _ideal_phase(remote.url, driver, nodes=3, pods=12, namespace='ideal', concurrency=8,
                                           timeout=300)  # generous: a loaded machine slows the start-up
            pods = (await driver.get('/api/v1/namespaces/ideal/pods'))['items']
            events = (await driver.get('/apis/events.k8s.io/v1/namespaces/ideal/events'))['items']
    assert rate > 0 and set(cpu) == {'emulator_cpu_ms_per_pod', 'ideal_cpu_ms_per_pod', 'driver_cpu_ms_per_pod'}
    nodes = {p['metadata']['name']: p['spec']['nodeName'] for p in pods}
    assert sorted(nodes) == sorted(f'pod-{i}' for i in range(12))
    assert sorted(nodes.values()) == sorted(f'node-{i % 3}' for i in range(12))  # round robin over the nodes
    assert sorted((e['regarding']['name'], e['reason'], e['action'], e['reportingController'], e['note'])
                  for e in events) == sorted(
        (name, 'Scheduled', 'Binding', SCHEDULER, f'Successfully assigned ideal/{name} to {node}')
        for name, node in nodes.items())


async def test_the_script_reports_the_operators_ratio_next_to_the_ceiling(capsys: pytest.CaptureFixture[str]) -> None:
    await e2e_throughput.main_async(e2e_throughput.parse_args(
        ['--pods', '300', '--nodes', '3', '--rss-pods', '0', '--ceiling', '--timeout', '300']))
    run = json.loads(capsys.readouterr().out.splitlines()[0])
    assert run['ratio'] == round(run['e2e_pods_per_second'] / run['raw_pods_per_second'], 2)
    assert run['of_ideal'] == round(run['e2e_pods_per_second'] / run['ideal_pods_per_second'], 2)
    assert run['emulator_ceiling'] == round(
        run['raw']['emulator_cpu_ms_per_pod'] / run['emulator_cpu_ms_per_pod'], 2)
    assert run['ideal']['emulator_ceiling'] == round(
        run['raw']['emulator_cpu_ms_per_pod'] / run['ideal']['emulator_cpu_ms_per_pod'], 2)
