"""RBAC, as kube-apiserver's authorizer evaluates it, for an emulator started with `authorization=True`.

Off by default (every request is the admin's). On, a request's bearer token names its user:
a token from `FastKubernetesEmulator.service_account_token(namespace, name)` is that
ServiceAccount (`system:serviceaccount:<ns>:<name>`, groups `system:serviceaccounts`,
`system:serviceaccounts:<ns>`, `system:authenticated`); no token, or the kubeconfig's
`emulator` token, is the admin (`system:masters`); any other token is 401 Unauthorized.
A resource request is then allowed when a rule of a (Cluster)Role bound to the user, one of
its groups or its ServiceAccount allows it: ClusterRoleBindings everywhere, RoleBindings in
their namespace (plugin/pkg/auth/authorizer/rbac/rbac.go and its rule matching:
verbs, apiGroups, `resource/subresource` or `*/subresource`, resourceNames). Refusals are
upstream's 403 word for word (apiserver's responsewriters.forbiddenMessage). Non-resource
paths (discovery, /version, /openapi, health) are open to every authenticated user, as the
bootstrap roles system:discovery and system:public-info-viewer make them. Aggregated
ClusterRoles and the Node authorizer are not emulated.

The same authorizer answers the checks the API server makes inside a write: a ResourceClaim
status write that changes `allocation` or `reservedFor` needs the request's verb on the
synthetic `resourceclaims/binding` subresource, cluster-wide
(DRAResourceClaimGranularStatusAuthorization, beta and on since v1.36:
pkg/registry/resource/utils.go AuthorizedForBinding), else 422 Invalid.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from typing import Any

from kopfsched.emulator.store import ApiError, ApiPath, Obj, ObjKey, StoreKey

RBAC = 'rbac.authorization.k8s.io'
ADMIN_TOKEN = 'emulator'
"""The token `write_kubeconfig` writes by default: the admin's."""


@dataclasses.dataclass(frozen=True)
class User:
    name: str
    groups: tuple[str, ...] = ()


ADMIN = User('system:admin', ('system:masters', 'system:authenticated'))


def service_account(namespace: str, name: str) -> User:
    return User(f'system:serviceaccount:{namespace}:{name}',
                ('system:serviceaccounts', f'system:serviceaccounts:{namespace}', 'system:authenticated'))


@dataclasses.dataclass(frozen=True)
class Attributes:
    """What the authorizer is asked (authorizer.Attributes of a resource request)."""

    user: User
    verb: str
    group: str
    resource: str
    subresource: str = ''
    namespace: str = ''
    name: str = ''


def request_attributes(user: User, method: str, query: Mapping[str, str], parsed: ApiPath) -> Attributes:
    """apiserver's RequestInfo: the verb from the method (get/list/watch by name and the watch
    parameter, deletecollection without a name), and a namespace object's name as its namespace."""
    watch = (query.get('watch') or '').lower() in ('true', '1')
    match method:
        case 'GET' | 'HEAD':
            verb = 'watch' if watch else 'get' if parsed.name else 'list'
        case 'POST':
            verb = 'create'
        case 'PUT':
            verb = 'update'
        case 'PATCH':
            verb = 'patch'
        case 'DELETE':
            verb = 'delete' if parsed.name else 'deletecollection'
        case _:
            verb = method.lower()
    namespace = parsed.namespace or ''
    if parsed.plural == 'namespaces' and parsed.group == '' and parsed.name:
        namespace = parsed.name
    return Attributes(user=user, verb=verb, group=parsed.group, resource=parsed.plural or '',
                      subresource=parsed.subresource or '', namespace=namespace, name=parsed.name or '')


def allowed(store: Mapping[StoreKey, Mapping[ObjKey, Obj]], attrs: Attributes) -> bool:
    if 'system:masters' in attrs.user.groups:
        return True
    return any(_rule_allows(rule, attrs) for rule in _rules_for(store, attrs.user, attrs.namespace))


def forbidden_message(attrs: Attributes) -> str:
    """responsewriters.forbiddenMessage of a resource request."""
    resource = f'{attrs.resource}/{attrs.subresource}' if attrs.subresource else attrs.resource
    scope = f'in the namespace "{attrs.namespace}"' if attrs.namespace else 'at the cluster scope'
    return f'User "{attrs.user.name}" cannot {attrs.verb} resource "{resource}" in API group "{attrs.group}" {scope}'


