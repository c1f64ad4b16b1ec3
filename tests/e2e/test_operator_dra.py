"""DynamicResources end to end: the operator watches DeviceClasses, ResourceSlices and
ResourceClaims from the API emulator, keeps a pod whose claim is missing out of the active
queue until the claim is created, allocates, and writes the claim's finalizer, allocation
and reservedFor through the API before binding; a pod that wants a device already taken
waits until a new ResourceSlice brings one."""
from __future__ import annotations

import pathlib
from typing import Any

import aiohttp
import pytest
import yaml

from kopfsched.emulator.server import FastKubernetesEmulator, write_kubeconfig
from tests.builders import make_node, make_pod
from tests.conftest import ROOT
from tests.e2e.operator_harness import (
    eventually,
    node_of,
    patch,
    post,
    running_operator,
)

PODS = '/api/v1/namespaces/default/pods'
DRA = '/apis/resource.k8s.io/v1'
CLAIMS = f'{DRA}/namespaces/default/resourceclaims'
DRIVER = 'gpu.example.com'


def gpu_slice(node: str, *devices: str) -> dict[str, Any]:
    return {'apiVersion': 'resource.k8s.io/v1', 'kind': 'ResourceSlice', 'metadata': {'name': f'{node}-gpus'},
            'spec': {'driver': DRIVER, 'nodeName': node, 'pool': {'name': node, 'generation': 1,
                                                                  'resourceSliceCount': 1},
                     'devices': [{'name': d, 'attributes': {'model': {'string': 'A100'}}} for d in devices]}}


def gpu_claim(name: str) -> dict[str, Any]:
    return {'apiVersion': 'resource.k8s.io/v1', 'kind': 'ResourceClaim', 'metadata': {'name': name},
            'spec': {'devices': {'requests': [{'name': 'gpu', 'exactly': {
                'deviceClassName': 'gpu', 'selectors': [{'cel': {
                    'expression': f'device.attributes["{DRIVER}"].model == "A100"'}}]}}]}}}


def gpu_pod(name: str, claim: str) -> dict[str, Any]:
    return make_pod(name, scheduler_name='kopfsched', resourceClaims=[{'name': 'gpu', 'resourceClaimName': claim}])


def claim_of(emulator: FastKubernetesEmulator, name: str) -> dict[str, Any]:
    return emulator.get_object('resourceclaims', 'default', name, group='resource.k8s.io') or {}


async def one_gpu_on_gpu_1_and_claim_first(http: aiohttp.ClientSession) -> None:
    """The DeviceClass `gpu`, one A100 on node gpu-1 and the claim `first` asking for it."""
    await post(http, f'{DRA}/deviceclasses', {'apiVersion': 'resource.k8s.io/v1', 'kind': 'DeviceClass',
                                              'metadata': {'name': 'gpu'}, 'spec': {'selectors': [
                                                  {'cel': {'expression': f'device.driver == "{DRIVER}"'}}]}})
    await post(http, f'{DRA}/resourceslices', gpu_slice('gpu-1', 'gpu-0'))
    await post(http, CLAIMS, gpu_claim('first'))


async def test_claims_are_allocated_written_and_then_the_pods_bound(
        emulator: FastKubernetesEmulator, kubeconfig: Any, http: aiohttp.ClientSession) -> None:
    await post(http, '/api/v1/nodes', make_node('gpu-1'))
    await post(http, '/api/v1/nodes', make_node('cpu-1'))
    await one_gpu_on_gpu_1_and_claim_first(http)

    async with running_operator(kubeconfig) as operator:
        await post(http, PODS, gpu_pod('trainer', 'first'))
        # Its claim does not exist yet: PreEnqueue keeps it out until the claim is created.
        await post(http, PODS, gpu_pod('late', 'second'))
        await eventually(lambda: node_of(emulator, 'trainer'), what='trainer bound')
        assert node_of(emulator, 'trainer') == 'gpu-1'
        first = claim_of(emulator, 'first')
        assert first['metadata']['finalizers'] == ['resource.kubernetes.io/delete-protection']
        assert first['status']['allocation']['devices']['results'] == [
            {'request': 'gpu', 'driver': DRIVER, 'pool': 'gpu-1', 'device': 'gpu-0'}]
        assert [(r['resource'], r['name']) for r in first['status']['reservedFor']] == [('pods', 'trainer')]
        assert node_of(emulator, 'late') is None

        await post(http, CLAIMS, gpu_claim('second'))
        await eventually(lambda: operator.stats.of('kopfsched').unschedulable >= 1, what='late tried, no device')
        assert node_of(emulator, 'late') is None
        # A new slice brings a second GPU (on the other node): the pod comes back and fits there.
        await post(http, f'{DRA}/resourceslices', gpu_slice('cpu-1', 'gpu-0'))
        await eventually(lambda: node_of(emulator, 'late'), what='late bound after the new slice')
        assert node_of(emulator, 'late') == 'cpu-1'
        assert claim_of(emulator, 'second')['status']['allocation']['devices']['results'][0]['pool'] == 'cpu-1'
    # Allocation and reservation went to the status subresource, the finalizer to the claim.
    paths = sorted({m.path for m in emulator.mutations('PATCH', r'/resourceclaims/')})
    assert paths == [f'{CLAIMS}/first', f'{CLAIMS}/first/status', f'{CLAIMS}/second', f'{CLAIMS}/second/status']


