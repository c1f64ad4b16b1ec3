"""End-to-end throughput and memory of the real operator against the emulator (not a test).

    python -m tests.e2e.e2e_throughput                  # 2000 pods on 100 nodes; RSS with 5000 pods, 500 nodes
    python -m tests.e2e.e2e_throughput --pods 500 --rss-pods 1000 --rss-nodes 100

Three processes, as in a cluster: the emulator, `kopfsched run` (started as a user would, with a
KubeSchedulerConfiguration raising the client QPS so the rate limiter is not what is measured),
and this driver. Phase 1, raw capacity: this driver creates and binds the pods itself (the same
client, the same concurrency) against a fresh emulator. Phase 2, end to end: a fresh emulator,
the operator running, the driver creates the pods; the clock stops when the operator's metrics
count every pod scheduled. Phase 3: RSS of the operator once its cache holds --rss-pods bound pods
on --rss-nodes nodes. Every phase is bounded by --timeout and the processes are always stopped.
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import pathlib
import re
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator

import aiohttp
from kubernetes_asyncio import client, config

from kopfsched.emulator.server import emulator_process, write_kubeconfig
from tests.builders import make_node, make_pod

ROOT = pathlib.Path(__file__).parents[2]
SCHEDULER = 'kopfsched-bench'
CONFIG = {
    'apiVersion': 'kubescheduler.config.k8s.io/v1', 'kind': 'KubeSchedulerConfiguration',
    'clientConnection': {'qps': 5000, 'burst': 10000},
    'profiles': [{'schedulerName': SCHEDULER}],
}


async def _run_all(calls: list[Callable[[], Awaitable[object]]], *, concurrency: int) -> None:
    """Run the calls with `concurrency` in flight (as raw_capacity does)."""
    queue = list(reversed(calls))

    async def worker() -> None:
        while queue:
            await queue.pop()()
    await asyncio.gather(*(worker() for _ in range(concurrency)))


async def _bind(api: client.ApiClient, name: str, node: str) -> object:
    return await api.call_api(
        f'/api/v1/namespaces/default/pods/{name}/binding', 'POST',
        body={'apiVersion': 'v1', 'kind': 'Binding', 'metadata': {'name': name},
              'target': {'kind': 'Node', 'name': node}},
        header_params={'Content-Type': 'application/json', 'Accept': 'application/json'},
        response_types_map={201: 'V1Status'}, auth_settings=['BearerToken'], _return_http_data_only=True)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def operator_process(kubeconfig: pathlib.Path, tmp: pathlib.Path) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    config_file = tmp / 'config.json'
    config_file.write_text(json.dumps(CONFIG))
    port = _free_port()
    log = (tmp / 'operator.log').open('wb')
    process = subprocess.Popen(
        [sys.executable, '-m', 'kopfsched', 'run', '--kubeconfig', str(kubeconfig), '--config', str(config_file),
         '--no-leader-elect', '--metrics-port', str(port)], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    try:
        yield process, port
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()


async def _metric(session: aiohttp.ClientSession, port: int, pattern: str) -> float:
    try:
        async with session.get(f'http://127.0.0.1:{port}/metrics') as response:
            text = await response.text()
    except aiohttp.ClientError:
        return -1.0
    match = re.search(pattern + r' ([0-9.e+]+)', text)
    return float(match.group(1)) if match else 0.0


async def _until(session: aiohttp.ClientSession, port: int, pattern: str, value: float, *, deadline: float) -> None:
    while await _metric(session, port, pattern) < value:
        if time.monotonic() > deadline:
            raise TimeoutError(f'{pattern} did not reach {value}')
        await asyncio.sleep(0.05)


async def _ready(session: aiohttp.ClientSession, port: int, *, deadline: float) -> None:
    while True:
        with contextlib.suppress(aiohttp.ClientError):
            async with session.get(f'http://127.0.0.1:{port}/readyz') as response:
                if response.status == 200:
                    return
        if time.monotonic() > deadline:
            raise TimeoutError('the operator never became ready')
        await asyncio.sleep(0.05)


def _rss_mb(pid: int) -> float:
    for line in pathlib.Path(f'/proc/{pid}/status').read_text().splitlines():
        if line.startswith('VmRSS:'):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


async def _api(url: str, tmp: pathlib.Path) -> tuple[client.ApiClient, pathlib.Path]:
    kubeconfig = write_kubeconfig(tmp / 'kubeconfig', url=url)
    return await config.new_client_from_config(config_file=str(kubeconfig)), kubeconfig


async def raw_capacity(*, pods: int, nodes: int, concurrency: int) -> float:
    with emulator_process() as remote, tempfile.TemporaryDirectory() as tmp:
        api, _ = await _api(remote.url, pathlib.Path(tmp))
        async with api:
            core = client.CoreV1Api(api)
            await _run_all([lambda i=i: core.create_node(make_node(f'node-{i}')) for i in range(nodes)],
                           concurrency=concurrency)
            started = time.perf_counter()
            await _run_all([lambda i=i: core.create_namespaced_pod('default', make_pod(f'pod-{i}'))
                            for i in range(pods)], concurrency=concurrency)
            await _run_all([lambda i=i: _bind(api, f'pod-{i}', f'node-{i % nodes}') for i in range(pods)],
                           concurrency=concurrency)
            return pods / (time.perf_counter() - started)


async def end_to_end(*, pods: int, nodes: int, concurrency: int, timeout: float) -> tuple[float, float]:
    with emulator_process() as remote, tempfile.TemporaryDirectory() as tmp:
        api, kubeconfig = await _api(remote.url, pathlib.Path(tmp))
        async with api, aiohttp.ClientSession() as session:
            core = client.CoreV1Api(api)
            await _run_all([lambda i=i: core.create_node(make_node(f'node-{i}')) for i in range(nodes)],
                           concurrency=concurrency)
            with operator_process(kubeconfig, pathlib.Path(tmp)) as (process, port):
                deadline = time.monotonic() + timeout
                await _ready(session, port, deadline=deadline)
                started = time.perf_counter()
                await _run_all([lambda i=i: core.create_namespaced_pod(
                    'default', make_pod(f'pod-{i}', scheduler_name=SCHEDULER, requests={'cpu': '10m'}))
                    for i in range(pods)], concurrency=concurrency)
                await _until(session, port, rf'scheduler_schedule_attempts_total{{profile="{SCHEDULER}",'
                             r'result="scheduled"}', pods, deadline=deadline)
                seconds = time.perf_counter() - started
                rss = _rss_mb(process.pid)
            listed = await core.list_namespaced_pod('default')
            unbound = [p.metadata.name for p in listed.items if not p.spec.node_name]
            if unbound:
                raise RuntimeError(f'{len(unbound)} pods were not bound')
            return pods / seconds, rss


async def rss_with_cache(*, pods: int, nodes: int, concurrency: int, timeout: float) -> dict[str, float]:
    with emulator_process() as remote, tempfile.TemporaryDirectory() as tmp:
        api, kubeconfig = await _api(remote.url, pathlib.Path(tmp))
        async with api, aiohttp.ClientSession() as session:
            core = client.CoreV1Api(api)
            await _run_all([lambda i=i: core.create_node(make_node(f'node-{i}', cpu='64', pods=110))
                            for i in range(nodes)], concurrency=concurrency)
            await _run_all([lambda i=i: core.create_namespaced_pod('default', make_pod(
                f'pod-{i}', node_name=f'node-{i % nodes}', requests={'cpu': '100m', 'memory': '128Mi'}))
                for i in range(pods)], concurrency=concurrency)
            with operator_process(kubeconfig, pathlib.Path(tmp)) as (process, port):
                deadline = time.monotonic() + timeout
                await _ready(session, port, deadline=deadline)
                await _until(session, port, r'scheduler_cache_size{type="pods"}', pods, deadline=deadline)
                at_ready = _rss_mb(process.pid)
                await asyncio.sleep(7)  # kopf's per-object workers idle out after 5 s
                settled = _rss_mb(process.pid)
            return {'rss_mb_at_ready': at_ready, 'rss_mb_settled': settled}


async def main_async(args: argparse.Namespace) -> None:
    raw = await asyncio.wait_for(raw_capacity(pods=args.pods, nodes=args.nodes, concurrency=args.concurrency),
                                 args.timeout)
    e2e, rss_after_run = await end_to_end(pods=args.pods, nodes=args.nodes, concurrency=args.concurrency,
                                          timeout=args.timeout)
    print(json.dumps({'pods': args.pods, 'nodes': args.nodes, 'concurrency': args.concurrency,
                      'raw_pods_per_second': round(raw, 1), 'e2e_pods_per_second': round(e2e, 1),
                      'ratio': round(e2e / raw, 2), 'operator_rss_mb_after_run': rss_after_run}), flush=True)
    memory = await rss_with_cache(pods=args.rss_pods, nodes=args.rss_nodes, concurrency=args.concurrency,
                                  timeout=args.timeout)
    print(json.dumps({'cache_pods': args.rss_pods, 'cache_nodes': args.rss_nodes, **memory}), flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--pods', type=int, default=2000)
    parser.add_argument('--nodes', type=int, default=100)
    parser.add_argument('--rss-pods', type=int, default=5000)
    parser.add_argument('--rss-nodes', type=int, default=500)
    parser.add_argument('--concurrency', type=int, default=8, help='requests in flight from the driver')
    parser.add_argument('--timeout', type=float, default=240.0, help='give up a phase after this many seconds')
    asyncio.run(main_async(parser.parse_args(argv)))


if __name__ == '__main__':
    main()
