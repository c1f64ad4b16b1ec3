"""The operator on user errors and transient API failures, end to end against the emulator."""
from __future__ import annotations

import asyncio
import pathlib
import threading
from typing import Any

import aiohttp
import kopf
import pytest

from kopfsched.emulator.server import FastKubernetesEmulator
from kopfsched.kube.handlers import KINDS_BY_RESOURCE, build_registry, operator_settings
from kopfsched.kube.kopf_thread import STRAGGLERS_CANCELLED, KopfThread
from kopfsched.kube.leader import LeaseConfig
from kopfsched.kube.operator import Operator, OperatorOptions, load_configuration
from kopfsched.kube.watches import WatchHealth
from kopfsched.kube.watches import install as install_watch_relay
from tests.builders import make_node, make_pod
from tests.e2e.operator_harness import (
    PROFILES,
    binding_statuses,
    eventually,
    post,
    profile,
    running_operator,
    stop_failing,
)

PODS = '/api/v1/namespaces/default/pods'


async def test_a_refused_initial_listing_is_retried_and_the_operator_stays_unready_meanwhile(
        emulator: FastKubernetesEmulator, kubeconfig: pathlib.Path, caplog: pytest.LogCaptureFixture) -> None:
    """E.g. the ClusterRole is applied after the Deployment: 403 on the first LISTs. As kube-scheduler's
    reflectors, the operator says why and keeps listing (kopf retries after 1 s, 1 s, 2 s...), not
    ready meanwhile, and serves once allowed, without a restart."""
    emulator.fail_next('GET', r'/nodes\?', status=403, message='forbidden by RBAC', times=2)
    options = OperatorOptions(kubeconfig=str(kubeconfig), leader_elect=False, metrics_port=None)
    async with Operator.connected(options) as operator:
        stop = asyncio.Event()
        task = asyncio.create_task(operator.run(stop))
        await eventually(lambda: any('forbidden by RBAC' in r.getMessage() for r in caplog.records),
                         what='the 403 logged')
        unready = operator.ready()
        await eventually(lambda: operator.ready() or task.done(), timeout=20, what='ready once allowed')
        stop.set()
        code = await asyncio.wait_for(task, timeout=30)
    assert (unready, code) == (False, 0)


async def test_a_binding_in_flight_when_the_lease_is_lost_does_not_bind(
        emulator: FastKubernetesEmulator, kubeconfig: pathlib.Path, http: aiohttp.ClientSession) -> None:
    """Another replica takes over once the lease expires: a retry after that must not bind."""
    await post(http, '/api/v1/nodes', make_node('node-0'))
    lease = LeaseConfig(name='kopfsched', namespace='default', lease_duration=0.5, renew_deadline=0.3,
                        retry_period=0.05)
    options = OperatorOptions(kubeconfig=str(kubeconfig), leader_elect=True, lease=lease, identity='a',
                              metrics_port=None, status_interval=0.2)
    async with Operator.connected(options) as operator:
        task = asyncio.create_task(operator.run(asyncio.Event()))
        await eventually(lambda: operator.leading or task.done(), what='a leads')
        # The binding fails (and its client retries) until the lease is lost; from then on the API
        # would accept it, so only the lost lease can keep a retry from binding.
        emulator.fail_next('POST', r'/pods/late/binding$', status=500, times=1_000_000)
        await post(http, PODS, make_pod('late', scheduler_name='kopfsched'))
        await eventually(lambda: binding_statuses(emulator, 'late'), what='the binding in flight')
        emulator.fail_next('*', r'/leases/kopfsched', status=500, times=1_000_000)
        await eventually(lambda: not operator.leading or task.done(), what='the lease lost')
        stop_failing(emulator, r'/pods/late/binding$')
        code = await asyncio.wait_for(task, timeout=20)
    assert (code, operator.failure) == (1, 'leader election lost')
    assert 201 not in binding_statuses(emulator, 'late')
    assert (emulator.get_object('pods', 'default', 'late') or {})['spec'].get('nodeName') is None


