"""Per-node counts of the pods a (namespace, selector) matches, kept current incrementally.

Pods are grouped by (namespace, labels): a selector matches a whole group or none of it, so a
selector's counts are the sums of its groups' per-node counts. The index re-reads only the
nodes whose generation changed since it last looked (of the rows the table refreshed since,
`NodeTable.refreshed_since`), and of those only the pods that came or went, and each
selector's array is brought up to date by the changes of its groups' counts alone: pushed
to it as the index reads them when it matches a few groups (a controller's pods), else caught
up from the change log when it is read; a selector seen for the first
time costs one match per group that has a label it requires (or per group of the namespace)
and one addition per matching pod, not a scan of every node's pods. Per topology key, a
selector's counts summed per label value (over every row, or over the rows of a node inclusion
mask) are kept up to date the same way.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Iterable

import numpy as np

from kopfsched.framework.node_table import NodeTable, label_column, label_value_codes
from kopfsched.framework.types import NodeInfo, PodInfo
from kopfsched.plugins.podtopologyspread.common import Selector

_MASKED_TOTALS_KEPT = 16
"""Per selector: per-domain totals kept for this many (topology key, inclusion mask) pairs."""

_SELECTORS_KEPT = 1024
"""Selector arrays kept (the least recently used go)."""

_GROUPS_FOLLOWED = 8
"""Up to this many matching groups, a selector's counts follow their changes as they are read."""

GroupKey = tuple[str, frozenset[tuple[str, str]]]


class SelectorCounts:
    """One selector's per-row counts, and what is kept with them."""

    __slots__ = ("array", "candidates", "checked", "following", "matched", "position", "totals", "totals_version")

    def __init__(self, array: np.ndarray, candidates: list[int], position: int) -> None:
        self.array = array
        self.matched: set[int] = set()
        self.candidates = candidates
        """The groups that may match (a list the index appends new groups to)."""
        self.checked = 0
        """candidates[:checked] were matched against the selector."""
        self.position = position
        """How far into the change log the array is current (unless following)."""
        self.following = False
        """Whether its groups' changes are applied as the index reads them (then it is always current)."""
        self.totals: dict[tuple[str, int], tuple[np.ndarray, np.ndarray | None, np.ndarray]] = {}
        """(topology key, id of the mask or 0) -> (its label column, the mask or None for every row,
        `array` summed per code + 1 over the rows the mask includes; slot 0: nodes without the key)."""
        self.totals_version = -1
        """The table's node_version the totals' codes are of."""


def _per_code(codes: np.ndarray, array: np.ndarray, size: int) -> np.ndarray:
    return np.bincount(codes + 1, weights=array, minlength=size).astype(np.int64)


