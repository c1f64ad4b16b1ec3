"""NodeResourcesFit: upstream's fit_test.go, least/most_allocated_test.go and
requested_to_capacity_ratio_test.go cases, args validation, hints, and batch == per-node."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from kopfsched.framework import ActionType, ArgsError, Code, CycleState, NodeInfo, NodeTable, PodInfo, QueueingHint
from kopfsched.plugins.noderesources.args import NodeResourcesFitArgs
from kopfsched.plugins.noderesources.fit import PLUGIN, Fit
from tests.builders import make_node, make_pod, node_info

EXTENDED_A = "example.com/aaa"
EXTENDED_B = "example.com/bbb"
KUBERNETES_IO_RESOURCE = "kubernetes.io/something"
HUGEPAGE = "hugepages-2Mi"


def fit(raw_args: dict[str, Any] | None = None) -> Fit:
    return PLUGIN.new(PLUGIN.decode_args(raw_args), None)


def run_filter(plugin: Fit, pod: dict[str, Any], node: NodeInfo):
    state = CycleState()
    pod_info = PodInfo(pod)
    plugin.pre_filter(state, pod_info, [node])
    status = plugin.filter(state, pod_info, node)
    table = NodeTable([node])
    batch = plugin.filter_nodes(state, pod_info, table, np.arange(1))
    assert bool(batch[0]) == (status is None), "filter_nodes disagrees with filter"
    if status is not None:
        assert plugin.filter_statuses(state, pod_info, table, np.arange(1)) == [status], \
            "filter_statuses disagrees with filter"
    return status


def small_node(*pods: dict[str, Any], extended: dict[str, Any] | None = None, pods_allowed: int = 32,
               storage: str | None = "20") -> NodeInfo:
    """Upstream's makeResources(10, 20, 32, 5, 20, 5): 10m cpu, 20 bytes memory, 32 pods, 20 bytes storage."""
    return node_info(make_node("machine1", cpu="10m", memory="20", pods=pods_allowed, ephemeral_storage=storage,
                               extended={EXTENDED_A: 5, HUGEPAGE: 5, **(extended or {})}), *pods)


def req(cpu: int = 0, memory: int = 0, extra: dict[str, int] | None = None) -> dict[str, Any]:
    """Requests in upstream's test units: millicores and bytes."""
    out: dict[str, Any] = {}
    if cpu:
        out["cpu"] = f"{cpu}m"
    if memory:
        out["memory"] = str(memory)
    out.update({k: str(v) for k, v in (extra or {}).items()})
    return out