@pytest.mark.emulator(history_size=3)
async def test_a_profile_deleted_while_the_watch_was_away_stops_being_served(
        emulator: FastKubernetesEmulator, kubeconfig: pathlib.Path, http: aiohttp.ClientSession) -> None:
    """kopf relists after 410 Gone without a DELETED event: the scheduler name must not stay served."""
    await post(http, PROFILES, profile('doomed', scheduler_name='doomed'))
    async with running_operator(kubeconfig) as operator:
        await eventually(lambda: operator.profiles.serves('doomed'), what='doomed served')

        emulator.vanish_while_watches_are_away(('schedulerprofiles', None, 'doomed'), group='kopfsched.dev')
        await post(http, PROFILES, profile('later', scheduler_name='later'))
        await eventually(lambda: operator.profiles.serves('later'), what='the relist seen')
        await eventually(lambda: not operator.profiles.serves('doomed'), what='doomed no longer served')
        crs = sorted(operator.profiles.crs)
    assert crs == ['kopfsched', 'later']


def profile_status(emulator: FastKubernetesEmulator, name: str) -> dict[str, Any]:
    obj = emulator.get_object('schedulerprofiles', None, name, group='kopfsched.dev') or {}
    return obj.get('status') or {}


async def test_a_status_write_that_fails_does_not_hold_back_the_other_profiles(
        emulator: FastKubernetesEmulator, kubeconfig: pathlib.Path, http: aiohttp.ClientSession) -> None:
    await post(http, PROFILES, profile('a-first', scheduler_name='a-first'))
    await post(http, PROFILES, profile('z-last', scheduler_name='z-last'))
    emulator.fail_next('PATCH', r'/schedulerprofiles/(a-first|kopfsched)/status', status=422, times=1_000_000,
                       message='status is invalid')
    async with running_operator(kubeconfig) as operator:
        await eventually(lambda: profile_status(emulator, 'z-last').get('conditions'), what='z-last status')
        ready = operator.ready()
    assert (profile_status(emulator, 'a-first'), ready) == ({}, True)


@pytest.mark.parametrize('swallowed', [0, 2], ids=['cancellable', 'swallows-two-cancellations'])
async def test_stopping_kopf_cancels_the_tasks_it_leaves_behind_instead_of_waiting_for_them(
        kubeconfig: pathlib.Path, http: aiohttp.ClientSession, swallowed: int) -> None:
    """kopf waits up to 5 s for sub-tasks still running once its root tasks ended (its API
    discovery leaves such tasks when stopped during start-up). KopfThread cancels them, again
    and again while kopf has not stopped: a task may swallow a cancellation (asyncio.timeout
    turns one that meets its own expiry into TimeoutError, and kopf's watch then reconnects)."""
    await post(http, '/api/v1/nodes', make_node('node-0'))
    configuration = await load_configuration(str(kubeconfig))
    watching = threading.Event()  # kopf is past its start-up: a watch delivered the node

    class Sink:
        kind_of = staticmethod(KINDS_BY_RESOURCE.get)

        def event(self, kind: str, type: str | None, obj: dict[str, Any]) -> None:
            if kind == 'Node':
                watching.set()

        served = listing = listed = stopped = staticmethod(lambda *_: None)

    install_watch_relay()
    registry = build_registry(configuration=configuration)
    started = threading.Event()
    outcome: list[str] = []

    async def straggler() -> None:
        for attempt in range(swallowed + 1):
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError as cancelled:
                outcome.append(str(cancelled.args[0] if cancelled.args else ''))
                if attempt == swallowed:
                    raise

    held: list[asyncio.Task[None]] = []  # a strong reference: asyncio keeps only weak ones

    @kopf.on.startup(registry=registry)
    async def spawn_a_straggler(**_: Any) -> None:
        held.append(asyncio.get_running_loop().create_task(straggler()))
        started.set()

    thread = KopfThread(registry, settings=operator_settings(watch_health=WatchHealth(), watch_sink=Sink()))
    thread.start()
    assert await asyncio.to_thread(started.wait, 20) and await asyncio.to_thread(watching.wait, 20)
    await thread.stop(timeout=20)
    assert not thread.alive
    assert outcome == [STRAGGLERS_CANCELLED] * (swallowed + 1)  # ours, not kopf's own after its 5 s