class MatchCounts:
    """Counts for the snapshot's NodeTable; any other table starts the index over."""

    def __init__(self) -> None:
        self._table: NodeTable | None = None
        self._size = 0
        self._node_version = -1
        """The table's node_version at the last sync."""
        self._version = -1
        """The table's version at the last sync."""
        self._refresh_position = 0
        """How far into the table's refreshed rows (NodeTable.refreshed_since) the index is."""
        self._generations: list[int] = []
        """Per row: the node's generation when it was last read (it changes when anything on
        the node does: what the index is stale by)."""
        self._row_pods: list[dict[str, PodInfo]] = []
        """Per row: the node's pods when it was last read (uid -> PodInfo)."""
        self._pod_groups: list[dict[str, int]] = []
        """Per row: uid -> the group of that pod, -1 for a terminating one."""
        self._group_ids: dict[GroupKey, int] = {}
        self._groups: list[GroupKey] = []
        self._group_labels: list[dict[str, str]] = []
        self._group_rows: list[dict[int, int]] = []
        """Per group: row -> its pods there (non-terminating)."""
        self._row_groups: list[dict[int, int]] = []
        """Per row: group -> its pods there."""
        self._log: list[tuple[int, int, int]] = []
        """(row, group, change of its pods there), in the order the index saw them."""
        self._log_base = 0
        self._followers: list[list[SelectorCounts]] = []
        """Per group: the kept selectors that follow its changes."""
        self._entries: OrderedDict[tuple[str, str], SelectorCounts] = OrderedDict()
        self._by_namespace: dict[str, list[int]] = {}
        self._by_label: dict[tuple[str, str, str], list[int]] = {}
        """(namespace, key, value) -> the groups with that label, in the order they appeared."""

    def counts(self, table: NodeTable, selector: Selector, namespace: str) -> np.ndarray:
        """Matching non-terminating pods of `namespace` per row (read-only: do not modify)."""
        entry = self.entry(table, selector, namespace)
        return np.zeros(self._size, dtype=np.int64) if entry is None else entry.array

    def entry(self, table: NodeTable, selector: Selector, namespace: str) -> SelectorCounts | None:
        """The selector's counts, current (`array`: `counts`); None for an empty selector,
        which counts no pods. For one who reads both the counts and `entry_totals`."""
        self._sync(table)
        if selector.empty:
            return None
        key = (namespace, selector.signature)
        entry = self._entries.get(key)
        end = self._log_base + len(self._log)
        if entry is not None:
            self._entries.move_to_end(key)
            self._match_new_groups(entry, selector, namespace)
            if not entry.following and entry.position != end and not self._catch_up(entry, end):
                del self._entries[key]
                entry = None
        if entry is None:
            entry = self._build(key, selector, namespace, end)
        return entry

    def _catch_up(self, entry: SelectorCounts, end: int) -> bool:
        """Apply the changes logged since the entry was current; False when rebuilding is
        cheaper (or they were forgotten)."""
        position = entry.position
        if position < self._log_base or end - position > max(self._size // 4, 16):
            return False
        matched = entry.matched
        array = entry.array
        if entry.totals_version != self._node_version:
            # Nodes relabelled: the totals' codes may be others (and are rebuilt when asked for).
            entry.totals.clear()
            entry.totals_version = self._node_version
        totals = list(entry.totals.values())
        for row, g, delta in self._log[position - self._log_base:]:
            if g in matched:
                array[row] += delta
                for codes, mask, per_code in totals:
                    if mask is None or mask[row]:
                        per_code[codes[row] + 1] += delta
        entry.position = end
        return True

    def _apply(self, entry: SelectorCounts, row: int, delta: int) -> None:
        """A change of a matching group's pods on `row`, applied to a following entry."""
        entry.array[row] += delta
        if not entry.totals:
            return
        if entry.totals_version != self._node_version:
            entry.totals.clear()  # as in _catch_up
            entry.totals_version = self._node_version
            return
        for codes, mask, per_code in entry.totals.values():
            if mask is None or mask[row]:
                per_code[codes[row] + 1] += delta

    def domain_totals(self, table: NodeTable, selector: Selector, namespace: str, key: str,
                      mask: np.ndarray | None = None) -> np.ndarray:
        """`counts` summed per value of node label `key` over every row, or over the rows
        `mask` includes: index code + 1 (the codes of `label_value_codes(key)`), index 0 for
        the rows without the label (read-only). A mask is kept by identity: never modify one
        given here."""
        entry = self.entry(table, selector, namespace)
        codes = table.column(label_column(key))
        size = len(label_value_codes(key)) + 1
        if entry is None:
            return np.zeros(size, dtype=np.int64)
        return self.entry_totals(entry, table, key, codes, size, mask)

    @staticmethod
    def entry_totals(entry: SelectorCounts, table: NodeTable, key: str, codes: np.ndarray, size: int,
                     mask: np.ndarray | None = None) -> np.ndarray:
        """`domain_totals` of a current `entry`, given `codes` (the table's label column of
        `key`) and `size` (its codes + 1)."""
        if entry.totals_version != table.node_version:
            entry.totals.clear()
            entry.totals_version = table.node_version
        which = (key, 0 if mask is None else id(mask))  # the kept mask keeps its id its own
        kept = entry.totals.get(which)
        if kept is None or kept[0] is not codes or len(kept[2]) != size:
            if kept is None and mask is not None and len(entry.totals) >= _MASKED_TOTALS_KEPT:
                for other in [k for k in entry.totals if k[1]]:
                    del entry.totals[other]
            array = entry.array
            kept = entry.totals[which] = (codes, mask, _per_code(
                codes, array if mask is None else np.where(mask, array, 0), size))
        return kept[2]

    def _match_new_groups(self, entry: SelectorCounts, selector: Selector, namespace: str) -> None:
        """Match the groups that appeared since the entry last looked; all their pods came
        since, so a following entry adds their counts (a caught-up one replays them)."""
        matches = selector.matches
        candidates = entry.candidates
        if entry.checked == len(candidates):
            return
        for g in candidates[entry.checked:]:
            if matches(self._group_labels[g]):
                entry.matched.add(g)
                if entry.following:
                    self._followers[g].append(entry)
                    for row, n in self._group_rows[g].items():
                        self._apply(entry, row, n)
        entry.checked = len(candidates)
        if entry.following and len(entry.matched) > _GROUPS_FOLLOWED:
            self._unfollow(entry)

    def _follow(self, entry: SelectorCounts) -> None:
        entry.following = True
        for g in entry.matched:
            self._followers[g].append(entry)

    def _unfollow(self, entry: SelectorCounts) -> None:
        """Catch up from the change log from now on (the entry is current)."""
        entry.following = False
        entry.position = self._log_base + len(self._log)
        for g in entry.matched:
            self._followers[g].remove(entry)

    def _build(self, key: tuple[str, str], selector: Selector, namespace: str, end: int) -> SelectorCounts:
        entry = SelectorCounts(np.zeros(self._size, dtype=np.int64), self._candidates(selector, namespace), end)
        self._match_new_groups(entry, selector, namespace)
        array = entry.array
        for g in entry.matched:
            for row, n in self._group_rows[g].items():
                array[row] += n
        if len(entry.matched) <= _GROUPS_FOLLOWED:
            self._follow(entry)
        self._entries[key] = entry
        if len(self._entries) > _SELECTORS_KEPT:
            _, oldest = self._entries.popitem(last=False)
            if oldest.following:
                self._unfollow(oldest)
        return entry

    def _candidates(self, selector: Selector, namespace: str) -> list[int]:
        """The groups of the namespace, or of one label the selector requires (a matchLabels
        pair or an In with one value): a superset of those it matches."""
        raw = json.loads(selector.signature)
        pairs = list(((raw or {}).get("matchLabels") or {}).items())
        pairs += [(e.get("key"), e["values"][0]) for e in (raw or {}).get("matchExpressions") or ()
                  if e.get("operator") == "In" and len(e.get("values") or ()) == 1]
        if not pairs:
            return self._by_namespace.setdefault(namespace, [])
        lists = [self._by_label.setdefault((namespace, str(k), str(v)), []) for k, v in pairs]
        return min(lists, key=len)

    def _sync(self, table: NodeTable) -> None:
        if table is self._table and table.version == self._version and len(table.nodes) == self._size:
            return  # no refresh since the last sync (PreScore, then Score)
        # Read from the table's own log of refreshed rows: a column of generations would add
        # a read to every refresh of every row.
        position, refreshed = table.refreshed_since(self._refresh_position)
        self._refresh_position = position
        rows: Iterable[int]
        if table is not self._table or len(table.nodes) != self._size:
            self._reset(table)
            rows = range(self._size)
        elif refreshed is None:  # the table forgot some: look at every row
            rows = range(self._size)
        else:
            rows = refreshed if len(refreshed) == 1 else sorted(set(refreshed))
        self._node_version = table.node_version
        self._version = table.version
        nodes = table.nodes
        generations = self._generations
        for row in rows:
            node = nodes[row]
            if node.generation != generations[row]:
                generations[row] = node.generation
                self._reindex(row, node)
        if len(self._log) > 4 * max(self._size, 16):
            drop = len(self._log) - 2 * max(self._size, 16)
            del self._log[:drop]
            self._log_base += drop

    def _reset(self, table: NodeTable) -> None:
        self._table = table
        self._size = len(table)
        self._generations = [-1] * self._size
        self._row_pods = [{} for _ in range(self._size)]
        self._pod_groups = [{} for _ in range(self._size)]
        self._group_ids = {}
        self._groups = []
        self._group_labels = []
        self._group_rows = []
        self._row_groups = [{} for _ in range(self._size)]
        self._log = []
        self._log_base = 0
        self._followers = []
        self._entries.clear()
        self._by_namespace = {}
        self._by_label = {}

    def _group_of(self, p: PodInfo) -> int:
        labels = p.labels
        key: GroupKey = (p.namespace, frozenset(labels.items()))
        g = self._group_ids.get(key)
        if g is None:
            g = self._group_ids[key] = len(self._groups)
            self._groups.append(key)
            self._group_labels.append(dict(labels))
            self._group_rows.append({})
            self._followers.append([])
            self._by_namespace.setdefault(p.namespace, []).append(g)
            for k, v in labels.items():
                self._by_label.setdefault((p.namespace, k, v), []).append(g)
        return g

    def _reindex(self, row: int, node: NodeInfo) -> None:
        """Count the pods that came to or went from the node since it was last read (a
        PodInfo is immutable: the same object is the same pod version)."""
        known = self._row_pods[row]
        pods = node.pods
        came = [(uid, p) for uid, p in pods.items() if known.get(uid) is not p]
        if len(pods) == len(known) + len(came) and len(came) <= 1:
            # None went (the common case: one pod bound there, or only the node changed).
            if came:
                uid, p = came[0]
                known[uid] = p
                if p.is_terminating:
                    self._pod_groups[row][uid] = -1
                    return
                g = self._pod_groups[row][uid] = self._group_of(p)
                counts = self._row_groups[row]
                counts[g] = self._group_rows[g][row] = counts.get(g, 0) + 1
                self._append(row, g, 1)
            return
        # Every pod not among `came` is a known one: when they are as many as the known, none went.
        gone = [] if len(pods) - len(came) == len(known) else [
            (uid, p) for uid, p in known.items() if pods.get(uid) is not p]
        groups = self._pod_groups[row]
        deltas: dict[int, int] = {}
        for uid, _ in gone:
            del known[uid]
            g = groups.pop(uid)
            if g >= 0:
                deltas[g] = deltas.get(g, 0) - 1
        for uid, p in came:
            known[uid] = p
            g = groups[uid] = -1 if p.is_terminating else self._group_of(p)
            if g >= 0:
                deltas[g] = deltas.get(g, 0) + 1
        counts = self._row_groups[row]
        for g, delta in deltas.items():
            if not delta:
                continue
            n = counts.get(g, 0) + delta
            if n:
                counts[g] = self._group_rows[g][row] = n
            else:
                del counts[g]
                del self._group_rows[g][row]
            self._append(row, g, delta)

    def _append(self, row: int, g: int, delta: int) -> None:
        self._log.append((row, g, delta))
        for entry in self._followers[g]:
            self._apply(entry, row, delta)
