"""Running the real operator (kopf + kubernetes_asyncio over HTTP) in the test's loop, against
the emulator, and small helpers the operator tests share."""
from __future__ import annotations

import asyncio
import contextlib
import json
import pathlib
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import aiohttp

from kopfsched.emulator.resources import ResourceDef
from kopfsched.emulator.server import FastKubernetesEmulator
from kopfsched.kube.operator import Operator, OperatorOptions

T = TypeVar('T')

PROFILES = '/apis/kopfsched.dev/v1alpha1/schedulerprofiles'
MERGE = 'application/merge-patch+json'
CONTROLLER_KINDS = (  # watched for PodTopologySpread's defaulting; the emulator does not serve them by default
    ResourceDef(group='apps', version='v1', plural='replicasets', kind='ReplicaSet', namespaced=True),
    ResourceDef(group='apps', version='v1', plural='statefulsets', kind='StatefulSet', namespaced=True),
    ResourceDef(group='', version='v1', plural='replicationcontrollers', kind='ReplicationController',
                namespaced=True),
)


async def eventually(probe: Callable[[], T | Awaitable[T]], *, timeout: float = 10.0, what: str = '') -> T:
    """Poll `probe` until it returns something truthy; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = probe()
        if asyncio.iscoroutine(last):
            last = await last
        if last:
            return last
        await asyncio.sleep(0.05)
    raise AssertionError(f'timed out after {timeout}s waiting for {what or probe}; last: {last!r}')


@contextlib.asynccontextmanager
async def running_operator(kubeconfig: pathlib.Path, **overrides: Any) -> AsyncIterator[Operator]:
    """The operator, started and ready (initial listing done); stopped cleanly at the end."""
    options = OperatorOptions(kubeconfig=str(kubeconfig), leader_elect=False, metrics_port=0, metrics_host='127.0.0.1',
                              status_interval=0.2, identity='test-operator')
    for key, value in overrides.items():
        setattr(options, key, value)
    async with Operator.connected(options) as operator:
        stop = asyncio.Event()
        task = asyncio.create_task(operator.run(stop))
        try:
            await eventually(lambda: operator.ready() or task.done(), timeout=20, what='the initial listing')
            if task.done():
                task.result()
            if not options.leader_elect:
                await eventually(lambda: operator.leading, what='the scheduling loop')
            yield operator
        finally:
            stop.set()
            exit_code = await asyncio.wait_for(task, timeout=30)
            assert exit_code == 0, f'the operator exited with {exit_code}: {operator.failure}'


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(('127.0.0.1', 0))
        return int(probe.getsockname()[1])


def node_of(emulator: FastKubernetesEmulator, name: str) -> str | None:
    """The node a pod of namespace default is bound to, as the API has it."""
    return ((emulator.get_object('pods', 'default', name) or {}).get('spec') or {}).get('nodeName')


def binding_statuses(emulator: FastKubernetesEmulator, name: str) -> list[int]:
    """The status of every binding POST the API received for a pod of namespace default."""
    return [m.status for m in emulator.mutations('POST', rf'/pods/{name}/binding$')]


def events_about(emulator: FastKubernetesEmulator, name: str, reason: str) -> list[dict[str, Any]]:
    """The events.k8s.io Events about a pod with this reason."""
    return [e for e in emulator.list_objects('events', group='events.k8s.io')
            if e['regarding']['name'] == name and e['reason'] == reason]


def stop_failing(emulator: FastKubernetesEmulator, path_regex: str) -> None:
    """Drop what `fail_next(..., path_regex)` still has queued: the requests it matched are
    answered again. (The emulator has no public hook for this; the one place reaching in.)"""
    with emulator._guard:
        emulator._failures[:] = [f for f in emulator._failures if f.pattern.pattern != path_regex]


def serve_controller_kinds(emulator: FastKubernetesEmulator) -> None:
    for resource in CONTROLLER_KINDS:
        emulator.register(resource)


async def post(http: aiohttp.ClientSession, path: str, body: dict[str, Any]) -> dict[str, Any]:
    async with http.post(path, json=body) as response:
        payload = await response.json()
        assert response.status == 201, payload
        return payload


async def patch(http: aiohttp.ClientSession, path: str, body: dict[str, Any]) -> dict[str, Any]:
    async with http.patch(path, data=json.dumps(body), headers={'Content-Type': MERGE}) as response:
        payload = await response.json()
        assert response.status == 200, payload
        return payload


def profile(name: str, *, scheduler_name: str | None = None, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {'apiVersion': 'kopfsched.dev/v1alpha1', 'kind': 'SchedulerProfile',
                            'metadata': {'name': name}, 'spec': dict(spec)}
    if scheduler_name:
        body['spec']['schedulerName'] = scheduler_name
    return body


def scoring_strategy(kind: str) -> dict[str, Any]:
    """pluginConfig for NodeResourcesFit with the given scoring strategy type."""
    return {'name': 'NodeResourcesFit', 'args': {'scoringStrategy': {
        'type': kind, 'resources': [{'name': 'cpu', 'weight': 1}, {'name': 'memory', 'weight': 1}]}}}
