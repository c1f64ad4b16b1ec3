"""kopfsched.testing's one-plugin drivers catch batch methods that disagree with per-node ones."""

from __future__ import annotations

import numpy as np
import pytest

from kopfsched.framework import Status
from kopfsched.testing import make_node, make_pod, run_filter, run_score, schedule


class Disagreeing:
    name = "Disagreeing"

    def filter(self, state, pod, node):
        return None if node.name == "a" else Status.unschedulable("not a")

    def filter_nodes(self, state, pod, table, rows):
        return np.ones(len(rows), dtype=bool)

    def score(self, state, pod, node):
        return 10

    def score_nodes(self, state, pod, table, rows):
        return np.full(len(rows), 20, dtype=np.int64)


NODES = [make_node("a"), make_node("b")]


def test_run_filter_rejects_a_batch_filter_that_disagrees():
    with pytest.raises(AssertionError, match=r"filter_nodes says pass on b, filter says Unschedulable: not a"):
        run_filter(Disagreeing(), make_pod(), NODES)


def test_run_score_rejects_a_batch_score_that_disagrees():
    with pytest.raises(AssertionError, match=r"score_nodes gave \[20, 20\], score gave \[10, 10\]"):
        run_score(Disagreeing(), make_pod(), NODES)


def test_schedule_reports_an_invalid_profile():
    with pytest.raises(ValueError, match='unknown plugin "Nope": neither built in nor installed'):
        schedule(nodes=NODES, pods=[make_pod()], profile={"plugins": {"filter": {"enabled": [{"name": "Nope"}]}}})


def test_schedule_leaves_its_inputs_alone():
    pod = make_pod("web")
    assert schedule(nodes=NODES, pods=[pod]).placements["web"] in ("a", "b")
    assert "nodeName" not in pod["spec"]
