"""The scheduling and binding cycles end to end, offline: messages, placement, failure handling."""

from __future__ import annotations

import asyncio

import pytest

from kopfsched.framework.client import ClusterError, ConflictError
from kopfsched.framework.registry import PluginFactory, Registry
from kopfsched.framework.status import Status
from kopfsched.plugins.registry import in_tree_registry
from kopfsched.scheduler.schedule_one import num_feasible_nodes_to_find
from kopfsched.simulate.client import InMemoryClusterClient
from tests.builders import make_node, make_pod, taint
from tests.harness import Harness, profile_from_spec


@pytest.mark.parametrize(
    ("percentage", "nodes", "expected"),
    [
        pytest.param(0, 50, 50, id="under-100-nodes-all"),
        pytest.param(0, 100, 100, id="100-nodes-min-100"),
        pytest.param(0, 500, 230, id="500-nodes-46pct"),
        pytest.param(0, 5000, 500, id="5000-nodes-10pct"),
        pytest.param(0, 6000, 300, id="floor-5pct"),
        pytest.param(30, 1000, 300, id="explicit-30pct"),
        pytest.param(10, 200, 100, id="explicit-floored-at-100"),
        pytest.param(100, 1000, 1000, id="all"),
    ],
)
def test_num_feasible_nodes_to_find(percentage, nodes, expected):
    assert num_feasible_nodes_to_find(percentage, nodes) == expected


async def test_fit_error_message_condition_and_single_event():
    nodes = [
        make_node("small", cpu="1"),
        make_node("gpu-1", taints=[taint("dedicated", "gpu")]),
        make_node("gpu-2", taints=[taint("dedicated", "gpu")]),
    ]
    h = Harness(nodes)
    h.add_pods(make_pod("big", requests={"cpu": "2"}))
    await h.settle()
    # "small" is short of cpu even when empty: NodeResourcesFit says UnschedulableAndUnresolvable,
    # so preemption cannot help on any node.
    message = ("0/3 nodes are available: 1 Insufficient cpu, 2 node(s) had untolerated taint(s). "
               "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.")
    condition = h.condition("big")
    assert condition["status"] == "False"
    assert condition["reason"] == "Unschedulable"
    assert condition["message"] == message
    failed = [e for e in h.client.events if e.reason == "FailedScheduling"]
    assert [(e.type, e.message, e.count) for e in failed] == [("Warning", message, 1)]
    attempt = h.recorder.last("big")
    assert attempt.diagnosis.node_to_status.get("small").reasons == ("Insufficient cpu",)
    assert attempt.diagnosis.node_to_status.get("gpu-1").plugin == "TaintToleration"


async def test_the_condition_carries_the_pods_generation_as_observed_generation():
    """PodObservedGenerationTracking (on by default since v1.34): the scheduler's condition
    says which generation of the pod it judged; a pod without a generation gets none."""
    h = Harness([make_node("small", cpu="1")])
    with_generation = make_pod("big", requests={"cpu": "2"})
    with_generation["metadata"]["generation"] = 3
    h.add_pods(with_generation, make_pod("plain", requests={"cpu": "2"}))
    await h.settle()
    assert h.condition("big")["observedGeneration"] == 3
    assert "observedGeneration" not in h.condition("plain")


async def test_unschedulable_pod_binds_when_a_fitting_node_arrives():
    h = Harness([make_node("small", cpu="1")])
    h.add_pods(make_pod("big", requests={"cpu": "2"}))
    await h.settle()
    assert h.node_of("big") is None
    assert h.scheduler.queue.pending_counts()["unschedulable"] == 1
    h.handlers.on_node_upsert(make_node("large", cpu="8"))
    await h.settle()
    assert h.node_of("big") == "large"
    scheduled = [e for e in h.client.events if e.reason == "Scheduled"]
    assert [e.message for e in scheduled] == ["Successfully assigned default/big to large"]


async def test_least_allocated_spreads_and_explain_totals_are_weighted():
    h = Harness([make_node("a", cpu="4"), make_node("b", cpu="4")])
    h.add_pods(make_pod("running", requests={"cpu": "3", "memory": "1Gi"}, node_name="a"))
    h.add_pods(make_pod("p", requests={"cpu": "1", "memory": "1Gi"}))
    await h.settle()
    assert h.node_of("p") == "b"
    scores = h.recorder.last("p").scores
    weights = {"TaintToleration": 3, "NodeAffinity": 2, "NodeResourcesFit": 1, "PodTopologySpread": 2,
               "InterPodAffinity": 2, "VolumeBinding": 1, "DynamicResources": 2, "NodeResourcesBalancedAllocation": 1,
               "ImageLocality": 1}
    for node in ("a", "b"):
        entry = scores[node]
        assert entry["total"] == sum(weights[name] * score for name, score in entry.items() if name != "total")
    assert scores["b"]["NodeResourcesFit"] > scores["a"]["NodeResourcesFit"]


