"""NodeTable: columnar per-node numbers for vectorised Filter and Score.

A plugin that declares a `ColumnSpec` gets a numpy array with one row per node of the
snapshot, in the snapshot's node order. Columns are built lazily on first use and kept
current row by row: the cache marks the nodes that changed since the last cycle, and
only those rows are recomputed. This is what lets one Filter or Score call cover all
nodes at numpy speed instead of a Python call per node.

A `WhatIfTable` holds hypothetical nodes (preemption's dry runs, nodes with nominated pods
counted): rows of another table with some pods removed and others added. Its columns come
from that table's: node-static ones as they are, per-pod sums adjusted by the pods' shares;
NodeInfo copies are built only for the columns and plugins that need them.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kopfsched.framework.types import NodeInfo, PodInfo


def one_per_pod(pod: PodInfo) -> int:
    """The `per_pod` share of a column that counts pods: WhatIfTables sum it without calling it."""
    return 1


@dataclass(frozen=True, slots=True)
class ColumnSpec:
    """How to read one number per node. Specs compare by `name`: declare each once, at module level."""

    name: str
    extract: Callable[[NodeInfo], Any] = field(compare=False, hash=False)
    dtype: Any = field(default=np.int64, compare=False, hash=False)
    node_static: bool = field(default=False, compare=False, hash=False)
    """The value depends on the Node object alone, never on the pods on it."""
    per_pod: Callable[[PodInfo], int] | None = field(default=None, compare=False, hash=False)
    """When the value is a sum over the node's pods (plus a node-level part): one pod's
    share, i.e. adding pod p to a node adds exactly `per_pod(p)` to its value."""

    def __hash__(self) -> int:  # the name's (cached) string hash: columns are looked up every cycle
        return hash(self.name)


_LOWER_PRIORITY_TABLES_KEPT = 4
"""Priorities whose lower-priority columns a table keeps current (the least recently used go)."""

_DERIVED_KEPT = 64
"""Derived arrays a table keeps (the least recently used go)."""

_DERIVED_ONE_BY_ONE = 8
"""Up to this many changed rows, a derived array is brought up to date row by row."""

_DERIVED_FEW = 16
"""Up to this many changed rows, a derived array with `compute_some` is brought up to date by it."""

_FAMILY_KEPT = 32
"""Keys a derived family keeps (the least recently used go)."""

_FAMILIES_KEPT = 8
"""Derived families a table keeps (the least recently used go)."""

_FAMILY_BEHIND = 64
"""A derived family's key further behind than _DERIVED_FEW rows brings up to date with it
every key at most this many rows behind."""

_lower_priority_specs: dict[tuple[str, int], ColumnSpec] = {}


def lower_priority_column(spec: ColumnSpec | None, priority: int) -> ColumnSpec:
    """Per node: `spec.per_pod` summed over the node's pods of a priority below `priority` (with
    `spec` None: how many such pods). What preemption's dry run removes from a node."""
    key = ("" if spec is None else spec.name, priority)
    derived = _lower_priority_specs.get(key)
    if derived is None:
        if spec is None:
            def extract(node: NodeInfo) -> int:
                return sum(1 for p in node.pods.values() if p.priority < priority)
            dtype: Any = np.int64
        else:
            share = spec.per_pod
            assert share is not None, f"{spec.name} is not a per-pod column"

            def extract(node: NodeInfo) -> int:
                return sum(share(p) for p in node.pods.values() if p.priority < priority)
            dtype = spec.dtype
        derived = _lower_priority_specs[key] = ColumnSpec(f"{key[0]}|priority<{priority}", extract, dtype)
    return derived


