"""TalliedStatuses.of_codes and what preemption reads from it: each row's status, the distinct
ones in order of first appearance with their counts, and each row's place among them, which
must pick the same nodes where preemption might help as a look at every row's status."""

from __future__ import annotations

import random

import numpy as np

from kopfsched.framework.interface import NodeToStatus, RowPart
from kopfsched.framework.preemption.evaluator import _helpful_row_array
from kopfsched.framework.status import Code, Status, TalliedStatuses


def test_of_codes_orders_by_first_appearance_and_maps_each_row():
    made: dict[int, Status] = {}

    def status_of(code: int) -> Status:
        made[code] = Status.unschedulable(f"code {code}") if code % 2 else Status.unresolvable(f"code {code}")
        return made[code]

    codes = np.array([7, 3, 7, 9, 3, 3, 7], dtype=np.int64)
    statuses = TalliedStatuses.of_codes(codes, status_of)
    assert [s.message for s in statuses.distinct] == ["code 7", "code 3", "code 9"]
    assert statuses.counts == [3, 3, 1]
    assert statuses.of_row is not None and statuses.of_row.tolist() == [0, 1, 0, 2, 1, 1, 0]
    assert list(statuses) == [made[c] for c in codes.tolist()]
    same = TalliedStatuses.of_codes(np.array([4, 4], dtype=np.int64), status_of)
    assert same.counts == [2] and same.of_row is None and same[0] is same[1] is made[4]


def test_helpful_rows_from_places_are_the_rows_judged_one_by_one():
    rng = random.Random(3)
    kinds = [Status.unschedulable("short"), Status.unresolvable("never"), Status.unschedulable("other")]
    for _ in range(30):
        count = rng.randint(1, 60)
        rows = sorted(rng.sample(range(count), rng.randint(1, count)))
        codes = np.array([rng.randrange(3) for _ in rows], dtype=np.int64)
        tallied = TalliedStatuses.of_codes(codes, kinds.__getitem__)
        plain = list(tallied)  # the same statuses, without their places
        absent = rng.choice([None, kinds[0], kinds[1]])
        nodes: list = [None] * count
        names = [f"n{i}" for i in range(count)]
        got = _helpful_row_array(count, [RowPart(nodes, names, rows, np.array(rows), tallied, tallied.distinct)],
                                 absent)
        reference = NodeToStatus(dict(zip([names[r] for r in rows], plain, strict=True)), absent)
        expected = [i for i, name in enumerate(names)
                    if (status := reference.get(name)) is not None and status.code is Code.UNSCHEDULABLE]
        assert got.tolist() == expected
        assert _helpful_row_array(count, [RowPart(nodes, names, rows, np.array(rows), plain)], absent).tolist() \
            == expected


def test_of_codes_counts_small_and_large_codes_alike():
    """Codes below 4096 are counted with bincount, others sorted: the same answer either way."""
    for offset in (0, 1 << 20):
        codes = np.array([5, 0, 5, 2, 0, 5], dtype=np.int64) + offset
        statuses = TalliedStatuses.of_codes(codes, lambda c: Status.unschedulable(str(c)))
        assert [s.message for s in statuses.distinct] == [str(5 + offset), str(offset), str(2 + offset)]
        assert statuses.counts == [3, 2, 1]
        assert statuses.of_row is not None and statuses.of_row.tolist() == [0, 1, 0, 2, 1, 0]
        assert [s.message for s in statuses] == [str(c) for c in codes.tolist()]


def test_of_codes_takes_boolean_codes_as_they_are():
    statuses = TalliedStatuses.of_codes(np.array([False, True, True]), lambda c: Status.unschedulable(repr(c)))
    assert [s.message for s in statuses.distinct] == ["False", "True"] and statuses.counts == [1, 2]
