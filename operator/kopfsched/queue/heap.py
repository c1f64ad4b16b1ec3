"""A binary heap indexed by key: O(log n) push, pop, update and delete of any item.

Upstream's `pkg/scheduler/backend/heap`: the queue needs to remove or re-order a pod
that sits in the middle of activeQ or backoffQ when the pod is updated or deleted,
which `heapq` cannot do without a linear scan.

Items the `less` function cannot order (neither is less than the other) come out in
the order they were pushed, so equal pods are first-in first-out and runs are
reproducible.

With a `rank` (a function such that `less(a, b)` is exactly `rank(a) < rank(b)`, e.g.
PrioritySort's `(-priority, timestamp)`), each item's rank is computed once, when it is
added or updated, and the heap compares `(rank, push order)` tuples in C instead of calling
`less` in Python: the same order, hence the same pops (the order is total: ties go by push
order), for a fraction of the cost (activeQ compares some 27 times per pop at 8000 pods).
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class Heap(Generic[T]):
    """A min-heap by `less`, each item found by `key(item)`."""

    __slots__ = ("_items", "_key", "_keys", "_less", "_pos", "_rank", "_seq", "_seqs")

    def __init__(self, *, less: Callable[[T, T], bool], key: Callable[[T], str],
                 rank: Callable[[T], Any] | None = None) -> None:
        self._less = less
        self._rank = rank
        self._key = key
        self._items: list[T] = []
        self._seqs: list[Any] = []
        """Each item's push order, by position; with a rank, (rank, push order)."""
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
            self._push(item, key, next(self._seq))
            return
        self._items[index] = item
        rank = self._rank
        if rank is not None:
            self._seqs[index] = (rank(item), self._seqs[index][1])
        self._fix(index)

    def _push(self, item: T, key: str, seq: int) -> None:
        self._items.append(item)
        self._seqs.append(seq if self._rank is None else (self._rank(item), seq))
        self._keys.append(key)
        index = len(self._items) - 1
        self._pos[key] = index
        self._up(index)

    def set_rank(self, less: Callable[[T, T], bool], rank: Callable[[T], Any] | None) -> None:
        """Order by `less` (and `rank`, see the module) from now on: the items are ranked again
        and the heap rebuilt, each keeping its push order."""
        self._less, self._rank = less, rank
        entries = sorted(zip(self._seqs, self._items, self._keys, strict=True), key=lambda e: _push_order(e[0]))
        self._items, self._seqs, self._keys, self._pos = [], [], [], {}
        for seq, item, key in entries:
            self._push(item, key, _push_order(seq))

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
        if self._rank is not None:
            return bool(self._seqs[i] < self._seqs[j])
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
        ranked = self._rank is not None
        while index > 0:
            parent = (index - 1) // 2
            other = items[parent]
            if ranked:
                if not seq < seqs[parent]:
                    break
            elif not (less(item, other) or (not less(other, item) and seq < seqs[parent])):
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
        if self._rank is not None:
            self._down_ranked(index)
            return
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

    def _down_ranked(self, index: int) -> None:
        """_down comparing the (rank, push order) tuples."""
        items, seqs, keys, pos = self._items, self._seqs, self._keys, self._pos
        size = len(items)
        item, seq, key = items[index], seqs[index], keys[index]
        start = index
        while True:
            left = 2 * index + 1
            if left >= size:
                break
            best, best_seq = -1, seq
            if seqs[left] < best_seq:
                best, best_seq = left, seqs[left]
            right = left + 1
            if right < size and seqs[right] < best_seq:
                best, best_seq = right, seqs[right]
            if best < 0:
                break
            items[index], seqs[index], keys[index] = items[best], best_seq, keys[best]
            pos[keys[index]] = index
            index = best
        if index != start:
            items[index], seqs[index], keys[index] = item, seq, key
            pos[key] = index


def _push_order(seq: Any) -> int:
    """The push order in a `_seqs` entry, ranked or not."""
    return seq[1] if isinstance(seq, tuple) else seq
