"""The resources the emulated API serves: built-in ones, and those that CRDs register."""
from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

ALL_VERBS = ('create', 'delete', 'deletecollection', 'get', 'list', 'patch', 'update', 'watch')


@dataclasses.dataclass(frozen=True, kw_only=True)
class ResourceDef:
    """One served group/version/plural, as the discovery documents describe it."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    singular: str = ''
    short_names: tuple[str, ...] = ()
    # 'status' separates status writes from main-resource writes; 'binding' is pods only.
    subresources: frozenset[str] = frozenset()
    verbs: tuple[str, ...] = ALL_VERBS
    custom: bool = False  # served for a CustomResourceDefinition

    @property
    def api_version(self) -> str:
        return f'{self.group}/{self.version}' if self.group else self.version

    @property
    def store_key(self) -> tuple[str, str]:
        """Versions of one group/plural share their objects, as in etcd."""
        return self.group, self.plural

    def discovery_entries(self) -> list[dict[str, Any]]:
        main = {
            'name': self.plural, 'singularName': self.singular or self.kind.lower(), 'namespaced': self.namespaced,
            'kind': self.kind, 'verbs': list(self.verbs), 'shortNames': list(self.short_names),
        }
        entries = [main]
        if 'status' in self.subresources:
            entries.append({'name': f'{self.plural}/status', 'singularName': '', 'namespaced': self.namespaced,
                            'kind': self.kind, 'verbs': ['get', 'patch', 'update']})
        if 'binding' in self.subresources:
            entries.append({'name': f'{self.plural}/binding', 'singularName': '', 'namespaced': self.namespaced,
                            'kind': 'Binding', 'verbs': ['create']})
        return entries


def _core(plural: str, kind: str, *, namespaced: bool = True, status: bool = False, **kwargs: Any) -> ResourceDef:
    return _res('', 'v1', plural, kind, namespaced=namespaced, status=status, **kwargs)


def _res(group: str, version: str, plural: str, kind: str, *, namespaced: bool = True, status: bool = False,
         **kwargs: Any) -> ResourceDef:
    subresources = set(kwargs.pop('subresources', ()))
    if status:
        subresources.add('status')
    return ResourceDef(group=group, version=version, plural=plural, kind=kind, namespaced=namespaced,
                       subresources=frozenset(subresources), **kwargs)


BUILTIN_RESOURCES: tuple[ResourceDef, ...] = (
    _core('pods', 'Pod', status=True, subresources={'binding'}, short_names=('po',)),
    _core('bindings', 'Binding', verbs=('create',)),
    _core('nodes', 'Node', namespaced=False, status=True, short_names=('no',)),
    _core('namespaces', 'Namespace', namespaced=False, status=True, short_names=('ns',)),
    _core('events', 'Event', short_names=('ev',)),
    _core('configmaps', 'ConfigMap', short_names=('cm',)),
    _core('secrets', 'Secret'),
    _core('serviceaccounts', 'ServiceAccount', short_names=('sa',)),
    _core('services', 'Service', status=True, short_names=('svc',)),
    _core('persistentvolumes', 'PersistentVolume', namespaced=False, status=True, short_names=('pv',)),
    _core('persistentvolumeclaims', 'PersistentVolumeClaim', status=True, short_names=('pvc',)),
    _res('events.k8s.io', 'v1', 'events', 'Event', short_names=('ev',)),
    _res('coordination.k8s.io', 'v1', 'leases', 'Lease'),
    _res('apps', 'v1', 'deployments', 'Deployment', status=True, short_names=('deploy',)),
    _res('rbac.authorization.k8s.io', 'v1', 'clusterroles', 'ClusterRole', namespaced=False),
    _res('rbac.authorization.k8s.io', 'v1', 'clusterrolebindings', 'ClusterRoleBinding', namespaced=False),
    _res('rbac.authorization.k8s.io', 'v1', 'roles', 'Role'),
    _res('rbac.authorization.k8s.io', 'v1', 'rolebindings', 'RoleBinding'),
    _res('storage.k8s.io', 'v1', 'storageclasses', 'StorageClass', namespaced=False, short_names=('sc',)),
    _res('storage.k8s.io', 'v1', 'csinodes', 'CSINode', namespaced=False),
    _res('storage.k8s.io', 'v1', 'volumeattachments', 'VolumeAttachment', namespaced=False),
    _res('storage.k8s.io', 'v1', 'csidrivers', 'CSIDriver', namespaced=False),
    _res('storage.k8s.io', 'v1', 'csistoragecapacities', 'CSIStorageCapacity'),
    _res('policy', 'v1', 'poddisruptionbudgets', 'PodDisruptionBudget', status=True, short_names=('pdb',)),
    _res('scheduling.k8s.io', 'v1', 'priorityclasses', 'PriorityClass', namespaced=False, short_names=('pc',)),
    # Dynamic Resource Allocation, as v1.34 serves it (GA).
    _res('resource.k8s.io', 'v1', 'deviceclasses', 'DeviceClass', namespaced=False),
    _res('resource.k8s.io', 'v1', 'resourceclaims', 'ResourceClaim', status=True),
    _res('resource.k8s.io', 'v1', 'resourceclaimtemplates', 'ResourceClaimTemplate'),
    _res('resource.k8s.io', 'v1', 'resourceslices', 'ResourceSlice', namespaced=False),
    _res('resource.k8s.io', 'v1', 'devicetaintrules', 'DeviceTaintRule', namespaced=False, status=True),
    _res('flowcontrol.apiserver.k8s.io', 'v1', 'flowschemas', 'FlowSchema', namespaced=False, status=True),
    _res('flowcontrol.apiserver.k8s.io', 'v1', 'prioritylevelconfigurations', 'PriorityLevelConfiguration',
         namespaced=False, status=True),
    _res('apiextensions.k8s.io', 'v1', 'customresourcedefinitions', 'CustomResourceDefinition',
         namespaced=False, status=True, short_names=('crd', 'crds')),
)


def resources_of_crd(crd: Mapping[str, Any]) -> list[ResourceDef]:
    """The resources a CustomResourceDefinition serves: one per served version."""
    spec = crd.get('spec') or {}
    names = spec.get('names') or {}
    return [
        ResourceDef(
            group=spec['group'], version=version['name'], plural=names['plural'], kind=names['kind'],
            singular=names.get('singular') or names['kind'].lower(),
            short_names=tuple(names.get('shortNames') or ()), namespaced=spec.get('scope') == 'Namespaced',
            subresources=frozenset({'status'} if 'status' in (version.get('subresources') or {}) else ()),
            custom=True,
        )
        for version in spec.get('versions') or ()
        if version.get('served', True)
    ]


def crd_status(crd: Mapping[str, Any]) -> dict[str, Any]:
    """What the apiextensions controller reports once it accepted a CRD's names."""
    spec = crd.get('spec') or {}
    storage = [v['name'] for v in spec.get('versions') or () if v.get('storage')]
    return {
        'acceptedNames': dict(spec.get('names') or {}),
        'storedVersions': storage,
        'conditions': [
            {'type': 'NamesAccepted', 'status': 'True', 'reason': 'NoConflicts', 'message': 'no conflicts found'},
            {'type': 'Established', 'status': 'True', 'reason': 'InitialNamesAccepted',
             'message': 'the initial names have been accepted'},
        ],
    }


def group_versions(resources: Iterable[ResourceDef]) -> dict[str, list[str]]:
    """Non-core groups and their versions, in registration order (the first is preferred)."""
    groups: dict[str, list[str]] = {}
    for resource in resources:
        if resource.group and resource.version not in groups.setdefault(resource.group, []):
            groups[resource.group].append(resource.version)
    return groups
