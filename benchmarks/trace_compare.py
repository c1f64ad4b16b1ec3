"""Replay a production-shaped cluster trace through kopfsched and through upstream's scheduler,
and compare the outcomes (issue 21).

    python -m benchmarks.trace_compare [--workload gpu-trace] [--nodes 1523] [--pods 8000] [-o json]

The trace is the bench workload `gpu-trace` (operator/kopfsched/bench/workloads.py, shaped like
Alibaba's cluster-trace-gpu-v2023: 1523 nodes of 14 shapes, seven GPU models, GPU nodes
tainted; pods CPU-only or asking for 1-8 GPUs, more GPUs asked for than the cluster has),
written as one snapshot: every node, then every pod pending with a creationTimestamp one
second after the previous one, so both schedulers queue them in arrival order. The snapshot
goes through `kopfsched simulate` and through `oracle simulate` (tests/kubeenv/cmd/oracle:
kube-scheduler v1.37.2's own scheduler, ScheduleOne per pod), each in a process of its own.

Compared: the pods placed and left pending (and the pending pods' messages, word for word),
the order of the first attempts, and per node shape (CPUs, memory, GPUs, GPU model) the pods
placed and the CPU, memory and GPUs they were allocated. Both schedulers pick at random among
the nodes sharing the best score, so which node of a shape a pod lands on may differ, and with
it, once GPUs run short, which later pods still fit: the per-shape sums and the pending set are
what a comparison can hold them to. The CPU time of each scheduling loop is reported too.
"""
from __future__ import annotations

import argparse
import collections
import datetime
import json
import pathlib
import re
import sys
import tempfile
from typing import Any

from benchmarks.offline import kopfsched_simulate, oracle_simulate

GPU = 'nvidia.com/gpu'
MODEL_LABEL = 'nvidia.com/gpu.product'
TIMEOUT = 1800.0
T0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)


def write_snapshot(path: pathlib.Path, *, workload: str, nodes: int, pods: int) -> dict[str, Any]:
    """The workload's nodes and pods as one List; returns {pod name: requests} and the nodes' shapes."""
    from kopfsched.bench.workloads import WORKLOADS
    built = WORKLOADS[workload](nodes, 0, pods)
    items: list[dict[str, Any]] = []
    shapes: dict[str, str] = {}
    for node in built.nodes:
        items.append(node)
        shapes[node['metadata']['name']] = shape_of(node)
    requests: dict[str, dict[str, str]] = {}
    for i, pod in enumerate(built.pods):
        pod['metadata']['creationTimestamp'] = (T0 + datetime.timedelta(seconds=i)).strftime('%Y-%m-%dT%H:%M:%SZ')
        items.append(pod)
        requests[f'{pod["metadata"]["namespace"]}/{pod["metadata"]["name"]}'] = (
            pod['spec']['containers'][0]['resources']['requests'])
    path.write_text(json.dumps({'apiVersion': 'v1', 'kind': 'List', 'items': items}))
    return {'requests': requests, 'shapes': shapes}


def shape_of(node: dict[str, Any]) -> str:
    alloc = node['status']['allocatable']
    gpus = int(alloc.get(GPU, 0))
    model = node['metadata'].get('labels', {}).get(MODEL_LABEL, '')
    return f'{alloc["cpu"]} CPU {alloc["memory"]} ' + (f'{gpus}x {model}' if gpus else 'no GPU')


def _quantity(text: str) -> float:
    from kopfsched.framework.quantity import parse_quantity
    return float(parse_quantity(text))


def summarize(report: dict[str, Any], trace: dict[str, Any]) -> dict[str, Any]:
    """One scheduler's outcome: results, pending pods and their messages, per-shape allocations."""
    results = collections.Counter(p['result'] for p in report['pods'])
    pending = {f'{p["namespace"]}/{p["name"]}': p['message'] for p in report['pods'] if p['result'] != 'Scheduled'}
    per_shape: dict[str, dict[str, float]] = {}
    for shape in sorted(set(trace['shapes'].values())):
        per_shape[shape] = {'nodes': sum(1 for s in trace['shapes'].values() if s == shape),
                            'pods': 0, 'cpu': 0.0, 'memory_gib': 0.0, 'gpus': 0}
    for p in report['pods']:
        if p['result'] != 'Scheduled':
            continue
        row = per_shape[trace['shapes'][p['node']]]
        req = trace['requests'][f'{p["namespace"]}/{p["name"]}']
        row['pods'] += 1
        row['cpu'] += _quantity(req['cpu'])
        row['memory_gib'] += _quantity(req['memory']) / 2**30
        row['gpus'] += int(req.get(GPU, 0))
    return {'results': dict(results), 'pending': pending,
            'order': [f'{p["namespace"]}/{p["name"]}' for p in report['pods']], 'per_shape': per_shape}


def reasons(message: str) -> list[str]:
    """A FitError message's phrases without their node counts, sorted: what two messages
    share when only the counts differ (upstream orders the reasons as strings, counts
    first, so other counts may also reorder them)."""
    return sorted(re.sub(r'^\d+ ', '', part) for part in re.split(r': |, |\. ', message.rstrip('.')))


