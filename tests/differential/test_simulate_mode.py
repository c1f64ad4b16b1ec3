"""`oracle simulate` (one upstream scheduler, ScheduleOne per pod) against `kopfsched simulate`
on snapshots whose outcome does not hang on a tie: the same results, victims, nominations,
attempt order and messages."""
from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import textwrap
from typing import Any

import pytest

from tests.differential.oracle import build_oracle_or_skip

ROOT = pathlib.Path(__file__).resolve().parents[2]

RETRY = textwrap.dedent("""\
    apiVersion: v1
    kind: Node
    metadata: {name: n1, labels: {kubernetes.io/hostname: n1}}
    status: {allocatable: {cpu: "4", memory: 8Gi, pods: "10"}, capacity: {cpu: "4", memory: 8Gi, pods: "10"}}
    ---
    apiVersion: v1
    kind: Pod
    metadata: {name: web, namespace: default, creationTimestamp: "2026-01-01T00:00:00Z"}
    spec:
      affinity:
        podAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
          - labelSelector: {matchLabels: {app: db}}
            topologyKey: kubernetes.io/hostname
      containers: [{name: c, image: x, resources: {requests: {cpu: 100m}}}]
    ---
    apiVersion: v1
    kind: Pod
    metadata: {name: db, namespace: default, labels: {app: db}, creationTimestamp: "2026-01-01T00:00:01Z"}
    spec:
      containers: [{name: c, image: x, resources: {requests: {cpu: 100m}}}]
    """)


@pytest.fixture(scope='module')
def binary() -> pathlib.Path:
    return build_oracle_or_skip()


