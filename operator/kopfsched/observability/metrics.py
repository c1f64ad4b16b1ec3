"""Prometheus metrics with kube-scheduler's names, types, labels and buckets.

`SchedulerMetrics` is a `SchedulingObserver` by duck typing (the scheduler calls
`attempted` and `extension_point`), plus setters the operator calls for queue depths
and cache sizes. It sits on the hot path: the extension-point durations, observed several
times per cycle, and the per-attempt counter and histograms are kept in plain lists and
dicts (`ListHistogram`, `ListCounter`) and exposed as prometheus_client's Histogram and
Counter would expose them, byte for byte; the gauges are pre-bound labelled children. Every metric lives
in the instance's own registry unless one is passed, so several instances (tests,
several operators in one process) never collide.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Sequence
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, disable_created_metrics
from prometheus_client.metrics_core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.utils import floatToGoString


def exponential_buckets(start: float, factor: float, count: int) -> tuple[float, ...]:
    """As component-base's ExponentialBuckets: start * factor**i for i in 0..count-1."""
    return tuple(start * factor**i for i in range(count))


ATTEMPT_DURATION_BUCKETS = exponential_buckets(0.001, 2, 15)
EXTENSION_POINT_DURATION_BUCKETS = exponential_buckets(0.0001, 2, 12)
PREEMPTION_VICTIMS_BUCKETS = exponential_buckets(1, 2, 7)
POD_SCHEDULING_ATTEMPTS_BUCKETS = exponential_buckets(1, 2, 5)
SLI_DURATION_BUCKETS = exponential_buckets(0.01, 2, 20)

RESULTS = ("scheduled", "unschedulable", "error")
QUEUES = ("active", "backoff", "unschedulable", "gated")
CACHE_TYPES = ("nodes", "pods", "assumed_pods")
SLI_ATTEMPTS_CAP = 15
"""Upstream caps the SLI histogram's attempts label at "15+" to bound its cardinality."""


class AttemptLike(Protocol):
    """What `attempted` reads from the scheduler's Attempt record."""

    result: str
    profile: str
    seconds: float
    attempts: int
    victims: tuple[str, ...]
    nominated_node: str


def attempts_label(attempts: int) -> str:
    return f"{SLI_ATTEMPTS_CAP}+" if attempts >= SLI_ATTEMPTS_CAP else str(attempts)


class ListHistogram:
    """A labelled Histogram exposed exactly as prometheus_client's (same name, help, labels,
    `le` edges, cumulative buckets, `_count` and `_sum`, series in order of first use), kept
    in plain lists: an observation is a bisect and two additions instead of a lock and a
    walk over bucket objects. For the extension-point durations, which every scheduling
    cycle observes eight to ten times (upstream observes every one; only its per-plugin
    durations are sampled), and the per-attempt histograms. Observe from one thread (the
    scheduling loop); a scrape from another reads a consistent-enough copy, as with any
    counter read while it moves. Without labels, the one series is exposed from the start."""

    def __init__(self, name: str, documentation: str, labelnames: Sequence[str], buckets: Sequence[float],
                 registry: CollectorRegistry) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = tuple(labelnames)
        self.bounds = [*buckets, math.inf]
        self._edges = [floatToGoString(bound) for bound in self.bounds]
        self.series: dict[tuple[str, ...], list[float]] = {}
        """label values -> per-bucket counts (not cumulative), then the sum."""
        if not self.labelnames:
            self.series[()] = [0] * len(self.bounds) + [0.0]
        registry.register(self)

    def observe(self, labelvalues: tuple[str, ...], amount: float) -> None:
        counts = self.series.get(labelvalues)
        if counts is None:
            counts = self.series[labelvalues] = [0] * len(self.bounds) + [0.0]
        counts[bisect.bisect_left(self.bounds, amount)] += 1  # the first bucket with amount <= le
        counts[-1] += amount

    def describe(self) -> Iterable[Metric]:
        return [HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)]

    def collect(self) -> Iterable[Metric]:
        family = HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)
        for labelvalues, counts in list(self.series.items()):
            cumulative = 0.0
            buckets = []
            for edge, count in zip(self._edges, counts, strict=False):
                cumulative += count
                buckets.append((edge, cumulative))
            family.add_metric(labelvalues, buckets, counts[-1])
        return [family]


class ListCounter:
    """A labelled Counter exposed exactly as prometheus_client's (`_total` sample, series in
    order of first use), kept in a dict: for the attempts counter, incremented once per
    attempt. Same threading terms as ListHistogram."""

    def __init__(self, name: str, documentation: str, labelnames: Sequence[str],
                 registry: CollectorRegistry) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = tuple(labelnames)
        self.series: dict[tuple[str, ...], float] = {}
        registry.register(self)

    def inc(self, labelvalues: tuple[str, ...], amount: float = 1.0) -> None:
        self.series[labelvalues] = self.series.get(labelvalues, 0.0) + amount

    def describe(self) -> Iterable[Metric]:
        return [CounterMetricFamily(self.name, self.documentation, labels=self.labelnames)]

    def collect(self) -> Iterable[Metric]:
        family = CounterMetricFamily(self.name, self.documentation, labels=self.labelnames)
        for labelvalues, value in list(self.series.items()):
            family.add_metric(labelvalues, value)
        return [family]


