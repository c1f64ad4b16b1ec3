"""Builders for the storage objects the volume plugin tests need, and a Handle over them."""

from __future__ import annotations

from typing import Any

from kopfsched.cache.objects import ObjectStore
from kopfsched.framework.handle import Handle
from kopfsched.framework.types import NodeInfo
from kopfsched.testing import FakeSnapshot, RecordingClient, make_pod


def pvc(name: str, namespace: str = "default", *, volume_name: str = "", storage_class: str | None = None,
        access_modes: list[str] | None = None, owner_uid: str | None = None) -> dict[str, Any]:
    """A claim; with `volume_name` it is fully bound (as the PV controller leaves it)."""
    spec: dict[str, Any] = {"accessModes": access_modes or ["ReadWriteOnce"]}
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if volume_name:
        spec["volumeName"] = volume_name
        meta["annotations"] = {"pv.kubernetes.io/bind-completed": "yes"}
    if storage_class is not None:
        spec["storageClassName"] = storage_class
    if owner_uid:
        meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": "owner", "uid": owner_uid,
                                    "controller": True}]
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta, "spec": spec}


def pv(name: str, *, labels: dict[str, str] | None = None, csi: tuple[str, str] | None = None,
       **source: Any) -> dict[str, Any]:
    """A PersistentVolume; `csi` is (driver, volumeHandle), other keyword args are in-tree sources."""
    spec: dict[str, Any] = dict(source)
    if csi is not None:
        spec["csi"] = {"driver": csi[0], "volumeHandle": csi[1]}
    meta: dict[str, Any] = {"name": name}
    if labels:
        meta["labels"] = dict(labels)
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": meta, "spec": spec}


def storage_class(name: str, *, mode: str | None = "Immediate", provisioner: str = "") -> dict[str, Any]:
    obj: dict[str, Any] = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
                           "provisioner": provisioner}
    if mode is not None:
        obj["volumeBindingMode"] = mode
    return obj


def csi_node(name: str, *drivers: tuple[str, int | None], migrated: str | None = None) -> dict[str, Any]:
    """A CSINode; each driver is (name, allocatable count or None)."""
    entries = []
    for driver, count in drivers:
        entry: dict[str, Any] = {"name": driver, "nodeID": name}
        if count is not None:
            entry["allocatable"] = {"count": count}
        entries.append(entry)
    meta: dict[str, Any] = {"name": name}
    if migrated is not None:
        meta["annotations"] = {"storage.alpha.kubernetes.io/migrated-plugins": migrated}
    return {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": meta, "spec": {"drivers": entries}}


def volume_attachment(name: str, *, node: str, attacher: str, pv_name: str | None) -> dict[str, Any]:
    source = {"persistentVolumeName": pv_name} if pv_name else {}
    return {"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment", "metadata": {"name": name},
            "spec": {"nodeName": node, "attacher": attacher, "source": source}}


def claim_volume(claim: str, name: str | None = None) -> dict[str, Any]:
    return {"name": name or f"vol-{claim}", "persistentVolumeClaim": {"claimName": claim}}


def pod_with(*volumes: dict[str, Any], name: str = "p", namespace: str = "default", **kwargs: Any) -> dict[str, Any]:
    return make_pod(name, namespace, volumes=list(volumes), **kwargs) if volumes else make_pod(name, namespace,
                                                                                                **kwargs)


KIND_OF = {"PersistentVolumeClaim", "PersistentVolume", "StorageClass", "CSINode", "VolumeAttachment", "CSIDriver"}


def store_of(*objs: dict[str, Any]) -> ObjectStore:
    store = ObjectStore()
    for obj in objs:
        assert obj["kind"] in KIND_OF, obj["kind"]
        store.upsert(obj["kind"], obj)
    return store


def handle_with(*objs: dict[str, Any], nodes: list[NodeInfo] | None = None) -> Handle:
    return Handle(snapshot=FakeSnapshot(nodes), client=RecordingClient(), objects=store_of(*objs))
