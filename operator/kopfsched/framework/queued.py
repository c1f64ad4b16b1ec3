"""QueuedPodInfo: a pod as the scheduling queue holds it."""

from __future__ import annotations

from dataclasses import dataclass, field

from kopfsched.framework.types import PodInfo


@dataclass(slots=True, eq=False)
class QueuedPodInfo:
    pod_info: PodInfo
    timestamp: float
    """When the pod was last added to the queue; QueueSort breaks priority ties with it."""
    initial_attempt_timestamp: float | None = None
    attempts: int = 0
    unschedulable_plugins: set[str] = field(default_factory=set)
    pending_plugins: set[str] = field(default_factory=set)
    gated: bool = False
    gating_plugin: str = ""

    @property
    def key(self) -> str:
        return self.pod_info.key

    @property
    def uid(self) -> str:
        return self.pod_info.uid

    @property
    def priority(self) -> int:
        return self.pod_info.priority
