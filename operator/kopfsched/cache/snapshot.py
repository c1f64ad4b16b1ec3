"""Snapshot: the nodes as plugins see them during one scheduling cycle.

The scheduling cycle runs without awaiting, so nothing else can touch the cache while
it runs: the snapshot can share the cache's NodeInfo objects instead of cloning them
(upstream clones because its informers run in parallel). What the snapshot adds is the
node order (zones interleaved), the lists of nodes with affinity pods, and the NodeTable
columns, refreshed only for the nodes that changed since the previous cycle.
"""

from __future__ import annotations

from bisect import bisect_left

from kopfsched.framework.node_table import NodeTable
from kopfsched.framework.types import NodeInfo


class Snapshot:
    def __init__(self) -> None:
        self._list: list[NodeInfo] = []
        self._map: dict[str, NodeInfo] = {}
        self.table = NodeTable([])
        self._with_affinity: list[NodeInfo] = []
        self._with_required_anti_affinity: list[NodeInfo] = []
        self._affinity_names: set[str] = set()
        self._anti_affinity_names: set[str] = set()

    def node_infos(self) -> list[NodeInfo]:
        return self._list

    def num_nodes(self) -> int:
        return len(self._list)

    def get(self, node_name: str) -> NodeInfo | None:
        return self._map.get(node_name)

    def have_pods_with_affinity(self) -> list[NodeInfo]:
        return self._with_affinity

    def have_pods_with_required_anti_affinity(self) -> list[NodeInfo]:
        return self._with_required_anti_affinity

    def _rebuild(self, nodes: list[NodeInfo]) -> None:
        self._list = nodes
        self._map = {n.name: n for n in nodes}
        self.table = NodeTable(nodes)
        self._rebuild_affinity_lists()

    def _rebuild_affinity_lists(self) -> None:
        self._with_affinity = [n for n in self._list if n.pods_with_affinity]
        self._with_required_anti_affinity = [n for n in self._list if n.pods_with_required_anti_affinity]
        self._affinity_names = {n.name for n in self._with_affinity}
        self._anti_affinity_names = {n.name for n in self._with_required_anti_affinity}

    def _refresh(self, names: set[str], node_changed: set[str] | None = None) -> None:
        """Refresh the rows of `names`; of those, only the ones in `node_changed` (all when it
        is None) had their Node object changed and need their node-static columns read again."""
        rows = []
        pods_only = []
        index = self.table.index
        for name in names:
            row = index.get(name)
            if row is None:
                continue
            if node_changed is None or name in node_changed:
                rows.append(row)
            else:
                pods_only.append(row)
            node = self._list[row]
            if bool(node.pods_with_affinity) != (name in self._affinity_names):
                self._with_affinity = _toggled(self._with_affinity, node, row, index, self._affinity_names)
            if bool(node.pods_with_required_anti_affinity) != (name in self._anti_affinity_names):
                self._with_required_anti_affinity = _toggled(self._with_required_anti_affinity, node, row, index,
                                                             self._anti_affinity_names)
        if rows:
            self.table.refresh(rows)
        if pods_only:
            self.table.refresh(pods_only, node_static=False)


def _toggled(nodes: list[NodeInfo], node: NodeInfo, row: int, index: dict[str, int], names: set[str]) -> list[NodeInfo]:
    """A copy of `nodes` (in snapshot order) with `node` put in or taken out, and `names` to
    match: a new list, as a rebuild would give, for whoever kept the previous one."""
    at = bisect_left(nodes, row, key=lambda n: index[n.name])
    changed = list(nodes)
    if node.name in names:
        del changed[at]
        names.discard(node.name)
    else:
        changed.insert(at, node)
        names.add(node.name)
    return changed