async def test_most_allocated_profile_packs():
    registry = in_tree_registry()
    profile = profile_from_spec({"pluginConfig": [{"name": "NodeResourcesFit", "args": {
        "scoringStrategy": {"type": "MostAllocated"}}}]}, registry, name="packer")
    h = Harness([make_node("a", cpu="4"), make_node("b", cpu="4")], profiles=[profile], registry=registry)
    h.add_pods(make_pod("running", requests={"cpu": "3", "memory": "1Gi"}, node_name="a"))
    h.add_pods(make_pod("p", requests={"cpu": "1", "memory": "1Gi"}, scheduler_name="packer"))
    await h.settle()
    assert h.node_of("p") == "a"


async def test_ties_are_broken_by_the_seed():
    nodes = [make_node(f"n{i}") for i in range(10)]

    async def place(seed: int) -> str:
        h = Harness([dict(n) for n in nodes], seed=seed)
        h.add_pods(make_pod("p", requests={"cpu": "100m"}))
        await h.settle()
        return h.node_of("p")

    first = [await place(seed) for seed in range(12)]
    assert first == [await place(seed) for seed in range(12)]
    assert len(set(first)) > 1


async def test_start_index_rotates_between_cycles():
    h = Harness([make_node(f"n{i:03}") for i in range(200)], explain=False)
    h.add_pods(make_pod("p1", requests={"cpu": "1"}))
    await h.settle()
    assert h.scheduler.algorithm.next_start_node_index == 100
    h.add_pods(make_pod("p2", requests={"cpu": "1"}))
    await h.settle()
    assert h.scheduler.algorithm.next_start_node_index == 0


async def test_pods_of_other_schedulers_are_never_touched():
    h = Harness([make_node("n1")])
    h.add_pods(make_pod("theirs", scheduler_name="someone-else"))
    await h.settle()
    assert h.node_of("theirs") is None
    assert h.client.bindings == []
    assert h.client.events == []
    assert h.condition("theirs") is None


async def test_scheduling_gates_hold_the_pod_until_removed():
    h = Harness([make_node("n1")])
    gated = make_pod("g", scheduling_gates=["example.com/wait"])
    h.add_pods(gated)
    await h.settle()
    assert [q.key for q in h.scheduler.queue.gated_pods()] == ["default/g"]
    assert h.client.events == []
    ungated = {**gated, "spec": {k: v for k, v in gated["spec"].items() if k != "schedulingGates"}}
    h.client.pods["default/g"] = ungated
    h.handlers.on_pod_upsert(ungated, gated)
    await h.settle()
    assert h.node_of("g") == "n1"


class FlakyClient(InMemoryClusterClient):
    """Fails the first `failures` binds with `error`."""

    def __init__(self, failures: int, error: Exception) -> None:
        super().__init__()
        self.failures = failures
        self.error = error
        self.bind_calls = 0

    async def bind(self, *, pod, node_name):
        self.bind_calls += 1
        if self.failures:
            self.failures -= 1
            raise self.error
        await super().bind(pod=pod, node_name=node_name)


async def test_bind_error_unreserves_forgets_and_retries_with_backoff():
    client = FlakyClient(2, ClusterError("500 Internal Server Error"))
    h = Harness([make_node("n1", cpu="2")], client=client)
    h.add_pods(make_pod("p", requests={"cpu": "1500m"}))
    await h.settle()
    assert h.node_of("p") == "n1"
    assert client.bind_calls == 3
    assert h.scheduler.cache.get_node("n1").requested.milli_cpu == 1500
    assert not h.scheduler.cache.is_assumed(h.client.pods["default/p"]["metadata"]["uid"])
    errors = [a for a in h.recorder.attempts if a.result == "error"]
    assert [a.reason for a in errors] == ["SchedulerError", "SchedulerError"]
    assert errors[0].message == 'running Bind plugin "DefaultBinder": 500 Internal Server Error'


