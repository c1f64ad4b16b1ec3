"""The status writer: one loop that writes what the scheduler reports on its custom
resources — SchedulerProfile status (the effective scheduler name, Ready, conditions,
figures) and Coscheduling's
PodGroup status — every `interval` seconds, sooner after a profile changed, and only
what changed since the last write."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from kopfsched.framework.client import ClusterError, NotFoundError
from kopfsched.kube.client import KubeClusterClient
from kopfsched.kube.podgroups import PodGroupStatusWriter
from kopfsched.kube.profile_manager import ProfileManager
from kopfsched.kube.waiting import sleep_or, stopped_within

logger = logging.getLogger(__name__)

COALESCE = 0.2
"""Seconds to wait after a write, so a burst of profile changes makes one write."""


class StatusWriter:
    def __init__(self, *, client: KubeClusterClient, profiles: ProfileManager, pod_groups: PodGroupStatusWriter,
                 interval: float, profiles_changed: asyncio.Event) -> None:
        self.client = client
        self.profiles = profiles
        self.pod_groups = pod_groups
        self.interval = interval
        self.profiles_changed = profiles_changed
        self._written: dict[str, dict[str, Any]] = {}
        """SchedulerProfile name → the status last written."""

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            self.profiles_changed.clear()
            for what, write in (("SchedulerProfile", self.write_profiles), ("PodGroup", self.pod_groups.write)):
                try:
                    await write()
                except Exception:  # the loop must outlive any one failure
                    logger.exception("writing %s status failed", what)
            await sleep_or(stop, self.interval, self.profiles_changed)
            await stopped_within(stop, COALESCE)

    async def write_profiles(self) -> None:
        for name, status in self.profiles.statuses().items():
            if self._written.get(name) == status:
                continue
            try:
                await self.client.patch_profile_status(name=name, status=_merge_nulls(self._written.get(name), status))
            except NotFoundError:
                continue  # deleted meanwhile
            except ClusterError as exc:  # one profile's failure must not hold the others back
                logger.warning("%s; retrying on the next refresh", exc)
                continue
            self._written[name] = status
        for gone in set(self._written) - set(self.profiles.crs):
            del self._written[gone]


def _merge_nulls(previous: dict[str, Any] | None, status: dict[str, Any]) -> dict[str, Any]:
    """A merge patch that also removes top-level status fields no longer reported."""
    removed = {key: None for key in (previous or {}) if key not in status}
    return {**removed, **status}


__all__ = ["StatusWriter"]
