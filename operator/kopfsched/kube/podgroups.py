"""PodGroup status: what the scheduler knows of each gang, written to the PodGroup's status
subresource.

Only the groups whose pods a profile with Coscheduling serves get a status from us: the
rest belong to another scheduler (scheduler-plugins' own controller, say). Statuses are
computed by the Coscheduling plugin's `pod_group_status` (phase, scheduled, running,
succeeded, failed: scheduler-plugins' PodGroupStatus field names) and merge-patched only
when they differ from what was last written or is already on the object, at most once per
tick of the operator's status loop.
"""

from __future__ import annotations

import logging
from typing import Any

from kopfsched.config.types import ProfileConfig
from kopfsched.framework.client import ClusterError, NotFoundError
from kopfsched.framework.types import Obj
from kopfsched.kube.client import KubeClusterClient
from kopfsched.plugins import coscheduling
from kopfsched.scheduler.scheduler import Scheduler

logger = logging.getLogger(__name__)

PAST_SCHEDULING = frozenset({"Scheduled", "Running", "Finished", "Failed"})
"""Phases a group does not fall back from to Pending in our eyes: finished pods are not
watched (kube-scheduler's field selector), so members that completed merely vanish."""


def enables_coscheduling(config: ProfileConfig) -> bool:
    return any(ref.name == coscheduling.NAME for refs in config.plugins.values() for ref in refs)


def served_pod_group_statuses(scheduler: Scheduler) -> dict[str, tuple[Obj, dict[str, Any]]]:
    """"namespace/name" → (PodGroup, status) for every known PodGroup with at least one
    member whose scheduler name is a profile enabling Coscheduling (the plugin computes them)."""
    profiles = [p for p in scheduler.profiles.values() if enables_coscheduling(p.config)]
    if not profiles:
        return {}
    return coscheduling.served_pod_group_statuses(
        scheduler.cache.objects, profiles[0].framework.handle.pods,
        served={p.config.scheduler_name for p in profiles}, is_assumed=scheduler.cache.is_assumed)


def _already_there(obj: Obj, status: dict[str, Any]) -> bool:
    current = obj.get("status") or {}
    return all(current.get(field) == value for field, value in status.items())


def _members_finished(obj: Obj, status: dict[str, Any]) -> bool:
    """Pending after a phase past scheduling: members finished out of sight, not a new gang."""
    return status["phase"] == "Pending" and (obj.get("status") or {}).get("phase") in PAST_SCHEDULING


class PodGroupStatusWriter:
    """Writes changed PodGroup statuses; `write` is called on every tick of the status loop."""

    def __init__(self, *, scheduler: Scheduler, client: KubeClusterClient) -> None:
        self.scheduler = scheduler
        self.client = client
        self._written: dict[str, tuple[str | None, dict[str, Any]]] = {}
        """"namespace/name" → (uid, status) last written."""
        self.rounds = 0
        """Calls of `write` so far (tests wait on it instead of sleeping)."""

    async def write(self) -> int:
        """Patch every served PodGroup whose status changed; returns how many were written."""
        self.rounds += 1
        statuses = served_pod_group_statuses(self.scheduler)
        written = 0
        for key, (obj, status) in statuses.items():
            uid = (obj.get("metadata") or {}).get("uid")
            if self._written.get(key) == (uid, status) or (key not in self._written and _already_there(obj, status)):
                continue
            if _members_finished(obj, status):
                continue
            meta = obj["metadata"]
            try:
                await self.client.patch_pod_group_status(namespace=meta.get("namespace") or "default",
                                                         name=meta["name"], status=status)
            except NotFoundError:
                continue  # deleted meanwhile
            except ClusterError as exc:
                logger.warning("%s; retrying on the next tick", exc)
                continue
            self._written[key] = (uid, status)
            written += 1
        for gone in set(self._written) - set(statuses):
            del self._written[gone]
        return written


__all__ = ["PodGroupStatusWriter", "enables_coscheduling", "served_pod_group_statuses"]
