"""KubeClusterClient against a recording fake of kubernetes_asyncio's ApiClient, on fake time."""
from __future__ import annotations

from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio.client.rest import ApiException

from kopfsched.framework.client import ClusterError
from kopfsched.kube.client import KubeClusterClient
from tests.builders import make_pod
from tests.fakes import FakeClock


class RecordingAPI:
    def __init__(self, time: FakeClock) -> None:
        self.time = time
        self.sent: list[tuple[str, str, float]] = []

    async def call_api(self, path: str, method: str, **_: Any) -> Any:
        self.sent.append((method, path.rsplit('/', 1)[-1], round(self.time.now, 6)))
        return {}


def client_on(time: FakeClock, *, qps: float, burst: int) -> tuple[KubeClusterClient, RecordingAPI]:
    api = RecordingAPI(time)
    client = KubeClusterClient(api, qps=qps, burst=burst, instance='test',  # type: ignore[arg-type]
                               clock=time.clock, sleep=time.sleep)
    return client, api


async def failed_scheduling(client: KubeClusterClient, name: str) -> None:
    await client.record_event(regarding=make_pod(name, uid=f'uid-{name}'), type='Warning', reason='FailedScheduling',
                              action='Scheduling', message='0/1 nodes are available', reporting_controller='kopfsched')


async def test_failed_scheduling_events_do_not_hold_binds_back() -> None:
    """As kube-scheduler's separate event client: Events spend tokens of their own."""
    time = FakeClock(0.0)
    client, api = client_on(time, qps=10, burst=1)
    for i in range(5):
        await failed_scheduling(client, f'stuck-{i}')
    await client.bind(pod=make_pod('ready', uid='uid-ready'), node_name='n1')
    await client.bind(pod=make_pod('next', uid='uid-next'), node_name='n1')
    assert api.sent == [('POST', 'events', 0.0), ('POST', 'events', 0.1), ('POST', 'events', 0.2),
                        ('POST', 'events', 0.3), ('POST', 'events', 0.4),
                        ('POST', 'binding', 0.4), ('POST', 'binding', 0.5)]


class BodyRecordingAPI(RecordingAPI):
    def __init__(self, time: FakeClock) -> None:
        super().__init__(time)
        self.bodies: list[Any] = []

    async def call_api(self, path: str, method: str, **kwargs: Any) -> Any:
        self.bodies.append(kwargs.get('body'))
        return await super().call_api(path, method, **kwargs)


async def test_repeats_of_an_event_patch_its_series_as_client_go_does() -> None:
    """client-go's events broadcaster: the first repeat makes a series of 2 (one PATCH); later
    repeats are counted, their count written once the series is over (6 minutes without one)
    or by the 30-minute refresh, not once per repeat."""
    time = FakeClock(0.0)
    wall = [1_000_000.0]
    api = BodyRecordingAPI(time)
    client = KubeClusterClient(api, qps=100, burst=100, instance='test',  # type: ignore[arg-type]
                               clock=time.clock, sleep=time.sleep, wall_time=lambda: wall[0])
    for _ in range(5):
        await failed_scheduling(client, 'stuck')
        wall[0] += 10
    assert [method for method, _, _ in api.sent] == ['POST', 'PATCH']
    assert api.bodies[1]['series']['count'] == 2
    wall[0] += 100
    await client.finish_series()  # seen 2.5 minutes ago: not over
    await client.refresh_series()
    assert [method for method, _, _ in api.sent] == ['POST', 'PATCH', 'PATCH']
    assert api.bodies[2] == {'series': {'count': 5, 'lastObservedTime': '1970-01-12T13:47:20.000000Z'}}
    wall[0] += 360
    await client.finish_series()  # over: its count written a last time, and forgotten
    assert [method for method, _, _ in api.sent] == ['POST', 'PATCH', 'PATCH', 'PATCH']
    await failed_scheduling(client, 'stuck')
    assert [method for method, _, _ in api.sent] == ['POST', 'PATCH', 'PATCH', 'PATCH', 'POST']


@pytest.mark.parametrize('call', [
    pytest.param(lambda c, pod: c.bind(pod=pod, node_name='n1'), id='bind'),
    pytest.param(lambda c, pod: c.delete_pod(pod=pod), id='delete-victim'),
    pytest.param(lambda c, pod: c.patch_pod_status(pod=pod, nominated_node_name='n1'), id='nominate'),
])
async def test_a_fenced_client_sends_no_write(call: Any) -> None:
    time = FakeClock(0.0)
    client, api = client_on(time, qps=100, burst=100)
    client.fence('leader election lost')
    with pytest.raises(ClusterError, match=r'not sent: leader election lost$'):
        await call(client, make_pod('p', uid='uid-p'))
    assert api.sent == []


