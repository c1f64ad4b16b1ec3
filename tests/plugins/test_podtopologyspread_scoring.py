"""PodTopologySpread's PreScore over table rows: the same state as the loop over nodes."""

from __future__ import annotations

import random

import numpy as np

from kopfsched.framework.node_table import NodeTable
from kopfsched.framework.types import NodeInfo
from kopfsched.plugins.podtopologyspread.common import LABEL_HOSTNAME, Selector, TopologySpreadConstraint
from kopfsched.plugins.podtopologyspread.scoring import (
    PreScoreState,
    first_appearance,
    init_pre_score_state,
    init_pre_score_state_rows,
)
from tests.builders import make_node

ZONE = "test.kopfsched/zone"
RACK = "test.kopfsched/rack"


def test_first_appearance_is_the_order_of_the_first_rows() -> None:
    rng = random.Random(2)
    for _ in range(500):
        n = rng.choice((0, 1, 5, 63, 64, 65, 200))
        k = rng.randrange(1, 12)
        weights = [rng.random() ** 4 for _ in range(k)]  # some values rare: first seen late
        codes = rng.choices(range(-1, k - 1), weights=weights, k=n)
        assert first_appearance(np.array(codes, dtype=np.int64)) == list(dict.fromkeys(codes))


def test_rows_state_equals_the_loop_over_nodes() -> None:
    rng = random.Random(4)
    selector = Selector.of({"matchLabels": {"app": "a"}})
    for _ in range(200):
        nodes = []
        for i in range(rng.randrange(1, 90)):
            labels = {LABEL_HOSTNAME: f"n{i}"} if rng.random() < 0.95 else {}
            if rng.random() < 0.9:
                labels[ZONE] = f"z{min(int(rng.expovariate(0.7)), 9)}"
            if rng.random() < 0.7:
                labels[RACK] = rng.choice(("r0", "r1", ""))
            nodes.append(NodeInfo(make_node(f"n{i}", labels=labels)))
        table = NodeTable(nodes)
        rows = np.array(sorted(rng.sample(range(len(nodes)), rng.randrange(1, len(nodes) + 1))), dtype=np.int64)
        keys = rng.sample((LABEL_HOSTNAME, ZONE, RACK), rng.randrange(1, 4))
        constraints = [TopologySpreadConstraint(rng.randrange(1, 5), key, selector) for key in keys]
        require_all = rng.random() < 0.5
        by_rows = PreScoreState(constraints, require_all)
        init_pre_score_state_rows(by_rows, table, rows)
        by_nodes = PreScoreState(constraints, require_all)
        init_pre_score_state(by_nodes, [nodes[r] for r in rows.tolist()])
        assert [list(d.items()) for d in by_rows.topology_value_to_pod_counts] == [
            list(d.items()) for d in by_nodes.topology_value_to_pod_counts]
        assert by_rows.ignored.tolist() == by_nodes.ignored.tolist()
        assert by_rows.ignored_nodes == by_nodes.ignored_nodes
        assert by_rows.topology_normalizing_weight == by_nodes.topology_normalizing_weight
