"""Preemption through the real Scheduler, offline: nomination, victims deleted through the
client, the preemptor bound on a later attempt, and its nominated node kept for it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kopfsched.framework.client import NotFoundError
from kopfsched.framework.status import Code
from kopfsched.framework.types import PodInfo
from kopfsched.simulate.client import InMemoryClusterClient
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


# -- async preemption: concurrent evictions, the preemptor gated until they are done ------------


class LaggingWatch(InMemoryClusterClient):
    """Deletes on the API side when a delete call returns, as for a grace-0 pod; the watch
    shows each deletion only when the test delivers it. A call waits while its pod's name is
    in `held` (released by `release`)."""

    def __init__(self) -> None:
        super().__init__()
        self.delete_calls: list[str] = []
        self.in_flight: set[str] = set()
        self.most_in_flight = 0
        self.gone: list[dict[str, Any]] = []
        self.held: dict[str, asyncio.Event] = {}

    async def delete_pod(self, *, pod: dict[str, Any], condition: dict[str, Any] | None = None) -> None:
        name = pod["metadata"]["name"]
        key = f"{pod['metadata']['namespace']}/{name}"
        self.delete_calls.append(key)
        self.in_flight.add(key)
        self.most_in_flight = max(self.most_in_flight, len(self.in_flight))
        try:
            if name in self.held:
                await self.held[name].wait()
            current = self.pods.pop(key, None)
            if current is None:
                raise NotFoundError(f'pods "{key}" not found')
            self.deleted.append(key)
            self.gone.append(current)
        finally:
            self.in_flight.discard(key)

    def release(self, *names: str) -> None:
        for name in names:
            self.held.pop(name).set()

    def deliver(self, name: str) -> None:
        """The watch's DELETED event of a pod the API server deleted."""
        (pod,) = [p for p in self.gone if p["metadata"]["name"] == name]
        self.gone.remove(pod)
        assert self.on_pod_delete is not None
        self.on_pod_delete(pod)


VICTIMS = ["default/a1", "default/a2", "default/a3", "default/a4"]


def four_victims() -> tuple[Harness, LaggingWatch]:
    """node-a runs four priority-0 pods of 1 CPU, node-b four priority-5 ones: a preemptor of
    3500m evicts node-a's four, the youngest (a4) last."""
    client = LaggingWatch()
    h = Harness([make_node("node-a", cpu="4"), make_node("node-b", cpu="4")], client=client)
    h.add_pods(*(running(f"a{i}", "node-a", cpu="1", priority=0, start=f"2024-01-01T00:00:0{i}Z")
                 for i in range(1, 5)),
               *(running(f"b{i}", "node-b", cpu="1", priority=5) for i in range(1, 5)),
               pending("p", cpu="3500m", priority=10))
    return h, client


def attempts_of(h: Harness, name: str) -> list[str]:
    return [a.result for a in h.recorder.attempts if a.pod.name == name]


def default_preemption(h: Harness) -> Any:
    profile = h.scheduler.profiles.get("default-scheduler")
    assert profile is not None
    (plugin,) = [p for p in profile.framework.post_filter_plugins if p.name == "DefaultPreemption"]
    return plugin


async def spin(times: int = 5) -> None:
    for _ in range(times):
        await asyncio.sleep(0)


async def test_preemptor_waits_for_the_deletions_of_its_victims_seen_one_by_one():
    """The API server deletes the victims and the watch shows them gone one by one while the
    last delete call is under way (upstream's async preemption): each deletion frees room,
    yet the preemptor waits, gated, until its last victim is gone; each victim is deleted once."""
    h, client = four_victims()
    client.held = {name: asyncio.Event() for name in ("a1", "a2", "a3", "a4")}
    queue = h.scheduler.queue
    await h.scheduler.schedule_one(queue.pop())
    await spin()
    attempt = h.recorder.last("p")
    assert (attempts_of(h, "p"), attempt.nominated_node, attempt.victims) == (
        ["unschedulable"], "node-a", tuple(VICTIMS))
    # Every victim but the last is being deleted at once; the last one waits for them.
    assert sorted(client.in_flight) == VICTIMS[:3]
    gate = default_preemption(h).pre_enqueue(PodInfo(client.pods["default/p"]))
    assert gate is not None and (gate.code, gate.message) == (
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "waiting for the preemption for this pod to be finished")
    client.release("a1", "a2", "a3")
    await spin()
    assert sorted(client.in_flight) == ["default/a4"]
    for name in ("a1", "a2", "a3"):
        client.deliver(name)
        h.clock.now += 60  # any backoff is over
        queue.flush_backoff_completed()
        assert queue.where("p") == "gated", f"requeued after {name}'s deletion"
        assert queue.pop() is None
    client.release("a4")
    await spin()
    client.deliver("a4")
    assert queue.where("p") in ("backoff", "active")
    await h.settle()
    assert attempts_of(h, "p") == ["unschedulable", "scheduled"]
    assert h.node_of("p") == "node-a"
    assert sorted(client.delete_calls) == VICTIMS
    assert client.most_in_flight == 3
    assert sorted(e.regarding for e in client.events if e.reason == "Preempted") == VICTIMS


