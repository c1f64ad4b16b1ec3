"""The secure port against the real kube-apiserver: `kopfsched run` as installed (its
ServiceAccount, the ClusterRole of manifests/), scraped with ServiceAccount tokens that the API
server authenticates (TokenReview) and authorizes (SubjectAccessReview) against RBAC:
no token and a bad token 401, a token without the RBAC 403, a token bound to
manifests/optional/prometheus-clusterrole.yaml's ClusterRole 200; the health paths open; the
reviews cached; the dashboard's port not listening beyond 127.0.0.1."""
from __future__ import annotations

import json
import pathlib
import socket
import ssl
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from tests.cluster.helpers import OPERATOR_USER
from tests.cluster.operator_process import OperatorProcess
from tests.kubeenv.control_plane import ControlPlane, free_port

ROOT = pathlib.Path(__file__).parents[2]
PROMETHEUS_RBAC = ROOT / 'manifests' / 'optional' / 'prometheus-clusterrole.yaml'
UNAUTHORIZED = {'kind': 'Status', 'apiVersion': 'v1', 'metadata': {}, 'status': 'Failure',
                'message': 'Unauthorized', 'reason': 'Unauthorized', 'code': 401}


class Scraper:
    """HTTPS to the replica's secure port, verifying its self-signed certificate (--cert-dir)."""

    def __init__(self, port: int, cert: pathlib.Path) -> None:
        self.url = f'https://127.0.0.1:{port}'
        self.context = ssl.create_default_context(cafile=str(cert))

    def get(self, path: str, token: str | None = None) -> tuple[int, str]:
        headers = {'Authorization': f'Bearer {token}'} if token is not None else {}
        request = urllib.request.Request(self.url + path, headers=headers)
        try:
            with urllib.request.urlopen(request, context=self.context, timeout=10) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode()


@pytest.fixture
def secure_operator(cluster: ControlPlane, operator_kubeconfig: pathlib.Path) -> Iterator[tuple[OperatorProcess,
                                                                                                    Scraper]]:
    port = free_port()
    cert_dir = cluster.workdir / f'serving-{port}'
    replica = OperatorProcess(cluster, operator_kubeconfig, name='kopfsched-secure')
    replica.argv += [f'--secure-port={port}', '--bind-address=127.0.0.1', f'--cert-dir={cert_dir}']
    replica.start()
    try:
        replica.wait_ready()
        yield replica, Scraper(port, cert_dir / 'kopfsched.crt')
    finally:
        assert replica.stop() == 0, replica.last_lines()


@pytest.fixture
def tokens(cluster: ControlPlane, namespace: str) -> Iterator[dict[str, str]]:
    """Tokens of two ServiceAccounts of the test's namespace: `allowed` is bound to the
    shipped Prometheus ClusterRole, `denied` to nothing."""
    applied = cluster.kubectl('apply', '-f', str(PROMETHEUS_RBAC))
    assert applied.returncode == 0, applied.stderr
    for name in ('allowed', 'denied'):
        cluster.post(f'/api/v1/namespaces/{namespace}/serviceaccounts',
                     {'apiVersion': 'v1', 'kind': 'ServiceAccount', 'metadata': {'name': name}})
    binding = f'kopfsched-metrics-{namespace}'
    cluster.post('/apis/rbac.authorization.k8s.io/v1/clusterrolebindings', {
        'apiVersion': 'rbac.authorization.k8s.io/v1', 'kind': 'ClusterRoleBinding', 'metadata': {'name': binding},
        'roleRef': {'apiGroup': 'rbac.authorization.k8s.io', 'kind': 'ClusterRole', 'name': 'kopfsched-metrics-reader'},
        'subjects': [{'kind': 'ServiceAccount', 'name': 'allowed', 'namespace': namespace}]})
    yield {name: cluster.service_account_token(namespace, name) for name in ('allowed', 'denied')}
    cluster.delete(f'/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{binding}')


def reviews(cluster: ControlPlane) -> dict[str, int]:
    """How many TokenReviews and SubjectAccessReviews kopfsched's ServiceAccount created so far."""
    return {kind: len(cluster.audit(user=OPERATOR_USER, verb='create', resource=kind))
            for kind in ('tokenreviews', 'subjectaccessreviews')}


def test_metrics_need_a_token_the_api_server_authenticates_and_authorizes(cluster, secure_operator, tokens,
                                                                          namespace):
    _, scraper = secure_operator
    assert scraper.get('/metrics') == (401, json.dumps(UNAUTHORIZED))
    assert scraper.get('/metrics', 'not-a-token') == (401, json.dumps(UNAUTHORIZED))
    status, body = scraper.get('/metrics', tokens['denied'])
    assert status == 403
    assert json.loads(body)['message'].startswith(
        f'forbidden: User "system:serviceaccount:{namespace}:denied" cannot get path "/metrics"')
    status, body = scraper.get('/metrics', tokens['allowed'])
    assert status == 200
    assert 'scheduler_schedule_attempts_total' in body


def test_the_prometheus_role_opens_metrics_only(secure_operator, tokens):
    """/debug/* names pods: the shipped role does not grant it."""
    _, scraper = secure_operator
    for path in ('/debug/pending', '/debug/overview', '/'):
        assert scraper.get(path, tokens['allowed'])[0] == 403, path


@pytest.mark.parametrize('path', ['/healthz', '/readyz', '/livez'])
def test_the_health_paths_are_open(secure_operator, path):
    _, scraper = secure_operator
    assert scraper.get(path) == (200, 'ok')


def test_the_reviews_are_the_operators_own_and_cached(cluster, secure_operator, tokens):
    _, scraper = secure_operator
    assert scraper.get('/metrics', tokens['allowed'])[0] == 200
    first = reviews(cluster)
    assert first['tokenreviews'] >= 1 and first['subjectaccessreviews'] >= 1
    for _ in range(5):  # well within the 10 s the answers are kept
        assert scraper.get('/metrics', tokens['allowed'])[0] == 200
    assert reviews(cluster) == first


def test_the_dashboard_listens_on_loopback_only(secure_operator):
    replica, _ = secure_operator
    assert replica.get('/')[0] == 200  # the dashboard, on 127.0.0.1
    listening = {(address, port) for address, port in _listening_tcp()}
    assert ('127.0.0.1', replica.port) in listening
    assert not any(port == replica.port and address != '127.0.0.1' for address, port in listening)
    for address in _other_addresses():
        with pytest.raises(OSError), socket.create_connection((address, replica.port), timeout=2):
            pass


def _listening_tcp() -> Iterator[tuple[str, int]]:
    """(address, port) of every listening IPv4 socket, from /proc/net/tcp."""
    for line in pathlib.Path('/proc/net/tcp').read_text().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        if state == '0A':  # LISTEN
            address, port = local.split(':')
            yield socket.inet_ntoa(bytes.fromhex(address)[::-1]), int(port, 16)


def _other_addresses() -> list[str]:
    """This machine's non-loopback IPv4 addresses (none on a loopback-only sandbox)."""
    try:
        infos = socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET)
    except OSError:
        return []
    return sorted({str(info[4][0]) for info in infos if not str(info[4][0]).startswith('127.')})
