"""Shared fakes for plugin tests: a snapshot over a fixed node list, a recording client,
and a Handle built from them. Fixtures here are additive; plugin tests may also import
`FakeSnapshot`, `RecordingClient` and `make_handle` directly."""

from __future__ import annotations

from typing import Any

import pytest

from kopfsched.framework.handle import Handle
from kopfsched.framework.node_table import NodeTable
from kopfsched.framework.types import NodeInfo


class FakeSnapshot:
    """The SnapshotLister protocol over a fixed list of NodeInfos."""

    def __init__(self, nodes: list[NodeInfo] | None = None) -> None:
        self._nodes = list(nodes or [])
        self._table = NodeTable(self._nodes)

    @property
    def table(self) -> NodeTable:
        return self._table

    def node_infos(self) -> list[NodeInfo]:
        return self._nodes

    def get(self, node_name: str) -> NodeInfo | None:
        return next((n for n in self._nodes if n.name == node_name), None)

    def have_pods_with_affinity(self) -> list[NodeInfo]:
        return [n for n in self._nodes if n.pods_with_affinity]

    def have_pods_with_required_anti_affinity(self) -> list[NodeInfo]:
        return [n for n in self._nodes if n.pods_with_required_anti_affinity]


class RecordingClient:
    """A ClusterClient that records calls and raises `fail_with` from bind when set."""

    def __init__(self, fail_with: BaseException | None = None) -> None:
        self.fail_with = fail_with
        self.bindings: list[tuple[str, str]] = []

    async def bind(self, *, pod: dict[str, Any], node_name: str) -> None:
        if self.fail_with is not None:
            raise self.fail_with
        meta = pod.get("metadata") or {}
        self.bindings.append((f"{meta.get('namespace', 'default')}/{meta.get('name', '')}", node_name))

    async def patch_pod_status(self, **kwargs: Any) -> None:
        pass

    async def delete_pod(self, **kwargs: Any) -> None:
        pass

    async def record_event(self, **kwargs: Any) -> None:
        pass

    async def patch_object(self, **kwargs: Any) -> dict[str, Any]:
        return {}


def make_handle(nodes: list[NodeInfo] | None = None, *, client: Any = None) -> Handle:
    return Handle(snapshot=FakeSnapshot(nodes), client=client or RecordingClient())


@pytest.fixture
def fake_handle() -> Handle:
    return make_handle()
