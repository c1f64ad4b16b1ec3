"""The end-to-end throughput script and its ideal scheduler run, small, as the README shows them
(their figures are measured by hand: nothing here asserts a speed)."""
from __future__ import annotations

import json
import time
from typing import Any

import pytest

from benchmarks import e2e_throughput
from benchmarks.e2e_throughput import SCHEDULER, _ideal_phase, _run_all, driver_for
from kopfsched.emulator.server import emulator_process
from tests.builders import make_node

pytestmark = pytest.mark.timeout(600)  # the scripts' own subprocess timeouts are 300 s


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


async def test_the_script_runs_small_and_reports_every_figure(capsys: pytest.CaptureFixture[str]) -> None:
    """The real phases, small: one run's line with its counts, and rates the run's own wall time
    bounds (a phase cannot take longer than the whole run)."""
    started = time.perf_counter()
    await e2e_throughput.main_async(e2e_throughput.parse_args(
        ['--pods', '300', '--nodes', '3', '--rss-pods', '0', '--ceiling', '--timeout', '300']))
    elapsed = time.perf_counter() - started
    [line] = capsys.readouterr().out.splitlines()
    run = json.loads(line)
    assert (run['pods'], run['nodes']) == (300, 3)
    for rate in ('raw_pods_per_second', 'e2e_pods_per_second', 'ideal_pods_per_second'):
        assert 300 / run[rate] < elapsed, f'{rate} {run[rate]}: 300 pods in more than the run took'
    assert set(run['raw']) == {'emulator_cpu_ms_per_pod', 'driver_cpu_ms_per_pod'}


async def test_the_ratios_are_the_operators_rate_over_the_raw_and_ideal_ones(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The report's arithmetic, on phases that return known figures: each ratio checked against
    the value worked out by hand, not against the script's own fields."""
    raw_cpu = {'emulator_cpu_ms_per_pod': 2.0, 'driver_cpu_ms_per_pod': 1.0}
    e2e_cpu = {'emulator_cpu_ms_per_pod': 4.0, 'driver_cpu_ms_per_pod': 1.0, 'operator_cpu_ms_per_pod': 7.0}
    ideal_cpu = {'emulator_cpu_ms_per_pod': 3.0, 'driver_cpu_ms_per_pod': 1.0, 'ideal_cpu_ms_per_pod': 2.0}

    async def raw_capacity(**_: Any) -> tuple[float, dict[str, float]]:
        return 400.0, raw_cpu

    async def end_to_end(**_: Any) -> tuple[float, float, dict[str, float]]:
        return 100.0, 123.0, e2e_cpu

    async def ceiling(**_: Any) -> tuple[float, dict[str, float]]:
        return 250.0, ideal_cpu

    monkeypatch.setattr(e2e_throughput, 'raw_capacity', raw_capacity)
    monkeypatch.setattr(e2e_throughput, 'end_to_end', end_to_end)
    monkeypatch.setattr(e2e_throughput, 'ceiling', ceiling)
    await e2e_throughput.main_async(e2e_throughput.parse_args(['--pods', '300', '--rss-pods', '0', '--ceiling']))
    run = json.loads(capsys.readouterr().out.splitlines()[0])
    assert (run['raw_pods_per_second'], run['e2e_pods_per_second'], run['ideal_pods_per_second']) == (400, 100, 250)
    assert (run['ratio'], run['of_ideal'], run['ideal_ratio']) == (0.25, 0.4, 0.62)  # 100/400, 100/250, 250/400
    assert run['cpu_ratio'] == 0.25  # (2 + 1) / (4 + 1 + 7)
    assert run['emulator_ceiling'] == 0.5  # 2 / 4
    assert (run['ideal']['cpu_ratio'], run['ideal']['emulator_ceiling']) == (0.5, 0.67)  # 3 / 6, 2 / 3
    assert run['operator_rss_mb_after_run'] == 123.0


async def test_the_rss_benchmark_runs_as_documented(capsys: pytest.CaptureFixture[str]) -> None:
    """docs/operations.md's commands, on a small cluster: every pod cached, one JSON line with the RSS."""
    from benchmarks import rss_benchmark

    result = await rss_benchmark.measure(nodes=4, pods=20, keep_managed_fields=False, concurrency=4,
                                         containers=4, long_labels=True)
    printed = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert printed == result
    assert (result["cached_pods"], result["containers"], result["long_labels"]) == (20, 4, True)
    assert result["rss_mib"] > 0
    pod = rss_benchmark.running_pod("p", "n", 7, containers=4, long_labels=True)
    assert len(pod["spec"]["containers"]) == 4 and len(pod["metadata"]["labels"]) == 8
    assert all(len(c["env"]) == 12 for c in pod["spec"]["containers"])
