"""The operator's writes beyond the binding, as the real API server and controllers take them:
gangs through PodGroups (the optional CRD), DRA claims made from templates by the real
resourceclaim controller and allocated through resource.k8s.io's status subresource, and
volumes bound with a WaitForFirstConsumer StorageClass and the real PV controller (a static
PV, and a dynamic claim a tiny provisioner in the test completes)."""
from __future__ import annotations

import contextlib
import pathlib
import threading
from collections.abc import Iterator
from typing import Any

from kopfsched.testing import make_node, make_pod
from tests.cluster.conftest import ROOT
from tests.cluster.helpers import OPERATOR_USER, bindings, node_of, pod, pod_condition, refused_requests
from tests.cluster.operator_process import running_operator
from tests.kubeenv.control_plane import ControlPlane

PROFILES = '/apis/kopfsched.dev/v1alpha1/schedulerprofiles'
GROUP_LABEL = 'scheduling.x-k8s.io/pod-group'
DRA = '/apis/resource.k8s.io/v1'
DRIVER = 'gpu.kubeenv.test'


def create(cluster: ControlPlane, path: str, *bodies: dict[str, Any]) -> None:
    for body in bodies:
        cluster.post(path, body)


def ready_condition(cluster: ControlPlane, name: str) -> dict[str, Any]:
    status = (cluster.get(f'{PROFILES}/{name}') or {}).get('status') or {}
    return next((c for c in status.get('conditions') or [] if c['type'] == 'Ready'), {})


@contextlib.contextmanager
def the_only_profile(cluster: ControlPlane, profile: dict[str, Any]) -> Iterator[None]:
    """`profile` as the cluster's one SchedulerProfile while the context lasts, the others put
    back after. The scheduler has one queue, so every profile it serves must share one
    queueSort; a profile of another queueSort (Coscheduling's) is refused, reason Conflict,
    when an older profile (the default `kopfsched` the first operator of the session seeds)
    sorts by PrioritySort."""
    others = [{'apiVersion': p['apiVersion'], 'kind': p['kind'], 'spec': p['spec'],
               'metadata': {k: v for k, v in p['metadata'].items() if k in ('name', 'labels', 'annotations')}}
              for p in cluster.get(PROFILES)['items']]
    for other in others:
        cluster.delete(f"{PROFILES}/{other['metadata']['name']}")
    cluster.post(PROFILES, profile)
    try:
        yield
    finally:
        cluster.delete(f"{PROFILES}/{profile['metadata']['name']}")
        for other in others:
            cluster.post(PROFILES, other)


def test_a_gang_binds_all_or_nothing_and_its_pod_group_status_says_so(
        cluster: ControlPlane, namespace: str, nodes, operator_kubeconfig: pathlib.Path) -> None:
    applied = cluster.kubectl('apply', '-f', str(ROOT / 'crds' / 'optional'))
    assert applied.returncode == 0, applied.stderr
    gang = {'apiVersion': 'kopfsched.dev/v1alpha1', 'kind': 'SchedulerProfile', 'metadata': {'name': 'gang'},
            'spec': {'plugins': {'multiPoint': {'enabled': [{'name': 'Coscheduling'}]},
                                 'queueSort': {'disabled': [{'name': 'PrioritySort'}]}},
                     'pluginConfig': [{'name': 'Coscheduling', 'args': {'permitWaitingTimeSeconds': 10,
                                                                         'podGroupBackoffSeconds': 1}}]}}
    zone = {'kubeenv/test': namespace}
    for i in range(2):
        nodes(make_node(f'gang-{i}', cpu='4', labels=zone))
    groups = f'/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{namespace}/podgroups'
    cluster.post(groups, {'apiVersion': 'scheduling.x-k8s.io/v1alpha1', 'kind': 'PodGroup',
                          'metadata': {'name': 'trainer'}, 'spec': {'minMember': 3, 'scheduleTimeoutSeconds': 10}})
    members = [f'trainer-{i}' for i in range(3)]
    with the_only_profile(cluster, gang), running_operator(cluster, operator_kubeconfig):
        # Served, or its pods would wait unseen: a refused profile says why in its status.
        ready = cluster.wait_for(lambda: ready_condition(cluster, 'gang').get('status') and
                                 ready_condition(cluster, 'gang'), timeout=30, what='the gang profile\'s Ready')
        assert ready['status'] == 'True', ready
        for name in members:
            body = make_pod(name, namespace, scheduler_name='gang', labels={GROUP_LABEL: 'trainer'},
                            requests={'cpu': '3'})
            body['spec']['nodeSelector'] = zone
            cluster.post(f'/api/v1/namespaces/{namespace}/pods', body)
        # Two fit, the third nowhere: the gang is rejected as a whole, its members reported.
        cluster.wait_for(lambda: any(pod_condition(cluster, namespace, n).get('status') == 'False'
                                     for n in members), timeout=60, what='the gang reported unschedulable')
        assert [node_of(cluster, namespace, n) for n in members] == [None, None, None]
        nodes(make_node('gang-2', cpu='4', labels=zone))
        cluster.wait_for(lambda: all(node_of(cluster, namespace, n) for n in members), timeout=60,
                         what='the whole gang bound once a third node joined')
        # kwok runs the bound members at once, so the group goes on to Running.
        status = cluster.wait_for(lambda: (cluster.get(f'{groups}/trainer').get('status') or {})
                                  .get('phase') == 'Running' and cluster.get(f'{groups}/trainer')['status'],
                                  timeout=30, what='the PodGroup Running')
    assert sorted(node_of(cluster, namespace, n) for n in members) == ['gang-0', 'gang-1', 'gang-2']
    assert (status['scheduled'], status['running']) == (3, 3)
    assert {e['objectRef'].get('subresource') for e in cluster.audit(
        user=OPERATOR_USER, resource='podgroups', verb='patch')} == {'status'}


