"""Preemption through the real Scheduler, offline: nomination, victims deleted through the
client, the preemptor bound on a later attempt, and its nominated node kept for it."""

from __future__ import annotations

from typing import Any

from kopfsched.simulate.loader import ClusterInput, Loaded
from kopfsched.simulate.output import to_json
from kopfsched.simulate.runner import simulate
from tests.builders import make_node, make_pod
from tests.harness import Harness

T0 = "2024-01-01T00:00:00Z"


def running(name: str, node: str, *, cpu: str, priority: int, start: str = T0, **extra: Any) -> dict[str, Any]:
    pod = make_pod(name, requests={"cpu": cpu}, priority=priority, node_name=node, uid=name, **extra)
    pod["status"] = {"phase": "Running", "startTime": start}
    return pod


def pending(name: str, *, cpu: str, priority: int, **extra: Any) -> dict[str, Any]:
    return make_pod(name, requests={"cpu": cpu}, priority=priority, uid=name, **extra)


def two_nodes() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """node-a runs two priority-0 pods, node-b two priority-5 pods; each node is full."""
    nodes = [make_node("node-a", cpu="4"), make_node("node-b", cpu="4")]
    pods = [running("a1", "node-a", cpu="2", priority=0), running("a2", "node-a", cpu="2", priority=0),
            running("b1", "node-b", cpu="2", priority=5), running("b2", "node-b", cpu="2", priority=5)]
    return nodes, pods


async def test_preemptor_is_nominated_victims_deleted_then_bound_and_its_node_reserved():
    nodes, pods = two_nodes()
    h = Harness(nodes)
    h.add_pods(*pods)
    h.add_pods(pending("p", cpu="3", priority=10))

    # First attempt: no node fits, preemption picks node-a (lowest-priority victims).
    await h.scheduler.schedule_one(h.scheduler.queue.pop())
    await h.scheduler.wait_for_tasks()
    attempt = h.recorder.last("p")
    assert (attempt.result, attempt.nominated_node, attempt.victims) == (
        "unschedulable", "node-a", ("default/a1", "default/a2"))
    assert attempt.message == ("0/2 nodes are available: 2 Insufficient cpu. preemption: found a potential "
                               "placement for pod on node node-a, preempting 2 victims")
    assert h.client.deleted == ["default/a1", "default/a2"]
    assert h.client.pods["default/p"]["status"]["nominatedNodeName"] == "node-a"
    assert h.node_of("p") is None
    preempted = [(e.regarding, e.message) for e in h.client.events if e.reason == "Preempted"]
    assert preempted == [("default/a1", "Preempted by pod p on node node-a"),
                         ("default/a2", "Preempted by pod p on node node-a")]

    # Meanwhile a lower-priority pod that would fit node-a arrives: the room is the preemptor's.
    h.add_pods(pending("late", cpu="3", priority=1))
    await h.settle()
    assert h.node_of("p") == "node-a"
    assert h.node_of("late") is None
    assert h.condition("late")["message"] == (
        "0/2 nodes are available: 2 Insufficient cpu. "
        "preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod.")
    assert h.client.deleted == ["default/a1", "default/a2"], "nobody else was preempted"
    assert h.scheduler.queue.nominator.nominated_pods_for_node("node-a") == []


async def test_preemption_policy_never_waits_without_preempting():
    nodes, pods = two_nodes()
    h = Harness(nodes)
    h.add_pods(*pods, pending("polite", cpu="3", priority=10, preemptionPolicy="Never"))
    await h.settle()
    assert h.node_of("polite") is None
    assert h.client.deleted == []
    assert h.condition("polite")["message"] == (
        "0/2 nodes are available: 2 Insufficient cpu. preemption: not eligible due to preemptionPolicy=Never.")


async def test_pdb_protected_pods_spared_when_another_node_can_be_used():
    nodes = [make_node("node-a", cpu="4"), make_node("node-b", cpu="4")]
    h = Harness(nodes)
    h.handlers.on_object_upsert("PodDisruptionBudget", {
        "kind": "PodDisruptionBudget", "metadata": {"name": "db", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": "db"}}}, "status": {"disruptionsAllowed": 0}})
    h.add_pods(running("db-0", "node-a", cpu="4", priority=0, labels={"app": "db"}),
               running("batch-0", "node-b", cpu="4", priority=3),
               pending("p", cpu="2", priority=10))
    await h.settle()
    assert h.client.deleted == ["default/batch-0"]
    assert h.node_of("p") == "node-b"


async def test_simulate_reports_nomination_and_victims():
    nodes, pods = two_nodes()
    pods.append(pending("p", cpu="3", priority=10))
    sim = await simulate(ClusterInput(nodes=[Loaded(n, "t") for n in nodes], pods=[Loaded(p, "t") for p in pods]),
                         seed=1)
    report = to_json(sim, explain=False)
    (entry,) = [e for e in report["pods"] if e["name"] == "p"]
    assert (entry["result"], entry["node"]) == ("Scheduled", "node-a")
    assert sim.client.deleted == ["default/a1", "default/a2"]
    assert report["summary"]["preempted"] == 2
