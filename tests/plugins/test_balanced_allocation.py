"""NodeResourcesBalancedAllocation: upstream's balanced_allocation_test.go cases, args, batch == per-node."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from kopfsched.framework import ArgsError, Code, CycleState, NodeInfo, NodeTable, PodInfo
from kopfsched.plugins.noderesources.balanced_allocation import PLUGIN, BalancedAllocation
from tests.builders import make_node, make_pod, node_info

EXTENDED = "nvidia.com/gpu"


def balanced(raw_args: dict[str, Any] | None = None) -> BalancedAllocation:
    return PLUGIN.new(PLUGIN.decode_args(raw_args), None)


def node(name: str, cpu: str, memory: str, extended: dict[str, int] | None = None) -> dict[str, Any]:
    """Upstream's test nodes: cpu in cores, memory in bytes."""
    return make_node(name, cpu=cpu, memory=memory, extended=extended)


def scores(plugin: BalancedAllocation, pod: dict[str, Any], nodes: list[dict[str, Any]],
           existing: list[tuple[str, dict[str, Any]]]) -> list[int]:
    infos = [node_info(n, *[p for name, p in existing if name == n["metadata"]["name"]]) for n in nodes]
    state = CycleState()
    pod_info = PodInfo(pod)
    assert plugin.pre_score(state, pod_info, infos) is None
    per_node = [plugin.score(state, pod_info, n) for n in infos]
    batch = plugin.score_nodes(state, pod_info, NodeTable(infos), np.arange(len(infos)))
    assert batch.dtype == np.int64
    assert batch.tolist() == per_node, "score_nodes disagrees with score"
    return per_node


def cpu_only(cpu: str) -> dict[str, str]:
    return {"cpu": cpu, "memory": "0"}


def cpu_and_memory(cpu: str, memory: str) -> dict[str, str]:
    return {"cpu": cpu, "memory": memory}


# Upstream's requestedPod of most cases: two containers, 1000m/2000 and 2000m/3000.
TWO_CONTAINERS = [cpu_and_memory("1000", "2000"), cpu_and_memory("2000", "3000")]
CPU_ONLY_POD = [cpu_only("1000"), cpu_only("2000")]
GPU_RESOURCES = [{"name": "cpu"}, {"name": "memory"}, {"name": EXTENDED}]

# v1.37's TestNodeResourcesBalancedAllocation, case for case (the DRA ones are in the DRA
# tests). The score is 50 + (50 + balance with the pod - balance without it) / 2.
CASES = [
    # node1: with the pod cpu 0.75, memory 0.5 → 87, without 100 → 50 + 37 // 2 = 68; node2: 100, 100 → 75
    ("nothing scheduled, resources requested, differently sized nodes", make_pod(requests=TWO_CONTAINERS),
     [node("node1", "4000", "10000"), node("node2", "6000", "10000")], [], None, [68, 75]),
    ("resources requested, pods scheduled with resources", make_pod(requests=TWO_CONTAINERS),
     [node("node1", "10000", "20000"), node("node2", "10000", "20000")],
     [("node1", make_pod(requests=CPU_ONLY_POD)), ("node2", make_pod(requests=TWO_CONTAINERS))], None, [73, 74]),
    ("resources requested, pods scheduled with resources, differently sized nodes", make_pod(requests=TWO_CONTAINERS),
     [node("node1", "10000", "20000"), node("node2", "10000", "50000")],
     [("node1", make_pod(requests=CPU_ONLY_POD)), ("node2", make_pod(requests=TWO_CONTAINERS))], None, [73, 70]),
    ("resources requested, pods scheduled with resources, nodes to reach min/max score",
     make_pod(requests=[{"memory": "2000"}, {"memory": "3000"}]),
     [node("node1", "3000", "5000"), node("node2", "3000", "5000")],
     [("node1", make_pod(requests=CPU_ONLY_POD))], None, [100, 50]),
    ("requested resources at node capacity", make_pod(requests=CPU_ONLY_POD),
     [node("node1", "6000", "10000"), node("node2", "6000", "10000")],
     [("node1", make_pod(requests=CPU_ONLY_POD)), ("node2", make_pod(requests=TWO_CONTAINERS))], None, [62, 62]),
    ("scalar resource is included in the score computation if pod requests the scalar resource",
     make_pod(requests={"cpu": "0", "memory": "0", EXTENDED: "1"}),
     [node("node1", "3500", "40000", {EXTENDED: 8}), node("node2", "3500", "40000", {EXTENDED: 8})],
     [("node1", make_pod(requests=[cpu_and_memory("1000", "2000"), {"cpu": "2000", "memory": "3000", EXTENDED: "3"}])),
      ("node2", make_pod(requests=TWO_CONTAINERS))], GPU_RESOURCES, [75, 76]),
    ("scalar resource is not included in the score computation if pod doesn't request the scalar resource",
     make_pod(requests=TWO_CONTAINERS),
     [node("node1", "3500", "40000", {EXTENDED: 8}), node("node2", "3500", "40000")], [], GPU_RESOURCES, [56, 56]),
]


