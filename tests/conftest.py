"""Fixtures shared by every room that talks to the in-process API emulator (tests/emulator,
tests/e2e, tests/sandbox): the emulator on 127.0.0.1, a kubeconfig pointing at it, and `http`,
a client session of it.

Options for one test or module:
- `@pytest.mark.emulator(history_size=3, ...)`: FastKubernetesEmulator's fields;
- `@pytest.mark.http(controller_kinds=..., crd=..., profiles=...)`: what `http` sets up before the
  test (default: the controller kinds served, the SchedulerProfile CRD installed and the
  `kopfsched` profile created, as after `kubectl apply -f crds/` and one profile).

The emulator and the operator are imported inside the fixtures, so rooms that never use them do
not import kopf.
"""
from __future__ import annotations

import pathlib
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    import aiohttp

    from kopfsched.emulator.server import FastKubernetesEmulator, RemoteEmulator

ROOT = pathlib.Path(__file__).parents[1]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line('markers', 'emulator(**options): options of the FastKubernetesEmulator of the test')
    # pytest-timeout registers it too; declared here so a run without the plugin does not warn.
    config.addinivalue_line('markers', 'timeout(seconds): the test\'s own limit (pytest-timeout)')
    config.addinivalue_line('markers', 'http(controller_kinds=True, crd=True, profiles=("kopfsched",)): '
                                       'what the `http` fixture sets up in the emulator')


@pytest.fixture
def emulator(request: pytest.FixtureRequest) -> Iterator[FastKubernetesEmulator]:
    """An emulator serving in its own thread and loop: the test's loop and blocking calls never stall it."""
    from kopfsched.emulator.server import EmulatorThread, FastKubernetesEmulator
    marker = request.node.get_closest_marker('emulator')
    with EmulatorThread(FastKubernetesEmulator(**(marker.kwargs if marker else {}))) as emulator:
        yield emulator


@pytest.fixture
def kubeconfig(emulator: FastKubernetesEmulator, tmp_path: pathlib.Path,
               monkeypatch: pytest.MonkeyPatch) -> pathlib.Path:
    from kopfsched.emulator.server import write_kubeconfig
    # kubectl caches discovery per host:port under ~/.kube/cache: keep it per test.
    monkeypatch.setenv('KUBECACHEDIR', str(tmp_path / 'kube-cache'))
    return write_kubeconfig(tmp_path / 'kubeconfig', url=emulator.url)


@pytest.fixture
def remote_emulator() -> Iterator[RemoteEmulator]:
    """An emulator in a subprocess (its own GIL): the fastest for an operator running in the test process."""
    from kopfsched.emulator.server import emulator_process
    with emulator_process() as remote:
        yield remote


@pytest.fixture
def remote_kubeconfig(remote_emulator: RemoteEmulator, tmp_path: pathlib.Path) -> pathlib.Path:
    from kopfsched.emulator.server import write_kubeconfig
    return write_kubeconfig(tmp_path / 'remote-kubeconfig', url=remote_emulator.url)


@pytest.fixture
async def http(request: pytest.FixtureRequest,
               emulator: FastKubernetesEmulator) -> AsyncIterator[aiohttp.ClientSession]:
    """A client of the emulator, set up as the test's `http` marker says (see the module docstring)."""
    import aiohttp
    import yaml

    from tests.e2e.operator_harness import PROFILES, post, profile, serve_controller_kinds
    marker = request.node.get_closest_marker('http')
    options = {'controller_kinds': True, 'crd': True, 'profiles': ('kopfsched',)}
    unknown = set(marker.kwargs if marker else ()) - set(options)
    assert not unknown, f'the http marker has no option {sorted(unknown)}'
    options.update(marker.kwargs if marker else {})
    if options['controller_kinds']:
        serve_controller_kinds(emulator)
    async with aiohttp.ClientSession(emulator.url) as session:
        if options['crd']:
            await post(session, '/apis/apiextensions.k8s.io/v1/customresourcedefinitions',
                       yaml.safe_load((ROOT / 'crds' / 'schedulerprofile.yaml').read_text()))
        for name in options['profiles']:
            await post(session, PROFILES, profile(name))
        yield session
