"""SchedulerMetrics: upstream names, labels and bucket edges, fed with fake attempts."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest
from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from kopfsched.observability.metrics import SchedulerMetrics, attempts_label


@dataclass
class FakeAttempt:
    result: str
    profile: str = "kopfsched"
    seconds: float = 0.003
    attempts: int = 1
    victims: tuple[str, ...] = ()
    nominated_node: str = ""


@dataclass
class FakeAttemptWithQueueTime(FakeAttempt):
    since_first_queued: float = 0.0


def sample(metrics: SchedulerMetrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def bucket_edges(metrics: SchedulerMetrics, family: str) -> list[str]:
    """The `le` labels of one histogram's first series, as exposed."""
    text = generate_latest(metrics.registry).decode()
    for fam in text_string_to_metric_families(text):
        if fam.name == family:
            edges: list[str] = []
            for s in fam.samples:
                if s.name == f"{family}_bucket":
                    if edges and s.labels["le"] == edges[0]:
                        break  # next series
                    edges.append(s.labels["le"])
            return edges
    raise AssertionError(f"{family} not exposed")


def fmt(*edges: float) -> list[str]:
    return [repr(float(e)) for e in edges] + ["+Inf"]


def test_own_registry_by_default_so_instances_do_not_collide():
    a, b = SchedulerMetrics(), SchedulerMetrics()
    a.attempted(FakeAttempt("scheduled"))
    assert a.registry is not b.registry
    assert sample(a, "scheduler_schedule_attempts_total", result="scheduled", profile="kopfsched") == 1
    assert sample(b, "scheduler_schedule_attempts_total", result="scheduled", profile="kopfsched") is None


def test_uses_a_given_registry():
    registry = CollectorRegistry()
    metrics = SchedulerMetrics(registry)
    assert metrics.registry is registry
    metrics.attempted(FakeAttempt("error"))
    labels = {"result": "error", "profile": "kopfsched"}
    assert registry.get_sample_value("scheduler_schedule_attempts_total", labels) == 1


def test_attempts_counted_by_result_and_profile():
    metrics = SchedulerMetrics()
    for attempt in [FakeAttempt("scheduled"), FakeAttempt("scheduled"), FakeAttempt("unschedulable"),
                    FakeAttempt("error", profile="other"), FakeAttempt("scheduled", profile="other")]:
        metrics.attempted(attempt)
    name = "scheduler_schedule_attempts_total"
    assert sample(metrics, name, result="scheduled", profile="kopfsched") == 2
    assert sample(metrics, name, result="unschedulable", profile="kopfsched") == 1
    assert sample(metrics, name, result="error", profile="other") == 1
    assert sample(metrics, name, result="scheduled", profile="other") == 1
    assert sample(metrics, name, result="error", profile="kopfsched") is None


def test_attempt_duration_lands_in_upstream_buckets():
    metrics = SchedulerMetrics()
    metrics.attempted(FakeAttempt("scheduled", seconds=0.003))
    metrics.attempted(FakeAttempt("scheduled", seconds=0.0005))
    metrics.attempted(FakeAttempt("scheduled", seconds=20.0))
    name = "scheduler_scheduling_attempt_duration_seconds"
    labels = {"result": "scheduled", "profile": "kopfsched"}
    assert bucket_edges(metrics, name) == fmt(*(0.001 * 2**i for i in range(15)))
    assert sample(metrics, f"{name}_bucket", le="0.001", **labels) == 1
    assert sample(metrics, f"{name}_bucket", le="0.002", **labels) == 1
    assert sample(metrics, f"{name}_bucket", le="0.004", **labels) == 2
    assert sample(metrics, f"{name}_bucket", le="16.384", **labels) == 2
    assert sample(metrics, f"{name}_bucket", le="+Inf", **labels) == 3
    assert sample(metrics, f"{name}_count", **labels) == 3
    assert sample(metrics, f"{name}_sum", **labels) == pytest.approx(20.0035)


