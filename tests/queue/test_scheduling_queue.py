"""SchedulingQueue on a fake clock: ordering, backoff, events with hints, gating, in-flight events."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from kopfsched.framework.events import (
    FORCE_ACTIVATE,
    UNSCHEDULABLE_TIMEOUT,
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    EventResource,
    QueueingHint,
)
from kopfsched.framework.status import Status
from kopfsched.framework.types import PodInfo
from kopfsched.queue import QueueProfile, SchedulingQueue, scheduling_queue
from tests.builders import make_node, make_pod, taint
from tests.fakes import FakeClock
from tests.queue.queues import (
    HINTS,
    POD_DELETE_OR_SCALE_DOWN,
    contents,
    empty,
    fail,
    make_profile,
    names,
    pod,
    priority_less,
)
from tests.waiting import until

MakeQueue = Callable[..., SchedulingQueue]

# --- activeQ ordering --------------------------------------------------------------


def test_pops_by_priority_then_timestamp(make_queue: MakeQueue, clock: FakeClock) -> None:
    queue = make_queue()
    for name, priority in [("low", 1), ("high", 100), ("mid-early", 10), ("none", None)]:
        queue.add(pod(name, priority=priority))
        clock.advance(1)
    queue.add(pod("mid-late", priority=10))
    assert contents(queue) == empty(active=["high", "mid-early", "mid-late", "low", "none"])
    popped = [queue.pop() for _ in range(5)]
    assert names(popped) == ["high", "mid-early", "mid-late", "low", "none"]
    assert queue.pop() is None
    assert queue.scheduling_cycle == 5
    assert [q.attempts for q in popped] == [1, 1, 1, 1, 1]


def test_equal_pods_pop_first_in_first_out(make_queue: MakeQueue) -> None:
    queue = make_queue()
    for name in ["c", "a", "b"]:
        queue.add(pod(name), timestamp=5.0)
    assert names([queue.pop(), queue.pop(), queue.pop()]) == ["c", "a", "b"]


def test_explicit_timestamp_orders_ties(make_queue: MakeQueue) -> None:
    queue = make_queue()
    queue.add(pod("created-later"), timestamp=20.0)
    queue.add(pod("created-earlier"), timestamp=10.0)
    assert names(queue.active_pods()) == ["created-earlier", "created-later"]


def test_pods_of_other_schedulers_are_never_queued(make_queue: MakeQueue) -> None:
    queue = make_queue()
    assert queue.add(pod("theirs", scheduler_name="other-scheduler")) is False
    assert queue.pending_counts() == {"active": 0, "backoff": 0, "unschedulable": 0, "gated": 0}


# --- backoff -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        pytest.param({}, [1, 2, 4, 8, 10, 10], id="defaults-1s-10s"),
        pytest.param({"initial_backoff": 2.0, "max_backoff": 5.0}, [2, 4, 5, 5], id="profile-2s-5s"),
        pytest.param({"initial_backoff": 3.0, "max_backoff": 3.0}, [3, 3, 3], id="flat-3s"),
    ],
)
def test_backoff_doubles_to_its_cap(make_queue: MakeQueue, clock: FakeClock, settings: dict[str, float],
                                    expected: list[int]) -> None:
    queue = make_queue(make_profile(HINTS, **settings))
    queue.add(pod("p"))
    seen = []
    for _ in expected:
        failed_at = clock.now
        fail(queue, unschedulable=["NodeResourcesFit"])
        queue.node_added(make_node("n"))  # an event the rejector registered: off to backoffQ
        assert contents(queue) == empty(backoff=["p"])
        expiry = queue.next_backoff_expiry()
        assert expiry is not None
        seen.append(expiry - failed_at)
        clock.now = expiry - 0.001
        queue.flush_backoff_completed()
        assert contents(queue) == empty(backoff=["p"])
        clock.now = expiry
        queue.flush_backoff_completed()
        assert contents(queue) == empty(active=["p"])
    assert seen == expected


def test_backoff_settings_are_per_profile(make_queue: MakeQueue, clock: FakeClock) -> None:
    queue = make_queue(profiles={
        "default-scheduler": make_profile(),
        "slow": make_profile(initial_backoff=5.0, max_backoff=60.0),
    })
    queue.add(pod("fast"))
    queue.add(pod("slow", scheduler_name="slow"))
    fail(queue)  # errors (no rejector plugins) back off too
    fail(queue)
    assert contents(queue) == empty(backoff=["fast", "slow"])
    assert queue.next_backoff_expiry() == clock.now + 1
    clock.advance(1)
    queue.flush_backoff_completed()
    assert contents(queue) == empty(active=["fast"], backoff=["slow"])
    assert queue.next_backoff_expiry() == clock.now + 4


def test_an_error_backs_off_and_a_rejection_waits_in_the_unschedulable_pool(make_queue: MakeQueue) -> None:
    queue = make_queue()
    queue.add(pod("p"))
    qpi = fail(queue)
    assert contents(queue) == empty(backoff=["p"])
    queue.activate([qpi.pod_info])
    fail(queue, unschedulable=["NodeAffinity"])
    assert contents(queue) == empty(unschedulable=["p"])


# --- events and queueing hints --------------------------------------------------------


def rejected_pool(make_queue: MakeQueue, clock: FakeClock, rejections: dict[str, list[str]]) -> SchedulingQueue:
    """A queue whose pods each failed once, rejected by the given plugins, backoff since expired."""
    queue = make_queue(make_profile(HINTS))
    for name in rejections:
        queue.add(pod(name))
    for _ in rejections:
        head = queue.active_pods()[0].pod_info.name
        fail(queue, unschedulable=rejections[head], expect=head)
    clock.advance(10)
    return queue


def test_node_add_moves_only_pods_whose_rejector_registered_it(make_queue: MakeQueue, clock: FakeClock) -> None:
    queue = rejected_pool(make_queue, clock, {
        "fit": ["NodeResourcesFit"],
        "affinity": ["NodeAffinity"],
        "both": ["NodeAffinity", "NodeResourcesFit"],
        "unregistered": ["VolumeBinding"],
    })
    assert contents(queue) == empty(unschedulable=["affinity", "both", "fit", "unregistered"])
    queue.node_added(make_node("n"))
    assert contents(queue) == empty(active=["fit", "both"], unschedulable=["affinity", "unregistered"])


def test_event_moves_to_backoff_while_the_pod_backs_off(make_queue: MakeQueue, clock: FakeClock) -> None:
    queue = make_queue(make_profile(HINTS))
    queue.add(pod("p"))
    fail(queue, unschedulable=["NodeResourcesFit"])
    clock.advance(0.5)
    queue.node_added(make_node("n"))
    assert contents(queue) == empty(backoff=["p"])


@pytest.mark.parametrize(
    ("old_taints", "new_taints", "expected"),
    [
        pytest.param([taint("a")], [], empty(active=["p"]), id="taint-removed-queue"),
        pytest.param([taint("a")], [taint("b")], empty(unschedulable=["p"]), id="still-tainted-skip"),
    ],
)
def test_hint_decides(make_queue: MakeQueue, clock: FakeClock, old_taints: list[Any], new_taints: list[Any],
                      expected: dict[str, list[str]]) -> None:
    queue = rejected_pool(make_queue, clock, {"p": ["TaintToleration"]})
    queue.node_updated(make_node("n", taints=old_taints), make_node("n", taints=new_taints))
    assert contents(queue) == expected


def test_node_update_without_a_registered_change_moves_nothing(make_queue: MakeQueue, clock: FakeClock) -> None:
    queue = rejected_pool(make_queue, clock, {"p": ["TaintToleration"]})
    queue.node_updated(make_node("n", taints=[taint("a")]), make_node("n", taints=[taint("a")], labels={"x": "y"}))
    assert contents(queue) == empty(unschedulable=["p"])


def test_hint_that_raises_counts_as_queue(make_queue: MakeQueue, clock: FakeClock) -> None:
    queue = rejected_pool(make_queue, clock, {"p": ["Broken"]})
    queue.node_updated(make_node("n", taints=[taint("a")]), make_node("n", taints=[taint("b")]))
    assert contents(queue) == empty(active=["p"])


def test_pending_plugin_goes_straight_to_active(make_queue: MakeQueue, clock: FakeClock) -> None:
    queue = make_queue(make_profile(HINTS))
    queue.add(pod("pending"))
    queue.add(pod("rejected"))
    fail(queue, pending=["Coscheduling"], expect="pending")
    fail(queue, unschedulable=["Coscheduling"], expect="rejected")
    clock.advance(0.5)  # both still back off
    queue.move_all_to_active_or_backoff(ClusterEvent(EventResource.UNSCHEDULED_POD, ActionType.ADD))
    assert contents(queue) == empty(active=["pending"], backoff=["rejected"])


def test_pending_plugin_wins_over_unschedulable_plugin(make_queue: MakeQueue, clock: FakeClock) -> None:
    queue = make_queue(make_profile(HINTS))
    queue.add(pod("p"))
    queue.add(pod("q"))
    fail(queue, unschedulable=["NodeResourcesFit"], pending=["Coscheduling"], expect="p")
    fail(queue, unschedulable=["NodeResourcesFit"], pending=["Gang"], expect="q")
    queue.node_added(make_node("n"))  # both of q's plugins care; only p's unschedulable one does
    assert contents(queue) == empty(active=["q"], backoff=["p"])


@pytest.mark.parametrize("event", [UNSCHEDULABLE_TIMEOUT, FORCE_ACTIVATE], ids=str)
def test_wildcard_events_move_every_rejected_pod(make_queue: MakeQueue, clock: FakeClock,
                                                 event: ClusterEvent) -> None:
    queue = rejected_pool(make_queue, clock, {"a": ["VolumeBinding"], "b": ["NodeAffinity"]})
    queue.move_all_to_active_or_backoff(event)
    assert contents(queue) == empty(active=["a", "b"])


def test_wildcard_event_aimed_at_one_pod(make_queue: MakeQueue, clock: FakeClock) -> None:
    queue = rejected_pool(make_queue, clock, {"a": ["VolumeBinding"], "b": ["NodeAffinity"]})
    queue.move_all_to_active_or_backoff(FORCE_ACTIVATE, None, pod("b"))
    assert contents(queue) == empty(active=["b"], unschedulable=["a"])


def test_leftover_flush_after_five_minutes(make_queue: MakeQueue, clock: FakeClock) -> None:
    queue = make_queue(make_profile(HINTS))
    queue.add(pod("old"))
    fail(queue, unschedulable=["VolumeBinding"])
    clock.advance(100)
    queue.add(pod("young"))
    fail(queue, unschedulable=["VolumeBinding"])
    clock.advance(200)  # old has sat exactly 300 s
    queue.flush_unschedulable_leftover()
    assert contents(queue) == empty(unschedulable=["old", "young"])
    clock.advance(0.001)
    queue.flush_unschedulable_leftover()
    assert contents(queue) == empty(active=["old"], unschedulable=["young"])


def test_leftover_duration_is_configurable(make_queue: MakeQueue, clock: FakeClock) -> None:
    queue = make_queue(make_profile(HINTS), max_in_unschedulable=60.0)
    queue.add(pod("p"))
    fail(queue, unschedulable=["VolumeBinding"])
    clock.advance(61)
    queue.flush_unschedulable_leftover()
    assert contents(queue) == empty(active=["p"])


@pytest.mark.parametrize(
    ("old_requests", "new_requests", "expected"),
    [
        pytest.param({"cpu": "2"}, {"cpu": "1"}, empty(active=["p"]), id="scale-down-moves"),
        pytest.param({"cpu": "1"}, {"cpu": "2"}, empty(unschedulable=["p"]), id="scale-up-stays"),
    ],
)
def test_assigned_pod_updated(make_queue: MakeQueue, clock: FakeClock, old_requests: dict[str, str],
                              new_requests: dict[str, str], expected: dict[str, list[str]]) -> None:
    queue = rejected_pool(make_queue, clock, {"p": ["NodeResourcesFit"]})
    old = PodInfo(make_pod("bound", uid="b", node_name="n", requests=old_requests))
    new = PodInfo(make_pod("bound", uid="b", node_name="n", requests=new_requests))
    queue.assigned_pod_updated(old, new)
    assert contents(queue) == expected


def test_assigned_pod_label_update_reaches_affinity_not_fit(make_queue: MakeQueue, clock: FakeClock) -> None:
    queue = rejected_pool(make_queue, clock, {"fit": ["NodeResourcesFit"], "affinity": ["InterPodAffinity"]})
    old = PodInfo(make_pod("bound", uid="b", node_name="n", labels={"app": "a"}))
    new = PodInfo(make_pod("bound", uid="b", node_name="n", labels={"app": "b"}))
    queue.assigned_pod_updated(old, new)
    assert contents(queue) == empty(active=["affinity"], unschedulable=["fit"])


def test_assigned_pod_deleted(make_queue: MakeQueue, clock: FakeClock) -> None:
    queue = rejected_pool(make_queue, clock, {"fit": ["NodeResourcesFit"], "affinity": ["NodeAffinity"]})
    queue.assigned_pod_deleted(PodInfo(make_pod("bound", uid="b", node_name="n")))
    assert contents(queue) == empty(active=["fit"], unschedulable=["affinity"])


def test_assigned_pod_add_moves_no_pod_that_only_fit_rejected(make_queue: MakeQueue, clock: FakeClock) -> None:
    """Pods that fit nowhere (NodeResourcesFit registers no AssignedPodAdd) stay put on every
    binding, their hint never asked, while a Pod/Add rejector's pod moves."""
    asked: list[str] = []

    def fit_hint(pod_info: Any, old: Any, new: Any) -> QueueingHint:
        asked.append(pod_info.name)
        return QueueingHint.QUEUE

    hints = {**HINTS, "NodeResourcesFit": [ClusterEventWithHint(POD_DELETE_OR_SCALE_DOWN, fit_hint)]}
    queue = make_queue(make_profile(hints))
    for name in ["huge-1", "gang", "huge-2"]:
        queue.add(pod(name))
        clock.advance(1)
    fail(queue, unschedulable=["NodeResourcesFit"], expect="huge-1")
    fail(queue, unschedulable=["Coscheduling"], expect="gang")
    fail(queue, unschedulable=["NodeResourcesFit"], expect="huge-2")
    clock.advance(10)
    queue.assigned_pod_added(PodInfo(make_pod("bound", uid="b", node_name="n")))
    assert contents(queue) == empty(active=["gang"], unschedulable=["huge-1", "huge-2"])
    assert asked == []
    queue.assigned_pod_deleted(PodInfo(make_pod("bound", uid="b", node_name="n")))
    assert asked == ["huge-1", "huge-2"]
    assert contents(queue) == empty(active=["gang", "huge-1", "huge-2"])


