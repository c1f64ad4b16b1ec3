"""The operator's memory at scale, with the managedFields a real API server puts on every object.

    python -m benchmarks.rss_benchmark --nodes 5000 --pods 50000             # what the cache keeps now
    python -m benchmarks.rss_benchmark --nodes 5000 --pods 50000 --keep-managed-fields   # as before
    python -m benchmarks.rss_benchmark --nodes 5000 --pods 55000 --containers 4 --long-labels  # production-like pods

The emulator runs in a subprocess (its memory is not counted) and serves nodes and bound pods
as a real server does: each with managedFields (the creating manager's fieldsV1, status
included) and list items without kind/apiVersion. The real operator (kopf + kubernetes_asyncio
over HTTP) then starts in this process: its own paged LIST fills the cache, kopf lists and
watches every kind. Once the cache holds every pod and kopf's listing has settled, the
process's resident set size (VmRSS) is read after a garbage collection. With
--keep-managed-fields the operator's trimming is switched off, which is what it did before.
Run each mode in a process of its own: RSS does not shrink back within one.
"""
from __future__ import annotations

import argparse
import asyncio
import gc
import json
import pathlib
import tempfile
import time
from typing import Any

import aiohttp

from kopfsched.emulator.server import emulator_process, write_kubeconfig
from kopfsched.kube import informer
from kopfsched.kube.operator import Operator, OperatorOptions
from tests.builders import make_node, make_pod


def rss_mib() -> float:
    for line in pathlib.Path('/proc/self/status').read_text().splitlines():
        if line.startswith('VmRSS:'):
            return int(line.split()[1]) / 1024
    raise RuntimeError('no VmRSS in /proc/self/status')


def running_pod(name: str, node: str, i: int, *, containers: int = 2, long_labels: bool = False) -> dict[str, Any]:
    """A bound pod as a Deployment's ReplicaSet makes it and the kubelet reports it.

    With `containers` above 2 and `long_labels`, the pod looks like a production one: sidecars
    with env, mounts and probes, long app.kubernetes.io labels and annotations."""
    labels = {'app': f'app-{i % 50}', 'pod-template-hash': 'abc123'}
    if long_labels:
        labels |= {f'app.kubernetes.io/{k}': f'{k}-of-the-team-{i % 40}-service-{i % 50}-{"x" * 20}'
                   for k in ('name', 'instance', 'component', 'part-of', 'managed-by', 'version')}
    requests = [{'cpu': '100m', 'memory': '128Mi'}] + [{'cpu': '10m', 'memory': '32Mi'}] * (containers - 1)
    images = ['registry.example.com/app:1.2.3'] + [f'registry.example.com/sidecar-{c}:4.5.6'
                                                   for c in range(1, containers)]
    pod = make_pod(name, 'default', node_name=node, labels=labels, requests=requests, images=images)
    if long_labels:
        pod['metadata']['annotations'] = {
            'prometheus.io/scrape': 'true', 'prometheus.io/port': '9090',
            'kubectl.kubernetes.io/restartedAt': '2026-01-01T00:00:00Z',
            'checksum/config': 'a' * 64, 'checksum/secret': 'b' * 64}
    if containers > 2:
        for c in pod['spec']['containers']:
            c['env'] = [{'name': f'ENV_VARIABLE_{e}', 'value': f'value-{e}-' + 'v' * 24} for e in range(12)]
            c['volumeMounts'] = [{'name': f'vol-{v}', 'mountPath': f'/var/run/secrets/vol-{v}', 'readOnly': True}
                                 for v in range(3)]
            c['readinessProbe'] = {'httpGet': {'path': '/ready', 'port': 8080}, 'periodSeconds': 10}
            c['livenessProbe'] = {'httpGet': {'path': '/live', 'port': 8080}, 'periodSeconds': 10}
            c['ports'] = [{'containerPort': 8080, 'name': 'http', 'protocol': 'TCP'}]
        pod['spec']['volumes'] = [{'name': f'vol-{v}', 'projected': {'sources': [
            {'serviceAccountToken': {'expirationSeconds': 3607, 'path': 'token'}}]}} for v in range(3)]
    pod['status'] = {
        'phase': 'Running', 'hostIP': '10.0.0.1', 'podIP': f'10.1.{i // 250 % 250}.{i % 250}',
        'conditions': [{'type': t, 'status': 'True', 'lastTransitionTime': '2026-01-01T00:00:00Z'}
                       for t in ('PodReadyToStartContainers', 'Initialized', 'Ready', 'ContainersReady',
                                 'PodScheduled')],
        'containerStatuses': [{'name': c['name'], 'image': c['image'], 'imageID': c['image'] + '@sha256:0',
                               'ready': True, 'restartCount': 0, 'started': True,
                               'state': {'running': {'startedAt': '2026-01-01T00:00:00Z'}}}
                              for c in pod['spec']['containers']],
    }
    return pod


