"""A fault of our own code anywhere between assume and Bind goes through the failure path
(Unreserve, forget, requeue with backoff, PodScheduled condition, Event, metrics), and the
pod binds on the retry; a fault after Bind (reporting, PostBind) leaves the pod bound.

Faults are injected into the framework's runtime methods, where a plugin's own exception
would already be a status: these stand for bugs of ours."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any

import pytest

from kopfsched.framework.registry import PluginFactory, Registry
from kopfsched.framework.runtime import Framework
from kopfsched.plugins.registry import in_tree_registry
from kopfsched.simulate.client import InMemoryClusterClient
from tests.builders import make_node, make_pod
from tests.harness import Harness, profile_from_spec
from tests.waiting import drain


class RecordingReserve:
    name = "RecordingReserve"

    def __init__(self, args: Any, handle: Any) -> None:
        self.calls: list[str] = []

    def reserve(self, state: Any, pod: Any, node_name: str) -> None:
        self.calls.append(f"reserve {node_name}")

    def unreserve(self, state: Any, pod: Any, node_name: str) -> None:
        self.calls.append(f"unreserve {node_name}")


def harness(client: InMemoryClusterClient | None = None) -> tuple[Harness, Framework, RecordingReserve]:
    custom = Registry()
    custom.register(PluginFactory(name="RecordingReserve", factory=RecordingReserve))
    registry = in_tree_registry().merged(custom)
    profile = profile_from_spec({"schedulerName": "default-scheduler",
                                 "plugins": {"reserve": {"enabled": [{"name": "RecordingReserve"}]}}}, registry)
    h = Harness([make_node("n1", cpu="2")], profiles=[profile], registry=registry, client=client)
    fwk = h.scheduler.profiles["default-scheduler"].framework
    return h, fwk, fwk.plugins_by_name["RecordingReserve"]


def fail_once(target: Any, method: str) -> None:
    """Make `target.method` raise on its first call, then behave."""
    original: Callable[..., Any] = getattr(target, method)
    calls = {"n": 0}
    fault = RuntimeError(f"injected at {method}")

    if inspect.iscoroutinefunction(original):
        async def faulty_async(*args: Any, **kwargs: Any) -> Any:
            calls["n"] += 1
            if calls["n"] == 1:
                raise fault
            return await original(*args, **kwargs)
        setattr(target, method, faulty_async)
    else:
        def faulty(*args: Any, **kwargs: Any) -> Any:
            calls["n"] += 1
            if calls["n"] == 1:
                raise fault
            return original(*args, **kwargs)
        setattr(target, method, faulty)


@pytest.mark.parametrize(("step", "reserve_calls"), [
    pytest.param("run_reserve_plugins_reserve", ["unreserve n1", "reserve n1"], id="reserve"),
    pytest.param("run_permit_plugins", ["reserve n1", "unreserve n1", "reserve n1"], id="permit"),
    pytest.param("wait_on_permit", ["reserve n1", "unreserve n1", "reserve n1"], id="wait-on-permit"),
    pytest.param("run_pre_bind_plugins", ["reserve n1", "unreserve n1", "reserve n1"], id="pre-bind"),
    pytest.param("run_bind_plugins", ["reserve n1", "unreserve n1", "reserve n1"], id="bind"),
])
async def test_a_fault_before_the_pod_is_bound_goes_through_the_failure_path(
        step: str, reserve_calls: list[str]) -> None:
    h, fwk, reserve = harness()
    fail_once(fwk, step)
    h.add_pods(make_pod("p", requests={"cpu": "1500m"}))
    started = h.clock.now
    await h.settle()

    message = f"RuntimeError('injected at {step}')"
    first, second = [(a.result, a.reason, a.message) for a in h.recorder.attempts]
    assert first[:2] == ("error", "SchedulerError") and first[2].endswith(message)
    assert second[0] == "scheduled"
    assert reserve.calls == reserve_calls
    failed = [e.message for e in h.client.events if e.reason == "FailedScheduling"]
    assert len(failed) == 1 and failed[0].endswith(message)
    assert h.clock.now >= started + 1  # retried after the initial backoff, not at once
    assert h.node_of("p") == "n1"
    uid = h.client.pods["default/p"]["metadata"]["uid"]
    assert not h.scheduler.cache.is_assumed(uid)
    assert h.scheduler.cache.get_node("n1").requested.milli_cpu == 1500  # counted once


async def test_a_fault_in_the_scheduling_algorithm_fails_the_attempt_not_the_loop() -> None:
    h, _, reserve = harness()
    fail_once(h.scheduler.algorithm, "schedule_pod")
    h.add_pods(make_pod("p", requests={"cpu": "1"}))
    await h.settle()
    assert [(a.result, a.reason) for a in h.recorder.attempts] == [("error", "SchedulerError"), ("scheduled", "")]
    assert reserve.calls == ["reserve n1"]
    assert h.node_of("p") == "n1"


class FailingEvents(InMemoryClusterClient):
    async def record_event(self, **kwargs: Any) -> None:
        raise RuntimeError("injected at record_event")


@pytest.mark.parametrize("step", ["run_post_bind_plugins", "record_event", "observer"])
async def test_a_fault_after_the_pod_is_bound_leaves_it_bound_and_counted_once(step: str) -> None:
    h, fwk, reserve = harness(client=FailingEvents() if step == "record_event" else None)
    if step == "run_post_bind_plugins":
        fail_once(fwk, step)
    elif step == "observer":
        fail_once(h.recorder, "attempted")
    h.add_pods(make_pod("p", requests={"cpu": "1500m"}))
    await h.settle()
    assert h.node_of("p") == "n1"
    assert reserve.calls == ["reserve n1"]
    assert not [a for a in h.recorder.attempts if a.result != "scheduled"]
    uid = h.client.pods["default/p"]["metadata"]["uid"]
    assert h.scheduler.cache.get_pod(uid) is not None and not h.scheduler.cache.is_assumed(uid)
    assert h.scheduler.cache.get_node("n1").requested.milli_cpu == 1500
    assert h.scheduler.queue.pending_counts() == {"active": 0, "backoff": 0, "unschedulable": 0, "gated": 0}


class HeldBind(InMemoryClusterClient):
    """Binds only once `release` is set: a bind call whose outcome is late."""

    def __init__(self) -> None:
        super().__init__()
        self.release = asyncio.Event()
        self.started = asyncio.Event()

    async def bind(self, *, pod: Any, node_name: str) -> None:
        self.started.set()
        await self.release.wait()
        await super().bind(pod=pod, node_name=node_name)


async def assumed_with_a_held_bind() -> tuple[Harness, HeldBind, str]:
    client = HeldBind()
    h = Harness([make_node("n1", cpu="2")], client=client)
    h.add_pods(make_pod("p", requests={"cpu": "1500m"}))
    await h.scheduler.schedule_one(h.scheduler.queue.pop())
    await client.started.wait()
    uid = h.client.pods["default/p"]["metadata"]["uid"]
    h.clock.now += 3600  # an hour on the scheduler's clock: nothing expires (upstream's TTL is 0)
    assert h.scheduler.cache.is_assumed(uid)
    assert h.scheduler.cache.get_node("n1").requested.milli_cpu == 1500
    return h, client, uid


async def test_an_assumed_pod_never_expires_and_the_watch_confirms_it_once() -> None:
    h, client, uid = await assumed_with_a_held_bind()
    # The bind went through at the API server; the watch shows it before the call returns.
    bound = {**h.client.pods["default/p"], "spec": {**h.client.pods["default/p"]["spec"], "nodeName": "n1"}}
    h.handlers.on_pod_upsert(bound, h.client.pods["default/p"])
    assert not h.scheduler.cache.is_assumed(uid)
    assert h.scheduler.cache.get_node("n1").requested.milli_cpu == 1500
    client.release.set()
    await h.scheduler.wait_for_tasks()
    assert h.scheduler.cache.get_node("n1").requested.milli_cpu == 1500


async def test_an_assumed_pod_deleted_meanwhile_frees_its_node_and_is_not_requeued() -> None:
    h, client, uid = await assumed_with_a_held_bind()
    deleted = h.client.pods.pop("default/p")
    h.handlers.on_pod_delete(deleted)
    assert h.scheduler.cache.get_pod(uid) is None
    assert h.scheduler.cache.get_node("n1").requested.milli_cpu == 0
    client.release.set()  # the bind now fails: the pod is gone
    await h.scheduler.wait_for_tasks()
    assert h.scheduler.cache.get_node("n1").requested.milli_cpu == 0
    assert h.scheduler.queue.pending_counts() == {"active": 0, "backoff": 0, "unschedulable": 0, "gated": 0}


async def let_tasks_run(rounds: int = 50) -> None:
    """Give the binding and Event tasks `rounds` turns of the loop."""
    for _ in range(rounds):
        await asyncio.sleep(0)


async def schedule_queued(h: Harness) -> None:
    """One cycle per pod in activeQ, without waiting for their binds or Events."""
    for qpi in drain(h.scheduler.queue.pop):
        await h.scheduler.schedule_one(qpi)


class HeldEvents(InMemoryClusterClient):
    """Posts Events only once `release` is set, counting how many wait at once."""

    def __init__(self) -> None:
        super().__init__()
        self.release = asyncio.Event()
        self.waiting = 0
        self.most_waiting = 0

    async def record_event(self, **kwargs: Any) -> None:
        self.waiting += 1
        self.most_waiting = max(self.most_waiting, self.waiting)
        await self.release.wait()
        self.waiting -= 1
        await super().record_event(**kwargs)


async def test_scheduled_events_never_hold_binding_cycles_and_past_the_queue_size_are_dropped(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from kopfsched.scheduler import broadcaster
    monkeypatch.setattr(broadcaster, "EVENT_QUEUE_SIZE", 3)
    client = HeldEvents()
    h, fwk, _ = harness(client=client)
    post_bound: list[str] = []
    monkeypatch.setattr(fwk, "run_post_bind_plugins", lambda state, pod, host: post_bound.append(pod.name))
    h.add_pods(*(make_pod(f"p{i}", requests={"cpu": "100m"}) for i in range(8)))
    await schedule_queued(h)
    for _ in range(200):
        await asyncio.sleep(0)
        if len(post_bound) == 8:
            break
    # Every pod bound and through PostBind while no Event could be posted yet.
    assert sorted(post_bound) == [f"p{i}" for i in range(8)]
    assert all(h.node_of(f"p{i}") == "n1" for i in range(8))
    await let_tasks_run(20)
    # The first EVENT_QUEUE_SIZE Events are being posted at once, the other five dropped.
    assert (client.waiting, h.scheduler.events.dropped, len(h.scheduler.events)) == (3, 5, 3)
    client.release.set()
    await h.settle()
    assert sorted(e.regarding for e in client.events) == sorted(f"default/{name}" for name in post_bound[:3])
    assert {e.reason for e in client.events} == {"Scheduled"}
    assert len(h.scheduler.events) == 0


class HeldSlowBindsAndEvents(HeldEvents):
    """Holds the Events (see HeldEvents) and the binds of pods named slow-*."""

    def __init__(self) -> None:
        super().__init__()
        self.binds_released = asyncio.Event()

    async def bind(self, *, pod: Any, node_name: str) -> None:
        if pod["metadata"]["name"].startswith("slow"):
            await self.binds_released.wait()
        await super().bind(pod=pod, node_name=node_name)


async def test_each_event_is_posted_as_its_bind_succeeds_while_another_bind_is_in_flight() -> None:
    client = HeldSlowBindsAndEvents()
    h, _, _ = harness(client=client)
    h.add_pods(make_pod("slow", requests={"cpu": "100m"}), *(make_pod(f"p{i}", requests={"cpu": "100m"})
                                                              for i in range(6)))
    await schedule_queued(h)
    await let_tasks_run()
    # Six pods bound while the slow pod's bind is in flight: their six Events are being
    # posted already, as kube-scheduler posts each at once.
    assert sorted(p for p in client.pods if h.node_of(p.split("/")[1])) == [f"default/p{i}" for i in range(6)]
    assert client.waiting == 6
    client.binds_released.set()
    client.release.set()
    await h.settle()
    assert h.node_of("slow") == "n1"
    assert sorted(e.regarding for e in client.events) == sorted(
        ["default/slow", *(f"default/p{i}" for i in range(6))])
    assert h.scheduler.events.dropped == 0


async def first_of_three_bound() -> tuple[Harness, HeldEvents]:
    """Three pods queued and the first one scheduled and bound; Events post as soon as asked."""
    client = HeldEvents()
    client.release.set()
    h, _, _ = harness(client=client)
    h.add_pods(*(make_pod(f"p{i}", requests={"cpu": "100m"}) for i in range(3)))
    await h.scheduler.schedule_one(h.scheduler.queue.pop())
    await let_tasks_run()
    return h, client


async def test_an_event_is_posted_while_pods_still_wait_in_active_q() -> None:
    h, client = await first_of_three_bound()
    # p0 is bound and two pods still wait for their cycle: its Event is posted all the same.
    assert h.node_of("p0") == "n1" and [e.regarding for e in client.events] == ["default/p0"]
    assert h.node_of("p1") is None and h.node_of("p2") is None
    await schedule_queued(h)
    await h.settle()
    assert sorted(e.regarding for e in client.events) == ["default/p0", "default/p1", "default/p2"]


async def test_events_in_flight_are_posted_when_the_scheduler_shuts_down_with_pods_still_queued() -> None:
    h, client = await first_of_three_bound()
    assert h.node_of("p0") == "n1"  # p1 and p2 still wait in activeQ
    await h.scheduler.shutdown()
    assert [e.regarding for e in client.events] == ["default/p0"]
    assert h.node_of("p1") is None



async def test_shutdown_cancels_bindings_still_running_after_the_grace(caplog: pytest.LogCaptureFixture) -> None:
    """A binding that hangs (an API server that never answers) does not hold the stop: after
    the grace it is cancelled and its pod is left unbound, as a cancelled context leaves it."""
    h = Harness([make_node("n1")])
    never = asyncio.Event()

    async def hanging_bind(*_: object, **__: object) -> None:
        await never.wait()

    h.client.bind = hanging_bind  # type: ignore[method-assign]
    h.add_pods(make_pod("p", requests={"cpu": "1"}))
    await h.scheduler.schedule_one(h.scheduler.queue.pop())
    await let_tasks_run()
    assert h.scheduler.in_flight_tasks == 1
    await asyncio.wait_for(h.scheduler.shutdown(grace=0.2), 5)
    assert h.scheduler.in_flight_tasks == 0
    assert h.node_of("p") is None
    assert "stopping: 1 binding and reporting tasks still running after 0 s, cancelled" in caplog.text
    assert h.scheduler.cache.get_node("n1").requested.milli_cpu == 0  # the assumed pod forgotten