def test_hints_are_asked_in_pool_order_across_rejector_sets(make_queue: MakeQueue, clock: FakeClock) -> None:
    """Pods with different rejectors are offered an event in the order they entered the pool."""
    asked: list[str] = []

    def record(pod_info: Any, old: Any, new: Any) -> QueueingHint:
        asked.append(pod_info.name)
        return QueueingHint.SKIP

    hints = {plugin: [ClusterEventWithHint(ClusterEvent(EventResource.NODE, ActionType.ADD), record)]
             for plugin in ["A", "B"]}
    queue = make_queue(make_profile(hints))
    rejections = {"first": ["A"], "second": ["B"], "third": ["A"], "fourth": ["A", "B"], "fifth": ["B"]}
    for name in rejections:
        queue.add(pod(name))
        clock.advance(1)
    for name, rejectors in rejections.items():
        fail(queue, unschedulable=rejectors, expect=name)
    queue.node_added(make_node("n"))
    assert asked == ["first", "second", "third", "fourth", "fourth", "fifth"]
    assert contents(queue) == empty(unschedulable=sorted(rejections))


def test_pod_whose_scheduler_name_changes_in_the_pool_follows_its_new_profile(
        make_queue: MakeQueue, clock: FakeClock) -> None:
    """Hints are per profile (upstream keys them by schedulerName): after the change, the
    pod answers to the new profile's registrations, not to its neighbours' old ones."""
    node_add = [ClusterEventWithHint(ClusterEvent(EventResource.NODE, ActionType.ADD))]
    queue = make_queue(profiles={"listens": make_profile({"Fit": node_add}), "deaf": make_profile({"Fit": []})})
    for name in ["stays", "moves"]:
        queue.add(pod(name, scheduler_name="deaf"))
        fail(queue, unschedulable=["Fit"], expect=name)
    clock.advance(10)
    queue.node_added(make_node("n1"))
    assert contents(queue) == empty(unschedulable=["moves", "stays"])
    queue.update(pod("moves", scheduler_name="deaf"), pod("moves", scheduler_name="listens"))
    assert contents(queue) == empty(unschedulable=["moves", "stays"])
    queue.node_added(make_node("n2"))
    assert contents(queue) == empty(active=["moves"], unschedulable=["stays"])