@pytest.mark.parametrize(("pod", "nodes", "existing", "resources", "expected"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_score(pod, nodes, existing, resources, expected):
    plugin = balanced({"resources": resources} if resources else None)
    assert scores(plugin, pod, nodes, existing) == expected


@pytest.mark.parametrize("pod", [
    pytest.param(make_pod(), id="no requests"),
    pytest.param(make_pod(requests={"cpu": "0", "memory": "0"}), id="zero requests"),
    pytest.param(make_pod(requests={EXTENDED: "1"}), id="only resources not configured"),
])
def test_pre_score_skips_best_effort_pods(pod):
    state = CycleState()
    status = balanced().pre_score(state, PodInfo(pod), [])
    assert status is not None
    assert status.code is Code.SKIP


def test_score_without_pre_score():
    """Upstream's "resources requested, pods scheduled with resources if PreScore not called"."""
    plugin = balanced()
    infos = [node_info(node("node1", "10000", "20000"), make_pod(requests=CPU_ONLY_POD)),
             node_info(node("node2", "10000", "20000"), make_pod(requests=TWO_CONTAINERS))]
    assert [plugin.score(CycleState(), PodInfo(make_pod(requests=TWO_CONTAINERS)), n) for n in infos] == [73, 74]
    assert plugin.score(CycleState(), PodInfo(make_pod()), infos[0]) == 0


def test_default_args():
    args = PLUGIN.decode_args({})
    assert [(r.name, r.weight) for r in args.resources] == [("cpu", 1), ("memory", 1)]
    assert [(r.name, r.weight) for r in PLUGIN.decode_args({"resources": [{"name": "cpu"}]}).resources] == [("cpu", 1)]


ARGS_ERRORS = [
    ("duplicate resource", {"resources": [{"name": "cpu"}, {"name": "cpu"}]},
     [("resources[1].name", 'Duplicate value: "cpu"')]),
    ("weight other than 1", {"resources": [{"name": "cpu", "weight": 2}, {"name": "memory", "weight": -1}]},
     [("resources[0].weight", "Invalid value: 2: must be 1"), ("resources[1].weight", "Invalid value: -1: must be 1")]),
    ("unknown field", {"resource": []}, [("resource", "unknown field")]),
]


@pytest.mark.parametrize(("raw", "problems"), [c[1:] for c in ARGS_ERRORS], ids=[c[0] for c in ARGS_ERRORS])
def test_args_validation(raw, problems):
    with pytest.raises(ArgsError) as error:
        PLUGIN.decode_args(raw)
    assert error.value.problems == problems


def random_requests(rng: random.Random) -> dict[str, str]:
    out = {}
    if rng.random() < 0.8:
        out["cpu"] = f"{rng.choice([0, 100, 250, 333, 1000, 1500])}m"
    if rng.random() < 0.8:
        out["memory"] = str(rng.choice([0, 100, 333, 1024, 3000]) * 1024 * 1024)
    if rng.random() < 0.3:
        out[EXTENDED] = str(rng.randint(0, 2))
    if rng.random() < 0.2:
        out["ephemeral-storage"] = str(rng.randint(0, 5) * 1024**3)
    return out


def random_nodes(rng: random.Random, count: int) -> list[NodeInfo]:
    infos = []
    for i in range(count):
        extended = {EXTENDED: rng.randint(0, 8)} if rng.random() < 0.5 else None
        n = make_node(f"n{i}", cpu=rng.choice(["0", "1", "3", "8"]), memory=rng.choice(["0", "3Gi", "7Gi", "64Gi"]),
                      ephemeral_storage=rng.choice([None, "17Gi"]), extended=extended)
        infos.append(node_info(n, *[make_pod(f"p{i}-{j}", requests=random_requests(rng))
                                    for j in range(rng.randint(0, 8))]))
    return infos


@pytest.mark.parametrize("resources", [
    pytest.param(None, id="cpu and memory"),
    pytest.param([{"name": "cpu"}, {"name": "memory"}, {"name": EXTENDED}, {"name": "ephemeral-storage"}],
                 id="four resources"),
])
def test_batch_agrees_with_per_node(resources):
    rng = random.Random(7)
    nodes = random_nodes(rng, 300)
    table = NodeTable(nodes)
    plugin = balanced({"resources": resources} if resources else None)
    distinct: set[int] = set()
    for i in range(60):
        pod = PodInfo(make_pod(f"pod{i}", requests=random_requests(rng)))
        state = CycleState()
        if plugin.pre_score(state, pod, nodes) is not None:
            continue
        rows = np.sort(rng.sample(range(len(nodes)), 250))
        batch = plugin.score_nodes(state, pod, table, rows)
        assert batch.tolist() == [plugin.score(state, pod, nodes[r]) for r in rows]
        distinct.update(batch.tolist())
    assert len(distinct) > 10  # the random data spreads the scores