def test_extension_point_duration_by_point_status_profile():
    metrics = SchedulerMetrics()
    metrics.extension_point("kopfsched", "Filter", "Success", 0.00015)
    metrics.extension_point("kopfsched", "Filter", "Success", 0.5)
    metrics.extension_point("kopfsched", "PreFilter", "UnschedulableAndUnresolvable", 0.00005)
    name = "scheduler_framework_extension_point_duration_seconds"
    assert bucket_edges(metrics, name) == fmt(*(0.0001 * 2**i for i in range(12)))
    filter_ok = {"extension_point": "Filter", "status": "Success", "profile": "kopfsched"}
    assert sample(metrics, f"{name}_bucket", le="0.0001", **filter_ok) == 0
    assert sample(metrics, f"{name}_bucket", le="0.0002", **filter_ok) == 1
    assert sample(metrics, f"{name}_bucket", le="0.2048", **filter_ok) == 1
    assert sample(metrics, f"{name}_count", **filter_ok) == 2
    rejected = {"extension_point": "PreFilter", "status": "UnschedulableAndUnresolvable", "profile": "kopfsched"}
    assert sample(metrics, f"{name}_bucket", le="0.0001", **rejected) == 1


def test_pending_pods_by_queue_missing_keys_read_as_zero():
    metrics = SchedulerMetrics()
    metrics.set_pending({"active": 3, "backoff": 2, "unschedulable": 7, "gated": 1})
    metrics.set_pending({"active": 4, "unschedulable": 5})
    queues = ("active", "backoff", "unschedulable", "gated")
    got = {q: sample(metrics, "scheduler_pending_pods", queue=q) for q in queues}
    assert got == {"active": 4, "backoff": 0, "unschedulable": 5, "gated": 0}


def test_cache_size_by_type():
    metrics = SchedulerMetrics()
    metrics.set_cache_size(nodes=100, pods=2000, assumed_pods=3)
    got = {t: sample(metrics, "scheduler_cache_size", type=t) for t in ("nodes", "pods", "assumed_pods")}
    assert got == {"nodes": 100, "pods": 2000, "assumed_pods": 3}


def test_preemption_counted_from_a_nominating_attempt():
    metrics = SchedulerMetrics()
    metrics.attempted(FakeAttempt("unschedulable", nominated_node="node-1", victims=("ns/a", "ns/b", "ns/c")))
    metrics.attempted(FakeAttempt("unschedulable"))  # no preemption
    assert sample(metrics, "scheduler_preemption_attempts_total") == 1
    assert bucket_edges(metrics, "scheduler_preemption_victims") == fmt(1, 2, 4, 8, 16, 32, 64)
    assert sample(metrics, "scheduler_preemption_victims_bucket", le="2.0") == 0
    assert sample(metrics, "scheduler_preemption_victims_bucket", le="4.0") == 1
    assert sample(metrics, "scheduler_preemption_victims_count") == 1
    assert sample(metrics, "scheduler_preemption_victims_sum") == 3


def test_preemption_attempt_without_victims_counts_but_observes_none():
    metrics = SchedulerMetrics()
    metrics.preemption_attempt(victims=0)
    metrics.preemption_attempt(victims=70)
    assert sample(metrics, "scheduler_preemption_attempts_total") == 2
    assert sample(metrics, "scheduler_preemption_victims_count") == 1
    assert sample(metrics, "scheduler_preemption_victims_bucket", le="64.0") == 0
    assert sample(metrics, "scheduler_preemption_victims_bucket", le="+Inf") == 1


