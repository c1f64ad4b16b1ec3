"""The shipped examples, simulated through the Python API: the outcomes a reader of
examples/*.yaml is promised, with upstream's exact messages."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from kopfsched.simulate.loader import load_files
from kopfsched.simulate.output import to_json
from kopfsched.simulate.runner import simulate

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
CLUSTER = str(EXAMPLES / "cluster.yaml")
AFFINITY = str(EXAMPLES / "affinity-and-preemption.yaml")
BIN_PACKING = str(EXAMPLES / "profiles" / "bin-packing.yaml")
ZONE = "topology.kubernetes.io/zone"


def run(*paths: str) -> dict[str, Any]:
    inputs = load_files(list(paths))
    assert inputs.problems == []
    sim = asyncio.run(simulate(inputs, seed=0, explain=True))
    assert inputs.problems == []
    return to_json(sim, explain=True)


def pods_by_key(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f"{p['namespace']}/{p['name']}": p for p in report["pods"]}


def node_labels(path: str) -> dict[str, dict[str, str]]:
    return {n.obj["metadata"]["name"]: n.obj["metadata"].get("labels") or {} for n in load_files([path]).nodes}


def with_preemption(message: str, preemption: str) -> str:
    """The FitError message, plus what DefaultPreemption appends."""
    return f"{message} preemption: {preemption}"


@pytest.fixture(scope="module")
def cluster() -> dict[str, dict[str, Any]]:
    return pods_by_key(run(CLUSTER))


NOT_HELPFUL = "0/24 nodes are available: 24 Preemption is not helpful for scheduling."

CLUSTER_REJECTIONS = [
    pytest.param("analytics/analytics-warehouse-0", with_preemption(
        "0/24 nodes are available: 1 node(s) were unschedulable, 20 Insufficient cpu, 20 Insufficient memory, "
        "3 node(s) had untolerated taint(s).", NOT_HELPFUL), id="too-big"),
    pytest.param("ml/inference-0", with_preemption(
        "0/24 nodes are available: 1 Insufficient cpu, 1 node(s) were unschedulable, 20 Insufficient nvidia.com/gpu, "
        "3 Insufficient memory, 3 node(s) had untolerated taint(s).", NOT_HELPFUL), id="gpu-without-toleration"),
    pytest.param("ml/train-giant-0", with_preemption(
        "0/24 nodes are available: 1 Insufficient cpu, 1 Insufficient memory, 1 node(s) were unschedulable, "
        "20 node(s) didn't match Pod's node affinity/selector, 3 Insufficient nvidia.com/gpu.", NOT_HELPFUL),
        id="more-gpus-than-a-node"),
    pytest.param("shop/legacy-app-0", with_preemption(
        "0/24 nodes are available: 1 node(s) were unschedulable, 20 node(s) didn't match Pod's node "
        "affinity/selector, 3 node(s) had untolerated taint(s).", NOT_HELPFUL), id="selector-matches-nothing"),
]


def test_cluster_pods_of_an_unserved_scheduler_are_not_handled(cluster: dict[str, dict[str, Any]]) -> None:
    assert (cluster["batch/report-0"]["result"], cluster["batch/report-0"]["message"]) == (
        "NotHandled", 'no profile named "bin-packing"')


@pytest.mark.parametrize(("pod", "message"), CLUSTER_REJECTIONS)
def test_cluster_unschedulable_pods(cluster: dict[str, dict[str, Any]], pod: str, message: str) -> None:
    assert (cluster[pod]["result"], cluster[pod]["node"], cluster[pod]["message"]) == ("Unschedulable", None, message)


def test_cluster_gated_pod(cluster: dict[str, dict[str, Any]]) -> None:
    gated = cluster["batch/quota-job-0"]
    # What the pod shows in a cluster (PodScheduled=False, reason SchedulingGated), not the plugin's words.
    assert (gated["result"], gated["message"]) == ("Gated", "Scheduling is blocked due to non-empty scheduling gates")


def test_cluster_placements(cluster: dict[str, dict[str, Any]]) -> None:
    labels = node_labels(CLUSTER)
    assert len(labels) >= 20 and len({v[ZONE] for v in labels.values()}) == 3
    scheduled = {k: p["node"] for k, p in cluster.items() if p["result"] == "Scheduled"}
    assert sorted(scheduled) == sorted([*(f"shop/frontend-{i}" for i in range(4)),
                                        *(f"shop/checkout-{i}" for i in range(3)),
                                        "ml/train-resnet-0", "monitoring/metrics-agent-0"])
    assert labels[scheduled["ml/train-resnet-0"]]["pool"] == "gpu"
    assert labels[scheduled["monitoring/metrics-agent-0"]]["kubernetes.io/arch"] == "arm64"
    web = [n for k, n in scheduled.items() if k.startswith(("shop/frontend", "shop/checkout"))]
    assert {labels[n]["pool"] for n in web} == {"general"}
    # Default scoring spreads the replicas of each app over the zones.
    frontend_zones = Counter(labels[scheduled[f"shop/frontend-{i}"]][ZONE] for i in range(4))
    assert sorted(frontend_zones.values()) == [1, 1, 2]


def test_cluster_summary() -> None:
    assert run(CLUSTER)["summary"] | {"seconds": 0} == {"scheduled": 9, "unschedulable": 4, "notHandled": 3,
                                                        "preempted": 0, "seconds": 0, "batchHintsUsed": 0}


def test_cluster_with_bin_packing_profile_packs_reports() -> None:
    pods = pods_by_key(run(CLUSTER, BIN_PACKING))
    reports = [pods[f"batch/report-{i}"] for i in range(3)]
    assert {(p["schedulerName"], p["result"]) for p in reports} == {("bin-packing", "Scheduled")}
    # MostAllocated fills the already busiest nodes (2 of 4 CPUs used) before touching others:
    # three 1-CPU pods on two of them.
    nodes = [p["node"] for p in reports]
    assert set(nodes) <= {"general-a3", "general-b3", "general-c3"}
    assert len(set(nodes)) == 2


@pytest.fixture(scope="module")
def affinity_report() -> dict[str, Any]:
    return run(AFFINITY)


def test_topology_spread_places_two_web_pods_per_zone(affinity_report: dict[str, Any]) -> None:
    labels = node_labels(AFFINITY)
    pods = pods_by_key(affinity_report)
    web = [pods[f"default/web-{i}"] for i in range(6)]
    assert {p["result"] for p in web} == {"Scheduled"}
    assert Counter(labels[p["node"]][ZONE] for p in web) == {"zone-a": 2, "zone-b": 2, "zone-c": 2}


def test_a_preemptor_keeps_its_first_failed_scheduling_message(affinity_report: dict[str, Any]) -> None:
    """The FailedScheduling message a user sees on the pod before it preempts, in JSON and table."""
    from kopfsched.simulate.output import to_table

    payments = pods_by_key(affinity_report)["default/payments-0"]
    assert (payments["result"], payments["node"], payments["victims"]) == ("Scheduled", "node-b2", ["default/batch-b2"])
    assert payments["message"] == ("0/6 nodes are available: 6 Insufficient cpu. preemption: found a potential "
                                   "placement for pod on node node-b2, preempting 1 victims")
    [row] = [line for line in to_table(affinity_report).splitlines() if line.startswith("default/payments-0 ")]
    assert row.split(None, 4)[4] == ("preempted default/batch-b2 after: 0/6 nodes are available: 6 Insufficient "
                                     "cpu. preemption: found a potential placement for pod on node node-b2, "
                                     "preempting 1 victims")


def test_anti_affinity_rejects_the_seventh_cache_pod(affinity_report: dict[str, Any]) -> None:
    pods = pods_by_key(affinity_report)
    placed = [pods[f"default/cache-{i}"]["node"] for i in range(6)]
    assert None not in placed and len(set(placed)) == 6
    rejected = pods["default/cache-6"]
    assert rejected["result"] == "Unschedulable"
    assert rejected["message"] == with_preemption(
        "0/6 nodes are available: 6 node(s) didn't match pod anti-affinity rules.",
        "0/6 nodes are available: 6 No preemption victims found for incoming pod.")
    assert {f["plugin"] for f in rejected["filter"].values()} == {"InterPodAffinity"}
    assert {tuple(f["reasons"]) for f in rejected["filter"].values()} == {
        ("node(s) didn't match pod anti-affinity rules",)}


def test_existing_pod_anti_affinity_keeps_noisy_out_of_zone_c(affinity_report: dict[str, Any]) -> None:
    noisy = pods_by_key(affinity_report)["default/noisy-0"]
    assert noisy["result"] == "Scheduled" and noisy["node"] not in ("node-c1", "node-c2")
    assert noisy["filter"] == {
        node: {"plugin": "InterPodAffinity", "code": "Unschedulable",
               "reasons": ["node(s) didn't satisfy existing pods anti-affinity rules"]}
        for node in ("node-c1", "node-c2")}


def test_preemption_evicts_the_lowest_priority_batch_pod(affinity_report: dict[str, Any]) -> None:
    payments = pods_by_key(affinity_report)["default/payments-0"]
    assert (payments["result"], payments["node"], payments["nominatedNode"], payments["victims"]) == (
        "Scheduled", "node-b2", "node-b2", ["default/batch-b2"])
    assert affinity_report["summary"]["preempted"] == 1
