"""The RBAC of manifests/ is exactly what the operator uses on a real API server: over the
session's operator runs (the other tests of this folder, against the shared control plane),
no request of kopfsched's ServiceAccount was refused (a missing verb), and every verb granted
was used at least once (no grant the code never needs). Runs after the other tests."""
from __future__ import annotations

import pathlib

import pytest
import yaml

from tests.cluster.helpers import OPERATOR_USER, refused_requests
from tests.kubeenv.control_plane import ControlPlane

MANIFESTS = pathlib.Path(__file__).parents[2] / 'manifests'


def granted() -> set[tuple[str, str, str]]:
    """(apiGroup, resource[/subresource], verb) of the ClusterRole and the leader-election Role."""
    grants: set[tuple[str, str, str]] = set()
    for path in (MANIFESTS / '02-clusterrole.yaml', MANIFESTS / '04-role-leader-election.yaml'):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and doc['kind'] in ('ClusterRole', 'Role'):
                grants |= {(group, resource, verb) for rule in doc['rules'] for group in rule['apiGroups']
                           for resource in rule['resources'] for verb in rule['verbs']}
    return grants


@pytest.mark.last_in_session
def test_every_verb_granted_is_used_and_none_used_is_missing(cluster: ControlPlane,
                                                             request: pytest.FixtureRequest) -> None:
    others = [item for item in request.session.items if item.path.parent == pathlib.Path(__file__).parent
              and item.path != pathlib.Path(__file__)]
    if len(others) < 10:
        pytest.skip('reads the whole tests/cluster session: run the folder, not this test alone')
    assert refused_requests(cluster) == []
    used = set()
    for entry in cluster.audit(user=OPERATOR_USER):
        ref = entry.get('objectRef') or {}
        resource = ref.get('resource', '') + (f"/{ref['subresource']}" if ref.get('subresource') else '')
        used.add((ref.get('apiGroup', ''), resource, entry['verb']))
    # Checked by the API server beside a claim's status patch, never a request of its own.
    implied = {('resource.k8s.io', 'resourceclaims/binding', 'patch')}
    unused = sorted(granted() - used - implied)
    assert unused == [], f'granted in manifests/ but never used by the operator: {unused}'