def test_a_claim_from_a_template_is_allocated_and_reserved_through_the_api_then_the_pod_bound(
        cluster: ControlPlane, namespace: str, nodes, operator_kubeconfig: pathlib.Path) -> None:
    nodes(make_node('dra-gpu', cpu='4'))
    nodes(make_node('dra-cpu', cpu='4'))
    device_class = f'{namespace}-gpu'
    create(cluster, f'{DRA}/deviceclasses', {
        'apiVersion': 'resource.k8s.io/v1', 'kind': 'DeviceClass', 'metadata': {'name': device_class},
        'spec': {'selectors': [{'cel': {'expression': f'device.driver == "{DRIVER}"'}}]}})
    create(cluster, f'{DRA}/resourceslices', {
        'apiVersion': 'resource.k8s.io/v1', 'kind': 'ResourceSlice', 'metadata': {'name': f'{namespace}-dra-gpu'},
        'spec': {'driver': DRIVER, 'nodeName': 'dra-gpu',
                 'pool': {'name': 'dra-gpu', 'generation': 1, 'resourceSliceCount': 1},
                 'devices': [{'name': 'gpu-0', 'attributes': {'model': {'string': 'A100'}}}]}})
    create(cluster, f'{DRA}/namespaces/{namespace}/resourceclaimtemplates', {
        'apiVersion': 'resource.k8s.io/v1', 'kind': 'ResourceClaimTemplate', 'metadata': {'name': 'one-gpu'},
        'spec': {'spec': {'devices': {'requests': [{'name': 'gpu', 'exactly': {
            'deviceClassName': device_class,
            'selectors': [{'cel': {'expression': f'device.attributes["{DRIVER}"].model == "A100"'}}]}}]}}}})
    try:
        with running_operator(cluster, operator_kubeconfig):
            trainer = make_pod('trainer', namespace, scheduler_name='kopfsched',
                               resourceClaims=[{'name': 'gpu', 'resourceClaimTemplateName': 'one-gpu'}])
            cluster.post(f'/api/v1/namespaces/{namespace}/pods', trainer)
            cluster.wait_for(lambda: node_of(cluster, namespace, 'trainer'), timeout=30, what='trainer bound')
            # A second pod wants the only GPU: it waits, reported, unbound.
            cluster.post(f'/api/v1/namespaces/{namespace}/pods', make_pod(
                'second', namespace, scheduler_name='kopfsched',
                resourceClaims=[{'name': 'gpu', 'resourceClaimTemplateName': 'one-gpu'}]))
            waiting = cluster.wait_for(lambda: pod_condition(cluster, namespace, 'second').get('reason')
                                       == 'Unschedulable' and pod_condition(cluster, namespace, 'second'),
                                       timeout=30, what='second reported')
        [claim_status] = pod(cluster, namespace, 'trainer')['status']['resourceClaimStatuses']
        claim = cluster.get(f'{DRA}/namespaces/{namespace}/resourceclaims/{claim_status["resourceClaimName"]}')
    finally:
        cluster.delete(f'{DRA}/resourceslices/{namespace}-dra-gpu')
        cluster.delete(f'{DRA}/deviceclasses/{device_class}')
    assert node_of(cluster, namespace, 'trainer') == 'dra-gpu'
    assert claim['metadata']['finalizers'] == ['resource.kubernetes.io/delete-protection']
    assert claim['status']['allocation']['devices']['results'] == [
        {'request': 'gpu', 'driver': DRIVER, 'pool': 'dra-gpu', 'device': 'gpu-0'}]
    assert [(r['resource'], r['name']) for r in claim['status']['reservedFor']] == [('pods', 'trainer')]
    assert 'cannot allocate all claims' in waiting['message'], waiting['message']
    assert node_of(cluster, namespace, 'second') is None
    assert refused_requests(cluster) == []


