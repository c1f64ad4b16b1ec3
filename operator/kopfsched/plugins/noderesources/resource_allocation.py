"""Resource-allocation scoring shared by NodeResourcesFit and NodeResourcesBalancedAllocation.

As upstream's resource_allocation.go: for each configured resource, a node offers an
allocatable amount and, with the pod, would have a requested amount; a strategy turns
those pairs into one 0..100 score. Every strategy exists twice, with the same arithmetic:
on Python ints for one node (preemption's dry runs) and on numpy int64/float64 columns for
many nodes at once (the NodeTable). Go's int64 division truncates toward zero and
`math.Round` rounds half away from zero; both are reproduced exactly.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Any, cast

import numpy as np

from kopfsched.framework import MAX_NODE_SCORE, ColumnSpec, NodeInfo, NodeTable, PodInfo
from kopfsched.framework.node_table import one_per_pod
from kopfsched.framework.resources import (
    CPU,
    EPHEMERAL_STORAGE,
    MEMORY,
    PODS,
    Resource,
    container_non_zero_requests,
)
from kopfsched.plugins.noderesources.args import MAX_CUSTOM_PRIORITY_SCORE, qualified_name_errors

MAX_UTILIZATION = 100


# --- resource names, as upstream's v1helper / schedutil ----------------------------------

def is_native_resource(name: str) -> bool:
    return "/" not in name or "kubernetes.io/" in name


@functools.cache
def is_extended_resource_name(name: str) -> bool:
    """Not native, not `requests.`-prefixed, and a valid qualified name once prefixed (as quota does)."""
    if is_native_resource(name) or name.startswith("requests."):
        return False
    return not qualified_name_errors("requests." + name)


@functools.cache
def is_scalar_resource_name(name: str) -> bool:
    """Resources a NodeInfo counts in its scalar map (extended, hugepages, prefixed native, volumes)."""
    return (
        is_extended_resource_name(name)
        or name.startswith("hugepages-")
        or "kubernetes.io/" in name
        or name.startswith("attachable-volumes-")
    )


# --- NodeTable columns -------------------------------------------------------------------

def _int_column(name: str, extract: Callable[[NodeInfo], int], *,
                per_pod: Callable[[PodInfo], int] | None = None) -> ColumnSpec:
    """A column of NodeResourcesFit: node-static (allocatable) unless it sums the pods' `per_pod`."""
    return ColumnSpec(f"NodeResourcesFit/{name}", extract, np.int64, node_static=per_pod is None, per_pod=per_pod)


ALLOCATABLE_CPU = _int_column("allocatable.cpu", lambda n: n.allocatable.milli_cpu)
ALLOCATABLE_MEMORY = _int_column("allocatable.memory", lambda n: n.allocatable.memory)
ALLOCATABLE_EPHEMERAL_STORAGE = _int_column("allocatable.ephemeral-storage", lambda n: n.allocatable.ephemeral_storage)
ALLOCATABLE_PODS = _int_column("allocatable.pods", lambda n: n.allocatable.allowed_pod_number)
REQUESTED_CPU = _int_column("requested.cpu", lambda n: n.requested.milli_cpu,
                            per_pod=attrgetter("requests.milli_cpu"))
REQUESTED_MEMORY = _int_column("requested.memory", lambda n: n.requested.memory,
                               per_pod=attrgetter("requests.memory"))
REQUESTED_EPHEMERAL_STORAGE = _int_column("requested.ephemeral-storage", lambda n: n.requested.ephemeral_storage,
                                          per_pod=attrgetter("requests.ephemeral_storage"))
NON_ZERO_REQUESTED_CPU = _int_column("nonZeroRequested.cpu", lambda n: n.non_zero_requested.milli_cpu,
                                     per_pod=attrgetter("non_zero_cpu"))
NON_ZERO_REQUESTED_MEMORY = _int_column("nonZeroRequested.memory", lambda n: n.non_zero_requested.memory,
                                        per_pod=attrgetter("non_zero_memory"))
POD_COUNT = _int_column("pods", lambda n: len(n.pods), per_pod=one_per_pod)

_SCALAR_COLUMNS: dict[str, tuple[ColumnSpec, ColumnSpec]] = {}


def scalar_columns(name: str) -> tuple[ColumnSpec, ColumnSpec]:
    """(allocatable, requested) columns of a scalar resource, one pair per name for the process."""
    pair = _SCALAR_COLUMNS.get(name)
    if pair is None:
        pair = _SCALAR_COLUMNS[name] = (
            _int_column(f"allocatable.{name}", lambda n: n.allocatable.scalar.get(name, 0)),
            _int_column(f"requested.{name}", lambda n: n.requested.scalar.get(name, 0),
                        per_pod=lambda p: p.requests.scalar.get(name, 0)),
        )
    return pair