FILTER_CASES = [
    # (id, pod, existing pods on the node, args, expected code, reasons)
    ("no resources requested always fits", make_pod(), [make_pod(requests=req(10, 20))], None, None, ()),
    ("too many resources fails", make_pod(requests=req(1, 1)), [make_pod(requests=req(10, 20))], None,
     Code.UNSCHEDULABLE, ("Insufficient cpu", "Insufficient memory")),
    ("too many resources fails due to init container cpu", make_pod(requests=req(1, 1), init_requests=[req(3, 1)]),
     [make_pod(requests=req(8, 19))], None, Code.UNSCHEDULABLE, ("Insufficient cpu",)),
    ("too many resources fails due to highest init container cpu",
     make_pod(requests=req(1, 1), init_requests=[req(3, 1), req(2, 1)]), [make_pod(requests=req(8, 19))], None,
     Code.UNSCHEDULABLE, ("Insufficient cpu",)),
    ("too many resources fails due to init container memory", make_pod(requests=req(1, 1), init_requests=[req(1, 3)]),
     [make_pod(requests=req(9, 19))], None, Code.UNSCHEDULABLE, ("Insufficient memory",)),
    ("init container fits because it's the max, not sum, of containers and init containers",
     make_pod(requests=req(1, 1), init_requests=[req(1, 1)]), [make_pod(requests=req(9, 19))], None, None, ()),
    ("both resources fit", make_pod(requests=req(1, 1)), [make_pod(requests=req(5, 5))], None, None, ()),
    ("one resource memory fits", make_pod(requests=req(2, 1)), [make_pod(requests=req(9, 5))], None,
     Code.UNSCHEDULABLE, ("Insufficient cpu",)),
    ("one resource cpu fits", make_pod(requests=req(1, 2)), [make_pod(requests=req(5, 19))], None,
     Code.UNSCHEDULABLE, ("Insufficient memory",)),
    ("equal edge case", make_pod(requests=req(5, 1)), [make_pod(requests=req(5, 19))], None, None, ()),
    ("sidecar container counts for the whole pod's life",
     make_pod(requests=req(1, 1), sidecar_requests=[req(5, 1)]), [make_pod(requests=req(5, 5))], None,
     Code.UNSCHEDULABLE, ("Insufficient cpu",)),
    ("overhead is added", make_pod(requests=req(1, 1), overhead={"cpu": "5m"}), [make_pod(requests=req(5, 5))],
     None, Code.UNSCHEDULABLE, ("Insufficient cpu",)),
    ("extended resource fits", make_pod(requests=req(extra={EXTENDED_A: 1})), [make_pod()], None, None, ()),
    ("extended resource capacity enforced", make_pod(requests=req(extra={EXTENDED_A: 10})), [make_pod()], None,
     Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (f"Insufficient {EXTENDED_A}",)),
    ("extended resource allocatable enforced", make_pod(requests=req(extra={EXTENDED_A: 1})),
     [make_pod(requests=req(extra={EXTENDED_A: 5}))], None, Code.UNSCHEDULABLE, (f"Insufficient {EXTENDED_A}",)),
    ("extended resource allocatable enforced for unknown resource", make_pod(requests=req(extra={EXTENDED_B: 1})),
     [make_pod()], None, Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (f"Insufficient {EXTENDED_B}",)),
    ("extended resource allocatable enforced for init container",
     make_pod(init_requests=[req(extra={EXTENDED_A: 6})]), [make_pod()], None,
     Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (f"Insufficient {EXTENDED_A}",)),
    ("kubernetes.io resource capacity enforced", make_pod(requests={KUBERNETES_IO_RESOURCE: "10"}), [make_pod()],
     None, Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (f"Insufficient {KUBERNETES_IO_RESOURCE}",)),
    ("hugepages resource capacity enforced", make_pod(requests={HUGEPAGE: "10"}), [make_pod()], None,
     Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (f"Insufficient {HUGEPAGE}",)),
    ("hugepages resource allocatable enforced for multiple containers",
     make_pod(requests=[{HUGEPAGE: "2"}, {HUGEPAGE: "2"}]), [make_pod(requests={HUGEPAGE: "2"})], None,
     Code.UNSCHEDULABLE, (f"Insufficient {HUGEPAGE}",)),
    ("skip checking ignored extended resource", make_pod(requests=req(extra={EXTENDED_B: 1})), [make_pod()],
     {"ignoredResources": [EXTENDED_B]}, None, ()),
    ("skip checking ignored extended resource via resource groups", make_pod(requests=req(extra={EXTENDED_B: 1})),
     [make_pod()], {"ignoredResourceGroups": ["example.com"]}, None, ()),
    ("ignoredResources does not apply to native resources", make_pod(requests={HUGEPAGE: "10"}), [make_pod()],
     {"ignoredResources": [HUGEPAGE]}, Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (f"Insufficient {HUGEPAGE}",)),
    ("request exceeding the node's whole allocatable is unresolvable", make_pod(requests=req(11, 1)), [make_pod()],
     None, Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("Insufficient cpu",)),
    ("one unresolvable resource makes the whole status unresolvable", make_pod(requests=req(2, 21)),
     [make_pod(requests=req(9, 0))], None, Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
     ("Insufficient cpu", "Insufficient memory")),
    ("ephemeral storage is checked", make_pod(requests={"ephemeral-storage": "25"}), [make_pod()], None,
     Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("Insufficient ephemeral-storage",)),
    ("ephemeral storage fits", make_pod(requests={"ephemeral-storage": "10"}), [make_pod()], None, None, ()),
]


@pytest.mark.parametrize(("pod", "existing", "args", "code", "reasons"),
                         [c[1:] for c in FILTER_CASES], ids=[c[0] for c in FILTER_CASES])
def test_filter(pod, existing, args, code, reasons):
    status = run_filter(fit(args), pod, small_node(*existing))
    if code is None:
        assert status is None
    else:
        assert status is not None
        assert (status.code, status.reasons) == (code, reasons)


@pytest.mark.parametrize(("pod", "existing", "reasons"), [
    pytest.param(make_pod(requests=req(1, 1)), [make_pod(requests=req(10, 20))],
                 ("Too many pods", "Insufficient cpu", "Insufficient memory"), id="even without room for the pod"),
    pytest.param(make_pod(), [make_pod()], ("Too many pods",), id="even for a pod without requests"),
    pytest.param(make_pod(requests=req(1, 1)), [make_pod(requests=req(5, 5))], ("Too many pods",),
                 id="even when resources fit"),
])
def test_filter_pod_count(pod, existing, reasons):
    status = run_filter(fit(), pod, small_node(*existing, pods_allowed=1))
    assert status is not None
    assert (status.code, status.reasons) == (Code.UNSCHEDULABLE, reasons)


def test_filter_reports_extended_resources_by_name_after_native_ones():
    pod = make_pod(requests=req(11, 1, extra={EXTENDED_B: 1, EXTENDED_A: 9}))
    status = run_filter(fit(), pod, small_node())
    assert status is not None
    assert status.reasons == ("Insufficient cpu", f"Insufficient {EXTENDED_A}", f"Insufficient {EXTENDED_B}")


# --- scoring ---------------------------------------------------------------------------------