def test_an_extended_resource_backed_by_a_device_class_gets_its_claim_through_the_api(
        cluster: ControlPlane, namespace: str, nodes, operator_kubeconfig: pathlib.Path) -> None:
    """DRAExtendedResource through the real API server: a pod asks for an extended resource no
    node advertises and a DeviceClass provides; the operator creates the pod's claim (the
    server names it from generateName and validates it), allocates and reserves it, writes the
    pod's status.extendedResourceClaimStatus (validated too), and binds the pod where the device is."""
    nodes(make_node('ext-gpu', cpu='4'))
    nodes(make_node('ext-cpu', cpu='4'))
    device_class, resource = f'{namespace}-ext', f'{namespace}.example.com/gpu'
    create(cluster, f'{DRA}/deviceclasses', {
        'apiVersion': 'resource.k8s.io/v1', 'kind': 'DeviceClass', 'metadata': {'name': device_class},
        'spec': {'extendedResourceName': resource,
                 'selectors': [{'cel': {'expression': f'device.driver == "{DRIVER}"'}}]}})
    create(cluster, f'{DRA}/resourceslices', {
        'apiVersion': 'resource.k8s.io/v1', 'kind': 'ResourceSlice', 'metadata': {'name': f'{namespace}-ext-gpu'},
        'spec': {'driver': DRIVER, 'nodeName': 'ext-gpu',
                 'pool': {'name': f'{namespace}-ext-gpu', 'generation': 1, 'resourceSliceCount': 1},
                 'devices': [{'name': 'gpu-0'}]}})
    trainer = make_pod('trainer', namespace, scheduler_name='kopfsched')
    trainer['spec']['containers'][0]['resources'] = {'limits': {resource: '1'}}  # requests = limits
    try:
        with running_operator(cluster, operator_kubeconfig):
            cluster.post(f'/api/v1/namespaces/{namespace}/pods', trainer)
            cluster.wait_for(lambda: node_of(cluster, namespace, 'trainer'), timeout=30, what='trainer bound')
        status = pod(cluster, namespace, 'trainer')['status']['extendedResourceClaimStatus']
        claim = cluster.get(f'{DRA}/namespaces/{namespace}/resourceclaims/{status["resourceClaimName"]}')
    finally:
        cluster.delete(f'{DRA}/resourceslices/{namespace}-ext-gpu')
        cluster.delete(f'{DRA}/deviceclasses/{device_class}')
    assert node_of(cluster, namespace, 'trainer') == 'ext-gpu'
    assert status['requestMappings'] == [{'containerName': 'c0', 'resourceName': resource,
                                          'requestName': 'container-0-request-0'}]
    meta = claim['metadata']
    assert meta['name'].startswith('trainer-extended-resources-') and meta['generateName'] == \
        'trainer-extended-resources-'
    assert meta['annotations'] == {'resource.kubernetes.io/extended-resource-claim': 'true'}
    assert [(o['kind'], o['name'], o.get('controller')) for o in meta['ownerReferences']] == [
        ('Pod', 'trainer', True)]
    assert meta['finalizers'] == ['resource.kubernetes.io/delete-protection']
    assert claim['spec']['devices']['requests'] == [{'name': 'container-0-request-0', 'exactly': {
        'deviceClassName': device_class, 'allocationMode': 'ExactCount', 'count': 1}}]
    assert claim['status']['allocation']['devices']['results'] == [
        {'request': 'container-0-request-0', 'driver': DRIVER, 'pool': f'{namespace}-ext-gpu', 'device': 'gpu-0'}]
    assert [(r['resource'], r['name']) for r in claim['status']['reservedFor']] == [('pods', 'trainer')]
    assert refused_requests(cluster) == []