def test_pod_scheduling_attempts_observed_on_success_only():
    metrics = SchedulerMetrics()
    metrics.attempted(FakeAttempt("unschedulable", attempts=1))
    metrics.attempted(FakeAttempt("scheduled", attempts=3))
    name = "scheduler_pod_scheduling_attempts"
    assert bucket_edges(metrics, name) == fmt(1, 2, 4, 8, 16)
    assert sample(metrics, f"{name}_count") == 1
    assert sample(metrics, f"{name}_bucket", le="2.0") == 0
    assert sample(metrics, f"{name}_bucket", le="4.0") == 1


@pytest.mark.parametrize(("attempts", "label"), [(1, "1"), (14, "14"), (15, "15+"), (40, "15+")],
                         ids=["one", "below-cap", "at-cap", "above-cap"])
def test_sli_attempts_label_capped(attempts, label):
    assert attempts_label(attempts) == label


def test_sli_duration_observed_when_the_attempt_carries_queue_time():
    metrics = SchedulerMetrics()
    metrics.attempted(FakeAttemptWithQueueTime("scheduled", attempts=2, since_first_queued=0.015))
    metrics.attempted(FakeAttemptWithQueueTime("scheduled", attempts=20, since_first_queued=1.0))
    metrics.attempted(FakeAttempt("scheduled", attempts=2))  # no queue time: no SLI sample
    metrics.attempted(FakeAttemptWithQueueTime("unschedulable", attempts=2, since_first_queued=9.0))
    name = "scheduler_pod_scheduling_sli_duration_seconds"
    assert bucket_edges(metrics, name) == fmt(*(0.01 * 2**i for i in range(20)))
    assert sample(metrics, f"{name}_count", attempts="2") == 1
    assert sample(metrics, f"{name}_bucket", le="0.01", attempts="2") == 0
    assert sample(metrics, f"{name}_bucket", le="0.02", attempts="2") == 1
    assert sample(metrics, f"{name}_count", attempts="15+") == 1
    assert sample(metrics, f"{name}_bucket", le="0.64", attempts="15+") == 0
    assert sample(metrics, f"{name}_bucket", le="1.28", attempts="15+") == 1


def test_exposition_names_and_types():
    metrics = SchedulerMetrics()
    text = generate_latest(metrics.registry).decode()
    types = {fam.name: fam.type for fam in text_string_to_metric_families(text)}
    assert types == {
        "scheduler_schedule_attempts": "counter",
        "scheduler_scheduling_attempt_duration_seconds": "histogram",
        "scheduler_pending_pods": "gauge",
        "scheduler_framework_extension_point_duration_seconds": "histogram",
        "scheduler_preemption_attempts": "counter",
        "scheduler_preemption_victims": "histogram",
        "scheduler_pod_scheduling_attempts": "histogram",
        "scheduler_pod_scheduling_sli_duration_seconds": "histogram",
        "scheduler_cache_size": "gauge",
    }
    assert "# TYPE scheduler_schedule_attempts_total counter" in text
    assert "# TYPE scheduler_preemption_attempts_total counter" in text


def test_extension_point_durations_expose_as_a_prometheus_histogram():
    """ListHistogram's exposition is prometheus_client's Histogram's, byte for byte: edges,
    cumulative counts, count, sum (same additions in the same order), series in first-use order."""
    metrics = SchedulerMetrics()
    reference = CollectorRegistry()
    histogram = Histogram("scheduler_framework_extension_point_duration_seconds",
                          "Latency for running all plugins of a specific extension point.",
                          ["extension_point", "status", "profile"],
                          buckets=[0.0001 * 2**i for i in range(12)], registry=reference)
    observations = [("Score", "Success", 0.0001), ("Filter", "Success", 0.00010000001), ("Score", "Success", 0.0),
                    ("Filter", "Unschedulable", 0.2048), ("Filter", "Success", 0.3), ("Filter", "Success", 1e-9),
                    ("Score", "Success", math.inf), ("Bind", "Error", 0.0008)]
    for point, code, seconds in observations:
        metrics.extension_point("p", point, code, seconds)
        histogram.labels(extension_point=point, status=code, profile="p").observe(seconds)

    def family(registry: CollectorRegistry) -> list[str]:
        lines = generate_latest(registry).decode().splitlines()
        return [line for line in lines if "extension_point_duration" in line]

    assert family(metrics.registry) == family(reference)
    assert len(family(reference)) == 2 + 4 * (13 + 2)
    # /metrics?name[]=... restricts by sample name: the same samples come out.
    name = "scheduler_framework_extension_point_duration_seconds"
    for names in ([f"{name}_count"], [f"{name}_sum", f"{name}_bucket"]):
        restricted = metrics.registry.restricted_registry(names)
        assert family(restricted) == family(reference.restricted_registry(names))
        assert family(restricted)


