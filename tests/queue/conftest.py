"""Fakes for queue tests: a mutable clock, a PrioritySort-like less, profiles with hints."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from kopfsched.framework.events import ClusterEventWithHint
from kopfsched.framework.queued import QueuedPodInfo
from kopfsched.framework.status import Status
from kopfsched.framework.types import PodInfo
from kopfsched.queue import QueueProfile, SchedulingQueue
from tests.builders import make_pod


class FakeClock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def priority_less(a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
    """PrioritySort: higher priority first, then the earlier queue timestamp."""
    if a.priority != b.priority:
        return a.priority > b.priority
    return a.timestamp < b.timestamp


def scheduling_gates(pod: PodInfo) -> Status | None:
    """What the runtime's PreEnqueue would return with the SchedulingGates plugin enabled."""
    gates = pod.spec.get("schedulingGates")
    if not gates:
        return None
    names = " ".join(g["name"] for g in gates)
    return Status.unresolvable(f"waiting for scheduling gates: [{names}]").with_plugin("SchedulingGates")


def make_profile(hints: dict[str, list[ClusterEventWithHint]] | None = None, **kwargs: Any) -> QueueProfile:
    return QueueProfile(pre_enqueue=scheduling_gates, hints=dict(hints or {}), **kwargs)


def pod(name: str, *, priority: int | None = None, scheduler_name: str | None = None, **kwargs: Any) -> PodInfo:
    return PodInfo(make_pod(name, priority=priority, scheduler_name=scheduler_name, uid=f"uid-{name}", **kwargs))


def names(pods: list[Any]) -> list[str]:
    return [p.pod_info.name if isinstance(p, QueuedPodInfo) else p.name for p in pods]


def contents(queue: SchedulingQueue) -> dict[str, list[str]]:
    """Every queue's pods by name: activeQ in pop order, backoffQ by expiry, pools by name."""
    return {
        "active": names(queue.active_pods()),
        "backoff": names(queue.backoff_pods()),
        "unschedulable": sorted(names(queue.unschedulable_pods())),
        "gated": sorted(names(queue.gated_pods())),
    }


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def make_queue(clock: FakeClock) -> Callable[..., SchedulingQueue]:
    def build(profile: QueueProfile | None = None, *, profiles: dict[str, QueueProfile] | None = None,
              **kwargs: Any) -> SchedulingQueue:
        table = dict(profiles or {})
        if not profiles:
            table["default-scheduler"] = profile or make_profile()
        return SchedulingQueue(less=priority_less, clock=clock,
                               profile_for=lambda p: table.get(p.scheduler_name), **kwargs)
    return build