def test_a_leftover_extended_resource_claim_is_deleted_through_the_api(
        cluster: ControlPlane, namespace: str, nodes, operator_kubeconfig: pathlib.Path) -> None:
    """A claim an earlier cycle created for the pod's extended resources (its binding failed
    since): every node refuses it and PostFilter drops the scheduler's finalizer and deletes
    it, as upstream's deleteClaim; the pod's condition says so."""
    nodes(make_node('left-gpu', cpu='4'))
    device_class, resource = f'{namespace}-left', f'{namespace}.example.com/left'
    create(cluster, f'{DRA}/deviceclasses', {
        'apiVersion': 'resource.k8s.io/v1', 'kind': 'DeviceClass', 'metadata': {'name': device_class},
        'spec': {'extendedResourceName': resource,
                 'selectors': [{'cel': {'expression': f'device.driver == "{DRIVER}"'}}]}})
    trainer = make_pod('trainer', namespace, scheduler_name='kopfsched')
    trainer['spec']['containers'][0]['resources'] = {'limits': {resource: '1'}}
    uid = cluster.post(f'/api/v1/namespaces/{namespace}/pods', trainer)['metadata']['uid']
    claims = f'{DRA}/namespaces/{namespace}/resourceclaims'
    create(cluster, claims, {
        'apiVersion': 'resource.k8s.io/v1', 'kind': 'ResourceClaim', 'metadata': {
            'name': 'trainer-extended-resources-old12', 'finalizers': ['resource.kubernetes.io/delete-protection'],
            'annotations': {'resource.kubernetes.io/extended-resource-claim': 'true'},
            'ownerReferences': [{'apiVersion': 'v1', 'kind': 'Pod', 'name': 'trainer', 'uid': uid,
                                 'controller': True}]},
        'spec': {'devices': {'requests': [{'name': 'container-0-request-0', 'exactly': {
            'deviceClassName': device_class, 'allocationMode': 'ExactCount', 'count': 1}}]}}})
    try:
        with running_operator(cluster, operator_kubeconfig):
            cluster.wait_for(lambda: not cluster.get(claims)['items'], timeout=30, what='the leftover claim deleted')
            waiting = cluster.wait_for(lambda: pod_condition(cluster, namespace, 'trainer').get('reason')
                                       == 'Unschedulable' and pod_condition(cluster, namespace, 'trainer'),
                                       timeout=30, what='trainer reported')
    finally:
        cluster.delete(f'{DRA}/deviceclasses/{device_class}')
    assert 'cannot schedule extended resource claim. deletion of ResourceClaim completed' in waiting['message'], \
        waiting['message']
    assert refused_requests(cluster) == []


