"""`kopfsched replay`: a history of arrivals and departures on the virtual clock.

The scheduler, its queue and the in-memory client are simulate's (runner.load_scheduler
and runner.drain): what differs is only when pods appear and disappear. The clock jumps
from one moment something happens to the next — a pod arriving, a pod departing (its
departure time, or its duration after it was bound), a backoff ending, a Permit wait
timing out, the unschedulable pool's leftover flush — and at each moment the pods due are
created or deleted through the event handlers, as watch events would be, and the queue is
drained as the scheduling loop would drain it. A departure frees its node and is the
AssignedPodDelete event that moves unschedulable pods back, as in a cluster; preemption
victims are deleted and do not come back (no controller recreates them offline).

Between moments nothing changes, so the state is sampled on a regular grid (`step`
seconds, chosen so a run gives at most MAX_SAMPLES points): allocation and fragmentation
per resource, pending and running pods, preemptions. docs/replay.md defines each figure.
"""

from __future__ import annotations

import heapq
import itertools
import json
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kopfsched.config.types import ProfileConfig
from kopfsched.framework.labels import SelectorError, node_selector
from kopfsched.framework.registry import Registry
from kopfsched.framework.resources import CPU, EPHEMERAL_STORAGE, MEMORY, PODS
from kopfsched.framework.types import Obj, PodInfo, pod_key
from kopfsched.plugins.helper.tolerations import tolerates_taint
from kopfsched.plugins.nodeunschedulable import tolerates_unschedulable
from kopfsched.plugins.registry import full_registry
from kopfsched.queue.scheduling_queue import LEFTOVER_FLUSH_INTERVAL
from kopfsched.scheduler.observer import Attempt, NullObserver
from kopfsched.simulate.history import Entry, History
from kopfsched.simulate.runner import MAX_ATTEMPTS_PER_POD, Simulation, VirtualClock, drain, load_scheduler

MAX_SAMPLES = 240
"""At most this many points per series (the step grows to fit a long history)."""
_STEPS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400)
_DEPART, _ARRIVE = 0, 1
"""At one moment departures go first: the capacity they free is there for the pods arriving."""
PROGRESS_ABOVE = 5000
"""Histories of more pods than this report progress on stderr."""

RUNNING, DEPARTED, PREEMPTED, PENDING, WITHDRAWN = "Running", "Departed", "Preempted", "Pending", "Withdrawn"
NOT_HANDLED = "NotHandled"
"""Its schedulerName has no profile: nobody schedules it (as simulate says of such pods)."""


def choose_step(span: float) -> float:
    """The smallest step of _STEPS (then whole days) giving at most MAX_SAMPLES + 1 points over `span`."""
    for step in _STEPS:
        if span / step <= MAX_SAMPLES:
            return float(step)
    return 86400.0 * math.ceil(span / 86400 / MAX_SAMPLES)


def percentile(values: list[float], q: float) -> float | None:
    """Nearest rank: the smallest value with at least q% of the values at or below it."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


@dataclass(slots=True)
class PodRecord:
    key: str
    arrival: float
    duration: float | None
    departure: float | None
    requests: tuple[int, ...] = ()
    """Its requests over Replay.fit_resources (the last one: one pod slot)."""
    state: str = PENDING
    bound_at: float | None = None
    node: str | None = None
    ended: float | None = None
    uid: str = ""
    constraints: str = ""
    """constraints_of(pod): pending pods with the same one may use the same nodes."""
    scheduler_name: str = ""
    at_start: bool = False
    """Bound in the snapshot: running when the replay begins (no arrival, no wait)."""

    @property
    def wait(self) -> float | None:
        return None if self.bound_at is None else self.bound_at - self.arrival


@dataclass
class Sample:
    t: float
    pending: int
    running: int
    allocated: dict[str, int]
    fragmented: dict[str, int]
    scheduled: int
    preempted: int
    waits: list[float]
    """Waits of the pods bound since the previous sample."""


@dataclass
class Replay:
    """One run of a history under one set of profiles; `report()` is its JSON."""

    sim: Simulation
    clock: VirtualClock
    history: History
    resources: list[str]
    """The allocation's resources: cpu, memory, ephemeral-storage when offered, extended ones."""
    step: float
    start: float
    records: dict[str, PodRecord] = field(default_factory=dict)
    samples: list[Sample] = field(default_factory=list)
    preemptions: list[dict[str, Any]] = field(default_factory=list)
    attempts: int = 0
    arrived: int = 0
    end: float = 0.0
    seconds: float = 0.0
    budget_exhausted: bool = False
    capacity: dict[str, int] = field(default_factory=dict)

    @property
    def fit_resources(self) -> list[str]:
        return [*self.resources, PODS]


