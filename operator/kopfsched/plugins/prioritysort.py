"""PrioritySort: the default QueueSort. Higher `spec.priority` first; among equals, the pod
that entered the queue earlier (QueuedPodInfo.timestamp) first."""

from __future__ import annotations

from typing import Any

from kopfsched.framework.queued import QueuedPodInfo
from kopfsched.framework.registry import PluginFactory


class PrioritySort:
    name = "PrioritySort"

    def __init__(self, args: Any = None, handle: Any = None) -> None:
        pass

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        p1, p2 = a.pod_info.priority, b.pod_info.priority
        return p1 > p2 or (p1 == p2 and a.timestamp < b.timestamp)

    def rank(self, a: QueuedPodInfo) -> tuple[int, float]:
        """`less(a, b)` is exactly `rank(a) < rank(b)`: the queue's heap compares these, in C."""
        return -a.pod_info.priority, a.timestamp


PLUGIN = PluginFactory(name=PrioritySort.name, factory=PrioritySort)