def test_a_device_with_binding_conditions_is_bound_once_attached_through_the_api(
        cluster: ControlPlane, namespace: str, nodes, operator_kubeconfig: pathlib.Path) -> None:
    """DRADeviceBindingConditions through the real API server: the server accepts the
    allocation with the device's binding conditions and its allocationTimestamp; the operator
    holds the pod at PreBind until the test, as the device's controller, sets the condition in
    the claim's status.devices, then binds it."""
    nodes(make_node('bind-gpu', cpu='4'))
    device_class = f'{namespace}-bound'
    attached, failed = f'{DRIVER}/attached', f'{DRIVER}/failed'
    create(cluster, f'{DRA}/deviceclasses', {
        'apiVersion': 'resource.k8s.io/v1', 'kind': 'DeviceClass', 'metadata': {'name': device_class},
        'spec': {'selectors': [{'cel': {'expression': f'device.driver == "{DRIVER}"'}}]}})
    create(cluster, f'{DRA}/resourceslices', {
        'apiVersion': 'resource.k8s.io/v1', 'kind': 'ResourceSlice', 'metadata': {'name': f'{namespace}-bind-gpu'},
        'spec': {'driver': DRIVER, 'nodeName': 'bind-gpu',
                 'pool': {'name': f'{namespace}-bind-gpu', 'generation': 1, 'resourceSliceCount': 1},
                 'devices': [{'name': 'gpu-0', 'bindingConditions': [attached],
                              'bindingFailureConditions': [failed]}]}})
    create(cluster, f'{DRA}/namespaces/{namespace}/resourceclaims', {
        'apiVersion': 'resource.k8s.io/v1', 'kind': 'ResourceClaim', 'metadata': {'name': 'fabric'},
        'spec': {'devices': {'requests': [{'name': 'gpu', 'exactly': {'deviceClassName': device_class}}]}}})
    claim_path = f'{DRA}/namespaces/{namespace}/resourceclaims/fabric'
    try:
        with running_operator(cluster, operator_kubeconfig):
            cluster.post(f'/api/v1/namespaces/{namespace}/pods', make_pod(
                'trainer', namespace, scheduler_name='kopfsched',
                resourceClaims=[{'name': 'gpu', 'resourceClaimName': 'fabric'}]))
            cluster.wait_for(lambda: 'allocation' in (cluster.get(claim_path).get('status') or {}), timeout=30,
                             what='the claim allocated')
            assert node_of(cluster, namespace, 'trainer') is None  # held at PreBind
            cluster.patch(f'{claim_path}/status', {'status': {'devices': [{
                'driver': DRIVER, 'pool': f'{namespace}-bind-gpu', 'device': 'gpu-0', 'conditions': [{
                    'type': attached, 'status': 'True', 'reason': 'Attached', 'message': 'fabric port 7',
                    'lastTransitionTime': '2026-01-01T00:00:00Z'}]}]}})
            cluster.wait_for(lambda: node_of(cluster, namespace, 'trainer'), timeout=30, what='trainer bound')
        claim = cluster.get(claim_path)
    finally:
        cluster.delete(f'{DRA}/resourceslices/{namespace}-bind-gpu')
        cluster.delete(f'{DRA}/deviceclasses/{device_class}')
    assert node_of(cluster, namespace, 'trainer') == 'bind-gpu'
    allocation = claim['status']['allocation']
    assert allocation['devices']['results'] == [{
        'request': 'gpu', 'driver': DRIVER, 'pool': f'{namespace}-bind-gpu', 'device': 'gpu-0',
        'bindingConditions': [attached], 'bindingFailureConditions': [failed]}]
    assert allocation['allocationTimestamp'].endswith('Z')
    assert refused_requests(cluster) == []