async def test_bind_conflict_is_not_retried():
    client = FlakyClient(1, ConflictError("already bound"))
    h = Harness([make_node("n1")], client=client)
    h.add_pods(make_pod("p", requests={"cpu": "1"}))
    await h.settle()
    assert client.bind_calls == 1
    assert h.scheduler.cache.get_node("n1").requested.milli_cpu == 0
    assert h.scheduler.queue.pending_counts() == {"active": 0, "backoff": 0, "unschedulable": 0, "gated": 0}


class RecordingReserve:
    name = "RecordingReserve"
    calls: list[tuple[str, str, str]] = []

    def __init__(self, args, handle) -> None:
        pass

    def reserve(self, state, pod, node_name):
        self.calls.append(("reserve", pod.name, node_name))
        if pod.labels.get("reserve") == "reject":
            return Status.unschedulable("reservation refused")
        return None

    def unreserve(self, state, pod, node_name):
        self.calls.append(("unreserve", pod.name, node_name))


class GatePermit:
    """Waits for pods labelled gate=wait; another pod labelled gate=open allows them."""

    name = "GatePermit"

    def __init__(self, args, handle) -> None:
        self.handle = handle

    def permit(self, state, pod, node_name):
        gate = pod.labels.get("gate")
        if gate == "wait":
            return Status.wait(), 30.0
        if gate == "deny":
            return Status.unschedulable("denied by gate"), 0.0
        if gate == "open":
            for waiting in self.handle.waiting_pods:
                waiting.allow(self.name)
        return None, 0.0


def _custom_harness(nodes):
    custom = Registry()
    custom.register(PluginFactory(name="RecordingReserve", factory=RecordingReserve))
    custom.register(PluginFactory(name="GatePermit", factory=GatePermit))
    registry = in_tree_registry().merged(custom)
    profile = profile_from_spec({"schedulerName": "default-scheduler", "plugins": {
        "reserve": {"enabled": [{"name": "RecordingReserve"}]},
        "permit": {"enabled": [{"name": "GatePermit"}]},
    }}, registry)
    RecordingReserve.calls = []
    return Harness(nodes, profiles=[profile], registry=registry)


async def test_reserve_rejection_unreserves_and_reports_on_one_node():
    h = _custom_harness([make_node("n1")])
    h.add_pods(make_pod("p", labels={"reserve": "reject"}, requests={"cpu": "1"}))
    await h.settle()
    assert RecordingReserve.calls == [("reserve", "p", "n1"), ("unreserve", "p", "n1")]
    assert h.condition("p")["message"] == "0/1 nodes are available: 1 reservation refused."
    assert h.scheduler.cache.get_node("n1").requested.milli_cpu == 0


async def test_permit_rejection_unreserves_and_forgets():
    h = _custom_harness([make_node("n1")])
    h.add_pods(make_pod("p", labels={"gate": "deny"}, requests={"cpu": "1"}))
    await h.settle()
    assert RecordingReserve.calls == [("reserve", "p", "n1"), ("unreserve", "p", "n1")]
    assert h.condition("p")["message"] == "0/1 nodes are available: 1 denied by gate."
    assert h.scheduler.cache.get_node("n1").requested.milli_cpu == 0


async def test_permit_wait_until_allowed_by_another_pod():
    h = _custom_harness([make_node("n1")])
    h.add_pods(make_pod("waiter", labels={"gate": "wait"}, requests={"cpu": "1"}))
    queue = h.scheduler.queue
    await h.scheduler.schedule_one(queue.pop())
    assert len(h.scheduler.waiting_pods) == 1
    assert h.scheduler.cache.get_node("n1").requested.milli_cpu == 1000  # assumed while waiting
    h.add_pods(make_pod("opener", labels={"gate": "open"}, requests={"cpu": "1"}))
    await h.settle()
    assert h.node_of("waiter") == "n1"
    assert h.node_of("opener") == "n1"
    assert len(h.scheduler.waiting_pods) == 0


async def test_a_stale_nomination_is_cleared_when_preemption_finds_nothing():
    h = Harness([make_node("n1", cpu="2")])
    pod = make_pod("pre", priority=100, requests={"cpu": "4"})
    pod["status"]["nominatedNodeName"] = "n1"
    h.add_pods(pod)
    assert [p.name for p in h.scheduler.queue.nominator.nominated_pods_for_node("n1")] == ["pre"]
    await h.settle()
    assert "nominatedNodeName" not in h.client.pods["default/pre"]["status"]
    assert h.scheduler.queue.nominator.nominated_pods_for_node("n1") == []
    assert h.condition("pre")["message"] == (
        "0/1 nodes are available: 1 Insufficient cpu. "
        "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.")


