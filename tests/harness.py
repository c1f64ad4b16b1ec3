"""A scheduler wired to the in-memory cluster client, driven to quiescence on a virtual clock."""

from __future__ import annotations

import random
from typing import Any

from kopfsched import features
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
from kopfsched.simulate.runner import VirtualClock, drain


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
                 seed: int = 0, explain: bool = True, percentage: int = 0, gates: str = "") -> None:
        """`gates`: `--feature-gates` for this scheduler and its plugins (read as they are built;
        none given: the process's gates as they are)."""
        self.registry = registry or in_tree_registry()
        self.client = client or InMemoryClusterClient()
        self.clock = VirtualClock(1000.0)
        self.recorder = Recorder()
        saved = features.GATES
        if gates:
            features.set_gates(features.parse(gates))
        try:
            self.scheduler = Scheduler(cache=Cache(), client=self.client, registry=self.registry, clock=self.clock,
                                       rng=random.Random(seed), observer=self.recorder, explain=explain,
                                       percentage_of_nodes_to_score=percentage)
            self.scheduler.set_profiles(profiles or [default_profile(self.registry)])
        finally:
            features.set_gates(saved)
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

    async def settle(self, *, max_attempts: int = 1000, advance: bool = True) -> None:
        """Schedule until settled, with the product's own loop (simulate's drain, on the
        harness' virtual clock): profiles with HTTP extenders included. `advance` False:
        only until nothing is active now (no backoff or Permit deadline waited for)."""
        if not await drain(self.scheduler, self.clock, budget=max_attempts, advance=advance):
            raise AssertionError("the queue did not settle")

    def node_of(self, name: str, namespace: str = "default") -> str | None:
        return (self.client.pods[f"{namespace}/{name}"].get("spec") or {}).get("nodeName")

    def condition(self, name: str, namespace: str = "default") -> dict | None:
        for c in (self.client.pods[f"{namespace}/{name}"].get("status") or {}).get("conditions") or ():
            if c["type"] == "PodScheduled":
                return c
        return None