def test_a_device_taint_rule_keeps_a_claim_off_its_pool_until_it_is_deleted(
        cluster: ControlPlane, namespace: str, nodes, operator_kubeconfig: pathlib.Path) -> None:
    """DeviceTaintRules through the real API (resource.k8s.io/v1, served by default in v1.37):
    the watch delivers the rule, its taint keeps the claim off the pool's device, a toleration
    of it gets the device, and deleting the rule lets the other pod in."""
    nodes(make_node('taint-gpu', cpu='4'))
    device_class, rule = f'{namespace}-tainted', f'{namespace}-drain'
    create(cluster, f'{DRA}/deviceclasses', {
        'apiVersion': 'resource.k8s.io/v1', 'kind': 'DeviceClass', 'metadata': {'name': device_class},
        'spec': {'selectors': [{'cel': {'expression': f'device.driver == "{DRIVER}"'}}]}})
    create(cluster, f'{DRA}/resourceslices', {
        'apiVersion': 'resource.k8s.io/v1', 'kind': 'ResourceSlice', 'metadata': {'name': f'{namespace}-taint-gpu'},
        'spec': {'driver': DRIVER, 'nodeName': 'taint-gpu',
                 'pool': {'name': f'{namespace}-taint-gpu', 'generation': 1, 'resourceSliceCount': 1},
                 'devices': [{'name': 'gpu-0'}, {'name': 'gpu-1'}]}})
    taint = {'key': 'example.com/drain', 'value': 'planned', 'effect': 'NoSchedule'}
    create(cluster, f'{DRA}/devicetaintrules', {
        'apiVersion': 'resource.k8s.io/v1', 'kind': 'DeviceTaintRule', 'metadata': {'name': rule},
        'spec': {'deviceSelector': {'driver': DRIVER, 'pool': f'{namespace}-taint-gpu'}, 'taint': taint}})

    def claim(name: str, tolerations: list[dict[str, Any]]) -> dict[str, Any]:
        exactly: dict[str, Any] = {'deviceClassName': device_class}
        if tolerations:
            exactly['tolerations'] = tolerations
        return {'apiVersion': 'resource.k8s.io/v1', 'kind': 'ResourceClaim', 'metadata': {'name': name},
                'spec': {'devices': {'requests': [{'name': 'gpu', 'exactly': exactly}]}}}

    tolerate = {'key': 'example.com/drain', 'operator': 'Exists', 'effect': 'NoSchedule'}
    create(cluster, f'{DRA}/namespaces/{namespace}/resourceclaims', claim('plain', []), claim('tolerant', [tolerate]))
    try:
        with running_operator(cluster, operator_kubeconfig):
            for name in ('plain', 'tolerant'):
                cluster.post(f'/api/v1/namespaces/{namespace}/pods', make_pod(
                    name, namespace, scheduler_name='kopfsched', resourceClaims=[{'name': 'gpu',
                                                                                 'resourceClaimName': name}]))
            cluster.wait_for(lambda: node_of(cluster, namespace, 'tolerant'), timeout=30, what='tolerant bound')
            waiting = cluster.wait_for(lambda: pod_condition(cluster, namespace, 'plain').get('reason')
                                       == 'Unschedulable' and pod_condition(cluster, namespace, 'plain'),
                                       timeout=30, what='plain reported')
            assert node_of(cluster, namespace, 'plain') is None
            cluster.delete(f'{DRA}/devicetaintrules/{rule}')
            cluster.wait_for(lambda: node_of(cluster, namespace, 'plain'), timeout=30,
                             what='plain bound once the rule is gone')
        tolerant = cluster.get(f'{DRA}/namespaces/{namespace}/resourceclaims/tolerant')
    finally:
        cluster.delete(f'{DRA}/devicetaintrules/{rule}')
        cluster.delete(f'{DRA}/resourceslices/{namespace}-taint-gpu')
        cluster.delete(f'{DRA}/deviceclasses/{device_class}')
    assert waiting['message'].startswith('0/'), waiting['message']
    assert 'cannot allocate all claims' in waiting['message'], waiting['message']
    [result] = tolerant['status']['allocation']['devices']['results']
    assert (result['device'], result['tolerations']) == ('gpu-0', [tolerate])
    assert refused_requests(cluster) == []


