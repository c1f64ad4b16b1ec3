"""WhatIfTable: columns derived from the real table equal the columns of hand-made copies."""

import numpy as np
import pytest

from kopfsched.framework.node_table import ColumnSpec, NodeTable, PodSlots, WhatIfTable, label_column
from kopfsched.framework.types import NodeInfo, PodInfo
from kopfsched.plugins.noderesources.resource_allocation import (
    ALLOCATABLE_CPU,
    ALLOCATABLE_PODS,
    NON_ZERO_REQUESTED_CPU,
    NON_ZERO_REQUESTED_MEMORY,
    POD_COUNT,
    REQUESTED_CPU,
    REQUESTED_EPHEMERAL_STORAGE,
    REQUESTED_MEMORY,
    scalar_columns,
)
from kopfsched.plugins.nodeunschedulable import NODE_STATE
from kopfsched.plugins.tainttoleration import HAS_HARD_TAINTS
from tests.builders import make_node, make_pod, node_info

GPU = "example.com/gpu"
SPECS = [ALLOCATABLE_CPU, ALLOCATABLE_PODS, REQUESTED_CPU, REQUESTED_MEMORY, REQUESTED_EPHEMERAL_STORAGE,
         NON_ZERO_REQUESTED_CPU, NON_ZERO_REQUESTED_MEMORY, POD_COUNT, *scalar_columns(GPU), NODE_STATE,
         HAS_HARD_TAINTS, label_column("zone")]
BY_HAND = ColumnSpec("test/pod-names", lambda n: hash(tuple(n.pods)))
"""Neither node-static nor a per-pod sum: read from the copies."""


def _pod(name: str, node: str = "", **requests: str) -> PodInfo:
    pod = make_pod(name, uid=f"uid-{name}", requests=requests or {"cpu": "100m"})
    if node:
        pod["spec"]["nodeName"] = node
    return PodInfo(pod)


def _nodes() -> list[NodeInfo]:
    nodes = []
    for i in range(3):
        node = make_node(f"n{i}", extended={GPU: "4"})
        node["metadata"].setdefault("labels", {})["zone"] = f"z{i % 2}"
        if i == 2:
            node["spec"]["taints"] = [{"key": "k", "effect": "NoSchedule"}]
        info = node_info(node)
        for j in range(3):
            info.add_pod(_pod(f"p{i}{j}", f"n{i}", cpu=f"{100 * (j + 1)}m", memory="1Gi", **{GPU: str(j)}))
        nodes.append(info)
    return nodes


def _by_hand(node: NodeInfo, removed: list[PodInfo], added: list[PodInfo]) -> NodeInfo:
    copy = node.clone()
    for pod in removed:
        copy.remove_pod(pod)
    for pod in added:
        copy.add_pod(pod)
    return copy


@pytest.mark.parametrize("spec", [*SPECS, BY_HAND], ids=lambda s: s.name)
def test_columns_equal_the_copies(spec: ColumnSpec) -> None:
    nodes = _nodes()
    base = NodeTable(nodes)
    base.column(spec)  # built before: the what-if table must derive from it, not change it
    before = base.column(spec).copy()
    rows = np.array([2, 0, 2], dtype=np.int64)
    removed = [list(nodes[2].pods.values())[:2], [], [list(nodes[2].pods.values())[1]]]
    added = [[_pod("new", cpu="1", **{GPU: "1"})], [_pod("x"), _pod("y", memory="2Gi")], []]
    table = WhatIfTable(base, rows, added=added, removed=removed)
    copies = [_by_hand(nodes[r], rm, ad) for r, rm, ad in zip(rows.tolist(), removed, added, strict=True)]
    expected = [spec.extract(copy) for copy in copies]
    assert table.column(spec).tolist() == expected
    assert [list(n.pods) for n in table.nodes] == [list(c.pods) for c in copies]
    assert base.column(spec).tolist() == before.tolist()
    # One more level, as preemption's reprieve steps: a table over the what-if table.
    again = WhatIfTable(table, np.array([0, 2], dtype=np.int64), added=[[removed[0][0]], []])
    assert again.column(spec).tolist() == [
        spec.extract(_by_hand(copies[0], [], [removed[0][0]])), spec.extract(copies[2])]
    assert again.root is base and again.root_rows.tolist() == [2, 2]


