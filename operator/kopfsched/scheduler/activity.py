"""Recent scheduling activity for the dashboard: throughput and attempt latency over the
last minutes, and the latest bindings.

A `SchedulingObserver`. Time is cut into fixed buckets (10 s, the last 15 minutes); each
bucket counts attempts by result and sorts their latencies into upstream's attempt
duration buckets (1 ms doubling to ~16 s), from which p50/p99 are read as the bucket's
upper bound — as Prometheus' histogram_quantile would, without keeping samples. Memory is
fixed: 90 buckets of a few dozen ints, and the last `RECENT_BINDINGS` bindings.
"""

from __future__ import annotations

import bisect
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kopfsched.scheduler.observer import Attempt

BUCKET_SECONDS = 10
WINDOW_BUCKETS = 90
"""15 minutes of 10-second buckets."""
RECENT_BINDINGS = 30
LATENCY_BOUNDS = tuple(0.001 * 2**i for i in range(15))
"""Upper bounds (seconds) of upstream's scheduler_scheduling_attempt_duration_seconds buckets."""


@dataclass(slots=True)
class _Bucket:
    start: int
    scheduled: int = 0
    unschedulable: int = 0
    error: int = 0
    latency: list[int] = field(default_factory=lambda: [0] * (len(LATENCY_BOUNDS) + 1))

    def quantile_ms(self, q: float) -> float | None:
        total = sum(self.latency)
        if not total:
            return None
        rank = q * total
        seen = 0
        for i, count in enumerate(self.latency):
            seen += count
            if seen >= rank:
                bound = LATENCY_BOUNDS[i] if i < len(LATENCY_BOUNDS) else LATENCY_BOUNDS[-1] * 2
                return round(bound * 1000, 3)
        return None


@dataclass(frozen=True, slots=True)
class Binding:
    time: float
    pod: str
    node: str
    profile: str
    seconds: float
    attempts: int


class Activity:
    """Attempts per time bucket and the latest bindings; see the module doc."""

    def __init__(self, *, clock: Callable[[], float] = time.time, bucket_seconds: int = BUCKET_SECONDS,
                 window_buckets: int = WINDOW_BUCKETS) -> None:
        self.clock = clock
        self.bucket_seconds = bucket_seconds
        self.window_buckets = window_buckets
        self._buckets: deque[_Bucket] = deque(maxlen=window_buckets)
        self.bindings: deque[Binding] = deque(maxlen=RECENT_BINDINGS)

    def _bucket(self, now: float) -> _Bucket:
        start = int(now // self.bucket_seconds) * self.bucket_seconds
        if not self._buckets or self._buckets[-1].start < start:
            self._buckets.append(_Bucket(start))
        return self._buckets[-1]

    def attempted(self, attempt: Attempt) -> None:
        now = self.clock()
        bucket = self._bucket(now)
        if attempt.result == "scheduled":
            bucket.scheduled += 1
            self.bindings.append(Binding(now, attempt.pod.key, attempt.node, attempt.profile, attempt.seconds,
                                         attempt.attempts))
        elif attempt.result == "unschedulable":
            bucket.unschedulable += 1
        else:
            bucket.error += 1
        bucket.latency[bisect.bisect_left(LATENCY_BOUNDS, attempt.seconds)] += 1

    observes_extension_points = False  # see NullObserver

    def extension_point(self, profile: str, point: str, code: str, seconds: float) -> None:
        pass

    def to_json(self) -> dict:
        """Every bucket of the window, oldest first (empty ones included, so a plot's x axis
        is time), and the latest bindings, newest first."""
        now = self.clock()
        last = int(now // self.bucket_seconds) * self.bucket_seconds
        first = last - (self.window_buckets - 1) * self.bucket_seconds
        by_start = {b.start: b for b in self._buckets if b.start >= first}
        series: list[dict[str, Any]] = []
        for start in range(first, last + 1, self.bucket_seconds):
            bucket = by_start.get(start)
            if bucket is None:
                series.append({"start": start, "scheduled": 0, "unschedulable": 0, "error": 0,
                               "p50Ms": None, "p99Ms": None})
            else:
                series.append({"start": start, "scheduled": bucket.scheduled, "unschedulable": bucket.unschedulable,
                               "error": bucket.error, "p50Ms": bucket.quantile_ms(0.5),
                               "p99Ms": bucket.quantile_ms(0.99)})
        bindings = [{"time": b.time, "pod": b.pod, "node": b.node, "profile": b.profile,
                     "ms": round(b.seconds * 1000, 3), "attempts": b.attempts} for b in reversed(self.bindings)]
        return {"bucketSeconds": self.bucket_seconds, "now": now, "series": series, "bindings": bindings}
