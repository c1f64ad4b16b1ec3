"""The oracle (tests/kubeenv/cmd/oracle) checked against the real kube-scheduler of the release
it runs, on clusters created in the real API server (kwok as the nodes' kubelets): where the
oracle's top total is unique, or the pod's nominated node fits, kube-scheduler binds the pod to
the same node; where several nodes share the top total, to one of them; a pod left
unschedulable gets the oracle's message as its PodScheduled condition and as a FailedScheduling
Event, and keeps, gets or loses the nomination as the oracle's run says. How a cluster is made
real, and when the comparison starts over from a new snapshot: tests/cluster/oracle_crosscheck.py.

The random clusters are tests/differential's generator's. Every kind it draws is created:
nodes, pods, PriorityClasses, PDBs, PVs, PVCs, StorageClasses, CSINodes and the
KubeSchedulerConfiguration (kube-scheduler's --config); a drawn `spec.priority` becomes a
PriorityClass of that value (Priority admission refuses the field), an extended resource's
request gets an equal limit, and drawn statuses go through the status subresource. A kind the
generator gains that the real server cannot hold as drawn must be left out here, and said so.
"""
from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

if os.environ.get('CI') != 'true':  # under CI the test extra has it, and this test must run
    pytest.importorskip('hypothesis', reason='hypothesis is not installed (the test extra has it)')

from hypothesis import HealthCheck, Phase, given, seed, settings

from tests.cluster.conftest import StartControlPlane
from tests.cluster.oracle_crosscheck import Bench, Scheduler, Tally, install_classes
from tests.differential.oracle import build_oracle_or_skip
from tests.differential.strategies import PRIORITY_CLASSES, clusters
from tests.kubeenv.control_plane import Options

EXAMPLES = 10
"""Random clusters per run: about 40 pending pods (seed 2137: 17 nodes and 15 messages
compared, 8 pods gated)."""


@pytest.fixture(scope='module')
def bench(control_plane: StartControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bench]:
    binary = build_oracle_or_skip()
    with control_plane(Options(audit=False)) as cluster:
        install_classes(cluster)
        scheduler = Scheduler(cluster)
        try:
            yield Bench(cluster, scheduler, binary, tmp_path_factory.mktemp('crosscheck'))
        finally:
            scheduler.stop()


def report(tally: Tally, record_property: Any) -> None:
    for name in ('nodes', 'ties', 'messages', 'events', 'preemptions', 'gated', 'segments', 'retried'):
        record_property(name, getattr(tally, name))
    assert not tally.differences, '\n'.join(tally.differences)


@pytest.mark.timeout(600)
def test_random_clusters(bench: Bench, record_property: Any) -> None:
    tally = Tally()

    # No shrinking: every example costs seconds of a real cluster; each one's drawn cluster
    # and snapshots are kept under the test's temporary folder (x<N>-drawn.json, ...).
    @seed(2137)
    @settings(max_examples=EXAMPLES, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    # The kinds this check does not create are left out: DRA, CSIDriver and CSIStorageCapacity,
    # in-place resize status.
    @given(objects=clusters(max_nodes=6, max_running=4, max_pending=8, dra=False, storage_capacity_objects=False,
                            resize=False))
    def check(objects: list[dict[str, Any]]) -> None:
        bench.run(objects, tally)

    check()
    report(tally, record_property)
    # Not vacuous: the seed reaches both kinds of comparison.
    assert tally.nodes >= 10 and tally.messages >= 10 and tally.events == tally.messages, tally


# Clusters written for one behaviour each, where `oracle run` once left a different cluster
# than kube-scheduler does (the oracle's commit 'nominated node first, cleared nominations,
# gated pods untouched').

NAMESPACE = {'apiVersion': 'v1', 'kind': 'Namespace', 'metadata': {'name': 'default'}}


def node(name: str, cpu: str) -> dict[str, Any]:
    allocatable = {'cpu': cpu, 'memory': '4Gi', 'pods': '110'}
    return {'apiVersion': 'v1', 'kind': 'Node', 'metadata': {'name': name, 'labels': {'kubernetes.io/hostname': name}},
            'status': {'allocatable': allocatable, 'capacity': dict(allocatable)}}


def pod(name: str, cpu: str, *, priority: int = 0, node_name: str = '', nominated: str = '', second: int = 0,
        gated: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {'containers': [{'name': 'c0', 'image': 'nginx:1.27',
                                            'resources': {'requests': {'cpu': cpu, 'memory': '64Mi'}}}],
                            'priority': priority}
    out: dict[str, Any] = {'apiVersion': 'v1', 'kind': 'Pod', 'metadata': {'name': name, 'namespace': 'default'},
                           'spec': spec}
    if node_name:
        spec['nodeName'] = node_name
        out['status'] = {'phase': 'Running', 'startTime': f'2025-12-31T00:00:{second:02d}Z'}
    else:
        out['metadata']['creationTimestamp'] = f'2026-01-01T00:00:{second:02d}Z'
    if nominated:
        out['status'] = {'nominatedNodeName': nominated}
    if gated:
        spec['schedulingGates'] = [{'name': 'example.com/quota'}]
    return out


CASES = [
    pytest.param(
        # node-1 is fuller, so node-0 has the best total; the nominated node-1 still fits.
        [node('node-0', '4'), node('node-1', '4'), pod('busy', '2', node_name='node-1'),
         pod('nominee', '100m', nominated='node-1')],
        {'nominee': ('Scheduled', 'node-1')}, id='a-nominated-node-that-fits-is-taken-unscored'),
    pytest.param(
        # `big` fits nowhere, with or without victims: PostFilter clears its nomination, and
        # `small` (of equal priority) may then use node-0; kept, it would hold 3 cpu there.
        [node('node-0', '2'), pod('big', '3', priority=100, nominated='node-0', second=0),
         pod('small', '1500m', priority=100, second=1)],
        {'big': ('Unschedulable', ''), 'small': ('Scheduled', 'node-0')}, id='no-candidate-clears-the-nomination'),
    pytest.param(
        # The gated pod would preempt `low`; never attempted, it leaves `low` running, and
        # `after` (of low's priority) finds no room and no victim.
        [node('node-0', '2'), pod('low', '1500m', node_name='node-0'),
         pod('gated', '1', priority=1000, gated=True, second=0), pod('after', '1', second=1)],
        {'gated': ('Gated', ''), 'after': ('Unschedulable', '')}, id='a-gated-pod-preempts-nothing'),
    pytest.param(
        # Preemption for real: `high` is nominated, `low` deleted, then `high` bound there.
        [node('node-0', '2'), pod('low', '1500m', node_name='node-0'), pod('high', '1', priority=1000),
         pod('after', '500m', second=1)],
        {'high': ('Unschedulable', 'node-0'), 'after': ('Scheduled', 'node-0')}, id='preemption'),
]


@pytest.mark.parametrize(('objects', 'expected'), CASES)
def test_written_cluster(bench: Bench, record_property: Any, objects: list[dict[str, Any]],
                         expected: dict[str, tuple[str, str]]) -> None:
    tally = Tally()
    ex = bench.run([NAMESPACE, *PRIORITY_CLASSES, *objects], tally)
    report(tally, record_property)
    # What the case is about, so that it keeps meaning it: kube-scheduler's own answers.
    got = {}
    for name in expected:
        real = tally.real[f'{ex.name("default")}/{name}']
        where = real.node if real.result == 'Scheduled' else real.nominated
        got[name] = (real.result, where.removeprefix(ex.name('')) if where else '')
    assert got == expected
