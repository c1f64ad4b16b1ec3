"""PendingPods: the last failed attempt of each pending pod, as /debug/pending serves it."""

from __future__ import annotations

import gc
import tracemalloc

from kopfsched.framework.diagnosis import Diagnosis, FitError
from kopfsched.framework.interface import NodeToStatus
from kopfsched.framework.status import Status
from kopfsched.framework.types import PodInfo
from kopfsched.scheduler.observer import Attempt
from kopfsched.scheduler.pending import MESSAGE_LIMIT, OTHER_REASONS, PendingPods
from tests.builders import make_node, make_pod, taint
from tests.fakes import FakeClock
from tests.harness import Harness

MESSAGE = ("0/3 nodes are available: 1 Insufficient cpu, 2 node(s) had untolerated taint(s). "
           "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.")


def three_nodes() -> list[dict]:
    return [make_node("small", cpu="1"), make_node("gpu-1", taints=[taint("dedicated", "gpu")]),
            make_node("gpu-2", taints=[taint("dedicated", "gpu")])]


def harness(nodes: list[dict]) -> tuple[Harness, FakeClock]:
    h = Harness(nodes)
    clock = FakeClock(1_767_225_600.0)  # 2026-01-01T00:00:00Z
    h.scheduler.pending = PendingPods(clock=clock)
    return h, clock


async def test_unschedulable_pod_reports_reasons_plugins_and_preemption():
    h, _ = harness(three_nodes())
    h.add_pods(make_pod("big", requests={"cpu": "2"}))
    await h.settle()
    [entry] = h.scheduler.pending.to_json()["pods"]
    assert entry == {
        "namespace": "default", "name": "big", "schedulerName": "default-scheduler", "attempts": 1,
        "lastAttempt": "2026-01-01T00:00:00Z", "message": MESSAGE,
        "reasons": {"Insufficient cpu": 1, "node(s) had untolerated taint(s)": 2},
        "result": "Unschedulable", "firstAttempt": "2026-01-01T00:00:00Z", "nodes": 3,
        "plugins": {"NodeResourcesFit": 1, "TaintToleration": 2},
        "preemption": {"message": "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.",
                       "nominatedNode": None, "victims": []},
        "detail": True,
    }
    held = h.scheduler.pending.find("default", "big")
    assert held is not None
    assert held.detail_json() == {
        "small": {"plugin": "NodeResourcesFit", "code": "UnschedulableAndUnresolvable",
                  "reasons": ["Insufficient cpu"]},
        "gpu-1": {"plugin": "TaintToleration", "code": "UnschedulableAndUnresolvable",
                  "reasons": ["node(s) had untolerated taint(s)"]},
        "gpu-2": {"plugin": "TaintToleration", "code": "UnschedulableAndUnresolvable",
                  "reasons": ["node(s) had untolerated taint(s)"]},
    }
    # The pod's condition keeps upstream's message: the store adds nothing to the API.
    assert h.condition("big")["message"] == MESSAGE


async def test_a_new_attempt_replaces_the_diagnosis_and_keeps_the_first_attempt_time():
    h, clock = harness(three_nodes())
    h.add_pods(make_pod("big", requests={"cpu": "2"}))
    await h.settle()
    clock.now += 90
    h.handlers.on_node_upsert(make_node("medium", cpu="1500m"))  # a node event: the pod is tried again
    await h.settle()
    [entry] = h.scheduler.pending.to_json()["pods"]
    assert (entry["attempts"], entry["firstAttempt"], entry["lastAttempt"]) == (
        2, "2026-01-01T00:00:00Z", "2026-01-01T00:01:30Z")
    assert entry["reasons"] == {"Insufficient cpu": 2, "node(s) had untolerated taint(s)": 2}
    assert entry["nodes"] == 4


async def test_the_entry_goes_when_the_pod_is_bound():
    h, _ = harness(three_nodes())
    h.add_pods(make_pod("big", requests={"cpu": "2"}), make_pod("stuck", requests={"cpu": "64"}))
    await h.settle()
    assert [p["name"] for p in h.scheduler.pending.to_json()["pods"]] == ["stuck", "big"]
    h.handlers.on_node_upsert(make_node("large", cpu="4"))
    await h.settle()
    assert h.node_of("big") == "large"
    assert [p["name"] for p in h.scheduler.pending.to_json()["pods"]] == ["stuck"]