async def load(url: str, *, nodes: int, pods: int, concurrency: int, containers: int, long_labels: bool) -> float:
    started = time.perf_counter()
    bodies = [('/api/v1/nodes', make_node(f'node-{i}', cpu='32', memory='128Gi', pods=pods // nodes + 10))
              for i in range(nodes)]
    bodies += [('/api/v1/namespaces/default/pods',
                running_pod(f'pod-{i}', f'node-{i % nodes}', i, containers=containers, long_labels=long_labels))
               for i in range(pods)]
    bodies.reverse()
    async with aiohttp.ClientSession(url) as http:
        async def worker() -> None:
            while bodies:
                path, body = bodies.pop()
                async with http.post(path, json=body, headers={'User-Agent': 'kube-controller-manager/v1.34'}) as r:
                    if r.status != 201:
                        raise RuntimeError(f'{path}: {r.status} {await r.text()}')
        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.perf_counter() - started


async def measure(*, nodes: int, pods: int, keep_managed_fields: bool, concurrency: int,
                  containers: int = 2, long_labels: bool = False) -> dict[str, Any]:
    if keep_managed_fields:
        informer.trimmed = lambda obj: obj  # type: ignore[assignment]  # the operator as it was
    with emulator_process() as remote, tempfile.TemporaryDirectory() as tmp:
        loaded = await load(remote.url, nodes=nodes, pods=pods, concurrency=concurrency, containers=containers,
                            long_labels=long_labels)
        baseline = rss_mib()
        kubeconfig = write_kubeconfig(pathlib.Path(tmp) / 'kubeconfig', url=remote.url)
        options = OperatorOptions(kubeconfig=str(kubeconfig), leader_elect=False, metrics_port=None)
        async with Operator.connected(options) as operator:
            stop = asyncio.Event()
            task = asyncio.create_task(operator.run(stop))
            began = time.perf_counter()
            deadline = began + 900
            while not operator.ready() and not task.done() and time.perf_counter() < deadline:
                await asyncio.sleep(0.5)
            listed = time.perf_counter() - began
            # kopf's own listing of the same objects arrives through the feed meanwhile: let it settle.
            settled, last = 0, -1
            while settled < 10 and time.perf_counter() < deadline:
                await asyncio.sleep(1.0)
                seen = operator.informer.feed.count('Pod')
                settled, last = (settled + 1, last) if seen == last else (0, seen)
            gc.collect()
            rss = rss_mib()
            cached = sum(1 for _ in operator.cache.pods())
            result = {'nodes': nodes, 'pods': pods, 'containers': containers, 'long_labels': long_labels,
                      'managed_fields_kept': keep_managed_fields, 'cached_pods': cached,
                      'load_s': round(loaded, 1), 'initial_listing_s': round(listed, 1),
                      'rss_before_operator_mib': round(baseline, 1), 'rss_mib': round(rss, 1)}
            # Printed now: on a busy machine the emulator's shutdown can time out afterwards.
            print(json.dumps(result), flush=True)
            stop.set()
            await asyncio.wait_for(task, timeout=120)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--nodes', type=int, default=5000)
    parser.add_argument('--pods', type=int, default=50_000)
    parser.add_argument('--concurrency', type=int, default=16)
    parser.add_argument('--containers', type=int, default=2,
                        help='containers per pod (above 2: with env, mounts, probes)')
    parser.add_argument('--long-labels', action='store_true', help='app.kubernetes.io labels and annotations')
    parser.add_argument('--keep-managed-fields', action='store_true', help='switch the trimming off (as before)')
    args = parser.parse_args()
    asyncio.run(measure(nodes=args.nodes, pods=args.pods, keep_managed_fields=args.keep_managed_fields,
                                         concurrency=args.concurrency, containers=args.containers,
                                         long_labels=args.long_labels))


if __name__ == '__main__':
    main()
