"""Hooks through which the scheduler reports each attempt (simulate's records, profile
status counters, metrics) without depending on any of them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from kopfsched.framework.diagnosis import Diagnosis
from kopfsched.framework.types import PodInfo


@dataclass(slots=True)
class Attempt:
    pod: PodInfo
    profile: str
    result: str
    """"scheduled", "unschedulable" or "error" (upstream's attempt result label)."""
    seconds: float
    node: str = ""
    message: str = ""
    reason: str = ""
    diagnosis: Diagnosis | None = None
    scores: dict[str, dict[str, int]] | None = None
    nominated_node: str = ""
    victims: tuple[str, ...] = ()
    attempts: int = 1
    since_first_queued: float | None = None
    """Seconds from the pod first entering the queue to a successful bind (the SLI)."""


class SchedulingObserver(Protocol):
    def attempted(self, attempt: Attempt) -> None:
        """After every scheduling attempt's outcome is known (bound, or failed in either cycle)."""

    def extension_point(self, profile: str, point: str, code: str, seconds: float) -> None:
        """One extension point ran."""


class NullObserver:
    observes_extension_points = False
    """An observer whose `extension_point` does nothing says so: Observers leaves it out of
    the fan-out that runs eight to ten times per scheduling cycle."""

    def attempted(self, attempt: Attempt) -> None:
        pass

    def extension_point(self, profile: str, point: str, code: str, seconds: float) -> None:
        pass


class Observers:
    """Fans out to several observers."""

    def __init__(self, *observers: SchedulingObserver) -> None:
        self.observers = list(observers)
        self._point_observers = [o.extension_point for o in observers
                                 if getattr(o, "observes_extension_points", True)]

    def attempted(self, attempt: Attempt) -> None:
        for observer in self.observers:
            observer.attempted(attempt)

    def extension_point(self, profile: str, point: str, code: str, seconds: float) -> None:
        for observe in self._point_observers:
            observe(profile, point, code, seconds)
