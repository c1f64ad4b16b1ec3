"""kopfsched at scale on the real control plane: kwok managing N nodes holding M running pods
in a real kube-apiserver and etcd, then `kopfsched run` started, made ready and given P new
pods to bind. Reports the operator's time to ready, its peak RSS and its pods/s.

    python -m benchmarks.real_cluster_scale [--nodes 5000] [--running 50000] [--pods 5000] [--qps 5000] [-o json]

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
import sys
import tempfile
import time
from collections.abc import Iterable
from typing import Any

import aiohttp

from benchmarks.side_by_side import _lines, cpu_seconds, peak_rss_mib
from kopfsched.testing import make_node, make_pod
from tests.cluster.operator_process import OperatorProcess
from tests.kubeenv.control_plane import ControlPlane, Options

ROOT = pathlib.Path(__file__).parents[1]
CREATORS = 30
NAMESPACE = 'scale'


async def create_all(cluster: ControlPlane, path: str, bodies: Iterable[dict[str, Any]], *,
                     deadline: float, created_at: dict[str, float] | None = None) -> int:
    """POST every body with CREATORS concurrent clients; the number created. `created_at`, if
    given, receives each object's name and the monotonic time its POST returned."""
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
                            if created_at is not None:
                                created_at[body['metadata']['name']] = time.monotonic()
                            break
                        if response.status != 429 and response.status < 500:
                            raise RuntimeError(f'POST {path}: {response.status} {await response.text()}')
                    await asyncio.sleep(0.1 * (attempt + 1))
        await asyncio.gather(*(creator() for _ in range(CREATORS)))
    return created


NEW_LABEL = {'kopfsched.dev/scale': 'new'}
"""On the new pods: the watch of bindings streams them only, not the running ones."""


async def watch_bound(cluster: ControlPlane, count: int, *, deadline: float) -> dict[str, float]:
    """The monotonic time at which each of `count` pods labelled NEW_LABEL got a nodeName:
    one watch resumed from the last resourceVersion seen (relisted on 410), as a reflector."""
    context = ssl.create_default_context(cafile=str(cluster.ca_file))
    context.load_cert_chain(str(cluster.admin.cert), str(cluster.admin.key))
    selector = ','.join(f'{key}={value}' for key, value in NEW_LABEL.items())
    path = f'/api/v1/namespaces/{NAMESPACE}/pods'
    seen: dict[str, float] = {}
    since = ''
    async with aiohttp.ClientSession(cluster.url, connector=aiohttp.TCPConnector(ssl=context)) as http:
        while len(seen) < count and time.monotonic() < deadline:
            if not since:
                async with http.get(path, params={'labelSelector': selector}) as response:
                    listed = await response.json()
                for obj in listed['items']:
                    if obj['spec'].get('nodeName'):
                        seen.setdefault(obj['metadata']['name'], time.monotonic())
                since = listed['metadata']['resourceVersion']
            params = {'watch': '1', 'labelSelector': selector, 'resourceVersion': since, 'timeoutSeconds': '60'}
            async with http.get(path, params=params,
                                timeout=aiohttp.ClientTimeout(total=None, sock_read=90)) as response:
                async for line in _lines(response):
                    event = json.loads(line)
                    obj = event['object']
                    if event['type'] == 'ERROR':  # a Status: 410 means relist, anything else reconnect
                        print(f'scale: watch ERROR {obj.get("code")}: {obj.get("message")}', file=sys.stderr)
                        if obj.get('code') == 410:
                            since = ''
                        break
                    since = obj['metadata']['resourceVersion']
                    if obj['spec'].get('nodeName'):
                        seen.setdefault(obj['metadata']['name'], time.monotonic())
                    if len(seen) >= count or time.monotonic() > deadline:
                        break
    return seen


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] if ordered else 0.0


MEAN_METRICS = ('scheduler_scheduling_attempt_duration_seconds', 'scheduler_pod_scheduling_sli_duration_seconds')


