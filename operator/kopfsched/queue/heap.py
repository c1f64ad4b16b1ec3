"""A binary heap indexed by key: O(log n) push, pop, update and delete of any item.

Upstream's `pkg/scheduler/backend/heap`: the queue needs to remove or re-order a pod
that sits in the middle of activeQ or backoffQ when the pod is updated or deleted,
which `heapq` cannot do without a linear scan.

Items the `less` function cannot order (neither is less than the other) come out in
the order they were pushed, so equal pods are first-in first-out and runs are
reproducible.

RankedHeap is the same queue for an order given as a rank (activeQ under PrioritySort): a
`heapq` whose deleted and updated entries are marked and skipped, ordered in C.
"""

from __future__ import annotations

import functools
import heapq
import itertools
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class Heap(Generic[T]):
    """A min-heap by `less`, each item found by `key(item)`."""

    __slots__ = ("_items", "_key", "_keys", "_less", "_pos", "_seq", "_seqs")

    def __init__(self, *, less: Callable[[T, T], bool], key: Callable[[T], str]) -> None:
        self._less = less
        self._key = key
        self._items: list[T] = []
        self._seqs: list[int] = []
        self._keys: list[str] = []
        """key(item) of each item, by position."""
        self._pos: dict[str, int] = {}
        self._seq = itertools.count()

    def __len__(self) -> int:
        return len(self._items)

    def __bool__(self) -> bool:
        return bool(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._pos

    def __iter__(self) -> Iterator[T]:
        """The items in no particular order."""
        return iter(list(self._items))

    def get(self, key: str) -> T | None:
        index = self._pos.get(key)
        return None if index is None else self._items[index]

    def peek(self) -> T | None:
        return self._items[0] if self._items else None

    def add_or_update(self, item: T) -> None:
        """Insert `item`, or replace the item with the same key and restore the order."""
        key = self._key(item)
        index = self._pos.get(key)
        if index is None:
            self._items.append(item)
            self._seqs.append(next(self._seq))
            self._keys.append(key)
            index = len(self._items) - 1
            self._pos[key] = index
            self._up(index)
            return
        self._items[index] = item
        self._fix(index)

    def pop(self) -> T | None:
        if not self._items:
            return None
        return self._remove_at(0)

    def delete(self, key: str) -> T | None:
        """Remove and return the item with `key`, or None when absent."""
        index = self._pos.get(key)
        return None if index is None else self._remove_at(index)

    def sorted(self) -> list[T]:
        """The items in pop order (a copy; for tests, dumps and status)."""
        def compare(i: int, j: int) -> int:
            return -1 if self._before(i, j) else (1 if self._before(j, i) else 0)

        order = sorted(range(len(self._items)), key=functools.cmp_to_key(compare))
        return [self._items[i] for i in order]

    def in_push_order(self) -> list[T]:
        """The items in the order they were first pushed (to move them to another heap)."""
        return [self._items[i] for i in sorted(range(len(self._items)), key=self._seqs.__getitem__)]

    def _remove_at(self, index: int) -> T:
        items, seqs, keys = self._items, self._seqs, self._keys
        item = items[index]
        last = len(items) - 1
        if index != last:
            self._swap(index, last)
        items.pop()
        seqs.pop()
        del self._pos[keys.pop()]
        if index < len(items):
            self._fix(index)
        return item

    def _before(self, i: int, j: int) -> bool:
        a, b = self._items[i], self._items[j]
        if self._less(a, b):
            return True
        return not self._less(b, a) and self._seqs[i] < self._seqs[j]

    def _swap(self, i: int, j: int) -> None:
        items, seqs, keys = self._items, self._seqs, self._keys
        items[i], items[j] = items[j], items[i]
        seqs[i], seqs[j] = seqs[j], seqs[i]
        keys[i], keys[j] = keys[j], keys[i]
        self._pos[keys[i]] = i
        self._pos[keys[j]] = j

    def _fix(self, index: int) -> None:
        if not self._up(index):
            self._down(index)

    # _up and _down move the item at `index` by the same comparisons and to the same place as
    # swapping it with a parent (child) at each step would, writing each passed item once.

    def _up(self, index: int) -> bool:
        items, seqs, keys, pos, less = self._items, self._seqs, self._keys, self._pos, self._less
        item, seq, key = items[index], seqs[index], keys[index]
        start = index
        while index > 0:
            parent = (index - 1) // 2
            other = items[parent]
            if not (less(item, other) or (not less(other, item) and seq < seqs[parent])):
                break
            items[index], seqs[index], keys[index] = other, seqs[parent], keys[parent]
            pos[keys[index]] = index
            index = parent
        if index == start:
            return False
        items[index], seqs[index], keys[index] = item, seq, key
        pos[key] = index
        return True

    def _down(self, index: int) -> None:
        items, seqs, keys, pos, less = self._items, self._seqs, self._keys, self._pos, self._less
        size = len(items)
        item, seq, key = items[index], seqs[index], keys[index]
        start = index
        while True:
            left = 2 * index + 1
            if left >= size:
                break
            # The smaller of the moving item and the children, compared as _before(child, smallest).
            best, best_item, best_seq = -1, item, seq
            other = items[left]
            if less(other, best_item) or (not less(best_item, other) and seqs[left] < best_seq):
                best, best_item, best_seq = left, other, seqs[left]
            right = left + 1
            if right < size:
                other = items[right]
                if less(other, best_item) or (not less(best_item, other) and seqs[right] < best_seq):
                    best, best_item, best_seq = right, other, seqs[right]
            if best < 0:
                break
            items[index], seqs[index], keys[index] = best_item, best_seq, keys[best]
            pos[keys[index]] = index
            index = best
        if index != start:
            items[index], seqs[index], keys[index] = item, seq, key
            pos[key] = index


_REMOVED: Any = object()


class RankedHeap(Generic[T]):
    """Heap's interface and pops for an order given as a rank: `less(a, b)` is exactly
    `rank(a) < rank(b)` (PrioritySort's is `(-priority, timestamp)`). Each item's rank is
    computed once, when it is added or updated, and `heapq` orders `[rank, push order,
    serial, key, item]` entries in C (the serial sets an update apart from the old entry it
    marks); a deleted or updated item's old entry stays in the list, marked, until popped or
    compacted. The order is total (ties go by push order, as in Heap), so the pops are
    Heap's; only the layout differs, and iteration is in no particular order. activeQ with
    8000 pods: Heap's Python sift-down cost some 20 us per pop, this one 2-3."""

    __slots__ = ("_entries", "_entry_of", "_key", "_rank", "_seq", "_serial")

    def __init__(self, *, rank: Callable[[T], Any], key: Callable[[T], str]) -> None:
        self._rank = rank
        self._key = key
        self._entries: list[list[Any]] = []
        self._entry_of: dict[str, list[Any]] = {}
        """key -> its live entry, in push order (an update keeps its place)."""
        self._seq = itertools.count()
        self._serial = itertools.count()

    def __len__(self) -> int:
        return len(self._entry_of)

    def __bool__(self) -> bool:
        return bool(self._entry_of)

    def __contains__(self, key: object) -> bool:
        return key in self._entry_of

    def __iter__(self) -> Iterator[T]:
        """The items in no particular order."""
        return iter([entry[4] for entry in self._entry_of.values()])

    def get(self, key: str) -> T | None:
        entry = self._entry_of.get(key)
        return None if entry is None else entry[4]

    def peek(self) -> T | None:
        entries = self._entries
        while entries and entries[0][4] is _REMOVED:
            heapq.heappop(entries)
        return entries[0][4] if entries else None

    def add_or_update(self, item: T) -> None:
        key = self._key(item)
        old = self._entry_of.get(key)
        if old is None:
            seq = next(self._seq)
        else:
            seq = old[1]
            old[4] = _REMOVED
        entry = [self._rank(item), seq, next(self._serial), key, item]
        self._entry_of[key] = entry
        heapq.heappush(self._entries, entry)
        if len(self._entries) > 2 * len(self._entry_of) + 64:
            self._entries = [e for e in self._entries if e[4] is not _REMOVED]
            heapq.heapify(self._entries)

    def pop(self) -> T | None:
        entries = self._entries
        while entries:
            entry = heapq.heappop(entries)
            item = entry[4]
            if item is not _REMOVED:
                del self._entry_of[entry[3]]
                return item
        return None

    def delete(self, key: str) -> T | None:
        entry = self._entry_of.pop(key, None)
        if entry is None:
            return None
        item = entry[4]
        entry[4] = _REMOVED
        return item

    def sorted(self) -> list[T]:
        """The items in pop order (a copy)."""
        return [entry[4] for entry in sorted(self._entry_of.values(), key=lambda e: (e[0], e[1]))]

    def in_push_order(self) -> list[T]:
        return [entry[4] for entry in sorted(self._entry_of.values(), key=lambda e: e[1])]
