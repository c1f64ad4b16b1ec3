"""Faults a real control plane produces, each on a control plane of its own, each under a burst
of pods: the API server killed and restarted, etcd compacted under a watch (410 Gone and a
relist), APF rejecting requests (429 with Retry-After), a node deleted while pods are bound
to it, and watches cut by the server's request timeout.

After each: no pod lost, none bound twice, no node holding more pods than it allows, and
the operator ready again within READY_AGAIN seconds of the fault ending."""
from __future__ import annotations

import collections
import contextlib
import datetime
import pathlib
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kopfsched.testing import make_node, make_pod
from tests.cluster.conftest import OPERATOR_ACCOUNT, OPERATOR_NAMESPACE, StartControlPlane
from tests.cluster.helpers import OPERATOR_USER, create_namespace, install_kopfsched
from tests.cluster.operator_process import OperatorProcess, running_operator
from tests.kubeenv.control_plane import ControlPlane, Options

READY_AGAIN = 30.0
"""Seconds within which the operator's /readyz is 200 again after a fault ends."""
NAMESPACE = 'burst'
PODS_PER_NODE = 10
WATCHES_CUT = 15.0
"""Seconds, after the pods are bound, within which the audit log shows three pod watches ended."""


@pytest.fixture
def installed(control_plane: StartControlPlane) -> Callable[..., contextlib.AbstractContextManager[Installed]]:
    """`with installed(**Options fields) as (cluster, kubeconfig):` a control plane of the test's
    own, kopfsched installed from crds/ and manifests/, the `burst` namespace made, and the
    operator's ServiceAccount kubeconfig."""
    @contextlib.contextmanager
    def start(**options: Any) -> Iterator[Installed]:
        with control_plane(Options(**options)) as cluster:
            install_kopfsched(cluster)
            create_namespace(cluster, NAMESPACE)
            yield cluster, cluster.kubeconfig_for_service_account(OPERATOR_NAMESPACE, OPERATOR_ACCOUNT)
    return start


Installed = tuple[ControlPlane, pathlib.Path]


def add_nodes(cluster: ControlPlane, count: int, prefix: str = 'n') -> list[str]:
    names = [f'{prefix}-{i}' for i in range(count)]
    for name in names:
        cluster.post('/api/v1/nodes', make_node(name, cpu='4', pods=PODS_PER_NODE))
    return names


def create_burst(cluster: ControlPlane, count: int, prefix: str = 'p') -> list[str]:
    names = [f'{prefix}-{i}' for i in range(count)]
    for name in names:
        cluster.post(f'/api/v1/namespaces/{NAMESPACE}/pods',
                     make_pod(name, NAMESPACE, scheduler_name='kopfsched', requests={'cpu': '10m'}))
    return names


def bound(cluster: ControlPlane) -> dict[str, str]:
    items = cluster.get(f'/api/v1/namespaces/{NAMESPACE}/pods')['items']
    return {p['metadata']['name']: p['spec']['nodeName'] for p in items if p['spec'].get('nodeName')}


def assert_each_bound_once_and_no_node_overcommitted(cluster: ControlPlane, pods: list[str], *,
                                                     unaudited: int = 0) -> None:
    """Every pod bound, by one accepted binding each; `unaudited`: how many bindings may have
    been committed by an API server killed before it wrote their audit entry."""
    placed = bound(cluster)
    assert sorted(placed) == sorted(pods), f'not bound: {sorted(set(pods) - set(placed))}'
    accepted = collections.Counter(e['objectRef']['name'] for e in cluster.audit(
        verb='create', resource='pods', subresource='binding', namespace=NAMESPACE)
        if e['responseStatus']['code'] == 201)
    assert set(accepted) <= set(pods) and max(accepted.values()) == 1, 'a pod bound twice'
    assert len(set(pods) - set(accepted)) <= unaudited, sorted(set(pods) - set(accepted))
    per_node = collections.Counter(placed.values())
    assert max(per_node.values()) <= PODS_PER_NODE, per_node


