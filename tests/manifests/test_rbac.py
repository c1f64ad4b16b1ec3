"""The ClusterRole and Role grant exactly what the kube layer calls, nothing more: every
request of the ClusterClient, the operator's own LIST (its periodic reconcile), the leader elector
and the secure port's reviews (recorded through a fake ApiClient), list + watch for every kind kopf
watches, and kopf's CRD scan."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest
from kubernetes_asyncio.client import Configuration
from kubernetes_asyncio.client.rest import ApiException

from kopfsched.kube.client import KubeClusterClient
from kopfsched.kube.delegation import ApiServerReviews
from kopfsched.kube.handlers import PROFILE_KIND, WATCHED
from kopfsched.kube.leader import LeaderElector, LeaseConfig
from kopfsched.kube.operator import Operator, OperatorOptions
from tests.manifests.install import NAMESPACE, granted, the

VERBS = {"GET": "get", "POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}
PATH = re.compile(r"^/(?:api/(?P<core>v1)|apis/(?P<group>[^/]+)/[^/]+)"
                  r"(?:/namespaces/(?P<namespace>[^/]+))?/(?P<resource>[^/]+)(?:/(?P<name>[^/]+)(?:/(?P<sub>[^/]+))?)?$")
KOPF_DISCOVERY = {("apiextensions.k8s.io", "customresourcedefinitions"): {"list", "watch"}}
"""kopf lists and watches CRDs to find the resources it serves (settings.scanning)."""


def rbac_key(method: str, path: str) -> tuple[str, str, str, str | None]:
    """(group, resource[/subresource], verb, namespace) of one API request."""
    match = PATH.match(path)
    assert match, path
    group = "" if match["core"] else match["group"]
    resource = match["resource"] + (f"/{match['sub']}" if match["sub"] else "")
    verb = "list" if method == "GET" and match["name"] is None else VERBS[method]
    return group, resource, verb, match["namespace"]


class RecordingApi:
    """A kubernetes_asyncio ApiClient stand-in: records (method, path) and answers like
    an API server would, including 404 for a Lease that does not exist yet."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []
        self.lease: dict[str, Any] | None = None

    async def call_api(self, path: str, method: str, *, body: Any = None, **_: Any) -> Any:
        self.calls.append((method, path))
        if "/leases" in path:
            if method == "GET" and self.lease is None:
                raise ApiException(status=404, reason="Not Found")
            if method in {"POST", "PUT"}:
                self.lease = {**body, "metadata": {**body["metadata"], "resourceVersion": "1"}}
            return self.lease
        if path.endswith("/tokenreviews"):
            return {**body, "status": {"authenticated": True, "user": {"username": "prometheus"}}}
        return body if isinstance(body, dict) else {}


POD = {"apiVersion": "v1", "kind": "Pod",
       "metadata": {"name": "p", "namespace": "default", "uid": "u1", "resourceVersion": "1"}}
PV = {"metadata": {"name": "pv-1"}}
PVC = {"metadata": {"name": "claim", "namespace": "default"}}


async def exercise_client(api: RecordingApi) -> None:
    client = KubeClusterClient(api, instance="test")  # type: ignore[arg-type]
    await client.bind(pod=POD, node_name="node-1")
    await client.patch_pod_status(pod=POD, condition={"type": "PodScheduled", "status": "False"},
                                  nominated_node_name="node-2")
    await client.delete_pod(pod=POD)
    await client.patch_object(kind="PersistentVolume", obj=PV, patch={"spec": {}})
    await client.patch_object(kind="PersistentVolumeClaim", obj=PVC, patch={"metadata": {}})
    await client.patch_object(kind="ResourceClaim", obj=PVC, patch={"metadata": {"finalizers": []}})
    await client.patch_object(kind="ResourceClaim", obj=PVC, patch={"status": {"reservedFor": []}})
    await client.create_object(kind="ResourceClaim", obj={"metadata": {"generateName": "p-extended-resources-",
                                                                       "namespace": "default"}})
    await client.delete_object(kind="ResourceClaim", obj=PVC)
    for _ in range(2):  # the second occurrence updates the Event's series
        await client.record_event(regarding=POD, type="Warning", reason="FailedScheduling", action="Scheduling",
                                  message="0/1 nodes are available", reporting_controller="kopfsched")
    await client.patch_profile_status(name="kopfsched", status={"observedGeneration": 1})
    await client.patch_pod_group_status(namespace="default", name="gang", status={"phase": "Scheduled"})


