"""Reading the objects a queueing hint receives, whichever view the queue hands over.

Hints get the pod being requeued and the old/new versions of the changed object. Those may
be raw API dicts or our views (PodInfo, NodeInfo); these helpers give back the raw dict.
"""

from __future__ import annotations

from typing import Any

from kopfsched.framework.types import NodeInfo, Obj, PodInfo


def raw(obj: Any) -> Obj | None:
    """The API dict behind `obj` (a dict, a PodInfo or a NodeInfo), or None."""
    if obj is None:
        return None
    if isinstance(obj, PodInfo):
        return obj.pod
    if isinstance(obj, NodeInfo):
        return obj.node
    if isinstance(obj, dict):
        return obj
    pod = getattr(obj, "pod_info", None)  # a QueuedPodInfo
    return pod.pod if pod is not None else None


def spec(obj: Obj | None) -> Obj:
    return (obj or {}).get("spec") or {}


def meta(obj: Obj | None) -> Obj:
    return (obj or {}).get("metadata") or {}


def uid(obj: Obj | None) -> str:
    m = meta(obj)
    return m.get("uid") or f"{m.get('namespace', 'default')}/{m.get('name', '')}"
