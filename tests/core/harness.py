"""A scheduler wired to the in-memory cluster client, driven to quiescence on a virtual clock."""

from __future__ import annotations

import random
from typing import Any

from kopfsched.cache import Cache
from kopfsched.config.defaults import default_profile
from kopfsched.config.parse import parse_scheduler_profile
from kopfsched.config.types import ProfileConfig
from kopfsched.framework.registry import Registry
from kopfsched.plugins.registry import in_tree_registry
from kopfsched.scheduler.event_handlers import EventHandlers
from kopfsched.scheduler.observer import Attempt, NullObserver
from kopfsched.scheduler.scheduler import Scheduler
from kopfsched.simulate.client import InMemoryClusterClient
from kopfsched.simulate.runner import VirtualClock


class Recorder(NullObserver):
    def __init__(self) -> None:
        self.attempts: list[Attempt] = []

    def attempted(self, attempt: Attempt) -> None:
        self.attempts.append(attempt)

    def last(self, name: str) -> Attempt:
        return [a for a in self.attempts if a.pod.name == name][-1]


def profile_from_spec(spec: dict[str, Any], registry: Registry, name: str = "test") -> ProfileConfig:
    obj = {"apiVersion": "kopfsched.dev/v1alpha1", "kind": "SchedulerProfile", "metadata": {"name": name},
           "spec": spec}
    profile, problems = parse_scheduler_profile(obj, registry)
    assert not problems, problems
    return profile


class Harness:
    def __init__(self, nodes: list[dict], *, profiles: list[ProfileConfig] | None = None,
                 registry: Registry | None = None, client: InMemoryClusterClient | None = None,
                 seed: int = 0, explain: bool = True, percentage: int = 0) -> None:
        self.registry = registry or in_tree_registry()
        self.client = client or InMemoryClusterClient()
        self.clock = VirtualClock(1000.0)
        self.recorder = Recorder()
        self.scheduler = Scheduler(cache=Cache(), client=self.client, registry=self.registry, clock=self.clock,
                                   rng=random.Random(seed), observer=self.recorder, explain=explain,
                                   percentage_of_nodes_to_score=percentage)
        self.scheduler.set_profiles(profiles or [default_profile(self.registry)])
        self.handlers = EventHandlers(self.scheduler)
        self.client.on_pod_change = lambda new, old: self.handlers.on_pod_upsert(new, old)
        self.client.on_pod_delete = self.handlers.on_pod_delete
        self.client.on_object_change = self.handlers.on_object_upsert
        for node in nodes:
            self.handlers.on_node_upsert(node)

    def add_pods(self, *pods: dict) -> None:
        for pod in pods:
            self.client.add_pod(pod)
            self.handlers.on_pod_upsert(pod)

    def add_objects(self, kind: str, *objs: dict) -> None:
        """Cluster objects other than pods and nodes (e.g. PodGroups), as a watch would add them."""
        for obj in objs:
            self.client.add_object({"kind": kind, **obj})
            self.handlers.on_object_upsert(kind, obj)

    async def settle(self, *, max_attempts: int = 1000) -> None:
        """Schedule until nothing is active, backing off or waiting at Permit with a deadline
        (advancing virtual time to the next backoff expiry or Permit deadline)."""
        queue = self.scheduler.queue
        for _ in range(max_attempts):
            qpi = queue.pop()
            if qpi is not None:
                await self.scheduler.schedule_one(qpi)
                continue
            await self.scheduler.settle_tasks()
            if queue.pending_counts()["active"]:
                continue
            waiting = self.scheduler.waiting_pods
            due = [t for t in (queue.next_backoff_expiry(), waiting.next_deadline()) if t is not None]
            if not due:
                return
            self.clock.now = max(self.clock.now, min(due))
            waiting.expire(self.clock.now)
            await self.scheduler.settle_tasks()
            queue.flush_backoff_completed()
        raise AssertionError("the queue did not settle")

    def node_of(self, name: str, namespace: str = "default") -> str | None:
        return (self.client.pods[f"{namespace}/{name}"].get("spec") or {}).get("nodeName")

    def condition(self, name: str, namespace: str = "default") -> dict | None:
        for c in (self.client.pods[f"{namespace}/{name}"].get("status") or {}).get("conditions") or ():
            if c["type"] == "PodScheduled":
                return c
        return None
