"""Namespace lifecycle, as kube-apiserver and the namespace controller run it.

- A namespace is created `Active` with the `kubernetes` finalizer in `spec.finalizers` and the
  label `kubernetes.io/metadata.name: <name>`, which updates cannot take off
  (pkg/registry/core/namespace/strategy.go).
- DELETE marks it: deletionTimestamp, `status.phase: Terminating` (its REST Delete). The
  namespace controller then deletes everything in it (pods gracefully) and, once nothing is
  left, drops its finalizer, and the namespace goes. The emulator does the controller's part
  at once, inside the DELETE; what holds a namespace is what holds a real one: pods in their
  grace period and objects with finalizers.
- While it terminates, the NamespaceLifecycle admission plugin refuses every create in it,
  subresources too (a pod's binding): 403, reason Forbidden, with the cause
  `NamespaceTerminating` (staging/src/k8s.io/apiserver/pkg/admission/plugin/namespace/
  lifecycle/admission.go). Updates and deletes pass.
"""
from __future__ import annotations

from kopfsched.emulator.resources import ResourceDef
from kopfsched.emulator.store import ApiError, Obj

FINALIZER = 'kubernetes'
NAME_LABEL = 'kubernetes.io/metadata.name'
ACTIVE, TERMINATING = 'Active', 'Terminating'


def is_namespace(resource: ResourceDef) -> bool:
    return resource.plural == 'namespaces' and resource.group == ''


def with_create_defaults(namespace: Obj) -> Obj:
    """What the API server stores for a new namespace: phase Active, the `kubernetes` finalizer,
    the name label."""
    spec = dict(namespace.get('spec') or {})
    finalizers = list(spec.get('finalizers') or ())
    if FINALIZER not in finalizers:
        finalizers.append(FINALIZER)
    spec['finalizers'] = finalizers
    return {**with_name_label(namespace), 'spec': spec, 'status': {'phase': ACTIVE}}


def with_name_label(namespace: Obj) -> Obj:
    metadata = namespace['metadata']
    return {**namespace, 'metadata': {**metadata, 'labels': {**(metadata.get('labels') or {}),
                                                             NAME_LABEL: metadata['name']}}}


def is_terminating(namespace: Obj | None) -> bool:
    return namespace is not None and (namespace.get('status') or {}).get('phase') == TERMINATING


def terminating_forbidden(resource: ResourceDef, name: str, namespace: str) -> ApiError:
    """NamespaceLifecycle's answer to a create in a terminating namespace (admission.NewForbidden:
    the object's name, else its generateName, else "Unknown")."""
    qualified = f'{resource.plural}.{resource.group}' if resource.group else resource.plural
    group = {'group': resource.group} if resource.group else {}  # omitted when empty, as in the API's JSON
    return ApiError(403, f'{qualified} "{name}" is forbidden: unable to create new content in namespace '
                         f'{namespace} because it is being terminated',
                    details={'name': name, **group, 'kind': resource.plural,
                             'causes': [{'reason': 'NamespaceTerminating',
                                         'message': f'namespace {namespace} is being terminated',
                                         'field': 'metadata.namespace'}]})
