"""Fixtures of the end-to-end tests: an API emulator on 127.0.0.1 and a kubeconfig pointing at it.

Options for one test: `@pytest.mark.emulator(history_size=3, ...)` (FastKubernetesEmulator's fields).
"""
from __future__ import annotations

import pathlib
from collections.abc import AsyncIterator, Iterator

import aiohttp
import pytest
import yaml

from kopfsched.emulator.server import (
    EmulatorThread,
    FastKubernetesEmulator,
    RemoteEmulator,
    emulator_process,
    write_kubeconfig,
)
from tests.e2e.operator_harness import PROFILES, post, profile, serve_controller_kinds

ROOT = pathlib.Path(__file__).parents[2]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line('markers', 'emulator(**options): options of the FastKubernetesEmulator of the test')


@pytest.fixture
def emulator(request: pytest.FixtureRequest) -> Iterator[FastKubernetesEmulator]:
    """An emulator serving in its own thread and loop: the test's loop and blocking calls never stall it."""
    marker = request.node.get_closest_marker('emulator')
    with EmulatorThread(FastKubernetesEmulator(**(marker.kwargs if marker else {}))) as emulator:
        yield emulator


@pytest.fixture
def kubeconfig(emulator: FastKubernetesEmulator, tmp_path: pathlib.Path,
               monkeypatch: pytest.MonkeyPatch) -> pathlib.Path:
    # kubectl caches discovery per host:port under ~/.kube/cache: keep it per test.
    monkeypatch.setenv('KUBECACHEDIR', str(tmp_path / 'kube-cache'))
    return write_kubeconfig(tmp_path / 'kubeconfig', url=emulator.url)


@pytest.fixture
def remote_emulator() -> Iterator[RemoteEmulator]:
    """An emulator in a subprocess (its own GIL): the fastest for an operator running in the test process."""
    with emulator_process() as remote:
        yield remote


@pytest.fixture
def remote_kubeconfig(remote_emulator: RemoteEmulator, tmp_path: pathlib.Path) -> pathlib.Path:
    return write_kubeconfig(tmp_path / 'remote-kubeconfig', url=remote_emulator.url)


@pytest.fixture
async def http(emulator: FastKubernetesEmulator) -> AsyncIterator[aiohttp.ClientSession]:
    """A client of the emulator with the controller kinds served, the SchedulerProfile CRD installed
    and the `kopfsched` profile created, as after `kubectl apply -f crds/` and one profile. Modules
    that need another starting point define their own `http`."""
    serve_controller_kinds(emulator)
    async with aiohttp.ClientSession(emulator.url) as session:
        await post(session, '/apis/apiextensions.k8s.io/v1/customresourcedefinitions',
                   yaml.safe_load((ROOT / 'crds' / 'schedulerprofile.yaml').read_text()))
        await post(session, PROFILES, profile('kopfsched'))
        yield session