def big_node(name: str, cpu: str, memory: str, extended: dict[str, int] | None = None) -> dict[str, Any]:
    """Upstream's scoring nodes: cpu in cores, memory in bytes."""
    return make_node(name, cpu=cpu, memory=memory, extended=extended)


def no_containers() -> dict[str, Any]:
    """Upstream's st.MakePod().Obj(): no containers, so no non-zero defaults either."""
    return make_pod(containers=[])


TWO_CONTAINERS = [{"cpu": "1000", "memory": "2000"}, {"cpu": "2000", "memory": "3000"}]


def scores(plugin: Fit, pod: dict[str, Any], nodes: list[dict[str, Any]], existing: list[tuple[str, dict]]) -> list:
    infos = []
    for node in nodes:
        name = node["metadata"]["name"]
        infos.append(node_info(node, *[p for n, p in existing if n == name]))
    state = CycleState()
    pod_info = PodInfo(pod)
    plugin.pre_score(state, pod_info, infos)
    per_node = [plugin.score(state, pod_info, n) for n in infos]
    batch = plugin.score_nodes(state, pod_info, NodeTable(infos), np.arange(len(infos)))
    assert batch.dtype == np.int64
    assert batch.tolist() == per_node, "score_nodes disagrees with score"
    return per_node


LEAST_ALLOCATED_CASES = [
    # CPU (4000-0)*100/4000 = 100, memory 100 → 100 on both nodes
    ("nothing scheduled, nothing requested", no_containers(),
     [big_node("node1", "4000", "10000"), big_node("node2", "4000", "10000")], [], None, [100, 100]),
    # node1: cpu (4000-3000)*100/4000 = 25, mem (10000-5000)*100/10000 = 50 → 37; node2: 50, 50 → 50
    ("nothing scheduled, resources requested, differently sized nodes", make_pod(requests=TWO_CONTAINERS),
     [big_node("node1", "4000", "10000"), big_node("node2", "6000", "10000")], [], None, [37, 50]),
    # node1: cpu (10000-6000)/10000 = 40, memory 100 → 70; node2: 40, (20000-5000)/20000 = 75 → 57
    ("no resources requested, pods scheduled with resources", no_containers(),
     [big_node("node1", "10000", "20000"), big_node("node2", "10000", "20000")],
     [("node1", make_pod(requests={"cpu": "3000", "memory": "0"})),
      ("node1", make_pod(requests={"cpu": "3000", "memory": "0"})),
      ("node2", make_pod(requests={"cpu": "3000", "memory": "0"})),
      ("node2", make_pod(requests={"cpu": "3000", "memory": "5000"}))],
     None, [70, 57]),
    # a container without requests counts as 100m / 200Mi: memory 200Mi > 10000 bytes scores 0,
    # cpu (4000000-100)·100/4000000 = 99 → 49
    ("containers without requests count with the non-zero defaults", make_pod(),
     [big_node("node1", "4000", "10000")], [], None, [49]),
    # node1: cpu (10000-6000)/10000 = 40, mem (20000-5000)/20000 = 75 → 57; node2: 40, (20000-10000)/20000 = 50 → 45
    ("resources requested, pods scheduled with resources", make_pod(requests=TWO_CONTAINERS),
     [big_node("node1", "10000", "20000"), big_node("node2", "10000", "20000")],
     [("node1", make_pod(requests={"cpu": "3000", "memory": "0"})),
      ("node2", make_pod(requests={"cpu": "3000", "memory": "5000"}))], None, [57, 45]),
    ("resources requested, pods scheduled with resources, differently sized nodes", make_pod(requests=TWO_CONTAINERS),
     [big_node("node1", "10000", "20000"), big_node("node2", "10000", "50000")],
     [("node1", make_pod(requests={"cpu": "3000", "memory": "0"})),
      ("node2", make_pod(requests={"cpu": "3000", "memory": "5000"}))], None, [57, 60]),
    # cpu (4000-6000) → 0, memory 100 → 50; node2: 0, 50 → 25
    ("requested resources exceed node capacity", make_pod(requests={"cpu": "3000", "memory": "0"}),
     [big_node("node1", "4000", "10000"), big_node("node2", "4000", "10000")],
     [("node1", make_pod(requests={"cpu": "3000", "memory": "0"})),
      ("node2", make_pod(requests={"cpu": "3000", "memory": "5000"}))], None, [50, 25]),
    ("zero node resources, pods scheduled with resources", make_pod(),
     [big_node("node1", "0", "0"), big_node("node2", "0", "0")],
     [("node1", make_pod(requests={"cpu": "3000", "memory": "0"})),
      ("node2", make_pod(requests={"cpu": "3000", "memory": "5000"}))], None, [0, 0]),
    # node1: (25·1 + 50·2)/3 = 41; node2: (50 + 100)/3 = 50
    ("different weight on CPU and memory", make_pod(requests=TWO_CONTAINERS),
     [big_node("node1", "4000", "10000"), big_node("node2", "6000", "10000")], [],
     {"resources": [{"name": "memory", "weight": 2}, {"name": "cpu", "weight": 1}]}, [41, 50]),
    # an extended resource the pod does not request is left out: (50 + 50)/2
    ("bypass extended resource if the pod does not request", make_pod(requests=TWO_CONTAINERS),
     [big_node("node1", "6000", "10000"), big_node("node2", "6000", "10000", extended={EXTENDED_A: 4})], [],
     {"resources": [{"name": "cpu"}, {"name": "memory"}, {"name": EXTENDED_A}]}, [50, 50]),
    # node1: aaa (4-2)·100/4 = 50 → (50+50+50)/3 = 50; node2: aaa (10-2)·100/10 = 80 → (50+50+80)/3 = 60
    ("honor extended resource if the pod requests",
     make_pod(requests={"cpu": "3000", "memory": "5000", EXTENDED_A: "2"}),
     [big_node("node1", "6000", "10000", extended={EXTENDED_A: 4}), big_node("node2", "6000", "10000",
                                                                          extended={EXTENDED_A: 10})], [],
     {"resources": [{"name": "cpu"}, {"name": "memory"}, {"name": EXTENDED_A}]}, [50, 60]),
]