def outcomes(report: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [(p['namespace'], p['name'], p['result'], p['nominatedNode'], p['victims'], p['message'])
            for p in report['pods']]


def both(binary: pathlib.Path, path: pathlib.Path) -> tuple[dict[str, Any], dict[str, Any]]:
    upstream = json.loads(subprocess.run([str(binary), 'simulate', str(path)], capture_output=True, text=True,
                                         check=True, timeout=300).stdout)
    ours = json.loads(subprocess.run([sys.executable, '-m', 'kopfsched', 'simulate', str(path), '-o', 'json'],
                                     capture_output=True, text=True, check=True, timeout=300, cwd=ROOT,
                                     env={**os.environ, 'PYTHONPATH': str(ROOT / 'operator')}).stdout)
    return upstream, ours


def test_a_preemptor_and_an_anti_affinity_misfit_come_out_as_kopfsched_says(binary: pathlib.Path) -> None:
    upstream, ours = both(binary, ROOT / 'examples' / 'affinity-and-preemption.yaml')
    assert outcomes(upstream) == outcomes(ours)
    payments = upstream['pods'][0]
    assert (payments['name'], payments['node'], payments['victims']) == ('payments-0', 'node-b2', ['default/batch-b2'])
    assert payments['message'] == ('0/6 nodes are available: 6 Insufficient cpu. preemption: found a potential '
                                   'placement for pod on node node-b2, preempting 1 victims')
    assert {k: upstream['summary'][k] for k in ('scheduled', 'unschedulable', 'preempted', 'settled')} == {
        'scheduled': 14, 'unschedulable': 1, 'preempted': 1, 'settled': True}


def test_a_pod_retried_after_the_pod_it_needs_lands_is_bound_with_no_message(
        binary: pathlib.Path, tmp_path: pathlib.Path) -> None:
    path = tmp_path / 'retry.yaml'
    path.write_text(RETRY)
    upstream, ours = both(binary, path)
    assert outcomes(upstream) == outcomes(ours) == [
        ('default', 'web', 'Scheduled', None, [], ''), ('default', 'db', 'Scheduled', None, [], '')]
    assert [p['attempts'] for p in upstream['pods']] == [2, 1]
    assert upstream['summary']['cycles'] == 3


def _batching_snapshot() -> str:
    """Six alike pods, a big node and two small ones, and a profile whose pods can be signed
    (PodTopologySpread without default constraints): OpportunisticBatching's case."""
    docs = [textwrap.dedent("""\
        apiVersion: kubescheduler.config.k8s.io/v1
        kind: KubeSchedulerConfiguration
        profiles:
        - schedulerName: default-scheduler
          pluginConfig:
          - name: PodTopologySpread
            args: {defaultingType: List}
        """)]
    for name, cpu, memory in (("big", "64", "128Gi"), ("small-a", "4", "8Gi"), ("small-b", "6", "8Gi")):
        docs.append(textwrap.dedent(f"""\
            apiVersion: v1
            kind: Node
            metadata: {{name: {name}, labels: {{kubernetes.io/hostname: {name}}}}}
            status: {{allocatable: {{cpu: "{cpu}", memory: {memory}, pods: "110"}},
                      capacity: {{cpu: "{cpu}", memory: {memory}, pods: "110"}}}}
            """))
    for i in range(6):
        docs.append(textwrap.dedent(f"""\
            apiVersion: v1
            kind: Pod
            metadata: {{name: p{i}, namespace: default, creationTimestamp: "2026-01-01T00:00:0{i}Z"}}
            spec:
              containers: [{{name: c, image: x, resources: {{requests: {{cpu: "1", memory: 1Gi}}}}}}]
            """))
    return "---\n".join(docs)


def test_alike_pods_are_batched_onto_the_rescored_node_as_upstream(
        binary: pathlib.Path, tmp_path: pathlib.Path) -> None:
    """v1.37 rescores the node chosen last before each hint: the big node stays the best,
    and upstream places every pod after the first on a hint (batchHintsUsed)."""
    path = tmp_path / 'batching.yaml'
    path.write_text(_batching_snapshot())
    upstream, ours = both(binary, path)
    assert outcomes(upstream) == outcomes(ours)
    assert [p['node'] for p in upstream['pods']] == [p['node'] for p in ours['pods']] == ['big'] * 6
    assert upstream['summary']['batchHintsUsed'] == ours['summary']['batchHintsUsed'] == 5
EXTENDED = textwrap.dedent("""\
    apiVersion: resource.k8s.io/v1
    kind: DeviceClass
    metadata: {name: gpu}
    spec:
      extendedResourceName: example.com/gpu
      selectors: [{cel: {expression: 'device.driver == "gpu.example.com"'}}]
    ---
    apiVersion: resource.k8s.io/v1
    kind: ResourceSlice
    metadata: {name: node-a-gpu}
    spec:
      driver: gpu.example.com
      nodeName: node-a
      pool: {name: node-a, generation: 1, resourceSliceCount: 1}
      devices: [{name: gpu-0}, {name: gpu-1}]
    """) + "".join(textwrap.dedent(f"""\
    ---
    apiVersion: v1
    kind: Node
    metadata: {{name: {name}, labels: {{kubernetes.io/hostname: {name}}}}}
    status: {{allocatable: {allocatable}, capacity: {allocatable}}}
    """) for name, allocatable in (("node-a", '{cpu: "4", memory: 8Gi, pods: "10"}'),
                                    ("node-b", '{cpu: "4", memory: 8Gi, pods: "10", example.com/gpu: "1"}'),
                                    ("node-c", '{cpu: "4", memory: 8Gi, pods: "10"}'))) + "".join(textwrap.dedent(f"""\
    ---
    apiVersion: v1
    kind: Pod
    metadata: {{name: {name}, namespace: default, uid: {name}-uid, creationTimestamp: "2026-01-01T00:00:0{i}Z"}}
    spec:
      initContainers: {init}
      containers:
      - {{name: main, image: x, resources: {{requests: {{cpu: 100m, example.com/gpu: "{count}"}}}}}}
    """) for i, (name, count, init) in enumerate((
        ("trainer", 2, '[{name: warm, image: x, resources: {requests: {example.com/gpu: "1"}}}]'),
        ("server", 1, "[]"), ("late", 1, "[]"))))


def test_extended_resources_backed_by_dra_are_placed_and_claimed_as_upstream(
        binary: pathlib.Path, tmp_path: pathlib.Path) -> None:
    """trainer's two GPUs come from node-a's devices (node-b advertises one only), server's from
    node-b's device plugin (node-a has no device left), and late finds none: the same outcomes,
    and the same claim, created, allocated and recorded in the pod's status."""
    import asyncio

    from kopfsched.simulate.loader import load_objects
    from kopfsched.simulate.runner import simulate

    path = tmp_path / 'extended.yaml'
    path.write_text(EXTENDED)
    upstream, ours = both(binary, path)
    assert outcomes(upstream) == outcomes(ours) == [
        ('default', 'trainer', 'Scheduled', None, [], ''), ('default', 'server', 'Scheduled', None, [], ''),
        ('default', 'late', 'Unschedulable', None, [], '0/3 nodes are available: 1 Insufficient example.com/gpu, '
         '2 cannot allocate all claims. preemption: 0/3 nodes are available: 1 No preemption victims found for '
         'incoming pod, 2 Preemption is not helpful for scheduling.')]
    assert [(p['name'], p['node']) for p in upstream['pods']] == [('trainer', 'node-a'), ('server', 'node-b'),
                                                                  ('late', None)]
    import yaml
    inputs = load_objects(list(yaml.safe_load_all(EXTENDED)), 'extended')
    sim = asyncio.run(simulate(inputs))
    claims = [obj for (kind, _, _), obj in sorted(sim.client.objects.items()) if kind == 'ResourceClaim']

    def essentials(claim: dict[str, Any]) -> tuple[Any, ...]:
        meta, status = claim['metadata'], claim['status']
        # Written by both, at the wall-clock time of the write.
        allocation = {k: v if k != 'allocationTimestamp' else bool(v) for k, v in status['allocation'].items()}
        return (meta['name'], meta['generateName'], meta['annotations'], meta['ownerReferences'],
                meta['finalizers'], claim['spec'], allocation, status['reservedFor'])

    assert [essentials(c) for c in claims] == [essentials(c) for c in upstream['resourceClaims']]
    assert claims[0]['metadata']['name'] == 'trainer-extended-resources-cbbbb'
    statuses = {key: pod['status']['extendedResourceClaimStatus'] for key, pod in sim.client.pods.items()
                if 'extendedResourceClaimStatus' in pod.get('status', {})}
    assert statuses == upstream['extendedResourceClaimStatus'] == {'default/trainer': {
        'requestMappings': [
            {'containerName': 'main', 'resourceName': 'example.com/gpu', 'requestName': 'container-1-request-1'},
            {'containerName': 'warm', 'resourceName': 'example.com/gpu', 'requestName': 'container-1-request-1'}],
        'resourceClaimName': 'trainer-extended-resources-cbbbb'}}
