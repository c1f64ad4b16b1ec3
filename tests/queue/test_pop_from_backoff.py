"""SchedulerPopFromBackoffQ (upstream's KEP-5142, on by default) on a fake clock: an empty activeQ
pops backoffQ's head, backoff expiries are cut to one-second ordering windows ordered by QueueSort,
the flush runs at window boundaries; pods that failed with an error are never popped early."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from kopfsched import features
from kopfsched.cache.cache import Cache
from kopfsched.framework.status import Status
from kopfsched.framework.types import PodInfo
from kopfsched.plugins.registry import full_registry
from kopfsched.queue import QueueProfile, SchedulingQueue
from kopfsched.scheduler.scheduler import Scheduler
from kopfsched.simulate.client import InMemoryClusterClient
from tests.builders import make_node
from tests.fakes import FakeClock
from tests.queue.queues import HINTS, contents, empty, fail, make_profile, pod
from tests.waiting import drain, until

MakeQueue = Callable[..., SchedulingQueue]
SWITCH = ("DRADeviceTaintRules, DRADeviceTaints, NominatedNodeNameForExpectation, OpportunisticBatching, "
          "SchedulerPopFromBackoffQ, StorageCapacityScoring, VolumeLimitScaling")


@pytest.fixture
def gated_queue(make_queue: MakeQueue) -> SchedulingQueue:
    return make_queue(make_profile(HINTS), pop_from_backoff=True)


def rejected_at(queue: SchedulingQueue, clock: FakeClock, name: str, at: float, *, priority: int = 0,
                plugins: tuple[str, ...] = ("NodeResourcesFit",)) -> None:
    """`name` is added, fails at `at` (rejected by `plugins`, or an error without them) and, when
    rejected, a node add moves it from the pool to backoffQ at once."""
    clock.now = at
    queue.add(pod(name, priority=priority))
    fail(queue, unschedulable=plugins, expect=name)
    if plugins:
        queue.node_added(make_node(f"node-for-{name}"))


def popped(queue: SchedulingQueue) -> list[str]:
    """Pop until nothing comes; the pods' names in pop order (each left in flight)."""
    return [qpi.pod_info.name for qpi in drain(queue.pop)]


def test_empty_activeq_pops_backoffq_by_window_then_queuesort(gated_queue: SchedulingQueue,
                                                               clock: FakeClock) -> None:
    queue = gated_queue
    rejected_at(queue, clock, "early-low", 1000.2, priority=1)     # expires 1001.2: window 1001
    rejected_at(queue, clock, "late-high", 1000.7, priority=5)     # 1001.7: window 1001
    rejected_at(queue, clock, "next-window", 1001.1, priority=10)  # 1002.1: window 1002
    rejected_at(queue, clock, "same-low", 1000.9, priority=1)      # 1001.9: window 1001, after early-low
    rejected_at(queue, clock, "error", 1000.0, plugins=())         # an error: its own backoffQ
    clock.now = 1001.5  # everything still backing off
    assert contents(queue) == empty(backoff=["late-high", "early-low", "same-low", "error", "next-window"])
    queue.add(pod("new", priority=0))
    # activeQ first, then backoffQ's windows in QueueSort order; never the pod that failed with an error.
    assert popped(queue) == ["new", "late-high", "early-low", "same-low", "next-window"]
    assert contents(queue) == empty(backoff=["error"])
    assert queue.pop() is None


def test_without_the_gate_an_empty_activeq_pops_nothing(make_queue: MakeQueue, clock: FakeClock) -> None:
    queue = make_queue(make_profile(HINTS))
    rejected_at(queue, clock, "p", 1000.2)
    assert contents(queue) == empty(backoff=["p"])
    assert queue.pop() is None
    assert queue.next_backoff_expiry() == pytest.approx(1001.2)


@pytest.mark.parametrize(("failed_at", "ends"), [(1000.0, 1002.0), (1000.3, 1002.0), (1000.99, 1002.0),
                                                 (1001.0, 1003.0)])
def test_backoff_ends_with_the_window_of_its_expiry(gated_queue: SchedulingQueue, clock: FakeClock,
                                                   failed_at: float, ends: float) -> None:
    queue = gated_queue
    rejected_at(queue, clock, "p", failed_at)
    assert queue.next_backoff_expiry() == ends
    clock.now = ends - 0.001
    queue.flush_backoff_completed()
    assert contents(queue) == empty(backoff=["p"])
    clock.now = ends
    queue.flush_backoff_completed()
    assert contents(queue) == empty(active=["p"])


def test_an_event_after_the_window_sends_the_pod_to_activeq(gated_queue: SchedulingQueue, clock: FakeClock) -> None:
    queue = gated_queue
    clock.now = 1000.4
    queue.add(pod("p"))
    fail(queue, unschedulable=["NodeResourcesFit"], expect="p")
    clock.now = 1001.9  # expiry 1001.4 is in window 1001, not over yet
    queue.node_added(make_node("a"))
    assert contents(queue) == empty(backoff=["p"])
    fail(queue, unschedulable=["NodeResourcesFit"], expect="p")  # attempt 2 at 1001.9: 2 s, window 1003
    clock.now = 1003.99
    queue.node_added(make_node("b"))
    assert contents(queue) == empty(backoff=["p"])
    fail(queue, unschedulable=["NodeResourcesFit"], expect="p")  # attempt 3 at 1003.99: 4 s, window 1007
    clock.now = 1008.0
    queue.node_added(make_node("c"))
    assert contents(queue) == empty(active=["p"])


