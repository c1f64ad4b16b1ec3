"""InMemoryClusterClient: the ClusterClient of simulate, bench and unit tests.

It keeps the pods it was given and applies binds, status patches and deletes to them,
then tells its subscriber — as a watch would — so the scheduler's cache confirms an
assumed pod exactly as it does in a cluster.

PersistentVolumes and PersistentVolumeClaims it was given (`add_object`) are patched the
same way, and it stands in for the PV controller and an external provisioner: a PV given a
claimRef, or a claim annotated with its selected node, ends up bound at once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kopfsched.framework.client import ConflictError, NotFoundError
from kopfsched.framework.types import Obj, pod_key

PodChange = Callable[[Obj, Obj | None], None]
"""(new pod, old pod) — a MODIFIED watch event."""
PodDelete = Callable[[Obj], None]
ObjectChange = Callable[[str, Obj], None]
"""(kind, new object) — an ADDED or MODIFIED watch event of a PV, PVC, ..."""

_SELECTED_NODE = "volume.kubernetes.io/selected-node"
_BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
_BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
_PROVISIONED_BY = "pv.kubernetes.io/provisioned-by"


@dataclass(slots=True)
class RecordedEvent:
    regarding: str
    type: str
    reason: str
    action: str
    message: str
    reporting_controller: str
    count: int = 1


@dataclass
class InMemoryClusterClient:
    pods: dict[str, Obj] = field(default_factory=dict)
    events: list[RecordedEvent] = field(default_factory=list)
    bindings: list[tuple[str, str]] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    on_pod_change: PodChange | None = None
    on_pod_delete: PodDelete | None = None
    objects: dict[tuple[str, str, str], Obj] = field(default_factory=dict)
    """Other objects by (kind, namespace, name): what patch_object patches."""
    on_object_change: ObjectChange | None = None
    record_events: bool = True
    volume_controllers: bool = True
    """Stand in for the PV controller and an external provisioner; off, a volume binding the
    scheduler starts stays pending (as with no controller running)."""
    on_object_delete: ObjectChange | None = None
    """(kind, object) — a DELETED watch event of an object delete_object removed."""
    deleted_objects: list[tuple[str, str, str]] = field(default_factory=list)
    _event_index: dict[tuple[str, str, str], RecordedEvent] = field(default_factory=dict)
    _generated: int = 0
    _versions: int = 0

    def add_pod(self, pod: Obj) -> None:
        self.pods[pod_key(pod)] = pod

    def _current(self, pod: Obj) -> Obj:
        current = self.pods.get(pod_key(pod))
        if current is None:
            raise NotFoundError(f'pods "{pod_key(pod)}" not found')
        return current

    def _replace(self, old: Obj, new: Obj) -> None:
        self.pods[pod_key(new)] = new
        if self.on_pod_change is not None:
            self.on_pod_change(new, old)

    async def bind(self, *, pod: Obj, node_name: str) -> None:
        current = self._current(pod)
        bound_to = (current.get("spec") or {}).get("nodeName")
        if bound_to:
            raise ConflictError(f"pod {pod_key(pod)} is already assigned to node \"{bound_to}\"")
        self.bindings.append((pod_key(pod), node_name))
        bound = {**current, "spec": {**current["spec"], "nodeName": node_name}}
        status = current.get("status") or {}
        if "nominatedNodeName" in status:  # as the API server (ClearingNominatedNodeNameAfterBinding, v1.35)
            bound["status"] = {k: v for k, v in status.items() if k != "nominatedNodeName"}
        self._replace(current, bound)

    async def patch_pod_status(self, *, pod: Obj, condition: Obj | None = None,
                               nominated_node_name: str | None = None,
                               extended_resource_claim_status: Obj | None = None) -> None:
        current = self._current(pod)
        status = dict(current.get("status") or {})
        if extended_resource_claim_status is not None:
            status["extendedResourceClaimStatus"] = extended_resource_claim_status
        if condition is not None:
            others = [c for c in status.get("conditions") or () if c.get("type") != condition["type"]]
            status["conditions"] = [*others, condition]
        if nominated_node_name is not None:
            if nominated_node_name:
                status["nominatedNodeName"] = nominated_node_name
            else:
                status.pop("nominatedNodeName", None)
        self._replace(current, {**current, "status": status})

    async def delete_pod(self, *, pod: Obj, condition: Obj | None = None) -> None:
        current = self.pods.pop(pod_key(pod), None)
        if current is None:
            raise NotFoundError(f'pods "{pod_key(pod)}" not found')
        self.deleted.append(pod_key(pod))
        if self.on_pod_delete is not None:
            self.on_pod_delete(current)

    async def record_event(self, *, regarding: Obj, type: str, reason: str, action: str, message: str,
                           reporting_controller: str) -> None:
        if not self.record_events:
            return
        key = (pod_key(regarding), reason, message)
        existing = self._event_index.get(key)
        if existing is not None:
            existing.count += 1
            return
        event = RecordedEvent(pod_key(regarding), type, reason, action, message, reporting_controller)
        self._event_index[key] = event
        self.events.append(event)

    def add_object(self, obj: Obj) -> None:
        self.objects[_object_key(obj["kind"], obj)] = obj

    def get_object(self, kind: str, name: str, namespace: str = "") -> Obj | None:
        return self.objects.get((kind, namespace, name))

    async def patch_object(self, *, kind: str, obj: Obj, patch: Mapping[str, Any]) -> Obj:
        key = _object_key(kind, obj)
        current = self.objects.get(key)
        merged = _merge(current if current is not None else obj, patch)
        self._store(kind, merged)
        if self.volume_controllers and kind == "PersistentVolume":
            self._complete_binding(merged)
        elif self.volume_controllers and kind == "PersistentVolumeClaim":
            self._provision(merged)
        return self.objects.get(key, merged)

    async def create_object(self, *, kind: str, obj: Obj) -> Obj:
        meta = dict(obj.get("metadata") or {})
        if not meta.get("name"):
            # The API server's generated suffix (5 characters), here counted so that runs repeat.
            self._generated += 1
            meta["name"] = meta.get("generateName", "") + _suffix(self._generated)
        key = _object_key(kind, {"metadata": meta})
        if key in self.objects:
            raise ConflictError(f'{kind} "{meta["name"]}" already exists')
        self._versions += 1
        meta.setdefault("uid", f"uid-{meta.get('namespace') or ''}-{meta['name']}")
        meta["resourceVersion"] = str(self._versions)
        created = {**obj, "metadata": meta}
        self._store(kind, created)
        return created

    async def delete_object(self, *, kind: str, obj: Obj) -> None:
        key = _object_key(kind, obj)
        if self.objects.pop(key, None) is None:
            raise NotFoundError(f'{kind} "{key[2]}" not found')
        self.deleted_objects.append(key)
        if self.on_object_delete is not None:
            self.on_object_delete(kind, obj)

    def _store(self, kind: str, obj: Obj) -> None:
        self.objects[_object_key(kind, obj)] = obj
        if self.on_object_change is not None:
            self.on_object_change(kind, obj)

    def _complete_binding(self, pv: Obj) -> None:
        """The PV controller's half of a binding the scheduler started by setting claimRef."""
        ref = (pv.get("spec") or {}).get("claimRef") or {}
        claim = self.objects.get(("PersistentVolumeClaim", ref.get("namespace") or "", ref.get("name") or ""))
        if claim is None or (claim.get("spec") or {}).get("volumeName"):
            return
        self._bind(pv, claim)

    def _provision(self, claim: Obj) -> None:
        """An external provisioner answering a claim annotated with its selected node."""
        meta = claim.get("metadata") or {}
        if (claim.get("spec") or {}).get("volumeName") or not (meta.get("annotations") or {}).get(_SELECTED_NODE):
            return
        class_name = (claim.get("spec") or {}).get("storageClassName") or ""
        storage_class = self.objects.get(("StorageClass", "", class_name)) or {}
        spec = claim.get("spec") or {}
        pv = {"apiVersion": "v1", "kind": "PersistentVolume",
              "metadata": {"name": f"pvc-{meta.get('uid') or meta.get('namespace', '') + '-' + meta.get('name', '')}",
                           "annotations": {_PROVISIONED_BY: storage_class.get("provisioner") or ""}},
              "spec": {"capacity": {"storage": ((spec.get("resources") or {}).get("requests") or {}).get("storage",
                                                                                                           "0")},
                       "accessModes": list(spec.get("accessModes") or ()), "storageClassName": class_name,
                       "persistentVolumeReclaimPolicy": storage_class.get("reclaimPolicy") or "Delete",
                       "claimRef": {"kind": "PersistentVolumeClaim", "apiVersion": "v1",
                                    "namespace": meta.get("namespace") or "", "name": meta.get("name") or "",
                                    **({"uid": meta["uid"]} if meta.get("uid") else {})}},
              "status": {"phase": "Pending"}}
        self._store("PersistentVolume", pv)
        self._bind(pv, claim)

    def _bind(self, pv: Obj, claim: Obj) -> None:
        pv_spec = pv.get("spec") or {}
        self._store("PersistentVolume", {**pv, "status": {**(pv.get("status") or {}), "phase": "Bound"}})
        meta = claim.get("metadata") or {}
        annotations = {**(meta.get("annotations") or {}), _BIND_COMPLETED: "yes", _BOUND_BY_CONTROLLER: "yes"}
        self._store("PersistentVolumeClaim", {
            **claim, "metadata": {**meta, "annotations": annotations},
            "spec": {**(claim.get("spec") or {}), "volumeName": pv["metadata"]["name"]},
            "status": {**(claim.get("status") or {}), "phase": "Bound", "capacity": dict(pv_spec.get("capacity") or {}),
                       "accessModes": list(pv_spec.get("accessModes") or ())}})


_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
"""The API server's alphabet for generated names (utilrand.String)."""


def _suffix(n: int) -> str:
    """The n-th generated-name suffix: five characters of the server's alphabet."""
    out = []
    for _ in range(5):
        n, digit = divmod(n, len(_SUFFIX_ALPHABET))
        out.append(_SUFFIX_ALPHABET[digit])
    return "".join(out)


def _object_key(kind: str, obj: Obj) -> tuple[str, str, str]:
    meta = obj.get("metadata") or {}
    return kind, meta.get("namespace") or "", meta.get("name") or ""


def _merge(base: Any, patch: Any) -> Any:
    """RFC 7386 merge patch."""
    if not isinstance(patch, Mapping):
        return patch
    result = dict(base) if isinstance(base, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = _merge(result.get(key), value)
    return result
