"""Assume caches: the PVs and PVCs as the cluster has them, overlaid with the bindings this
scheduler has decided but not yet written (upstream's PVAssumeCache / PVCAssumeCache).

Reserve assumes a PV pre-bound to a claim (or a claim annotated with its selected node), so
the next pod's cycle does not pick the same PV before the API write lands. An assumption
lasts until Unreserve restores it, or until a newer version of the object arrives from the
cluster (the watch replaced it in the object store): then the API object is the truth again.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kopfsched.framework.handle import ObjectLister
from kopfsched.framework.types import Obj
from kopfsched.plugins.volumebinding.volumes import claim_key, name_of, resource_version, uid_of, volume_class

PV = "PersistentVolume"
PVC = "PersistentVolumeClaim"


@dataclass(slots=True)
class _Assumed:
    obj: Obj
    base: Obj
    """The API object the assumption was made over; a different one means the cluster moved on."""


class AssumeCache:
    """Objects of one kind, keyed as the kind is (PV: name, PVC: namespace/name)."""

    def __init__(self, *, objects: ObjectLister, kind: str) -> None:
        self._objects = objects
        self.kind = kind
        self._assumed: dict[str, _Assumed] = {}

    def _key(self, obj: Obj) -> str:
        return claim_key(obj) if self.kind == PVC else name_of(obj)

    def get_api(self, key: str) -> Obj | None:
        """The object as the cluster has it, ignoring assumptions."""
        if self.kind == PVC:
            namespace, _, name = key.partition("/")
            return self._objects.get(PVC, name, namespace)
        return self._objects.get(PV, key)

    def get(self, key: str) -> Obj | None:
        """The assumed version when there is a current one, else the API object."""
        return self._current(key, self.get_api(key))

    def _current(self, key: str, api: Obj | None) -> Obj | None:
        assumed = self._assumed.get(key)
        if assumed is None:
            return api
        if api is None or not _same_version(assumed.base, api):
            del self._assumed[key]  # deleted or updated in the cluster: the assumption is void
            return api
        return assumed.obj

    def assume(self, obj: Obj) -> None:
        """Overlay `obj`; it must be a change of the object the cluster has now."""
        key = self._key(obj)
        api = self.get_api(key)
        if api is None:
            raise LookupError(f"{self.kind} {key!r} not found")
        new_rv, api_rv = resource_version(obj), resource_version(api)
        if new_rv is not None and api_rv is not None and new_rv < api_rv:
            raise ValueError(f"{self.kind} {key!r}: stored version {api_rv} is newer than {new_rv}")
        self._assumed[key] = _Assumed(obj, api)

    def restore(self, key: str) -> None:
        """Drop the assumption (idempotent)."""
        self._assumed.pop(key, None)

    def is_assumed(self, key: str) -> bool:
        return self.get(key) is not None and key in self._assumed


ClaimName = tuple[str, str]
"""(namespace, name) of a claim, as a PV's claimRef names it."""


def claim_named_by(pv: Obj) -> ClaimName | None:
    """The claim a PV's claimRef names, None when it has none (an empty claimRef is none)."""
    ref = (pv.get("spec") or {}).get("claimRef")
    if not ref:
        return None
    return ref.get("namespace") or "", ref.get("name") or ""


@dataclass(slots=True)
class _Bucket:
    pvs: dict[str, Obj] = field(default_factory=dict)
    ordered: bool = True
    """False once a PV joined out of arrival order: sort before the next read."""


class _PVIndex:
    """The API's PVs by class, split into those with no claimRef and those whose claimRef names
    a claim, kept from the object store's change log: a claim's candidates are the first group
    and its own entry of the second, never the PVs bound to other claims."""

    def __init__(self) -> None:
        self.cursor: int | None = None
        self._clear()

    def _clear(self) -> None:
        self.arrival: dict[str, int] = {}
        """PV name → when it reached the index: the order every list keeps."""
        self._uids: dict[str, str] = {}
        self._where: dict[str, tuple[str, ClaimName | None]] = {}
        self._buckets: dict[tuple[str, ClaimName | None], _Bucket] = {}
        self._arrivals = 0

    def sync(self, objects: ObjectLister) -> None:
        cursor, changed = objects.changes(PV, self.cursor)
        if changed is None:
            self._clear()
            for listed in objects.list(PV):
                self._add(name_of(listed), listed)
        else:
            for _, name in dict.fromkeys(changed):
                self._remove(name)
                pv = objects.get(PV, name)
                if pv is not None:
                    self._add(name, pv)
                else:
                    self.arrival.pop(name, None)
                    self._uids.pop(name, None)
        self.cursor = cursor

    def _add(self, name: str, pv: Obj) -> None:
        uid = uid_of(pv)
        if name not in self.arrival or self._uids.get(name) != uid:  # new, or deleted and created again
            self._arrivals += 1
            self.arrival[name] = self._arrivals
            self._uids[name] = uid
        where = (volume_class(pv), claim_named_by(pv))
        bucket = self._buckets.setdefault(where, _Bucket())
        if bucket.pvs and self.arrival[next(reversed(bucket.pvs))] > self.arrival[name]:
            bucket.ordered = False
        bucket.pvs[name] = pv
        self._where[name] = where

    def _remove(self, name: str) -> None:
        where = self._where.pop(name, None)
        if where is not None:
            bucket = self._buckets[where]
            del bucket.pvs[name]
            if not bucket.pvs:
                del self._buckets[where]

    def of(self, storage_class: str, claim: ClaimName | None) -> dict[str, Obj]:
        bucket = self._buckets.get((storage_class, claim))
        if bucket is None:
            return {}
        if not bucket.ordered:
            bucket.pvs = dict(sorted(bucket.pvs.items(), key=lambda item: self.arrival[item[0]]))
            bucket.ordered = True
        return bucket.pvs


class PVAssumeCache(AssumeCache):
    def __init__(self, *, objects: ObjectLister) -> None:
        super().__init__(objects=objects, kind=PV)
        self._index = _PVIndex()

    def list_pvs_for_claim(self, storage_class: str, claim: ClaimName) -> list[Obj]:
        """The PVs of the class, assumed versions in place of the API ones, that have no
        claimRef or whose claimRef names `claim`: of upstream's ListPVs(class), the ones its
        FindMatchingVolume does not skip at once. In the order the PVs reached the scheduler
        (upstream's list comes from a map, in no set order)."""
        index = self._index
        index.sync(self._objects)
        unclaimed, own = index.of(storage_class, None), index.of(storage_class, claim)
        if not self._assumed:
            if not own:
                return list(unclaimed.values())
            if not unclaimed:
                return list(own.values())
        chosen = {name: pv for name, pv in (*unclaimed.items(), *own.items()) if name not in self._assumed}
        for name in list(self._assumed):
            current = self._current(name, self.get_api(name))
            if current is not None and volume_class(current) == storage_class \
                    and claim_named_by(current) in (None, claim):
                chosen[name] = current
        return [chosen[name] for name in sorted(chosen, key=index.arrival.__getitem__)]


class PVCAssumeCache(AssumeCache):
    def __init__(self, *, objects: ObjectLister) -> None:
        super().__init__(objects=objects, kind=PVC)


def _same_version(base: Obj, api: Obj) -> bool:
    if api is base:
        return True
    base_rv, api_rv = resource_version(base), resource_version(api)
    return base_rv is not None and base_rv == api_rv
