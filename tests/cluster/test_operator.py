"""`kopfsched run` against the real kube-apiserver, installed as users install it and running
with the ServiceAccount and RBAC of manifests/: binding, conditions and Events as the server
validates them, profiles through the real CRD and status subresource, leader election on a
real Lease, preemption with graceful deletion that kwok completes."""
from __future__ import annotations

import collections
import pathlib
import signal

import yaml

from kopfsched.testing import make_node, make_pod
from tests.cluster.helpers import OPERATOR_USER, bindings, events, node_of, pod, pod_condition, refused_requests
from tests.cluster.operator_process import OperatorProcess, running_operator
from tests.kubeenv.control_plane import ControlPlane

PROFILES = '/apis/kopfsched.dev/v1alpha1/schedulerprofiles'


def create_pods(cluster: ControlPlane, namespace: str, *pods: dict) -> None:
    for body in pods:
        cluster.post(f'/api/v1/namespaces/{namespace}/pods', body)


def test_installed_as_users_install_it_it_binds_its_pods_once_and_touches_nothing_else(
        cluster: ControlPlane, namespace: str, nodes, operator_kubeconfig: pathlib.Path) -> None:
    for i in range(3):
        nodes(make_node(f'bind-{i}', cpu='4'))
    ours = [f'ours-{i}' for i in range(10)]
    create_pods(cluster, namespace, *(make_pod(n, namespace, scheduler_name='kopfsched', requests={'cpu': '100m'})
                                      for n in ours[:5]))
    create_pods(cluster, namespace, make_pod('theirs', namespace, scheduler_name='other-scheduler'))
    with running_operator(cluster, operator_kubeconfig):
        create_pods(cluster, namespace, *(make_pod(n, namespace, scheduler_name='kopfsched',
                                                   requests={'cpu': '100m'}) for n in ours[5:]))
        cluster.wait_for(lambda: all(node_of(cluster, namespace, n) for n in ours), timeout=30,
                         what='every pod of ours bound')
        cluster.wait_for(lambda: len(events(cluster, namespace, reason='Scheduled')) == len(ours), timeout=30,
                         what='a Scheduled Event per pod')
        # kwok runs what was bound: the binding reached the "kubelet".
        cluster.wait_for(lambda: all(pod(cluster, namespace, n)['status'].get('phase') == 'Running' for n in ours),
                         timeout=30, what='the pods Running')

    assert bindings(cluster, namespace) == {n: [(OPERATOR_USER, 201)] for n in ours}
    for name in ours:
        [event] = events(cluster, namespace, name=name, reason='Scheduled')
        assert (event['type'], event['note'], event['reportingController'], event['action']) == (
            'Normal', f'Successfully assigned {namespace}/{name} to {node_of(cluster, namespace, name)}',
            'kopfsched', 'Binding')
    assert node_of(cluster, namespace, 'theirs') is None
    written = [e for e in cluster.audit(user=OPERATOR_USER, namespace=namespace)
               if e['verb'] not in ('get', 'list', 'watch')]
    # Nothing but the bindings and the Events: no patch of a pod, no finalizer, no annotation.
    assert collections.Counter((e['verb'], e['objectRef']['resource'], e['objectRef'].get('subresource', ''))
                               for e in written) == {('create', 'pods', 'binding'): 10,
                                                     ('create', 'events', ''): 10}
    theirs = pod(cluster, namespace, 'theirs')
    assert 'finalizers' not in theirs['metadata'] and 'annotations' not in theirs['metadata']
    assert refused_requests(cluster) == []