async def test_shutdown_unreserves_waiting_pods_without_reporting_them():
    h = _custom_harness([make_node("n1")])
    h.add_pods(make_pod("waiter", labels={"gate": "wait"}, requests={"cpu": "1"}))
    await h.scheduler.schedule_one(h.scheduler.queue.pop())
    assert h.scheduler.cache.get_node("n1").requested.milli_cpu == 1000
    await h.scheduler.shutdown()
    assert RecordingReserve.calls == [("reserve", "waiter", "n1"), ("unreserve", "waiter", "n1")]
    assert h.scheduler.cache.get_node("n1").requested.milli_cpu == 0
    assert h.condition("waiter") is None
    assert h.client.events == []


async def test_no_nodes_is_reported_as_unschedulable_and_retried_with_backoff():
    h = Harness([])
    h.add_pods(make_pod("p", requests={"cpu": "1"}))
    await h.scheduler.schedule_one(h.scheduler.queue.pop())
    await h.scheduler.wait_for_tasks()
    condition = h.condition("p")
    assert (condition["reason"], condition["message"]) == ("Unschedulable", "no nodes available to schedule pods")
    assert h.recorder.last("p").result == "unschedulable"
    assert h.scheduler.queue.pending_counts()["backoff"] == 1  # no plugin to wait for: retried after backoff
    h.handlers.on_node_upsert(make_node("n1"))
    await h.settle()
    assert h.node_of("p") == "n1"