def wait_bound(cluster: ControlPlane, pods: list[str], replica: OperatorProcess, *, timeout: float = 90) -> None:
    def done() -> bool:
        replica.check()
        return len(bound(cluster)) == len(pods)
    cluster.wait_for(done, timeout=timeout, what=f'{len(pods)} pods bound', interval=0.5)


def ready_within(replica: OperatorProcess, seconds: float) -> float:
    """Seconds until the replica's /readyz is 200; fails past `seconds`."""
    started = time.monotonic()
    replica.cluster.wait_for(replica.ready, timeout=seconds, what=f'{replica.name} ready again')
    return time.monotonic() - started


def test_the_api_server_killed_and_restarted_mid_burst(installed) -> None:
    with installed() as (cluster, kubeconfig):
        add_nodes(cluster, 6)
        with running_operator(cluster, kubeconfig) as replica:
            first = create_burst(cluster, 30, 'a')
            cluster.wait_for(lambda: len(bound(cluster)) >= 5, timeout=30, what='the burst under way')
            cluster.kill('kube-apiserver')
            time.sleep(2)  # down for a while: the operator's watches and binds fail meanwhile
            cluster.restart('kube-apiserver')
            ready_within(replica, READY_AGAIN)
            second = create_burst(cluster, 20, 'b')
            wait_bound(cluster, first + second, replica)
        # A binding the killed server committed but never answered: the operator's retry got 409
        # (already bound), and no audit entry says 201.
        assert_each_bound_once_and_no_node_overcommitted(cluster, first + second, unaudited=2)


def test_etcd_compacted_under_a_watch_gives_410_and_a_relist(installed) -> None:
    # Without the watch cache every watch reads etcd; watches cut every 2-4 s resume from the
    # last resourceVersion they saw, which the compaction has removed.
    with installed(apiserver_flags={'watch-cache': 'false', 'min-request-timeout': '2'}) as (cluster, kubeconfig):
        add_nodes(cluster, 4)
        with running_operator(cluster, kubeconfig) as replica:
            first = create_burst(cluster, 10, 'a')
            wait_bound(cluster, first, replica)
            for i in range(5):  # revisions the pod watch does not see
                cluster.post(f'/api/v1/namespaces/{NAMESPACE}/configmaps', {
                    'apiVersion': 'v1', 'kind': 'ConfigMap', 'metadata': {'name': f'c{i}'}})
            compacted_at = time.time()
            cluster.compact_etcd()
            # The next cut watch resumes from a compacted revision: etcd answers 410 Gone
            # inside the stream, and the operator lists pods anew.
            cluster.wait_for(lambda: _listed_after(cluster, 'pods', compacted_at), timeout=30,
                             what='the operator relisting pods after the compaction')
            second = create_burst(cluster, 10, 'b')
            wait_bound(cluster, first + second, replica)
            assert ready_within(replica, READY_AGAIN) < READY_AGAIN
        assert_each_bound_once_and_no_node_overcommitted(cluster, first + second)


def _listed_after(cluster: ControlPlane, resource: str, moment: float) -> bool:
    return any(_seconds(e['requestReceivedTimestamp']) > moment
               for e in cluster.audit(user=OPERATOR_USER, verb='list', resource=resource))


