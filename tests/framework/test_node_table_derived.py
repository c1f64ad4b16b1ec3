"""NodeTable.derived: arrays a table keeps per key and brings up to date row by row, and the
NodeResourcesFit / BalancedAllocation answers kept with it, which must be the answers
computed afresh after any sequence of pod and node changes."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from kopfsched.bench.workloads import default_node, default_pod
from kopfsched.cache.cache import Cache
from kopfsched.cache.snapshot import Snapshot
from kopfsched.framework import node_table
from kopfsched.framework.cycle_state import CycleState
from kopfsched.framework.node_table import _DERIVED_KEPT, ColumnSpec, NodeTable
from kopfsched.framework.types import NodeInfo, PodInfo
from kopfsched.plugins.noderesources.args import (
    NodeResourcesBalancedAllocationArgs,
    NodeResourcesFitArgs,
    RequestedToCapacityRatioParam,
    ResourceSpec,
    ScoringStrategy,
    UtilizationShapePoint,
)
from kopfsched.plugins.noderesources.balanced_allocation import BalancedAllocation
from kopfsched.plugins.noderesources.fit import PRE_FILTER_STATE, Fit, fits_family, fits_rows, fits_some
from kopfsched.plugins.noderesources.resource_allocation import ResourceAllocationScorer

VALUE = ColumnSpec("test/value", lambda n: int(n.labels.get("value", "0")))
OTHER = ColumnSpec("test/other", lambda n: int(n.labels.get("other", "0")))


class Counting:
    """compute / compute_one for derived (100 + each row's VALUE column), recording what was asked."""

    def __init__(self, offset: int = 100) -> None:
        self.offset = offset
        self.calls: list[list[int]] = []
        self.one: list[int] = []
        self.some: list[list[int]] = []

    def compute(self, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        self.calls.append(rows.tolist())
        return table.column(VALUE)[rows] + self.offset

    def compute_one(self, table: NodeTable, row: int) -> int:
        self.one.append(row)
        return table.column(VALUE).item(row) + self.offset

    def compute_some(self, table: NodeTable, rows: list[int]) -> list[int]:
        self.some.append(list(rows))
        return [table.column(VALUE).item(row) + self.offset for row in rows]


def table_of(count: int) -> NodeTable:
    nodes = []
    for i in range(count):
        node = default_node(i)
        node["metadata"]["labels"]["value"] = str(i)
        nodes.append(NodeInfo(node))
    return NodeTable(nodes)


def set_label(table: NodeTable, row: int, key: str, value: int) -> None:
    node = table.nodes[row]
    node.labels = {**node.labels, key: str(value)}
    table.refresh([row])


def test_first_use_computes_the_rows_asked_second_builds_then_only_changed_rows():
    table = table_of(40)
    counting = Counting()
    rows = np.array([5, 3, 9], dtype=np.int64)
    assert table.derived("k", counting.compute, rows).tolist() == [105, 103, 109]
    assert counting.calls == [[5, 3, 9]]
    assert table.derived("k", counting.compute, rows).tolist() == [105, 103, 109]
    assert counting.calls[-1] == list(range(40))  # built over every row
    table.nodes[3].labels = {"value": "7"}
    assert table.derived("k", counting.compute, rows).tolist() == [105, 103, 109]  # not refreshed: kept
    table.refresh([3])
    assert table.derived("k", counting.compute, rows).tolist() == [105, 107, 109]
    assert counting.calls[-1] == [3]
    set_label(table, 9, "value", 8)
    assert table.derived("k", counting.compute, rows, counting.compute_one).tolist() == [105, 107, 108]
    assert counting.one == [9] and len(counting.calls) == 3


def test_a_refresh_that_changes_no_column_value_leaves_derived_arrays_alone():
    table = table_of(40)
    counting = Counting()
    rows = np.arange(40, dtype=np.int64)
    table.derived("k", counting.compute, rows)
    table.derived("k", counting.compute, rows)
    table.refresh([4, 5])  # nothing changed
    set_label(table, 6, "unread", 1)  # a label no column reads
    table.derived("k", counting.compute, rows, counting.compute_one)
    assert len(counting.calls) == 2 and not counting.one
    table.column(OTHER)
    set_label(table, 7, "other", 3)  # a column the derived array does not read: recomputed all the same
    assert table.derived("k", counting.compute, rows, counting.compute_one).tolist() == list(range(100, 140))
    assert counting.one == [7]


def test_refreshed_since_lists_every_row_refreshed_until_it_forgets():
    table = table_of(40)
    start, rows = table.refreshed_since(0)
    assert (start, rows) == (0, [])
    table.refresh([4, 5])  # no column built: logged all the same
    table.refresh([])
    table.refresh([5, 9], node_static=False)
    position, rows = table.refreshed_since(start)
    assert rows == [4, 5, 5, 9]
    assert table.refreshed_since(position) == (position, [])
    for row in range(80):
        table.refresh([row % 40])
    assert table.refreshed_since(position)[1] is None  # forgotten: compare every row instead


def test_dropping_a_column_drops_the_derived_arrays():
    table = table_of(40)
    counting = Counting()
    rows = np.arange(40, dtype=np.int64)
    table.derived("k", counting.compute, rows)
    table.derived("k", counting.compute, rows)
    table.column(OTHER)
    table.drop(OTHER)
    table.derived("k", counting.compute, rows)
    assert counting.calls[-1] == list(range(40)) and len(counting.calls) == 3


def test_many_changed_rows_are_recomputed_in_one_call_and_too_many_rebuild():
    table = table_of(200)
    counting = Counting()
    rows = np.arange(200, dtype=np.int64)
    table.derived("k", counting.compute, rows)
    table.derived("k", counting.compute, rows)
    for row in (20, 10, 10, 30, 40, 50, 60, 70, 80, 90):
        set_label(table, row, "value", row + 1000 + len(counting.calls))
    expected = (table.column(VALUE) + 100).tolist()
    assert table.derived("k", counting.compute, rows, counting.compute_one).tolist() == expected
    assert counting.calls[-1] == [10, 20, 30, 40, 50, 60, 70, 80, 90] and not counting.one
    for row in range(60):  # more than a quarter of the table changed: rebuilt from scratch
        set_label(table, row, "value", -row)
    assert table.derived("k", counting.compute, rows).tolist() == (table.column(VALUE) + 100).tolist()
    assert counting.calls[-1] == list(rows.tolist())[:len(counting.calls[-1])]


def test_up_to_sixteen_changed_rows_go_through_compute_some_in_one_call():
    table = table_of(200)
    counting = Counting()
    rows = np.arange(200, dtype=np.int64)
    table.derived("k", counting.compute, rows)
    table.derived("k", counting.compute, rows)
    changed = [20, 10, 10, *range(100, 113)]  # 16 refreshes, one row twice
    for i, row in enumerate(changed):
        set_label(table, row, "value", row + 1000 + i)
    expected = (table.column(VALUE) + 100).tolist()
    assert table.derived("k", counting.compute, rows, counting.compute_one,
                         compute_some=counting.compute_some).tolist() == expected
    assert counting.some == [changed] and not counting.one and len(counting.calls) == 2
    for row in range(30, 47):  # 17: one numpy call
        set_label(table, row, "value", -row)
    assert table.derived("k", counting.compute, rows, counting.compute_one,
                         compute_some=counting.compute_some).tolist() == (table.column(VALUE) + 100).tolist()
    assert counting.calls[-1] == list(range(30, 47)) and len(counting.some) == 1


def test_keys_are_kept_apart_and_the_least_recently_used_go():
    table = table_of(10)
    rows = np.arange(10, dtype=np.int64)
    for key in range(_DERIVED_KEPT + 4):
        counting = Counting(key * 1000)
        table.derived(key, counting.compute, rows)
        assert table.derived(key, counting.compute, rows).tolist() == [key * 1000 + i for i in range(10)]
    last = _DERIVED_KEPT + 3
    assert table.derived(last, Counting(-1).compute, rows).tolist()[0] == last * 1000  # kept
    assert table.derived(0, Counting(-1).compute, rows).tolist()[0] == -1  # dropped


def _cluster(rng: random.Random, count: int) -> tuple[Cache, list[dict]]:
    cache = Cache()
    nodes = []
    for i in range(count):
        node = default_node(i)
        allocatable = node["status"]["allocatable"]
        allocatable["cpu"] = rng.choice(["0", "1", "4", "3500m"])
        allocatable["memory"] = rng.choice(["0", "1Gi", "32Gi"])
        allocatable["pods"] = rng.choice(["3", "110"])
        if rng.random() < 0.3:
            allocatable["example.com/gpu"] = str(rng.randint(0, 4))
        nodes.append(node)
        cache.add_node(node)
    return cache, nodes


def _pod(rng: random.Random, name: str, node: str | None = None) -> dict:
    pod = default_pod(name, node_name=node, cpu=rng.choice(["0", "100m", "1", "2500m"]),
                      memory=rng.choice(["0", "500Mi", "8Gi"]))
    if rng.random() < 0.3:
        resources = pod["spec"]["containers"][0]["resources"]
        resources["requests"]["example.com/gpu"] = resources["limits"]["example.com/gpu"] = "1"
    if rng.random() < 0.2:
        del pod["spec"]["containers"][0]["resources"]
    return pod


GPU = (ResourceSpec("cpu", 2), ResourceSpec("memory", 1), ResourceSpec("example.com/gpu", 3))
FIT_ARGS = {
    "least allocated": NodeResourcesFitArgs(),
    "least allocated, gpu": NodeResourcesFitArgs(scoring_strategy=ScoringStrategy(resources=GPU)),
    "most allocated": NodeResourcesFitArgs(scoring_strategy=ScoringStrategy(type="MostAllocated", resources=GPU)),
    "requested to capacity ratio": NodeResourcesFitArgs(scoring_strategy=ScoringStrategy(
        type="RequestedToCapacityRatio", resources=GPU, requested_to_capacity_ratio=RequestedToCapacityRatioParam(
            shape=(UtilizationShapePoint(0, 10), UtilizationShapePoint(40, 7), UtilizationShapePoint(100, 0))))),
}


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_kept_answers_are_the_answers_computed_afresh(seed: int):
    rng = random.Random(seed)
    cache, nodes = _cluster(rng, 60)
    snapshot = Snapshot()
    plugins = [Fit(args, None) for args in FIT_ARGS.values()] + [
        BalancedAllocation(None, None),
        BalancedAllocation(NodeResourcesBalancedAllocationArgs(
            resources=tuple(ResourceSpec(spec.name) for spec in GPU)), None)]
    shapes = [_pod(rng, f"shape-{i}") for i in range(4)]
    bound: list[dict] = []
    for step in range(300):
        change = rng.random()
        if change < 0.5 or not bound:
            pod = _pod(rng, f"p-{step}", node=rng.choice(nodes)["metadata"]["name"])
            cache.add_pod(pod)
            bound.append(pod)
        elif change < 0.9:
            cache.remove_pod(bound.pop(rng.randrange(len(bound))))
        else:
            node = rng.choice(nodes)
            node["status"]["allocatable"]["cpu"] = rng.choice(["0", "2", "4"])
            cache.update_node(node)
        cache.update_snapshot(snapshot)
        table = snapshot.table
        fresh = NodeTable(list(table.nodes))
        pod = PodInfo(rng.choice(shapes))
        rows = np.array(rng.sample(range(len(table)), rng.randint(1, len(table))), dtype=np.int64)
        state = CycleState()
        for plugin in plugins:
            if isinstance(plugin, Fit):
                plugin.pre_filter(state, pod, [])
                expected = plugin.filter_nodes(state, pod, fresh, rows)  # a fresh table computes it
                assert plugin.filter_nodes(state, pod, table, rows).tolist() == expected.tolist()
                assert fits_some(state.read(PRE_FILTER_STATE), table, rows.tolist()) == expected.tolist()
            if plugin.pre_score(state, pod, []) is not None:
                continue
            requests = plugin._pod_requests(state, pod)
            got = plugin.score_nodes(state, pod, table, rows)
            expected = plugin.scorer.compute_rows(fresh, rows, requests).tolist()
            assert got.tolist() == expected, (step, plugin.name)
            # compute_some (the Python arithmetic for a few stale rows) on every row asked
            assert plugin.scorer.compute_some(table, rows.tolist(), requests) == expected, (step, plugin.name)


def test_an_array_left_behind_by_the_change_log_is_rebuilt():
    table = table_of(200)
    often, rarely = Counting(), Counting(offset=7)
    rows = np.arange(200, dtype=np.int64)
    for counting in (often, rarely):
        table.derived(("k", counting.offset), counting.compute, rows)
        table.derived(("k", counting.offset), counting.compute, rows)
    for step in range(300):  # one row at a time, past what the log keeps (2 x a quarter of the table, twice)
        set_label(table, step % 200, "value", 5000 + step)
        assert table.derived(("k", 100), often.compute, rows, often.compute_one).tolist() == \
            (table.column(VALUE) + 100).tolist()
    assert len(often.one) == 300 and len(often.calls) == 2  # each change recomputed once, row by row
    assert len(table._log.rows) <= 200
    assert table.derived(("k", 7), rarely.compute, rows, rarely.compute_one).tolist() == \
        (table.column(VALUE) + 7).tolist()
    assert rarely.calls[-1] == rows.tolist() and not rarely.one  # computed afresh, not from the log


def _scaled(table: NodeTable, rows: np.ndarray, parameters: np.ndarray) -> np.ndarray:
    """A derived_family compute: VALUE * the first parameter + the second, per key and row."""
    return table.column(VALUE)[rows][None, :] * parameters[:, :1] + parameters[:, 1:2]


def test_a_family_key_far_behind_brings_every_key_up_to_date_in_one_compute():
    table = table_of(200)
    calls: list[tuple[list[int], list[list[int]]]] = []

    def compute(table: NodeTable, rows: np.ndarray, parameters: np.ndarray) -> np.ndarray:
        calls.append((rows.tolist(), parameters.tolist()))
        return _scaled(table, rows, parameters)

    rows = np.arange(200, dtype=np.int64)
    keys = [(1, 0), (2, 5), (3, 0)]
    for key in keys:  # first alone, then kept
        table.derived_family("f", key, key, compute, rows)
        table.derived_family("f", key, key, compute, rows)
    for row in range(20):
        set_label(table, row, "value", 1000 + row)
    calls.clear()
    assert table.derived_family("f", (1, 0), (1, 0), compute, rows).tolist() == table.column(VALUE).tolist()
    assert calls == [(list(range(20)), [[1, 0], [2, 5], [3, 0]])]
    for key in keys[1:]:  # current already
        assert table.derived_family("f", key, key, compute, rows).tolist() == \
            (table.column(VALUE) * key[0] + key[1]).tolist()
    assert len(calls) == 1


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_family_arrays_are_the_arrays_computed_afresh(seed: int, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(node_table, "_FAMILY_KEPT", 6)  # evictions too
    rng = random.Random(seed)
    table = table_of(80)
    keys = [(rng.randint(-3, 3), rng.randint(0, 100)) for _ in range(10)]
    for _ in range(400):
        for _ in range(rng.choice([0, 1, 1, 2, 5, 20, 70])):
            set_label(table, rng.randrange(80), "value", rng.randint(0, 1000))
        key = rng.choice(keys)
        rows = np.array(rng.sample(range(80), rng.randint(1, 80)), dtype=np.int64)

        def some(table: NodeTable, rows: list[int], key: tuple[int, int] = key) -> list[int]:
            return [table.column(VALUE).item(row) * key[0] + key[1] for row in rows]

        got = table.derived_family("f", key, key, _scaled, rows, some if rng.random() < 0.7 else None)
        assert got.tolist() == (table.column(VALUE)[rows] * key[0] + key[1]).tolist()


@pytest.mark.parametrize("seed", [1, 2])
def test_many_requests_at_once_are_each_request_alone(seed: int):
    rng = random.Random(seed)
    cache, nodes = _cluster(rng, 60)
    for step in range(120):
        cache.add_pod(_pod(rng, f"p-{step}", node=rng.choice(nodes)["metadata"]["name"]))
    snapshot = Snapshot()
    cache.update_snapshot(snapshot)
    table = NodeTable(list(snapshot.table.nodes))
    scorers = [Fit(args, None).scorer for args in FIT_ARGS.values()] + [BalancedAllocation(None, None).scorer]
    fits = Fit(None, None)
    for _ in range(20):
        pods = [PodInfo(_pod(rng, f"shape-{i}")) for i in range(rng.randint(1, 6))]
        rows = np.array(rng.sample(range(len(table)), rng.randint(1, len(table))), dtype=np.int64)
        for scorer in scorers:
            requests = [tuple(scorer.pod_requests(pod)) for pod in pods]

            def columns_of(requests: tuple[int, ...], scorer: ResourceAllocationScorer = scorer) -> tuple[Any, ...]:
                return tuple(scorer._columns(name, request)
                             for name, request in zip(scorer.resources, requests, strict=True))

            columns = columns_of(requests[0])
            same = [r for r in requests if columns_of(r) == columns]  # one family
            got = scorer.compute_many(table, rows, np.array(same, dtype=np.int64), columns)
            assert got.tolist() == [scorer.compute_rows(table, rows, r).tolist() for r in same]
        for pod in pods:
            state = CycleState()
            fits.pre_filter(state, pod, [])
            request = state.read(PRE_FILTER_STATE)
            quantities, _, compute = fits_family(request)
            got = compute(table, rows, np.array([quantities, quantities], dtype=np.int64))
            assert got.tolist() == [fits_rows(request, table, rows).tolist()] * 2
