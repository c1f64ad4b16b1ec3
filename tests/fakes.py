"""The fakes tests share. Plugin-facing fakes (FakeSnapshot, FakeObjects, RecordingClient,
make_handle) are `kopfsched.testing`'s, the ones plugin authors get: tests import them from there,
so the two never drift. What is here is what only our own tests need."""
from __future__ import annotations

from typing import Any


class FakeClock:
    """A clock that moves only when told. Call it (or `clock()`) for the time; `advance(s)` or
    assigning `now` moves it; `sleep(s)` moves it instead of waiting and records the delay in
    `slept`; with `tick`, every reading first moves it by that much (a slow caller)."""

    def __init__(self, now: float = 1000.0, *, tick: float = 0.0) -> None:
        self.now = now
        self.tick = tick
        self.slept: list[float] = []

    def __call__(self) -> float:
        self.now += self.tick
        return self.now

    def clock(self) -> float:
        return self()

    def advance(self, seconds: float) -> None:
        self.now += seconds

    async def sleep(self, seconds: float) -> None:
        self.slept.append(round(seconds, 6))
        self.now += seconds


class RecordingHandlers:
    """The ClusterFeed's handlers, recording each call as (what, pod's node or node's name)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str | None]] = []

    def on_pod_upsert(self, pod: dict[str, Any], old: dict[str, Any] | None = None) -> None:
        self.calls.append(('upsert', pod['spec'].get('nodeName')))

    def on_pod_delete(self, pod: dict[str, Any]) -> None:
        self.calls.append(('delete', pod['spec'].get('nodeName')))

    def on_node_upsert(self, node: dict[str, Any], old: dict[str, Any] | None = None) -> None:
        self.calls.append(('node', node['metadata']['name']))

    def on_node_delete(self, node: dict[str, Any]) -> None:
        self.calls.append(('node-delete', node['metadata']['name']))
