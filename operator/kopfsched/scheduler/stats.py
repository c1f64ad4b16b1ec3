"""Per-profile scheduling statistics for the SchedulerProfile status: counters, the last
schedule time and attempt latency percentiles over a recent window."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from kopfsched.scheduler.observer import Attempt

LATENCY_WINDOW = 1000
"""Attempts kept per profile for the latency percentiles."""


@dataclass(slots=True)
class ProfileStats:
    scheduled: int = 0
    unschedulable: int = 0
    preemptions: int = 0
    errors: int = 0
    last_schedule_time: float | None = None
    """Wall-clock seconds of the last successful binding."""
    latencies: deque[float] = field(default_factory=lambda: deque(maxlen=LATENCY_WINDOW))

    def percentile_ms(self, q: float) -> float | None:
        """Nearest-rank percentile (0 < q <= 1) of the recent attempts, in milliseconds."""
        if not self.latencies:
            return None
        ordered = sorted(self.latencies)
        rank = max(1, -(-int(q * 1000) * len(ordered) // 1000))  # ceil(q * n) without float drift
        return round(ordered[min(rank, len(ordered)) - 1] * 1000.0, 3)


class SchedulingStats:
    """A SchedulingObserver that keeps ProfileStats per profile name."""

    def __init__(self, *, wall_clock: Callable[[], float] = time.time) -> None:
        self.wall_clock = wall_clock
        self.profiles: dict[str, ProfileStats] = {}

    def of(self, profile: str) -> ProfileStats:
        stats = self.profiles.get(profile)
        if stats is None:
            stats = self.profiles[profile] = ProfileStats()
        return stats

    def attempted(self, attempt: Attempt) -> None:
        stats = self.of(attempt.profile)
        stats.latencies.append(attempt.seconds)
        if attempt.result == "scheduled":
            stats.scheduled += 1
            stats.last_schedule_time = self.wall_clock()
        elif attempt.result == "unschedulable":
            stats.unschedulable += 1
        else:
            stats.errors += 1
        if attempt.victims or attempt.nominated_node:
            stats.preemptions += 1

    observes_extension_points = False  # see NullObserver

    def extension_point(self, profile: str, point: str, code: str, seconds: float) -> None:
        pass