@pytest.mark.parametrize(("pod", "nodes", "existing", "strategy", "expected"),
                         [c[1:] for c in LEAST_ALLOCATED_CASES], ids=[c[0] for c in LEAST_ALLOCATED_CASES])
def test_least_allocated(pod, nodes, existing, strategy, expected):
    args = {"scoringStrategy": {"type": "LeastAllocated", **(strategy or {})}}
    assert scores(fit(args), pod, nodes, existing) == expected


MOST_ALLOCATED_CASES = [
    ("nothing scheduled, nothing requested", no_containers(),
     [big_node("node1", "4000", "10000"), big_node("node2", "4000", "10000")], [], None, [0, 0]),
    # node1: cpu 3000*100/4000 = 75, mem 5000*100/10000 = 50 → 62; node2: 50, 50 → 50
    ("nothing scheduled, resources requested, differently sized nodes", make_pod(requests=TWO_CONTAINERS),
     [big_node("node1", "4000", "10000"), big_node("node2", "6000", "10000")], [], None, [62, 50]),
    # node1: cpu 6000/10000 = 60, mem 5000/20000 = 25 → 42; node2: 60, 10000/20000 = 50 → 55
    ("resources requested, pods scheduled with resources", make_pod(requests=TWO_CONTAINERS),
     [big_node("node1", "10000", "20000"), big_node("node2", "10000", "20000")],
     [("node1", make_pod(requests={"cpu": "3000", "memory": "0"})),
      ("node2", make_pod(requests={"cpu": "3000", "memory": "5000"}))], None, [42, 55]),
    # (75·1 + 50·2)/3 = 58; node2: (50 + 100)/3 = 50
    ("different weight on CPU and memory", make_pod(requests=TWO_CONTAINERS),
     [big_node("node1", "4000", "10000"), big_node("node2", "6000", "10000")], [],
     {"resources": [{"name": "memory", "weight": 2}, {"name": "cpu", "weight": 1}]}, [58, 50]),
    # requests above capacity count as full: cpu 100, mem 100 (non-zero 200Mi > 10000) → 100
    ("requested above capacity counts as full", make_pod(requests={"cpu": "5000"}),
     [big_node("node1", "4000", "10000")], [], None, [100]),
    # node1: (50 + 50 + 2*100/4 = 50)/3 = 50; node2: (50 + 50 + 20)/3 = 40
    ("honor extended resource if the pod requests",
     make_pod(requests={"cpu": "3000", "memory": "5000", EXTENDED_A: "2"}),
     [big_node("node1", "6000", "10000", extended={EXTENDED_A: 4}), big_node("node2", "6000", "10000",
                                                                          extended={EXTENDED_A: 10})], [],
     {"resources": [{"name": "cpu"}, {"name": "memory"}, {"name": EXTENDED_A}]}, [50, 40]),
]


@pytest.mark.parametrize(("pod", "nodes", "existing", "strategy", "expected"),
                         [c[1:] for c in MOST_ALLOCATED_CASES], ids=[c[0] for c in MOST_ALLOCATED_CASES])
def test_most_allocated(pod, nodes, existing, strategy, expected):
    args = {"scoringStrategy": {"type": "MostAllocated", **(strategy or {})}}
    assert scores(fit(args), pod, nodes, existing) == expected