def forbidden(attrs: Attributes) -> ApiError:
    """apierrors.NewForbidden(group/resource, name, forbiddenMessage): the authorization filter's 403."""
    qualified = f'{attrs.resource}.{attrs.group}' if attrs.group else attrs.resource
    named = f'{qualified} "{attrs.name}"' if attrs.name else qualified
    details = {k: v for k, v in (('name', attrs.name), ('group', attrs.group), ('kind', attrs.resource)) if v}
    return ApiError(403, f'{named} is forbidden: {forbidden_message(attrs)}', details=details)


def claim_binding_problem(store: Mapping[StoreKey, Mapping[ObjKey, Obj]], user: User, verb: str,
                          old: Obj, new: Obj) -> str | None:
    """AuthorizedForBinding's field error for a ResourceClaim status write, or None when allowed."""
    before, after = old.get('status') or {}, new.get('status') or {}
    if all(before.get(field) == after.get(field) for field in ('allocation', 'reservedFor')):
        return None
    attrs = Attributes(user=user, verb=verb, group='resource.k8s.io', resource='resourceclaims',
                       subresource='binding')
    if allowed(store, attrs):
        return None
    return (f'status.allocation: Forbidden: changing status.allocation or status.reservedFor requires '
            f'resource="resourceclaims/binding", verb="{verb}" permission: {forbidden(attrs).message}')


def _rules_for(store: Mapping[StoreKey, Mapping[ObjKey, Obj]], user: User, namespace: str) -> Iterator[Obj]:
    """The rules of every role bound to the user: cluster-wide bindings, then the namespace's."""
    cluster_roles = store.get((RBAC, 'clusterroles'), {})
    roles = store.get((RBAC, 'roles'), {})
    for binding in store.get((RBAC, 'clusterrolebindings'), {}).values():
        if _binds(binding, user, binding_namespace=''):
            role_ref = binding.get('roleRef') or {}
            if role_ref.get('kind') == 'ClusterRole':
                yield from (cluster_roles.get((None, role_ref.get('name', ''))) or {}).get('rules') or ()
    if not namespace:
        return
    for (binding_ns, _), binding in store.get((RBAC, 'rolebindings'), {}).items():
        if binding_ns != namespace or not _binds(binding, user, binding_namespace=namespace):
            continue
        role_ref = binding.get('roleRef') or {}
        role = cluster_roles.get((None, role_ref.get('name', ''))) if role_ref.get('kind') == 'ClusterRole' else \
            roles.get((namespace, role_ref.get('name', ''))) if role_ref.get('kind') == 'Role' else None
        yield from (role or {}).get('rules') or ()


def _binds(binding: Obj, user: User, *, binding_namespace: str) -> bool:
    """rbac.appliesToUser: a User by name, a Group the user is in, a ServiceAccount (its
    namespace defaulting to the binding's)."""
    for subject in binding.get('subjects') or ():
        kind, name = subject.get('kind'), subject.get('name', '')
        if kind == 'User' and name == user.name:
            return True
        if kind == 'Group' and name in user.groups:
            return True
        if kind == 'ServiceAccount':
            namespace = subject.get('namespace') or binding_namespace
            if namespace and user.name == f'system:serviceaccount:{namespace}:{name}':
                return True
    return False


def _rule_allows(rule: Mapping[str, Any], attrs: Attributes) -> bool:
    """rbacv1helpers' VerbMatches, APIGroupMatches, ResourceMatches and ResourceNameMatches."""
    verbs, groups = rule.get('verbs') or (), rule.get('apiGroups') or ()
    if not ('*' in verbs or attrs.verb in verbs) or not ('*' in groups or attrs.group in groups):
        return False
    combined = f'{attrs.resource}/{attrs.subresource}' if attrs.subresource else attrs.resource
    if not any(r == '*' or r == combined or (attrs.subresource and r == f'*/{attrs.subresource}')
               for r in rule.get('resources') or ()):
        return False
    names = rule.get('resourceNames') or ()
    return not names or attrs.name in names
