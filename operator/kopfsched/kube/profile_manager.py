"""SchedulerProfiles → the scheduler's profile set, and the profiles' status.

Each SchedulerProfile is validated on every spec change. A valid spec replaces the CR's
profile; an invalid one is reported (Ready=False, reason InvalidConfig, every problem
with its field path) while the CR's last valid spec keeps serving. The served set is the
--config file's profiles first, then the CRs by creation time; a CR whose scheduler name
(or queueSort) collides with an earlier profile is not served and says so in its status
(reason Conflict), instead of silently shadowing or being shadowed. The set is swapped
into the scheduler with `set_profiles`, which is safe between two scheduling cycles.

Status is computed here and written by the kube layer at a bounded rate (StatusWriter).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kopfsched.config.field_checks import profile_conflicts
from kopfsched.config.parse import parse_scheduler_profile
from kopfsched.config.types import Problem, ProfileConfig
from kopfsched.framework.registry import Registry
from kopfsched.framework.types import Obj, rfc3339
from kopfsched.scheduler.scheduler import Scheduler
from kopfsched.scheduler.stats import SchedulingStats

logger = logging.getLogger(__name__)

READY = "Ready"
INVALID_CONFIG = "InvalidConfig"
CONFLICT = "Conflict"
SERVING = "Serving"


@dataclass(slots=True)
class _ProfileCR:
    name: str
    created: str
    generation: int = 0
    spec: Any = None
    problems: list[Problem] = field(default_factory=list)
    valid: ProfileConfig | None = None
    valid_generation: int = 0
    conflicts: list[Problem] = field(default_factory=list)
    ready: bool | None = None
    transition: float = 0.0


class ProfileManager:
    """Keeps the profile set served by one Scheduler in line with the SchedulerProfiles."""

    def __init__(self, *, scheduler: Scheduler, registry: Registry, stats: SchedulingStats,
                 config_profiles: list[ProfileConfig] | None = None,
                 wall_clock: Callable[[], float] = time.time,
                 on_change: Callable[[], None] | None = None) -> None:
        self.scheduler = scheduler
        self.registry = registry
        self.stats = stats
        self.config_profiles = list(config_profiles or [])
        self.wall_clock = wall_clock
        self.on_change = on_change
        self.crs: dict[str, _ProfileCR] = {}
        self.served: list[ProfileConfig] = []
        self.apply()

    # -- watch events --------------------------------------------------------------------

    def upsert(self, obj: Obj) -> None:
        meta = obj.get("metadata") or {}
        name = meta.get("name") or ""
        generation = int(meta.get("generation") or 0)
        cr = self.crs.get(name)
        if cr is None:
            cr = self.crs[name] = _ProfileCR(name=name, created=meta.get("creationTimestamp") or "")
        elif cr.generation == generation and cr.spec == obj.get("spec"):
            return  # a status write or a metadata change: nothing to reload
        cr.generation, cr.spec = generation, obj.get("spec")
        profile, problems = parse_scheduler_profile(obj, self.registry)
        cr.problems = problems
        if profile is not None:
            cr.valid, cr.valid_generation = profile, generation
            logger.info("SchedulerProfile %s generation %d is valid", name, generation)
        else:
            logger.warning("SchedulerProfile %s generation %d is invalid: %s", name, generation,
                           "; ".join(map(str, problems)))
        self.apply()

    def delete(self, obj: Obj) -> None:
        name = (obj.get("metadata") or {}).get("name") or ""
        if self.crs.pop(name, None) is not None:
            logger.info("SchedulerProfile %s deleted; its scheduler name is no longer served", name)
            self.apply()

    # -- the served set --------------------------------------------------------------------

    def apply(self) -> None:
        """Recompute the served set and swap it in when it changed."""
        ordered = sorted((cr for cr in self.crs.values() if cr.valid is not None), key=lambda c: (c.created, c.name))
        candidates = [*self.config_profiles, *(cr.valid for cr in ordered if cr.valid is not None)]
        owners = [None] * len(self.config_profiles) + [cr.name for cr in ordered]
        before = {name: cr.conflicts for name, cr in self.crs.items()}
        for cr in self.crs.values():
            cr.conflicts = []
        rejected: set[int] = set()
        for index, problem in profile_conflicts(candidates):
            rejected.add(index)
            owner = owners[index]
            if owner is not None:
                self.crs[owner].conflicts.append(problem)
        served = [profile for index, profile in enumerate(candidates) if index not in rejected]
        for name, cr in self.crs.items():
            if cr.conflicts and [str(p) for p in cr.conflicts] != [str(p) for p in before.get(name, ())]:
                # The status says it too, but a refused profile is easy to miss.
                logger.warning("SchedulerProfile %s is not served: %s", name, "; ".join(str(p) for p in cr.conflicts))
        for cr in self.crs.values():
            ready = not cr.problems and not cr.conflicts and cr.valid is not None
            if ready != cr.ready:
                cr.ready, cr.transition = ready, self.wall_clock()

        if served != self.served:
            self.served = served
            self.scheduler.set_profiles(served)
            logger.info("serving scheduler names: %s", ", ".join(p.scheduler_name for p in served) or "(none)")
        if self.on_change is not None:
            self.on_change()

    def serves(self, name: str) -> bool:
        return any(p.scheduler_name == name for p in self.served)

    # -- status ------------------------------------------------------------------------------

    def statuses(self) -> dict[str, dict[str, Any]]:
        """The desired status of every SchedulerProfile, by CR name."""
        depths = self._queue_depths()
        return {name: self._status(cr, depths) for name, cr in self.crs.items()}

    def conditions(self) -> dict[str, tuple[str | None, dict[str, Any]]]:
        """Each SchedulerProfile's scheduler name (None without a valid spec) and Ready
        condition, by CR name: cheap, for the dashboard."""
        return {name: (cr.valid.scheduler_name if cr.valid else None, self._condition(cr))
                for name, cr in self.crs.items()}

    def _condition(self, cr: _ProfileCR) -> dict[str, Any]:
        condition: dict[str, Any] = {"type": READY, "status": "True" if cr.ready else "False",
                                     "observedGeneration": cr.generation,
                                     "lastTransitionTime": rfc3339(cr.transition)}
        serving = cr.valid is not None and not cr.conflicts
        if cr.problems:
            condition["reason"] = INVALID_CONFIG
            message = "; ".join(str(p) for p in cr.problems)
            if cr.valid is not None and serving:
                message += f" (generation {cr.valid_generation} keeps serving)"
            condition["message"] = message
        elif cr.conflicts:
            condition["reason"] = CONFLICT
            condition["message"] = "; ".join(p.message for p in cr.conflicts) + " (not served)"
        else:
            condition["reason"] = SERVING
            condition["message"] = f'serving scheduler name "{cr.valid.scheduler_name}"' if cr.valid else ""
        return condition

    def _status(self, cr: _ProfileCR, depths: Mapping[str, dict[str, int]]) -> dict[str, Any]:
        condition = self._condition(cr)
        serving = cr.valid is not None and not cr.conflicts
        status: dict[str, Any] = {"schedulerName": _scheduler_name(cr), "observedGeneration": cr.generation,
                                  "conditions": [condition]}
        if not serving or cr.valid is None:
            return status
        scheduler_name = cr.valid.scheduler_name
        profile = self.scheduler.profiles.get(scheduler_name)
        if profile is not None:
            status["plugins"] = profile.framework.effective_plugins()
        status["queue"] = depths.get(scheduler_name) or _empty_depths()
        stats = self.stats.of(scheduler_name)
        status["counters"] = {"scheduled": stats.scheduled, "unschedulable": stats.unschedulable,
                              "preemptions": stats.preemptions, "errors": stats.errors}
        if stats.last_schedule_time is not None:
            status["lastScheduleTime"] = rfc3339(stats.last_schedule_time)
        p50, p99 = stats.percentile_ms(0.5), stats.percentile_ms(0.99)
        if p50 is not None and p99 is not None:
            status["latency"] = {"p50Ms": p50, "p99Ms": p99}
        return status

    def _queue_depths(self) -> dict[str, dict[str, int]]:
        return self.scheduler.queue.pending_counts_by(lambda pod: pod.scheduler_name)


def _scheduler_name(cr: _ProfileCR) -> str:
    """The scheduler name the profile serves (or claims): spec.schedulerName defaults to
    metadata.name, and the CRD's Scheduler column reads it here, so it shows either way."""
    if cr.valid is not None:
        return cr.valid.scheduler_name
    claimed = cr.spec.get("schedulerName") if isinstance(cr.spec, dict) else None
    return claimed if isinstance(claimed, str) and claimed else cr.name


def _empty_depths() -> dict[str, int]:
    return {"active": 0, "backoff": 0, "unschedulable": 0, "gated": 0, "pending": 0}


class ProfileFeedHandlers:
    """The profile feed's handler side: SchedulerProfiles go to the ProfileManager (so they
    get the feed's ordering by resourceVersion and relist reconciling too)."""

    def __init__(self, profiles: ProfileManager) -> None:
        self.profiles = profiles

    def on_object_upsert(self, kind: str, obj: Obj) -> None:
        self.profiles.upsert(obj)

    def on_object_delete(self, kind: str, obj: Obj) -> None:
        self.profiles.delete(obj)