BIN_PACKING = {"shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]}
SPREAD = {"shape": [{"utilization": 0, "score": 10}, {"utilization": 100, "score": 0}]}

RTCR_CASES = [
    # utilization 0 → score 10·10 = 100 for both resources
    ("nothing scheduled, nothing requested (spread shape)", make_pod(requests={"cpu": "0m", "memory": "0"}),
     [big_node("node1", "4000", "10000"), big_node("node2", "4000", "10000")], [], SPREAD, None, [100, 100]),
    # node1: cpu 3000/4000 = 75% → 25, mem 5000/10000 = 50% → 50 → round(75/2) = 38; node2: 50, 50 → 50
    ("nothing scheduled, resources requested, differently sized nodes (spread)", make_pod(requests=TWO_CONTAINERS),
     [big_node("node1", "4000", "10000"), big_node("node2", "6000", "10000")], [], SPREAD, None, [38, 50]),
    # bin packing: node1: 75 and 50 → round(62.5) = 63; node2: 50, 50 → 50
    ("bin packing rounds half away from zero", make_pod(requests=TWO_CONTAINERS),
     [big_node("node1", "4000", "10000"), big_node("node2", "6000", "10000")], [], BIN_PACKING, None, [63, 50]),
    # utilization 0 scores 0 under bin packing and is left out of the mean entirely → 0
    ("zero-scoring resources are left out of the mean", make_pod(requests={"cpu": "0m", "memory": "0"}),
     [big_node("node1", "4000", "10000")], [], BIN_PACKING, None, [0]),
    # extended resources with weights: node1 cpu 30%/mem 50%/aaa 2/4 = 50% → (30·1 + 50·1 + 50·3)/5 = 46
    ("extended resource with weight",
     make_pod(requests={"cpu": "3000", "memory": "5000", EXTENDED_A: "2"}),
     [big_node("node1", "10000", "10000", extended={EXTENDED_A: 4})], [], BIN_PACKING,
     [{"name": "cpu"}, {"name": "memory"}, {"name": EXTENDED_A, "weight": 3}], [46]),
    # a broken line: 0→0, 50→10 (100), 100→0; cpu 3000/4000 = 75% → 100 + (0-100)·25/50 = 50;
    # memory 5000/10000 = 50% → 100 → round(150/2) = 75
    ("non-monotonic shape truncates toward zero",
     make_pod(requests=TWO_CONTAINERS), [big_node("node1", "4000", "10000")], [],
     {"shape": [{"utilization": 0, "score": 0}, {"utilization": 50, "score": 10}, {"utilization": 100, "score": 0}]},
     None, [75]),
    # cpu 1000/3000 = 33% → 100·33/50 = 66 (Go truncation), memory 1000/3000 → 66 → 66
    ("integer utilization and segment interpolation", make_pod(requests={"cpu": "1000", "memory": "1000"}),
     [big_node("node1", "3000", "3000")], [],
     {"shape": [{"utilization": 0, "score": 0}, {"utilization": 50, "score": 10}, {"utilization": 100, "score": 0}]},
     None, [66]),
]


@pytest.mark.parametrize(("pod", "nodes", "existing", "ratio", "resources", "expected"),
                         [c[1:] for c in RTCR_CASES], ids=[c[0] for c in RTCR_CASES])
def test_requested_to_capacity_ratio(pod, nodes, existing, ratio, resources, expected):
    strategy: dict[str, Any] = {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": ratio}
    if resources:
        strategy["resources"] = resources
    assert scores(fit({"scoringStrategy": strategy}), pod, nodes, existing) == expected


def test_score_without_pre_score_uses_the_pod():
    plugin = fit()
    node = node_info(big_node("node1", "4000", "10000"))
    pod = PodInfo(make_pod(requests=TWO_CONTAINERS))
    assert plugin.score(CycleState(), pod, node) == 37


# --- args ------------------------------------------------------------------------------------

def test_default_args():
    args = NodeResourcesFitArgs.from_dict({})
    assert args == NodeResourcesFitArgs()
    strategy = args.scoring_strategy
    assert (strategy.type, [(r.name, r.weight) for r in strategy.resources]) == (
        "LeastAllocated", [("cpu", 1), ("memory", 1)])


def test_weight_zero_defaults_to_one():
    args = NodeResourcesFitArgs.from_dict({"scoringStrategy": {"type": "MostAllocated",
                                                               "resources": [{"name": "cpu", "weight": 0}]}})
    assert [(r.name, r.weight) for r in args.scoring_strategy.resources] == [("cpu", 1)]


ARGS_ERRORS = [
    ("negative weight", {"scoringStrategy": {"type": "LeastAllocated", "resources": [
        {"name": "memory", "weight": -1}, {"name": "cpu", "weight": 1}]}},
     [("scoringStrategy.resources[0].weight",
       "Invalid value: -1: resource weight of memory not in valid range (0, 100]")]),
    ("weight above 100", {"scoringStrategy": {"type": "LeastAllocated", "resources": [
        {"name": "memory", "weight": 1}, {"name": "cpu", "weight": 101}]}},
     [("scoringStrategy.resources[1].weight",
       "Invalid value: 101: resource weight of cpu not in valid range (0, 100]")]),
    ("unsupported strategy", {"scoringStrategy": {"type": "Invalid"}},
     [("scoringStrategy.type", 'Unsupported value: "Invalid": supported values: "LeastAllocated", "MostAllocated", '
                               '"RequestedToCapacityRatio"')]),
    ("ratio without shape", {"scoringStrategy": {"type": "RequestedToCapacityRatio"}},
     [("scoringStrategy.requestedToCapacityRatio",
       "Required value: must be specified when type is RequestedToCapacityRatio")]),
    # Upstream validates a given shape whatever the type (and ignores it unless RequestedToCapacityRatio).
    ("bad shape with another strategy", {"scoringStrategy": {"type": "MostAllocated", "requestedToCapacityRatio": {
        "shape": [{"utilization": 0, "score": 11}]}}},
     [("scoringStrategy.shape[0].score", "Invalid value: 11: not in valid range [0, 10]")]),
    # Upstream's field path is scoringStrategy.shape (validation_pluginargs.go: strategyPath.Child("shape")).
    ("empty shape", {"scoringStrategy": {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {
        "shape": []}}},
     [("scoringStrategy.shape", "Required value: at least one point must be specified")]),
    ("shape not sorted and out of range", {"scoringStrategy": {"type": "RequestedToCapacityRatio",
                                                               "requestedToCapacityRatio": {"shape": [
                                                                   {"utilization": 50, "score": 11},
                                                                   {"utilization": 10, "score": 1},
                                                                   {"utilization": 101, "score": -1}]}}},
     [("scoringStrategy.shape[1].utilization",
       "Invalid value: 10: values must be sorted in increasing order"),
      ("scoringStrategy.shape[0].score", "Invalid value: 11: not in valid range [0, 10]"),
      ("scoringStrategy.shape[2].utilization",
       "Invalid value: 101: not in valid range [0, 100]"),
      ("scoringStrategy.shape[2].score", "Invalid value: -1: not in valid range [0, 10]")]),
    ("ignored resource group with a slash", {"ignoredResourceGroups": ["example.com/aaa"]},
     [("ignoredResourceGroups[0]", 'Invalid value: "example.com/aaa": resource group name can\'t contain \'/\'')]),
    ("ignored resource not a qualified name", {"ignoredResources": ["-bad"]},
     [("ignoredResources[0]", 'Invalid value: "-bad": name part must consist of alphanumeric characters, \'-\', '
                              "'_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  "
                              "or 'my.name',  or '123-abc', regex used for validation is "
                              "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")]),
    ("unknown field", {"scoringStrategy": {"type": "LeastAllocated", "shape": []}},
     [("scoringStrategy.shape", "unknown field")]),
]


@pytest.mark.parametrize(("raw", "problems"), [c[1:] for c in ARGS_ERRORS], ids=[c[0] for c in ARGS_ERRORS])
def test_args_validation(raw, problems):
    with pytest.raises(ArgsError) as error:
        PLUGIN.decode_args(raw)
    assert error.value.problems == problems


def test_shape_with_another_strategy_is_accepted_and_ignored():
    # kube-scheduler accepts a requestedToCapacityRatio beside LeastAllocated/MostAllocated and
    # scores with the type alone (fit.go picks the scorer by type).
    args = PLUGIN.decode_args({"scoringStrategy": {"type": "MostAllocated", "requestedToCapacityRatio": {
        "shape": [{"utilization": 0, "score": 10}, {"utilization": 100, "score": 0}]}}})
    assert args.scoring_strategy.type == "MostAllocated"
    # 1000m/2Gi of 4000m/8Gi: MostAllocated scores (25 + 25) / 2 = 25; the spread shape,
    # had it been used, 100 - 25 = 75.
    node = make_node("n", cpu="4000m", memory="8Gi")
    pod = make_pod(requests={"cpu": "1000m", "memory": "2Gi"})
    assert Fit(args, None).score(CycleState(), PodInfo(pod), node_info(node)) == 25


def test_valid_args_with_ignored_resources():
    args = PLUGIN.decode_args({"ignoredResources": ["example.com/aaa"], "ignoredResourceGroups": ["example.com"]})
    assert (args.ignored_resources, args.ignored_resource_groups) == (("example.com/aaa",), ("example.com",))


# --- queueing hints --------------------------------------------------------------------------

def test_events_to_register():
    events = {(e.event.resource.value, e.event.action) for e in fit().events_to_register()}
    assert events == {("Pod", ActionType.DELETE | ActionType.UPDATE_POD_SCALE_DOWN),
                      ("Node", ActionType.ADD | ActionType.UPDATE_NODE_ALLOCATABLE),
                      ("DeviceClass", ActionType.ADD | ActionType.UPDATE)}


def _with(pod: dict[str, Any], **spec: Any) -> dict[str, Any]:
    pod["spec"].update(spec)
    return pod


POD_HINTS = [
    ("deleted assigned pod", None, _with(make_pod(requests=req(1)), nodeName="n1"), None, QueueingHint.QUEUE),
    ("deleted unassigned pod", None, make_pod(requests=req(1)), None, QueueingHint.SKIP),
    ("scaled-down assigned pod frees cpu the pod wants", None,
     _with(make_pod(requests=req(5), uid="u1"), nodeName="n1"), _with(make_pod(requests=req(2), uid="u1"),
                                                                     nodeName="n1"), QueueingHint.QUEUE),
    ("scaled-down assigned pod frees memory the pod does not want", None,
     _with(make_pod(requests=req(5, 10), uid="u2"), nodeName="n1"),
     _with(make_pod(requests=req(5, 5), uid="u2"), nodeName="n1"), QueueingHint.SKIP),
    ("scaled-down unassigned pod", None, make_pod(requests=req(5), uid="u3"), make_pod(requests=req(2), uid="u3"),
     QueueingHint.SKIP),
    ("the pod itself scaled down", "self", None, None, QueueingHint.QUEUE),
]


@pytest.mark.parametrize(("target", "old", "new", "hint"), [c[1:] for c in POD_HINTS], ids=[c[0] for c in POD_HINTS])
def test_pod_event_hint(target, old, new, hint):
    pod = make_pod(requests=req(3), uid="me")
    if target == "self":
        old, new = pod, make_pod(requests=req(2), uid="me")
    assert fit().is_schedulable_after_pod_event(PodInfo(pod), old, new) is hint


NODE_HINTS = [
    ("added node fits", None, make_node(cpu="4"), QueueingHint.QUEUE),
    ("added node too small", None, make_node(cpu="1"), QueueingHint.SKIP),
    ("allocatable grew and now fits", make_node(cpu="1"), make_node(cpu="4"), QueueingHint.QUEUE),
    ("update that fits but grew nothing the pod wants", make_node(cpu="4", memory="1Gi"),
     make_node(cpu="4", memory="2Gi"), QueueingHint.SKIP),
    ("more pods allowed", make_node(cpu="4", pods=10), make_node(cpu="4", pods=20), QueueingHint.QUEUE),
]


@pytest.mark.parametrize(("old", "new", "hint"), [c[1:] for c in NODE_HINTS], ids=[c[0] for c in NODE_HINTS])
def test_node_change_hint(old, new, hint):
    pod = PodInfo(make_pod(requests={"cpu": "2"}))
    assert fit().is_schedulable_after_node_change(pod, old, new) is hint


# --- batch == per node -----------------------------------------------------------------------

RESOURCE_NAMES = ["cpu", "memory", "ephemeral-storage", EXTENDED_A, EXTENDED_B, HUGEPAGE]


def random_requests(rng: random.Random) -> dict[str, str]:
    out = {}
    if rng.random() < 0.8:
        out["cpu"] = f"{rng.choice([0, 50, 100, 250, 500, 1000, 2000])}m"
    if rng.random() < 0.8:
        out["memory"] = str(rng.choice([0, 64, 128, 512, 1024, 4096]) * 1024 * 1024)
    for name in RESOURCE_NAMES[2:]:
        if rng.random() < 0.2:
            out[name] = str(rng.randint(0, 3) * (1024**3 if name == "ephemeral-storage" else 1))
    return out


def random_nodes(rng: random.Random, count: int) -> list[NodeInfo]:
    infos = []
    for i in range(count):
        extended = {name: rng.randint(0, 6) for name in (EXTENDED_A, HUGEPAGE) if rng.random() < 0.6}
        node = make_node(f"n{i}", cpu=str(rng.choice([0, 1, 2, 4, 8])), memory=f"{rng.choice([0, 1, 4, 16])}Gi",
                         pods=rng.choice([2, 5, 110]),
                         ephemeral_storage=rng.choice([None, "10Gi"]), extended=extended)
        pods = [make_pod(f"p{i}-{j}", requests=random_requests(rng)) for j in range(rng.randint(0, 6))]
        infos.append(node_info(node, *pods))
    return infos


STRATEGIES = [
    {"type": "LeastAllocated"},
    {"type": "MostAllocated", "resources": [{"name": "cpu", "weight": 3}, {"name": "memory", "weight": 2},
                                            {"name": EXTENDED_A, "weight": 5}, {"name": "ephemeral-storage"}]},
    {"type": "RequestedToCapacityRatio", "resources": [{"name": "cpu"}, {"name": "memory", "weight": 4},
                                                       {"name": HUGEPAGE, "weight": 2}],
     "requestedToCapacityRatio": {"shape": [{"utilization": 0, "score": 2}, {"utilization": 30, "score": 9},
                                            {"utilization": 70, "score": 1}, {"utilization": 100, "score": 7}]}},
]


@pytest.mark.parametrize("strategy", STRATEGIES, ids=[s["type"] for s in STRATEGIES])
def test_batch_agrees_with_per_node(strategy):
    rng = random.Random(20240531)
    nodes = random_nodes(rng, 300)
    table = NodeTable(nodes)
    plugin = fit({"scoringStrategy": strategy, "ignoredResources": [EXTENDED_B]})
    rows = np.arange(len(nodes))
    rejected_somewhere = fitted_somewhere = 0
    for i in range(60):
        pod = PodInfo(make_pod(f"pod{i}", requests=random_requests(rng),
                               init_requests=[random_requests(rng)] if rng.random() < 0.2 else None))
        state = CycleState()
        plugin.pre_filter(state, pod, nodes)
        subset = np.sort(rng.sample(range(len(nodes)), 200))
        fits = plugin.filter_nodes(state, pod, table, subset)
        expected = [plugin.filter(state, pod, nodes[r]) is None for r in subset]
        assert fits.tolist() == expected
        rejected_somewhere += int((~fits).sum())
        fitted_somewhere += int(fits.sum())
        plugin.pre_score(state, pod, nodes)
        batch = plugin.score_nodes(state, pod, table, rows)
        assert batch.tolist() == [plugin.score(state, pod, n) for n in nodes]
    assert rejected_somewhere and fitted_somewhere  # the random data exercises both outcomes


def test_batch_sees_refreshed_rows():
    nodes = [node_info(make_node("n0", cpu="1")), node_info(make_node("n1", cpu="1"))]
    table = NodeTable(nodes)
    plugin = fit()
    pod = PodInfo(make_pod(requests={"cpu": "600m"}))
    state = CycleState()
    plugin.pre_filter(state, pod, nodes)
    assert plugin.filter_nodes(state, pod, table, np.arange(2)).tolist() == [True, True]
    nodes[1].add_pod(PodInfo(make_pod(requests={"cpu": "500m"}, node_name="n1")))
    table.refresh([1])
    assert plugin.filter_nodes(state, pod, table, np.arange(2)).tolist() == [True, False]


def test_score_leaves_pod_level_requests_out():
    """Found by the differential tests: v1.37.2 builds Fit's scorer without the
    PodLevelResources switch, so a pod scores by its containers' requests (here none, so the
    100m/200Mi defaults), not by spec.resources (250m/64Mi). On 2 cpu / 8Gi that is
    ((2000-100)·100/2000 + (8192-200)·100/8192) / 2 = (95 + 97) / 2 = 96, where the
    pod-level requests would give (87 + 99) / 2 = 93."""
    pod = make_pod("p")
    pod["spec"]["resources"] = {"requests": {"cpu": "250m", "memory": "64Mi"}}
    plugin, info, state = fit(), node_info(make_node("n1", cpu="2", memory="8Gi")), CycleState()
    assert plugin.pre_score(state, PodInfo(pod), [info]) is None
    assert plugin.score(state, PodInfo(pod), info) == 96
    assert plugin.score_nodes(state, PodInfo(pod), NodeTable([info]), np.arange(1)).tolist() == [96]


def test_filter_statuses_are_filters_statuses_across_requests():
    """One plugin, many request shapes (different checks, so different bits per reason):
    filter_statuses gives each row the very Status filter gives it."""
    rng = random.Random(7)
    nodes = [node_info(make_node(f"n{i}", cpu=rng.choice(["1", "4"]), memory=rng.choice(["1Gi", "8Gi"]),
                                 pods=rng.choice([1, 2, 110]),
                                 extended={EXTENDED_A: rng.choice([0, 1, 4]), EXTENDED_B: rng.choice([0, 2])}),
                       *[make_pod(f"p{i}-{j}", requests=req(rng.choice([0, 500, 2000]),
                                                            rng.choice([0, 2 ** 29, 2 ** 32])))
                         for j in range(rng.randint(0, 2))])
             for i in range(40)]
    table = NodeTable(nodes)
    plugin = fit()
    for step in range(200):
        extra = {name: rng.choice([1, 3, 5]) for name in (EXTENDED_A, EXTENDED_B) if rng.random() < 0.4}
        pod = PodInfo(make_pod(f"q{step}", requests=req(rng.choice([0, 100, 3000, 5000]),
                                                       rng.choice([0, 2 ** 30, 2 ** 34]), extra)))
        state = CycleState()
        plugin.pre_filter(state, pod, nodes)
        rows = np.array(rng.sample(range(len(nodes)), rng.randint(1, len(nodes))), dtype=np.int64)
        expected = [plugin.filter(state, pod, nodes[row]) for row in rows.tolist()]
        rejected = rows[[status is not None for status in expected]]
        got = plugin.filter_statuses(state, pod, table, rejected)
        assert all(a is b for a, b in zip(got, [status for status in expected if status is not None], strict=True))