class _Response:
    def __init__(self, status: int, headers: dict[str, str]) -> None:
        self.status, self.reason, self.data, self._headers = status, 'Too Many Requests', b'', headers

    def getheaders(self) -> dict[str, str]:
        return self._headers


class ThrottlingAPI(RecordingAPI):
    """Answers the first calls with the given (status, Retry-After) failures, then succeeds."""

    def __init__(self, time: FakeClock, failures: list[tuple[int, str | None]]) -> None:
        super().__init__(time)
        self.failures = list(failures)

    async def call_api(self, path: str, method: str, **kwargs: Any) -> Any:
        await super().call_api(path, method, **kwargs)
        if self.failures:
            status, retry_after = self.failures.pop(0)
            raise ApiException(http_resp=_Response(status, {} if retry_after is None else {'Retry-After': retry_after}))
        return {}


async def bind_times(failures: list[tuple[int, str | None]]) -> tuple[list[float], str | None]:
    time = FakeClock(0.0)
    api = ThrottlingAPI(time, failures)
    client = KubeClusterClient(api, qps=1000, burst=1000, instance='test',  # type: ignore[arg-type]
                               clock=time.clock, sleep=time.sleep)
    error = None
    try:
        await client.bind(pod=make_pod('p', uid='uid-p'), node_name='n1')
    except ClusterError as exc:
        error = str(exc)
    return [sent for _, _, sent in api.sent], error


@pytest.mark.parametrize(('failures', 'expected'), [
    pytest.param([(429, '2')] * 3, [0.0, 2.0, 4.0, 6.0], id='429-retry-after'),
    pytest.param([(503, '1'), (500, None)], [0.0, 1.0, 1.1], id='503-retry-after-then-500-backoff'),
    pytest.param([(500, '2')], [0.0, 2.0], id='500-retry-after'),  # every 5xx, from 500 up
    pytest.param([(429, '0')], [0.0, 0.0], id='retry-after-zero-retries-at-once'),
    pytest.param([(429, '-1')], [0.0, 0.05], id='negative-is-as-absent'),
    pytest.param([(429, '60')], [0.0, 10.0], id='capped'),
    pytest.param([(429, 'soon'), (429, None)], [0.0, 0.05, 0.15], id='unreadable-or-absent'),
])
async def test_retry_after_is_honoured_within_bounds(failures: list[tuple[int, str | None]],
                                                    expected: list[float]) -> None:
    assert await bind_times(failures) == (expected, None)


async def test_a_call_throttled_more_than_ten_times_gives_up() -> None:
    sent, error = await bind_times([(429, '1')] * 11)
    assert sent == [float(i) for i in range(11)]
    assert error is not None and error.startswith('binding default/p to n1: 429 Too Many Requests')


class FlakyTransportAPI(RecordingAPI):
    """Fails the first calls as the network does (no answer at all), then succeeds."""

    def __init__(self, time: FakeClock, failures: list[BaseException]) -> None:
        super().__init__(time)
        self.failures = list(failures)

    async def call_api(self, path: str, method: str, **kwargs: Any) -> Any:
        await super().call_api(path, method, **kwargs)
        if self.failures:
            raise self.failures.pop(0)
        return {}


@pytest.mark.parametrize('failure', [
    pytest.param(aiohttp.ClientConnectionError('connection reset'), id='connection-error'),
    pytest.param(TimeoutError(), id='timeout'),
])
async def test_a_call_the_network_failed_is_retried_after_the_backoff(failure: BaseException) -> None:
    time = FakeClock(0.0)
    api = FlakyTransportAPI(time, [failure])
    client = KubeClusterClient(api, qps=1000, burst=1000, instance='test',  # type: ignore[arg-type]
                               clock=time.clock, sleep=time.sleep)
    await client.bind(pod=make_pod('p', uid='uid-p'), node_name='n1')
    assert [sent for _, _, sent in api.sent] == [0.0, 0.05]


async def test_retry_after_on_a_conflict_is_not_a_retry() -> None:
    assert await bind_times([(409, '1')]) == ([0.0], 'binding default/p to n1: 409 Too Many Requests: ')
