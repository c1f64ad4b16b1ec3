"""Small readers of the real API server's state that the operator tests share."""
from __future__ import annotations

import pathlib
from typing import Any

from tests.kubeenv.control_plane import ControlPlane

ROOT = pathlib.Path(__file__).parents[2]

OPERATOR_USER = 'system:serviceaccount:kopfsched-system:kopfsched'


def pod(cluster: ControlPlane, namespace: str, name: str) -> dict[str, Any]:
    return cluster.get(f'/api/v1/namespaces/{namespace}/pods/{name}') or {}


def node_of(cluster: ControlPlane, namespace: str, name: str) -> str | None:
    return (pod(cluster, namespace, name).get('spec') or {}).get('nodeName')


def pod_condition(cluster: ControlPlane, namespace: str, name: str, kind: str = 'PodScheduled') -> dict[str, Any]:
    conditions = (pod(cluster, namespace, name).get('status') or {}).get('conditions') or []
    return next((c for c in conditions if c['type'] == kind), {})


def events(cluster: ControlPlane, namespace: str, *, name: str | None = None,
           reason: str | None = None) -> list[dict[str, Any]]:
    items = cluster.get(f'/apis/events.k8s.io/v1/namespaces/{namespace}/events')['items']
    return [e for e in items if (name is None or e['regarding']['name'] == name)
            and (reason is None or e['reason'] == reason)]


def bindings(cluster: ControlPlane, namespace: str) -> dict[str, list[tuple[str, int]]]:
    """pod name → [(who, status)] of every binding the API server answered, in order."""
    bound: dict[str, list[tuple[str, int]]] = {}
    for entry in cluster.audit(verb='create', resource='pods', subresource='binding', namespace=namespace):
        bound.setdefault(entry['objectRef']['name'], []).append(
            (entry['user']['username'], entry['responseStatus']['code']))
    return bound


def refused_requests(cluster: ControlPlane, user: str = OPERATOR_USER) -> list[str]:
    """The user's requests RBAC refused: a verb the ClusterRole lacks. (A 403 that authorization
    allowed is admission's, e.g. an Event in a namespace being deleted.)"""
    return [f"{e['verb']} {e['requestURI']}" for e in cluster.audit(user=user)
            if (e.get('annotations') or {}).get('authorization.k8s.io/decision') == 'forbid']


def install_kopfsched(cluster: ControlPlane) -> None:
    """As users install it: `kubectl apply -f crds/ -f manifests/`."""
    applied = cluster.kubectl('apply', '-f', str(ROOT / 'crds'), '-f', str(ROOT / 'manifests'))
    assert applied.returncode == 0, applied.stderr


def create_namespace(cluster: ControlPlane, name: str) -> None:
    """A namespace, once its `default` ServiceAccount exists (pods cannot be created before)."""
    cluster.post('/api/v1/namespaces', {'apiVersion': 'v1', 'kind': 'Namespace', 'metadata': {'name': name}})
    cluster.wait_for(lambda: cluster.get(f'/api/v1/namespaces/{name}/serviceaccounts/default'),
                     timeout=30, what=f'the default ServiceAccount of {name}')