def test_flush_moves_a_whole_window_in_queuesort_order(gated_queue: SchedulingQueue, clock: FakeClock) -> None:
    queue = gated_queue
    rejected_at(queue, clock, "a", 1000.1, priority=1)
    rejected_at(queue, clock, "b", 1000.5, priority=3)
    rejected_at(queue, clock, "c", 1000.8, priority=2)
    rejected_at(queue, clock, "later", 1001.2, priority=9)
    clock.now = 1002.0
    queue.flush_backoff_completed()
    assert contents(queue) == empty(active=["b", "c", "a"], backoff=["later"])


def test_error_pods_back_off_in_full(gated_queue: SchedulingQueue, clock: FakeClock) -> None:
    queue = gated_queue
    rejected_at(queue, clock, "error", 1000.5, plugins=())
    assert queue.pop() is None
    assert queue.next_backoff_expiry() == 1002.0
    clock.now = 1002.0
    queue.flush_backoff_completed()
    assert popped(queue) == ["error"]


async def test_pop_wait_wakes_when_a_pod_enters_backoffq(gated_queue: SchedulingQueue, clock: FakeClock) -> None:
    queue = gated_queue
    queue.add(pod("p"))
    fail(queue, unschedulable=["NodeResourcesFit"], expect="p")
    waiter = asyncio.ensure_future(queue.pop_wait())
    await asyncio.sleep(0)
    assert not waiter.done()  # in the unschedulable pool
    queue.node_added(make_node("n"))  # to backoffQ: 1 s of backoff left
    qpi = await asyncio.wait_for(waiter, 1)
    assert qpi is not None and qpi.pod_info.name == "p" and qpi.attempts == 2


def test_pre_enqueue_runs_when_entering_backoffq_not_when_leaving(make_queue: MakeQueue, clock: FakeClock) -> None:
    calls: list[str] = []

    def counting(pod_info: PodInfo) -> Status | None:
        calls.append(pod_info.name)
        return None

    queue = make_queue(QueueProfile(pre_enqueue=counting, hints=HINTS), pop_from_backoff=True)
    queue.add(pod("p"))
    assert calls == ["p"]
    fail(queue, unschedulable=["NodeResourcesFit"], expect="p")
    queue.node_added(make_node("n"))
    assert calls == ["p", "p"] and contents(queue) == empty(backoff=["p"])
    clock.advance(10)
    queue.flush_backoff_completed()
    assert calls == ["p", "p"] and contents(queue) == empty(active=["p"])


async def test_run_flushes_at_window_boundaries(make_queue: MakeQueue, clock: FakeClock) -> None:
    sleeps: list[float] = []
    moved_at: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        if queue.where("uid-p") == "active" and not moved_at:
            moved_at.append(clock.now)
        sleeps.append(round(seconds, 6))
        clock.advance(seconds)
        await asyncio.sleep(0)

    queue = make_queue(make_profile(HINTS), sleep=fake_sleep, pop_from_backoff=True)
    clock.now = 1000.25
    queue.add(pod("p"))
    fail(queue, unschedulable=["NodeResourcesFit"], expect="p")
    queue.node_added(make_node("n"))  # expiry 1001.25: window 1001, over at 1002
    stop = asyncio.Event()
    runner = asyncio.ensure_future(queue.run(stop))
    await until(lambda: queue.where("uid-p") == "active", what="p moved to activeQ")
    stop.set()
    await asyncio.wait_for(runner, 1)
    assert sleeps[:3] == [0.75, 1.0, 1.0]  # to the next boundary, then a window at a time
    assert moved_at == [pytest.approx(1002.0)]


@pytest.mark.parametrize(("gates", "expected"), [("", True), ("SchedulerPopFromBackoffQ=false", False),
                                                 ("SchedulerPopFromBackoffQ=true", True)])
def test_the_scheduler_follows_the_feature_gate(gates: str, expected: bool) -> None:
    saved = features.GATES
    try:
        features.set_gates(features.parse(gates))
        scheduler = Scheduler(cache=Cache(), client=InMemoryClusterClient(), registry=full_registry())
    finally:
        features.set_gates(saved)
    assert scheduler.queue.pop_from_backoff is expected


@pytest.mark.parametrize(("text", "message"), [
    ("Nope=true", "unrecognized feature gate 'Nope' (kube-scheduler v1.37.2 has no such gate; kopfsched can "
                  f"switch: {SWITCH})"),
    ("SchedulerPopFromBackoffQ", "invalid feature gate 'SchedulerPopFromBackoffQ': expected Name=true or Name=false"),
    ("SchedulerPopFromBackoffQ=maybe",
     "invalid feature gate 'SchedulerPopFromBackoffQ=maybe': expected Name=true or Name=false"),
])
def test_bad_feature_gates_are_one_line_errors(text: str, message: str) -> None:
    with pytest.raises(ValueError) as raised:
        features.parse(text)
    assert str(raised.value) == message
