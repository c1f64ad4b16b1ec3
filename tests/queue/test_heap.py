"""The indexed heap: order, FIFO among equals, update and delete in the middle."""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass

import pytest

from kopfsched.queue.heap import Heap, RankedHeap
from tests.waiting import drain


@dataclass
class Item:
    key: str
    value: int


def make_heap() -> Heap[Item]:
    return Heap(less=lambda a, b: a.value < b.value, key=lambda i: i.key)


def keys(heap: Heap[Item]) -> list[str]:
    """Pop until empty: the keys in pop order."""
    return [item.key for item in drain(heap.pop)]


def test_pops_in_order_and_equals_first_in_first_out() -> None:
    heap = make_heap()
    for key, value in [("c", 3), ("a1", 1), ("b", 2), ("a2", 1), ("a3", 1)]:
        heap.add_or_update(Item(key, value))
    assert [i.key for i in heap.sorted()] == ["a1", "a2", "a3", "b", "c"]
    assert keys(heap) == ["a1", "a2", "a3", "b", "c"]
    assert heap.pop() is None and heap.peek() is None


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        pytest.param("c", 0, ["c", "a", "b", "d"], id="raised-to-head"),
        pytest.param("a", 9, ["b", "c", "d", "a"], id="sunk-to-tail"),
        pytest.param("b", 2, ["a", "b", "c", "d"], id="unchanged"),
    ],
)
def test_update_reorders(key: str, value: int, expected: list[str]) -> None:
    heap = make_heap()
    for k, v in [("a", 1), ("b", 2), ("c", 3), ("d", 4)]:
        heap.add_or_update(Item(k, v))
    heap.add_or_update(Item(key, value))
    assert len(heap) == 4
    assert keys(heap) == expected


def test_delete_anywhere() -> None:
    heap = make_heap()
    for k, v in [("a", 1), ("b", 2), ("c", 3), ("d", 4), ("e", 5)]:
        heap.add_or_update(Item(k, v))
    assert heap.delete("c") == Item("c", 3)
    assert heap.delete("c") is None
    assert "c" not in heap and "d" in heap
    assert heap.get("d") == Item("d", 4)
    assert keys(heap) == ["a", "b", "d", "e"]


def test_random_operations_match_a_sorted_reference() -> None:
    rng = random.Random(7)
    heap = make_heap()
    reference: dict[str, int] = {}
    for step in range(3000):
        key = f"k{rng.randrange(60)}"
        action = rng.random()
        if action < 0.5:
            value = rng.randrange(20)
            heap.add_or_update(Item(key, value))
            reference[key] = value
        elif action < 0.75:
            assert (heap.delete(key) is not None) == (reference.pop(key, None) is not None)
        else:
            item = heap.pop()
            if not reference:
                assert item is None
                continue
            assert item is not None and item.value == min(reference.values()), step
            del reference[item.key]
        assert len(heap) == len(reference)


class _SwappingHeap:
    """The textbook heap that swaps an item with its parent or child at each step: Heap must
    lay its items out exactly as this does (the order pods are listed in follows it)."""

    def __init__(self, less):
        self.less, self.items, self.seqs, self.next_seq = less, [], [], 0

    def before(self, i, j):
        a, b = self.items[i], self.items[j]
        return self.less(a, b) or (not self.less(b, a) and self.seqs[i] < self.seqs[j])

    def swap(self, i, j):
        self.items[i], self.items[j] = self.items[j], self.items[i]
        self.seqs[i], self.seqs[j] = self.seqs[j], self.seqs[i]

    def up(self, i):
        moved = False
        while i > 0 and self.before(i, (i - 1) // 2):
            self.swap(i, (i - 1) // 2)
            i, moved = (i - 1) // 2, True
        return moved

    def down(self, i):
        while True:
            smallest = i
            for child in (2 * i + 1, 2 * i + 2):
                if child < len(self.items) and self.before(child, smallest):
                    smallest = child
            if smallest == i:
                return
            self.swap(i, smallest)
            i = smallest

    def add_or_update(self, item):
        index = next((i for i, x in enumerate(self.items) if x[0] == item[0]), None)
        if index is None:
            self.items.append(item)
            self.seqs.append(self.next_seq)
            self.next_seq += 1
            self.up(len(self.items) - 1)
        else:
            self.items[index] = item
            if not self.up(index):
                self.down(index)

    def remove(self, key):
        index = next((i for i, x in enumerate(self.items) if x[0] == key), None)
        if index is None:
            return None
        item, last = self.items[index], len(self.items) - 1
        if index != last:
            self.swap(index, last)
        self.items.pop()
        self.seqs.pop()
        if index < len(self.items) and not self.up(index):
            self.down(index)
        return item


def test_layout_is_the_swapping_heaps():
    for seed in range(60):
        rng = random.Random(seed)
        heap = Heap(less=lambda a, b: a[1] < b[1], key=lambda x: x[0])
        reference = _SwappingHeap(lambda a, b: a[1] < b[1])
        keys = [f"k{i}" for i in range(rng.randint(1, 30))]
        for _ in range(200):
            roll = rng.random()
            if roll < 0.5:
                item = (rng.choice(keys), rng.randint(0, 4))
                heap.add_or_update(item)
                reference.add_or_update(item)
            elif roll < 0.8:
                top = reference.items[0][0] if reference.items else None
                assert heap.pop() == (reference.remove(top) if top is not None else None)
            else:
                key = rng.choice(keys)
                assert heap.delete(key) == reference.remove(key)
            assert list(heap) == reference.items
            assert all(heap.get(item[0]) == item for item in reference.items)


def test_ranked_heap_pops_as_heap_does():
    """With a rank, the same pops as Heap by the equivalent less: FIFO among equals, updates
    keeping their place among them, deletes anywhere."""
    for seed in range(40):
        rng = random.Random(seed)
        plain = Heap(less=lambda a, b: a[1] > b[1] or (a[1] == b[1] and a[2] < b[2]), key=lambda x: x[0])
        ranked = RankedHeap(rank=lambda x: (-x[1], x[2]), key=lambda x: x[0])
        keys = [f"k{i}" for i in range(rng.randint(1, 30))]
        popped = []
        for _ in range(400):
            roll = rng.random()
            if roll < 0.5:
                item = (rng.choice(keys), rng.randint(0, 3), rng.randint(0, 2))  # many ties
                plain.add_or_update(item)
                ranked.add_or_update(item)
            elif roll < 0.75:
                item = plain.pop()
                assert ranked.pop() == item
                if item is not None:
                    popped.append(item)
            elif roll < 0.8:
                assert ranked.peek() == plain.peek()
            else:
                key = rng.choice(keys)
                assert ranked.delete(key) == plain.delete(key)
            assert len(ranked) == len(plain) and sorted(ranked) == sorted(plain)
            assert all(ranked.get(item[0]) == item and item[0] in ranked for item in plain)
        assert ranked.sorted() == plain.sorted()
        assert ranked.in_push_order() == plain.in_push_order()
        assert any(a[1:] == b[1:] for a, b in itertools.pairwise(popped))  # ties were popped


def test_ranked_heap_compacts_what_updates_leave_behind():
    heap = RankedHeap(rank=lambda i: i.value, key=lambda i: i.key)
    for step in range(1000):
        heap.add_or_update(Item(f"k{step % 10}", -step))
    assert len(heap) == 10 and len(heap._entries) <= 2 * 10 + 64
    assert keys(heap) == [f"k{i}" for i in range(9, -1, -1)]