# --- gated pods ----------------------------------------------------------------------


def test_gated_pod_waits_until_its_gates_are_removed(make_queue: MakeQueue) -> None:
    queue = make_queue(make_profile(HINTS))
    gated = pod("g", scheduling_gates=["example.com/wait"])
    queue.add(gated)
    assert contents(queue) == empty(gated=["g"])
    assert queue.pending_counts() == {"active": 0, "backoff": 0, "unschedulable": 0, "gated": 1}
    qpi = queue.get("uid-g")
    assert qpi is not None and qpi.gated and qpi.gating_plugin == "SchedulingGates"

    queue.node_added(make_node("n"))  # not the gating plugin's event
    relabelled = pod("g", scheduling_gates=["example.com/wait"], labels={"x": "y"})
    queue.update(gated, relabelled)  # the gates are still there
    assert contents(queue) == empty(gated=["g"])

    released = pod("g", labels={"x": "y"})
    queue.update(relabelled, released)
    assert contents(queue) == empty(active=["g"])
    assert qpi.gated is False and qpi.gating_plugin == ""
    assert queue.pop() is qpi and qpi.pod_info is released


def test_removing_one_of_two_gates_keeps_the_pod_gated(make_queue: MakeQueue) -> None:
    queue = make_queue(make_profile(HINTS))
    old = pod("g", scheduling_gates=["a", "b"])
    queue.add(old)
    queue.update(old, pod("g", scheduling_gates=["b"]))
    assert contents(queue) == empty(gated=["g"])


