"""benchmarks/side_by_side.py's arithmetic: scheduler_perf's throughput samples and percentiles,
and what --scale does to a workload (the runs themselves need the real control plane)."""

from __future__ import annotations

import pytest

from benchmarks.side_by_side import WORKLOADS, percentile, throughput_samples


def test_throughput_samples_skip_the_first_tick_and_fold_empty_seconds_into_the_next() -> None:
    # Ticks at 1, 2, 3, 4: the first pod starts the clock at 1; two more by 2 (2 pods/s); none
    # by 3; one by 4, over two seconds, so 0.5 pods/s twice; 4.2 is past the last whole tick.
    assert throughput_samples(0.0, [0.5, 1.5, 1.6, 3.5, 4.2]) == [2.0, 0.5, 0.5]
    assert throughput_samples(0.0, [0.3, 0.6]) == []
    assert throughput_samples(0.0, []) == []


@pytest.mark.parametrize(("p", "expected"), [(50, 0.5), (90, 2.0), (99, 2.0)])
def test_percentile_is_scheduler_perfs_nearest_rank(p: int, expected: float) -> None:
    assert percentile([2.0, 0.5, 0.5], p) == expected


def test_scale_shrinks_counts_but_keeps_at_least_five_nodes_and_the_steady_backlog() -> None:
    basic = WORKLOADS['SchedulingBasic/5000Nodes'].scaled(0.1)
    assert (basic.nodes, basic.init_pods, basic.measure_pods) == (500, 100, 100)
    tiny = WORKLOADS['Unschedulable/500Nodes/10Init/1kPods'].scaled(0.001)
    assert (tiny.nodes, tiny.init_pods, tiny.measure_pods) == (5, 1, 1)
    dra = WORKLOADS['SchedulingWithResourceClaimTemplate/empty_500nodes'].scaled(0.2)
    assert (dra.nodes, dra.init_pods, dra.measure_pods, dra.steady_seconds) == (100, 0, 10, 10.0)
