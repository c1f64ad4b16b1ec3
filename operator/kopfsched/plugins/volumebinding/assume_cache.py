"""Assume caches: the PVs and PVCs as the cluster has them, overlaid with the bindings this
scheduler has decided but not yet written (upstream's PVAssumeCache / PVCAssumeCache).

Reserve assumes a PV pre-bound to a claim (or a claim annotated with its selected node), so
the next pod's cycle does not pick the same PV before the API write lands. An assumption
lasts until Unreserve restores it, or until a newer version of the object arrives from the
cluster (the watch replaced it in the object store): then the API object is the truth again.
"""

from __future__ import annotations

from dataclasses import dataclass

from kopfsched.framework.handle import ObjectLister
from kopfsched.framework.types import Obj
from kopfsched.plugins.volumebinding.volumes import claim_key, name_of, resource_version, volume_class

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


class PVAssumeCache(AssumeCache):
    def __init__(self, *, objects: ObjectLister) -> None:
        super().__init__(objects=objects, kind=PV)

    def list_pvs(self, storage_class: str) -> list[Obj]:
        """Every PV of the class, assumed versions in place of the API ones."""
        return [current for pv in self._objects.list(PV) if volume_class(pv) == storage_class
                and (current := self._current(name_of(pv), pv)) is not None]


class PVCAssumeCache(AssumeCache):
    def __init__(self, *, objects: ObjectLister) -> None:
        super().__init__(objects=objects, kind=PVC)


def _same_version(base: Obj, api: Obj) -> bool:
    if api is base:
        return True
    base_rv, api_rv = resource_version(base), resource_version(api)
    return base_rv is not None and base_rv == api_rv
