"""QueueProfile: what the queue needs to know about the profile a pod belongs to."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from kopfsched.framework.events import ClusterEventWithHint
from kopfsched.framework.status import Status
from kopfsched.framework.types import PodInfo

DEFAULT_POD_INITIAL_BACKOFF_SECONDS = 1.0
DEFAULT_POD_MAX_BACKOFF_SECONDS = 10.0
DEFAULT_POD_MAX_IN_UNSCHEDULABLE_SECONDS = 300.0
"""Upstream's DefaultPodMaxInUnschedulablePodsDuration (5 min); not in the v1 config API."""


@dataclass(frozen=True, slots=True)
class QueueProfile:
    """One profile's queueing settings, as the scheduler hands them to the queue."""

    pre_enqueue: Callable[[PodInfo], Status | None] | None = None
    """Runs the profile's PreEnqueue plugins; a non-success Status names the gating
    plugin in `Status.plugin` (the runtime stamps it). None: nothing gates."""
    initial_backoff: float = DEFAULT_POD_INITIAL_BACKOFF_SECONDS
    """podInitialBackoffSeconds: the backoff after the first failed attempt."""
    max_backoff: float = DEFAULT_POD_MAX_BACKOFF_SECONDS
    """podMaxBackoffSeconds: backoff doubles per attempt up to this."""
    hints: dict[str, list[ClusterEventWithHint]] = field(default_factory=dict)
    """Plugin name -> the events it registered (EnqueueExtensions), with their hints."""
    name: str = ""
    """The scheduler name, for logs and metrics."""

    def backoff_duration(self, attempts: int) -> float:
        """initial * 2^(attempts-1), capped at max; no penalty before the first attempt."""
        if attempts <= 0:
            return 0.0
        duration = self.initial_backoff
        for _ in range(attempts - 1):
            if duration >= self.max_backoff:
                break
            duration *= 2
        return min(duration, self.max_backoff)
