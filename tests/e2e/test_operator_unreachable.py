"""The operator started while its API server cannot be reached: as kube-scheduler, it says why in
one line per failure (no traceback), answers /readyz 503 with the cause, keeps retrying, and
schedules once the API server comes up."""
from __future__ import annotations

import asyncio
import logging
import pathlib
import threading
from collections.abc import Iterator

import aiohttp
import pytest
import yaml

from kopfsched.emulator.server import FastKubernetesEmulator, write_kubeconfig
from kopfsched.kube.operator import Operator, OperatorOptions, StartupError
from tests.builders import make_node, make_pod
from tests.e2e.operator_harness import (
    PROFILES,
    eventually,
    free_port,
    node_of,
    post,
    profile,
    running_operator,
    serve_controller_kinds,
)

ROOT = pathlib.Path(__file__).parents[2]
PODS = '/api/v1/namespaces/default/pods'


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


class Proxy:
    """A TCP proxy to the emulator that can be cut (every connection dropped, nothing listening)
    and opened again on the same port: the API server going away and coming back."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.port = free_port()
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    async def open(self) -> None:
        self._server = await asyncio.start_server(self._serve, '127.0.0.1', self.port, reuse_address=True)

    async def cut(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        for writer in list(self._writers):
            writer.transport.abort()
        self._writers.clear()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection('127.0.0.1', self.upstream_port)
        except OSError:
            writer.transport.abort()
            return
        self._writers |= {writer, up_writer}

        async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            try:
                while data := await source.read(65536):
                    sink.write(data)
                    await sink.drain()
            except (OSError, asyncio.IncompleteReadError):
                pass
            finally:
                sink.transport.abort()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        self._writers -= {writer, up_writer}


async def test_an_api_server_that_goes_away_and_comes_back_is_watched_again_without_a_restart(
        emulator: FastKubernetesEmulator, http: aiohttp.ClientSession, tmp_path: pathlib.Path,
        caplog: pytest.LogCaptureFixture) -> None:
    proxy = Proxy(int(emulator.url.rsplit(':', 1)[1]))
    await proxy.open()
    url = f'http://127.0.0.1:{proxy.port}'
    kubeconfig = write_kubeconfig(tmp_path / 'proxied-kubeconfig', url=url)
    await post(http, '/api/v1/nodes', make_node('n1'))
    try:
        async with running_operator(kubeconfig, watch_max_backoff=1.0) as operator:
            caplog.set_level(logging.INFO)
            await proxy.cut()
            unreachable = f'cannot reach the API server at {url}: connection refused'
            await eventually(lambda: any(unreachable in r.getMessage() for r in caplog.records), timeout=15,
                             what='the failure logged')
            ready_while_away = operator.ready()
            await post(http, PODS, make_pod('meanwhile', scheduler_name='kopfsched'))
            await asyncio.sleep(1)
            await proxy.open()
            await eventually(lambda: node_of(emulator, 'meanwhile'), timeout=30, what='the pod bound')
            await eventually(operator.ready, timeout=10, what='ready again')
    finally:
        await proxy.cut()
    assert ready_while_away is False
    for record in caplog.records:
        assert record.exc_info is None, record.getMessage()
        assert 'ConnectionKey' not in record.getMessage()


async def test_discovery_failing_for_longer_than_kopfs_retries_is_retried_until_it_answers(
        emulator: FastKubernetesEmulator, http: aiohttp.ClientSession, kubeconfig: pathlib.Path,
        caplog: pytest.LogCaptureFixture) -> None:
    """kopf gives up after 9 attempts and its resource observer dies with it (the operator then
    lingered, deaf); 12 failures in a row are retried through, as kube-scheduler's discovery does."""
    emulator.fail_next('GET', r'^/apis$', status=503, message='the aggregator is restarting', times=12)
    await post(http, '/api/v1/nodes', make_node('n1'))
    async with running_operator(kubeconfig, watch_max_backoff=0.2):
        await post(http, PODS, make_pod('after', scheduler_name='kopfsched'))
        await eventually(lambda: node_of(emulator, 'after'), timeout=20, what='the pod bound')
    lines = [r.getMessage() for r in caplog.records if 'the aggregator is restarting' in r.getMessage()]
    assert len(lines) == 12
    assert lines[0] == 'GET /apis: the API server answered 503 the aggregator is restarting; retrying in 0.2s'
    assert all(r.exc_info is None for r in caplog.records)


async def test_kopf_losing_its_resource_observer_stops_the_operator_with_one_line_instead_of_lingering(
        emulator: FastKubernetesEmulator, http: aiohttp.ClientSession, kubeconfig: pathlib.Path) -> None:
    """kopf logs its observer's failure and goes on watching nothing: a scheduler that cannot
    watch must say so and exit (the kubelet restarts it), not wait for ever with /healthz ok."""
    emulator.fail_next('GET', r'^/apis$', status=404, message='no such thing', times=1)  # kopf does not retry 404
    options = OperatorOptions(kubeconfig=str(kubeconfig), leader_elect=False, metrics_port=None)
    async with Operator.connected(options) as operator:
        task = asyncio.create_task(operator.run(asyncio.Event()))
        with pytest.raises(StartupError) as raised:
            await asyncio.wait_for(task, timeout=20)
    assert str(raised.value) == "kopf's resource observer has failed: 404 no such thing"
