"""Fixtures of the queue tests: a fake clock and a queue factory on it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from kopfsched.queue import QueueProfile, SchedulingQueue
from tests.fakes import FakeClock
from tests.queue.queues import make_profile, priority_less


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
