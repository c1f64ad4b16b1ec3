"""Builders of StorageClasses, PersistentVolumeClaims and PersistentVolumes as VolumeBinding
reads them (in namespace default, local WaitForFirstConsumer volumes by default)."""

from __future__ import annotations

from typing import Any

HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


def storage_class(name: str, *, mode: str = "WaitForFirstConsumer", provisioner: str = "kubernetes.io/no-provisioner",
                  topologies: list[dict] | None = None) -> dict:
    sc: dict[str, Any] = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
                          "provisioner": provisioner, "volumeBindingMode": mode}
    if topologies is not None:
        sc["allowedTopologies"] = topologies
    return sc


def pvc(name: str, *, sc: str | None = "local", size: str = "5Gi", volume: str = "", bound: bool = False,
        modes: tuple[str, ...] = ("ReadWriteOnce",), annotations: dict | None = None, selector: dict | None = None,
        phase: str = "", deleting: bool = False, uid: str | None = None) -> dict:
    meta: dict[str, Any] = {"name": name, "namespace": "default", "uid": uid or f"uid-{name}"}
    anns = dict(annotations or {})
    if bound:
        anns["pv.kubernetes.io/bind-completed"] = "yes"
    if anns:
        meta["annotations"] = anns
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    spec: dict[str, Any] = {"accessModes": list(modes), "resources": {"requests": {"storage": size}}}
    if sc is not None:
        spec["storageClassName"] = sc
    if volume:
        spec["volumeName"] = volume
    if selector is not None:
        spec["selector"] = selector
    obj = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta, "spec": spec}
    if phase:
        obj["status"] = {"phase": phase}
    return obj


def pv(name: str, *, sc: str = "local", size: str = "10Gi", node: str | None = None, claim: str = "",
       phase: str = "Available", modes: tuple[str, ...] = ("ReadWriteOnce",), labels: dict | None = None) -> dict:
    spec: dict[str, Any] = {"capacity": {"storage": size}, "accessModes": list(modes), "storageClassName": sc}
    if node is not None:
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": HOSTNAME, "operator": "In", "values": [node]}]}]}}
    if claim:
        spec["claimRef"] = {"kind": "PersistentVolumeClaim", "namespace": "default", "name": claim,
                            "uid": f"uid-{claim}"}
    meta: dict[str, Any] = {"name": name}
    if labels:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": meta, "spec": spec,
            "status": {"phase": phase}}


WFFC = storage_class("local")
IMMEDIATE = storage_class("standard", mode="Immediate", provisioner="example.com/csi")
DYNAMIC = storage_class("dynamic", provisioner="example.com/csi")
ZONED = storage_class("zoned", provisioner="example.com/csi",
                      topologies=[{"matchLabelExpressions": [{"key": ZONE, "values": ["z2"]}]}])