def manifests_rbac(*, without: str | None = None) -> list[dict[str, Any]]:
    """manifests/' ClusterRole and ClusterRoleBinding, the rule naming `without` left out."""
    role, binding = (yaml.safe_load((ROOT / 'manifests' / name).read_text())
                     for name in ('02-clusterrole.yaml', '03-clusterrolebinding.yaml'))
    role['rules'] = [rule for rule in role['rules'] if without not in rule['resources']]
    return [role, binding]


@pytest.mark.emulator(authorization=True)
@pytest.mark.parametrize('without', [None, 'resourceclaims/binding'], ids=['manifests', 'without-claim-binding'])
async def test_as_its_service_account_the_operator_allocates_only_with_patch_on_resourceclaims_binding(
        emulator: FastKubernetesEmulator, http: aiohttp.ClientSession, tmp_path: pathlib.Path,
        without: str | None) -> None:
    """The operator with the token and RBAC users install, as tests/cluster runs it: a v1.37
    server refuses a claim's allocation without `patch resourceclaims/binding` (422), so the pod
    stays unbound; with manifests/ as written it is bound."""
    for body in manifests_rbac(without=without):
        await post(http, f'/apis/rbac.authorization.k8s.io/v1/{body["kind"].lower()}s', body)
    await post(http, '/api/v1/nodes', make_node('gpu-1'))
    await one_gpu_on_gpu_1_and_claim_first(http)
    token = emulator.service_account_token('kopfsched-system', 'kopfsched')
    kubeconfig = write_kubeconfig(tmp_path / 'operator.kubeconfig', url=emulator.url, token=token)
    async with running_operator(kubeconfig):
        await post(http, PODS, gpu_pod('trainer', 'first'))
        refused = lambda: [m.status for m in emulator.mutations('PATCH', r'/resourceclaims/first/status$')]  # noqa: E731
        if without is None:
            await eventually(lambda: node_of(emulator, 'trainer'), what='trainer bound')
        else:
            await eventually(lambda: 422 in refused(), what='the allocation refused')
    if without is None:
        assert node_of(emulator, 'trainer') == 'gpu-1'
        assert [(r['resource'], r['name']) for r in claim_of(emulator, 'first')['status']['reservedFor']] == [
            ('pods', 'trainer')]
        assert set(refused()) == {200}
        assert not [m for m in emulator.mutations() if m.status == 403]  # manifests/ grant all it asks for
    else:
        assert node_of(emulator, 'trainer') is None
        assert 'allocation' not in (claim_of(emulator, 'first').get('status') or {})
        assert set(refused()) == {422}


