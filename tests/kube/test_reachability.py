"""kopf's requests to an API server that cannot be reached: retried for ever, one line per failure."""
from __future__ import annotations

import asyncio
import logging
import socket
import ssl
import threading
from typing import Any

import aiohttp
import kopf
import pytest
from aiohttp.client_reqrep import ConnectionKey
from kopf._cogs.clients import errors as kopf_errors

from kopfsched.kube import reachability
from kopfsched.kube.handlers import operator_settings
from kopfsched.kube.reachability import ApiReachability, describe

KEY = ConnectionKey('127.0.0.1', 1, False, True, None, None, None)


def refused() -> aiohttp.ClientConnectorError:
    return aiohttp.ClientConnectorError(KEY, ConnectionRefusedError(111, "Connect call failed ('127.0.0.1', 1)"))


@pytest.mark.parametrize(('error', 'expected'), [
    (refused(), 'connection refused'),
    (aiohttp.ClientConnectorError(KEY, ConnectionResetError(104, 'Connection reset by peer')), 'connection reset'),
    (aiohttp.ClientConnectorError(KEY, socket.gaierror(-2, 'Name or service not known')),
     'name or service not known'),
    (TimeoutError(), 'no answer in time (timeout)'),
    (aiohttp.ServerDisconnectedError(), 'the server closed the connection'),
    (aiohttp.ClientConnectorCertificateError(KEY, ssl.SSLCertVerificationError(
        1, '[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: self-signed certificate')),
     'TLS certificate not accepted: [SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: '
     'self-signed certificate'),
    (kopf_errors.APINotFoundError({'message': 'no such thing'}, status=404, headers={}), '404 no such thing'),
])
def test_a_failure_is_described_in_a_few_words_without_the_connection_key(error: BaseException,
                                                                         expected: str) -> None:
    assert describe(error) == expected


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_one_line_per_announced_retry_however_many_requests_fail_together(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    state = ApiReachability('http://127.0.0.1:1', clock=clock)
    caplog.set_level(logging.INFO, logger=reachability.__name__)
    state.failed('connection refused', 2.0)
    state.failed('connection refused', 2.0)  # another kind's request, at the same time
    clock.now += 2.0
    state.failed('connection refused', 4.0)
    clock.now += 1.0
    state.failed('connection reset', 4.0)  # another cause: said at once
    assert state.problem() == ('cannot reach the API server at http://127.0.0.1:1: connection reset '
                               '(for 3s, 4 failed requests)')
    clock.now += 1.0
    state.succeeded()
    assert (state.reachable, state.problem()) == (True, None)
    assert [r.getMessage() for r in caplog.records] == [
        'cannot reach the API server at http://127.0.0.1:1: connection refused; retrying in 2s',
        'cannot reach the API server at http://127.0.0.1:1: connection refused; retrying in 4s',
        'cannot reach the API server at http://127.0.0.1:1: connection reset; retrying in 4s',
        'the API server at http://127.0.0.1:1 answers again (after 4 failed requests in 4s)',
    ]


class FakeRequest:
    """kopf's request: fails with each error given, then answers; records the attempts."""

    def __init__(self, *errors: BaseException) -> None:
        self.errors = list(errors)
        self.calls: list[dict[str, Any]] = []

    async def __call__(self, method: str, url: str, **kwargs: Any) -> str:
        self.calls.append(kwargs)
        kwargs['logger'].error(f'Request attempt #1/1 failed; escalating: {method} {url} -> ...')
        if self.errors:
            raise self.errors.pop(0)
        return 'response'


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The test's own sleeps, recorded and skipped: asyncio.sleep is patched process-wide, so
    another thread's loop (a kopf thread an earlier test left) sleeps for real, unrecorded."""
    slept: list[float] = []
    ours, real_sleep = threading.get_ident(), asyncio.sleep

    async def sleep(delay: float) -> None:
        if threading.get_ident() != ours:
            await real_sleep(delay)
            return
        slept.append(delay)

    monkeypatch.setattr(reachability.asyncio, 'sleep', sleep)
    return slept


async def test_unreachable_is_retried_for_ever_with_a_capped_backoff(
        monkeypatch: pytest.MonkeyPatch, sleeps: list[float], caplog: pytest.LogCaptureFixture) -> None:
    fake = FakeRequest(*(refused() for _ in range(12)))
    monkeypatch.setattr(reachability, '_original_request', fake)
    state = ApiReachability('http://127.0.0.1:1', max_backoff=30)
    settings = operator_settings(api_reachability=state)
    response = await reachability._request('get', '/api', settings=settings, logger=logging.getLogger('kopf.x'))
    assert response == 'response'
    assert sleeps == [1, 2, 4, 8, 16, 30, 30, 30, 30, 30, 30, 30]
    assert all(call['backoffs'] == () for call in fake.calls)  # one kopf attempt each
    assert not any(r.getMessage().startswith('Request attempt') for r in caplog.records)
    assert state.reachable


async def test_an_error_status_is_retried_on_kopfs_schedule_then_raised(
        monkeypatch: pytest.MonkeyPatch, sleeps: list[float]) -> None:
    errors = [kopf_errors.APIServerError({'message': 'etcd is down'}, status=503, headers={}) for _ in range(10)]
    monkeypatch.setattr(reachability, '_original_request', FakeRequest(*errors))
    settings = operator_settings(api_reachability=ApiReachability('http://x'))
    with pytest.raises(kopf_errors.APIServerError):
        await reachability._request('get', '/api/v1/nodes', settings=settings, logger=logging.getLogger('kopf.x'))
    assert sleeps == list(kopf.OperatorSettings().networking.error_backoffs)


async def test_other_operators_keep_kopfs_request(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeRequest()
    monkeypatch.setattr(reachability, '_original_request', fake)
    await reachability._request('get', '/api', settings=kopf.OperatorSettings(), logger=logging.getLogger('kopf.x'))
    assert fake.calls[0]['backoffs'] is None


def test_install_is_idempotent() -> None:
    from kopf._cogs.clients import api
    reachability.install()
    reachability.install()
    assert api.request is reachability._request


async def test_discovery_answering_an_error_is_retried_for_ever(
        monkeypatch: pytest.MonkeyPatch, sleeps: list[float], caplog: pytest.LogCaptureFixture) -> None:
    """kopf's resource observer cannot survive its discovery failing: kube-scheduler's discovery retries."""
    errors = [kopf_errors.APIServerError({'message': 'etcd is down'}, status=503, headers={}) for _ in range(12)]
    monkeypatch.setattr(reachability, '_original_request', FakeRequest(*errors))
    settings = operator_settings(api_reachability=ApiReachability('http://x', max_backoff=10))
    caplog.set_level(logging.WARNING, logger=reachability.__name__)
    response = await reachability._request('get', '/apis', settings=settings, logger=logging.getLogger('kopf.x'))
    assert response == 'response'
    assert sleeps == [1, 2, 4, 8, 10, 10, 10, 10, 10, 10, 10, 10]
    assert caplog.records[0].getMessage() == 'GET /apis: the API server answered 503 etcd is down; retrying in 1s'


@pytest.mark.parametrize(('url', 'discovery'), [
    ('/api', True), ('/apis', True), ('/api/v1', True), ('/apis/storage.k8s.io/v1', True), ('/version', True),
    ('/api/v1/nodes', False), ('/apis/apps/v1/replicasets?limit=500', False), ('/api/v1/namespaces/a/pods', False),
])
def test_discovery_urls(url: str, discovery: bool) -> None:
    assert reachability.is_discovery(url) is discovery