def test_a_pod_that_fits_nowhere_is_reported_as_the_server_validates_it_then_bound_when_a_node_joins(
        cluster: ControlPlane, namespace: str, nodes, operator_kubeconfig: pathlib.Path) -> None:
    nodes(make_node('small-0', cpu='2'))
    nodes(make_node('small-1', cpu='2'))
    create_pods(cluster, namespace, make_pod('filler', namespace, node_name='small-0', requests={'cpu': '1'}))
    with running_operator(cluster, operator_kubeconfig):
        create_pods(cluster, namespace, make_pod('big', namespace, scheduler_name='kopfsched', requests={'cpu': '3'}))
        reported = cluster.wait_for(lambda: pod_condition(cluster, namespace, 'big').get('reason') == 'Unschedulable'
                                    and pod_condition(cluster, namespace, 'big'), timeout=30, what='PodScheduled=False')
        [failed] = cluster.wait_for(lambda: events(cluster, namespace, name='big', reason='FailedScheduling'),
                                    timeout=30, what='FailedScheduling')
        # A change that could help but does not (a running pod's cpu freed): a second, identical
        # failure, counted in the Event's series.
        assert cluster.delete(f'/api/v1/namespaces/{namespace}/pods/filler') == 200
        cluster.wait_for(lambda: (events(cluster, namespace, name='big', reason='FailedScheduling')[0].get('series')
                                  or {}).get('count') == 2, timeout=30, what='the Event series counted')
        nodes(make_node('large', cpu='8'))
        cluster.wait_for(lambda: node_of(cluster, namespace, 'big') == 'large', timeout=30, what='bound to large')
    assert reported['status'] == 'False'
    assert reported['message'] == ('0/2 nodes are available: 2 Insufficient cpu. preemption: 0/2 nodes are '
                                   'available: 2 Preemption is not helpful for scheduling.')
    assert (failed['type'], failed['note'], failed['action'], failed['reportingController']) == (
        'Warning', reported['message'], 'Scheduling', 'kopfsched')
    # The server took the status patch: the condition and the Event are what it stored.
    [patch] = [e for e in cluster.audit(user=OPERATOR_USER, verb='patch', resource='pods', subresource='status',
                                        namespace=namespace, name='big') if e['responseStatus']['code'] == 200][:1]
    assert patch['objectRef']['name'] == 'big'


def test_profiles_hot_reload_and_report_through_the_real_status_subresource(
        cluster: ControlPlane, namespace: str, nodes, operator_kubeconfig: pathlib.Path,
        tmp_path: pathlib.Path) -> None:
    nodes(make_node('profiled-0', cpu='4'))
    manifest = tmp_path / 'profile.yaml'
    profile = {'apiVersion': 'kopfsched.dev/v1alpha1', 'kind': 'SchedulerProfile', 'metadata': {'name': 'hot'},
               'spec': {'plugins': {'score': {'enabled': [{'name': 'NoSuchPlugin', 'weight': 1}]}}}}
    manifest.write_text(yaml.safe_dump(profile))
    try:
        with running_operator(cluster, operator_kubeconfig):
            applied = cluster.kubectl('apply', '-f', str(manifest))
            assert applied.stdout.strip() == 'schedulerprofile.kopfsched.dev/hot created', applied.stderr

            def ready() -> dict:
                status = (cluster.get(f'{PROFILES}/hot') or {}).get('status') or {}
                return next((c for c in status.get('conditions') or [] if c['type'] == 'Ready'), {})
            invalid = cluster.wait_for(lambda: ready().get('reason') == 'InvalidConfig' and ready(), timeout=30,
                                       what='Ready=False InvalidConfig')
            create_pods(cluster, namespace, make_pod('waits', namespace, scheduler_name='hot'))
            profile['spec'] = {'plugins': {'score': {'disabled': [{'name': 'ImageLocality'}]}}}
            manifest.write_text(yaml.safe_dump(profile))
            assert cluster.kubectl('apply', '-f', str(manifest)).returncode == 0
            cluster.wait_for(lambda: ready().get('status') == 'True' and ready().get('observedGeneration') == 2,
                             timeout=30, what='Ready=True for generation 2')
            cluster.wait_for(lambda: node_of(cluster, namespace, 'waits') == 'profiled-0', timeout=30,
                             what='the pod of the reloaded profile bound')
            status = cluster.wait_for(lambda: ((cluster.get(f'{PROFILES}/hot') or {}).get('status') or {})
                                      .get('counters', {}).get('scheduled') == 1
                                      and cluster.get(f'{PROFILES}/hot')['status'], timeout=30, what='counted')
            table = cluster.kubectl('get', 'schedulerprofile', 'hot')
    finally:
        cluster.delete(f'{PROFILES}/hot')
    assert invalid['status'] == 'False'
    assert 'NoSuchPlugin' in invalid['message']
    assert status['observedGeneration'] == 2
    assert {'name': 'ImageLocality', 'weight': 1} not in status['plugins']['score']
    assert [line.split()[:5] for line in table.stdout.splitlines()] == [
        ['NAME', 'SCHEDULER', 'READY', 'SCHEDULED', 'PENDING'], ['hot', 'hot', 'True', '1', '0']], table.stderr
    # Only the status subresource was written by the operator, never the spec.
    writes = {(e['verb'], e['objectRef'].get('subresource', '')) for e in cluster.audit(
        user=OPERATOR_USER, resource='schedulerprofiles', name='hot') if e['verb'] not in ('get', 'list', 'watch')}
    assert writes == {('patch', 'status')}