class _Watcher(NullObserver):
    """Binds and preemptions as they happen, on the virtual clock."""

    def __init__(self, bound: Callable[[Attempt], None], preempting: Callable[[Attempt], None]) -> None:
        self._bound = bound
        self._preempting = preempting
        self.attempts = 0

    def attempted(self, attempt: Attempt) -> None:
        self.attempts += 1
        if attempt.result == "scheduled":
            self._bound(attempt)
        if attempt.victims:
            self._preempting(attempt)


class _Run:
    """The loop of one replay (see the module's docstring)."""

    def __init__(self, history: History, *, registry: Registry, seed: int, overrides: list[ProfileConfig] | None,
                 progress: bool) -> None:
        self.history = history
        sim, clock, _ = load_scheduler(history.inputs, registry=registry, seed=seed, overrides=overrides,
                                       queue_pending=False, record_events=False)
        self.sim, self.clock = sim, clock
        self.watcher = _Watcher(self._bound, self._preempting)
        sim.scheduler.observer = self.watcher
        self.handlers = sim.handlers
        assert self.handlers is not None
        self._deleting: set[str] = set()
        self._forward_delete = sim.client.on_pod_delete
        sim.client.on_pod_delete = self._deleted
        entries = list(history.entries)
        arrivals = [e.arrival for e in entries if e.arrival is not None and not e.bound]
        start = min(arrivals, default=0.0)
        ends = [t for e in entries for t in (e.arrival, e.departure,
                                             (e.arrival or start) + e.duration if e.duration is not None else None)
                if t is not None]
        nodes = sim.scheduler.cache.node_infos()
        infos = [PodInfo(e.loaded.obj) for e in entries]
        self.replay = Replay(sim, clock, history, _resources(nodes, infos), choose_step(max(ends) - start), start)
        self.timeline: list[tuple[float, int, int, str]] = []
        self._seq = itertools.count()
        self._objects: dict[str, Obj] = {}
        self._masks: dict[str, Any] = {}
        self.pending: dict[str, PodRecord] = {}
        self.running = 0
        self.scheduled = 0
        self.preempted = 0
        self._waits: list[float] = []
        self.progress = progress
        self._last_report = time.perf_counter()
        self.arrived = 0
        fit = self.replay.fit_resources
        clock.now = start
        for entry, info in zip(entries, infos, strict=True):
            self._add(entry, info, fit, start)
        self.allocated = _totals(nodes, self.replay.resources, allocatable=False)
        """What the bound pods request, kept as they bind and leave (the cache's sums, without a
        pass over every node per sample)."""

    def _add(self, entry: Entry, info: PodInfo, fit: list[str], start: float) -> None:
        key = entry.key
        obj = entry.loaded.obj
        arrival = start if entry.arrival is None else entry.arrival
        record = PodRecord(key, arrival, entry.duration, entry.departure, uid=info.uid, constraints=constraints_of(obj),
                           scheduler_name=info.scheduler_name,
                           requests=(*(info.requests.get(r) for r in fit[:-1]), 1))
        self.replay.records[key] = record
        if entry.departure is not None:
            self._push(entry.departure, _DEPART, key)
        if entry.bound:
            record.state, record.bound_at, record.node = RUNNING, start, obj["spec"]["nodeName"]
            record.at_start = True
            self.running += 1
            if entry.duration is not None:
                self._push(start + entry.duration, _DEPART, key)
            return
        self._objects[key] = obj
        self._push(arrival, _ARRIVE, key)

    def _push(self, at: float, kind: int, key: str) -> None:
        heapq.heappush(self.timeline, (at, kind, next(self._seq), key))

    # -- what the scheduler reports -------------------------------------------------------

    def _bound(self, attempt: Attempt) -> None:
        record = self.replay.records.get(attempt.pod.key)
        if record is None or record.state != PENDING:
            return
        now = self.clock.now
        record.state, record.bound_at, record.node = RUNNING, now, attempt.node
        self.pending.pop(record.key, None)
        self.running += 1
        self.scheduled += 1
        self._account(record, 1)
        self._waits.append(now - record.arrival)
        if record.duration is not None:
            self._push(now + record.duration, _DEPART, record.key)

    def _account(self, record: PodRecord, sign: int) -> None:
        for resource, amount in zip(self.replay.resources, record.requests, strict=False):
            self.allocated[resource] += sign * amount

    def _preempting(self, attempt: Attempt) -> None:
        self.replay.preemptions.append({"t": self.clock.now, "preemptor": attempt.pod.key,
                                        "node": attempt.nominated_node or None, "victims": list(attempt.victims)})

    def _deleted(self, pod: Obj) -> None:
        """Every delete passes here: ours (a departure) and the preemption plugin's (a victim)."""
        key = pod_key(pod)
        record = self.replay.records.get(key)
        if record is not None and key not in self._deleting and record.state == RUNNING:
            record.state, record.ended = PREEMPTED, self.clock.now
            self.running -= 1
            self.preempted += 1
            self._account(record, -1)
        if self._forward_delete is not None:
            self._forward_delete(pod)

    # -- the loop ---------------------------------------------------------------------------

    async def run(self) -> Replay:
        replay, clock, scheduler = self.replay, self.clock, self.sim.scheduler
        queue = scheduler.queue
        budget = MAX_ATTEMPTS_PER_POD * max(len(replay.records), 1)
        next_sample = replay.start
        next_leftover = replay.start + LEFTOVER_FLUSH_INTERVAL
        began = time.perf_counter()
        while True:
            await self._apply_due()
            if not await drain(scheduler, clock, budget=budget - self.watcher.attempts, advance=False):
                replay.budget_exhausted = True
                break
            due = [t for t in (self.timeline[0][0] if self.timeline else None, queue.next_backoff_expiry(),
                               scheduler.waiting_pods.next_deadline()) if t is not None]
            if not due and queue.is_settled():
                break  # only the unschedulable pool is left, and nothing will happen again
            if queue.pending_counts()["unschedulable"]:
                due.append(next_leftover)
            following = max(clock.now, min(due))
            while next_sample < following:
                self._sample(next_sample)
                next_sample += replay.step
            clock.now = following
            scheduler.waiting_pods.expire(clock.now)
            await scheduler.settle_tasks()
            queue.flush_backoff_completed()
            if clock.now >= next_leftover:
                queue.flush_unschedulable_leftover()
                next_leftover = replay.start + LEFTOVER_FLUSH_INTERVAL * (
                    math.floor((clock.now - replay.start) / LEFTOVER_FLUSH_INTERVAL) + 1)
            self._report_progress()
        replay.end = clock.now
        while next_sample <= replay.end:
            self._sample(next_sample)
            next_sample += replay.step
        if not replay.samples or replay.samples[-1].t < replay.end:
            self._sample(replay.end)
        replay.samples = _thin(replay.samples)
        replay.attempts = self.watcher.attempts
        replay.arrived = self.arrived
        replay.seconds = time.perf_counter() - began
        replay.capacity = _totals(scheduler.cache.node_infos(), replay.resources, allocatable=True)
        if self.progress:
            print(f"replay: done: {self.arrived} pods arrived, {self.scheduled} scheduled, "
                  f"{len(self.pending)} pending, in {replay.seconds:.1f}s", file=sys.stderr)
        return replay

    async def _apply_due(self) -> None:
        clock, client, handlers = self.clock, self.sim.client, self.handlers
        assert handlers is not None
        while self.timeline and self.timeline[0][0] <= clock.now:
            _, kind, _, key = heapq.heappop(self.timeline)
            record = self.replay.records[key]
            if kind == _ARRIVE:
                obj = self._objects.pop(key, None)
                if obj is None:
                    continue  # its departure came at the same moment, first: it never arrives
                client.add_pod(obj)
                self.arrived += 1
                if record.scheduler_name in self.sim.scheduler.profiles:
                    self.pending[key] = record
                else:
                    record.state = NOT_HANDLED
                handlers.on_pod_upsert(obj, timestamp=clock.now)
                continue
            if record.state not in (RUNNING, PENDING) or record.ended is not None:
                continue  # preempted, or gone already (its departure and its duration's end both came)
            if self._objects.pop(key, None) is not None:
                record.state, record.ended = WITHDRAWN, clock.now  # leaves as it arrives
                continue
            current = client.pods.get(key)
            record.ended = clock.now
            if record.state == RUNNING:
                record.state = DEPARTED
                self.running -= 1
                self._account(record, -1)
            else:
                record.state = WITHDRAWN
                self.pending.pop(key, None)
            if current is not None:
                self._deleting.add(key)
                try:
                    await client.delete_pod(pod=current)
                finally:
                    self._deleting.discard(key)

    def _report_progress(self) -> None:
        if not self.progress or time.perf_counter() - self._last_report < 2.0:
            return
        self._last_report = time.perf_counter()
        print(f"replay: t={self.clock.now - self.replay.start:.0f}s: {self.arrived}/{len(self.replay.records)} "
              f"pods arrived, {self.scheduled} scheduled, {len(self.pending)} pending, "
              f"{self.preempted} preempted", file=sys.stderr)

    # -- samples ------------------------------------------------------------------------------

    def _sample(self, t: float) -> None:
        replay = self.replay
        fragmented = self._fragmented(self.sim.scheduler.cache.node_infos()) if self.pending else dict.fromkeys(
            replay.resources, 0)
        replay.samples.append(Sample(t, len(self.pending), self.running, dict(self.allocated), fragmented,
                                     self.scheduled,
                                     self.preempted, self._waits))
        self._waits = []

    def _fragmented(self, nodes: list[Any]) -> dict[str, int]:
        """Per resource r: the free r of the nodes where a pending pod asking for r could run were
        the node empty (its constraints allow the node, its requests are within the allocatable)
        but where no such pod fits now. docs/replay.md defines it."""
        resources = self.replay.resources
        if not self.pending:
            return dict.fromkeys(resources, 0)
        queue = self.sim.scheduler.queue
        groups: dict[str, set[tuple[int, ...]]] = {}
        for record in self.pending.values():
            if queue.where(record.uid) != "gated":
                groups.setdefault(record.constraints, set()).add(record.requests)
        if not groups:
            return dict.fromkeys(resources, 0)
        fit = self.replay.fit_resources
        allocatable = np.array([[info.allocatable.get(r) for r in fit] for info in nodes], dtype=np.int64)
        used = np.array([[info.requested.get(r) for r in fit[:-1]] + [len(info.pods)] for info in nodes],
                        dtype=np.int64)
        free = np.maximum(allocatable - used, 0)
        wanted_here = {r: np.zeros(len(nodes), dtype=bool) for r in resources}
        usable = {r: np.zeros(len(nodes), dtype=bool) for r in resources}
        for constraints, shapes in groups.items():
            allowed = self._allowed(constraints, nodes)
            wanted = np.array(sorted(shapes), dtype=np.int64)
            for index, resource in enumerate(resources):
                asking = _minimal(wanted[wanted[:, index] > 0])
                if len(asking):
                    wanted_here[resource] |= allowed & _any_fits(asking, allocatable)
                    usable[resource] |= allowed & _any_fits(asking, free)
        return {r: int(free[wanted_here[r] & ~usable[r], i].sum()) for i, r in enumerate(resources)}

    def _allowed(self, constraints: str, nodes: list[Any]) -> Any:
        """The nodes a pod with these placement constraints may use (cached: nodes do not change)."""
        mask = self._masks.get(constraints)
        if mask is None:
            mask = self._masks[constraints] = allowed_nodes(json.loads(constraints), nodes)
        return mask


