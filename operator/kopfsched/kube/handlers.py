"""kopf's registry and settings: the watch side of the operator.

One `@kopf.on.event` handler per watched kind, on a private OperatorRegistry: that is what
makes kopf discover, list and watch the kind, and kopf keeps no state on the objects of such
handlers (no annotations, finalizers, diff-base or status), so it never writes to pods, nodes,
volumes — nor to SchedulerProfiles, whose status we write ourselves. The handlers themselves
never run: kube.watches hands these kinds' listings and events to the informer's sink before
kopf's per-object processing (kopf runs in its own thread and loop, see kube.kopf_thread).
"""

from __future__ import annotations

import asyncio
import dataclasses
from dataclasses import dataclass
from typing import Any

import kopf
from kubernetes_asyncio import client as k8s

from kopfsched.kube.reachability import ApiReachability
from kopfsched.kube.watches import KopfschedSettings, WatchHealth, WatchSink

POD_FIELD_SELECTOR = "status.phase!=Succeeded,status.phase!=Failed"
"""kube-scheduler's pod informer leaves finished pods out."""


@dataclass(frozen=True, slots=True)
class WatchedKind:
    kind: str
    group_version: str
    plural: str


WATCHED: tuple[WatchedKind, ...] = (
    WatchedKind("Pod", "v1", "pods"),
    WatchedKind("Node", "v1", "nodes"),
    WatchedKind("PersistentVolume", "v1", "persistentvolumes"),
    WatchedKind("PersistentVolumeClaim", "v1", "persistentvolumeclaims"),
    WatchedKind("StorageClass", "storage.k8s.io/v1", "storageclasses"),
    WatchedKind("CSINode", "storage.k8s.io/v1", "csinodes"),
    WatchedKind("VolumeAttachment", "storage.k8s.io/v1", "volumeattachments"),
    # VolumeBinding's storage capacity check (drivers that publish capacity, and the capacity).
    WatchedKind("CSIDriver", "storage.k8s.io/v1", "csidrivers"),
    WatchedKind("CSIStorageCapacity", "storage.k8s.io/v1", "csistoragecapacities"),
    WatchedKind("Namespace", "v1", "namespaces"),
    WatchedKind("PodDisruptionBudget", "policy/v1", "poddisruptionbudgets"),
    # PodTopologySpread's System defaulting reads the selectors of these.
    WatchedKind("Service", "v1", "services"),
    WatchedKind("ReplicaSet", "apps/v1", "replicasets"),
    WatchedKind("StatefulSet", "apps/v1", "statefulsets"),
    WatchedKind("ReplicationController", "v1", "replicationcontrollers"),
    # DynamicResources: devices (slices), their classes, the claims it allocates, and the
    # taints that DeviceTaintRules put on devices (v1 since v1.37, served by default).
    WatchedKind("DeviceClass", "resource.k8s.io/v1", "deviceclasses"),
    WatchedKind("ResourceClaim", "resource.k8s.io/v1", "resourceclaims"),
    WatchedKind("ResourceSlice", "resource.k8s.io/v1", "resourceslices"),
    WatchedKind("DeviceTaintRule", "resource.k8s.io/v1", "devicetaintrules"),
    # Coscheduling's gangs (scheduler-plugins' CRD, optional: unserved until it is installed).
    WatchedKind("PodGroup", "scheduling.x-k8s.io/v1alpha1", "podgroups"),
)
PROFILE_KIND = WatchedKind("SchedulerProfile", "kopfsched.dev/v1alpha1", "schedulerprofiles")

LIST_PAGE_SIZE = 500
"""Objects per page of a LIST (client-go's pager and informers use 500)."""


KINDS_BY_RESOURCE: dict[str, str] = {f"{watched.group_version}/{watched.plural}": watched.kind
                                     for watched in (*WATCHED, PROFILE_KIND)}
"""Our kinds by kube.watches' `resource_key` of their resource: `v1/pods`, `storage.k8s.io/v1/csinodes`."""


@dataclasses.dataclass
class OperatorSettings(KopfschedSettings):
    """kopf's settings, where kube.watches and kube.reachability report."""

    api_reachability: ApiReachability | None = None


def operator_settings(*, watch_health: WatchHealth | None = None, watch_sink: WatchSink | None = None,
                      list_page_size: int | None = LIST_PAGE_SIZE,
                      api_reachability: ApiReachability | None = None) -> kopf.OperatorSettings:
    """kopf's settings; with `watch_health`, watch errors back off and relist, and with
    `watch_sink` too, our kinds' listings and events go to the sink (kube.watches); with
    `api_reachability`, requests to an API server that cannot be reached are retried for ever,
    one short line per failure (kube.reachability)."""
    settings = OperatorSettings(watch_health=watch_health, watch_sink=watch_sink,
                                api_reachability=api_reachability)
    settings.posting.enabled = False  # no log lines (nor anything else) posted as Events
    settings.watching.field_selectors["v1", "pods"] = POD_FIELD_SELECTOR
    settings.watching.chunk_size = list_page_size
    settings.watching.reconnect_backoff = 0.1
    return settings


def _selector(watched: WatchedKind) -> tuple[str, ...]:
    return (*watched.group_version.split("/"), watched.plural) if "/" in watched.group_version else (
        watched.group_version, watched.plural)


def build_registry(*, configuration: k8s.Configuration) -> kopf.OperatorRegistry:
    """A private registry: the login handler and one on.event handler per watched kind."""
    registry = kopf.OperatorRegistry()

    @kopf.on.login(registry=registry)
    async def login(**_: Any) -> kopf.ConnectionInfo:
        return await connection_info(configuration)

    for watched in (*WATCHED, PROFILE_KIND):
        kopf.on.event(*_selector(watched), registry=registry, id=f"feed-{watched.plural}")(_relayed)
    return registry


async def _relayed(**_: Any) -> None:
    """Never called while kube.watches relays the kind (its events never reach kopf's handlers);
    registered so that kopf lists and watches the kind."""


async def connection_info(configuration: k8s.Configuration) -> kopf.ConnectionInfo:
    """kopf's credentials from a loaded kubernetes_asyncio Configuration (as kopf's own
    login_via_async_client does, but for this configuration rather than the global one)."""
    raw_header = configuration.get_api_key_with_prefix("BearerToken")
    header: str | None = (await raw_header) if asyncio.iscoroutine(raw_header) else raw_header
    parts = header.split(" ", 1) if header else []
    scheme, token = (None, None) if not parts else (None, parts[0]) if len(parts) == 1 else (parts[0], parts[1])
    return kopf.ConnectionInfo(
        server=configuration.host or "", ca_path=configuration.ssl_ca_cert, insecure=not configuration.verify_ssl,
        username=configuration.username or None, password=configuration.password or None, scheme=scheme,
        token=token, certificate_path=configuration.cert_file, private_key_path=configuration.key_file,
    )
