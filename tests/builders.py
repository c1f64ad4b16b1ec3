"""Small builders for pods and nodes in tests, in the spirit of upstream's st.MakePod()/MakeNode()."""

from __future__ import annotations

import itertools
from typing import Any

from kopfsched.framework.types import NodeInfo, PodInfo

_uids = itertools.count(1)


def make_pod(
    name: str = "pod",
    namespace: str = "default",
    *,
    requests: dict[str, Any] | list[dict[str, Any]] | None = None,
    init_requests: list[dict[str, Any]] | None = None,
    sidecar_requests: list[dict[str, Any]] | None = None,
    overhead: dict[str, Any] | None = None,
    priority: int | None = None,
    node_name: str | None = None,
    scheduler_name: str | None = None,
    labels: dict[str, str] | None = None,
    tolerations: list[dict[str, Any]] | None = None,
    node_selector: dict[str, str] | None = None,
    affinity: dict[str, Any] | None = None,
    host_ports: list[int | tuple[str, str, int]] | None = None,
    images: list[str] | None = None,
    scheduling_gates: list[str] | None = None,
    creation_timestamp: str | None = None,
    uid: str | None = None,
    **spec_extra: Any,
) -> dict[str, Any]:
    """A pod dict as the API returns it. `requests` is one container's, or a list per container."""
    per_container = requests if isinstance(requests, list) else [requests or {}]
    images = images or ["registry.k8s.io/pause:3.10"] * len(per_container)
    containers: list[dict[str, Any]] = []
    for i, reqs in enumerate(per_container):
        container: dict[str, Any] = {"name": f"c{i}", "image": images[i] if i < len(images) else images[-1]}
        if reqs:
            container["resources"] = {"requests": dict(reqs)}
        containers.append(container)
    for extra_image in images[len(per_container):]:
        containers.append({"name": f"c{len(containers)}", "image": extra_image})
    if host_ports:
        containers[0]["ports"] = [
            {"containerPort": p, "hostPort": p} if isinstance(p, int)
            else {"hostIP": p[0], "protocol": p[1], "hostPort": p[2], "containerPort": p[2]}
            for p in host_ports
        ]
    spec: dict[str, Any] = {"containers": containers}
    init: list[dict[str, Any]] = []
    for i, reqs in enumerate(init_requests or ()):
        init.append({"name": f"init{i}", "image": "busybox", "resources": {"requests": dict(reqs)}})
    for i, reqs in enumerate(sidecar_requests or ()):
        init.append({"name": f"sidecar{i}", "image": "envoy", "restartPolicy": "Always",
                     "resources": {"requests": dict(reqs)}})
    if init:
        spec["initContainers"] = init
    if overhead:
        spec["overhead"] = dict(overhead)
    if priority is not None:
        spec["priority"] = priority
    if node_name:
        spec["nodeName"] = node_name
    if scheduler_name:
        spec["schedulerName"] = scheduler_name
    if tolerations:
        spec["tolerations"] = tolerations
    if node_selector:
        spec["nodeSelector"] = node_selector
    if affinity:
        spec["affinity"] = affinity
    if scheduling_gates:
        spec["schedulingGates"] = [{"name": g} for g in scheduling_gates]
    spec.update(spec_extra)
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": uid or f"uid-{next(_uids)}"}
    if labels:
        meta["labels"] = dict(labels)
    if creation_timestamp:
        meta["creationTimestamp"] = creation_timestamp
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": {"phase": "Pending"}}


def make_node(
    name: str = "node",
    *,
    cpu: str | int = "4",
    memory: str = "32Gi",
    pods: int = 110,
    ephemeral_storage: str | None = None,
    extended: dict[str, Any] | None = None,
    labels: dict[str, str] | None = None,
    taints: list[dict[str, Any]] | None = None,
    unschedulable: bool = False,
    images: list[tuple[list[str], int]] | None = None,
) -> dict[str, Any]:
    """A node dict. `images` is [(names, sizeBytes)] as in node.status.images."""
    allocatable: dict[str, Any] = {"cpu": str(cpu), "memory": memory, "pods": str(pods)}
    if ephemeral_storage:
        allocatable["ephemeral-storage"] = ephemeral_storage
    allocatable.update({k: str(v) for k, v in (extended or {}).items()})
    spec: dict[str, Any] = {}
    if taints:
        spec["taints"] = taints
    if unschedulable:
        spec["unschedulable"] = True
    status: dict[str, Any] = {"allocatable": allocatable, "capacity": dict(allocatable)}
    if images:
        status["images"] = [{"names": names, "sizeBytes": size} for names, size in images]
    meta: dict[str, Any] = {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}}
    return {"apiVersion": "v1", "kind": "Node", "metadata": meta, "spec": spec, "status": status}


def taint(key: str, value: str = "", effect: str = "NoSchedule") -> dict[str, Any]:
    t = {"key": key, "effect": effect}
    if value:
        t["value"] = value
    return t


def node_info(node: dict[str, Any], *pods: dict[str, Any]) -> NodeInfo:
    """A NodeInfo holding `pods` (their nodeName is set to the node's)."""
    info = NodeInfo(node)
    for pod in pods:
        pod["spec"]["nodeName"] = info.name
        info.add_pod(PodInfo(pod))
    return info