def constraints_of(pod: Obj) -> str:
    """A pod's placement constraints as one key: tolerations, nodeSelector, required node affinity."""
    spec = pod.get("spec") or {}
    affinity = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution") or {}
    return json.dumps([spec.get("tolerations") or [], spec.get("nodeSelector") or {},
                       affinity.get("nodeSelectorTerms") or []], sort_keys=True)


def allowed_nodes(constraints: list[Any], nodes: list[Any]) -> Any:
    """Which nodes these constraints allow, as the NodeUnschedulable, TaintToleration (NoSchedule
    and NoExecute taints) and NodeAffinity filters would, whatever the resources."""
    tolerations, selector, terms = constraints
    try:
        match = node_selector(terms) if terms else None
    except SelectorError:
        match = None
    cordon_ok = tolerates_unschedulable(tolerations)
    return np.array([
        (not info.unschedulable or cordon_ok)
        and all(info.labels.get(key) == value for key, value in selector.items())
        and (match is None or match(info.labels, info.name))
        and all(any(tolerates_taint(t, taint) for t in tolerations)
                for taint in info.taints if taint.get("effect") in ("NoSchedule", "NoExecute"))
        for info in nodes], dtype=bool)


def _any_fits(shapes: Any, room: Any) -> Any:
    """Per node (a row of `room`): whether any of `shapes` is within it in every resource."""
    fits = np.zeros(len(room), dtype=bool)
    for chunk in range(0, len(shapes), 64):
        part = shapes[chunk:chunk + 64]
        fits |= (part[None, :, :] <= room[:, None, :]).all(axis=2).any(axis=1)
    return fits