def test_apf_rejections_are_retried_after_retry_after(installed) -> None:
    # A level's seats are ceil(server concurrency x its shares / every level's shares): at the
    # default 600 the level below would get 3, and a fast start-up may never hold 4 at once.
    with installed(apiserver_flags={'max-requests-inflight': '100',
                                    'max-mutating-requests-inflight': '50'}) as (cluster, kubeconfig):
        add_nodes(cluster, 4)
        # One seat and no queue for every request of kopfsched's: APF answers 429 when it is
        # taken (the start-up's concurrent LISTs, then binds and Events under the burst).
        cluster.post('/apis/flowcontrol.apiserver.k8s.io/v1/prioritylevelconfigurations', {
            'apiVersion': 'flowcontrol.apiserver.k8s.io/v1', 'kind': 'PriorityLevelConfiguration',
            'metadata': {'name': 'kubeenv-tiny'},
            'spec': {'type': 'Limited', 'limited': {'nominalConcurrencyShares': 1, 'lendablePercent': 0,
                                                    'limitResponse': {'type': 'Reject'}}}})
        cluster.post('/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas', {
            'apiVersion': 'flowcontrol.apiserver.k8s.io/v1', 'kind': 'FlowSchema',
            'metadata': {'name': 'kubeenv-tiny'},
            'spec': {'priorityLevelConfiguration': {'name': 'kubeenv-tiny'}, 'matchingPrecedence': 100,
                     'rules': [{'subjects': [{'kind': 'ServiceAccount', 'serviceAccount': {
                         'name': OPERATOR_ACCOUNT, 'namespace': OPERATOR_NAMESPACE}}],
                         'resourceRules': [{'verbs': ['*'], 'apiGroups': ['*'],
                                            'resources': ['*'], 'namespaces': ['*'], 'clusterScope': True}]}]}})
        with running_operator(cluster, kubeconfig) as replica:
            pods = create_burst(cluster, 40)
            wait_bound(cluster, pods, replica, timeout=120)
        rejected = [e for e in cluster.audit(user=OPERATOR_USER) if e['responseStatus']['code'] == 429]
        assert rejected, 'APF rejected nothing: the test provoked no 429'
        assert_each_bound_once_and_no_node_overcommitted(cluster, pods)


def test_a_node_deleted_while_pods_are_bound_to_it(installed) -> None:
    with installed() as (cluster, kubeconfig):
        names = add_nodes(cluster, 5)
        with running_operator(cluster, kubeconfig) as replica:
            pods = create_burst(cluster, 40)
            cluster.wait_for(lambda: len(bound(cluster)) >= 5, timeout=30, what='the burst under way')
            assert cluster.delete(f'/api/v1/nodes/{names[0]}') == 200
            deleted_at = time.time()
            wait_bound(cluster, pods, replica)
        placed = bound(cluster)
        late = [e for e in cluster.audit(verb='create', resource='pods', subresource='binding', namespace=NAMESPACE)
                if placed.get(e['objectRef']['name']) == names[0]
                and _seconds(e['requestReceivedTimestamp']) > deleted_at + 2]
        assert late == [], 'bound to the deleted node well after its deletion'
        assert_each_bound_once_and_no_node_overcommitted(cluster, pods)


def test_watches_cut_by_the_server_timeout_are_resumed(installed) -> None:
    with installed(apiserver_flags={'min-request-timeout': '2'}) as (cluster, kubeconfig):
        add_nodes(cluster, 4)
        with running_operator(cluster, kubeconfig) as replica:
            pods: list[str] = []
            for wave in range(4):
                pods += create_burst(cluster, 5, f'w{wave}')
                time.sleep(2.5)  # each wave after the watches were cut at least once
            wait_bound(cluster, pods, replica)
            # The audit log holds a watch once it ended (ResponseComplete); the server ends each
            # after 2-4 s (min-request-timeout 2, times 1 to 2), so three that last the longest
            # take 12 s: read once, the log may show two. A watch never resumed shows one.
            def three_watches() -> list[dict[str, Any]] | None:
                found = cluster.audit(user=OPERATOR_USER, verb='watch', resource='pods')
                return found if len(found) >= 3 else None
            watches = cluster.wait_for(three_watches, timeout=WATCHES_CUT,
                                       what='three pod watches cut by the server and resumed')
            assert replica.ready()
        assert all(e['responseStatus']['code'] == 200 for e in watches), watches
        assert_each_bound_once_and_no_node_overcommitted(cluster, pods)


def _seconds(timestamp: str) -> float:
    return datetime.datetime.fromisoformat(timestamp.replace('Z', '+00:00')).timestamp()
