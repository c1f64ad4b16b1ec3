"""SchedulingQueue: the pods waiting for a scheduling attempt (upstream's PriorityQueue).

Where a pending pod sits:

- activeQ: ready now; a heap ordered by the QueueSort plugin's `less`. `pop()` takes
  the head for the next scheduling cycle.
- backoffQ: failed recently; ordered by when its backoff expires. Backoff is
  `initial * 2^(attempts-1)` capped at `max` (per profile), counted from the pod's
  last attempt. `flush_backoff_completed()` moves expired pods to activeQ.
  With `pop_from_backoff` (upstream's SchedulerPopFromBackoffQ, on by default in the
  Scheduler): expiries are cut to whole ordering windows of one second on the queue's
  clock, pods of the same window are ordered by QueueSort, a pod's backoff ends with the
  window its expiry falls in, the flush runs at window boundaries, and when activeQ is
  empty `pop()` takes the head of backoffQ at once. Pods that failed with an error (no
  rejector plugins) wait in a backoffQ of their own that `pop()` never takes from.
- the unschedulable pool: rejected by plugins; it waits there until a cluster event
  that one of its rejector plugins registered, and whose queueing hint says QUEUE,
  moves it out (`move_all_to_active_or_backoff`), or until it has sat there for
  5 minutes (`flush_unschedulable_leftover`).
- gated (inside the pool): refused by a PreEnqueue plugin (e.g. schedulingGates);
  only the gating plugin's own events release it, and PreEnqueue runs again first.
- in flight: popped and not yet done. Events that arrive meanwhile are recorded, and
  a failed pod is checked against them when it comes back, so no wake-up is lost.

The queue is single-threaded (one asyncio loop); no locks. Hint functions get
`(pod_info, old_obj, new_obj)`: the rejected pod's PodInfo, and the objects of the
event as the caller passed them (PodInfo for pod events, plain dicts otherwise).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import itertools
import logging
import math
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kopfsched.framework.events import (
    ActionType,
    ClusterEvent,
    EventResource,
    QueueingHint,
)
from kopfsched.framework.queued import QueuedPodInfo
from kopfsched.framework.status import Status, is_success
from kopfsched.framework.types import PodInfo
from kopfsched.queue import events as ev
from kopfsched.queue.heap import Heap, RankedHeap
from kopfsched.queue.in_flight import InFlight
from kopfsched.queue.nominator import Nominator, status_nominated_node
from kopfsched.queue.pool import UnschedulablePool
from kopfsched.queue.profile import DEFAULT_POD_MAX_IN_UNSCHEDULABLE_SECONDS, QueueProfile

logger = logging.getLogger("kopfsched.queue")

BACKOFF_FLUSH_INTERVAL = 1.0
BACKOFF_ORDERING_WINDOW = 1.0
"""Upstream's backoffQOrderingWindowDuration: with pop_from_backoff, backoff expiries are cut to
whole windows of this many seconds (pods of one window ordered as activeQ orders them), and
backoffQ is flushed at window boundaries."""
LEFTOVER_FLUSH_INTERVAL = 30.0
_DELETED_MEMORY = 4096
"""How many deleted pod uids to remember, so a failed binding cannot requeue a deleted pod."""

ACTIVE = "active"
BACKOFF = "backoff"
UNSCHEDULABLE = "unschedulable"
GATED = "gated"

_DEFAULT_PROFILE = QueueProfile()


class Strategy(enum.Enum):
    """Where an event (or a failed attempt) sends a pod from the unschedulable pool."""

    SKIP = 0
    """Stay in the unschedulable pool."""
    AFTER_BACKOFF = 1
    """backoffQ if still backing off, else activeQ."""
    IMMEDIATELY = 2
    """activeQ now: a Pending plugin said its wait is over."""


_UNSCHEDULED_POD_UPDATE_OTHER = ev.event_for(EventResource.UNSCHEDULED_POD, ActionType.UPDATE_OTHER)
"""The event of an update whose old version is not known."""

_Registered = tuple[QueueProfile, ClusterEvent, list[tuple[str, list[Any]]], frozenset[str]]
"""A profile, an event, the profile's plugins with registrations matching it (in hint order), their names."""


@dataclass(slots=True)
class _BackoffEntry:
    expiry: float
    """When the backoff ends; with pop_from_backoff, the start of its ordering window."""
    qpi: QueuedPodInfo