async def exercise_operator_listing(api: RecordingApi) -> None:
    """The operator's own requests besides kopf's list and watch: the periodic reconcile's LIST of
    every watched kind, and the default SchedulerProfile created when none is listed."""
    operator = Operator(OperatorOptions(metrics_port=None, identity="test"), api=api,  # type: ignore[arg-type]
                        configuration=Configuration())
    await operator.informer.reconcile()
    await operator.informer.create_default_profile()


async def exercise_secure_port(api: RecordingApi) -> None:
    """What the secure port's DelegatedAuth asks of the kube layer for one scrape."""
    reviews = ApiServerReviews(KubeClusterClient(api, instance="test"))  # type: ignore[arg-type]
    user = await reviews.authenticate("a-token")
    assert user is not None
    await reviews.authorize(user, "get", "/metrics")


async def exercise_leader_election(api: RecordingApi) -> None:
    client = KubeClusterClient(api, instance="test")  # type: ignore[arg-type]
    stop = asyncio.Event()
    first = LeaderElector(client, config=LeaseConfig(), identity="a")
    assert await first.acquire(stop)  # creates the Lease
    await first.release()  # updates it
    second = LeaderElector(client, config=LeaseConfig(), identity="b")
    assert await second.acquire(stop)  # reads, then updates the released Lease


@pytest.fixture(scope="module")
def requests() -> list[tuple[str, str, str, str | None]]:
    api = RecordingApi()

    async def run() -> None:
        await exercise_client(api)
        await exercise_operator_listing(api)
        await exercise_leader_election(api)
        await exercise_secure_port(api)

    asyncio.run(run())
    return [rbac_key(method, path) for method, path in api.calls]


def used_cluster_wide(requests) -> dict[tuple[str, str], set[str]]:
    used: dict[tuple[str, str], set[str]] = {}
    for group, resource, verb, _ in requests:
        if (group, resource) != ("coordination.k8s.io", "leases"):
            used.setdefault((group, resource), set()).add(verb)
    for watched in (*WATCHED, PROFILE_KIND):
        group = watched.group_version.split("/")[0] if "/" in watched.group_version else ""
        used.setdefault((group, watched.plural), set()).update({"list", "watch"})
    for key, verbs in KOPF_DISCOVERY.items():
        used.setdefault(key, set()).update(verbs)
    for (key, verb), implied in IMPLIED.items():
        if verb in used.get(key, ()):
            used.setdefault(implied, set()).add(verb)
    return used


IMPLIED = {(("resource.k8s.io", "resourceclaims/status"), "patch"): ("resource.k8s.io", "resourceclaims/binding")}
"""Permissions the API server checks beyond the request's own path: a write of a claim's
status.allocation or reservedFor also needs resourceclaims/binding (found on a real v1.37 server)."""


def test_requests_were_recorded(requests):
    assert ("", "pods/binding", "create", "default") in requests
    assert ("authentication.k8s.io", "tokenreviews", "create", None) in requests
    assert ("authorization.k8s.io", "subjectaccessreviews", "create", None) in requests
    assert ("", "pods", "list", None) in requests
    assert ("coordination.k8s.io", "leases", "create", NAMESPACE) in requests


def test_cluster_role_grants_exactly_what_the_code_uses(requests):
    assert granted(the("ClusterRole")["rules"]) == used_cluster_wide(requests)


def test_role_grants_exactly_the_lease_calls_in_our_namespace(requests):
    leases = {(group, resource, verb, namespace) for group, resource, verb, namespace in requests
              if resource == "leases"}
    assert {namespace for *_, namespace in leases} == {the("Role")["metadata"]["namespace"]}
    assert granted(the("Role")["rules"]) == {("coordination.k8s.io", "leases"): {verb for _, _, verb, _ in leases}}


def test_the_lease_calls_name_only_the_lease_the_role_names():
    """get and update go to one named Lease, the one the Role's resourceNames allows."""
    api = RecordingApi()
    asyncio.run(exercise_leader_election(api))
    named = {(VERBS[method], PATH.match(path)["name"]) for method, path in api.calls if "/leases" in path}
    [limited] = [rule for rule in the("Role")["rules"] if "resourceNames" in rule]
    assert {name for verb, name in named if verb in ("get", "update")} == set(limited["resourceNames"])
    assert {verb for verb, name in named if name is None} == {"create"}
