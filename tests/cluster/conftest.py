"""Fixtures of the tests that run against the real control plane (tests/kubeenv): upstream's
etcd, kube-apiserver, kube-controller-manager and kwok, built from Go modules.

The programs are built once per source hash when these tests are collected (outside any
test's timeout; a cold build prints its progress). Without Go they are skipped with one
line saying what to install, except under CI (CI=true), where they must run.

`cluster` is one control plane for the session with kopfsched installed as users install it
(`kubectl apply -f crds/ -f manifests/`); each test works in a namespace of its own and
removes the nodes it made. Tests that change the control plane itself (faults, flags)
start their own with `control_plane()`.
"""
from __future__ import annotations

import contextlib
import itertools
import os
import pathlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.cluster.helpers import create_namespace, install_kopfsched
from tests.kubeenv.build import GO_INSTALL_HINT, Binaries, BuildError, build, go_command
from tests.kubeenv.control_plane import ControlPlane, Options

ROOT = pathlib.Path(__file__).parents[2]
HERE = pathlib.Path(__file__).parent
OPERATOR_NAMESPACE, OPERATOR_ACCOUNT = 'kopfsched-system', 'kopfsched'

StartControlPlane = Callable[..., contextlib.AbstractContextManager[ControlPlane]]

_built: Binaries | str | None = None
"""The programs, or why there are none (a skip or failure message)."""


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line('markers', 'last_in_session: run after every other test (reads what they did)')


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: 1 if item.get_closest_marker('last_in_session') else 0)


def pytest_collection_finish(session: pytest.Session) -> None:
    global _built
    if not any(HERE in pathlib.Path(item.path).parents for item in session.items):
        return
    if go_command() is None:
        _built = f'the real-control-plane tests need Go: {GO_INSTALL_HINT}'
        return
    try:
        _built = build()
    except BuildError as error:
        _built = str(error)


@pytest.fixture(scope='session')
def kubeenv_binaries() -> Binaries:
    if isinstance(_built, Binaries):
        return _built
    if _built is None:  # collected without the hook (e.g. a single test by node id)
        return build()
    if os.environ.get('CI') == 'true' or go_command() is not None:
        pytest.fail(_built, pytrace=False)  # under CI, or a failed build: never a silent skip
    pytest.skip(_built)


@pytest.fixture(scope='session')
def control_plane(kubeenv_binaries: Binaries, tmp_path_factory: pytest.TempPathFactory) -> StartControlPlane:
    """A factory: `with control_plane(Options(...)) as cluster:` a control plane of the test's own."""
    counter = itertools.count()

    @contextlib.contextmanager
    def start(options: Options | None = None) -> Iterator[ControlPlane]:
        workdir = tmp_path_factory.mktemp(f'kubeenv-{next(counter)}')
        with ControlPlane(workdir, options=options, binaries=kubeenv_binaries) as cluster:
            yield cluster
            cluster.check()
    return start


@pytest.fixture(scope='session')
def cluster(control_plane: StartControlPlane) -> Iterator[ControlPlane]:
    """The session's control plane, kopfsched's CRDs and manifests applied with kubectl."""
    with control_plane() as shared:
        install_kopfsched(shared)
        yield shared


@pytest.fixture
def namespace(cluster: ControlPlane, nodes: Callable[..., dict[str, Any]],
              request: pytest.FixtureRequest) -> Iterator[str]:
    """A namespace for this test alone, deleted (with its pods) afterwards: before the test's
    nodes, whose kwok kubelet completes the pods' graceful deletion."""
    name = f't{next(_namespaces)}-{request.node.name[:40]}'.lower().replace('_', '-').strip('-')
    name = ''.join(c for c in name if c.isalnum() or c == '-')[:63].rstrip('-')
    create_namespace(cluster, name)
    yield name
    cluster.delete(f'/api/v1/namespaces/{name}')
    # Gone before the next test: its pods would otherwise still be pending for the next operator.
    cluster.wait_for(lambda: cluster.get(f'/api/v1/namespaces/{name}') is None, timeout=90,
                     what=f'namespace {name} deleted', interval=0.5)


_namespaces = itertools.count()


@pytest.fixture
def nodes(cluster: ControlPlane) -> Iterator[Callable[..., dict[str, Any]]]:
    """`nodes(make_node(...))` creates a node (kwok makes it Ready); every one is deleted after."""
    made: list[str] = []

    def create(node: dict[str, Any]) -> dict[str, Any]:
        created = cluster.post('/api/v1/nodes', node)
        made.append(created['metadata']['name'])
        return created
    yield create
    for name in made:
        cluster.delete(f'/api/v1/nodes/{name}')
    cluster.wait_for(lambda: not any(cluster.get(f'/api/v1/nodes/{name}') for name in made),
                     timeout=30, what='the test\'s nodes to be gone')


@pytest.fixture
def operator_kubeconfig(cluster: ControlPlane) -> pathlib.Path:
    """kopfsched's ServiceAccount from manifests/, with a bound token: the operator runs with
    the RBAC users install, never as the admin."""
    return cluster.kubeconfig_for_service_account(OPERATOR_NAMESPACE, OPERATOR_ACCOUNT)
