"""The strategies' shorter path for nodes that offer every resource gives exactly the
numbers of their general path (and of the per-node arithmetic)."""

from __future__ import annotations

import numpy as np
import pytest

from kopfsched.plugins.noderesources.resource_allocation import (
    Balanced,
    LeastAllocated,
    MostAllocated,
    RequestedToCapacityRatio,
    ShapePoint,
    Strategy,
    _balanced_two_some,
    _least_allocated_some,
)

STRATEGIES = {
    "least allocated": LeastAllocated([1, 1]),
    "least allocated, weighted": LeastAllocated([3, 7, 2]),
    "most allocated": MostAllocated([1, 1]),
    "most allocated, weighted": MostAllocated([5, 1, 1]),
    "balanced, one resource": Balanced(),
    "balanced, two resources": Balanced(),
    "balanced, four resources": Balanced(),
    "requested to capacity ratio": RequestedToCapacityRatio([1, 2], [ShapePoint(0, 10), ShapePoint(50, 3),
                                                                     ShapePoint(100, 0)]),
}
RESOURCES = {"balanced, one resource": 1, "balanced, four resources": 4}


def columns(rng: np.random.Generator, resources: int, rows: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Allocatable > 0 from 1 to about 10^12; requested from nothing to well past it."""
    allocatable = [rng.integers(1, 10 ** int(rng.integers(1, 13)), rows) for _ in range(resources)]
    requested = [np.maximum(0, (a * rng.uniform(0, 1.6, rows)).astype(np.int64) + rng.integers(-2, 3, rows))
                 for a in allocatable]
    return requested, allocatable


@pytest.mark.parametrize("name, strategy", STRATEGIES.items(), ids=STRATEGIES.keys())
def test_offered_path_is_the_general_path(name: str, strategy: Strategy):
    rng = np.random.default_rng(12)
    resources = RESOURCES.get(name, len(getattr(strategy, "weights", [1, 1])))
    for _ in range(200):
        requested, allocatable = columns(rng, resources, int(rng.integers(1, 400)))
        general = strategy.score_array([r.copy() for r in requested], [a.copy() for a in allocatable])
        offered = strategy.score_array_offered([r.copy() for r in requested], [a.copy() for a in allocatable])
        assert offered.dtype == np.int64
        assert offered.tolist() == general.tolist()
        per_node = [strategy.score([int(r[i]) for r in requested], [int(a[i]) for a in allocatable])
                    for i in range(min(20, len(general)))]
        assert general[:20].tolist() == per_node


def test_exact_boundaries():
    """Requested equal to allocatable, one over, nothing; fractions that tie at .5 of a point."""
    requested = [np.array([4000, 4001, 0, 2000, 1], dtype=np.int64),
                 np.array([8, 9, 0, 2, 3], dtype=np.int64)]
    allocatable = [np.array([4000, 4000, 4000, 4000, 3], dtype=np.int64),
                   np.array([8, 8, 8, 8, 6], dtype=np.int64)]
    for strategy in (LeastAllocated([1, 1]), MostAllocated([1, 1]), Balanced()):
        assert (strategy.score_array_offered(requested, allocatable).tolist()
                == strategy.score_array(requested, allocatable).tolist())
    assert LeastAllocated([1, 1]).score_array_offered(requested, allocatable).tolist() == [0, 0, 100, 62, 58]


def test_balanced_two_resources_placed_is_the_general_arithmetic():
    """Balanced.score_placed's path for two offered resources gives score()'s numbers, and the
    placed arrays' (the pod's share taken off for the balance without it)."""
    rng = np.random.default_rng(5)
    strategy = Balanced()
    for _ in range(100):
        requested, allocatable = columns(rng, 2, 50)
        pod = [int(rng.integers(0, 10 ** int(rng.integers(1, 12)))) for _ in range(2)]
        requested = [r + own for r, own in zip(requested, pod, strict=True)]
        arrays = strategy.score_array_offered_placed([r.copy() for r in requested], allocatable, pod)
        for i in range(50):
            req, alloc = [int(r[i]) for r in requested], [int(a[i]) for a in allocatable]
            general = 50 + (50 + strategy.score(req, alloc)
                            - strategy.score([r - own for r, own in zip(req, pod, strict=True)], alloc)) // 2
            assert strategy.score_placed(req, alloc, pod) == general == arrays[i]


@pytest.mark.parametrize("weights", [[1, 1], [3, 7], [0, 2], [2, 3, 5]])
def test_few_rows_paths_are_the_strategies_arithmetic(weights: list[int]):
    """compute_some's written-out loops (Balanced of two resources, LeastAllocated) give the
    strategies' per-node numbers, nodes that do not offer a resource included."""
    rng = np.random.default_rng(len(weights) * 10 + weights[0])
    least, balanced = LeastAllocated(weights), Balanced()
    for _ in range(100):
        requested, allocatable = columns(rng, len(weights), 40)
        for alloc in allocatable:
            alloc[rng.random(40) < 0.15] = 0
        pod = [int(rng.integers(0, 10 ** int(rng.integers(1, 12)))) for _ in weights]
        arrays = list(zip(allocatable, requested, pod, strict=True))
        rows = [int(row) for row in rng.integers(0, 40, int(rng.integers(1, 30)))]

        assert _least_allocated_some(arrays, weights, rows) == [
            least.score(*_placed(requested, allocatable, pod, row)) for row in rows]
        if len(weights) == 2:
            assert _balanced_two_some(balanced, arrays, rows) == [
                balanced.score_placed(*_placed(requested, allocatable, pod, row), pod) for row in rows]


def _placed(requested: list[np.ndarray], allocatable: list[np.ndarray], pod: list[int],
            row: int) -> tuple[list[int], list[int]]:
    """One row's (requested with the pod, allocatable), a resource not offered left out as the scorer does."""
    alloc = [int(a[row]) for a in allocatable]
    return [int(r[row]) + own if a else 0 for r, own, a in zip(requested, pod, alloc, strict=True)], alloc


@pytest.mark.parametrize("resources", [1, 2, 3, 4])
def test_balanced_offered_placed_is_the_per_node_arithmetic(resources: int):
    """score_array_offered_placed (both balances in one pass) gives score_placed's numbers."""
    rng = np.random.default_rng(30 + resources)
    strategy = Balanced()
    for _ in range(100):
        requested, allocatable = columns(rng, resources, int(rng.integers(1, 60)))
        pod = [int(rng.integers(0, 10 ** int(rng.integers(1, 12)))) for _ in range(resources)]
        requested = [r + own for r, own in zip(requested, pod, strict=True)]
        got = strategy.score_array_offered_placed([r.copy() for r in requested], allocatable, pod)
        assert got.tolist() == [strategy.score_placed([int(r[i]) for r in requested], [int(a[i]) for a in allocatable],
                                                      pod) for i in range(len(got))]