def test_two_replicas_elect_one_leader_on_a_real_lease_and_the_other_takes_over_when_it_is_killed(
        cluster: ControlPlane, namespace: str, nodes, operator_kubeconfig: pathlib.Path,
        tmp_path: pathlib.Path) -> None:
    nodes(make_node('elected-0', cpu='8'))
    config = tmp_path / 'config.yaml'
    config.write_text(yaml.safe_dump({
        'apiVersion': 'kubescheduler.config.k8s.io/v1', 'kind': 'KubeSchedulerConfiguration',
        'leaderElection': {'leaderElect': True, 'leaseDuration': '4s', 'renewDeadline': '3s', 'retryPeriod': '1s',
                           'resourceNamespace': 'kopfsched-system', 'resourceName': 'kopfsched'}}))
    lease_path = '/apis/coordination.k8s.io/v1/namespaces/kopfsched-system/leases/kopfsched'
    replicas = [OperatorProcess(cluster, operator_kubeconfig, name=f'replica-{i}', leader_elect=True, config=config)
                for i in range(2)]
    try:
        for replica in replicas:
            replica.start()
        holder = cluster.wait_for(lambda: ((cluster.get(lease_path) or {}).get('spec') or {}).get('holderIdentity'),
                                  timeout=30, what='a leader')
        leader = next(r for r in replicas if r.name == holder)
        follower = next(r for r in replicas if r is not leader)
        create_pods(cluster, namespace, *(make_pod(f'before-{i}', namespace, scheduler_name='kopfsched')
                                          for i in range(3)))
        cluster.wait_for(lambda: all(node_of(cluster, namespace, f'before-{i}') for i in range(3)), timeout=30,
                         what='the leader binding')
        leader.stop(signal.SIGKILL)
        create_pods(cluster, namespace, *(make_pod(f'after-{i}', namespace, scheduler_name='kopfsched')
                                          for i in range(3)))
        cluster.wait_for(lambda: cluster.get(lease_path)['spec']['holderIdentity'] == follower.name, timeout=30,
                         what='the follower taking the Lease')
        cluster.wait_for(lambda: all(node_of(cluster, namespace, f'after-{i}') for i in range(3)), timeout=30,
                         what='the new leader binding')
    finally:
        for replica in replicas:
            if replica.process is not None and replica.process.poll() is None:
                assert replica.stop() == 0, replica.last_lines()
    bound = bindings(cluster, namespace)
    assert {name: [who for who, code in answers if code == 201] for name, answers in bound.items()} == {
        **{f'before-{i}': [OPERATOR_USER] for i in range(3)}, **{f'after-{i}': [OPERATOR_USER] for i in range(3)}}
    scheduled = events(cluster, namespace, reason='Scheduled')
    assert {e['regarding']['name']: e['reportingInstance'] for e in scheduled} == {
        **{f'before-{i}': leader.name for i in range(3)}, **{f'after-{i}': follower.name for i in range(3)}}


