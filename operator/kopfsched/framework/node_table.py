"""NodeTable: columnar per-node numbers for vectorised Filter and Score.

A plugin that declares a `ColumnSpec` gets a numpy array with one row per node of the
snapshot, in the snapshot's node order. Columns are built lazily on first use and kept
current row by row: the cache marks the nodes that changed since the last cycle, and
only those rows are recomputed. This is what lets one Filter or Score call cover all
nodes at numpy speed instead of a Python call per node.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
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

    def drop(self, spec: ColumnSpec) -> None:
        """Forget a column (for plugins that build columns per pod group and must bound them)."""
        self._columns.pop(spec, None)

    def replace_node(self, row: int, node_info: NodeInfo) -> None:
        self.nodes[row] = node_info
        self.refresh((row,))


_label_codes: dict[str, dict[str, int]] = {}
_label_columns: dict[str, ColumnSpec] = {}


def label_value_codes(key: str) -> dict[str, int]:
    """The interned codes of every value ever seen for label `key` (value -> code >= 0)."""
    return _label_codes.setdefault(key, {})


def label_column(key: str) -> ColumnSpec:
    """A column holding each node's value of label `key` as an interned code, -1 when the
    node lacks the label. Lets a plugin map topology domains to rows with numpy."""
    spec = _label_columns.get(key)
    if spec is None:
        codes = label_value_codes(key)

        def extract(node: NodeInfo) -> int:
            value = node.labels.get(key)
            if value is None:
                return -1
            code = codes.get(value)
            if code is None:
                code = codes[value] = len(codes)
            return code

        spec = _label_columns[key] = ColumnSpec(f"label:{key}", extract)
    return spec


def lookup_by_label(table: NodeTable, rows: np.ndarray, key: str, per_value: Mapping[str, int | float]) -> np.ndarray:
    """For each row, `per_value[node's value of key]` (0 when absent or the node lacks the label)."""
    codes = table.column(label_column(key))[rows]
    value_codes = label_value_codes(key)
    lookup = np.zeros(len(value_codes) + 1, dtype=np.float64 if any(
        isinstance(v, float) for v in per_value.values()) else np.int64)
    for value, amount in per_value.items():
        code = value_codes.get(value)
        if code is not None:
            lookup[code] = amount
    # Missing labels (-1) read the trailing zero slot.
    return lookup[codes]