# --- Go integer arithmetic ---------------------------------------------------------------

def go_div(a: int, b: int) -> int:
    """int64 division truncating toward zero."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def go_div_array(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise go_div; `b` must be non-zero wherever the result is used."""
    safe = np.where(b == 0, 1, b)
    q = np.floor_divide(a, safe)
    q += (np.remainder(a, safe) != 0) & ((a < 0) != (safe < 0))
    return q


def go_round(x: float) -> int:
    """math.Round for the non-negative values scoring produces: half away from zero."""
    r = math.trunc(x)
    return r + 1 if x - r >= 0.5 else r


# --- strategies --------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class ShapePoint:
    utilization: int
    score: int


class Strategy:
    """Scores (requested, allocatable) per resource, in the configured order."""

    def score(self, requested: Sequence[int], allocatable: Sequence[int]) -> int:
        raise NotImplementedError

    def score_array(self, requested: list[np.ndarray], allocatable: list[np.ndarray]) -> np.ndarray:
        raise NotImplementedError

    def score_array_offered(self, requested: list[np.ndarray], allocatable: list[np.ndarray]) -> np.ndarray:
        """`score_array` when every node offers every resource (all allocatable > 0): the
        same numbers, with fewer numpy steps where a strategy knows a shorter way."""
        return self.score_array(requested, allocatable)

    # The scorer calls these, with the pod's own requests (already counted in `requested`):
    # a strategy that compares the node before and after the pod (Balanced) overrides them.

    def score_placed(self, requested: Sequence[int], allocatable: Sequence[int], pod: Sequence[int]) -> int:
        return self.score(requested, allocatable)

    def score_array_placed(self, requested: list[np.ndarray], allocatable: list[np.ndarray],
                           pod: Sequence[int]) -> np.ndarray:
        return self.score_array(requested, allocatable)

    def score_array_offered_placed(self, requested: list[np.ndarray], allocatable: list[np.ndarray],
                                   pod: Sequence[int]) -> np.ndarray:
        return self.score_array_offered(requested, allocatable)