class NodeTable:
    """Rows are nodes (`nodes[i]`); columns are ColumnSpecs."""

    __slots__ = ("_columns", "_derived", "_families", "_index", "_log", "_lower", "_node_log", "_nodes", "_refreshed",
                 "_seen", "_specs", "node_version", "version")

    def __init__(self, nodes: list[NodeInfo]) -> None:
        self._nodes: list[NodeInfo] | None = nodes
        self._index: dict[str, int] | None = {n.name: i for i, n in enumerate(nodes)}
        self._columns: dict[str, np.ndarray] = {}
        """spec name -> array (specs compare by name; a str key hashes in C, a dataclass does not)."""
        self._specs: dict[str, ColumnSpec] = {}
        self._lower: dict[int, list[ColumnSpec]] = {}
        """priority -> its lower_priority_column specs built here, least recently used first."""
        self._derived: dict[Hashable, list[Any]] = {}
        """key -> [its array over every row, how far into its change log it is up to date,
        whether it reads node-static columns alone (then its log is `_node_log`, else `_log`)]."""
        self._families: dict[Hashable, _Family] = {}
        """derived_family's family -> its arrays, least recently used first."""
        self._log = _ChangeLog()
        """The rows each refresh changed, in order: what a derived array is stale by."""
        self._node_log = _ChangeLog()
        """The same for the refreshes of Node objects alone (node_static=True)."""
        self._refreshed = _ChangeLog()
        """Every row each refresh was given, whether or not a column changed: see refreshed_since."""
        self._seen: set[Hashable] = set()
        """Keys `derived` was asked for once and did not keep yet."""
        self.node_version = 0
        """Counts the refreshes that may have changed Node objects (node_static=True): what a
        plugin keeps from the Node objects alone stays valid while it and the table do."""
        self.version = 0
        """Counts every refresh: a column read at this version is still current while it is."""

    @property
    def nodes(self) -> list[NodeInfo]:
        assert self._nodes is not None
        return self._nodes

    @property
    def index(self) -> dict[str, int]:
        """Node name -> row."""
        assert self._index is not None
        return self._index

    def __len__(self) -> int:
        return len(self.nodes)

    def column(self, spec: ColumnSpec) -> np.ndarray:
        array = self._columns.get(spec.name)
        if array is None:
            array = np.fromiter((spec.extract(n) for n in self.nodes), dtype=spec.dtype, count=len(self.nodes))
            self._columns[spec.name] = array
            self._specs[spec.name] = spec
        return array

    def lower_priority(self, spec: ColumnSpec | None, priority: int) -> np.ndarray:
        """`column(lower_priority_column(spec, priority))`, kept current as every column is, for
        the few priorities used last (the columns of older ones are dropped)."""
        derived = lower_priority_column(spec, priority)
        specs = self._lower.pop(priority, None)
        if specs is None:
            specs = []
            if len(self._lower) >= _LOWER_PRIORITY_TABLES_KEPT:
                for old in self._lower.pop(next(iter(self._lower))):
                    self.drop(old)
        self._lower[priority] = specs  # most recently used last
        if derived not in specs:
            specs.append(derived)
        return self.column(derived)

    def derived(self, key: Hashable, compute: Callable[[NodeTable, np.ndarray], np.ndarray], rows: np.ndarray,
                compute_one: Callable[[NodeTable, int], Any] | None = None, *,
                node_static: bool = False,
                compute_some: Callable[[NodeTable, list[int]], list[Any]] | None = None) -> np.ndarray:
        """`compute(self, rows)`, from an array over every row that the table keeps under `key`
        and brings up to date by recomputing only the rows `refresh` touched since.

        `compute` must be elementwise and read the table's columns alone: a row's value depends
        on that row's column values, never on which other rows are computed with it (refresh
        marks a row stale only when one of its column values changed), and `key` must
        name everything else it depends on (the pod's requests, the plugin's arguments). The
        first request of a key computes `rows` alone; the second builds the array over every
        row, so a key used once costs nothing more (pods of one shape repeat; a one-off pays
        nothing for the others). `compute_one(self, row)`, when given, is `compute` for one
        row (the same number, from the same columns, in Python): a few changed rows are
        recomputed with it, without numpy's fixed cost per call; `compute_some(self, rows)`, when
        given, is `compute_one` for a list of rows at once (what it reads looked up once, not
        per row), used for up to _DERIVED_FEW changed rows. `node_static`: `compute` reads
        node-static columns alone (or the Node objects), so a refresh of the pods alone
        (`refresh(node_static=False)`: a pod bound or gone) leaves the array current."""
        kept = self._derived
        entry = kept.get(key)
        if entry is not None:
            log: _ChangeLog = self._node_log if entry[2] else self._log
            position = entry[1]
            logged = log.rows
            del kept[key]
            if position == log.base + len(logged):  # current (the usual case)
                kept[key] = entry  # most recently used last
                return entry[0][rows]
            if self._catch_up(entry[0], log.since(position), lambda changed: compute(self, changed),
                              compute_some, compute_one):
                entry[1] = log.base + len(logged)
                kept[key] = entry
                return entry[0][rows]
            # Recomputing would cost about what rebuilding does (or the log forgot): start over.
        if key not in self._seen:
            if len(self._seen) >= 4 * _DERIVED_KEPT:
                self._seen.clear()
            self._seen.add(key)
            return compute(self, rows)
        self._seen.discard(key)
        if len(kept) >= _DERIVED_KEPT:
            del kept[next(iter(kept))]
        array = compute(self, np.arange(len(self), dtype=np.int64))
        kept[key] = [array, (self._node_log if node_static else self._log).end, node_static]
        return array[rows]

    def derived_family(self, family: Hashable, key: Hashable, parameters: tuple[int, ...],
                       compute: Callable[[NodeTable, np.ndarray, np.ndarray], np.ndarray], rows: np.ndarray,
                       compute_some: Callable[[NodeTable, list[int]], list[Any]] | None = None) -> np.ndarray:
        """`derived` for keys that share one computation and differ by `parameters` alone (the
        requests of the pods of one plugin): `compute(self, rows, parameters)` gives, for each
        row of the 2-D `parameters` (one per key, all of one length), that key's value at each
        of `rows`, elementwise in both as `derived`'s `compute` is in rows, from the table's
        columns. `compute_some(self, rows)` is this key's for a few rows, in Python.

        A key a few rows behind is brought up to date by `compute_some`; one further behind
        brings, in one `compute`, every key of the family not far behind up to date with it (a
        row recomputed that did not change keeps its value): the next pods of other shapes
        then find theirs current. Keys first computed alone, then kept, as in `derived`."""
        families = self._families
        entry = families.pop(family, None)
        if entry is None:
            if len(families) >= _FAMILIES_KEPT:
                del families[next(iter(families))]
            entry = _Family()
        families[family] = entry  # most recently used last
        log = self._log
        end = log.base + len(log.rows)
        kept = entry.keys
        slot = kept.pop(key, None)
        if slot is not None:
            kept[key] = slot  # most recently used last
            values = entry.values
            assert values is not None
            positions = entry.positions
            position = positions[slot]
            if position == end:  # current (the usual case)
                return values[slot][rows]
            stale = log.since(position)
            few = compute_some is not None and stale is not None and len(stale) <= _DERIVED_FEW
            if stale is not None and not few and len(stale) <= _FAMILY_BEHIND:
                # Every key at most _FAMILY_BEHIND rows behind, over the rows any of them lacks.
                first = max(end - _FAMILY_BEHIND, log.base)
                slots = [s for s, p in enumerate(positions[:len(kept)]) if p >= first and p != end]
                start = min(positions[s] for s in slots)
                changed = np.array(sorted(set(log.rows[start - log.base:])), dtype=np.int64)
                if len(slots) == len(kept):
                    values[:len(kept), changed] = compute(self, changed, entry.parameters[:len(kept)])
                else:
                    chosen = np.array(slots, dtype=np.int64)
                    values[chosen[:, None], changed] = compute(self, changed, entry.parameters[chosen])
                for s in slots:
                    positions[s] = end
                return values[slot][rows]
            parameters_of_key = entry.parameters[slot:slot + 1]
            if not self._catch_up(values[slot], stale, lambda changed: compute(self, changed, parameters_of_key)[0],
                                  compute_some):
                values[slot] = compute(self, np.arange(len(self), dtype=np.int64), parameters_of_key)[0]
            positions[slot] = end
            return values[slot][rows]
        seen = (family, key)
        if seen not in self._seen:
            if len(self._seen) >= 4 * _DERIVED_KEPT:
                self._seen.clear()
            self._seen.add(seen)
            return compute(self, rows, np.array([parameters], dtype=np.int64))[0]
        self._seen.discard(seen)
        array = compute(self, np.arange(len(self), dtype=np.int64), np.array([parameters], dtype=np.int64))[0]
        return entry.add(key, parameters, array, end)[rows]

    def _catch_up(self, array: np.ndarray, stale: list[int] | None, compute: Callable[[np.ndarray], np.ndarray],
                  compute_some: Callable[[NodeTable, list[int]], list[Any]] | None,
                  compute_one: Callable[[NodeTable, int], Any] | None = None) -> bool:
        """Recompute the rows of a kept `array` that changed since it was current (`stale`, None
        when the change log forgot them): a few in Python, by `compute_some` (or `compute_one`
        each), up to a quarter of the table by one `compute(rows)`. False, `array` untouched,
        when more changed: rebuilding costs about what recomputing them would."""
        if stale is None:
            return False
        if len(stale) <= _DERIVED_FEW and compute_some is not None:
            for row, value in zip(stale, compute_some(self, stale), strict=True):
                array[row] = value
        elif len(stale) > max(len(self) // 4, 16):
            return False
        elif compute_one is not None and len(stale) <= _DERIVED_ONE_BY_ONE:
            for row in stale:
                array[row] = compute_one(self, row)
        else:
            changed = np.array(sorted(set(stale)), dtype=np.int64)
            array[changed] = compute(changed)
        return True

    def refresh(self, rows: Iterable[int], *, node_static: bool = True) -> None:
        """Recompute the given rows of every column built so far (and mark them stale in the
        derived arrays). `node_static=False`: only the pods of those nodes changed, not their
        Node objects, so their node-static columns are left as they are."""
        rows = list(rows)
        if not rows:
            return
        self.version += 1
        if node_static:
            self.node_version += 1
        nodes = self._nodes
        assert nodes is not None
        size = len(nodes)
        self._refreshed.add(rows, size)
        columns = self._columns
        # Derived arrays read columns alone: a row whose columns all kept their values (a bound
        # pod confirming the one assumed there) leaves them as they are.
        changed: set[int] | None = set() if self._derived or self._families else None
        if changed is not None and len(rows) == 1:
            # One row (a pod bound or gone between two cycles, the usual refresh): one node.
            row = rows[0]
            node = nodes[row]
            for name, spec in self._specs.items():
                if node_static or not spec.node_static:
                    value = spec.extract(node)
                    array = columns[name]
                    if value != array.item(row):  # equal values store as they are stored (NaN: never equal)
                        array[row] = value
                        changed.add(row)
        else:
            for name, spec in self._specs.items():
                array = columns[name]
                if not node_static and spec.node_static:
                    continue
                extract = spec.extract
                if changed is None:
                    for row in rows:
                        array[row] = extract(nodes[row])
                    continue
                for row in rows:
                    value = extract(nodes[row])
                    if value != array.item(row):
                        array[row] = value
                        changed.add(row)
        if changed:
            # Logged once for every derived array (each knows how far it read), not appended to
            # each: a pod-only refresh does not concern the arrays of node-static columns.
            self._log.add(changed, size)
            if node_static:
                self._node_log.add(changed, size)

    def refreshed_since(self, position: int) -> tuple[int, list[int] | None]:
        """(the position to ask from next time, the rows refreshed since `position`, repeats
        kept; None when some were forgotten): lets an index of its own over the rows redo only
        those instead of comparing every row (no column changes but in `refresh`)."""
        return self._refreshed.end, self._refreshed.since(position)

    def drop(self, spec: ColumnSpec) -> None:
        """Forget a column (for plugins that build columns per pod group and must bound them).
        The derived arrays go too: refresh no longer sees that column's changes for them."""
        if self._columns.pop(spec.name, None) is not None:
            self._derived.clear()
            self._families.clear()
        self._specs.pop(spec.name, None)


class _Family:
    """derived_family's arrays of one family: row `slot` of `values` is that key's array."""

    __slots__ = ("keys", "parameters", "positions", "values")

    def __init__(self) -> None:
        self.keys: dict[Hashable, int] = {}
        """key -> its slot, least recently used first; the slots in use are 0..len-1."""
        self.parameters = np.zeros((0, 0), dtype=np.int64)
        self.values: np.ndarray | None = None
        self.positions: list[int] = []
        """Per slot: how far into the table's change log its array is up to date."""

    def add(self, key: Hashable, parameters: tuple[int, ...], array: np.ndarray, position: int) -> np.ndarray:
        """Keep `array` (up to date at `position`) as key's, in the least recently used one's slot when full."""
        keys = self.keys
        if len(keys) >= _FAMILY_KEPT:
            slot = keys.pop(next(iter(keys)))
        else:
            slot = len(keys)
            if self.values is None or slot == len(self.values):  # grow, doubling
                capacity = min(max(4, 2 * slot), _FAMILY_KEPT)
                values = np.zeros((capacity, len(array)), dtype=array.dtype)
                grown = np.zeros((capacity, len(parameters)), dtype=np.int64)
                if self.values is not None:
                    values[:slot] = self.values
                    grown[:slot] = self.parameters
                self.values, self.parameters = values, grown
                self.positions += [0] * (capacity - len(self.positions))
        assert self.values is not None
        self.values[slot] = array
        self.parameters[slot] = parameters
        self.positions[slot] = position
        keys[key] = slot
        return self.values[slot]


class _ChangeLog:
    """Rows in the order refreshes changed them, the oldest forgotten beyond a bound."""

    __slots__ = ("base", "rows")

    def __init__(self) -> None:
        self.rows: list[int] = []
        self.base = 0
        """The position of rows[0] among every row ever logged."""

    @property
    def end(self) -> int:
        return self.base + len(self.rows)

    def add(self, rows: Iterable[int], table_size: int) -> None:
        self.rows += rows
        # A derived array more than a quarter of the table behind is rebuilt anyway (see
        # derived): what is older than that is never read.
        keep = 2 * max(table_size // 4, 16)
        if len(self.rows) > 2 * keep:
            drop = len(self.rows) - keep
            del self.rows[:drop]
            self.base += drop

    def since(self, position: int) -> list[int] | None:
        """The rows logged from `position` on; None when some were forgotten."""
        if position < self.base:
            return None
        return self.rows[position - self.base:]


class WhatIfTable(NodeTable):
    """Hypothetical nodes: row i is row `base_rows[i]` of `base` without the pods
    `removed[i]` (all on that node) and with the pods `added[i]` (none on it).

    `removed_below=P` (on a table of real nodes only) removes every pod of a priority below
    P instead: `removed[i]` is then those pods in the node's order, built only if read, and
    per-pod columns subtract the base's `lower_priority` columns instead of summing shares.
    `added_slots=(slots, slot_rows, mask)` adds, to row i, the pods of `slots` row
    `slot_rows[i]` whose slot `mask[i]` selects (in slot order): preemption's reprieves, where
    each step adds a few pods of the same queues and a pod's share is computed once per batch.

    A node-static column is the base's, a column with `per_pod` the base's adjusted by the
    pods' shares; any other column, and `nodes`, come from NodeInfo copies built on first
    use (the removed pods dropped, then the added ones appended in order, so the copies
    iterate their pods as a copy edited by hand would). `root` and `root_rows` name the
    real nodes, for Filters that read the Node object alone."""

    __slots__ = ("_added", "_flat", "_removed", "_slots", "base", "base_rows", "removed_below", "root", "root_rows")

    def __init__(self, base: NodeTable, base_rows: np.ndarray, *, added: list[list[PodInfo]] | None = None,
                 removed: list[list[PodInfo]] | None = None, removed_below: int | None = None,
                 added_slots: tuple[PodSlots, np.ndarray, np.ndarray] | None = None) -> None:
        self.base = base
        self.base_rows = base_rows
        if added is not None and added_slots is not None:
            raise ValueError("give added or added_slots, not both")
        self._added = added
        self._slots = added_slots
        self._removed = removed
        self.removed_below = removed_below
        if removed_below is not None and (removed is not None or isinstance(base, WhatIfTable)):
            raise ValueError("removed_below applies alone, to a table of real nodes")
        self.root: NodeTable = base
        self.root_rows: np.ndarray = base_rows
        if isinstance(base, WhatIfTable):
            self.root, self.root_rows = base.root, base.root_rows[base_rows]
        self._columns = {}
        self._specs = {}
        self._nodes = None
        self._index = None
        self._lower = {}
        self._derived = {}
        self._families = {}
        self._log = _ChangeLog()
        self._node_log = _ChangeLog()
        self._refreshed = _ChangeLog()
        self._seen = set()
        self.node_version = 0
        self.version = 0
        self._flat: tuple[_Pods | None, _Pods | None] | None = None

    def __len__(self) -> int:
        return len(self.base_rows)

    @property
    def added(self) -> list[list[PodInfo]]:
        if self._added is None:
            if self._slots is not None:
                slots, slot_rows, mask = self._slots
                self._added = [[slots.pods[row][j] for j in np.flatnonzero(selected).tolist()]
                               for row, selected in zip(slot_rows.tolist(), mask, strict=True)]
            else:
                self._added = [[] for _ in range(len(self.base_rows))]
        return self._added

    @property
    def removed(self) -> list[list[PodInfo]]:
        if self._removed is None:
            below = self.removed_below
            if below is None:
                self._removed = [[] for _ in range(len(self.base_rows))]
            else:
                nodes = self.base.nodes
                self._removed = [[p for p in nodes[row].pods.values() if p.priority < below]
                                 for row in self.base_rows.tolist()]
        return self._removed

    @property
    def nodes(self) -> list[NodeInfo]:
        if self._nodes is None:
            self._nodes = [self._copy(i) for i in range(len(self.base_rows))]
        return self._nodes

    @property
    def index(self) -> dict[str, int]:
        if self._index is None:
            root_nodes = self.root.nodes
            self._index = {root_nodes[r].name: i for i, r in enumerate(self.root_rows.tolist())}
        return self._index

    def _copy(self, i: int) -> NodeInfo:
        node = self.base.nodes[int(self.base_rows[i])]
        removed = self.removed[i]
        copy = node.without_pods(removed) if removed else node.clone()
        if self._added is not None or self._slots is not None:
            for pod in self.added[i]:
                copy.add_pod(pod)
        return copy

    def column(self, spec: ColumnSpec) -> np.ndarray:
        array = self._columns.get(spec.name)
        if array is not None:
            return array
        if spec.node_static:
            array = self.root.column(spec)[self.root_rows]
        elif spec.per_pod is not None:
            array = self.base.column(spec)[self.base_rows]  # a copy: fancy indexing
            if self.removed_below is not None:
                array -= self.base.lower_priority(spec, self.removed_below)[self.base_rows]
            if self._flat is None:
                removed = None if self.removed_below is not None else self._removed
                # With added_slots, `_added` is only the slots listed (by `nodes`): the slots'
                # shares are added below, and counting the listed pods too would add them twice.
                added = None if self._slots is not None else self._added
                self._flat = (_Pods.of(added), _Pods.of(removed))
            added_pods, removed_pods = self._flat
            if added_pods is not None:
                added_pods.add_shares(array, spec.per_pod, 1)
            if self._slots is not None:
                slots, slot_rows, mask = self._slots
                array += np.where(mask, slots.matrix(spec)[slot_rows], 0).sum(axis=1, dtype=array.dtype)
            if removed_pods is not None:
                removed_pods.add_shares(array, spec.per_pod, -1)
        else:
            array = np.fromiter((spec.extract(n) for n in self.nodes), dtype=spec.dtype, count=len(self))
        self._columns[spec.name] = array
        self._specs[spec.name] = spec
        return array

    def refresh(self, rows: Iterable[int], *, node_static: bool = True) -> None:
        raise TypeError("a WhatIfTable is not kept current")


class PodSlots:
    """Pods per row in numbered slots (preemption's reprieve queues), for WhatIfTable's
    `added_slots`: each pod's share of a per-pod column is computed once, into a rows-by-slots
    matrix (zero where a row has fewer pods), and any selection of slots sums with numpy."""

    __slots__ = ("_flat", "_matrices", "_row_of", "_slot_of", "pods", "width")

    def __init__(self, pods_per_row: list[list[PodInfo]]) -> None:
        self.pods = pods_per_row
        lengths = np.fromiter(map(len, pods_per_row), dtype=np.int64, count=len(pods_per_row))
        self.width = int(lengths.max()) if len(lengths) else 0
        self._flat = list(itertools.chain.from_iterable(pods_per_row))
        self._row_of = np.repeat(np.arange(len(pods_per_row)), lengths)
        self._slot_of = np.arange(len(self._flat)) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        self._matrices: dict[ColumnSpec, np.ndarray] = {}

    def matrix(self, spec: ColumnSpec) -> np.ndarray:
        """share(pod in slot j of row i) at [i, j]; `spec` must be a per-pod column."""
        matrix = self._matrices.get(spec)
        if matrix is None:
            assert spec.per_pod is not None
            matrix = np.zeros((len(self.pods), self.width), dtype=spec.dtype)
            if spec.per_pod is one_per_pod:
                matrix[self._row_of, self._slot_of] = 1
            else:
                matrix[self._row_of, self._slot_of] = np.fromiter(map(spec.per_pod, self._flat), dtype=spec.dtype,
                                                                    count=len(self._flat))
            self._matrices[spec] = matrix
        return matrix


class _Pods:
    """Pods per row, flattened once for every per-pod column of a WhatIfTable."""

    __slots__ = ("flat", "rows", "starts")

    @classmethod
    def of(cls, pods_per_row: list[list[PodInfo]] | None) -> _Pods | None:
        """None when there are no pods at all."""
        if not pods_per_row:
            return None
        pods = cls(pods_per_row)
        return pods if pods.flat else None

    def __init__(self, pods_per_row: list[list[PodInfo]]) -> None:
        self.flat = list(itertools.chain.from_iterable(pods_per_row))
        self.rows: np.ndarray | None = None
        """The rows with pods; None when every row has exactly one (then `flat` is row-aligned)."""
        self.starts: np.ndarray | None = None
        if len(self.flat) != len(pods_per_row) or not all(pods_per_row):
            lengths = np.fromiter(map(len, pods_per_row), dtype=np.int64, count=len(pods_per_row))
            self.rows = np.flatnonzero(lengths)
            self.starts = (np.cumsum(lengths) - lengths)[self.rows]

    def add_shares(self, array: np.ndarray, share: Callable[[PodInfo], int], sign: int) -> None:
        """array[row] += sign * the sum of `share` over the row's pods, for every row."""
        if not self.flat:
            return
        if share is one_per_pod:
            shares = np.ones(len(self.flat), dtype=array.dtype)
        else:
            shares = np.fromiter(map(share, self.flat), dtype=array.dtype, count=len(self.flat))
        if self.rows is None or self.starts is None:
            if sign > 0:
                array += shares
            else:
                array -= shares
            return
        sums = np.add.reduceat(shares, self.starts)
        if sign > 0:
            array[self.rows] += sums
        else:
            array[self.rows] -= sums


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

        spec = _label_columns[key] = ColumnSpec(f"label:{key}", extract, node_static=True)
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


def label_codes(table: NodeTable, rows: np.ndarray, key: str) -> np.ndarray:
    """Each row's value of label `key` as its `label_value_codes` code, -1 where it lacks it."""
    return table.column(label_column(key))[rows]


def label_in(table: NodeTable, rows: np.ndarray, key: str, values: Iterable[str]) -> np.ndarray:
    """Per row: the node has label `key` with one of `values` (one mask op per label value)."""
    codes = label_codes(table, rows, key)  # first: building the column interns the nodes' values
    known = label_value_codes(key)
    wanted = [known[v] for v in values if v in known]  # a value no node has matches no row
    if not wanted:
        return np.zeros(len(codes), dtype=bool)
    if len(wanted) == 1:
        return codes == wanted[0]
    lookup = np.zeros(len(known) + 1, dtype=bool)  # the trailing slot is a missing label's (-1)
    lookup[wanted] = True
    return lookup[codes]


def label_lookup(table: NodeTable, rows: np.ndarray, key: str, accept: Callable[[str | None], bool]) -> np.ndarray:
    """Per row: `accept(the node's value of label key, None when it lacks it)`, called once
    per value ever seen for the key rather than once per row."""
    codes = label_codes(table, rows, key)
    known = label_value_codes(key)
    lookup = np.fromiter(itertools.chain(map(accept, known), (accept(None),)), dtype=bool, count=len(known) + 1)
    return lookup[codes]
