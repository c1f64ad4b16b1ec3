"""Time and peak memory of `kopfsched snapshot` and `kopfsched explain` on a large emulated cluster
(a measurement, not a test).

    python -m benchmarks.snapshot_explain_scale                       # 5000 nodes, 50 000 pods
    python -m benchmarks.snapshot_explain_scale --nodes 500 --pods 5000

The emulator runs in its own process and is filled over HTTP (nodes in three zones, most pods
bound, some pending ones that cannot fit anywhere). Then each command runs as a user runs it,
in a child process whose peak RSS is read from getrusage: `snapshot -o FILE`, `explain` of a
pending pod on that file, `explain` of the same pod live (--kubeconfig), and `simulate` of the
file. Prints one JSON object.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import pathlib
import subprocess
import sys
import tempfile
import time

import aiohttp

from kopfsched.emulator.server import emulator_process, write_kubeconfig
from tests.builders import make_node, make_pod

ROOT = pathlib.Path(__file__).parents[1]
ZONES = ('zone-a', 'zone-b', 'zone-c')
MEASURE = ('import resource, subprocess, sys, time; t = time.perf_counter(); '
           'rc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode; '
           'print(rc, time.perf_counter() - t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)')


async def fill(url: str, *, nodes: int, pods: int, pending: int, concurrency: int = 32) -> None:
    bodies = [('/api/v1/nodes', make_node(f'node-{i:05}', cpu='16', memory='64Gi', pods=110,
                                          labels={'topology.kubernetes.io/zone': ZONES[i % 3]}))
              for i in range(nodes)]
    for i in range(pods - pending):
        pod = make_pod(f'run-{i:06}', requests={'cpu': '250m', 'memory': '512Mi'}, node_name=f'node-{i % nodes:05}',
                       labels={'app': f'app-{i % 50}'})
        pod['metadata']['managedFields'] = [{'manager': 'kube-controller-manager', 'operation': 'Update',
                                             'fieldsV1': {'f:spec': {'f:containers': {}}}}]
        bodies.append(('/api/v1/namespaces/default/pods', pod))
    bodies += [('/api/v1/namespaces/default/pods', make_pod(f'huge-{i}', requests={'cpu': '32'}))
               for i in range(pending)]
    queue = list(reversed(bodies))
    async with aiohttp.ClientSession(url) as session:
        async def worker() -> None:
            while queue:
                path, body = queue.pop()
                async with session.post(path, json=body) as response:
                    if response.status != 201:
                        raise RuntimeError(f'{path}: {response.status} {await response.text()}')
        await asyncio.gather(*(worker() for _ in range(concurrency)))


def measure(*argv: str) -> dict[str, float]:
    out = subprocess.run([sys.executable, '-c', MEASURE, sys.executable, '-m', 'kopfsched', *argv], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout.split()
    return {'exit': int(out[0]), 'seconds': round(float(out[1]), 2), 'peak_rss_mb': round(int(out[2]) / 1024, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--nodes', type=int, default=5000)
    parser.add_argument('--pods', type=int, default=50_000)
    parser.add_argument('--pending', type=int, default=20)
    args = parser.parse_args()
    result: dict[str, object] = {'nodes': args.nodes, 'pods': args.pods}
    with emulator_process(history_size=100) as remote, tempfile.TemporaryDirectory() as tmp:
        began = time.perf_counter()
        asyncio.run(fill(remote.url, nodes=args.nodes, pods=args.pods, pending=args.pending))
        result['fill_seconds'] = round(time.perf_counter() - began, 1)
        kubeconfig = str(write_kubeconfig(pathlib.Path(tmp) / 'kubeconfig', url=remote.url))
        snapshot = pathlib.Path(tmp) / 'snapshot.yaml'
        result['snapshot'] = measure('snapshot', '--kubeconfig', kubeconfig, '-o', str(snapshot))
        result['snapshot_mb'] = round(snapshot.stat().st_size / 2**20, 1)
        result['explain_file'] = measure('explain', 'default/huge-0', str(snapshot), '-o', 'json')
        result['explain_live'] = measure('explain', 'default/huge-0', '--kubeconfig', kubeconfig, '-o', 'json')
        result['simulate_file'] = measure('simulate', str(snapshot), '-o', 'json')
    print(json.dumps(result))


if __name__ == '__main__':
    main()