class _WeightedStrategy(Strategy):
    """Least/MostAllocated: Σ score(resource)·weight / Σ weight over resources the node has."""

    def __init__(self, weights: Sequence[int]) -> None:
        self.weights = list(weights)

    @staticmethod
    def resource_score(requested: int, capacity: int) -> int:
        raise NotImplementedError

    @staticmethod
    def resource_score_array(requested: np.ndarray, capacity: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def score(self, requested: Sequence[int], allocatable: Sequence[int]) -> int:
        node_score = weight_sum = 0
        for req, alloc, weight in zip(requested, allocatable, self.weights, strict=True):
            if alloc == 0:
                continue
            node_score += self.resource_score(req, alloc) * weight
            weight_sum += weight
        return go_div(node_score, weight_sum) if weight_sum else 0

    def score_array(self, requested: list[np.ndarray], allocatable: list[np.ndarray]) -> np.ndarray:
        n = len(requested[0]) if requested else 0
        node_score = np.zeros(n, dtype=np.int64)
        weight_sum = np.zeros(n, dtype=np.int64)
        for req, alloc, weight in zip(requested, allocatable, self.weights, strict=True):
            present = alloc != 0
            node_score += np.where(present, self.resource_score_array(req, alloc), 0) * weight
            weight_sum += present * weight
        return np.where(weight_sum == 0, 0, go_div_array(node_score, weight_sum))

    def score_array_offered(self, requested: list[np.ndarray], allocatable: list[np.ndarray]) -> np.ndarray:
        # Every resource present: the weight sum is the same for all nodes, and every
        # numerator and denominator is non-negative, so Go's division is numpy's floor.
        weight_sum = sum(self.weights)
        if weight_sum <= 0 or min(self.weights, default=0) < 0:
            return self.score_array(requested, allocatable)
        node_score: np.ndarray | None = None
        for req, alloc, weight in zip(requested, allocatable, self.weights, strict=True):
            score = self.offered_score_array(req, alloc)
            if weight != 1:
                score *= weight
            node_score = score if node_score is None else node_score + score
        if node_score is None:
            return np.zeros(0, dtype=np.int64)
        node_score //= weight_sum
        return node_score

    @staticmethod
    def offered_score_array(requested: np.ndarray, capacity: np.ndarray) -> np.ndarray:
        """resource_score_array where every capacity is > 0 (a fresh array)."""
        raise NotImplementedError


class LeastAllocated(_WeightedStrategy):
    """Favours nodes with more unused capacity: (capacity - requested)·100 / capacity."""

    @staticmethod
    def resource_score(requested: int, capacity: int) -> int:
        if capacity == 0 or requested > capacity:
            return 0
        return go_div((capacity - requested) * MAX_NODE_SCORE, capacity)

    @staticmethod
    def resource_score_array(requested: np.ndarray, capacity: np.ndarray) -> np.ndarray:
        score = go_div_array((capacity - requested) * MAX_NODE_SCORE, capacity)
        return np.where((capacity == 0) | (requested > capacity), 0, score)

    @staticmethod
    def offered_score_array(requested: np.ndarray, capacity: np.ndarray) -> np.ndarray:
        score = capacity - requested
        np.maximum(score, 0, out=score)  # requested over capacity scores 0, as (0 * 100) // capacity
        score *= MAX_NODE_SCORE
        score //= capacity  # Go's division: the numerator is >= 0, capacity > 0
        return score


class MostAllocated(_WeightedStrategy):
    """Favours fuller nodes: min(requested, capacity)·100 / capacity."""

    @staticmethod
    def resource_score(requested: int, capacity: int) -> int:
        if capacity == 0:
            return 0
        # Requested may exceed capacity: pods without requests count with the non-zero defaults.
        return go_div(min(requested, capacity) * MAX_NODE_SCORE, capacity)

    @staticmethod
    def resource_score_array(requested: np.ndarray, capacity: np.ndarray) -> np.ndarray:
        score = go_div_array(np.minimum(requested, capacity) * MAX_NODE_SCORE, capacity)
        return np.where(capacity == 0, 0, score)

    @staticmethod
    def offered_score_array(requested: np.ndarray, capacity: np.ndarray) -> np.ndarray:
        # Requested is never negative (sums of parsed requests), so neither is the numerator.
        if len(requested) and requested.min() < 0:
            return MostAllocated.resource_score_array(requested, capacity)
        score = np.minimum(requested, capacity)
        score *= MAX_NODE_SCORE
        score //= capacity
        return score


class RequestedToCapacityRatio(Strategy):
    """A user-drawn broken-line function of utilization, averaged with weights (rounded)."""

    def __init__(self, weights: Sequence[int], shape: Sequence[ShapePoint]) -> None:
        self.weights = list(weights)
        scale = MAX_NODE_SCORE // MAX_CUSTOM_PRIORITY_SCORE
        self.utilizations = [p.utilization for p in shape]
        self.scores = [p.score * scale for p in shape]

    def _raw(self, p: int) -> int:
        us, ss = self.utilizations, self.scores
        for i, u in enumerate(us):
            if p <= u:
                if i == 0:
                    return ss[0]
                return ss[i - 1] + go_div((ss[i] - ss[i - 1]) * (p - us[i - 1]), us[i] - us[i - 1])
        return ss[-1]

    def _raw_array(self, p: np.ndarray) -> np.ndarray:
        us, ss = self.utilizations, self.scores
        out = np.full(p.shape, ss[-1], dtype=np.int64)
        done = np.zeros(p.shape, dtype=bool)
        for i, u in enumerate(us):
            hit = (p <= u) & ~done
            if i == 0:
                value = np.full(p.shape, ss[0], dtype=np.int64)
            else:
                value = ss[i - 1] + go_div_array((ss[i] - ss[i - 1]) * (p - us[i - 1]),
                                                 np.full(p.shape, us[i] - us[i - 1], dtype=np.int64))
            out = np.where(hit, value, out)
            done |= hit
        return out

    def _resource_score(self, requested: int, capacity: int) -> int:
        if capacity == 0 or requested > capacity:
            return self._raw(MAX_UTILIZATION)
        return self._raw(go_div(requested * MAX_UTILIZATION, capacity))

    def score(self, requested: Sequence[int], allocatable: Sequence[int]) -> int:
        node_score = weight_sum = 0
        for req, alloc, weight in zip(requested, allocatable, self.weights, strict=True):
            if alloc == 0:
                continue
            resource_score = self._resource_score(req, alloc)
            if resource_score > 0:
                node_score += resource_score * weight
                weight_sum += weight
        return go_round(float(node_score) / float(weight_sum)) if weight_sum else 0

    def score_array(self, requested: list[np.ndarray], allocatable: list[np.ndarray]) -> np.ndarray:
        n = len(requested[0]) if requested else 0
        node_score = np.zeros(n, dtype=np.int64)
        weight_sum = np.zeros(n, dtype=np.int64)
        for req, alloc, weight in zip(requested, allocatable, self.weights, strict=True):
            over = (alloc == 0) | (req > alloc)
            utilization = np.where(over, MAX_UTILIZATION, go_div_array(req * MAX_UTILIZATION, alloc))
            resource_score = self._raw_array(utilization)
            counted = (alloc != 0) & (resource_score > 0)
            node_score += np.where(counted, resource_score, 0) * weight
            weight_sum += counted * weight
        ratio = node_score.astype(np.float64) / np.where(weight_sum == 0, 1, weight_sum).astype(np.float64)
        rounded = np.trunc(ratio)
        rounded += (ratio - rounded) >= 0.5
        return np.where(weight_sum == 0, 0, rounded.astype(np.int64))


class Balanced(Strategy):
    """NodeResourcesBalancedAllocation (v1.37's balancedResourceScorer): how much the pod
    improves the node's balance. Each balance is (1 - std of the requested fractions)·100, in
    [50, 100]; the score is 50 + (50 + with the pod - without it) / 2, so about 75 when the
    pod changes little, towards 100 when it evens the node out, towards 50 when it tilts it.
    `score` and the arrays are one balance; the `*_placed` methods combine two."""

    def score_placed(self, requested: Sequence[int], allocatable: Sequence[int], pod: Sequence[int]) -> int:
        if len(requested) == 2 and allocatable[0] and allocatable[1]:  # the default: cpu and memory, offered
            r0, r1 = requested
            a0, a1 = float(allocatable[0]), float(allocatable[1])
            return _improvement(_balance_of_two(float(r0) / a0, float(r1) / a1),
                                _balance_of_two(float(r0 - pod[0]) / a0, float(r1 - pod[1]) / a1))
        allocated = [req - own if alloc else 0 for req, alloc, own in zip(requested, allocatable, pod, strict=True)]
        return _improvement(self.score(requested, allocatable), self.score(allocated, allocatable))

    def score_array_placed(self, requested: list[np.ndarray], allocatable: list[np.ndarray],
                           pod: Sequence[int]) -> np.ndarray:
        allocated = [np.where(alloc != 0, req - own, 0) for req, alloc, own in zip(requested, allocatable, pod,
                                                                                   strict=True)]
        return _improvement(self.score_array(requested, allocatable), self.score_array(allocated, allocatable))

    def score_array_offered_placed(self, requested: list[np.ndarray], allocatable: list[np.ndarray],
                                   pod: Sequence[int]) -> np.ndarray:
        # Both balances in one pass over arrays twice as long (elementwise: the same numbers),
        # half the numpy calls of two passes.
        n = len(requested[0]) if requested else 0
        both = self.score_array_offered(
            [np.concatenate((req, req - own)) for req, own in zip(requested, pod, strict=True)],
            [np.concatenate((alloc, alloc)) for alloc in allocatable])
        return _improvement(both[:n], both[n:])

    def score(self, requested: Sequence[int], allocatable: Sequence[int]) -> int:
        fractions: list[float] = []
        total = 0.0
        for req, alloc in zip(requested, allocatable, strict=True):
            if alloc == 0:
                continue
            fraction = min(float(req) / float(alloc), 1.0)
            total += fraction
            fractions.append(fraction)
        std = 0.0
        if len(fractions) == 2:
            std = abs((fractions[0] - fractions[1]) / 2)
        elif len(fractions) > 2:
            mean = total / float(len(fractions))
            acc = 0.0
            for fraction in fractions:
                acc = acc + (fraction - mean) * (fraction - mean)
            std = math.sqrt(acc / float(len(fractions)))
        return math.trunc((1 - std) * float(MAX_NODE_SCORE))

    def score_array(self, requested: list[np.ndarray], allocatable: list[np.ndarray]) -> np.ndarray:
        n = len(requested[0]) if requested else 0
        count = np.zeros(n, dtype=np.int64)
        total = np.zeros(n, dtype=np.float64)
        first = np.zeros(n, dtype=np.float64)
        second = np.zeros(n, dtype=np.float64)
        fractions: list[tuple[np.ndarray, np.ndarray]] = []
        for req, alloc in zip(requested, allocatable, strict=True):
            present = alloc != 0
            denominator = np.where(present, alloc, 1).astype(np.float64)
            fraction = np.where(present, np.minimum(req.astype(np.float64) / denominator, 1.0), 0.0)
            # Adding an exact 0.0 for absent resources keeps Go's summation order and result.
            total += fraction
            first = np.where(present & (count == 0), fraction, first)
            second = np.where(present & (count == 1), fraction, second)
            count += present
            fractions.append((present, fraction))
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = total / count.astype(np.float64)
            acc = np.zeros(n, dtype=np.float64)
            for present, fraction in fractions:
                acc = np.where(present, acc + (fraction - mean) * (fraction - mean), acc)
            std_many = np.sqrt(acc / count.astype(np.float64))
        std = np.where(count == 2, np.abs((first - second) / 2), np.where(count > 2, std_many, 0.0))
        return np.trunc((1 - std) * float(MAX_NODE_SCORE)).astype(np.int64)

    def score_array_offered(self, requested: list[np.ndarray], allocatable: list[np.ndarray]) -> np.ndarray:
        # The arithmetic of score_array with every resource present, step for step (the
        # same float operations in the same order, so the same results).
        fractions = [np.minimum(np.true_divide(req, alloc), 1.0) for req, alloc in zip(requested, allocatable,
                                                                                        strict=True)]
        count = len(fractions)
        if count == 2:
            std = np.abs((fractions[0] - fractions[1]) / 2)
        elif count > 2:
            total = fractions[0] + fractions[1]
            for fraction in fractions[2:]:
                total += fraction
            mean = total / float(count)
            acc = (fractions[0] - mean) * (fractions[0] - mean)
            for fraction in fractions[1:]:
                deviation = fraction - mean
                acc += deviation * deviation
            std = np.sqrt(acc / float(count))
        else:
            n = len(requested[0]) if requested else 0
            return np.full(n, MAX_NODE_SCORE, dtype=np.int64)
        std = 1 - std
        std *= float(MAX_NODE_SCORE)
        return std.astype(np.int64)  # truncates toward zero, as np.trunc then the cast


def _balance_of_two(first: float, second: float) -> int:
    """Balanced.score of two offered resources from their requested / allocatable quotients:
    the same float operations in the same order."""
    first = min(first, 1.0)
    second = min(second, 1.0)
    return math.trunc((1 - abs((first - second) / 2)) * float(MAX_NODE_SCORE))


def _improvement(with_pod: Any, without_pod: Any) -> Any:
    """Both balances are in [50, 100], so the numerator is never negative: Go's integer
    division is floor division here."""
    half = MAX_NODE_SCORE // 2
    return half + (half + with_pod - without_pod) // 2


def _balanced_two_some(strategy: Balanced, arrays: list[tuple[np.ndarray, np.ndarray, int]],
                       rows: list[int]) -> list[int]:
    """Balanced.score_placed of two resources for each row, from the (allocatable, requested,
    pod's request) columns: what compute_some would build the lists for. The offered case is
    _improvement of two _balance_of_two written out (the same float operations in the same
    order): this runs for every stale row of every request shape."""
    (alloc0, req0, own0), (alloc1, req1, own1) = arrays
    half = MAX_NODE_SCORE // 2
    top = float(MAX_NODE_SCORE)
    out: list[int] = []
    append = out.append
    for row in rows:
        a0, a1 = alloc0.item(row), alloc1.item(row)
        if a0 and a1:
            q0, q1 = req0.item(row), req1.item(row)
            f0, f1 = float(a0), float(a1)
            first, second = float(q0 + own0) / f0, float(q1 + own1) / f1
            if first > 1.0:  # min(first, 1.0)
                first = 1.0
            if second > 1.0:
                second = 1.0
            with_pod = math.trunc((1 - abs((first - second) / 2)) * top)
            first, second = float(q0) / f0, float(q1) / f1
            if first > 1.0:
                first = 1.0
            if second > 1.0:
                second = 1.0
            append(half + (half + with_pod - math.trunc((1 - abs((first - second) / 2)) * top)) // 2)
        else:
            r0, r1 = req0.item(row) + own0, req1.item(row) + own1
            append(strategy.score_placed([r0 if a0 else 0, r1 if a1 else 0], [a0, a1], [own0, own1]))
    return out


def _least_allocated_some(arrays: list[tuple[np.ndarray, np.ndarray, int]], weights: list[int],
                          rows: list[int]) -> list[int]:
    """LeastAllocated.score for each row (weights >= 0: every division is of non-negatives, so
    Go's is the floor)."""
    out: list[int] = []
    if len(arrays) == 2:  # the default (cpu, memory), the loop below written out: the same numbers
        (alloc0, req0, own0), (alloc1, req1, own1) = arrays
        weight0, weight1 = weights
        weight_sum = weight0 + weight1
        append = out.append
        for row in rows:
            a0, a1 = alloc0.item(row), alloc1.item(row)
            if a0 and a1:
                r0, r1 = req0.item(row) + own0, req1.item(row) + own1
                score = (a0 - r0) * MAX_NODE_SCORE // a0 * weight0 if r0 <= a0 else 0
                if r1 <= a1:
                    score += (a1 - r1) * MAX_NODE_SCORE // a1 * weight1
                append(score // weight_sum if weight_sum else 0)
            else:
                out.extend(_least_allocated_rows(arrays, weights, [row]))
        return out
    return _least_allocated_rows(arrays, weights, rows)


def _least_allocated_rows(arrays: list[tuple[np.ndarray, np.ndarray, int]], weights: list[int],
                          rows: list[int]) -> list[int]:
    """_least_allocated_some for any number of resources."""
    columns = [(alloc, req, own, weight) for (alloc, req, own), weight in zip(arrays, weights, strict=True)]
    out: list[int] = []
    for row in rows:
        score = weight_sum = 0
        for alloc_column, req_column, own, weight in columns:
            alloc = alloc_column.item(row)
            if not alloc:
                continue
            requested = req_column.item(row) + own
            if requested <= alloc:
                score += (alloc - requested) * MAX_NODE_SCORE // alloc * weight
            weight_sum += weight
        out.append(score // weight_sum if weight_sum else 0)
    return out


# --- the scorer --------------------------------------------------------------------------

def _every_row_offers(table: NodeTable, rows: np.ndarray,
                      columns: Sequence[tuple[ColumnSpec | None, ColumnSpec | None]]
                      ) -> tuple[list[np.ndarray], list[np.ndarray]] | None:
    """(allocatable, allocated) of `rows` for each of `columns`, copies, when every row offers
    every resource (allocatable > 0): the case the strategies' `*_offered` arithmetic serves.
    None when some row does not, a resource has no columns, or there are no rows."""
    if not len(rows):
        return None
    allocatable: list[np.ndarray] = []
    allocated: list[np.ndarray] = []
    for alloc_col, req_col in columns:
        if alloc_col is None or req_col is None:
            return None
        alloc = table.column(alloc_col)[rows]
        if alloc.min() <= 0:
            return None
        allocatable.append(alloc)
        allocated.append(table.column(req_col)[rows])
    return allocatable, allocated


class ResourceAllocationScorer:
    """Reads the configured resources off a pod and a node (one or many) and applies a strategy.

    `use_requested` picks the node's plain requests (BalancedAllocation) or the non-zero
    ones, where pods without cpu/memory requests count with the defaults (Fit's strategies).
    """

    def __init__(self, *, resources: Sequence[str], strategy: Strategy, use_requested: bool) -> None:
        self.resources = list(resources)
        self.strategy = strategy
        self.use_requested = use_requested
        self._plans: dict[tuple[int, ...], list[tuple[ColumnSpec | None, ColumnSpec | None, int]]] = {}
        """pod requests -> each resource's (allocatable column, requested column, request), for compute_some."""
        self._families: dict[tuple[int, ...], tuple[object, Callable[[NodeTable, np.ndarray, np.ndarray],
                                                                   np.ndarray]]] = {}
        """pod requests -> (NodeTable.derived_family's family, its compute), for score_rows."""
        self._family_of: dict[tuple[tuple[ColumnSpec | None, ColumnSpec | None], ...], object] = {}
        """The columns requests read -> the NodeTable.derived_family family of those requests."""

    def pod_requests(self, pod: PodInfo) -> list[int]:
        """upstream calculatePodResourceRequestList."""
        out = []
        non_zero_cpu, non_zero_memory = pod.non_zero_cpu, pod.non_zero_memory
        if not self.use_requested and ((pod.pod.get("spec") or {}).get("resources") or {}).get("requests"):
            non_zero_cpu, non_zero_memory = container_non_zero_requests(pod.pod)
        for name in self.resources:
            if name == CPU:
                out.append(pod.requests.milli_cpu if self.use_requested else non_zero_cpu)
            elif name == MEMORY:
                out.append(pod.requests.memory if self.use_requested else non_zero_memory)
            elif name == PODS:
                out.append(0)
            else:
                out.append(pod.requests.get(name))
        return out

    def _allocatable_requested(self, node: NodeInfo, name: str, pod_request: int) -> tuple[int, int]:
        """upstream calculateResourceAllocatableRequest: (0, 0) means 'leave this resource out'."""
        requested: Resource = node.requested if self.use_requested else node.non_zero_requested
        if name == CPU:
            return node.allocatable.milli_cpu, requested.milli_cpu + pod_request
        if name == MEMORY:
            return node.allocatable.memory, requested.memory + pod_request
        if name == EPHEMERAL_STORAGE:
            return node.allocatable.ephemeral_storage, node.requested.ephemeral_storage + pod_request
        if pod_request == 0 or not is_scalar_resource_name(name):
            return 0, 0
        return node.allocatable.scalar.get(name, 0), node.requested.scalar.get(name, 0) + pod_request

    def dra_backed(self, pod_requests: Sequence[int], backing: Callable[[str], Any]) -> dict[int, Any]:
        """Index -> the DeviceClass of each configured resource the pod asks for that a class
        backs (`backing`: the DRA resolver), scored on nodes that do not advertise it by the
        devices of the class (DRAExtendedResource; upstream's getDRAPreScoredParams)."""
        out = {}
        for i, name in enumerate(self.resources):
            if pod_requests[i] != 0 and name not in (CPU, MEMORY, EPHEMERAL_STORAGE) and is_scalar_resource_name(name):
                device_class = backing(name)
                if device_class is not None:
                    out[i] = device_class
        return out

    def score_dra(self, node: NodeInfo, pod_requests: Sequence[int], backed: Mapping[int, Any],
                  totals: Callable[[NodeInfo, Any], tuple[int, int] | None]) -> int:
        """`score` where a resource of `backed` that the node does not advertise counts the
        class's devices on the node and those allocated (`totals`, upstream's
        calculateDRAExtendedResourceAllocatableRequest); no devices: left out, as absent."""
        requested = [0] * len(self.resources)
        allocatable = [0] * len(self.resources)
        for i, name in enumerate(self.resources):
            alloc, req = self._allocatable_requested(node, name, pod_requests[i])
            if alloc == 0 and i in backed:
                found = totals(node, backed[i])
                if found is not None and found[0] > 0:
                    alloc, req = found[0], found[1] + pod_requests[i]
            if alloc != 0:
                allocatable[i], requested[i] = alloc, req
        return self.strategy.score_placed(requested, allocatable, pod_requests)

    def score(self, node: NodeInfo, pod_requests: Sequence[int]) -> int:
        requested = [0] * len(self.resources)
        allocatable = [0] * len(self.resources)
        for i, name in enumerate(self.resources):
            alloc, req = self._allocatable_requested(node, name, pod_requests[i])
            if alloc != 0:
                allocatable[i], requested[i] = alloc, req
        return self.strategy.score_placed(requested, allocatable, pod_requests)

    def score_rows(self, table: NodeTable, rows: np.ndarray, pod_requests: Sequence[int]) -> np.ndarray:
        """Each row's score. A node's score depends on its own columns and the pod's requests
        alone, so the table keeps every node's score for requests it saw before and recomputes
        only the nodes that changed since (the next pod of a ReplicaSet asks the same)."""
        requests = tuple(pod_requests)
        family = self._families.get(requests)
        if family is None:
            if len(self._families) >= 64:
                self._families.clear()
            columns = tuple(self._columns(name, pod_request)
                            for name, pod_request in zip(self.resources, requests, strict=True))
            found = self._family_of.get(columns)
            if found is None:
                found = self._family_of[columns] = object()  # hashes by identity
            family = self._families[requests] = (
                found, lambda table, rows, parameters: self.compute_many(table, rows, parameters, columns))
        # Requests that read the same columns share a family: brought up to date together.
        return table.derived_family(family[0], requests, requests, family[1], rows,
                                    lambda table, rows: self.compute_some(table, rows, requests))

    def _plan(self, pod_requests: tuple[int, ...]) -> list[tuple[ColumnSpec | None, ColumnSpec | None, int]]:
        plan = self._plans.get(pod_requests)
        if plan is None:
            if len(self._plans) >= 64:
                self._plans.clear()
            plan = self._plans[pod_requests] = [
                (*self._columns(name, pod_request), pod_request)
                for name, pod_request in zip(self.resources, pod_requests, strict=True)]
        return plan

    def compute_some(self, table: NodeTable, rows: list[int], pod_requests: tuple[int, ...]) -> list[int]:
        """compute_rows for each of `rows`: the same columns, read as Python ints, scored by the
        strategy's `score` (the same arithmetic as its arrays), what it reads looked up once."""
        arrays = [None if alloc_col is None or req_col is None else
                  (table.column(alloc_col), table.column(req_col), pod_request)
                  for alloc_col, req_col, pod_request in self._plan(pod_requests)]
        strategy = self.strategy
        if None not in arrays:  # the usual plans, their arithmetic written out (the same numbers)
            present = cast(list[tuple[np.ndarray, np.ndarray, int]], arrays)
            if type(strategy) is Balanced and len(present) == 2:
                return _balanced_two_some(strategy, present, rows)
            if type(strategy) is LeastAllocated and min(strategy.weights, default=0) >= 0:
                return _least_allocated_some(present, strategy.weights, rows)
        score_placed = strategy.score_placed
        out: list[int] = []
        for row in rows:
            requested: list[int] = []
            allocatable: list[int] = []
            for entry in arrays:
                if entry is None:
                    requested.append(0)
                    allocatable.append(0)
                    continue
                alloc = entry[0].item(row)
                allocatable.append(alloc)
                requested.append(entry[1].item(row) + entry[2] if alloc != 0 else 0)
            out.append(score_placed(requested, allocatable, pod_requests))
        return out

    def compute_rows(self, table: NodeTable, rows: np.ndarray, pod_requests: Sequence[int]) -> np.ndarray:
        """score_rows, computed."""
        columns = [self._columns(name, pod_request)
                   for name, pod_request in zip(self.resources, pod_requests, strict=True)]
        offered = _every_row_offers(table, rows, columns)
        if offered is not None:
            allocatable, allocated = offered
            for req, pod_request in zip(allocated, pod_requests, strict=True):
                req += pod_request
            return self.strategy.score_array_offered_placed(allocated, allocatable, pod_requests)
        requested: list[np.ndarray] = []
        allocatable = []
        zeros = np.zeros(len(rows), dtype=np.int64)
        for (alloc_col, req_col), pod_request in zip(columns, pod_requests, strict=True):
            if alloc_col is None or req_col is None:
                requested.append(zeros)
                allocatable.append(zeros)
                continue
            alloc = table.column(alloc_col)[rows]
            req = table.column(req_col)[rows] + pod_request
            present = alloc != 0
            allocatable.append(alloc)
            requested.append(np.where(present, req, 0))
        return self.strategy.score_array_placed(requested, allocatable, pod_requests)

    def compute_many(self, table: NodeTable, rows: np.ndarray, parameters: np.ndarray,
                     columns: tuple[tuple[ColumnSpec | None, ColumnSpec | None], ...]) -> np.ndarray:
        """compute_rows for each row of `parameters` (pod requests whose resources read `columns`),
        as one (len(parameters), len(rows)) array."""
        strategy = self.strategy
        if len(parameters) > 1 and len(rows) and ((type(strategy) is Balanced and len(columns) >= 2) or (
                type(strategy) in (LeastAllocated, MostAllocated)
                and sum(cast(_WeightedStrategy, strategy).weights) > 0
                and min(cast(_WeightedStrategy, strategy).weights) >= 0)):
            offered = _every_row_offers(table, rows, columns)
            if offered is not None:
                allocatable, allocated = offered
                # Every row offers every resource: compute_rows' arithmetic, each request a row of
                # a 2-D array (elementwise: the same numbers). Balanced's balance without the pod
                # is the node's own (requested + request - request), one per node.
                requested = [req + parameters[:, i:i + 1] for i, req in enumerate(allocated)]
                with_pod = strategy.score_array_offered(requested, allocatable)
                if type(strategy) is Balanced:
                    return _improvement(with_pod, strategy.score_array_offered(allocated, allocatable))
                return with_pod
        return np.stack([self.compute_rows(table, rows, requests) for requests in parameters.tolist()])

    def _columns(self, name: str, pod_request: int) -> tuple[ColumnSpec | None, ColumnSpec | None]:
        if name == CPU:
            return ALLOCATABLE_CPU, REQUESTED_CPU if self.use_requested else NON_ZERO_REQUESTED_CPU
        if name == MEMORY:
            return ALLOCATABLE_MEMORY, REQUESTED_MEMORY if self.use_requested else NON_ZERO_REQUESTED_MEMORY
        if name == EPHEMERAL_STORAGE:
            return ALLOCATABLE_EPHEMERAL_STORAGE, REQUESTED_EPHEMERAL_STORAGE
        if pod_request == 0 or not is_scalar_resource_name(name):
            return None, None
        return scalar_columns(name)

    @staticmethod
    def is_best_effort(pod_requests: Sequence[int]) -> bool:
        return not any(pod_requests)
