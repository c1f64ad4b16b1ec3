"""What a real kube-apiserver does that a plain emulator does not, and the operator surviving it:
API Priority and Fairness throttling, graceful deletion, expiring list continuations, binding
details. Each behaviour is switched on in the emulator for the test."""
from __future__ import annotations

import pathlib
from collections.abc import AsyncIterator

import aiohttp
import pytest
import yaml

from kopfsched.emulator.server import FastKubernetesEmulator
from tests.builders import make_node, make_pod
from tests.e2e.operator_harness import PROFILES, eventually, post, profile, running_operator, serve_controller_kinds

ROOT = pathlib.Path(__file__).parents[2]
PODS = '/api/v1/namespaces/default/pods'


@pytest.fixture
async def http(emulator: FastKubernetesEmulator) -> AsyncIterator[aiohttp.ClientSession]:
    serve_controller_kinds(emulator)
    async with aiohttp.ClientSession(emulator.url) as session:
        await post(session, '/apis/apiextensions.k8s.io/v1/customresourcedefinitions',
                   yaml.safe_load((ROOT / 'crds' / 'schedulerprofile.yaml').read_text()))
        await post(session, PROFILES, profile('kopfsched'))
        yield session


def node_of(emulator: FastKubernetesEmulator, name: str) -> str | None:
    return ((emulator.get_object('pods', 'default', name) or {}).get('spec') or {}).get('nodeName')


def binding_statuses(emulator: FastKubernetesEmulator, name: str) -> list[int]:
    return [m.status for m in emulator.mutations('POST', rf'/pods/{name}/binding$')]


# -- API Priority and Fairness ---------------------------------------------------------------


async def test_binds_throttled_with_retry_after_wait_as_asked_and_succeed(
        emulator: FastKubernetesEmulator, kubeconfig: pathlib.Path, http: aiohttp.ClientSession) -> None:
    """3.5 s of 429 + Retry-After: 1 on binds: one call retries each second until it binds, no error
    (a fixed ~3 s of quick retries would give up, fail the attempt and send eight binds)."""
    await post(http, '/api/v1/nodes', make_node('node-0'))
    async with running_operator(kubeconfig) as operator:
        emulator.throttle(3.5, method='POST', path_regex=r'/binding$', retry_after=1)
        await post(http, PODS, make_pod('throttled', scheduler_name='kopfsched'))
        await eventually(lambda: node_of(emulator, 'throttled'), timeout=15, what='bound after the throttling')
        stats = operator.stats.of('kopfsched')
    statuses = binding_statuses(emulator, 'throttled')
    assert statuses[-1] == 201 and set(statuses[:-1]) == {429} and 4 <= len(statuses) <= 5
    assert (stats.scheduled, stats.errors) == (1, 0)
