"""Cluster objects other than pods and nodes, kept as plain dicts by kind.

Namespaces, PersistentVolumes, PersistentVolumeClaims, StorageClasses, CSINodes,
PodDisruptionBudgets, PriorityClasses, Services, ReplicaSets, ... — whatever plugins read
through `handle.objects` (framework.handle.ObjectLister).
"""

from __future__ import annotations

from kopfsched.framework.types import Obj


class ObjectStore:
    def __init__(self) -> None:
        self._objects: dict[str, dict[tuple[str, str], Obj]] = {}

    @staticmethod
    def _key(obj: Obj) -> tuple[str, str]:
        meta = obj.get("metadata") or {}
        return meta.get("namespace") or "", meta.get("name") or ""

    def upsert(self, kind: str, obj: Obj) -> Obj | None:
        """Store the object; returns the previous version, if any."""
        bucket = self._objects.setdefault(kind, {})
        key = self._key(obj)
        old = bucket.get(key)
        bucket[key] = obj
        return old

    def delete(self, kind: str, obj: Obj) -> Obj | None:
        return self._objects.get(kind, {}).pop(self._key(obj), None)

    def get(self, kind: str, name: str, namespace: str = "") -> Obj | None:
        return self._objects.get(kind, {}).get((namespace, name))

    def list(self, kind: str, namespace: str | None = None) -> list[Obj]:
        bucket = self._objects.get(kind, {})
        if namespace is None:
            return list(bucket.values())
        return [obj for (ns, _), obj in bucket.items() if ns == namespace]

    def kinds(self) -> list[str]:
        return list(self._objects)