def operator_means(metrics: str) -> dict[str, float]:
    """Mean scheduling attempt and SLI duration (queue entry to bound) as the operator measured
    them: where the pods' wait was spent, inside the scheduler or before it saw them."""
    sums: dict[str, float] = {}
    for line in metrics.splitlines():
        name, _, value = line.partition(' ')
        for metric in MEAN_METRICS:
            if name.startswith(metric + '_sum') or name.startswith(metric + '_count'):
                key = metric + ('_sum' if '_sum' in name else '_count')
                sums[key] = sums.get(key, 0.0) + float(value)
    return {f'operator_{metric.split("_", 2)[2].removesuffix("_seconds")}_mean_s':
            round(sums[metric + '_sum'] / sums[metric + '_count'], 4)
            for metric in MEAN_METRICS if sums.get(metric + '_count')}


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
                                                        for i in range(args.nodes)), deadline=phase + 3600)
            running = (make_pod(f'running-{i}', NAMESPACE, node_name=f'node-{i % args.nodes}',
                                requests={'cpu': '100m', 'memory': '500Mi'}) for i in range(args.running))
            await create_all(cluster, f'/api/v1/namespaces/{NAMESPACE}/pods', running, deadline=phase + 3600)
            figures['populate_s'] = round(time.monotonic() - phase, 1)
            print(f'scale: {args.nodes} nodes and {args.running} running pods in {figures["populate_s"]} s',
                  file=sys.stderr, flush=True)

            kubeconfig = cluster.kubeconfig_for_service_account('kopfsched-system', 'kopfsched')
            started = time.monotonic()
            config = pathlib.Path(workdir) / 'kopfsched-config.yaml'
            config.write_text(json.dumps({'apiVersion': 'kubescheduler.config.k8s.io/v1',
                                          'kind': 'KubeSchedulerConfiguration',
                                          'clientConnection': {'qps': args.qps, 'burst': args.qps},
                                          'profiles': [{'schedulerName': 'kopfsched'}]}))
            operator = OperatorProcess(cluster, kubeconfig, config=config).start()
            try:
                operator.wait_ready(timeout=600)
                assert operator.process is not None
                figures['operator_ready_s'] = round(time.monotonic() - started, 1)
                figures['operator_rss_ready_mib'] = round(peak_rss_mib(operator.process.pid), 1)
                deadline = time.monotonic() + 1200
                watcher = asyncio.create_task(watch_bound(cluster, args.pods, deadline=deadline))
                await asyncio.sleep(1)  # the watch is open before the first pod arrives
                first, cpu_before = time.monotonic(), cpu_seconds(operator.process.pid)
                new = (make_pod(f'new-{i}', NAMESPACE, scheduler_name='kopfsched', labels=NEW_LABEL,
                                requests={'cpu': '100m', 'memory': '500Mi'}) for i in range(args.pods))
                created_at: dict[str, float] = {}
                await create_all(cluster, f'/api/v1/namespaces/{NAMESPACE}/pods', new, deadline=deadline,
                                 created_at=created_at)
                created = time.monotonic()
                bound = await watcher
                last = max(bound.values(), default=first)
                figures['bound'] = len(bound)
                # Binding can go no faster than pods arrive: the creator's rate is the ceiling.
                figures['created_per_second'] = round(len(created_at) / (created - first), 1)
                figures['pods_per_second'] = round(len(bound) / (last - first), 1) if bound else 0.0
                latencies = [bound[name] - created_at[name] for name in bound if name in created_at]
                figures['latency_p50_s'] = round(percentile(latencies, 0.5), 3)
                figures['latency_p99_s'] = round(percentile(latencies, 0.99), 3)
                figures['operator_cpu_ms_per_pod'] = round(
                    1000 * (cpu_seconds(operator.process.pid) - cpu_before) / max(1, len(bound)), 2)
                figures.update(operator_means(operator.get('/metrics')[1]))
                figures['operator_peak_rss_mib'] = round(peak_rss_mib(operator.process.pid), 1)
                print(json.dumps(figures), file=sys.stderr, flush=True)  # kept if the stop fails
            finally:
                stopping = time.monotonic()
                try:
                    operator.stop(timeout=60)
                    figures['operator_stop_s'] = round(time.monotonic() - stopping, 1)
                except AssertionError as error:
                    figures['operator_stop_s'] = 'not within 60 s'
                    print(error, file=sys.stderr)  # its last lines: the steps it finished, each thread's stack
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--nodes', type=int, default=5000)
    parser.add_argument('--running', type=int, default=50_000)
    parser.add_argument('--pods', type=int, default=5000)
    parser.add_argument('--qps', type=int, default=5000,
                        help="the operator's client QPS and burst (scheduler_perf's 5000; upstream's default is 50)")
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
