"""The control plane itself: upstream's components at the pinned release, secure by default,
kwok standing in for kubelets, and the harness's promises (audit, crash reports, teardown)."""
from __future__ import annotations

import os
import pathlib
import re
import signal

import pytest

from kopfsched.testing import make_node, make_pod
from tests.kubeenv.control_plane import ComponentFailed, ControlPlane, Options

GO_MOD = pathlib.Path(__file__).parents[1] / 'kubeenv' / 'go.mod'


def test_the_binary_runs_the_release_go_mod_pins(cluster: ControlPlane) -> None:
    pinned = re.search(r'^\tk8s.io/kubernetes (v\S+)$', GO_MOD.read_text(), re.M)
    assert pinned, 'go.mod requires k8s.io/kubernetes'
    assert cluster.versions()['k8s.io/kubernetes'] == pinned.group(1)
    assert cluster.get('/version')['gitVersion'].startswith(pinned.group(1))


def test_anonymous_and_unknown_clients_are_refused(cluster: ControlPlane) -> None:
    nobody = cluster.write_kubeconfig('nobody', token='not-a-token')
    refused = cluster.kubectl('get', 'nodes', kubeconfig=nobody)
    assert refused.returncode == 1
    assert refused.stderr == 'error: You must be logged in to the server (Unauthorized)\n'
    stranger = cluster.kubeconfig_for_user('stranger')
    forbidden = cluster.kubectl('get', 'pods', '-A', kubeconfig=stranger)
    assert 'pods is forbidden: User "stranger" cannot list resource "pods" in API group "" at the cluster scope' \
        in forbidden.stderr


def test_kwok_makes_nodes_ready_and_bound_pods_running(cluster: ControlPlane, namespace: str, nodes) -> None:
    nodes(make_node('kwok-smoke-0', cpu='4', memory='8Gi'))
    cluster.wait_for(lambda: _condition(cluster.get('/api/v1/nodes/kwok-smoke-0'), 'Ready') == 'True',
                     timeout=30, what='kwok to mark the node Ready')
    cluster.post(f'/api/v1/namespaces/{namespace}/pods',
                 make_pod('p', namespace, requests={'cpu': '100m'}, node_name='kwok-smoke-0'))
    running = cluster.wait_for(
        lambda: (p := cluster.get(f'/api/v1/namespaces/{namespace}/pods/p'))['status'].get('phase') == 'Running'
        and p, timeout=30, what='kwok to run the pod')
    assert _condition(running, 'Ready') == 'True'
    # Graceful deletion: the API server only marks the pod; kwok (the kubelet) completes it.
    assert cluster.delete(f'/api/v1/namespaces/{namespace}/pods/p') == 200
    cluster.wait_for(lambda: cluster.get(f'/api/v1/namespaces/{namespace}/pods/p') is None, timeout=30,
                     what='kwok to finish the graceful deletion')


def test_the_audit_log_says_who_asked_what_and_the_answer(cluster: ControlPlane, namespace: str) -> None:
    status, _ = cluster.request('POST', f'/api/v1/namespaces/{namespace}/configmaps',
                                {'apiVersion': 'v1', 'kind': 'ConfigMap', 'metadata': {'name': 'c'}})
    assert status == 201
    again, _ = cluster.request('POST', f'/api/v1/namespaces/{namespace}/configmaps',
                               {'apiVersion': 'v1', 'kind': 'ConfigMap', 'metadata': {'name': 'c'}})
    assert again == 409
    entries = cluster.audit(verb='create', resource='configmaps', namespace=namespace)
    assert [(e['user']['username'], e['responseStatus']['code']) for e in entries] == [
        ('kubeenv-admin', 201), ('kubeenv-admin', 409)]


def test_a_component_that_dies_fails_with_its_last_lines(control_plane) -> None:
    with control_plane(Options(controllers=(), kwok=False)) as own:
        os.killpg(own.components['etcd'].process.pid, signal.SIGKILL)
        own.components['etcd'].process.wait(timeout=10)
        with pytest.raises(ComponentFailed, match=r'^etcd exited \(exit status -9\); its last lines'):
            own.check()
        own.components['etcd'].stopping = True  # reported: the context's own check stays quiet
        pids = [c.process.pid for c in own.components.values()]
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def _condition(obj: dict, kind: str) -> str | None:
    return next((c['status'] for c in (obj.get('status') or {}).get('conditions') or [] if c['type'] == kind), None)