def test_attempt_metrics_expose_as_prometheus_counter_and_histograms():
    """The per-attempt counter and histograms (kept in lists) expose byte for byte as
    prometheus_client's Counter and Histograms fed the same attempts, including the
    unlabelled attempts histogram before any success and the restricted registry."""
    metrics = SchedulerMetrics()
    reference = CollectorRegistry()
    counter = Counter("scheduler_schedule_attempts_total", metrics.schedule_attempts.documentation,
                      ["result", "profile"], registry=reference)
    duration = Histogram("scheduler_scheduling_attempt_duration_seconds",
                         metrics.scheduling_attempt_duration.documentation, ["result", "profile"],
                         buckets=[0.001 * 2**i for i in range(15)], registry=reference)
    attempts = Histogram("scheduler_pod_scheduling_attempts", metrics.pod_scheduling_attempts.documentation,
                         buckets=[1 * 2**i for i in range(5)], registry=reference)
    sli = Histogram("scheduler_pod_scheduling_sli_duration_seconds", metrics.pod_scheduling_sli_duration.documentation,
                    ["attempts"], buckets=[0.01 * 2**i for i in range(20)], registry=reference)
    names = ("scheduler_schedule_attempts", "scheduler_scheduling_attempt_duration_seconds",
             "scheduler_pod_scheduling_attempts", "scheduler_pod_scheduling_sli_duration_seconds")

    def families(registry: CollectorRegistry) -> list[str]:
        lines = generate_latest(registry).decode().splitlines()
        return [line for line in lines if any(name in line for name in names)]

    assert families(metrics.registry) == families(reference)
    fed = [FakeAttempt("unschedulable", seconds=0.001),
           FakeAttemptWithQueueTime("scheduled", seconds=0.0, attempts=3, since_first_queued=0.02),
           FakeAttempt("error", profile="other", seconds=math.inf),
           FakeAttempt("scheduled", seconds=0.0041, attempts=40),
           FakeAttemptWithQueueTime("scheduled", seconds=9.0, attempts=16, since_first_queued=6000.0)]
    for attempt in fed:
        metrics.attempted(attempt)
        counter.labels(result=attempt.result, profile=attempt.profile).inc()
        duration.labels(result=attempt.result, profile=attempt.profile).observe(attempt.seconds)
        if attempt.result == "scheduled":
            attempts.observe(attempt.attempts)
            if isinstance(attempt, FakeAttemptWithQueueTime):
                sli.labels(attempts=attempts_label(attempt.attempts)).observe(attempt.since_first_queued)
    assert families(metrics.registry) == families(reference)
    assert len(families(reference)) == 4 * 2 + 3 + 3 * (16 + 2) + (6 + 2) + 2 * (21 + 2)
    # One family per restriction: a restricted registry collects from a set, in no fixed order.
    for restricted in (["scheduler_schedule_attempts_total"],
                       ["scheduler_pod_scheduling_attempts_count", "scheduler_pod_scheduling_attempts_sum"],
                       ["scheduler_scheduling_attempt_duration_seconds_sum"]):
        assert families(metrics.registry.restricted_registry(restricted)) == families(
            reference.restricted_registry(restricted))
        assert families(metrics.registry.restricted_registry(restricted))