def _minimal(shapes: Any) -> Any:
    """The shapes no other shape is at most in every resource: enough to tell whether any fits."""
    if len(shapes) <= 1:
        return shapes
    order = np.argsort(shapes.sum(axis=1), kind="stable")
    kept: list[Any] = []
    for row in shapes[order]:
        if not any((k <= row).all() for k in kept):
            kept.append(row)
    return np.array(kept)


def _resources(nodes: list[Any], pods: list[PodInfo]) -> list[str]:
    offered: set[str] = set()
    for info in nodes:
        offered.update(info.allocatable.names())
    asked: set[str] = set()
    for pod in pods:
        asked.update(pod.requests.names())
    extended = sorted((offered | asked) - {CPU, MEMORY, EPHEMERAL_STORAGE, PODS})
    storage = [EPHEMERAL_STORAGE] if EPHEMERAL_STORAGE in offered | asked else []
    return [CPU, MEMORY, *storage, *extended]


def _totals(nodes: list[Any], resources: list[str], *, allocatable: bool) -> dict[str, int]:
    totals = dict.fromkeys(resources, 0)
    for info in nodes:
        amounts = info.allocatable if allocatable else info.requested
        for resource in resources:
            totals[resource] += amounts.get(resource)
    return totals


def _thin(samples: list[Sample]) -> list[Sample]:
    """Every k-th sample (the waits of those left out folded into the next kept one), so that a
    history that ran far longer than its times foretold still gives a readable series."""
    if len(samples) <= 2 * MAX_SAMPLES:
        return samples
    every = math.ceil(len(samples) / MAX_SAMPLES)
    kept: list[Sample] = []
    waits: list[float] = []
    for index, sample in enumerate(samples):
        waits.extend(sample.waits)
        if index % every == 0 or index == len(samples) - 1:
            sample.waits, waits = waits, []
            kept.append(sample)
    return kept


async def replay(history: History, *, registry: Registry | None = None, seed: int = 0,
                 overrides: list[ProfileConfig] | None = None, progress: bool | None = None) -> Replay:
    """Run `history` (closed: see history.close) under its profiles, `overrides` replacing those of
    their scheduler names."""
    big = len(history.entries) > PROGRESS_ABOVE
    run = _Run(history, registry=registry or full_registry(), seed=seed, overrides=overrides,
               progress=big if progress is None else progress)
    return await run.run()