def test_preemption_deletes_the_victim_gracefully_and_binds_the_preemptor(
        cluster: ControlPlane, namespace: str, nodes, operator_kubeconfig: pathlib.Path) -> None:
    nodes(make_node('preempt-0', cpu='1', labels={'kubeenv/test': namespace}))
    high = {'apiVersion': 'scheduling.k8s.io/v1', 'kind': 'PriorityClass', 'metadata': {'name': f'{namespace}-high'},
            'value': 1000}
    cluster.post('/apis/scheduling.k8s.io/v1/priorityclasses', high)
    pinned = {'nodeSelector': {'kubeenv/test': namespace}}
    try:
        with running_operator(cluster, operator_kubeconfig):
            victim = make_pod('victim', namespace, scheduler_name='kopfsched', requests={'cpu': '800m'})
            victim['spec'].update(pinned, terminationGracePeriodSeconds=5)
            create_pods(cluster, namespace, victim)
            cluster.wait_for(lambda: node_of(cluster, namespace, 'victim') == 'preempt-0', timeout=30,
                             what='the victim bound')
            preemptor = make_pod('preemptor', namespace, scheduler_name='kopfsched', requests={'cpu': '800m'})
            preemptor['spec'].update(pinned, priorityClassName=high['metadata']['name'])
            create_pods(cluster, namespace, preemptor)
            cluster.wait_for(lambda: node_of(cluster, namespace, 'preemptor') == 'preempt-0', timeout=60,
                             what='the preemptor bound once kwok finished the victim')
        nominated = [e for e in cluster.audit(user=OPERATOR_USER, verb='patch', resource='pods',
                                              subresource='status', name='preemptor', namespace=namespace)]
        deleted = cluster.audit(user=OPERATOR_USER, verb='delete', resource='pods', namespace=namespace)
        preempted = events(cluster, namespace, name='victim', reason='Preempted')
    finally:
        cluster.delete(f'/apis/scheduling.k8s.io/v1/priorityclasses/{high["metadata"]["name"]}')
    assert pod(cluster, namespace, 'victim') == {}
    assert [(e['objectRef']['name'], e['responseStatus']['code']) for e in deleted] == [('victim', 200)]
    assert nominated and all(e['responseStatus']['code'] == 200 for e in nominated)
    [event] = preempted
    assert event['type'] == 'Normal'
    assert event['note'] == f'Preempted by pod {pod(cluster, namespace, "preemptor")["metadata"]["uid"]} on node ' \
                            'preempt-0'


def test_preemptors_wait_for_their_victims_and_delete_each_victim_once(
        cluster: ControlPlane, namespace: str, nodes, operator_kubeconfig: pathlib.Path) -> None:
    """PreemptionBasic in small, through the real API server: four grace-0 victims per node,
    one preemptor per node. Each victim gets one DisruptionTarget patch and one delete; each
    preemptor fails once (nominated), waits gated while its victims go, and binds on its
    second attempt: one FailedScheduling Event, never a series."""
    label = {'kubeenv/test': namespace}
    for i in range(2):
        nodes(make_node(f'basic-{i}', cpu='4', labels=label))
    high = {'apiVersion': 'scheduling.k8s.io/v1', 'kind': 'PriorityClass', 'metadata': {'name': f'{namespace}-high'},
            'value': 9999999}
    cluster.post('/apis/scheduling.k8s.io/v1/priorityclasses', high)
    victims = [f'low-{i}' for i in range(8)]
    for i, name in enumerate(victims):
        low = make_pod(name, namespace, requests={'cpu': '900m'})
        low['spec'].update(nodeName=f'basic-{i % 2}', terminationGracePeriodSeconds=0)
        create_pods(cluster, namespace, low)
    preemptors = ['high-0', 'high-1']
    try:
        with running_operator(cluster, operator_kubeconfig):
            for name in preemptors:
                preemptor = make_pod(name, namespace, scheduler_name='kopfsched', requests={'cpu': '3970m'})
                preemptor['spec'].update(nodeSelector=label, priorityClassName=high['metadata']['name'],
                                         terminationGracePeriodSeconds=0)
                create_pods(cluster, namespace, preemptor)
            cluster.wait_for(lambda: all(node_of(cluster, namespace, n) for n in preemptors), timeout=60,
                             what='both preemptors bound')
            cluster.wait_for(lambda: len(events(cluster, namespace, reason='Scheduled')) == 2, timeout=30,
                             what='their Scheduled Events')
        written = collections.Counter(
            (e['verb'], e['objectRef']['name'], e['objectRef'].get('subresource', ''), e['responseStatus']['code'])
            for e in cluster.audit(user=OPERATOR_USER, resource='pods', namespace=namespace)
            if e['verb'] in ('delete', 'patch'))
        failed = events(cluster, namespace, reason='FailedScheduling')
    finally:
        cluster.delete(f'/apis/scheduling.k8s.io/v1/priorityclasses/{high["metadata"]["name"]}')
    assert {node_of(cluster, namespace, n) for n in preemptors} == {'basic-0', 'basic-1'}
    assert {key: count for key, count in written.items() if key[0] == 'delete'} == {
        ('delete', name, '', 200): 1 for name in victims}
    assert {key: count for key, count in written.items() if key[1] in victims and key[0] == 'patch'} == {
        ('patch', name, 'status', 200): 1 for name in victims}
    assert sorted(e['regarding']['name'] for e in failed) == preemptors
    for event in failed:
        assert 'series' not in event
        assert event['note'].startswith('0/')
        assert 'preemption: found a potential placement for pod on node basic-' in event['note']
        assert event['note'].endswith(', preempting 4 victims')
