"""Schedule a cluster snapshot offline with the same scheduler code that runs in a cluster.

Time is virtual: when nothing is left in activeQ, the clock jumps to the next backoff
expiry or Permit deadline, whichever comes first. The run ends when the queue settles —
every pod bound, or waiting in the unschedulable pool for an event that cannot come
offline — or after an attempt budget that guards against endless preemption loops.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from kopfsched.cache.cache import Cache
from kopfsched.config.defaults import default_profile
from kopfsched.config.field_checks import profile_conflicts
from kopfsched.config.parse import parse_kube_scheduler_configuration, parse_scheduler_profile
from kopfsched.config.types import DEFAULT_SCHEDULER_NAME, ProfileConfig
from kopfsched.documents import problem_line
from kopfsched.framework.queued import QueuedPodInfo
from kopfsched.framework.registry import Registry
from kopfsched.framework.types import parse_time, pod_key
from kopfsched.gcpolicy import long_lived
from kopfsched.plugins.registry import full_registry
from kopfsched.scheduler.event_handlers import EventHandlers
from kopfsched.scheduler.observer import Attempt, NullObserver
from kopfsched.scheduler.scheduler import Scheduler
from kopfsched.simulate.client import InMemoryClusterClient
from kopfsched.simulate.loader import (
    ClusterInput,
    apply_priority_classes,
    default_requests,
    generate_resource_claims,
)
from kopfsched.simulate.workloads import expand_workloads

MAX_ATTEMPTS_PER_POD = 20


class VirtualClock:
    def __init__(self, start: float) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        """A binding cycle's wait (DynamicResources' PreBind polling binding conditions): the
        virtual clock moves on by that much at once, as nothing but the cluster's answer could
        end the wait early and offline nobody answers."""
        self.now += max(seconds, 0.0)
        await asyncio.sleep(0)


class AttemptLog(NullObserver):
    """Each pod's last attempt, in the order of first attempts, and what its preemptions did
    (a pod that preempted is usually bound by a later attempt, which has no victims).
    The first failed attempt is kept too: a preemptor's explanation shows why it had to
    preempt, not only the later attempt on its nominated node."""

    def __init__(self) -> None:
        self.attempts: dict[str, Attempt] = {}
        self.first_failures: dict[str, Attempt] = {}
        self.preempted: list[str] = []
        self.victims: dict[str, list[str]] = {}
        self.nominated: dict[str, str] = {}

    def attempted(self, attempt: Attempt) -> None:
        key = attempt.pod.key
        self.attempts[key] = attempt
        if attempt.diagnosis is not None and key not in self.first_failures:
            self.first_failures[key] = attempt
        self.preempted.extend(attempt.victims)
        if attempt.victims:
            self.victims.setdefault(key, []).extend(attempt.victims)
        if attempt.nominated_node:
            self.nominated[key] = attempt.nominated_node


@dataclass(repr=False)  # its repr spells out every pod: asyncio.run formats its result on Python 3.11
class Simulation:
    scheduler: Scheduler
    client: InMemoryClusterClient
    log: AttemptLog
    order: list[str] = field(default_factory=list)
    """Pod keys in the order of their first attempt."""
    input_order: list[str] = field(default_factory=list)
    seconds: float = 0.0
    handlers: EventHandlers | None = None
    """What the cluster's watch events go through (replay delivers pods' arrivals to it)."""


def build_profiles(inputs: ClusterInput, registry: Registry) -> list[ProfileConfig]:
    """The built-in default profile, then every profile of the input, checked together;
    problems go to inputs.problems and the offending profiles are left out."""
    profiles: list[ProfileConfig] = []
    locations: list[str] = []
    for loaded in inputs.configs:
        kind = loaded.obj.get("kind")
        if kind == "SchedulerProfile":
            profile, problems = parse_scheduler_profile(loaded.obj, registry)
            found = [profile] if profile is not None else []
        else:
            config, problems = parse_kube_scheduler_configuration(loaded.obj, registry)
            found = list(config.profiles) if config is not None else []
        inputs.problems.extend(loaded.problem(str(p)) for p in problems)
        if not problems:
            profiles.extend(found)
            locations.extend([loaded.where or loaded.source] * len(found))
    if not any(p.scheduler_name == DEFAULT_SCHEDULER_NAME for p in profiles):
        profiles.insert(0, default_profile(registry))
        locations.insert(0, "")
    conflicts = profile_conflicts(profiles, locations)
    inputs.problems.extend(problem_line(locations[index], problem.source, str(problem)) if locations[index]
                           else str(problem) for index, problem in conflicts)
    if conflicts:
        first = {p.scheduler_name: p for p in reversed(profiles)}  # the first of each name wins
        profiles = [p for p in profiles if first[p.scheduler_name] is p]
    return profiles


def load_scheduler(inputs: ClusterInput, *, registry: Registry, seed: int | None = None, explain: bool = False,
                   overrides: list[ProfileConfig] | None = None, queue_pending: bool = True,
                   record_events: bool = True) -> tuple[Simulation, VirtualClock, int]:
    """A scheduler holding the input as a cluster would show it to a starting scheduler:
    nodes, objects and bound pods in the cache, pending pods queued by creation time.
    Returns (the simulation, its clock, how many pods are pending); nothing is scheduled yet.
    With `queue_pending` False the pending pods are left out (not even in the client): the
    caller creates each one later through `sim.handlers`, as replay does at its arrival."""
    with long_lived():
        return _load_scheduler(inputs, registry=registry, seed=seed, explain=explain, overrides=overrides,
                               queue_pending=queue_pending, record_events=record_events)


def _load_scheduler(inputs: ClusterInput, *, registry: Registry, seed: int | None, explain: bool,
                    overrides: list[ProfileConfig] | None, queue_pending: bool,
                    record_events: bool) -> tuple[Simulation, VirtualClock, int]:
    expand_workloads(inputs)
    apply_priority_classes(inputs)
    default_requests(inputs)
    generate_resource_claims(inputs)
    profiles = replace_profiles(build_profiles(inputs, registry), overrides or [])
    pending = [p for p in inputs.pods if not (p.obj.get("spec") or {}).get("nodeName")]
    stamps = [parse_time((p.obj.get("metadata") or {}).get("creationTimestamp")) for p in pending]
    start = max((s for s in stamps if s is not None), default=0.0)
    clock = VirtualClock(start)
    client = InMemoryClusterClient(record_events=record_events)
    log = AttemptLog()
    scheduler = Scheduler(cache=Cache(), client=client, registry=registry, clock=clock,
                          rng=random.Random(seed), observer=log, explain=explain, sleep=clock.sleep)
    scheduler.set_profiles(profiles)
    handlers = EventHandlers(scheduler)
    client.on_pod_change = lambda new, old: handlers.on_pod_upsert(new, old)
    client.on_pod_delete = handlers.on_pod_delete
    client.on_object_change = handlers.on_object_upsert
    client.on_object_delete = handlers.on_object_delete
    for loaded in inputs.objects:
        client.add_object(loaded.obj)
        handlers.on_object_upsert(loaded.obj["kind"], loaded.obj)
    for loaded in inputs.nodes:
        handlers.on_node_upsert(loaded.obj)
    for loaded in inputs.pods:
        bound = bool((loaded.obj.get("spec") or {}).get("nodeName"))
        if bound or queue_pending:
            client.add_pod(loaded.obj)
        if bound:
            handlers.on_pod_upsert(loaded.obj)
    ordered = sorted(zip(pending, stamps, strict=True), key=lambda item: item[1] if item[1] is not None else start)
    if not queue_pending:
        ordered = []
    for loaded, stamp in ordered:
        handlers.on_pod_upsert(loaded.obj, timestamp=stamp if stamp is not None else start)
    sim = Simulation(scheduler, client, log, input_order=[pod_key(p.obj) for p, _ in ordered], handlers=handlers)
    return sim, clock, len(pending)


def replace_profiles(profiles: list[ProfileConfig], overrides: list[ProfileConfig]) -> list[ProfileConfig]:
    """`profiles` with each override replacing the profile of its scheduler name (or added)."""
    if not overrides:
        return profiles
    by_name = {p.scheduler_name: p for p in overrides}
    kept = [by_name.pop(p.scheduler_name, p) for p in profiles]
    return kept + list(by_name.values())


async def simulate(inputs: ClusterInput, *, registry: Registry | None = None, seed: int | None = None,
                   explain: bool = False, overrides: list[ProfileConfig] | None = None) -> Simulation:
    sim, clock, pending = load_scheduler(inputs, registry=registry or full_registry(), seed=seed, explain=explain,
                                         overrides=overrides)
    began = time.perf_counter()
    await drain(sim.scheduler, clock, budget=MAX_ATTEMPTS_PER_POD * max(pending, 1), order=sim.order)
    sim.seconds = time.perf_counter() - began
    return sim


async def drain(scheduler: Scheduler, clock: VirtualClock, *, budget: int, order: list[str] | None = None,
                advance: bool = True,
                before_attempt: Callable[[QueuedPodInfo], Awaitable[None]] | None = None) -> bool:
    """Schedule until nothing is active, backing off or waiting at Permit with a deadline,
    jumping the virtual clock to whatever comes first: a backoff ending or a Permit wait
    timing out (with `advance` False: until nothing is active now). True once settled;
    False when `budget` attempts ran out first. `order` receives each pod's key at its
    first attempt; `before_attempt` (explain) sees each popped pod before its cycle runs."""
    queue = scheduler.queue
    seen: set[str] = set()
    attempts = 0
    while attempts < budget:
        qpi = queue.pop()
        if qpi is not None:
            attempts += 1
            if order is not None and qpi.key not in seen:
                seen.add(qpi.key)
                order.append(qpi.key)
            if before_attempt is not None:
                await before_attempt(qpi)
            await scheduler.schedule_one(qpi)  # suspends only for profiles with extenders
            await asyncio.sleep(0)
            continue
        await scheduler.settle_tasks()
        if queue.pending_counts().get("active"):
            continue
        if not advance:
            return True
        due = [t for t in (queue.next_backoff_expiry(), scheduler.waiting_pods.next_deadline()) if t is not None]
        if not due:
            return True
        clock.now = max(clock.now, min(due))
        scheduler.waiting_pods.expire(clock.now)
        await scheduler.settle_tasks()
        queue.flush_backoff_completed()
    return False
