"""kopfsched beside the real kube-scheduler of the pinned release, both binding pods of their own
scheduler names onto the same nodes at once: the classic failure of a second scheduler is two
schedulers each seeing free room and filling it twice. kwok runs no kubelet admission, so what
a kubelet would refuse is counted here from the bound pods.

What a user should expect (README, "Beside kube-scheduler"): every pod is bound by exactly one
scheduler; each scheduler only sees the other's pods once their binding reaches it through its
watch, so for that window a node can be filled by both; on a real node the kubelet then
rejects the pod that does not fit (OutOfpods / OutOfcpu) and its controller makes a new one."""
from __future__ import annotations

import collections
import pathlib

from kopfsched.testing import make_node, make_pod
from tests.cluster.helpers import OPERATOR_USER, bindings, pod_condition
from tests.cluster.operator_process import running_operator
from tests.kubeenv.control_plane import ControlPlane

NODES, PODS_PER_NODE, PODS_EACH = 4, 10, 30
KUBE_SCHEDULER_USER = 'system:kube-scheduler'


def test_both_schedulers_bind_each_pod_once_and_the_overlap_is_what_a_kubelet_would_refuse(
        cluster: ControlPlane, namespace: str, nodes, operator_kubeconfig: pathlib.Path,
        record_property) -> None:
    zone = {'kubeenv/test': namespace}
    for i in range(NODES):
        nodes(make_node(f'shared-{i}', cpu='4', pods=PODS_PER_NODE, labels=zone))
    reference = cluster.start_scheduler({'clientConnection': {'qps': 5000, 'burst': 5000}})
    try:
        with running_operator(cluster, operator_kubeconfig):
            for i in range(PODS_EACH):  # interleaved, as two teams' deployments would arrive
                for scheduler in ('default-scheduler', 'kopfsched'):
                    body = make_pod(f'{scheduler[:4]}-{i}', namespace, scheduler_name=scheduler,
                                    requests={'cpu': '10m'})
                    body['spec']['nodeSelector'] = zone
                    cluster.post(f'/api/v1/namespaces/{namespace}/pods', body)

            def settled() -> list[dict] | None:
                items = cluster.get(f'/api/v1/namespaces/{namespace}/pods')['items']
                done = [p for p in items if p['spec'].get('nodeName')
                        or pod_condition(cluster, namespace, p['metadata']['name']).get('status') == 'False']
                return items if len(done) == 2 * PODS_EACH else None
            pods = cluster.wait_for(settled, timeout=90, what='every pod bound or reported', interval=0.5)
    finally:
        cluster.components.pop(reference.name).stop()

    by_node = collections.Counter(p['spec']['nodeName'] for p in pods if p['spec'].get('nodeName'))
    overcommitted = {node: count - PODS_PER_NODE for node, count in by_node.items() if count > PODS_PER_NODE}
    record_property('bound', sum(by_node.values()))
    record_property('pods_a_kubelet_would_refuse', sum(overcommitted.values()))
    # Exactly one accepted binding per bound pod, by the scheduler its schedulerName names.
    accepted = {name: [who for who, code in answers if code == 201]
                for name, answers in bindings(cluster, namespace).items()}
    for p in pods:
        name, node = p['metadata']['name'], p['spec'].get('nodeName')
        expected = OPERATOR_USER if p['spec']['schedulerName'] == 'kopfsched' else KUBE_SCHEDULER_USER
        assert accepted.get(name, []) == ([expected] if node else []), name
    # Room for NODES * PODS_PER_NODE: both together fill it, and neither placed beyond what its
    # own view allowed: a node holds at most its capacity from each scheduler.
    assert sum(by_node.values()) >= NODES * PODS_PER_NODE
    for node in by_node:
        for scheduler in ('default-scheduler', 'kopfsched'):
            assert sum(1 for p in pods if p['spec'].get('nodeName') == node
                       and p['spec']['schedulerName'] == scheduler) <= PODS_PER_NODE
    unbound = [p for p in pods if not p['spec'].get('nodeName')]
    for p in unbound:
        assert 'Too many pods' in pod_condition(cluster, namespace, p['metadata']['name'])['message']
