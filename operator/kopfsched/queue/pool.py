"""The unschedulable pool (upstream's unschedulablePods), grouped by what rejected each pod.

Upstream offers every cluster event to every pod of the pool, and each pod asks only its
rejector plugins' queueing hints. With one AssignedPodAdd per binding and a pool of pods
that fit nowhere, that is pool-size hint lookups per binding, which in Python cost more
than the scheduling itself. The pods of one group share their scheduler name (so their
profile: upstream keys the hints by schedulerName) and their rejector plugins, so whether
any of their rejectors registered an event is decided once per group; only the groups
that answer yes are offered the event, pod by pod, as upstream does. The outcome is the
same: a pod none of whose rejectors registered the event would have been skipped.

Pods keep the order they entered the pool in (a re-put keeps its place, as a dict's key
does), and the candidates of an event come out in that order, so moves happen in the same
order as with one flat list.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator

from kopfsched.framework.queued import QueuedPodInfo

GroupKey = tuple[str, frozenset[str]]
"""(schedulerName, rejector plugins: unschedulable_plugins | pending_plugins)."""


def group_key(qpi: QueuedPodInfo) -> GroupKey:
    return qpi.pod_info.scheduler_name, frozenset(qpi.unschedulable_plugins | qpi.pending_plugins)


class UnschedulablePool:
    """Pods by uid, gated ones marked, grouped by `group_key` (taken when the pod is put)."""

    def __init__(self) -> None:
        self._pods: dict[str, QueuedPodInfo] = {}
        self._gated: set[str] = set()
        self._order: dict[str, int] = {}
        self._counter = itertools.count()
        self._groups: dict[GroupKey, dict[str, QueuedPodInfo]] = {}
        self._group_of: dict[str, GroupKey] = {}

    def __len__(self) -> int:
        return len(self._pods)

    def __contains__(self, uid: object) -> bool:
        return uid in self._pods

    def get(self, uid: str) -> QueuedPodInfo | None:
        return self._pods.get(uid)

    def values(self) -> Iterator[QueuedPodInfo]:
        """Oldest entry first."""
        return iter(self._pods.values())

    def is_gated(self, uid: str) -> bool:
        return uid in self._gated

    @property
    def gated_count(self) -> int:
        return len(self._gated)

    def put(self, qpi: QueuedPodInfo) -> None:
        """Add or re-file the pod (its rejectors, gate or scheduler name may have changed)."""
        uid = qpi.uid
        if uid not in self._pods:
            self._order[uid] = next(self._counter)
        self._pods[uid] = qpi
        if qpi.gated:
            self._gated.add(uid)
        else:
            self._gated.discard(uid)
        key = group_key(qpi)
        old = self._group_of.get(uid)
        if old is not None and old != key:
            self._leave_group(uid, old)
        self._group_of[uid] = key
        self._groups.setdefault(key, {})[uid] = qpi

    def pop(self, uid: str) -> QueuedPodInfo | None:
        qpi = self._pods.pop(uid, None)
        if qpi is None:
            return None
        self._gated.discard(uid)
        del self._order[uid]
        self._leave_group(uid, self._group_of.pop(uid))
        return qpi

    def select(self, registered: Callable[[str, QueuedPodInfo], frozenset[str]]) -> list[QueuedPodInfo]:
        """In pool order, the pods of every group with no rejectors (failed with an error) or
        with a rejector among `registered(scheduler name, any pod of the group)`, the plugins
        that registered the event in that scheduler name's profile (asked once per name)."""
        picked: list[QueuedPodInfo] = []
        plugins_of: dict[str, frozenset[str]] = {}
        for (scheduler_name, rejectors), pods in self._groups.items():
            if rejectors:
                plugins = plugins_of.get(scheduler_name)
                if plugins is None:
                    plugins = plugins_of[scheduler_name] = registered(scheduler_name, next(iter(pods.values())))
                if rejectors.isdisjoint(plugins):
                    continue
            picked.extend(pods.values())
        if len(picked) > 1:
            # A pod re-filed under another group went to that group's end: sort, whatever the groups.
            order = self._order
            picked.sort(key=lambda q: order[q.uid])
        return picked

    def _leave_group(self, uid: str, key: GroupKey) -> None:
        members = self._groups[key]
        del members[uid]
        if not members:
            del self._groups[key]
