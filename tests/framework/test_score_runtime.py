"""The runtime's Score run over table rows: weighted totals, and which plugin an invalid
score or an exception is blamed on (the first in order, as if each were checked in turn)."""

from __future__ import annotations

import numpy as np
import pytest

from kopfsched.framework.cycle_state import CycleState
from kopfsched.framework.node_table import NodeTable
from kopfsched.framework.runtime import Framework
from kopfsched.framework.status import Code
from kopfsched.framework.types import NodeInfo, PodInfo
from kopfsched.testing import make_handle, make_node, make_pod


class Scores:
    """A Score plugin answering the given scores for rows 0, 1, 2, or raising."""

    def __init__(self, name: str, answer: list[int] | Exception) -> None:
        self.name = name
        self.answer = answer
        self.calls = 0

    def score(self, state, pod, node):
        raise AssertionError("the batch method is used")

    def score_nodes(self, state, pod, table, rows):
        self.calls += 1
        if isinstance(self.answer, Exception):
            raise self.answer
        return np.asarray(self.answer, dtype=np.int64)[rows]


def run(*answers: tuple[str, list[int] | Exception, int]):
    plugins = [(Scores(name, answer), weight) for name, answer, weight in answers]
    fwk = Framework(profile_name="p", plugins={"score": plugins}, handle=make_handle())
    table = NodeTable([NodeInfo(make_node(f"n{i}")) for i in range(3)])
    totals, per_plugin, status = fwk.run_score_plugins_on_rows(
        CycleState(), PodInfo(make_pod("p")), table, np.arange(3, dtype=np.int64))
    return totals.tolist(), {k: v.tolist() for k, v in per_plugin.items()}, status, [p.calls for p, _ in plugins]


def test_weighted_totals():
    totals, per_plugin, status, _ = run(("A", [0, 50, 100], 1), ("B", [10, 20, 30], 3))
    assert status is None
    assert totals == [30, 110, 190]
    assert per_plugin == {"A": [0, 50, 100], "B": [10, 20, 30]}


RANGE = ", it should in the range of [0, 100] after normalizing"

CASES = {
    "above the range": ((("A", [1, 2, 3], 1), ("B", [0, 101, 5], 1), ("C", [1, 1, 1], 1)),
                        ("B", 'plugin "B" returns an invalid score 101' + RANGE), [1, 2, 3], {"A": [1, 2, 3]}),
    "below the range": ((("A", [1, 2, 3], 1), ("B", [0, -4, 5], 2)),
                        ("B", 'plugin "B" returns an invalid score -4' + RANGE), [1, 2, 3], {"A": [1, 2, 3]}),
    "the first of two invalid ones": ((("A", [1, 2, 3], 1), ("B", [0, -4, 5], 1), ("C", [200, 0, 0], 1)),
                                      ("B", 'plugin "B" returns an invalid score -4' + RANGE), [1, 2, 3],
                                      {"A": [1, 2, 3]}),
    "an invalid score before an exception": ((("A", [500, 2, 3], 1), ("B", ValueError("boom"), 1)),
                                             ("A", 'plugin "A" returns an invalid score 500' + RANGE),
                                             [0, 0, 0], {}),
    "an exception before an invalid score": ((("A", [1, 2, 3], 2), ("B", ValueError("boom"), 1),
                                              ("C", [500, 0, 0], 1)),
                                             ("B", 'running Score plugins: plugin "B": boom'), [2, 4, 6],
                                             {"A": [1, 2, 3]}),
}


@pytest.mark.parametrize("answers, blamed, totals, per_plugin", CASES.values(), ids=CASES.keys())
def test_errors_blame_the_first_plugin_in_order(answers, blamed, totals, per_plugin):
    got_totals, got_per_plugin, status, _ = run(*answers)
    assert status is not None and status.code is Code.ERROR
    assert (status.plugin, status.message) == blamed
    assert got_totals == totals
    assert got_per_plugin == per_plugin