def test_activate_reruns_pre_enqueue(make_queue: MakeQueue) -> None:
    queue = make_queue(make_profile(HINTS))
    queue.add(pod("g", scheduling_gates=["a"]))
    queue.activate([pod("g", scheduling_gates=["a"])])
    assert contents(queue) == empty(gated=["g"])


def test_pre_enqueue_gate_reported_without_plugin_name(make_queue: MakeQueue) -> None:
    queue = make_queue(QueueProfile(pre_enqueue=lambda p: Status.unresolvable("nope")))
    queue.add(pod("p"))
    assert contents(queue) == empty(gated=["p"])


# --- in-flight pods ------------------------------------------------------------------


def test_event_during_the_attempt_is_not_lost(make_queue: MakeQueue, clock: FakeClock) -> None:
    queue = make_queue(make_profile(HINTS))
    queue.add(pod("p"))
    qpi = queue.pop()
    assert qpi is not None and queue.where("uid-p") == "in-flight"
    queue.node_added(make_node("n"))  # arrives mid-cycle: nothing in the pool to move yet
    qpi.unschedulable_plugins = {"NodeResourcesFit"}
    queue.add_unschedulable_if_not_present(qpi)
    assert contents(queue) == empty(backoff=["p"])
    assert queue.in_flight_pods() == []


def test_event_during_the_attempt_that_rejectors_ignore(make_queue: MakeQueue) -> None:
    queue = make_queue(make_profile(HINTS))
    queue.add(pod("p"))
    qpi = queue.pop()
    assert qpi is not None
    queue.node_added(make_node("n"))
    qpi.unschedulable_plugins = {"NodeAffinity"}
    queue.add_unschedulable_if_not_present(qpi)
    assert contents(queue) == empty(unschedulable=["p"])


def test_event_before_the_pop_does_not_count(make_queue: MakeQueue) -> None:
    queue = make_queue(make_profile(HINTS))
    queue.add(pod("first"), timestamp=1.0)
    queue.add(pod("second"), timestamp=2.0)
    first = queue.pop()
    queue.node_added(make_node("n"))  # recorded: "first" is in flight
    second = queue.pop()
    assert first is not None and second is not None
    for qpi in (second, first):
        qpi.unschedulable_plugins = {"NodeResourcesFit"}
        queue.add_unschedulable_if_not_present(qpi)
    assert contents(queue) == empty(backoff=["first"], unschedulable=["second"])