async def test_the_entry_goes_when_the_pod_is_bound_by_someone_else_or_deleted():
    h, _ = harness(three_nodes())
    h.add_pods(make_pod("a", requests={"cpu": "2"}), make_pod("b", requests={"cpu": "2"}))
    await h.settle()
    assert len(h.scheduler.pending) == 2
    pod_a = h.client.pods["default/a"]
    h.handlers.on_pod_upsert({**pod_a, "spec": {**pod_a["spec"], "nodeName": "small"}}, pod_a)
    assert [p.name for p in h.scheduler.pending] == ["b"]
    await h.client.delete_pod(pod=h.client.pods["default/b"])
    assert len(h.scheduler.pending) == 0
    assert h.scheduler.pending.to_json() == {"pods": []}


def _failure(pod: PodInfo, statuses: dict[str, Status]) -> tuple[Attempt, FitError]:
    diagnosis = Diagnosis(node_to_status=NodeToStatus(statuses))
    fit = FitError(pod_key=pod.key, num_all_nodes=len(statuses), diagnosis=diagnosis)
    attempt = Attempt(pod=pod, profile="p", result="unschedulable", seconds=0.0, message=str(fit),
                      diagnosis=diagnosis, attempts=1)
    return attempt, fit


def test_detail_is_held_for_the_most_recent_failures_only_and_summaries_are_capped():
    store = PendingPods(clock=FakeClock(0.0), detail_pods=2, max_pods=3)
    status = Status.unschedulable("Insufficient cpu").with_plugin("NodeResourcesFit")
    pods = [PodInfo(make_pod(f"p{i}", uid=f"uid-{i}")) for i in range(4)]
    for pod in pods:
        store.record(*_failure(pod, {"n1": status, "n2": status}))
    assert [p.name for p in store] == ["p1", "p2", "p3"]  # p0, the least recently attempted, went
    assert [p.name for p in store if p.detail is not None] == ["p2", "p3"]
    store.record(*_failure(pods[1], {"n1": status}))  # p1 again: its detail is back, p2's goes
    assert [p.name for p in store if p.detail is not None] == ["p3", "p1"]
    assert store.get("uid-1").reasons == {"Insufficient cpu": 1}


def test_reasons_and_message_are_bounded_per_pod():
    store = PendingPods(clock=FakeClock(0.0))
    pod = PodInfo(make_pod("many", uid="uid-many"))
    statuses = {f"n{i}": Status.unschedulable(f"reason {i:02d}").with_plugin("X") for i in range(40)}
    attempt, fit = _failure(pod, statuses)
    attempt.message = "x" * 5000
    store.record(attempt, fit)
    entry = store.get("uid-many")
    assert len(entry.reasons) == 32
    assert entry.reasons[OTHER_REASONS] == 9
    assert sum(entry.reasons.values()) == 40
    assert len(entry.message) == MESSAGE_LIMIT and entry.message.endswith(" ...")


def test_memory_of_10000_pending_pods_on_5000_nodes_stays_far_below_100_mb():
    """tracemalloc counts every byte the store keeps alive (summaries, held details);
    the statuses are one object per node, as the vectorised filters produce them."""
    nodes = [f"node-{i:04d}" for i in range(5000)]
    plugins = ("NodeResourcesFit", "TaintToleration", "NodeAffinity")
    reasons = ("Insufficient cpu", "node(s) had untolerated taint(s)",
               "node(s) didn't match Pod's node affinity/selector")
    pods = [PodInfo(make_pod(f"pending-{i:05d}", uid=f"uid-{i:05d}", namespace=f"team-{i % 50}"))
            for i in range(10_000)]
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        store = PendingPods(clock=FakeClock(0.0))
        for i, pod in enumerate(pods):
            # A fresh status per node and a fresh dict per attempt: nothing shared across pods.
            statuses = {name: Status.unschedulable(reasons[(i + j) % 3]).with_plugin(plugins[(i + j) % 3])
                        for j, name in enumerate(nodes)} if i >= 9_968 else {
                nodes[0]: Status.unschedulable(reasons[0]).with_plugin(plugins[0])}
            attempt, fit = _failure(pod, statuses)
            store.record(attempt, fit)
            del attempt, fit, statuses
        gc.collect()
        used = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(store) == 10_000
    assert sum(1 for p in store if p.detail is not None) == 32
    assert all(len(p.detail.statuses) == 5000 for p in store if p.detail is not None)
    print(f"10 000 pending pods, 32 details of 5000 nodes: {used / 2**20:.1f} MiB")
    assert used < 100 * 2**20, f"{used / 2**20:.1f} MiB"
    # What the bound rests on: ~0.5 MB per held detail at 5000 nodes, ~1-2 KB per summary.
    assert used < 32 * 800 * 1024 + 10_000 * 2048, f"{used / 2**20:.1f} MiB"