def test_volumes_bound_with_wait_for_first_consumer_and_the_real_pv_controller(
        cluster: ControlPlane, namespace: str, nodes, operator_kubeconfig: pathlib.Path) -> None:
    nodes(make_node('vol-0', cpu='4'))
    nodes(make_node('vol-1', cpu='4'))
    static, dynamic = f'{namespace}-static', f'{namespace}-dynamic'
    create(cluster, '/apis/storage.k8s.io/v1/storageclasses',
           {'apiVersion': 'storage.k8s.io/v1', 'kind': 'StorageClass', 'metadata': {'name': static},
            'provisioner': 'kubernetes.io/no-provisioner', 'volumeBindingMode': 'WaitForFirstConsumer'},
           {'apiVersion': 'storage.k8s.io/v1', 'kind': 'StorageClass', 'metadata': {'name': dynamic},
            'provisioner': 'provisioner.kubeenv.test', 'volumeBindingMode': 'WaitForFirstConsumer'})
    pv = f'{namespace}-local'
    create(cluster, '/api/v1/persistentvolumes', {
        'apiVersion': 'v1', 'kind': 'PersistentVolume', 'metadata': {'name': pv},
        'spec': {'capacity': {'storage': '1Gi'}, 'accessModes': ['ReadWriteOnce'], 'storageClassName': static,
                 'local': {'path': '/mnt/disk'}, 'persistentVolumeReclaimPolicy': 'Retain',
                 'nodeAffinity': {'required': {'nodeSelectorTerms': [{'matchExpressions': [
                     {'key': 'kubernetes.io/hostname', 'operator': 'In', 'values': ['vol-1']}]}]}}}})
    claims = f'/api/v1/namespaces/{namespace}/persistentvolumeclaims'
    for name, storage_class in (('data', static), ('scratch', dynamic)):
        create(cluster, claims, {'apiVersion': 'v1', 'kind': 'PersistentVolumeClaim', 'metadata': {'name': name},
                                 'spec': {'accessModes': ['ReadWriteOnce'], 'storageClassName': storage_class,
                                          'resources': {'requests': {'storage': '1Gi'}}}})
    stop = threading.Event()
    provisioner = threading.Thread(target=_provision, args=(cluster, namespace, 'scratch', dynamic, stop), daemon=True)
    provisioner.start()
    try:
        with running_operator(cluster, operator_kubeconfig):
            for name, claim in (('db', 'data'), ('cache', 'scratch')):
                body = make_pod(name, namespace, scheduler_name='kopfsched')
                body['spec']['volumes'] = [{'name': 'v', 'persistentVolumeClaim': {'claimName': claim}}]
                cluster.post(f'/api/v1/namespaces/{namespace}/pods', body)
            cluster.wait_for(lambda: node_of(cluster, namespace, 'db') and node_of(cluster, namespace, 'cache'),
                             timeout=60, what='both pods bound')
            cluster.wait_for(lambda: all(cluster.get(f'{claims}/{c}')['status'].get('phase') == 'Bound'
                                         for c in ('data', 'scratch')), timeout=30, what='both claims Bound')
        scratch = cluster.get(f'{claims}/scratch')
    finally:
        stop.set()
        provisioner.join(timeout=10)
        for name in (static, dynamic):
            cluster.delete(f'/apis/storage.k8s.io/v1/storageclasses/{name}')
    assert node_of(cluster, namespace, 'db') == 'vol-1'
    assert cluster.get(f'{claims}/data')['spec']['volumeName'] == pv
    assert cluster.get(f'/api/v1/persistentvolumes/{pv}')['spec']['claimRef']['name'] == 'data'
    # The dynamic claim: the scheduler chose the node, the provisioner made the volume there.
    assert scratch['metadata']['annotations']['volume.kubernetes.io/selected-node'] == node_of(
        cluster, namespace, 'cache')
    assert bindings(cluster, namespace) == {'db': [(OPERATOR_USER, 201)], 'cache': [(OPERATOR_USER, 201)]}
    assert refused_requests(cluster) == []


def _provision(cluster: ControlPlane, namespace: str, claim: str, storage_class: str,
               stop: threading.Event) -> None:
    """An external provisioner of one claim: once the scheduler annotated the node it chose,
    a PV on that node, pre-bound to the claim (the PV controller completes the binding)."""
    path = f'/api/v1/namespaces/{namespace}/persistentvolumeclaims/{claim}'
    while not stop.wait(0.2):
        pvc = cluster.get(path) or {}
        node = (pvc.get('metadata', {}).get('annotations') or {}).get('volume.kubernetes.io/selected-node')
        if not node:
            continue
        cluster.post('/api/v1/persistentvolumes', {
            'apiVersion': 'v1', 'kind': 'PersistentVolume',
            'metadata': {'name': f'pvc-{pvc["metadata"]["uid"]}',
                         'annotations': {'pv.kubernetes.io/provisioned-by': 'provisioner.kubeenv.test'}},
            'spec': {'capacity': {'storage': '1Gi'}, 'accessModes': ['ReadWriteOnce'],
                     'storageClassName': storage_class, 'persistentVolumeReclaimPolicy': 'Delete',
                     'hostPath': {'path': f'/tmp/{pvc["metadata"]["uid"]}'},
                     'claimRef': {'namespace': namespace, 'name': claim, 'uid': pvc['metadata']['uid']},
                     'nodeAffinity': {'required': {'nodeSelectorTerms': [{'matchExpressions': [
                         {'key': 'kubernetes.io/hostname', 'operator': 'In', 'values': [node]}]}]}}}})
        return