def test_recorded_events_are_pruned_when_the_oldest_pod_is_done(make_queue: MakeQueue) -> None:
    queue = make_queue(make_profile(HINTS))
    queue.add(pod("a"), timestamp=1.0)
    queue.add(pod("b"), timestamp=2.0)
    a, b = queue.pop(), queue.pop()
    assert a is not None and b is not None
    queue.node_added(make_node("n1"))
    assert queue.in_flight_events == 1
    queue.done(b.uid)
    assert queue.in_flight_events == 1  # "a" started earlier and may still need it
    queue.done(a.uid)
    assert queue.in_flight_events == 0
    queue.node_added(make_node("n2"))  # nothing in flight: nothing to remember
    assert queue.in_flight_events == 0


def test_update_during_the_attempt_requeues_the_newest_version(make_queue: MakeQueue) -> None:
    queue = make_queue(make_profile(HINTS))
    old = pod("p")
    queue.add(old)
    qpi = queue.pop()
    assert qpi is not None
    new = pod("p", labels={"v": "2"})
    queue.update(old, new)
    assert contents(queue) == empty()
    qpi.unschedulable_plugins = {"InterPodAffinity"}  # registered Pod label updates
    queue.add_unschedulable_if_not_present(qpi)
    assert contents(queue) == empty(backoff=["p"])
    assert qpi.pod_info is new


def test_pod_deleted_during_the_attempt_is_not_requeued(make_queue: MakeQueue) -> None:
    queue = make_queue(make_profile(HINTS))
    queue.add(pod("p"))
    qpi = queue.pop()
    assert qpi is not None
    queue.delete(qpi.pod_info)
    qpi.unschedulable_plugins = {"NodeResourcesFit"}
    queue.add_unschedulable_if_not_present(qpi)
    assert contents(queue) == empty()
    assert queue.is_settled()


def test_activate_during_the_attempt(make_queue: MakeQueue, clock: FakeClock) -> None:
    queue = make_queue(make_profile(HINTS))
    queue.add(pod("p"))
    qpi = queue.pop()
    assert qpi is not None
    queue.activate([qpi.pod_info])
    clock.advance(1)
    qpi.unschedulable_plugins = {"VolumeBinding"}
    queue.add_unschedulable_if_not_present(qpi)
    assert contents(queue) == empty(backoff=["p"])


# --- activate, update, delete ----------------------------------------------------------


def test_activate_moves_named_pods_from_backoff_and_unschedulable(make_queue: MakeQueue) -> None:
    queue = make_queue(make_profile(HINTS))
    for name in ["backing-off", "unschedulable", "untouched"]:
        queue.add(pod(name))
    fail(queue, expect="backing-off")
    fail(queue, unschedulable=["VolumeBinding"], expect="unschedulable")
    fail(queue, unschedulable=["VolumeBinding"], expect="untouched")
    assert contents(queue) == empty(backoff=["backing-off"], unschedulable=["unschedulable", "untouched"])
    queue.activate([pod("backing-off"), pod("unschedulable"), pod("stranger")])
    assert contents(queue) == empty(active=["backing-off", "unschedulable"], unschedulable=["untouched"])


@pytest.mark.parametrize("where", ["active", "backoff", "unschedulable", "gated"])
def test_delete_from_each_queue(make_queue: MakeQueue, where: str) -> None:
    queue = make_queue(make_profile(HINTS))
    queue.add(pod("keep"), timestamp=0.0)
    target = pod("gone", scheduling_gates=["g"]) if where == "gated" else pod("gone")
    queue.add(target, timestamp=1.0 if where == "active" else -1.0)
    if where == "backoff":
        fail(queue, expect="gone")
    elif where == "unschedulable":
        fail(queue, unschedulable=["VolumeBinding"], expect="gone")
    assert queue.where("uid-gone") == where
    queue.delete(target)
    assert queue.where("uid-gone") is None
    assert contents(queue) == empty(active=["keep"])


def test_update_in_active_reorders(make_queue: MakeQueue) -> None:
    queue = make_queue()
    a, b = pod("a", priority=1), pod("b", priority=2)
    queue.add(a)
    queue.add(b)
    assert names(queue.active_pods()) == ["b", "a"]
    queue.update(a, pod("a", priority=3))  # priority is immutable in the API, but the heap must not care
    assert names(queue.active_pods()) == ["a", "b"]
    assert queue.active_pods()[0].pod_info.priority == 3


def test_update_in_backoff_stays_in_backoff(make_queue: MakeQueue) -> None:
    queue = make_queue(make_profile(HINTS))
    old = pod("p")
    queue.add(old)
    fail(queue)
    new = pod("p", labels={"v": "2"})
    queue.update(old, new)
    assert contents(queue) == empty(backoff=["p"])
    assert queue.backoff_pods()[0].pod_info is new


def test_update_in_pool_uses_the_pods_own_events(make_queue: MakeQueue, clock: FakeClock) -> None:
    queue = rejected_pool(make_queue, clock, {"affinity": ["InterPodAffinity"], "fit": ["NodeResourcesFit"]})
    for name in ["affinity", "fit"]:
        queue.update(pod(name), pod(name, labels={"v": "2"}))
    assert contents(queue) == empty(active=["affinity"], unschedulable=["fit"])


