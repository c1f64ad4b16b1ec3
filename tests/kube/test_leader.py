"""LeaderElector.hold: losing the lease is noticed within renew_deadline, whatever the API does."""
from __future__ import annotations

import asyncio
from typing import Any

from kopfsched.kube.leader import LeaderElector, LeaseConfig
from tests.waiting import until

CONFIG = LeaseConfig(name='l', namespace='ns', lease_duration=15.0, renew_deadline=0.3, retry_period=0.01)


class LeaseAPI:
    """GET/PUT of one Lease; `hang` makes every later request hang, as a partitioned API server."""

    def __init__(self, holder: str) -> None:
        self.lease: dict[str, Any] = {'metadata': {'name': 'l', 'namespace': 'ns', 'resourceVersion': '1'},
                                      'spec': {'holderIdentity': holder, 'leaseDurationSeconds': 15}}
        self.hang = False
        self.requests = 0

    async def request(self, method: str, path: str, *, body: Any = None, **_: Any) -> Any:
        self.requests += 1
        if self.hang:
            await asyncio.Event().wait()
        if method == 'PUT':
            self.lease = body
        return self.lease


async def hold_until_lost(api: LeaseAPI, *, timeout: float = 5.0) -> LeaderElector:
    elector = LeaderElector(api, config=CONFIG, identity='me')  # type: ignore[arg-type]
    elector.is_leader = True
    await asyncio.wait_for(elector.hold(asyncio.Event()), timeout=timeout)
    return elector


async def test_a_renewal_that_hangs_loses_the_lease_by_the_renew_deadline() -> None:
    """The client retries a timed-out request for minutes; the lease expires long before."""
    api = LeaseAPI('me')
    api.hang = True
    elector = await hold_until_lost(api, timeout=CONFIG.renew_deadline + 3)
    assert (elector.is_leader, api.requests) == (False, 1)


async def test_seeing_another_holder_loses_the_lease_at_once() -> None:
    """It acquired the lease (we stalled past leaseDuration): do not lead on until renew_deadline."""
    api = LeaseAPI('other')
    config = LeaseConfig(name='l', namespace='ns', lease_duration=15.0, renew_deadline=60.0, retry_period=0.01)
    elector = LeaderElector(api, config=config, identity='me')  # type: ignore[arg-type]
    elector.is_leader = True
    await asyncio.wait_for(elector.hold(asyncio.Event()), timeout=5)
    assert (elector.is_leader, api.requests, api.lease['spec']['holderIdentity']) == (False, 1, 'other')


async def test_renewals_that_succeed_keep_the_lease_until_stopped() -> None:
    api = LeaseAPI('me')
    elector = LeaderElector(api, config=CONFIG, identity='me')  # type: ignore[arg-type]
    elector.is_leader = True
    stop = asyncio.Event()
    task = asyncio.create_task(elector.hold(stop))
    await until(lambda: api.requests >= 10, what='5 renewals (a GET and a PUT each)', interval=0.01)
    stop.set()
    await asyncio.wait_for(task, timeout=5)
    assert elector.is_leader
