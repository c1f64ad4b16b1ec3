"""The Event broadcaster (upstream: k8s.io/client-go/tools/events' EventBroadcaster).

The scheduler records `Scheduled` Events here and goes on at once: each Event is posted
concurrently with everything else, as upstream's broadcaster hands each Event to a goroutine of
its own (recordToSink), so recording never holds up a binding cycle. A binding cycle posts its
Event once it has nothing else to do (`post`): its own task goes on posting it, which costs
less than a task per Event and posts no later than one would. Past EVENT_QUEUE_SIZE Events in
flight, new ones are dropped, as upstream's broadcaster drops when its channel is full.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from kopfsched.framework.client import ClusterClient

logger = logging.getLogger(__name__)

EVENT_QUEUE_SIZE = 10_000
"""Events being posted before new ones are dropped. Upstream's broadcaster buffers
maxQueuedEvents (1000) before its dispatcher, which hands each Event to its own goroutine at
once; the API server's answer time, not that buffer, bounds how many are in flight, so a
burst of a few thousand binds must fit here."""


class EventBroadcaster:
    """Events being posted through `client.record_event`, each by a task of its own."""

    def __init__(self, *, client: ClusterClient, spawn: Callable[[Awaitable[Any], str], Any]) -> None:
        self._client = client
        self._spawn = spawn
        self._in_flight = 0
        self.dropped = 0

    def __len__(self) -> int:
        """Events recorded and not yet posted."""
        return self._in_flight

    def record_later(self, **event: Any) -> None:
        """Start posting an Event (the keyword arguments of `ClusterClient.record_event`) and return."""
        if self._admit():
            self._spawn(self._send(event), "events")

    async def post(self, **event: Any) -> None:
        """Post an Event from a task that has nothing left to do but that (the end of a binding
        cycle): as `record_later`, without a task of its own."""
        if self._admit():
            await self._send(event)

    def _admit(self) -> bool:
        """Count one more Event in flight; False (and dropped) past EVENT_QUEUE_SIZE."""
        if self._in_flight >= EVENT_QUEUE_SIZE:
            self.dropped += 1
            if self.dropped in (1, 10, 100) or self.dropped % 1000 == 0:
                logger.warning("%d Events dropped: more than %d waiting to be posted",
                               self.dropped, EVENT_QUEUE_SIZE)
            return False
        self._in_flight += 1
        return True

    async def _send(self, event: dict[str, Any]) -> None:
        try:
            await self._client.record_event(**event)
        except Exception as exc:  # reported, never fatal (one warning per Event)
            logger.warning("failed to write %s event: %s", event["reason"], exc)
        finally:
            self._in_flight -= 1