def test_update_with_two_changes_moves_the_pod_once(make_queue: MakeQueue, clock: FakeClock) -> None:
    """The label change moves the backing-off pod to backoffQ; the toleration change, which
    its rejector did not register, must not put it back in the unschedulable pool too."""
    queue = make_queue(make_profile(HINTS))
    queue.add(pod("p"))
    fail(queue, unschedulable=["InterPodAffinity"])
    clock.advance(0.5)
    queue.update(pod("p"), pod("p", labels={"v": "2"}, tolerations=[{"key": "k", "operator": "Exists"}]))
    assert contents(queue) == empty(backoff=["p"])
    assert queue.where("uid-p") == "backoff"


def test_update_of_unknown_pod_adds_it(make_queue: MakeQueue) -> None:
    queue = make_queue()
    queue.update(None, pod("p"))
    assert contents(queue) == empty(active=["p"])


def test_update_to_bound_removes_it(make_queue: MakeQueue) -> None:
    queue = make_queue()
    queue.add(pod("p"))
    queue.update(pod("p"), pod("p", node_name="n"))
    assert contents(queue) == empty()


def test_add_of_known_pod_is_an_update(make_queue: MakeQueue) -> None:
    queue = make_queue()
    queue.add(pod("p"))
    queue.add(pod("p", labels={"v": "2"}))
    assert contents(queue) == empty(active=["p"])
    assert queue.active_pods()[0].pod_info.labels == {"v": "2"}


# --- nominator -----------------------------------------------------------------------


def nominated(name: str, node: str, priority: int = 0) -> PodInfo:
    raw = make_pod(name, uid=f"uid-{name}", priority=priority)
    raw["status"]["nominatedNodeName"] = node
    return PodInfo(raw)


def test_nominator_follows_status_and_preemption(make_queue: MakeQueue) -> None:
    queue = make_queue()
    queue.add(nominated("from-status", "n1"))
    assert names(queue.nominator.nominated_pods_for_node("n1")) == ["from-status"]

    preemptor = pod("preemptor")
    queue.add(preemptor)
    queue.nominator.add_nominated_pod(preemptor, "n2")
    assert names(queue.nominator.nominated_pods_for_node("n2")) == ["preemptor"]

    # An update that raced the status write keeps the nomination, with the new pod version.
    relabelled = pod("preemptor", labels={"v": "2"})
    queue.update(preemptor, relabelled)
    assert queue.nominator.nominated_pods_for_node("n2") == [relabelled]

    queue.delete(relabelled)
    assert queue.nominator.nominated_pods_for_node("n2") == []
    queue.assigned_pod_added(PodInfo(make_pod("from-status", uid="uid-from-status", node_name="n1")))
    assert queue.nominator.nominated_pods_for_node("n1") == []
    assert len(queue.nominator) == 0


def test_nominator_moves_with_the_status(make_queue: MakeQueue) -> None:
    queue = make_queue()
    first = nominated("p", "n1")
    queue.add(first)
    queue.update(first, nominated("p", "n2"))
    assert queue.nominator.nominated_pods_for_node("n1") == []
    assert names(queue.nominator.nominated_pods_for_node("n2")) == ["p"]


def test_gated_pod_keeps_its_nomination(make_queue: MakeQueue) -> None:
    """v1.37's addPod records the nomination before PreEnqueue: a gated pod's room on its
    nominated node is kept from lower-priority pods (the differential tests found it)."""
    queue = make_queue()
    raw = nominated("g", "n1").pod
    raw["spec"]["schedulingGates"] = [{"name": "example.com/quota"}]
    queue.add(PodInfo(raw))
    assert contents(queue) == empty(gated=["g"])
    assert names(queue.nominator.nominated_pods_for_node("n1")) == ["g"]
    queue.delete(PodInfo(raw))
    assert len(queue.nominator) == 0


def test_dropped_nomination_wakes_lower_or_equal_priority_pods(make_queue: MakeQueue, clock: FakeClock) -> None:
    queue = make_queue(make_profile(HINTS))
    for name, priority in [("higher", 20), ("equal", 10), ("lower", 5)]:
        queue.add(pod(name, priority=priority))
    for name in ["higher", "equal", "lower"]:
        fail(queue, unschedulable=["NodeResourcesFit"], expect=name)
    clock.advance(10)
    old = nominated("preemptor", "n1", priority=10)
    queue.add(old)
    queue.update(old, pod("preemptor", priority=10))
    assert contents(queue) == empty(active=["equal", "preemptor", "lower"], unschedulable=["higher"])


# --- waiting, closing, the periodic flushes ----------------------------------------------


async def test_pop_wait_wakes_on_add_and_on_close(make_queue: MakeQueue) -> None:
    queue = make_queue()
    waiter = asyncio.ensure_future(queue.pop_wait())
    await asyncio.sleep(0)
    assert not waiter.done()
    queue.add(pod("p"))
    qpi = await waiter
    assert qpi is not None and qpi.pod_info.name == "p"

    waiter = asyncio.ensure_future(queue.pop_wait())
    await asyncio.sleep(0)
    queue.close()
    assert await waiter is None