async def test_the_preemptor_waits_for_the_cache_even_when_the_watch_lags_behind_the_calls():
    """Every delete call is done before the watch shows the first deletion: the preemption is
    not over until the cache shows its last victim gone, so the earlier deletions do not
    bring the preemptor back while the cache still holds the other victims."""
    h, client = four_victims()
    await h.settle()
    assert sorted(client.delete_calls) == VICTIMS
    last = client.delete_calls[-1].split("/")[1]
    for name in sorted({"a1", "a2", "a3", "a4"} - {last}):
        client.deliver(name)
        await h.settle()
        assert attempts_of(h, "p") == ["unschedulable"], f"retried after {name}'s deletion"
    client.deliver(last)
    await h.settle()
    assert attempts_of(h, "p") == ["unschedulable", "scheduled"]
    assert h.node_of("p") == "node-a"
    assert sorted(client.delete_calls) == VICTIMS


async def test_a_victim_sent_a_delete_call_is_not_sent_another_while_the_cache_shows_it():
    """A more important pod finds the same victims while the watch has not shown their
    deletion yet: it is nominated there, with no second delete call (upstream's would be
    answered NotFound) and no second Preempted event."""
    h, client = four_victims()
    await h.settle()
    h.add_pods(pending("q", cpu="3500m", priority=20))
    await h.settle()
    attempt = h.recorder.last("q")
    assert (attempt.result, attempt.nominated_node, attempt.victims) == ("unschedulable", "node-a", tuple(VICTIMS))
    assert sorted(client.delete_calls) == VICTIMS
    assert sorted(e.regarding for e in client.events if e.reason == "Preempted") == VICTIMS


@pytest.mark.parametrize(("grace", "gated"), [
    pytest.param(0, True, id="grace-0-removed-at-once"),
    pytest.param(30, False, id="grace-30-terminating"),
])
async def test_a_last_victim_marked_for_deletion_ends_the_preemption_unless_removed_at_once(
        grace: int, gated: bool) -> None:
    """Upstream's preemption is over once its last victim is terminating: another pod's deletion
    then brings the preemptor back, which finds the victim still there. A victim marked with no
    grace period is removed right after (its DELETED event is on its way): the preemptor waits."""
    h, client = four_victims()
    await h.settle()
    last = client.delete_calls[-1].split("/")[1]
    for name in sorted({"a1", "a2", "a3", "a4"} - {last}):
        client.deliver(name)
    (victim,) = [p for p in client.gone if p["metadata"]["name"] == last]
    marked = {**victim, "metadata": {**victim["metadata"], "deletionTimestamp": "2024-01-01T00:01:00Z",
                                     "deletionGracePeriodSeconds": grace},
              "status": {**victim["status"], "conditions": [
                  {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}]}}
    h.handlers.on_pod_upsert(marked, victim)
    h.handlers.on_pod_delete(client.pods.pop("default/b1"))  # someone else's pod goes away
    await h.settle()
    if gated:
        assert attempts_of(h, "p") == ["unschedulable"]
        assert h.scheduler.queue.where("p") == "gated"
    else:
        assert attempts_of(h, "p") == ["unschedulable", "unschedulable"]
        assert h.recorder.last("p").message == (
            "0/2 nodes are available: 2 Insufficient cpu. "
            "preemption: not eligible due to a terminating pod on the nominated node.")
    client.deliver(last)
    await h.settle()
    assert h.node_of("p") == "node-a"
    assert sorted(client.delete_calls) == VICTIMS
