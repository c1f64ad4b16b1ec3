"""The indexed heap: order, FIFO among equals, update and delete in the middle."""

from __future__ import annotations

import random
from dataclasses import dataclass

import pytest

from kopfsched.queue.heap import Heap


@dataclass
class Item:
    key: str
    value: int


def make_heap() -> Heap[Item]:
    return Heap(less=lambda a, b: a.value < b.value, key=lambda i: i.key)


def drain(heap: Heap[Item]) -> list[str]:
    out = []
    while (item := heap.pop()) is not None:
        out.append(item.key)
    return out


def test_pops_in_order_and_equals_first_in_first_out() -> None:
    heap = make_heap()
    for key, value in [("c", 3), ("a1", 1), ("b", 2), ("a2", 1), ("a3", 1)]:
        heap.add_or_update(Item(key, value))
    assert [i.key for i in heap.sorted()] == ["a1", "a2", "a3", "b", "c"]
    assert drain(heap) == ["a1", "a2", "a3", "b", "c"]
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
    assert drain(heap) == expected


def test_delete_anywhere() -> None:
    heap = make_heap()
    for k, v in [("a", 1), ("b", 2), ("c", 3), ("d", 4), ("e", 5)]:
        heap.add_or_update(Item(k, v))
    assert heap.delete("c") == Item("c", 3)
    assert heap.delete("c") is None
    assert "c" not in heap and "d" in heap
    assert heap.get("d") == Item("d", 4)
    assert drain(heap) == ["a", "b", "d", "e"]


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
