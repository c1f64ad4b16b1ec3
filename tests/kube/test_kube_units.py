"""The kube layer's pure parts: --config errors, the token bucket, the feed's ordering rules, stats."""
from __future__ import annotations

import pathlib
from typing import Any

import pytest

from kopfsched.kube.feed import NODE, POD, ClusterFeed
from kopfsched.kube.main import run_operator
from kopfsched.kube.ratelimit import TokenBucket
from kopfsched.scheduler.observer import Attempt
from kopfsched.scheduler.stats import SchedulingStats
from tests.builders import make_node, make_pod
from tests.fakes import FakeClock, RecordingHandlers


def test_an_invalid_config_exits_1_with_one_line(tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / 'config.yaml'
    config.write_text('apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n'
                      'percentageOfNodesToScore: 101\nprofiles: [{schedulerName: a, plugins: {score: '
                      '{enabled: [{name: Nope}]}}}]\n')
    code = run_operator(kubeconfig=None, config_file=str(config), leader_elect=False, metrics_port=None)
    err = capsys.readouterr().err
    assert code == 1
    where = f'{config}: document 1: KubeSchedulerConfiguration'
    assert err.splitlines() == [
        f'{where}: percentageOfNodesToScore: not in valid range [0-100], got 101',
        f'{where}: profiles[0].plugins.score.enabled[0].name: unknown plugin "Nope": neither built in nor installed',
    ]


async def test_the_token_bucket_allows_a_burst_then_paces_at_qps() -> None:
    fake = FakeClock(0.0)
    bucket = TokenBucket(qps=10, burst=3, clock=fake.clock, sleep=fake.sleep)
    for _ in range(5):
        await bucket.acquire()
    assert fake.slept == [0.1, 0.1]


def _pod(rv: int, node: str | None = None) -> dict[str, Any]:
    pod = make_pod('p', uid='uid-p', node_name=node)
    pod['metadata']['resourceVersion'] = str(rv)
    return pod


@pytest.mark.parametrize(('events', 'expected'), [
    pytest.param([_pod(1), _pod(2, 'n1')], [('upsert', None), ('upsert', 'n1')], id='in-order'),
    pytest.param([_pod(2, 'n1'), _pod(1)], [('upsert', 'n1')], id='older-version-dropped'),
    pytest.param([_pod(1), _pod(1)], [('upsert', None)], id='same-version-dropped'),
    pytest.param([_pod(5, 'n1'), _pod(6)], [('upsert', 'n1')], id='never-unbound'),
])
def test_the_feed_drops_stale_pod_events(events: list[dict[str, Any]], expected: list[tuple[str, str]]) -> None:
    handlers = RecordingHandlers()
    feed = ClusterFeed(handlers)  # type: ignore[arg-type]
    for event in events:
        feed.upsert(POD, event)
    assert handlers.calls == expected


def test_a_deleted_pod_is_not_resurrected_by_an_older_listing() -> None:
    handlers = RecordingHandlers()
    feed = ClusterFeed(handlers)  # type: ignore[arg-type]
    feed.upsert(POD, _pod(1))
    feed.delete(POD, _pod(3))
    feed.upsert(POD, _pod(2))
    assert handlers.calls == [('upsert', None), ('delete', None)]


def test_reconcile_deletes_only_what_the_listing_lacks_and_no_event_touched() -> None:
    handlers = RecordingHandlers()
    feed = ClusterFeed(handlers)  # type: ignore[arg-type]
    for name in ('kept', 'ghost', 'late'):
        node = make_node(name)
        node['metadata']['resourceVersion'] = '1'
        feed.upsert(NODE, node)
    token = feed.begin_listing()
    late = make_node('late')
    late['metadata']['resourceVersion'] = '2'
    feed.upsert(NODE, late)  # an event while the LIST was in flight
    kept = make_node('kept')
    kept['metadata']['resourceVersion'] = '1'
    removed = feed.reconcile(NODE, [kept], token=token)
    assert removed == 1
    assert [name for kind, name in handlers.calls if kind == 'node-delete'] == ['ghost']
    assert sorted(n['metadata']['name'] for n in feed.known(NODE)) == ['kept', 'late']


def test_stats_count_attempts_and_take_percentiles() -> None:
    stats = SchedulingStats(wall_clock=lambda: 1234.0)
    pod = object()
    for seconds, result in [(0.001, 'scheduled'), (0.002, 'scheduled'), (0.003, 'unschedulable'),
                            (0.010, 'error')]:
        stats.attempted(Attempt(pod=pod, profile='p', result=result, seconds=seconds))  # type: ignore[arg-type]
    stats.attempted(Attempt(pod=pod, profile='p', result='unschedulable', seconds=0.004,  # type: ignore[arg-type]
                            nominated_node='n1', victims=('ns/v',)))
    p = stats.of('p')
    assert (p.scheduled, p.unschedulable, p.errors, p.preemptions, p.last_schedule_time) == (2, 2, 1, 1, 1234.0)
    assert (p.percentile_ms(0.5), p.percentile_ms(0.99)) == (3.0, 10.0)


def test_kopfs_signal_warning_is_dropped_and_nothing_else() -> None:
    """kopf runs outside the main thread on purpose; its warning about OS signals would
    only alarm a reader of the log. Other kopf warnings stay."""
    import logging

    from kopfsched.kube.kopf_thread import _not_the_signal_warning

    def record(message: str) -> logging.LogRecord:
        return logging.LogRecord("kopf._core.reactor.running", logging.WARNING, __file__, 1, message, None, None)

    assert not _not_the_signal_warning(record("OS signals are ignored: running not in the main thread."))
    assert _not_the_signal_warning(record("Unresolved resources cannot be served (try creating their CRDs): x"))


@pytest.mark.parametrize("now", [0.0, 1.5, 1764615600.999999, 1764615600.9999996, 1764615600.0000004,
                                 1764615600.0000005, 1071383560.0522785, 1764615601.25])
def test_micro_time_reads_as_datetime_formats_it(now: float) -> None:
    import datetime

    from kopfsched.kube.client import micro_time
    expected = datetime.datetime.fromtimestamp(now, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    assert micro_time(now) == expected
    assert micro_time(now) == expected  # the second's text from the cache
