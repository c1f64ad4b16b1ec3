"""KubeClusterClient against a recording fake of kubernetes_asyncio's ApiClient, on fake time."""
from __future__ import annotations

from typing import Any

import pytest

from kopfsched.framework.client import ClusterError
from kopfsched.kube.client import KubeClusterClient
from tests.builders import make_pod


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds


class RecordingAPI:
    def __init__(self, time: FakeTime) -> None:
        self.time = time
        self.sent: list[tuple[str, str, float]] = []

    async def call_api(self, path: str, method: str, **_: Any) -> Any:
        self.sent.append((method, path.rsplit('/', 1)[-1], round(self.time.now, 6)))
        return {}


def client_on(time: FakeTime, *, qps: float, burst: int) -> tuple[KubeClusterClient, RecordingAPI]:
    api = RecordingAPI(time)
    client = KubeClusterClient(api, qps=qps, burst=burst, instance='test',  # type: ignore[arg-type]
                               clock=time.clock, sleep=time.sleep)
    return client, api


async def failed_scheduling(client: KubeClusterClient, name: str) -> None:
    await client.record_event(regarding=make_pod(name, uid=f'uid-{name}'), type='Warning', reason='FailedScheduling',
                              action='Scheduling', message='0/1 nodes are available', reporting_controller='kopfsched')


async def test_failed_scheduling_events_do_not_hold_binds_back() -> None:
    """As kube-scheduler's separate event client: Events spend tokens of their own."""
    time = FakeTime()
    client, api = client_on(time, qps=10, burst=1)
    for i in range(5):
        await failed_scheduling(client, f'stuck-{i}')
    await client.bind(pod=make_pod('ready', uid='uid-ready'), node_name='n1')
    await client.bind(pod=make_pod('next', uid='uid-next'), node_name='n1')
    assert api.sent == [('POST', 'events', 0.0), ('POST', 'events', 0.1), ('POST', 'events', 0.2),
                        ('POST', 'events', 0.3), ('POST', 'events', 0.4),
                        ('POST', 'binding', 0.4), ('POST', 'binding', 0.5)]


async def test_repeats_of_an_event_patch_one_series() -> None:
    time = FakeTime()
    client, api = client_on(time, qps=100, burst=100)
    for _ in range(3):
        await failed_scheduling(client, 'stuck')
    assert [method for method, _, _ in api.sent] == ['POST', 'PATCH', 'PATCH']


@pytest.mark.parametrize('call', [
    pytest.param(lambda c, pod: c.bind(pod=pod, node_name='n1'), id='bind'),
    pytest.param(lambda c, pod: c.delete_pod(pod=pod), id='delete-victim'),
    pytest.param(lambda c, pod: c.patch_pod_status(pod=pod, nominated_node_name='n1'), id='nominate'),
])
async def test_a_fenced_client_sends_no_write(call: Any) -> None:
    time = FakeTime()
    client, api = client_on(time, qps=100, burst=100)
    client.fence('leader election lost')
    with pytest.raises(ClusterError, match=r'not sent: leader election lost$'):
        await call(client, make_pod('p', uid='uid-p'))
    assert api.sent == []