async def test_a_deleting_pod_is_skipped_with_an_event():
    h = Harness([make_node("n1")])
    pod = make_pod("leaving", requests={"cpu": "1"})
    pod["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    h.add_pods(pod)
    await h.settle()
    assert h.node_of("leaving") is None
    assert [(e.reason, e.message) for e in h.client.events] == [
        ("FailedScheduling", "skip schedule deleting pod: default/leaving")]


class HeldPreBind:
    """PreBind that waits until the test releases it."""

    name = "HeldPreBind"
    release: asyncio.Event

    def __init__(self, args, handle) -> None:
        pass

    async def pre_bind(self, state, pod, node_name):
        await HeldPreBind.release.wait()
        return None


async def test_an_update_of_a_pod_being_bound_does_not_queue_it_again():
    custom = Registry()
    custom.register(PluginFactory(name="HeldPreBind", factory=HeldPreBind))
    registry = in_tree_registry().merged(custom)
    profile = profile_from_spec({"schedulerName": "default-scheduler",
                                 "plugins": {"preBind": {"enabled": [{"name": "HeldPreBind"}]}}}, registry)
    HeldPreBind.release = asyncio.Event()
    h = Harness([make_node("n1")], profiles=[profile], registry=registry)
    raw = make_pod("p", requests={"cpu": "1"})
    h.add_pods(raw)
    queue = h.scheduler.queue
    await h.scheduler.schedule_one(queue.pop())
    await asyncio.sleep(0)  # the binding task is done with its attempt and waits in PreBind
    updated = {**raw, "metadata": {**raw["metadata"], "labels": {"extra": "x"}}}
    h.client.pods["default/p"] = updated
    h.handlers.on_pod_upsert(updated, raw)
    assert queue.pop() is None
    HeldPreBind.release.set()
    await h.settle()
    assert h.node_of("p") == "n1"
    assert [a.result for a in h.recorder.attempts] == ["scheduled"]


async def test_a_listed_bound_pod_leaves_the_queue_only_if_it_was_there():
    """A relist (old None) showing a queued pod bound elsewhere takes it out of the queue; a pod
    first seen bound (most of a listing) was in no queue and is only added to the cache."""
    h = Harness([make_node("n1", cpu="1")])
    h.add_pods(make_pod("stuck", uid="uid-stuck", requests={"cpu": "4"}))
    await h.settle()
    assert h.scheduler.queue.where("uid-stuck") == "unschedulable"
    stuck = h.client.pods["default/stuck"]
    h.handlers.on_pod_upsert({**stuck, "spec": {**stuck["spec"], "nodeName": "n1"}})  # a relist's view
    assert h.scheduler.queue.where("uid-stuck") is None
    assert h.scheduler.cache.get_pod("uid-stuck").node_name == "n1"
    h.handlers.on_pod_upsert(make_pod("running", uid="uid-running", node_name="n1", requests={"cpu": "100m"}))
    assert h.scheduler.queue.where("uid-running") is None
    assert h.scheduler.cache.get_pod("uid-running").node_name == "n1"
    assert h.scheduler.cache.get_node("n1").requested.milli_cpu == 4100


async def test_the_echo_of_a_failure_report_updates_the_queue_from_its_own_pod_info():
    """The watch event of our own PodScheduled=False patch: the queue's update gets, as the old
    version, the PodInfo the queue holds of that very object (not one built again), and for the new
    version one sharing its computed parts; a version the queue does not hold gets a PodInfo of its own."""
    h = Harness([make_node("small", cpu="1")])
    h.add_pods(make_pod("big", requests={"cpu": "2"}))
    seen = []
    update = h.scheduler.queue.update

    def spy(old, new):
        seen.append((old, h.scheduler.queue.pod_info(new.uid)))
        update(old, new)
    h.scheduler.queue.update = spy
    await h.settle()
    assert h.condition("big")["reason"] == "Unschedulable"
    assert len(seen) == 1
    old, held = seen[0]
    assert old is held  # the queue's own PodInfo, its pod the one the patch replaced
    queued = h.scheduler.queue.pod_info(old.uid)
    assert queued is not old and queued.pod is h.client.pods["default/big"]
    assert queued.requests is old.requests  # only the status changed: the computed parts are shared
    stranger = {**queued.pod, "metadata": {**queued.pod["metadata"], "labels": {"x": "y"}}}
    h.client.pods["default/big"] = stranger
    h.handlers.on_pod_upsert(stranger, dict(queued.pod))  # an old version the queue does not hold
    assert seen[1][0] is not queued and seen[1][0].pod == queued.pod


async def test_tasks_are_named_and_their_failures_logged(caplog):
    import logging

    from kopfsched.scheduler.tasks import TaskSet
    tasks = TaskSet(logging.getLogger("tasks-test"))

    async def boom():
        raise RuntimeError("boom")
    future = asyncio.get_running_loop().create_future()

    class Awaitable:
        def __await__(self):
            return future.__await__()
    failing = tasks.spawn(boom(), "binding default/p")
    waiting = tasks.spawn(Awaitable(), "an awaitable")  # any awaitable, not only coroutines
    assert failing.get_name() == "binding default/p" and waiting.get_name() == "an awaitable"
    assert len(tasks) == 2 and tasks.pending() == 2
    future.set_result(1)
    with caplog.at_level(logging.ERROR, logger="tasks-test"):
        await tasks.wait()
    assert len(tasks) == 0
    assert [r.getMessage() for r in caplog.records] == ["binding default/p failed"]


def _eager(info) -> dict:
    from kopfsched.framework.types import _SHARED_WHEN_PLACED
    values = {name: getattr(info, name) for name in _SHARED_WHEN_PLACED}
    values["requests"] = (values["requests"].as_dict(), dict(values["requests"].scalar))
    return {**values, "pod": info.pod, "spec": info.spec, "start_time": info.start_time,
            "creation_timestamp": info.creation_timestamp}


@pytest.mark.parametrize("seed", range(30))
def test_a_status_patched_pod_info_equals_one_built_anew(seed):
    """The echo of a status patch takes the new version's computed parts from the queue's PodInfo
    when only the status changed, and none of what requests read (_status_patched): the same as
    PodInfo(new), over random status changes of a pod (resizes, container statuses, conditions)."""
    import copy
    import random

    from kopfsched.framework.types import PodInfo
    from kopfsched.scheduler.event_handlers import _status_patched
    rng = random.Random(seed)
    current = make_pod("p", requests=[{"cpu": "1", "memory": "1Gi"}, {"cpu": "500m"}], uid="u", labels={"a": "b"})
    current["status"] = {}
    parts = {"containerStatuses": [{"name": "c0", "allocatedResources": {"cpu": "250m", "memory": "1Gi"}}],
             "initContainerStatuses": [],
             "conditions": [{"type": "PodResizePending", "status": "True", "reason": "Infeasible"}],
             "startTime": "2026-01-01T00:00:00Z", "nominatedNodeName": "n1"}
    patched = 0
    for _ in range(40):
        info = PodInfo(current)
        status = dict(current["status"])
        key = rng.choice([*parts, "conditions"])
        if key in status and rng.random() < 0.5:
            del status[key]
        else:
            status[key] = copy.deepcopy(parts[key]) if key != "conditions" or rng.random() < 0.5 else [
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]
        new = {**current, "status": status}
        if rng.random() < 0.1:
            new["metadata"] = {**current["metadata"], "labels": {"a": "c"}}
        if _status_patched(current, new):
            patched += 1
            assert _eager(info.placed(new)) == _eager(PodInfo(new))
        current = new
    assert patched
