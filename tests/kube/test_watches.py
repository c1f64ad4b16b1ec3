"""Watch errors handled as client-go's reflector does: its back-off, and when /healthz calls a watch gone."""
from __future__ import annotations

import pytest

from kopfsched.kube.watches import Backoff, WatchHealth
from tests.fakes import FakeClock


def test_backoff_doubles_to_its_cap_and_starts_over_after_two_quiet_minutes() -> None:
    clock = FakeClock()
    backoff = Backoff(clock=clock, jitter=lambda: 0.0)
    delays = []
    for _ in range(8):
        delays.append(backoff.next())
        clock.now += 1
    clock.now += 121
    delays.append(backoff.next())
    assert delays == [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0, 0.8]


def test_backoff_jitter_adds_up_to_the_delay_again() -> None:
    backoff = Backoff(clock=FakeClock(), jitter=lambda: 0.5)
    assert [backoff.next(), backoff.next()] == [pytest.approx(1.2), pytest.approx(2.4)]


def failing_health(clock: FakeClock) -> WatchHealth:
    health = WatchHealth(down_after=60, settle=10, clock=clock)
    health.listed('pods')
    health.failed('pods', RuntimeError('boom'))
    return health


def test_a_watch_failing_longer_than_down_after_is_a_problem_naming_its_last_error() -> None:
    clock = FakeClock()
    health = failing_health(clock)
    clock.now += 60
    early = health.problems()
    clock.now += 1
    assert early == []
    assert health.problems() == ['the watch of pods has failed for 61s (1 times; last: RuntimeError: boom)']


def test_a_watch_event_ends_the_failure() -> None:
    clock = FakeClock()
    health = failing_health(clock)
    clock.now += 30
    health.listed('pods')
    health.event('pods')
    clock.now += 100
    assert health.problems() == []


def test_a_relist_that_fails_again_at_once_does_not_end_the_failure() -> None:
    clock = FakeClock()
    health = failing_health(clock)
    for _ in range(7):  # every ~10 s: listed, then the watch answers an ERROR right away
        clock.now += 9.9
        health.listed('pods')
        health.failed('pods', RuntimeError('again'))
    assert health.problems() == ['the watch of pods has failed for 69s (8 times; last: RuntimeError: again)']


def test_a_quiet_watch_open_for_settle_seconds_since_its_failure_is_not_a_problem() -> None:
    clock = FakeClock()
    health = failing_health(clock)
    clock.now += 55
    health.listed('pods')  # no event since: nothing changed in the cluster
    clock.now += 9
    before_settled = health.problems()
    clock.now += 1
    assert before_settled == ['the watch of pods has failed for 64s (1 times; last: RuntimeError: boom)']
    assert health.problems() == []


def test_a_required_watch_stopped_by_kopf_is_a_problem_until_it_lists_again() -> None:
    health = WatchHealth(clock=FakeClock())
    health.listed('pods')
    health.listed('podgroups.scheduling.x-k8s.io')
    health.stopped('pods')
    health.stopped('podgroups.scheduling.x-k8s.io')  # its CRD was deleted: nothing to watch
    stopped = health.problems(required=('pods', 'nodes'))
    health.listed('pods')
    assert stopped == ['the watch of pods was stopped']
    assert health.problems(required=('pods', 'nodes')) == []


def test_kopfs_watch_lines_are_decoded_by_orjson_and_what_it_refuses_by_json() -> None:
    import json
    import math

    from kopf._cogs.clients import api as kopf_api

    from kopfsched.kube.watches import _get, install, json_loads
    install()
    assert kopf_api.json.loads is json_loads
    assert kopf_api.get is _get  # LIST pages and discovery answers: the e2e listing tests read them
    assert kopf_api.json.dumps is json.dumps  # the rest of kopf's json is the standard library's
    line = '{"type":"ADDED","object":{"metadata":{"name":"p","resourceVersion":"7"},"spec":{"n":1.5,"u":"\\u00e9"}}}'
    assert json_loads(line) == json.loads(line)
    assert json_loads('{"max": 18446744073709551615, "min": -9223372036854775808}') == {
        "max": 2**64 - 1, "min": -(2**63)}
    assert math.isnan(json_loads('{"x": NaN}')["x"])  # orjson refuses it; json reads it
    assert json_loads('{"s": "\\ud800"}') == {"s": "\ud800"}  # a lone surrogate, likewise
