"""The profiles one Scheduler serves, by scheduler name (upstream's profile.Map).

Each Profile is a validated config, the Framework built from it, the queue's view of it
(PreEnqueue, backoff, queueing hints) and the HTTP extender clients it calls. The set owns
those clients (one per distinct extender config, kept across reloads, closed once no
profile calls them) and the queue's sort order: the QueueSort plugin every profile shares
(validation refuses profiles that disagree, as upstream).

`replace` builds a Framework only for a new or changed config; an unchanged profile keeps
its plugins and whatever they cache. What a reload means for the pods in the queue is the
Scheduler's business (Scheduler.set_profiles).
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from kopfsched.config.types import ProfileConfig
from kopfsched.framework.handle import Handle
from kopfsched.framework.queued import QueuedPodInfo
from kopfsched.framework.registry import Registry
from kopfsched.framework.runtime import Framework, Observer
from kopfsched.framework.types import PodInfo
from kopfsched.queue.profile import QueueProfile
from kopfsched.scheduler.extender import ExtenderPool, HTTPExtender, close_all
from kopfsched.scheduler.framework_builder import build_framework, queue_profile
from kopfsched.scheduler.observer import SchedulingObserver

Less = Callable[[QueuedPodInfo, QueuedPodInfo], bool]


@dataclass(slots=True)
class Profile:
    config: ProfileConfig
    framework: Framework
    queue_profile: QueueProfile
    extenders: tuple[HTTPExtender, ...] = ()
    """Ignorable extenders last, as upstream; non-empty means the cycle awaits them."""


def priority_then_timestamp(a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
    """PrioritySort's order, used until a profile brings its QueueSort plugin."""
    if a.priority != b.priority:
        return a.priority > b.priority
    return a.timestamp < b.timestamp


def priority_then_timestamp_rank(a: QueuedPodInfo) -> tuple[int, float]:
    """priority_then_timestamp as a rank: `less(a, b)` is `rank(a) < rank(b)` (see Heap)."""
    return -a.priority, a.timestamp


def _rank_of(plugin: Any) -> Callable[[QueuedPodInfo], Any] | None:
    """The QueueSort plugin's `rank`, when the class that defines its `less` defines `rank` too
    (a subclass that changes `less` alone must not be ranked by its parent's order)."""
    for cls in type(plugin).__mro__:
        if "less" in cls.__dict__:
            return plugin.rank if "rank" in cls.__dict__ else None
    return None


class ProfileSet(Mapping[str, Profile]):
    """Scheduler name → Profile, read-only for everyone but `replace`."""

    def __init__(self, *, registry: Registry, new_handle: Callable[[], Handle], observer: SchedulingObserver,
                 spawn: Callable[[Awaitable[Any], str], object]) -> None:
        self._registry = registry
        self._new_handle = new_handle
        self._observer = observer
        self._spawn = spawn
        self._profiles: dict[str, Profile] = {}
        self._extenders = ExtenderPool()
        self._less: Less = priority_then_timestamp
        self.rank: Callable[[QueuedPodInfo], Any] | None = priority_then_timestamp_rank
        """The activeQ's order as a rank (Heap's `rank`), or None when its QueueSort has none."""

    # -- reading ------------------------------------------------------------------------------

    def __getitem__(self, scheduler_name: str) -> Profile:
        return self._profiles[scheduler_name]

    def __contains__(self, scheduler_name: object) -> bool:
        return scheduler_name in self._profiles

    def __iter__(self) -> Iterator[str]:
        return iter(self._profiles)

    def __len__(self) -> int:
        return len(self._profiles)

    def responsible_for(self, pod: PodInfo) -> bool:
        """Upstream's responsibleForPod: a profile serves the pod's scheduler name."""
        return pod.scheduler_name in self._profiles

    def framework_for(self, pod: PodInfo) -> Framework | None:
        profile = self._profiles.get(pod.scheduler_name)
        return profile.framework if profile is not None else None

    def queue_profile_for(self, pod: PodInfo) -> QueueProfile | None:
        profile = self._profiles.get(pod.scheduler_name)
        return profile.queue_profile if profile is not None else None

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        """The activeQ's order: the profiles' QueueSort plugin (upstream's Less of the first profile)."""
        return self._less(a, b)

    # -- reloading ----------------------------------------------------------------------------

    def replace(self, configs: Iterable[ProfileConfig]) -> set[str]:
        """Serve `configs` from now on; returns the scheduler names served before whose
        profile was rebuilt (their config changed)."""
        old = self._profiles
        new: dict[str, Profile] = {}
        for config in configs:
            kept = old.get(config.scheduler_name)
            new[config.scheduler_name] = kept if kept is not None and kept.config == config else self._build(config)
        unused = self._extenders.release_unused(e for profile in new.values() for e in profile.extenders)
        if unused:
            self._spawn(close_all(unused), "close extenders")
        self._profiles = new
        sort = next((plugin for plugin in (p.framework.queue_sort_plugin for p in new.values())
                     if plugin is not None), None)
        self._less = sort.less if sort is not None else priority_then_timestamp
        self.rank = _rank_of(sort) if sort is not None else priority_then_timestamp_rank
        return {name for name, profile in new.items() if name in old and old[name] is not profile}

    def _build(self, config: ProfileConfig) -> Profile:
        extenders = self._extenders.for_extenders(config.extenders)
        handle = self._new_handle()
        handle.extenders = extenders
        fwk = build_framework(config, registry=self._registry, handle=handle,
                              observe=self._observe_point(config.scheduler_name))
        return Profile(config, fwk, queue_profile(config, fwk), extenders)

    def _observe_point(self, profile: str) -> Observer:
        # A partial rather than a closure: no Python frame of its own at every extension point.
        return functools.partial(self._observer.extension_point, profile)

    async def close(self) -> None:
        """Close every extender client (the scheduler is shutting down)."""
        await self._extenders.close()