async def test_run_flushes_on_the_injected_clock_and_stops(make_queue: MakeQueue, clock: FakeClock) -> None:
    sleeps: list[float] = []
    moved_at: dict[str, float] = {}

    async def fake_sleep(seconds: float) -> None:
        # Each sleep ends one flush round: note when each pod was first seen active.
        for name in ("backoff", "leftover"):
            if queue.where(f"uid-{name}") == "active":
                moved_at.setdefault(name, clock.now)
        sleeps.append(seconds)
        clock.advance(seconds)
        await asyncio.sleep(0)

    queue = make_queue(make_profile(HINTS), sleep=fake_sleep)
    queue.add(pod("backoff"))
    queue.add(pod("leftover"))
    fail(queue, expect="backoff")
    fail(queue, unschedulable=["VolumeBinding"], expect="leftover")
    start = clock.now
    stop = asyncio.Event()
    runner = asyncio.ensure_future(queue.run(stop))
    await until(lambda: queue.where("uid-leftover") == "active", what="the leftover pod flushed")
    stop.set()
    await asyncio.wait_for(runner, 1)
    assert contents(queue) == empty(active=["backoff", "leftover"])
    # Backoff is flushed every second; leftovers every 30 s, once they have sat > 300 s.
    assert {name: at - start for name, at in moved_at.items()} == {"backoff": 1.0, "leftover": 330.0}
    assert set(sleeps) == {1.0}


async def test_close_stops_run(make_queue: MakeQueue) -> None:
    never = asyncio.Event()

    async def slow_sleep(seconds: float) -> None:
        await never.wait()

    queue = make_queue(sleep=slow_sleep)
    runner = asyncio.ensure_future(queue.run())
    await asyncio.sleep(0)
    queue.close()
    await asyncio.wait_for(runner, 1)
    assert runner.done()


# --- counts and settling -------------------------------------------------------------------


def test_counts_and_settling(make_queue: MakeQueue, clock: FakeClock) -> None:
    queue = make_queue(make_profile(HINTS))
    assert queue.is_settled() and queue.next_backoff_expiry() is None
    depths = []
    queue.add(pod("a"))
    depths.append(queue.pending_counts())
    queue.add(pod("g", scheduling_gates=["x"]))
    depths.append(queue.pending_counts())
    assert not queue.is_settled()
    qpi = queue.pop()
    assert qpi is not None
    depths.append(queue.pending_counts())
    assert not queue.is_settled()  # in flight
    qpi.unschedulable_plugins = {"VolumeBinding"}
    queue.add_unschedulable_if_not_present(qpi)
    depths.append(queue.pending_counts())
    assert queue.is_settled()
    assert depths == [
        {"active": 1, "backoff": 0, "unschedulable": 0, "gated": 0},
        {"active": 1, "backoff": 0, "unschedulable": 0, "gated": 1},
        {"active": 0, "backoff": 0, "unschedulable": 0, "gated": 1},
        {"active": 0, "backoff": 0, "unschedulable": 1, "gated": 1},
    ]


def test_counts_by_a_key_split_the_queues_counts(make_queue: MakeQueue) -> None:
    queue = make_queue(make_profile(HINTS))
    for name in ("a1", "a2", "b1", "b2"):
        queue.add(pod(name))
    queue.add(pod("a3", scheduling_gates=["x"]))
    for _ in range(2):
        qpi = queue.pop()
        assert qpi is not None
        qpi.unschedulable_plugins = {"VolumeBinding"}
        queue.add_unschedulable_if_not_present(qpi)
    by_letter = queue.pending_counts_by(lambda pod_info: pod_info.name[0])
    assert by_letter["a"]["gated"] == 1 and by_letter["a"]["pending"] == 3 and by_letter["b"]["pending"] == 2
    for where, count in queue.pending_counts().items():
        assert sum(counts[where] for counts in by_letter.values()) == count
    assert queue.pending_counts()["unschedulable"] == 2


def test_pod_deleted_during_binding_is_not_requeued(make_queue: MakeQueue) -> None:
    queue = make_queue(make_profile(HINTS))
    queue.add(pod("p"))
    qpi = queue.pop()
    assert qpi is not None
    queue.done(qpi.uid)  # the binding cycle ends in-flight tracking before PreBind/Bind
    queue.delete(qpi.pod_info)
    queue.add_unschedulable_if_not_present(qpi)  # Bind failed
    assert contents(queue) == empty()


def test_the_queue_remembers_exactly_the_last_deleted_memory_deletions(
        make_queue: MakeQueue, monkeypatch: pytest.MonkeyPatch) -> None:
    """A binding cycle failing after its pod's deletion is dropped while the deletion is among
    the last _DELETED_MEMORY; the oldest is forgotten only when one more comes."""
    monkeypatch.setattr(scheduling_queue, "_DELETED_MEMORY", 2)
    queue = make_queue(make_profile(HINTS))
    attempts = {}
    for name in ("a", "b", "c"):
        queue.add(pod(name))
        qpi = queue.pop()
        assert qpi is not None
        queue.done(qpi.uid)
        attempts[name] = qpi
    queue.delete(attempts["a"].pod_info)
    queue.delete(attempts["b"].pod_info)
    queue.add_unschedulable_if_not_present(attempts["a"])  # two deletions: a is still remembered
    assert contents(queue) == empty()
    queue.delete(attempts["c"].pod_info)  # a third: a is forgotten
    queue.add_unschedulable_if_not_present(attempts["a"])
    assert contents(queue) == empty(backoff=["a"])


