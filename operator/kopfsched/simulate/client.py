"""InMemoryClusterClient: the ClusterClient of simulate, bench and unit tests.

It keeps the pods it was given and applies binds, status patches and deletes to them,
then tells its subscriber — as a watch would — so the scheduler's cache confirms an
assumed pod exactly as it does in a cluster.
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
    record_events: bool = True
    _event_index: dict[tuple[str, str, str], RecordedEvent] = field(default_factory=dict)

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
        self._replace(current, {**current, "spec": {**current["spec"], "nodeName": node_name}})

    async def patch_pod_status(self, *, pod: Obj, condition: Obj | None = None,
                               nominated_node_name: str | None = None) -> None:
        current = self._current(pod)
        status = dict(current.get("status") or {})
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

    async def patch_object(self, *, kind: str, obj: Obj, patch: Mapping[str, Any]) -> Obj:
        merged = _merge(obj, patch)
        return merged


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
