"""The operator's plumbing between kopf's thread, the API client and the scheduler's loop."""
from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from kubernetes_asyncio import client as k8s

from kopfsched.kube.client import without_env_lookups
from kopfsched.kube.kopf_thread import Inbox
from tests.waiting import until


async def test_inbox_delivers_in_order_with_few_wakeups() -> None:
    """Items put from another thread arrive in order, one wake-up per batch, not per item."""
    delivered: list[int] = []
    inbox: Inbox[int] = Inbox(asyncio.get_running_loop(), delivered.append, batch=100)
    putter = threading.Thread(target=lambda: [inbox.put(i) for i in range(5000)])
    putter.start()
    await asyncio.to_thread(putter.join)
    await until(lambda: len(delivered) >= 5000, what='5000 items delivered')
    assert delivered == list(range(5000))
    assert inbox.wakeups < 5000


async def test_inbox_yields_to_the_loop_between_batches_and_survives_a_bad_item() -> None:
    delivered: list[int] = []
    loop = asyncio.get_running_loop()

    def deliver(item: int) -> None:
        if item == 3:
            raise ValueError("bad")
        delivered.append(item)

    inbox: Inbox[int] = Inbox(loop, deliver, batch=2)
    for i in range(6):
        inbox.put(i)
    assert inbox.wakeups == 1
    await asyncio.sleep(0)  # the self-pipe wake-up runs one batch
    await asyncio.sleep(0)
    assert 0 < len(delivered) < 5, "a batch of 2, then the loop's other work"
    for _ in range(10):
        await asyncio.sleep(0)
    assert delivered == [0, 1, 2, 4, 5]


@pytest.mark.parametrize(("env", "proxy"), [
    pytest.param({}, None, id="no-proxy-configured"),
    pytest.param({"HTTPS_PROXY": "http://proxy.example:3128"}, "http://proxy.example:3128", id="https-proxy"),
    pytest.param({"HTTPS_PROXY": "http://proxy.example:3128", "NO_PROXY": "api.example"}, None, id="no-proxy-host"),
])
async def test_the_environment_proxy_is_resolved_once(monkeypatch: pytest.MonkeyPatch, env: dict[str, str],
                                                      proxy: str | None) -> None:
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy", "ALL_PROXY",
                 "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    configuration = k8s.Configuration(host="https://api.example:6443")
    api = k8s.ApiClient(configuration)
    connector = api.rest_client.pool_manager.connector
    without_env_lookups(api)
    session: Any = api.rest_client.pool_manager
    try:
        assert (api.rest_client.proxy, session.trust_env) == (proxy, False)
        assert session.connector is connector, "the TLS settings stay those of the configuration"
    finally:
        await api.close()


async def test_inbox_wakes_the_loop_once_per_iteration_of_the_putting_loop() -> None:
    """kopf's thread puts many events per iteration of its loop: one wake-up for all of them."""
    delivered: list[int] = []
    inbox: Inbox[int] = Inbox(asyncio.get_running_loop(), delivered.append)

    async def produce() -> None:
        for i in range(1000):
            inbox.put(i)
        await asyncio.sleep(0)

    putter = threading.Thread(target=lambda: asyncio.run(produce()))
    putter.start()
    await asyncio.to_thread(putter.join)
    await until(lambda: len(delivered) >= 1000, what='1000 items delivered')
    assert delivered == list(range(1000))
    assert inbox.wakeups == 1


async def test_inbox_looks_again_while_items_keep_coming_instead_of_being_woken() -> None:
    """After a drain that delivered something, the loop looks again on its next iteration: items
    put meanwhile need no wake-up; once a look finds nothing, the next item wakes the loop."""
    delivered: list[int] = []
    inbox: Inbox[int] = Inbox(asyncio.get_running_loop(), delivered.append)

    def put_from_another_thread(*items: int) -> None:
        putter = threading.Thread(target=lambda: [inbox.put(i) for i in items])
        putter.start()
        putter.join()

    put_from_another_thread(0)
    await asyncio.sleep(0)  # the wake-up's drain delivers 0, then looks again at the next iteration
    assert delivered == [0] and inbox.wakeups == 1
    put_from_another_thread(1, 2)  # the drain that delivered 0 looks again: no wake-up needed
    await asyncio.sleep(0)
    assert delivered == [0, 1, 2] and inbox.wakeups == 1
    for _ in range(3):
        await asyncio.sleep(0)  # a look that finds nothing: the inbox sleeps
    put_from_another_thread(3)
    for _ in range(3):
        await asyncio.sleep(0)
    assert delivered == [0, 1, 2, 3] and inbox.wakeups == 2