def test_pod_bound_elsewhere_during_the_attempt_is_not_requeued(make_queue: MakeQueue) -> None:
    queue = make_queue(make_profile(HINTS))
    queue.add(pod("p"))
    qpi = queue.pop()
    assert qpi is not None
    queue.update(pod("p"), pod("p", node_name="n"))
    fail_attempt = qpi
    fail_attempt.unschedulable_plugins = {"NodeResourcesFit"}
    queue.add_unschedulable_if_not_present(fail_attempt)
    assert contents(queue) == empty()
    assert queue.is_settled()


def test_binding_failure_goes_to_backoff(make_queue: MakeQueue) -> None:
    queue = make_queue(make_profile(HINTS))
    queue.add(pod("p"))
    qpi = queue.pop()
    assert qpi is not None
    queue.done(qpi.uid)
    queue.add_unschedulable_if_not_present(qpi)  # error: no rejector plugins
    assert contents(queue) == empty(backoff=["p"])


def test_queue_sort_rank_only_from_the_class_that_defines_less():
    from kopfsched.plugins.prioritysort import PrioritySort
    from kopfsched.scheduler.profile_set import _rank_of

    class Reversed(PrioritySort):
        def less(self, a, b):
            return super().less(b, a)

    plugin = PrioritySort()
    assert _rank_of(plugin) == plugin.rank
    assert _rank_of(Reversed()) is None


def test_ranked_active_queue_pops_as_less_does_and_set_rank_keeps_ties_in_order(make_queue, clock):
    from kopfsched.scheduler.profile_set import priority_then_timestamp_rank

    plain = make_queue()
    ranked = make_queue(rank=priority_then_timestamp_rank)
    for i, priority in enumerate([0, 5, 0, 5, 1, 0, 5]):
        for queue in (plain, ranked):
            queue.add(pod(f"p{i}", priority=priority), timestamp=float(i % 2))  # ties on both keys
    assert names(ranked.active_pods()) == names(plain.active_pods()) == ["p6", "p1", "p3", "p4", "p0", "p2", "p5"]
    assert ranked.pop().pod_info.name == plain.pop().pod_info.name == "p6"
    ranked.set_rank(None)  # to less alone: the pods keep their order
    assert [ranked.pop().pod_info.name for _ in range(6)] == ["p1", "p3", "p4", "p0", "p2", "p5"]



_POOL_EVENTS = [
    ClusterEvent(EventResource.NODE, ActionType.ADD),
    ClusterEvent(EventResource.NODE, ActionType.UPDATE_NODE_LABEL),
    ClusterEvent(EventResource.ASSIGNED_POD, ActionType.ADD),
    ClusterEvent(EventResource.ASSIGNED_POD, ActionType.DELETE),
    ClusterEvent(EventResource.UNSCHEDULED_POD, ActionType.UPDATE_POD_LABEL),
    ClusterEvent(EventResource.PERSISTENT_VOLUME, ActionType.UPDATE),
    FORCE_ACTIVATE,
]


@pytest.mark.parametrize("seed", range(20))
def test_pool_candidates_are_the_pods_with_a_rejector_registered_for_the_event(clock: FakeClock, seed: int) -> None:
    """_pool_candidates against the straightforward reading of every pool pod's rejectors and
    its profile's registrations, in pool order, over random pools, profiles and events."""
    import random
    rng = random.Random(seed)
    plugins = ["A", "B", "C", "D"]

    def random_profile() -> QueueProfile:
        return make_profile({plugin: [ClusterEventWithHint(event) for event in rng.sample(_POOL_EVENTS[:-1], 2)]
                             for plugin in rng.sample(plugins, 3)})
    profiles = {name: random_profile() for name in ("s1", "s2")}
    queue = SchedulingQueue(less=priority_less, clock=clock, profile_for=lambda p: profiles.get(p.scheduler_name))
    for i in range(30):
        queue.add(pod(f"p{i}", scheduler_name=rng.choice(list(profiles))))

    def fail_every_active() -> None:
        while queue.active_pods():
            fail(queue, unschedulable=rng.sample(plugins, rng.choice([0, 1, 1, 2])),
                 pending=rng.sample(plugins, rng.choice([0, 0, 1])))
    fail_every_active()
    for _ in range(20):
        clock.advance(100)
        event = rng.choice(_POOL_EVENTS)
        pool = list(queue._pool.values())
        expected = [q for q in pool if event is FORCE_ACTIVATE or not (q.unschedulable_plugins | q.pending_plugins)
                    or any(event.matches(reg.event) for plugin in q.unschedulable_plugins | q.pending_plugins
                           for reg in profiles[q.pod_info.scheduler_name].hints.get(plugin, ()))]
        assert queue._pool_candidates(event) == expected
        if rng.random() < 0.3:  # a profile changes: its pods answer to the new registrations
            profiles[rng.choice(list(profiles))] = random_profile()
        if rng.random() < 0.4:  # the candidates leave the pool and fail again, maybe otherwise
            queue.move_all_to_active_or_backoff(event)
            fail_every_active()