class SchedulerMetrics:
    """The scheduler's metrics, registered in `registry` (a fresh one by default)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        # Upstream exposes no `_created` series; prometheus_client's switch is process-wide.
        disable_created_metrics()
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        r = self.registry
        self.schedule_attempts = ListCounter(
            "scheduler_schedule_attempts_total",
            "Number of attempts to schedule pods, by the result. 'unschedulable' means a pod could not be "
            "scheduled, while 'error' means an internal scheduler problem.",
            ["result", "profile"], r)
        self.scheduling_attempt_duration = ListHistogram(
            "scheduler_scheduling_attempt_duration_seconds",
            "Scheduling attempt latency in seconds (scheduling algorithm + binding)",
            ["result", "profile"], ATTEMPT_DURATION_BUCKETS, r)
        self.pending_pods = Gauge(
            "scheduler_pending_pods",
            "Number of pending pods, by the queue type. 'active' means number of pods in activeQ; 'backoff' "
            "means number of pods in backoffQ; 'unschedulable' means number of pods in unschedulablePods that "
            "the scheduler attempted to schedule and failed; 'gated' is the number of unschedulable pods that "
            "the scheduler never attempted to schedule because they are gated.",
            ["queue"], registry=r)
        self.extension_point_duration = ListHistogram(
            "scheduler_framework_extension_point_duration_seconds",
            "Latency for running all plugins of a specific extension point.",
            ["extension_point", "status", "profile"], EXTENSION_POINT_DURATION_BUCKETS, r)
        self.preemption_attempts = Counter(
            "scheduler_preemption_attempts_total",
            "Total preemption attempts in the cluster till now", registry=r)
        self.preemption_victims = Histogram(
            "scheduler_preemption_victims",
            "Number of selected preemption victims", buckets=PREEMPTION_VICTIMS_BUCKETS, registry=r)
        self.pod_scheduling_attempts = ListHistogram(
            "scheduler_pod_scheduling_attempts",
            "Number of attempts to successfully schedule a pod.",
            (), POD_SCHEDULING_ATTEMPTS_BUCKETS, r)
        self.pod_scheduling_sli_duration = ListHistogram(
            "scheduler_pod_scheduling_sli_duration_seconds",
            "E2e latency for a pod being scheduled, from the time the pod enters the scheduling queue and "
            "might involve multiple scheduling attempts.",
            ["attempts"], SLI_DURATION_BUCKETS, r)
        self.cache_size = Gauge(
            "scheduler_cache_size",
            "Number of nodes, pods, and assumed (bound) pods in the scheduler cache.",
            ["type"], registry=r)
        # Children for the fixed label values, bound once; per-profile ones on first use.
        self._pending = {queue: self.pending_pods.labels(queue=queue) for queue in QUEUES}
        self._cache = {kind: self.cache_size.labels(type=kind) for kind in CACHE_TYPES}

    # -- SchedulingObserver --------------------------------------------------------------

    def attempted(self, attempt: AttemptLike) -> None:
        """One scheduling attempt ended (bound, or failed in either cycle).

        A successful attempt also records the pod's attempt count and, when the record
        carries `since_first_queued` (seconds since the pod first entered the queue),
        the SLI latency. An attempt that nominated a node counts one preemption attempt
        with its victims, as DefaultPreemption's PostFilter does upstream.
        """
        key = (attempt.result, attempt.profile)
        self.schedule_attempts.inc(key)
        self.scheduling_attempt_duration.observe(key, attempt.seconds)
        if attempt.result == "scheduled":
            self.pod_scheduling_attempts.observe((), attempt.attempts)
            since_first_queued = getattr(attempt, "since_first_queued", None)
            if since_first_queued is not None:
                self.pod_scheduling_sli_duration.observe((attempts_label(attempt.attempts),), since_first_queued)
        elif attempt.nominated_node:
            self.preemption_attempt(victims=len(attempt.victims))

    def extension_point(self, profile: str, point: str, code: str, seconds: float) -> None:
        """All plugins of one extension point ran; `code` is the status code's name ("Success", ...)."""
        self.extension_point_duration.observe((point, code, profile), seconds)

    # -- set by the operator ----------------------------------------------------------------

    def preemption_attempt(self, victims: int) -> None:
        """One preemption that selected `victims` pods to evict.

        `attempted` already calls this for attempts that nominated a node: call it
        directly only for preemptions no Attempt record reports.
        """
        self.preemption_attempts.inc()
        if victims > 0:
            self.preemption_victims.observe(victims)

    def set_pending(self, counts: dict[str, int]) -> None:
        """Queue depths keyed active, backoff, unschedulable, gated; missing keys read as 0."""
        for queue, child in self._pending.items():
            child.set(counts.get(queue, 0))

    def set_cache_size(self, *, nodes: int, pods: int, assumed_pods: int) -> None:
        self._cache["nodes"].set(nodes)
        self._cache["pods"].set(pods)
        self._cache["assumed_pods"].set(assumed_pods)