def compare(*, workload: str = 'gpu-trace', nodes: int = 1523, pods: int = 8000,
            oracle: pathlib.Path | None = None) -> dict[str, Any]:
    if oracle is None:
        from tests.differential.oracle import build_oracle
        oracle = build_oracle()
    with tempfile.TemporaryDirectory(prefix='trace-compare-') as tmp:
        path = pathlib.Path(tmp, 'trace.json')
        trace = write_snapshot(path, workload=workload, nodes=nodes, pods=pods)
        kopf = kopfsched_simulate([path], timeout=TIMEOUT)
        upstream = oracle_simulate(oracle, [path], timeout=TIMEOUT)
    k, u = summarize(kopf, trace), summarize(upstream, trace)
    both_pending = sorted(set(k['pending']) & set(u['pending']))
    differing = [{'pod': key, 'kopfsched': k['pending'][key], 'upstream': u['pending'][key]}
                 for key in both_pending if k['pending'][key] != u['pending'][key]]
    shapes = {}
    for shape in k['per_shape']:
        shapes[shape] = {'nodes': k['per_shape'][shape]['nodes'],
                         **{f'{field}_{name}': round(side['per_shape'][shape][field], 1)
                            for field in ('pods', 'cpu', 'memory_gib', 'gpus')
                            for name, side in (('kopfsched', k), ('upstream', u))}}
    return {
        'workload': workload, 'nodes': nodes, 'pods': pods,
        'results': {'kopfsched': k['results'], 'upstream': u['results']},
        'pending_only_kopfsched': sorted(set(k['pending']) - set(u['pending'])),
        'pending_only_upstream': sorted(set(u['pending']) - set(k['pending'])),
        'pending_both': len(both_pending),
        'pending_messages_differing': differing,
        'pending_messages_differing_beyond_counts': [d for d in differing
                                                     if reasons(d['kopfsched']) != reasons(d['upstream'])],
        'pending_messages': {name: dict(collections.Counter(side['pending'].values()).most_common())
                             for name, side in (('kopfsched', k), ('upstream', u))},
        'same_attempt_order': k['order'] == u['order'],
        'per_shape': shapes,
        'cpu': {'kopfsched': {'loop_cpu_s': kopf['measure']['loop_cpu_s'], 'load_cpu_s': kopf['measure']['load_cpu_s'],
                              'cpu_ms_per_scheduled_pod': round(1000 * kopf['measure']['loop_cpu_s']
                                                                / max(k['results'].get('Scheduled', 0), 1), 3)},
                'upstream': {'loop_cpu_s': round(upstream['summary']['cpuSeconds'], 3),
                             'cpu_ms_per_scheduled_pod': round(upstream['summary']['cpuMsPerScheduledPod'], 3),
                             'settled': upstream['summary']['settled']}},
    }


def table(result: dict[str, Any]) -> str:
    r = result
    lines = [f'{r["workload"]}: {r["nodes"]} nodes, {r["pods"]} pods',
             f'results: kopfsched {json.dumps(r["results"]["kopfsched"])}, '
             f'upstream {json.dumps(r["results"]["upstream"])}',
             f'pending in both: {r["pending_both"]}; only kopfsched: {len(r["pending_only_kopfsched"])}; '
             f'only upstream: {len(r["pending_only_upstream"])}; messages differing: '
             f'{len(r["pending_messages_differing"])} ({len(r["pending_messages_differing_beyond_counts"])} beyond '
             f'their node counts); same attempt order: {r["same_attempt_order"]}',
             f'CPU ms per scheduled pod: kopfsched {r["cpu"]["kopfsched"]["cpu_ms_per_scheduled_pod"]}, '
             f'upstream {r["cpu"]["upstream"]["cpu_ms_per_scheduled_pod"]}', '',
             f'{"node shape":28} {"nodes":>5} {"pods k/u":>11} {"CPU k/u":>15} {"memory GiB k/u":>17} {"GPUs k/u":>11}']
    for shape, s in r['per_shape'].items():
        lines.append(f'{shape:28} {s["nodes"]:>5} {s["pods_kopfsched"]:>5.0f}/{s["pods_upstream"]:<5.0f} '
                     f'{s["cpu_kopfsched"]:>7.0f}/{s["cpu_upstream"]:<7.0f} '
                     f'{s["memory_gib_kopfsched"]:>8.0f}/{s["memory_gib_upstream"]:<8.0f} '
                     f'{s["gpus_kopfsched"]:>5.0f}/{s["gpus_upstream"]:<5.0f}')
    for d in r['pending_messages_differing'][:5]:
        lines += ['', f'{d["pod"]}:', f'  kopfsched: {d["kopfsched"]}', f'  upstream:  {d["upstream"]}']
    return '\n'.join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog='python -m benchmarks.trace_compare', description=__doc__.split('\n\n')[0],
                                     epilog=__doc__.split('\n\n', 2)[2],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--workload', choices=('gpu-trace', 'gpu-trace-affinity'), default='gpu-trace')
    parser.add_argument('--nodes', type=int, default=1523, help='nodes (default: the trace\'s 1523)')
    parser.add_argument('--pods', type=int, default=8000, help='pods in arrival order (default: 8000)')
    parser.add_argument('-o', '--output', choices=('table', 'json'), default='table')
    args = parser.parse_args(argv)
    if args.nodes < 1 or args.pods < 1:
        parser.exit(1, 'trace_compare: --nodes and --pods must be positive\n')
    result = compare(workload=args.workload, nodes=args.nodes, pods=args.pods)
    print(json.dumps(result, indent=1) if args.output == 'json' else table(result))
    return 0


if __name__ == '__main__':
    sys.exit(main())