def _prioritised_nodes() -> list[NodeInfo]:
    """Three nodes whose pods have priorities 0, 5 and 10 in turn (node n2: one pod only)."""
    nodes = []
    for i in range(3):
        info = node_info(make_node(f"n{i}", extended={GPU: "4"}))
        for j in range(3 if i < 2 else 1):
            pod = make_pod(f"p{i}{j}", uid=f"uid-p{i}{j}", priority=5 * ((i + j) % 3),
                           requests={"cpu": f"{100 * (j + 1)}m", "memory": f"{j + 1}Gi", GPU: str(j)})
            pod["spec"]["nodeName"] = f"n{i}"
            info.add_pod(PodInfo(pod))
        nodes.append(info)
    return nodes


@pytest.mark.parametrize("spec", [*SPECS, BY_HAND], ids=lambda s: s.name)
@pytest.mark.parametrize("priority", [0, 5, 6, 11])
def test_removing_the_lower_priority_pods_equals_removing_them_by_hand(spec: ColumnSpec, priority: int) -> None:
    nodes = _prioritised_nodes()
    base = NodeTable(nodes)
    rows = np.array([1, 0, 2, 1], dtype=np.int64)
    added = [[_pod("new", cpu="1", **{GPU: "1"})], [], [_pod("x")], []]
    lower = [[p for p in nodes[r].pods.values() if p.priority < priority] for r in rows.tolist()]
    by_priority = WhatIfTable(base, rows, added=added, removed_below=priority)
    by_list = WhatIfTable(base, rows, added=added, removed=lower)
    assert by_priority.column(spec).tolist() == by_list.column(spec).tolist()
    assert by_priority.removed == lower
    assert [list(n.pods) for n in by_priority.nodes] == [list(n.pods) for n in by_list.nodes]
    assert base.lower_priority(None, priority)[rows].tolist() == [len(pods) for pods in lower]


def test_lower_priority_columns_stay_current_and_only_the_last_priorities_are_kept() -> None:
    nodes = _prioritised_nodes()
    base = NodeTable(nodes)
    assert base.lower_priority(REQUESTED_CPU, 6).tolist() == [300, 400, 0]  # n0: 100m+200m, n1: 100m+300m
    victim = next(p for p in nodes[0].pods.values() if p.priority == 0)
    nodes[0].remove_pod(victim)
    base.refresh([0])
    assert base.lower_priority(REQUESTED_CPU, 6).tolist()[0] == 300 - victim.requests.milli_cpu
    for priority in (1, 2, 3, 4):
        base.lower_priority(REQUESTED_CPU, priority)
    # Four priorities are kept, the least recently used (6) was dropped and is rebuilt on demand.
    assert sorted(p for p in base._lower) == [1, 2, 3, 4]
    assert base.lower_priority(REQUESTED_CPU, 6).tolist()[0] == 300 - victim.requests.milli_cpu


def test_removed_below_applies_alone_to_real_nodes() -> None:
    base = NodeTable(_nodes())
    rows = np.array([0], dtype=np.int64)
    with pytest.raises(ValueError, match="removed_below applies alone"):
        WhatIfTable(base, rows, removed=[[]], removed_below=1)
    with pytest.raises(ValueError, match="removed_below applies alone"):
        WhatIfTable(WhatIfTable(base, rows), np.array([0], dtype=np.int64), removed_below=1)


@pytest.mark.parametrize("nodes_first", [False, True], ids=["columns-first", "nodes-first"])
@pytest.mark.parametrize("spec", [*SPECS, BY_HAND], ids=lambda s: s.name)
def test_added_slots_count_once_whichever_is_read_first(spec: ColumnSpec, nodes_first: bool) -> None:
    """A reprieve step's table: a Filter without a batch form (NodePorts) lists the nodes before
    NodeResourcesFit reads its columns; the reprieved pods' shares must still count once
    (the differential tests found a victim evicted that v1.37.2 reprieves)."""
    nodes = _nodes()
    base = NodeTable(nodes)
    rows = np.array([0, 2], dtype=np.int64)
    queues = [[_pod("a", cpu="1", **{GPU: "1"}), _pod("b", memory="2Gi")], [_pod("c", cpu="300m")]]
    mask = np.array([[True, False], [True, False]])
    table = WhatIfTable(base, rows, added_slots=(PodSlots(queues), np.arange(2, dtype=np.int64), mask))
    copies = [_by_hand(nodes[0], [], [queues[0][0]]), _by_hand(nodes[2], [], [queues[1][0]])]
    if nodes_first:
        assert [list(n.pods) for n in table.nodes] == [list(c.pods) for c in copies]
    assert table.column(spec).tolist() == [spec.extract(copy) for copy in copies]
