"""kopfsched at scale on the real control plane: kwok managing N nodes holding M running pods
in a real kube-apiserver and etcd, then `kopfsched run` started, made ready and given P new
pods to bind. Reports the operator's time to ready, its peak RSS and its pods/s.

    python -m benchmarks.real_cluster_scale [--nodes 5000] [--running 50000] [--pods 5000] [-o json]

A benchmark, not a test: every loop is bounded (counts and a deadline per phase). The
objects are created by 30 parallel clients at no client-side rate limit, as scheduler_perf's
creators are; the audit log is off (it would be gigabytes) and kwok's node heartbeat too
(no node-lifecycle controller reads it).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import pathlib
import ssl
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterable
from typing import Any

import aiohttp

from kopfsched.testing import make_node, make_pod
from tests.kubeenv.control_plane import ControlPlane, Options

ROOT = pathlib.Path(__file__).parents[1]
CREATORS = 30
NAMESPACE = 'scale'


async def create_all(cluster: ControlPlane, path: str, bodies: Iterable[dict[str, Any]], *,
                     deadline: float) -> int:
    """POST every body with CREATORS concurrent clients; the number created."""
    context = ssl.create_default_context(cafile=str(cluster.ca_file))
    context.load_cert_chain(str(cluster.admin.cert), str(cluster.admin.key))
    pending = iter(bodies)
    created = 0
    async with aiohttp.ClientSession(cluster.url, connector=aiohttp.TCPConnector(ssl=context,
                                                                                 limit=CREATORS)) as http:
        async def creator() -> None:
            nonlocal created
            for body in pending:
                if time.monotonic() > deadline:
                    raise TimeoutError(f'creating {path}: past the deadline after {created}')
                for attempt in range(5):
                    async with http.post(path, json=body) as response:
                        if response.status in (200, 201):
                            created += 1
                            break
                        if response.status != 429 and response.status < 500:
                            raise RuntimeError(f'POST {path}: {response.status} {await response.text()}')
                    await asyncio.sleep(0.1 * (attempt + 1))
        await asyncio.gather(*(creator() for _ in range(CREATORS)))
    return created


async def watch_bound(cluster: ControlPlane, count: int, *, deadline: float) -> list[float]:
    """Monotonic times at which each of `count` pods of NAMESPACE got a nodeName."""
    context = ssl.create_default_context(cafile=str(cluster.ca_file))
    context.load_cert_chain(str(cluster.admin.cert), str(cluster.admin.key))
    seen: dict[str, float] = {}
    async with aiohttp.ClientSession(cluster.url, connector=aiohttp.TCPConnector(ssl=context)) as http:
        while len(seen) < count and time.monotonic() < deadline:
            params = {'watch': '1', 'allowWatchBookmarks': 'false', 'timeoutSeconds': '60'}
            async with http.get(f'/api/v1/namespaces/{NAMESPACE}/pods', params=params,
                                timeout=aiohttp.ClientTimeout(total=None, sock_read=90)) as response:
                async for line in _lines(response):
                    event = json.loads(line)
                    obj = event['object']
                    if obj.get('spec', {}).get('nodeName') and obj['metadata']['name'] not in seen:
                        seen[obj['metadata']['name']] = time.monotonic()
                    if len(seen) >= count or time.monotonic() > deadline:
                        break
    return sorted(seen.values())


async def _lines(response: aiohttp.ClientResponse) -> AsyncIterator[bytes]:
    async for line in response.content:
        if line.strip():
            yield line


def peak_rss_mib(pid: int) -> float:
    for line in pathlib.Path(f'/proc/{pid}/status').read_text().splitlines():
        if line.startswith('VmHWM:'):
            return int(line.split()[1]) / 1024
    return 0.0


async def run(args: argparse.Namespace) -> dict[str, Any]:
    figures: dict[str, Any] = {'nodes': args.nodes, 'running_pods': args.running, 'new_pods': args.pods}
    with tempfile.TemporaryDirectory(prefix='kubeenv-scale-') as workdir:
        options = Options(audit=False, kwok_heartbeat=False, controllers=('serviceaccount-controller',),
                          apiserver_flags={'max-requests-inflight': '1000', 'max-mutating-requests-inflight': '500'})
        started = time.monotonic()
        with ControlPlane(pathlib.Path(workdir), options=options) as cluster:
            figures['control_plane_ready_s'] = round(time.monotonic() - started, 1)
            applied = cluster.kubectl('apply', '-f', str(ROOT / 'crds'), '-f', str(ROOT / 'manifests'))
            if applied.returncode != 0:
                raise RuntimeError(applied.stderr)
            cluster.post('/api/v1/namespaces', {'apiVersion': 'v1', 'kind': 'Namespace',
                                                'metadata': {'name': NAMESPACE}})
            cluster.wait_for(lambda: cluster.get(f'/api/v1/namespaces/{NAMESPACE}/serviceaccounts/default'),
                             timeout=60, what='the default ServiceAccount')
            phase = time.monotonic()
            await create_all(cluster, '/api/v1/nodes', (make_node(f'node-{i}', cpu='32', memory='256Gi', pods=110)
                                                        for i in range(args.nodes)), deadline=phase + 900)
            running = (make_pod(f'running-{i}', NAMESPACE, node_name=f'node-{i % args.nodes}',
                                requests={'cpu': '100m', 'memory': '500Mi'}) for i in range(args.running))
            await create_all(cluster, f'/api/v1/namespaces/{NAMESPACE}/pods', running, deadline=phase + 1800)
            figures['populate_s'] = round(time.monotonic() - phase, 1)
            print(f'scale: {args.nodes} nodes and {args.running} running pods in {figures["populate_s"]} s',
                  file=sys.stderr, flush=True)

            kubeconfig = cluster.kubeconfig_for_service_account('kopfsched-system', 'kopfsched')
            log = open(pathlib.Path(workdir) / 'operator.log', 'wb')  # noqa: SIM115  # closed below
            started = time.monotonic()
            operator = subprocess.Popen([sys.executable, '-m', 'kopfsched', 'run', f'--kubeconfig={kubeconfig}',
                                         '--no-leader-elect', f'--metrics-port={args.metrics_port}', '--secure-port=0'],
                                        stdout=log, stderr=subprocess.STDOUT)
            try:
                cluster.wait_for(lambda: _ready(args.metrics_port) or operator.poll() is not None,
                                 timeout=600, what='kopfsched ready', interval=0.2)
                if operator.poll() is not None:
                    raise RuntimeError(f'kopfsched exited {operator.returncode}')
                figures['operator_ready_s'] = round(time.monotonic() - started, 1)
                figures['operator_rss_ready_mib'] = round(peak_rss_mib(operator.pid), 1)
                deadline = time.monotonic() + 1200
                watcher = asyncio.create_task(watch_bound(cluster, args.pods, deadline=deadline))
                await asyncio.sleep(1)  # the watch is open before the first pod arrives
                first = time.monotonic()
                new = (make_pod(f'new-{i}', NAMESPACE, scheduler_name='kopfsched',
                                requests={'cpu': '100m', 'memory': '500Mi'}) for i in range(args.pods))
                await create_all(cluster, f'/api/v1/namespaces/{NAMESPACE}/pods', new, deadline=deadline)
                bound = await watcher
                figures['bound'] = len(bound)
                figures['pods_per_second'] = round(len(bound) / (bound[-1] - first), 1) if bound else 0.0
                figures['operator_peak_rss_mib'] = round(peak_rss_mib(operator.pid), 1)
            finally:
                operator.terminate()
                operator.wait(timeout=60)
                log.close()
    return figures


def _ready(port: int) -> bool:
    import urllib.request
    try:
        with urllib.request.urlopen(f'http://127.0.0.1:{port}/readyz', timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--nodes', type=int, default=5000)
    parser.add_argument('--running', type=int, default=50_000)
    parser.add_argument('--pods', type=int, default=5000)
    parser.add_argument('--metrics-port', type=int, default=18251)
    parser.add_argument('-o', '--output', choices=('table', 'json'), default='table')
    args = parser.parse_args()
    figures = asyncio.run(run(args))
    if args.output == 'json':
        print(json.dumps(figures))
    else:
        for key, value in figures.items():
            print(f'{key:28} {value}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
