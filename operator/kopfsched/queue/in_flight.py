"""In-flight pods and the cluster events that arrived while they were being scheduled.

Upstream's activeQueue.inFlightPods / inFlightEvents. A pod is in flight from Pop
until Done. If its attempt fails, the events recorded after it was popped are replayed
through its rejectors' queueing hints, so a wake-up that arrived mid-cycle is not lost.

Pods and events share one sequence counter: the events a pod must see are exactly
those with a larger sequence number than its own. Events older than the oldest pod
still in flight can no longer matter and are pruned.
"""

from __future__ import annotations

import bisect
import itertools
from dataclasses import dataclass
from typing import Any

from kopfsched.framework.events import ClusterEvent
from kopfsched.framework.types import PodInfo


@dataclass(slots=True)
class RecordedEvent:
    seq: int
    event: ClusterEvent
    old_obj: Any
    new_obj: Any


@dataclass(slots=True)
class InFlightPod:
    seq: int
    latest: PodInfo
    """The newest version of the pod seen while it was in flight."""


class InFlight:
    def __init__(self) -> None:
        self._seq = itertools.count(1)
        self._pods: dict[str, InFlightPod] = {}
        """By uid, in pop order (dicts keep insertion order), so the first is the oldest."""
        self._events: list[RecordedEvent] = []

    def __len__(self) -> int:
        return len(self._pods)

    def __contains__(self, uid: object) -> bool:
        return uid in self._pods

    def get(self, uid: str) -> InFlightPod | None:
        return self._pods.get(uid)

    def pods(self) -> list[PodInfo]:
        return [p.latest for p in self._pods.values()]

    @property
    def event_count(self) -> int:
        return len(self._events)

    def start(self, pod: PodInfo) -> bool:
        """Track `pod` from now on; False if it is in flight already."""
        if pod.uid in self._pods:
            return False
        self._pods[pod.uid] = InFlightPod(next(self._seq), pod)
        return True

    def record(self, event: ClusterEvent, old_obj: Any, new_obj: Any) -> bool:
        """Remember `event` if any pod is in flight."""
        if not self._pods:
            return False
        self._events.append(RecordedEvent(next(self._seq), event, old_obj, new_obj))
        return True

    def events_for(self, uid: str) -> list[RecordedEvent] | None:
        """The events recorded since `uid` was popped, oldest first; None if it is not in flight."""
        pod = self._pods.get(uid)
        if pod is None:
            return None
        start = bisect.bisect_right(self._events, pod.seq, key=lambda e: e.seq)
        return self._events[start:]

    def done(self, uid: str) -> None:
        if self._pods.pop(uid, None) is None:
            return
        if not self._pods:
            self._events.clear()
            return
        oldest = next(iter(self._pods.values())).seq
        cut = bisect.bisect_right(self._events, oldest, key=lambda e: e.seq)
        if cut:
            del self._events[:cut]
