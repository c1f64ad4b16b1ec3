"""The operator started while its API server cannot be reached: as kube-scheduler, it says why in
one line per failure (no traceback), answers /readyz 503 with the cause, keeps retrying, and
schedules once the API server comes up."""
from __future__ import annotations

import asyncio
import logging
import pathlib
import socket
import threading
from collections.abc import Iterator

import aiohttp
import pytest
import yaml

from kopfsched.emulator.server import FastKubernetesEmulator, write_kubeconfig
from kopfsched.kube.operator import Operator, OperatorOptions
from tests.builders import make_node, make_pod
from tests.e2e.operator_harness import PROFILES, eventually, node_of, post, profile, serve_controller_kinds

ROOT = pathlib.Path(__file__).parents[2]
PODS = '/api/v1/namespaces/default/pods'


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(('127.0.0.1', 0))
        return int(probe.getsockname()[1])


class LateEmulator:
    """An emulator in its own thread and loop, serving on a given port only once started."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.emulator = FastKubernetesEmulator()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name='late-emulator', daemon=True)
        self._thread.start()
        self._started = False

    def start(self) -> str:
        url = asyncio.run_coroutine_threadsafe(self.emulator.start(port=self.port), self._loop).result(timeout=10)
        self._started = True
        return url

    def close(self) -> None:
        if self._started:
            asyncio.run_coroutine_threadsafe(self.emulator.stop(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()


@pytest.fixture
def late() -> Iterator[LateEmulator]:
    server = LateEmulator(free_port())
    try:
        yield server
    finally:
        server.close()


async def get(url: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        return response.status, await response.text()


async def test_an_api_server_that_is_not_there_yet_is_retried_without_tracebacks_and_then_served(
        late: LateEmulator, tmp_path: pathlib.Path, caplog: pytest.LogCaptureFixture,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv('KUBECACHEDIR', str(tmp_path / 'kube-cache'))
    url = f'http://127.0.0.1:{late.port}'
    kubeconfig = write_kubeconfig(tmp_path / 'kubeconfig', url=url)
    caplog.set_level(logging.INFO)
    options = OperatorOptions(kubeconfig=str(kubeconfig), leader_elect=False, metrics_port=0,
                              metrics_host='127.0.0.1', identity='test-operator', watch_max_backoff=1.0)
    async with Operator.connected(options) as operator:
        stop = asyncio.Event()
        task = asyncio.create_task(operator.run(stop))
        try:
            unreachable = f'cannot reach the API server at {url}: connection refused'
            await eventually(lambda: sum(unreachable in r.getMessage() for r in caplog.records) >= 3, timeout=15,
                             what='three retries logged')
            assert operator.health is not None
            health = f'http://127.0.0.1:{operator.health.port}'
            readyz, healthz = await get(f'{health}/readyz'), await get(f'{health}/healthz')
            assert not task.done()

            late.start()
            serve_controller_kinds(late.emulator)
            async with aiohttp.ClientSession(url) as http:
                await post(http, '/apis/apiextensions.k8s.io/v1/customresourcedefinitions',
                           yaml.safe_load((ROOT / 'crds' / 'schedulerprofile.yaml').read_text()))
                await post(http, PROFILES, profile('kopfsched'))
                await post(http, '/api/v1/nodes', make_node('n1'))
                await post(http, PODS, make_pod('late', scheduler_name='kopfsched'))
                await eventually(lambda: node_of(late.emulator, 'late'), timeout=30, what='the pod bound')
            ready_after = await get(f'{health}/readyz')
        finally:
            stop.set()
            code = await asyncio.wait_for(task, timeout=30)

    assert readyz[0] == 503 and readyz[1].startswith(f'readyz check failed: {unreachable} (for ')
    assert healthz == (200, 'ok')  # alive and retrying: a restart would not help
    assert ready_after == (200, 'ok')
    assert code == 0
    lines = [r for r in caplog.records if unreachable in r.getMessage()]
    assert all(r.getMessage().endswith('s') and '; retrying in ' in r.getMessage() for r in lines)
    assert any('answers again' in r.getMessage() for r in caplog.records)
    for record in caplog.records:  # one short line per failure: no traceback, no aiohttp repr, no kopf attempt line
        assert record.exc_info is None, record.getMessage()
        assert 'ConnectionKey' not in record.getMessage()
        assert not record.getMessage().startswith('Request attempt')
