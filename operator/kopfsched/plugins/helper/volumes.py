"""Reading pod volumes, claims, volumes and storage classes as the volume plugins need
(upstream's component-helpers/storage/volume and storage/ephemeral, and the listers'
NotFound errors, whose text users see in scheduling messages)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from kopfsched.framework.events import QueueingHint
from kopfsched.framework.types import Obj
from kopfsched.plugins.helper import objects

BETA_STORAGE_CLASS_ANNOTATION = "volume.beta.kubernetes.io/storage-class"
WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"


def pod_volumes(pod: Obj) -> list[Obj]:
    return (pod.get("spec") or {}).get("volumes") or []


def claim_names(pod: Obj) -> Iterator[str]:
    """The claimName of every persistentVolumeClaim volume, in spec order."""
    for volume in pod_volumes(pod):
        claim = volume.get("persistentVolumeClaim")
        if claim is not None:
            yield claim.get("claimName") or ""


def claim_hint(pod: Any, new: Any, uses: Callable[[Obj, Obj], bool]) -> QueueingHint:
    """The queueing hint of a claim added or changed: QUEUE when it is in the pod's
    namespace and `uses(pvc, pod)` says the pod uses it (or either is unknown), SKIP otherwise."""
    pvc, target = objects.raw(new), objects.raw(pod)
    if pvc is None or target is None:
        return QueueingHint.QUEUE
    if objects.meta(pvc).get("namespace", "default") != objects.meta(target).get("namespace", "default"):
        return QueueingHint.SKIP
    return QueueingHint.QUEUE if uses(pvc, target) else QueueingHint.SKIP


def claimed_directly(pvc: Obj, pod: Obj) -> bool:
    """The pod names the claim in a persistentVolumeClaim volume."""
    return objects.meta(pvc).get("name") in set(claim_names(pod))


def ephemeral_claim_name(pod: Obj, volume: Obj) -> str:
    """The PVC a generic ephemeral volume uses (ephemeral.VolumeClaimName)."""
    return f"{(pod.get('metadata') or {}).get('name', '')}-{volume.get('name', '')}"


def ephemeral_claim_owned_error(pod: Obj, pvc: Obj) -> str | None:
    """ephemeral.VolumeIsForPod: the claim must be in the pod's namespace and controlled by it."""
    pod_meta, pvc_meta = pod.get("metadata") or {}, pvc.get("metadata") or {}
    pod_ns, pvc_ns = pod_meta.get("namespace", "default"), pvc_meta.get("namespace", "default")
    controller = next((ref for ref in pvc_meta.get("ownerReferences") or () if ref.get("controller")), None)
    if pvc_ns == pod_ns and controller is not None and controller.get("uid") == pod_meta.get("uid"):
        return None
    return (f"PVC {pvc_ns}/{pvc_meta.get('name', '')} was not created for pod "
            f"{pod_ns}/{pod_meta.get('name', '')} (pod is not owner)")


def claim_class(pvc: Obj) -> str:
    """GetPersistentVolumeClaimClass: the beta annotation wins over spec.storageClassName."""
    annotations = (pvc.get("metadata") or {}).get("annotations") or {}
    if BETA_STORAGE_CLASS_ANNOTATION in annotations:
        return annotations[BETA_STORAGE_CLASS_ANNOTATION]
    return (pvc.get("spec") or {}).get("storageClassName") or ""


def bound_volume_name(pvc: Obj) -> str:
    return (pvc.get("spec") or {}).get("volumeName") or ""


def access_modes(pvc: Obj) -> list[Any]:
    return (pvc.get("spec") or {}).get("accessModes") or []


def go_quote(text: str) -> str:
    """Go's %q for the plain names Kubernetes objects have."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def not_found(resource: str, name: str) -> str:
    """A lister's NotFound error text, e.g. `persistentvolumeclaim "data" not found`."""
    return f"{resource} {go_quote(name)} not found"


PVC_RESOURCE = "persistentvolumeclaim"
PV_RESOURCE = "persistentvolume"
STORAGE_CLASS_RESOURCE = "storageclass.storage.k8s.io"