def _align(seconds: float) -> float:
    """The start of the ordering window `seconds` falls in."""
    return math.floor(seconds / BACKOFF_ORDERING_WINDOW) * BACKOFF_ORDERING_WINDOW


def _failed_with_error(qpi: QueuedPodInfo) -> bool:
    return not qpi.unschedulable_plugins and not qpi.pending_plugins


def _is_wildcard(event: ClusterEvent) -> bool:
    return event.resource is EventResource.WILDCARD and event.action == ActionType.ALL


def _uid_of(obj: Any) -> str | None:
    if isinstance(obj, PodInfo | QueuedPodInfo):
        return obj.uid
    if isinstance(obj, Mapping):
        return (obj.get("metadata") or {}).get("uid")
    return None


class SchedulingQueue:
    """activeQ, backoffQ, the unschedulable pool (with gated pods) and the nominator."""

    def __init__(
        self,
        *,
        less: Callable[[QueuedPodInfo, QueuedPodInfo], bool],
        clock: Callable[[], float],
        rank: Callable[[QueuedPodInfo], Any] | None = None,
        profile_for: Callable[[PodInfo], QueueProfile | None],
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        max_in_unschedulable: float = DEFAULT_POD_MAX_IN_UNSCHEDULABLE_SECONDS,
        nominator: Nominator | None = None,
        pop_from_backoff: bool = False,
    ) -> None:
        """`pop_from_backoff`: upstream's SchedulerPopFromBackoffQ (see the module's docstring).
        Off for a queue built directly, so its timing is the classic one; the Scheduler passes
        the feature gate, which is on by default as upstream's. `rank`: `less` as a rank
        (see Heap), for activeQ; set_order changes both."""
        self._less = less
        self.pop_from_backoff = pop_from_backoff
        self._clock = clock
        self._profile_for = profile_for
        self._sleep = sleep
        self.max_in_unschedulable = max_in_unschedulable
        self.nominator = nominator or Nominator()

        self._active: Heap[QueuedPodInfo] | RankedHeap[QueuedPodInfo] = _active_heap(less, rank)
        self._rank = rank
        self._backoff: Heap[_BackoffEntry] = Heap(less=self._backoff_less, key=lambda e: e.qpi.uid)
        self._error_backoff: Heap[_BackoffEntry] = Heap(less=self._backoff_less, key=lambda e: e.qpi.uid)
        """With pop_from_backoff, the pods that failed with an error back off here: pop() does not
        take them early (upstream's podErrorBackoffQ). Without it, every pod is in _backoff."""
        self._pool = UnschedulablePool()
        self._in_flight = InFlight()
        self._registered: dict[tuple[int, int], _Registered] = {}
        """(id(profile), id(event)) -> the profile's plugins with registrations matching the event,
        in hint order (and as a set). Every event is offered to every unschedulable pod: matching
        once per kind of event, not once per pod. The profile and the event are kept so that
        their ids are not reused."""
        self._deleted: OrderedDict[str, None] = OrderedDict()
        self._cycle = 0
        self._closed = False
        self._wakeup = asyncio.Event()
        self._stop = asyncio.Event()

    # --- reading --------------------------------------------------------------------

    @property
    def in_flight_events(self) -> int:
        """Cluster events kept for the pods in flight (freed once no pod in flight needs them)."""
        return self._in_flight.event_count

    @property
    def scheduling_cycle(self) -> int:
        """How many pods were popped so far."""
        return self._cycle

    @property
    def closed(self) -> bool:
        return self._closed

    def pending_counts(self) -> dict[str, int]:
        return {
            ACTIVE: len(self._active),
            BACKOFF: len(self._backoff) + len(self._error_backoff),
            UNSCHEDULABLE: len(self._pool) - self._pool.gated_count,
            GATED: self._pool.gated_count,
        }

    def pending_counts_by(self, key: Callable[[PodInfo], str]) -> dict[str, dict[str, int]]:
        """pending_counts per key(pod) (e.g. per scheduler name), plus "pending", the sum: from
        every queue in no particular order (active_pods() and backoff_pods() sort theirs)."""
        counts: dict[str, dict[str, int]] = {}
        pods = ((ACTIVE, qpi) for qpi in self._active)
        backoff = ((BACKOFF, entry.qpi) for entry in itertools.chain(self._backoff, self._error_backoff))
        pool = ((GATED if self._pool.is_gated(qpi.uid) else UNSCHEDULABLE, qpi) for qpi in self._pool.values())
        for where, qpi in itertools.chain(pods, backoff, pool):
            of_key = counts.get(name := key(qpi.pod_info))
            if of_key is None:
                of_key = counts[name] = {ACTIVE: 0, BACKOFF: 0, UNSCHEDULABLE: 0, GATED: 0, "pending": 0}
            of_key[where] += 1
            of_key["pending"] += 1
        return counts

    def next_backoff_expiry(self) -> float | None:
        """When the earliest backoff ends (clock seconds), or None with an empty backoffQ. With
        pop_from_backoff: the end of the ordering window the earliest expiry falls in, when the
        flush moves it."""
        heads = [entry.expiry for entry in (self._backoff.peek(), self._error_backoff.peek()) if entry is not None]
        if not heads:
            return None
        return min(heads) + BACKOFF_ORDERING_WINDOW if self.pop_from_backoff else min(heads)

    def is_settled(self) -> bool:
        """Nothing to pop, nothing backing off, nothing in flight: only events can help now."""
        return not self._active and not self._backoff and not self._error_backoff and not self._in_flight

    def set_rank(self, rank: Callable[[QueuedPodInfo], Any] | None) -> None:
        """activeQ's `less` as a rank from now on (the profiles' QueueSort changed; see Heap)."""
        if _order_of(rank) != _order_of(self._rank):  # a rebuilt PrioritySort orders as the old one
            self._rank = rank
            active = _active_heap(self._less, rank)
            for qpi in self._active.in_push_order():  # ties keep their order
                active.add_or_update(qpi)
            self._active = active

    def active_pods(self) -> list[QueuedPodInfo]:
        """activeQ in pop order."""
        return self._active.sorted()

    def backoff_pods(self) -> list[QueuedPodInfo]:
        """backoffQ in expiry order (with pop_from_backoff: the pods that failed with an error after
        the others of their window)."""
        entries = self._backoff.sorted()
        if self._error_backoff:
            entries = sorted(entries + self._error_backoff.sorted(), key=lambda e: e.expiry)
        return [entry.qpi for entry in entries]

    def unschedulable_pods(self) -> list[QueuedPodInfo]:
        """The unschedulable pool without the gated pods, oldest entry first."""
        return [q for q in self._pool.values() if not self._pool.is_gated(q.uid)]

    def gated_pods(self) -> list[QueuedPodInfo]:
        return [q for q in self._pool.values() if self._pool.is_gated(q.uid)]

    def in_flight_pods(self) -> list[PodInfo]:
        return self._in_flight.pods()

    def get(self, uid: str) -> QueuedPodInfo | None:
        """The queued pod with `uid` wherever it waits (not in flight)."""
        entry = self._backoff_get(uid)
        return self._active.get(uid) or (entry.qpi if entry else None) or self._pool.get(uid)

    def pod_info(self, uid: str) -> PodInfo | None:
        """The newest PodInfo of `uid` the queue has, queued or in flight."""
        qpi = self.get(uid)
        if qpi is not None:
            return qpi.pod_info
        flying = self._in_flight.get(uid)
        return flying.latest if flying is not None else None

    def where(self, uid: str) -> str | None:
        """Which queue holds `uid`: active, backoff, unschedulable, gated, "in-flight" or None."""
        if uid in self._active:
            return ACTIVE
        if uid in self._backoff or uid in self._error_backoff:
            return BACKOFF
        if uid in self._pool:
            return GATED if self._pool.is_gated(uid) else UNSCHEDULABLE
        return "in-flight" if uid in self._in_flight else None

    # --- pods of our profiles -------------------------------------------------------

    def add(self, pod: PodInfo, *, timestamp: float | None = None) -> bool:
        """A new pending pod: into activeQ, or gated when a PreEnqueue plugin refuses it.

        `timestamp` is the queue timestamp QueueSort breaks priority ties with (default:
        now). False when no profile of ours schedules the pod.
        """
        if self._profile_for(pod) is None:
            return False
        self._deleted.pop(pod.uid, None)
        known = self.get(pod.uid)
        if known is not None or pod.uid in self._in_flight:
            self.update(known.pod_info if known else None, pod)
            return True
        qpi = QueuedPodInfo(pod, self._clock() if timestamp is None else timestamp)
        # Before PreEnqueue, whatever it says: a gated pod's nomination holds its room too (v1.37).
        self.nominator.add_nominated_pod(pod, "")
        self._move_to_active(qpi, str(ev.UNSCHEDULED_POD_ADD))
        return True

    def update(self, old: PodInfo | None, new: PodInfo) -> None:
        """A pending pod changed; an update may release it from the unschedulable pool."""
        if new.node_name:
            # Bound by someone else: it is the cache's now.
            self.delete(new)
            return
        if self._profile_for(new) is None:
            return
        events = ev.pod_update_events(old.pod, new.pod) if old is not None else [_UNSCHEDULED_POD_UPDATE_OTHER]
        self._update(old, new, events)
        if old is not None and status_nominated_node(old) and status_nominated_node(old) != status_nominated_node(new):
            # The pod gave up its nominated node: lower-priority pods may fit there now.
            self.move_all_to_active_or_backoff(
                ev.ASSIGNED_POD_DELETE, old, None, pre_check=lambda p: p.priority <= old.priority)

    def _update(self, old: PodInfo | None, new: PodInfo, events: list[ClusterEvent]) -> None:
        uid = new.uid
        flying = self._in_flight.get(uid)
        if flying is not None:
            # The failure handler requeues the newest version and checks these events.
            flying.latest = new
            for event in events:
                self._in_flight.record(event, old, new)
            if self.nominator.nominated_node(uid):
                self.nominator.update_nominated_pod(old, new)
            return
        if (qpi := self._active.get(uid)) is not None:
            qpi.pod_info = new
            self._active.add_or_update(qpi)
            self.nominator.update_nominated_pod(old, new)
            return
        if (entry := self._backoff_get(uid)) is not None:
            entry.qpi.pod_info = new
            (self._backoff if uid in self._backoff else self._error_backoff).add_or_update(entry)
            self.nominator.update_nominated_pod(old, new)
            return
        if (qpi := self._pool.get(uid)) is not None:
            qpi.pod_info = new
            self._pool.put(qpi)  # its scheduler name may have changed
            self.nominator.update_nominated_pod(old, new)
            for event in events:
                strategy = self._hint_strategy(qpi, event, old, new)
                # Out of the pool is final (as upstream with SchedulerPopFromBackoffQ, which stops
                # at backoffQ too): a later event answered "skip" must not put it back in the pool.
                if self._requeue(qpi, strategy, str(event)) in (ACTIVE, BACKOFF):
                    break
            return
        self.nominator.add_nominated_pod(new, "")  # in no queue: added, as upstream's addPod
        self._move_to_active(QueuedPodInfo(new, self._clock()), str(ev.UNSCHEDULED_POD_UPDATE))

    def delete(self, pod: PodInfo) -> None:
        """The pod is gone (or bound elsewhere): drop it from every queue and the nominator."""
        uid = pod.uid
        self.nominator.delete_nominated_pod(pod)
        if (self._active.delete(uid) is None and self._backoff.delete(uid) is None
                and self._error_backoff.delete(uid) is None):
            self._pool.pop(uid)
        # The binding cycle may still fail after done() and try to requeue the pod.
        self._deleted[uid] = None
        if len(self._deleted) > _DELETED_MEMORY:
            self._deleted.popitem(last=False)

    def activate(self, pods: Iterable[PodInfo]) -> None:
        """Move the named pods from backoffQ or the unschedulable pool to activeQ (Handle.activate).

        A pod in flight gets a ForceActivate event instead, so it is requeued at once
        if its attempt fails.
        """
        for pod in pods:
            qpi = self._pool.get(pod.uid)
            from_backoff = False
            if qpi is None:
                entry = self._backoff_delete(pod.uid)
                qpi = entry.qpi if entry else None
                from_backoff = qpi is not None
            if qpi is None:
                if pod.uid in self._in_flight:
                    self._in_flight.record(ev.FORCE_ACTIVATE, None, pod)
                continue
            self._move_to_active(qpi, str(ev.FORCE_ACTIVATE), from_backoff=from_backoff)

    # --- the scheduling cycle -------------------------------------------------------

    def pop(self) -> QueuedPodInfo | None:
        """The head of activeQ, now in flight; None when activeQ is empty. With pop_from_backoff,
        an empty activeQ gives the head of backoffQ (not of the pods that failed with an error),
        backing off or not, as upstream does rather than leave the scheduler idle."""
        while (qpi := self._pop_next()) is not None:
            if not self._in_flight.start(qpi.pod_info):
                logger.error("Discarding %s: it is tracked in flight already", qpi.key)
                continue
            qpi.attempts += 1
            self._cycle += 1
            return qpi
        return None

    def _pop_next(self) -> QueuedPodInfo | None:
        qpi = self._active.pop()
        if qpi is None and self.pop_from_backoff and (entry := self._backoff.pop()) is not None:
            qpi = entry.qpi
            logger.debug("Pod %s popped from backoffQ (activeQ is empty)", qpi.key)
        return qpi

    async def pop_wait(self) -> QueuedPodInfo | None:
        """Wait for a pod to pop; None once the queue is closed."""
        while True:
            qpi = self.pop()
            if qpi is not None or self._closed:
                return qpi
            self._wakeup.clear()
            await self._wakeup.wait()

    def done(self, uid: str) -> None:
        """The pod's attempt is over (bound, or requeued): stop tracking events for it."""
        self._in_flight.done(uid)

    def add_unschedulable_if_not_present(self, qpi: QueuedPodInfo) -> None:
        """Requeue a pod whose attempt failed.

        The caller has set `qpi.unschedulable_plugins` / `pending_plugins` for this
        attempt (both empty for an error), and passes the pod as popped (not the
        assumed copy with a nodeName). The pod goes to the unschedulable pool,
        unless an event that arrived while it was in flight interests its rejectors
        (or it failed with an error): then to backoffQ or activeQ. Ends in-flight
        tracking.
        """
        try:
            self._requeue_failed(qpi)
        finally:
            self._in_flight.done(qpi.uid)

    def _requeue_failed(self, qpi: QueuedPodInfo) -> None:
        flying = self._in_flight.get(qpi.uid)
        if flying is not None:
            qpi.pod_info = flying.latest
        if qpi.uid in self._deleted or self._profile_for(qpi.pod_info) is None:
            # Deleted, or bound by someone else (update() deletes those), meanwhile.
            return
        if self.where(qpi.uid) not in (None, "in-flight"):
            logger.error("Pod %s is already queued (%s); not requeuing it", qpi.key, self.where(qpi.uid))
            return
        qpi.timestamp = self._clock()
        strategy = self._in_flight_strategy(qpi)
        self._requeue(qpi, strategy, ev.SCHEDULE_ATTEMPT_FAILURE)

    # --- cluster events -------------------------------------------------------------

    def move_all_to_active_or_backoff(
        self,
        event: ClusterEvent,
        old_obj: Any = None,
        new_obj: Any = None,
        *,
        pre_check: Callable[[PodInfo], bool] | None = None,
    ) -> None:
        """Offer `event` to every pod in the unschedulable pool (optionally only those
        `pre_check` accepts) and to the pods in flight.

        As upstream, a pod asks only its rejector plugins' hints; the pods none of whose
        rejectors registered the event are skipped a group at a time (see queue/pool.py)."""
        pods = self._pool_candidates(event)
        if pre_check is not None:
            pods = [q for q in pods if pre_check(q.pod_info)]
        self._move_pods(pods, event, old_obj, new_obj)

    def assigned_pod_added(self, pod: PodInfo) -> None:
        """A pod was bound (by us or anyone): it may satisfy other pods' affinity."""
        self.nominator.delete_nominated_pod(pod)
        self.move_all_to_active_or_backoff(ev.ASSIGNED_POD_ADD, None, pod)

    def assigned_pod_updated(self, old: PodInfo, new: PodInfo) -> None:
        for event in ev.pod_update_events(old.pod, new.pod):
            self.move_all_to_active_or_backoff(event, old, new)

    def assigned_pod_deleted(self, pod: PodInfo) -> None:
        """A bound pod went away (or an assumed pod was forgotten): its resources are free."""
        self.move_all_to_active_or_backoff(ev.ASSIGNED_POD_DELETE, pod, None)

    def node_added(self, node: Mapping[str, Any]) -> None:
        self.move_all_to_active_or_backoff(ev.NODE_ADD, None, node)

    def node_updated(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
        """One move per kind of change (labels, taints, allocatable, ...); none when nothing changed."""
        for event in ev.node_update_events(old, new):
            self.move_all_to_active_or_backoff(event, old, new)

    def node_deleted(self, node: Mapping[str, Any]) -> None:
        self.move_all_to_active_or_backoff(ev.NODE_DELETE, node, None)

    # --- periodic flushes -----------------------------------------------------------

    def flush_backoff_completed(self) -> None:
        """Move the pods whose backoff has expired to activeQ (with pop_from_backoff: whose
        expiry's window is over)."""
        now = self._clock()
        for heap in (self._backoff, self._error_backoff):
            while (head := heap.peek()) is not None and not self._entry_backing_off(head.expiry, now):
                heap.pop()
                self._move_to_active(head.qpi, ev.BACKOFF_COMPLETE, from_backoff=True)

    def flush_unschedulable_leftover(self) -> None:
        """Move pods that sat in the unschedulable pool longer than `max_in_unschedulable`."""
        now = self._clock()
        stale = [q for q in self._pool.values() if now - q.timestamp > self.max_in_unschedulable]
        if stale:
            self._move_pods(stale, ev.UNSCHEDULABLE_TIMEOUT, None, None)

    async def run(self, stop_event: asyncio.Event | None = None) -> None:
        """Flush backoffQ every second and the leftovers every 30 s until stopped or closed.

        With pop_from_backoff the backoff flushes happen at the ordering windows' boundaries on
        the queue's clock (the first one at the next boundary), so a whole window moves at once."""
        next_leftover = self._clock() + LEFTOVER_FLUSH_INTERVAL
        if self.pop_from_backoff:
            now = self._clock()
            await self._pause(_align(now) + BACKOFF_ORDERING_WINDOW - now, stop_event)
        while not self._stopping(stop_event):
            self.flush_backoff_completed()
            if self._clock() >= next_leftover:
                self.flush_unschedulable_leftover()
                next_leftover = self._clock() + LEFTOVER_FLUSH_INTERVAL
            pause = BACKOFF_FLUSH_INTERVAL
            if self.pop_from_backoff:
                now = self._clock()
                pause = _align(now) + BACKOFF_ORDERING_WINDOW - now
            await self._pause(pause, stop_event)

    def close(self) -> None:
        """Wake `pop_wait` (which then returns None) and stop `run`."""
        self._closed = True
        self._wakeup.set()
        self._stop.set()

    def _stopping(self, stop_event: asyncio.Event | None) -> bool:
        return self._closed or (stop_event is not None and stop_event.is_set())

    async def _pause(self, seconds: float, stop_event: asyncio.Event | None) -> None:
        """Sleep with the injected sleep, cut short by close() or `stop_event`."""
        waiters = [asyncio.ensure_future(self._sleep(seconds)), asyncio.ensure_future(self._stop.wait())]
        if stop_event is not None:
            waiters.append(asyncio.ensure_future(stop_event.wait()))
        try:
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waiters:
                waiter.cancel()
            for waiter in waiters:
                with contextlib.suppress(asyncio.CancelledError):
                    await waiter

    # --- internals ------------------------------------------------------------------

    def _profile(self, qpi: QueuedPodInfo) -> QueueProfile:
        return self._profile_for(qpi.pod_info) or _DEFAULT_PROFILE

    def _backoff_less(self, a: _BackoffEntry, b: _BackoffEntry) -> bool:
        if a.expiry != b.expiry:
            return a.expiry < b.expiry
        return self._less(a.qpi, b.qpi)

    def _backoff_expiry(self, qpi: QueuedPodInfo) -> float:
        expiry = qpi.timestamp + self._profile(qpi).backoff_duration(qpi.attempts)
        return _align(expiry) if self.pop_from_backoff else expiry

    def _is_backing_off(self, qpi: QueuedPodInfo) -> bool:
        if qpi.attempts <= 0:
            return False  # never tried: no penalty
        return self._entry_backing_off(self._backoff_expiry(qpi), self._clock())

    def _entry_backing_off(self, expiry: float, now: float) -> bool:
        """Without pop_from_backoff: until the expiry. With it: until the window of the (aligned)
        expiry is over, as upstream's isPodBackingoff."""
        if self.pop_from_backoff:
            return expiry >= _align(now)
        return expiry > now

    def _backoff_get(self, uid: str) -> _BackoffEntry | None:
        entry = self._backoff.get(uid)
        return entry if entry is not None else self._error_backoff.get(uid)

    def _backoff_delete(self, uid: str) -> _BackoffEntry | None:
        entry = self._backoff.delete(uid)
        return entry if entry is not None else self._error_backoff.delete(uid)

    def _pool_put(self, qpi: QueuedPodInfo) -> None:
        self._pool.put(qpi)

    def _pool_pop(self, uid: str) -> QueuedPodInfo | None:
        return self._pool.pop(uid)

    def _pool_candidates(self, event: ClusterEvent) -> list[QueuedPodInfo]:
        """The pool's pods `event` may move, in pool order: all of them for a wildcard event;
        otherwise those failed with an error (no rejectors) and those with a rejector that
        registered the event in the pod's profile."""
        if _is_wildcard(event):
            return list(self._pool.values())

        def registered(scheduler_name: str, sample: QueuedPodInfo) -> frozenset[str]:
            return self._registered_plugins(self._profile(sample), event)
        return self._pool.select(registered)

    def _run_pre_enqueue(self, qpi: QueuedPodInfo) -> None:
        pre_enqueue = self._profile(qpi).pre_enqueue
        status: Status | None = None
        if pre_enqueue is not None:
            try:
                status = pre_enqueue(qpi.pod_info)
            except Exception as error:  # the runtime should have wrapped it; never lose the pod
                status = Status.as_error(error)
        if is_success(status):
            qpi.gated = False
            qpi.gating_plugin = ""
            return
        assert status is not None
        if status.plugin:
            qpi.unschedulable_plugins.add(status.plugin)
        qpi.gated = True
        qpi.gating_plugin = status.plugin
        logger.debug("Pod %s gated by %s: %s", qpi.key, status.plugin or "PreEnqueue", status)

    def _move_to_active(self, qpi: QueuedPodInfo, event: str, *, from_backoff: bool = False) -> bool:
        """Into activeQ if PreEnqueue lets it; otherwise (gated) into the pool. True if activated.

        With pop_from_backoff, PreEnqueue ran when the pod entered backoffQ and does not run
        again for a pod coming `from_backoff`, as upstream."""
        if not (self.pop_from_backoff and from_backoff):
            self._run_pre_enqueue(qpi)
        uid = qpi.uid
        if qpi.gated:
            if uid not in self._active and uid not in self._backoff and uid not in self._error_backoff:
                self._pool_put(qpi)
            return False
        if qpi.initial_attempt_timestamp is None:
            qpi.initial_attempt_timestamp = self._clock()
        self._pool_pop(uid)
        self._backoff_delete(uid)
        self._active.add_or_update(qpi)
        self._wakeup.set()
        logger.debug("Pod %s moved to activeQ on %s", qpi.key, event)
        return True

    def _move_to_backoff(self, qpi: QueuedPodInfo, event: str) -> bool:
        """Into backoffQ. With pop_from_backoff, PreEnqueue runs first (pop() may take the pod from
        there): a gated pod goes to the pool instead and False is returned."""
        if self.pop_from_backoff:
            self._run_pre_enqueue(qpi)
            if qpi.gated:
                self._pool_put(qpi)
                return False
        self._pool_pop(qpi.uid)
        entry = _BackoffEntry(self._backoff_expiry(qpi), qpi)
        if self.pop_from_backoff and _failed_with_error(qpi):
            self._error_backoff.add_or_update(entry)
        else:
            self._backoff.add_or_update(entry)
            if self.pop_from_backoff:
                self._wakeup.set()  # pop() takes from backoffQ when activeQ is empty
        logger.debug("Pod %s moved to backoffQ on %s", qpi.key, event)
        return True

    def _requeue(self, qpi: QueuedPodInfo, strategy: Strategy, event: str) -> str:
        """Send the pod where `strategy` says; returns the queue it landed in."""
        if strategy is Strategy.SKIP:
            self._pool_put(qpi)
            return GATED if qpi.gated else UNSCHEDULABLE
        if strategy is Strategy.AFTER_BACKOFF and self._is_backing_off(qpi):
            return BACKOFF if self._move_to_backoff(qpi, event) else GATED
        if self._move_to_active(qpi, event):
            return ACTIVE
        return GATED

    def _move_pods(self, pods: list[QueuedPodInfo], event: ClusterEvent, old_obj: Any, new_obj: Any) -> None:
        for qpi in pods:
            if qpi.gated and not self._gating_plugin_registered(qpi, event):
                continue
            strategy = self._hint_strategy(qpi, event, old_obj, new_obj)
            if strategy is Strategy.SKIP:
                continue
            self._pool_pop(qpi.uid)
            self._requeue(qpi, strategy, str(event))
        # A pod in flight may fail and come back; it must still see this event.
        self._in_flight.record(event, old_obj, new_obj)

    def _gating_plugin_registered(self, qpi: QueuedPodInfo, event: ClusterEvent) -> bool:
        registered = self._profile(qpi).hints.get(qpi.gating_plugin, ())
        return any(event.matches(r.event) for r in registered)

    def _hint_strategy(self, qpi: QueuedPodInfo, event: ClusterEvent, old_obj: Any, new_obj: Any) -> Strategy:
        """Upstream's isPodWorthRequeuing: ask only the hints of the pod's rejector plugins."""
        rejectors = qpi.unschedulable_plugins | qpi.pending_plugins
        if not rejectors:
            # Failed with an error: retry after backoff on any event.
            return Strategy.AFTER_BACKOFF
        if _is_wildcard(event):
            # A wildcard event with a pod as new_obj is meant for that pod only.
            if new_obj is not None and _uid_of(new_obj) != qpi.uid:
                return Strategy.SKIP
            return Strategy.AFTER_BACKOFF
        strategy = Strategy.SKIP
        for plugin, registered in self._registrations_for(self._profile(qpi), event):
            if plugin not in rejectors:
                continue
            for reg in registered:
                if not self._says_queue(reg.hint, plugin, qpi, event, old_obj, new_obj):
                    continue
                if plugin in qpi.pending_plugins:
                    return Strategy.IMMEDIATELY
                if not qpi.pending_plugins:
                    return Strategy.AFTER_BACKOFF
                strategy = Strategy.AFTER_BACKOFF
        return strategy

    def _registrations_for(self, profile: QueueProfile, event: ClusterEvent) -> list[tuple[str, list[Any]]]:
        return self._registered_entry(profile, event)[2]

    def _registered_plugins(self, profile: QueueProfile, event: ClusterEvent) -> frozenset[str]:
        """The plugins of _registrations_for, as a set."""
        return self._registered_entry(profile, event)[3]

    def _registered_entry(self, profile: QueueProfile, event: ClusterEvent) -> _Registered:
        # Keyed by identities (the entry keeps both objects, so neither id is reused while it is
        # kept): hashing a ClusterEvent takes three Python calls, and most events are constants.
        key = (id(profile), id(event))
        cached = self._registered.get(key)
        if cached is None or cached[0] is not profile or cached[1] is not event:
            if len(self._registered) >= 1024:  # profiles reloaded, or many one-off events: start over
                self._registered.clear()
            matching = [(plugin, regs) for plugin, registered in profile.hints.items()
                        if (regs := [reg for reg in registered if event.matches(reg.event)])]
            cached = self._registered[key] = (profile, event, matching, frozenset(plugin for plugin, _ in matching))
        return cached

    @staticmethod
    def _says_queue(hint: Any, plugin: str, qpi: QueuedPodInfo, event: ClusterEvent,
                    old_obj: Any, new_obj: Any) -> bool:
        if hint is None:
            return True
        try:
            return hint(qpi.pod_info, old_obj, new_obj) is not QueueingHint.SKIP
        except Exception:
            # A broken hint must not strand the pod: treat it as QUEUE.
            logger.exception("QueueingHintFn of %s failed for pod %s on %s", plugin, qpi.key, event)
            return True

    def _in_flight_strategy(self, qpi: QueuedPodInfo) -> Strategy:
        """Replay the events recorded while the pod was in flight through its rejectors' hints."""
        if not qpi.unschedulable_plugins and not qpi.pending_plugins:
            return Strategy.AFTER_BACKOFF
        recorded = self._in_flight.events_for(qpi.uid)
        if recorded is None:
            # Done() came first (a binding-cycle failure): retry after backoff, as upstream.
            logger.debug("Pod %s came back after done(); requeuing it after backoff", qpi.key)
            return Strategy.AFTER_BACKOFF
        strategy = Strategy.SKIP
        for item in recorded:
            found = self._hint_strategy(qpi, item.event, item.old_obj, item.new_obj)
            if found is Strategy.IMMEDIATELY:
                return found
            if found is Strategy.AFTER_BACKOFF:
                strategy = found
                if not qpi.pending_plugins:
                    return strategy
        return strategy


def _active_heap(less: Callable[[QueuedPodInfo, QueuedPodInfo], bool],
                 rank: Callable[[QueuedPodInfo], Any] | None) -> Heap[QueuedPodInfo] | RankedHeap[QueuedPodInfo]:
    """activeQ: by rank when the order has one (the same pops, in C), else by less."""
    if rank is not None:
        return RankedHeap(rank=rank, key=_uid)
    return Heap(less=less, key=_uid)


def _uid(qpi: QueuedPodInfo) -> str:
    return qpi.uid


def _order_of(rank: Callable[[QueuedPodInfo], Any] | None) -> tuple[Any, Any]:
    """What decides a rank's order: its function and, for a plugin's method, the plugin's class
    (a QueueSort's rank must not depend on its arguments)."""
    return getattr(rank, "__func__", rank), type(getattr(rank, "__self__", None))
