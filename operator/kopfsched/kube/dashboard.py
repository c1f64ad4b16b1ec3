"""The operator's `DashboardSource`: the scheduler's view (scheduler/view.py) plus what only
the kube layer knows — which SchedulerProfile serves each scheduler name, and its Ready
condition. Read-only: nothing here talks to the API server."""

from __future__ import annotations

import platform
import time
from typing import Any

from kopfsched.cache.cache import Cache
from kopfsched.kube.profile_manager import ProfileManager
from kopfsched.scheduler import view
from kopfsched.scheduler.activity import Activity
from kopfsched.scheduler.scheduler import Scheduler
from kopfsched.scheduler.stats import SchedulingStats


class OperatorDashboard:
    def __init__(self, *, scheduler: Scheduler, cache: Cache, activity: Activity, stats: SchedulingStats,
                 profiles: ProfileManager, identity: str = "", leading: Any = None) -> None:
        self.scheduler = scheduler
        self.cache = cache
        self.activity = activity
        self.stats = stats
        self.profiles = profiles
        self.identity = identity or platform.node()
        self.leading = leading
        """A callable: is this replica the one scheduling (the leader, or no election)?"""

    async def overview(self) -> dict[str, Any]:
        data = await view.overview(self.scheduler, self.activity, self.cache)
        data["profiles"] = self._profiles(data["profiles"], data["queues"])
        data["instance"] = {"identity": self.identity, "scheduling": bool(self.leading()) if self.leading else True,
                            "time": time.time()}
        return data

    def _profiles(self, served: list[dict[str, Any]], depths: dict[str, dict[str, int]]) -> list[dict[str, Any]]:
        """Served profiles with their SchedulerProfile (or --config) and Ready condition, then
        SchedulerProfiles that serve nothing (invalid from the start, or in conflict)."""
        by_name = {p["schedulerName"]: p for p in served}
        out: list[dict[str, Any]] = []
        owners: set[str] = set()
        for cr_name, (scheduler_name, condition) in sorted(self.profiles.conditions().items()):
            entry = by_name.get(scheduler_name or "") if condition.get("reason") != "Conflict" else None
            if entry is not None:
                owners.add(entry["schedulerName"])
                out.append({**entry, "source": f"SchedulerProfile/{cr_name}", "ready": condition})
            else:
                out.append({"schedulerName": scheduler_name, "plugins": {}, "source": f"SchedulerProfile/{cr_name}",
                            "ready": condition})
        for name, entry in by_name.items():
            if name not in owners:
                out.append({**entry, "source": "--config", "ready": {"type": "Ready", "status": "True",
                                                                       "reason": "Serving",
                                                                       "message": f'serving scheduler name "{name}"'}})
        for entry in out:
            name = entry.get("schedulerName") or ""
            stats = self.stats.of(name) if name in by_name else None
            entry["queue"] = depths.get(name) or {q: 0 for q in view.QUEUES}
            if stats is not None:
                entry["counters"] = {"scheduled": stats.scheduled, "unschedulable": stats.unschedulable,
                                     "preemptions": stats.preemptions, "errors": stats.errors}
                entry["latency"] = {"p50Ms": stats.percentile_ms(0.5), "p99Ms": stats.percentile_ms(0.99)}
        return out

    async def pending(self) -> bytes:
        return await view.pending_body(self.scheduler.pending)

    def pending_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        return view.pending_pod(self.scheduler.pending, namespace, name)