@pytest.mark.emulator(authorization=True)
async def test_an_extended_resource_backed_by_dra_gets_its_claim_created_allocated_and_recorded(
        emulator: FastKubernetesEmulator, http: aiohttp.ClientSession, tmp_path: pathlib.Path) -> None:
    """DRAExtendedResource, as its service account with manifests/' RBAC: a pod asking for
    `example.com/gpu: 1`, which no node advertises and the DeviceClass `gpu` provides, is bound
    where the device is; the operator created the pod's claim (generateName, owned by the pod),
    allocated and reserved it, and wrote the pod's status.extendedResourceClaimStatus."""
    for body in manifests_rbac():
        await post(http, f'/apis/rbac.authorization.k8s.io/v1/{body["kind"].lower()}s', body)
    await post(http, '/api/v1/nodes', make_node('gpu-1'))
    await post(http, '/api/v1/nodes', make_node('cpu-1'))
    selector = {'cel': {'expression': f'device.driver == "{DRIVER}"'}}
    await post(http, f'{DRA}/deviceclasses', {'apiVersion': 'resource.k8s.io/v1', 'kind': 'DeviceClass',
                                              'metadata': {'name': 'gpu'}, 'spec': {
                                                  'extendedResourceName': 'example.com/gpu', 'selectors': [selector]}})
    await post(http, f'{DRA}/resourceslices', gpu_slice('gpu-1', 'gpu-0'))
    token = emulator.service_account_token('kopfsched-system', 'kopfsched')
    kubeconfig = write_kubeconfig(tmp_path / 'operator.kubeconfig', url=emulator.url, token=token)
    async with running_operator(kubeconfig):
        await post(http, PODS, make_pod('trainer', scheduler_name='kopfsched',
                                        requests={'cpu': '100m', 'example.com/gpu': '1'}))
        await eventually(lambda: node_of(emulator, 'trainer'), what='trainer bound')
    assert node_of(emulator, 'trainer') == 'gpu-1'
    [claim] = emulator.list_objects('resourceclaims', group='resource.k8s.io', namespace='default')
    trainer = emulator.get_object('pods', 'default', 'trainer')
    meta = claim['metadata']
    assert meta['name'].startswith('trainer-extended-resources-') and len(meta['name']) == 32
    assert (meta['generateName'], meta['annotations'], meta['finalizers']) == (
        'trainer-extended-resources-', {'resource.kubernetes.io/extended-resource-claim': 'true'},
        ['resource.kubernetes.io/delete-protection'])
    assert meta['ownerReferences'] == [{'apiVersion': 'v1', 'kind': 'Pod', 'name': 'trainer',
                                        'uid': trainer['metadata']['uid'], 'controller': True}]
    assert claim['spec'] == {'devices': {'requests': [{'name': 'container-0-request-1', 'exactly': {
        'deviceClassName': 'gpu', 'allocationMode': 'ExactCount', 'count': 1}}]}}
    assert claim['status']['allocation']['devices']['results'] == [
        {'request': 'container-0-request-1', 'driver': DRIVER, 'pool': 'gpu-1', 'device': 'gpu-0'}]
    assert [(r['resource'], r['name']) for r in claim['status']['reservedFor']] == [('pods', 'trainer')]
    assert trainer['status']['extendedResourceClaimStatus'] == {
        'requestMappings': [{'containerName': 'c0', 'resourceName': 'example.com/gpu',
                             'requestName': 'container-0-request-1'}],
        'resourceClaimName': meta['name']}
    assert not [m for m in emulator.mutations() if m.status == 403]


async def test_a_device_with_binding_conditions_is_bound_once_its_controller_attaches_it(
        emulator: FastKubernetesEmulator, kubeconfig: Any, http: aiohttp.ClientSession) -> None:
    """DRADeviceBindingConditions: the operator allocates the device, stamps the allocation,
    reports BindingConditionsPending and holds the pod at PreBind until a controller sets the
    device's condition in the claim's status.devices (PreBind looks every 5 seconds)."""
    await post(http, '/api/v1/nodes', make_node('gpu-1'))
    await post(http, f'{DRA}/deviceclasses', {'apiVersion': 'resource.k8s.io/v1', 'kind': 'DeviceClass',
                                              'metadata': {'name': 'gpu'}, 'spec': {'selectors': [
                                                  {'cel': {'expression': f'device.driver == "{DRIVER}"'}}]}})
    attached = gpu_slice('gpu-1', 'gpu-0')
    attached['spec']['devices'][0].update(bindingConditions=['gpu.example.com/attached'],
                                          bindingFailureConditions=['gpu.example.com/failed'])
    await post(http, f'{DRA}/resourceslices', attached)
    await post(http, CLAIMS, gpu_claim('first'))
    async with running_operator(kubeconfig):
        await post(http, PODS, gpu_pod('trainer', 'first'))
        await eventually(lambda: 'allocation' in (claim_of(emulator, 'first').get('status') or {}),
                         what='the claim allocated')
        assert node_of(emulator, 'trainer') is None  # waiting at PreBind
        await patch(http, f'{CLAIMS}/first/status', {'status': {'devices': [{
            'driver': DRIVER, 'pool': 'gpu-1', 'device': 'gpu-0', 'conditions': [{
                'type': 'gpu.example.com/attached', 'status': 'True', 'reason': 'Attached', 'message': '',
                'lastTransitionTime': '2026-01-01T00:00:00Z'}]}]}})
        await eventually(lambda: node_of(emulator, 'trainer'), timeout=20, what='trainer bound once attached')
    allocation = claim_of(emulator, 'first')['status']['allocation']
    assert allocation['devices']['results'] == [{
        'request': 'gpu', 'driver': DRIVER, 'pool': 'gpu-1', 'device': 'gpu-0',
        'bindingConditions': ['gpu.example.com/attached'], 'bindingFailureConditions': ['gpu.example.com/failed']}]
    assert allocation['allocationTimestamp'].endswith('Z')
    events = emulator.list_objects('events', group='events.k8s.io', namespace='default')
    assert [(e['reason'], e['note']) for e in events if e['reason'] == 'BindingConditionsPending'] == [
        ('BindingConditionsPending', 'waiting for binding conditions for device on node gpu-1')]
