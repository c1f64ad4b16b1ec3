"""The Event broadcaster (upstream: k8s.io/client-go/tools/events' EventBroadcaster).

The scheduler records `Scheduled` Events here and returns at once: sender tasks post the
queue in order, so recording never holds up a binding cycle. Events also never take the API
server's time from binds: while the scheduler is busy (pods wait in activeQ or a bind is in
flight) they stay queued, unless more than EVENT_BACKLOG are or the oldest has waited
EVENT_MAX_WAIT seconds (then one sender posts); as soon as it is idle, EVENT_SENDERS post
them. Past EVENT_QUEUE_SIZE queued Events, new ones are dropped, as upstream's broadcaster
drops when its channel is full.
"""

from __future__ import annotations

import collections
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from kopfsched.framework.client import ClusterClient

logger = logging.getLogger(__name__)

EVENT_QUEUE_SIZE = 10_000
"""Events waiting to be posted before new ones are dropped. Upstream's broadcaster buffers
maxQueuedEvents (1000) before its dispatcher, which hands each Event to its own goroutine at
once, so a burst of binds queues no more than that there; ours wait here instead, behind the
binds, so a burst of a few thousand pods must fit."""
EVENT_SENDERS = 4
"""Event requests in flight at most, once no pod waits for a cycle or a bind."""
EVENT_BACKLOG = 1000
"""Queued Events past which one sender posts even while pods wait (upstream's maxQueuedEvents:
as many as its broadcaster buffers)."""
EVENT_MAX_WAIT = 5.0
"""Seconds an Event waits for the pods at most: past them one sender posts even while pods
wait, so a scheduler that never runs out of work still reports what it did."""


class EventBroadcaster:
    """Queued Events and the sender tasks that post them through `client.record_event`."""

    def __init__(self, *, client: ClusterClient, clock: Callable[[], float],
                 spawn: Callable[[Awaitable[Any], str], Any], busy: Callable[[], bool]) -> None:
        self._client = client
        self._clock = clock
        self._spawn = spawn
        self._busy = busy
        """True while Events should hold back for the pods (the scheduler's work)."""
        self._events: collections.deque[tuple[float, dict[str, Any]]] = collections.deque()
        """(when queued, the Event's fields), oldest first."""
        self._senders = 0
        self.dropped = 0

    def __len__(self) -> int:
        return len(self._events)

    def record_later(self, **event: Any) -> None:
        """Queue an Event (the keyword arguments of `ClusterClient.record_event`) and return."""
        if len(self._events) >= EVENT_QUEUE_SIZE:
            self.dropped += 1
            if self.dropped in (1, 10, 100) or self.dropped % 1000 == 0:
                logger.warning("%d Events dropped: more than %d waiting to be posted",
                               self.dropped, EVENT_QUEUE_SIZE)
            return
        self._events.append((self._clock(), event))
        self.start_senders()

    def start_senders(self) -> None:
        """Start as many senders as the queue and the scheduler's state want now: called
        whenever the scheduler may have become idle."""
        while self._senders < self._senders_wanted():
            self._senders += 1
            self._spawn(self._send(), "events")

    def _senders_wanted(self) -> int:
        queued = len(self._events)
        if not queued:
            return 0
        if self._busy():
            overdue = queued > EVENT_BACKLOG or self._clock() - self._events[0][0] >= EVENT_MAX_WAIT
            return 1 if overdue else 0
        return min(queued, EVENT_SENDERS)

    async def _send(self) -> None:
        events, record = self._events, self._client.record_event
        try:
            while events and self._senders <= self._senders_wanted():
                _, event = events.popleft()
                try:
                    await record(**event)
                except Exception as exc:  # reported, never fatal (one warning per Event)
                    logger.warning("failed to write %s event: %s", event["reason"], exc)
        finally:
            self._senders -= 1
