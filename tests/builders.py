"""Builders for tests. Pod and node builders live in kopfsched.testing, public for plugin
authors; the PodGroup builder (the Coscheduling CRD's object) is ours."""

from __future__ import annotations

from typing import Any

from kopfsched.testing import make_node, make_pod, node_info, taint

__all__ = ["make_node", "make_pod", "node_info", "pod_group", "taint"]


def pod_group(name: str, min_member: int, *, namespace: str = "default", timeout: int | None = None,
              min_resources: dict[str, Any] | None = None, created: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"minMember": min_member}
    if timeout is not None:
        spec["scheduleTimeoutSeconds"] = timeout
    if min_resources is not None:
        spec["minResources"] = min_resources
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if created:
        meta["creationTimestamp"] = created
    return {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup", "metadata": meta, "spec": spec}
