"""Status codes and the one `Status` type every extension point returns.

`None` means success everywhere: plugins return a `Status` only to say something else.
The runtime, not the plugin, stamps the failing plugin's name onto the status.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


class Code(enum.IntEnum):
    """What a plugin's answer does to the pod and the queue (as upstream's framework.Code)."""

    SUCCESS = 0
    """The plugin has nothing against the pod."""
    ERROR = 1
    """An internal error: the pod goes to the error backoff queue, no plugin is blamed."""
    UNSCHEDULABLE = 2
    """The pod does not fit the node now; preemption may help. The pod waits in the
    unschedulable pool until an event the rejecting plugin registered moves it."""
    UNSCHEDULABLE_AND_UNRESOLVABLE = 3
    """As UNSCHEDULABLE, but preemption on that node cannot help."""
    WAIT = 4
    """Permit only: hold the pod in the waiting map until allowed, rejected or timed out."""
    SKIP = 5
    """PreFilter/PreScore: skip this plugin's Filter/Score for the cycle.
    Bind: let the next Bind plugin decide."""
    PENDING = 6
    """The pod waits for something outside the scheduler (e.g. a controller); it is
    requeued immediately when the plugin's registered event arrives."""

    @property
    def upstream_name(self) -> str:
        return _UPSTREAM_NAMES[self]


_UPSTREAM_NAMES = {
    Code.SUCCESS: "Success",
    Code.ERROR: "Error",
    Code.UNSCHEDULABLE: "Unschedulable",
    Code.UNSCHEDULABLE_AND_UNRESOLVABLE: "UnschedulableAndUnresolvable",
    Code.WAIT: "Wait",
    Code.SKIP: "Skip",
    Code.PENDING: "Pending",
}

_REJECTIONS = frozenset({Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE, Code.PENDING})


@dataclass(frozen=True, slots=True)
class Status:
    """A non-success answer: its code, the user-facing reasons, and who said it."""

    code: Code
    reasons: tuple[str, ...] = ()
    plugin: str = ""
    error: BaseException | None = None

    @classmethod
    def unschedulable(cls, *reasons: str) -> Status:
        return cls(Code.UNSCHEDULABLE, reasons)

    @classmethod
    def unresolvable(cls, *reasons: str) -> Status:
        return cls(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, reasons)

    @classmethod
    def pending(cls, *reasons: str) -> Status:
        return cls(Code.PENDING, reasons)

    @classmethod
    def wait(cls, *reasons: str) -> Status:
        return cls(Code.WAIT, reasons)

    @classmethod
    def as_error(cls, error: BaseException | str) -> Status:
        if isinstance(error, str):
            return cls(Code.ERROR, (error,), error=RuntimeError(error))
        return cls(Code.ERROR, (str(error),), error=error)

    @property
    def is_rejection(self) -> bool:
        """Unschedulable, UnschedulableAndUnresolvable or Pending: the pod was refused, not failed."""
        return self.code in _REJECTIONS

    @property
    def is_skip(self) -> bool:
        return self.code is Code.SKIP

    @property
    def message(self) -> str:
        """The reasons joined as upstream's Status.Message()."""
        return ", ".join(self.reasons)

    def with_plugin(self, plugin: str) -> Status:
        # Called for every rejected node: the constructor is several times cheaper than replace().
        return self if self.plugin == plugin else Status(self.code, self.reasons, plugin, self.error)

    def __str__(self) -> str:
        return f"{self.code.upstream_name}: {self.message}" if self.reasons else self.code.upstream_name


SKIP = Status(Code.SKIP)
"""The shared Skip answer of PreFilter, PreScore and Bind."""


def is_success(status: Status | None) -> bool:
    return status is None or status.code is Code.SUCCESS


_BINCOUNT_BELOW = 1 << 12
"""TalliedStatuses.of_codes counts codes below this with np.bincount (no sort)."""


class TalliedStatuses(list[Status]):
    """A batch Filter's statuses (one per rejected row) that also know their distinct Status
    objects, in order of first appearance, and how many rows each has: what the runtime
    counts a pod that fits nowhere by (FitError's histogram), with no pass over its nodes."""

    __slots__ = ("counts", "distinct", "of_row")

    def __init__(self, statuses: list[Status], distinct: list[Status], counts: list[int],
                 of_row: np.ndarray | None = None) -> None:
        super().__init__(statuses)
        self.distinct = distinct
        self.counts = counts
        self.of_row = of_row
        """Per row, the position of its status in `distinct`, when known (None: not known, or
        one distinct status): a judgement of the distinct statuses maps to the rows in numpy."""

    @classmethod
    def same(cls, status: Status, count: int) -> TalliedStatuses:
        """`count` rows, all with `status`."""
        return cls([status] * count, [status], [count]) if count else cls([], [], [])

    @classmethod
    def of_codes(cls, codes: np.ndarray, status_of: Callable[[int], Status]) -> TalliedStatuses:
        """One status per row from an integer code per row: `status_of` is asked once per
        distinct code and must give distinct codes distinct Status objects."""
        count = len(codes)
        if not count:
            return cls([], [], [])
        first = int(codes[0])
        if np.count_nonzero(codes == first) == count:  # the usual case: one answer for every row
            return cls.same(status_of(first), count)
        if codes.dtype.kind in "iu" and int(codes.min()) >= 0 and (high := int(codes.max())) < _BINCOUNT_BELOW:
            # Small integer codes (bit sets of reasons): counted, not sorted.
            tally = np.bincount(codes)
            present = np.flatnonzero(tally).tolist()
            in_order = sorted(present, key=lambda code: int((codes == code).argmax()))  # by first appearance
            place = np.zeros(high + 1, dtype=np.int64)
            place[in_order] = np.arange(len(in_order))
            of_row = place[codes]
            counts_in_order = tally[in_order].tolist()
        else:
            values, firsts, inverse, counts = np.unique(codes, return_index=True, return_inverse=True,
                                                        return_counts=True)
            order = np.argsort(firsts)
            position = np.empty(len(order), dtype=np.int64)
            position[order] = np.arange(len(order))  # sorted value -> its place in first-appearance order
            of_row = position[inverse.reshape(-1)]
            in_order = values[order].tolist()
            counts_in_order = counts[order].tolist()
        distinct = [status_of(code) for code in in_order]
        objects = np.empty(len(distinct), dtype=object)
        for i, status in enumerate(distinct):  # one by one: numpy must not look into a Status
            objects[i] = status
        # Each row's Status by one fancy index of an object array: a third of a map over the rows.
        return cls(objects[of_row].tolist(), distinct, counts_in_order, of_row)
