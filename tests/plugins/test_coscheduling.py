"""Coscheduling through the real Scheduler on the in-memory client and a virtual clock:
gangs bind together or not at all, releasing what they reserved; timeouts on the clock."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kopfsched.framework.queued import QueuedPodInfo
from kopfsched.framework.registry import ArgsError
from kopfsched.framework.types import PodInfo
from kopfsched.plugins.coscheduling import POD_GROUP_LABEL, CoschedulingArgs, pod_group_statuses
from kopfsched.plugins.registry import in_tree_registry
from tests.builders import make_node, make_pod, pod_group
from tests.harness import Harness, profile_from_spec

SCHEDULER = "gang-scheduler"


def harness(nodes: list[dict[str, Any]], *, args: dict[str, Any] | None = None) -> Harness:
    registry = in_tree_registry()
    spec: dict[str, Any] = {"schedulerName": SCHEDULER, "plugins": {
        "multiPoint": {"enabled": [{"name": "Coscheduling"}]},
        "queueSort": {"disabled": [{"name": "PrioritySort"}]},
    }}
    if args is not None:
        spec["pluginConfig"] = [{"name": "Coscheduling", "args": args}]
    return Harness(nodes, profiles=[profile_from_spec(spec, registry, name=SCHEDULER)], registry=registry)


def member(name: str, group: str, cpu: str = "2", **kw: Any) -> dict[str, Any]:
    return make_pod(name, labels={POD_GROUP_LABEL: group}, requests={"cpu": cpu}, scheduler_name=SCHEDULER, **kw)


def requested_cpu(h: Harness) -> dict[str, int]:
    return {name: h.scheduler.cache.get_node(name).requested.milli_cpu for name in h.scheduler.cache.node_names()}


async def test_gang_of_min_member_binds_together():
    h = harness([make_node("n1", cpu="4"), make_node("n2", cpu="4")])
    h.add_objects("PodGroup", pod_group("g", 3))
    h.add_pods(member("p1", "g"), member("p2", "g"), member("p3", "g"))
    queue = h.scheduler.queue
    await h.scheduler.schedule_one(queue.pop())
    await h.scheduler.schedule_one(queue.pop())
    await h.scheduler.settle_tasks()
    assert sorted(w.pod.name for w in h.scheduler.waiting_pods) == ["p1", "p2"]
    assert h.client.bindings == []  # nobody binds before the quorum
    await h.settle()
    assert sorted(pod for pod, _ in h.client.bindings) == ["default/p1", "default/p2", "default/p3"]
    assert len(h.scheduler.waiting_pods) == 0
    assert sorted(requested_cpu(h).values()) == [2000, 4000]


async def test_gang_that_cannot_fit_binds_none_and_releases_what_it_reserved():
    nodes = [make_node("n1", cpu="4"), make_node("n2", cpu="4")]
    h = harness(nodes, args={"podGroupBackoffSeconds": 30})
    h.add_pods(make_pod("running", requests={"cpu": "1"}, node_name="n1"))
    h.add_objects("PodGroup", pod_group("g", 3))
    before = requested_cpu(h)
    h.add_pods(member("p1", "g", cpu="3"), member("p2", "g", cpu="3"), member("p3", "g", cpu="3"))
    await h.settle()
    assert h.client.bindings == []
    assert requested_cpu(h) == before == {"n1": 1000, "n2": 0}
    assert len(h.scheduler.waiting_pods) == 0
    assert not any(h.scheduler.cache.is_assumed(PodInfo(h.client.pods[f"default/{n}"]).uid) for n in ("p1", "p2"))
    # p3 found no room: it rejected the waiting p1 and p2 and the group backed off; PreFilter then
    # refuses p3 when the released nodes bring it back, and PostFilter's message follows (upstream's FitError):
    # both PostFilter plugins rejected, so their reasons are joined (upstream's RunPostFilterPlugins).
    assert h.recorder.last("p3").message == (
        "0/2 nodes are available: podGroup default/g failed recently. "
        "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling., "
        "PodGroup default/g gets rejected due to Pod p3 is unschedulable even after PostFilter")
    released = ("0/1 nodes are available: 1 optimistic rejection in PostFilter.",
                "0/1 nodes are available: 1 rejection in Unreserve.")
    assert h.recorder.last("p1").message in released
    assert h.recorder.last("p2").message in released


async def test_waiting_gang_times_out_on_the_virtual_clock():
    h = harness([make_node("n1", cpu="8")])
    h.add_objects("PodGroup", pod_group("g", 3, timeout=10))
    # p3 is gated: it counts as a member but never reaches Permit, so the quorum never comes.
    h.add_pods(member("p1", "g"), member("p2", "g"), member("p3", "g", scheduling_gates=["wait"]))
    start = h.clock.now
    await h.settle()
    assert h.clock.now == start + 10
    assert h.client.bindings == []
    assert requested_cpu(h) == {"n1": 0}
    timed_out = "0/1 nodes are available: 1 rejected due to timeout after waiting 10s at plugin Coscheduling."
    assert h.recorder.last("p1").message == timed_out
    assert h.recorder.last("p2").message == timed_out


async def test_default_timeout_is_permit_waiting_time_seconds():
    h = harness([make_node("n1", cpu="8")], args={"permitWaitingTimeSeconds": 25})
    h.add_objects("PodGroup", pod_group("g", 2))
    h.add_pods(member("p1", "g"), member("p2", "g", scheduling_gates=["wait"]))
    start = h.clock.now
    await h.settle()
    assert h.clock.now == start + 25
    assert h.recorder.last("p1").message == (
        "0/1 nodes are available: 1 rejected due to timeout after waiting 25s at plugin Coscheduling.")


async def test_gang_with_more_pods_than_min_member_binds_what_fits():
    h = harness([make_node("n1", cpu="4"), make_node("n2", cpu="2")])
    h.add_objects("PodGroup", pod_group("g", 2))
    h.add_pods(*(member(f"p{i}", "g") for i in range(1, 5)))
    await h.settle()
    assert sorted(pod for pod, _ in h.client.bindings) == ["default/p1", "default/p2", "default/p3"]
    # The quorum holds, so p4's failure rejects nobody (Coscheduling's PostFilter adds no reason).
    assert h.recorder.last("p4").message == ("0/2 nodes are available: 2 Insufficient cpu. preemption: 0/2 nodes are "
                                             "available: 2 No preemption victims found for incoming pod.")
    statuses = pod_group_statuses(h.scheduler.cache.objects, h.scheduler.new_handle().pods,
                                  is_assumed=h.scheduler.cache.is_assumed)
    assert statuses == {"default/g": {"phase": "Scheduled", "scheduled": 3, "running": 0, "succeeded": 0,
                                      "failed": 0}}


async def test_pod_group_update_retries_the_gang():
    h = harness([make_node("n1", cpu="8")])
    h.add_objects("PodGroup", pod_group("g", 3))
    h.add_pods(member("p1", "g"), member("p2", "g"))
    await h.settle()
    assert h.recorder.last("p1").message == ("0/1 nodes are available: pre-filter pod p1 cannot find enough sibling "
                                             "pods, current pods number: 2, minMember of group: 3. preemption: 0/1 "
                                             "nodes are available: 1 Preemption is not helpful for scheduling., "
                                             "PodGroup default/g gets rejected due to Pod p1 is unschedulable "
                                             "even after PostFilter")
    h.add_objects("PodGroup", pod_group("g", 2))
    await h.settle()
    assert sorted(pod for pod, _ in h.client.bindings) == ["default/p1", "default/p2"]


# Both PostFilter plugins reject: their reasons joined, as a real cluster's FailedScheduling shows them.
NOT_HELPFUL = "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling., "


@pytest.mark.parametrize(("groups", "pods", "message"), [
    pytest.param([], [member("p1", "missing")], "0/1 nodes are available: 1 PodGroup not found.",
                 id="group-not-found-at-permit"),
    pytest.param([pod_group("g", 2)], [member("p1", "g")],
                 "0/1 nodes are available: pre-filter pod p1 cannot find enough sibling pods, "
                 "current pods number: 1, minMember of group: 2. " + NOT_HELPFUL +
                 "PodGroup default/g gets rejected due to Pod p1 is unschedulable even after PostFilter",
                 id="too-few-pods"),
    pytest.param([pod_group("g", 1, min_resources={"cpu": "9"})], [member("p1", "g")],
                 "0/1 nodes are available: resource gap: map[cpu:1]. " + NOT_HELPFUL +
                 "PodGroup default/g gets rejected due to Pod p1 is unschedulable even after PostFilter",
                 id="min-resources-gap"),
])
async def test_rejection_messages(groups, pods, message):
    h = harness([make_node("n1", cpu="8")])
    h.add_objects("PodGroup", *groups)
    h.add_pods(*pods)
    await h.settle()
    assert h.client.bindings == []
    assert h.recorder.last("p1").message == message


async def test_pods_outside_groups_schedule_as_usual():
    h = harness([make_node("n1")])
    h.add_pods(make_pod("solo", scheduler_name=SCHEDULER))
    await h.settle()
    assert h.client.bindings == [("default/solo", "n1")]


def _qpi(name: str, *, priority: int = 0, group: str | None = None, created: str | None = None,
         timestamp: float = 0.0) -> QueuedPodInfo:
    pod = make_pod(name, priority=priority, labels={POD_GROUP_LABEL: group} if group else None,
                   creation_timestamp=created)
    return QueuedPodInfo(PodInfo(pod), timestamp, initial_attempt_timestamp=timestamp)


@pytest.mark.parametrize(("a", "b", "less"), [
    pytest.param(_qpi("a", priority=10), _qpi("b", priority=20), False, id="higher-priority-first"),
    pytest.param(_qpi("z", group="early"), _qpi("a", group="late"), True, id="older-group-first"),
    pytest.param(_qpi("a", group="late"), _qpi("z", group="early"), False, id="younger-group-later"),
    pytest.param(_qpi("b", group="early"), _qpi("a", group="early"), False, id="same-group-by-name"),
    pytest.param(_qpi("solo", created="2024-01-01T00:00:05Z"), _qpi("a", group="early"), True,
                 id="pod-created-before-the-group-first"),
    pytest.param(_qpi("x", timestamp=1.0), _qpi("y", timestamp=2.0), True, id="no-group-by-first-attempt"),
])
def test_queue_sort(a, b, less):
    h = harness([make_node("n1")])
    h.add_objects("PodGroup", pod_group("early", 1, created="2024-01-01T00:00:10Z"),
                  pod_group("late", 1, created="2024-01-01T00:00:20Z"))
    plugin = h.scheduler.profiles[SCHEDULER].framework.plugins_by_name["Coscheduling"]
    assert plugin.less(a, b) is less


@pytest.mark.parametrize(("raw", "message"), [
    pytest.param({"permitWaitingTimeSeconds": -1},
                 "permitWaitingTimeSeconds: Invalid value: -1: must be greater than 0", id="negative-wait"),
    pytest.param({"podGroupBackoffSeconds": -2}, "podGroupBackoffSeconds: Invalid value: -2: must be greater than 0",
                 id="negative-backoff"),
    pytest.param({"podGroupRejectPercentage": 101},
                 "podGroupRejectPercentage: Invalid value: 101: must be between 0 and 100", id="percentage"),
    pytest.param({"other": 1}, "other: unknown field", id="unknown"),
])
def test_args_validation(raw, message):
    with pytest.raises(ArgsError) as err:
        CoschedulingArgs.from_dict(raw)
    assert str(err.value) == message


def test_args_defaults():
    assert CoschedulingArgs.from_dict({}) == CoschedulingArgs(60, 0, 10)


async def test_operator_loop_expires_permit_waits_on_the_scheduler_clock():
    h = harness([make_node("n1", cpu="8")])
    h.add_objects("PodGroup", pod_group("g", 2, timeout=10))
    h.add_pods(member("p1", "g"), member("p2", "g", scheduling_gates=["wait"]))
    await h.scheduler.schedule_one(h.scheduler.queue.pop())
    await h.scheduler.settle_tasks()
    stop = asyncio.Event()
    loop = asyncio.ensure_future(h.scheduler.run_permit_timeouts(stop, interval=0))
    await asyncio.sleep(0)
    assert [w.pod.name for w in h.scheduler.waiting_pods] == ["p1"]  # 0 s of 10 have passed
    h.clock.now += 10
    await h.scheduler.wait_for_tasks()  # p1's binding task ends once the loop expires its wait
    stop.set()
    await loop
    assert len(h.scheduler.waiting_pods) == 0
    assert h.recorder.last("p1").message == (
        "0/1 nodes are available: 1 rejected due to timeout after waiting 10s at plugin Coscheduling.")
