"""Cluster objects other than pods and nodes, kept as plain dicts by kind.

Namespaces, PersistentVolumes, PersistentVolumeClaims, StorageClasses, CSINodes,
PodDisruptionBudgets, PriorityClasses, Services, ReplicaSets, ... — whatever plugins read
through `handle.objects` (framework.handle.ObjectLister).
"""

from __future__ import annotations

import builtins

from kopfsched.framework.types import Obj


class _ChangeLog:
    """Keys of one kind in the order they changed; `base` is the position of keys[0]."""

    __slots__ = ("base", "keys")

    def __init__(self) -> None:
        self.base = 0
        self.keys: list[tuple[str, str]] = []


class ObjectStore:
    def __init__(self) -> None:
        self._objects: dict[str, dict[tuple[str, str], Obj]] = {}
        self._log: dict[str, _ChangeLog] = {}

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
        self._changed(kind, key)
        return old

    def delete(self, kind: str, obj: Obj) -> Obj | None:
        key = self._key(obj)
        old = self._objects.get(kind, {}).pop(key, None)
        if old is not None:
            self._changed(kind, key)
        return old

    def _changed(self, kind: str, key: tuple[str, str]) -> None:
        log = self._log.get(kind)
        if log is None:
            log = self._log[kind] = _ChangeLog()
        log.keys.append(key)
        if len(log.keys) > 2 * len(self._objects.get(kind, ())) + 256:
            log.base += len(log.keys)  # readers further behind than this resync
            log.keys = []

    def changes(self, kind: str, since: int | None) -> tuple[int, list[tuple[str, str]] | None]:
        """(cursor, the (namespace, name) keys changed since the cursor `since`), or keys None
        when the reader must resync from `list` (first call, or it fell too far behind)."""
        log = self._log.get(kind)
        if log is None:
            return 0, None if since is None else []
        cursor = log.base + len(log.keys)
        if since is None or since < log.base:
            return cursor, None
        return cursor, log.keys[since - log.base:]

    def get(self, kind: str, name: str, namespace: str = "") -> Obj | None:
        return self._objects.get(kind, {}).get((namespace, name))

    def list(self, kind: str, namespace: str | None = None) -> list[Obj]:
        bucket = self._objects.get(kind, {})
        if namespace is None:
            return list(bucket.values())
        return [obj for (ns, _), obj in bucket.items() if ns == namespace]

    def kinds(self) -> builtins.list[str]:  # `list` is the method above, here
        return list(self._objects)
