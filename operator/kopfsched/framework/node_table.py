"""NodeTable: columnar per-node numbers for vectorised Filter and Score.

A plugin that declares a `ColumnSpec` gets a numpy array with one row per node of the
snapshot, in the snapshot's node order. Columns are built lazily on first use and kept
current row by row: the cache marks the nodes that changed since the last cycle, and
only those rows are recomputed. This is what lets one Filter or Score call cover all
nodes at numpy speed instead of a Python call per node.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kopfsched.framework.types import NodeInfo


@dataclass(frozen=True, slots=True)
class ColumnSpec:
    """How to read one number per node. Specs compare by `name`: declare each once, at module level."""

    name: str
    extract: Callable[[NodeInfo], Any] = field(compare=False, hash=False)
    dtype: Any = field(default=np.int64, compare=False, hash=False)


class NodeTable:
    """Rows are nodes (`nodes[i]`); columns are ColumnSpecs."""

    __slots__ = ("_columns", "index", "nodes")

    def __init__(self, nodes: list[NodeInfo]) -> None:
        self.nodes = nodes
        self.index: dict[str, int] = {n.name: i for i, n in enumerate(nodes)}
        self._columns: dict[ColumnSpec, np.ndarray] = {}

    def __len__(self) -> int:
        return len(self.nodes)

    def column(self, spec: ColumnSpec) -> np.ndarray:
        array = self._columns.get(spec)
        if array is None:
            array = np.fromiter((spec.extract(n) for n in self.nodes), dtype=spec.dtype, count=len(self.nodes))
            self._columns[spec] = array
        return array

    def refresh(self, rows: Iterable[int]) -> None:
        """Recompute the given rows of every column built so far."""
        rows = list(rows)
        if not rows:
            return
        for spec, array in self._columns.items():
            extract = spec.extract
            for row in rows:
                array[row] = extract(self.nodes[row])

    def replace_node(self, row: int, node_info: NodeInfo) -> None:
        self.nodes[row] = node_info
        self.refresh((row,))
