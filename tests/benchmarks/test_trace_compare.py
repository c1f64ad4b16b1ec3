"""benchmarks.trace_compare on a reduced gpu-trace: 200 nodes and 300 pods, room for every pod
that fits anywhere, so both schedulers must agree exactly on what lands and what does not,
and on the pending pods' messages, though ties may put a pod on another node of its shape."""
from __future__ import annotations

import pathlib

import pytest

from benchmarks.trace_compare import compare, main, reasons
from tests.differential.oracle import build_oracle_or_skip

pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope='module')
def oracle() -> pathlib.Path:
    return build_oracle_or_skip()


def test_a_reduced_trace_places_and_leaves_pending_the_same_pods_with_the_same_messages(
        oracle: pathlib.Path) -> None:
    result = compare(workload='gpu-trace', nodes=200, pods=300, oracle=oracle)
    assert result['results'] == {'kopfsched': {'Scheduled': 295, 'Unschedulable': 5},
                                 'upstream': {'Scheduled': 295, 'Unschedulable': 5}}
    assert result['pending_only_kopfsched'] == result['pending_only_upstream'] == []
    assert result['pending_both'] == 5
    assert result['pending_messages_differing'] == result['pending_messages_differing_beyond_counts'] == []
    assert result['pending_messages']['kopfsched'] == result['pending_messages']['upstream'] == {
        MESSAGE: 5}
    assert result['same_attempt_order']
    shapes = result['per_shape']
    assert sum(s['nodes'] for s in shapes.values()) == 200
    for side in ('kopfsched', 'upstream'):
        assert sum(s[f'pods_{side}'] for s in shapes.values()) == 295
    # Every GPU pod lands on a GPU node, every CPU-only pod on a node without GPUs (the taint):
    # the GPUs and pods per kind of node agree even where the node chosen within a kind differs.
    for kind in (lambda shape: 'no GPU' in shape, lambda shape: 'no GPU' not in shape):
        for field in ('pods', 'gpus'):
            assert (sum(s[f'{field}_kopfsched'] for shape, s in shapes.items() if kind(shape))
                    == sum(s[f'{field}_upstream'] for shape, s in shapes.items() if kind(shape)))


def test_messages_that_differ_only_in_their_counts_share_their_reasons() -> None:
    ours = ('0/1523 nodes are available: 1 Insufficient cpu, 1520 Insufficient nvidia.com/gpu, 83 Insufficient '
            'memory. preemption: 0/1523 nodes are available: 1194 No preemption victims found for incoming pod, '
            '329 Preemption is not helpful for scheduling.')
    theirs = ('0/1523 nodes are available: 1516 Insufficient nvidia.com/gpu, 2 Insufficient cpu, 75 Insufficient '
              'memory. preemption: 0/1523 nodes are available: 1194 No preemption victims found for incoming pod, '
              '329 Preemption is not helpful for scheduling.')
    assert reasons(ours) == reasons(theirs)
    assert reasons(ours) != reasons(MESSAGE)


def test_help_describes_the_comparison(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(['--help'])
    assert done.value.code == 0
    assert 'cluster-trace-gpu-v2023' in capsys.readouterr().out


MESSAGE = ('0/200 nodes are available: 156 node(s) had untolerated taint(s), 44 Insufficient cpu. '
           'preemption: 0/200 nodes are available: 200 Preemption is not helpful for scheduling.')
