"""PodTopologySpread's PreScore over table rows: the same state as the loop over nodes."""

from __future__ import annotations

import random

import numpy as np

from kopfsched.framework.node_table import NodeTable
from kopfsched.framework.types import NodeInfo, PodInfo
from kopfsched.plugins.podtopologyspread.common import (
    LABEL_HOSTNAME,
    Selector,
    TopologySpreadConstraint,
    count_pods_match_selector,
)
from kopfsched.plugins.podtopologyspread.scoring import (
    PreScoreState,
    first_appearance,
    init_pre_score_state,
    init_pre_score_state_rows,
    normalize,
    score_node,
    score_rows,
)
from tests.builders import make_node, make_pod

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
        assert by_rows.some_ignored == by_nodes.some_ignored
        assert by_rows.topology_normalizing_weight == by_nodes.topology_normalizing_weight


def test_score_rows_equal_score_node() -> None:
    rng = random.Random(6)
    selector = Selector.of({"matchLabels": {"app": "a"}})
    for _ in range(200):
        nodes = []
        for i in range(rng.randrange(1, 40)):
            labels = {LABEL_HOSTNAME: f"n{i}"}
            if rng.random() < 0.8:
                labels[ZONE] = f"z{rng.randrange(4)}"
            if rng.random() < 0.5:
                labels[RACK] = rng.choice(("r0", "r1"))
            node = NodeInfo(make_node(f"n{i}", labels=labels))
            for j in range(rng.randrange(3)):
                node.add_pod(PodInfo(make_pod(f"p{i}-{j}", labels={"app": rng.choice("ab")})))
            nodes.append(node)
        table = NodeTable(nodes)
        rows = np.arange(len(nodes), dtype=np.int64)
        keys = rng.sample((LABEL_HOSTNAME, ZONE, RACK), rng.randrange(1, 4))
        # maxSkew 0 (invalid, yet parsed) scores below 0: rounded as floor, not as the cast truncates
        constraints = [TopologySpreadConstraint(rng.randrange(0, 5), key, selector) for key in keys]
        state = PreScoreState(constraints, rng.random() < 0.5)
        init_pre_score_state_rows(state, table, rows)
        for counts in state.topology_value_to_pod_counts:
            for value in counts:
                counts[value] = rng.randrange(10)
        pod = PodInfo(make_pod("in"))
        hosts = [np.array([count_pods_match_selector(n, selector, "default") for n in nodes])
                 if c.topology_key == LABEL_HOSTNAME else None for c in constraints]
        labelled = [all(c.topology_key in n.labels for n in nodes) for c in constraints]
        expected = [score_node(state, pod, n) for n in nodes]
        assert score_rows(state, pod, table, rows, hosts).tolist() == expected
        assert score_rows(state, pod, table, rows, hosts, labelled).tolist() == expected


def _normalize_reference(ignored: np.ndarray, scores: list[int]) -> list[int]:
    kept = [s for s, i in zip(scores, ignored.tolist(), strict=True) if not i]
    if not kept:
        return [0] * len(scores)
    low, high = min(kept), max(max(kept), 0)
    return [0 if i else 100 if high == 0 else 100 * (high + low - s) // high
            for s, i in zip(scores, ignored.tolist(), strict=True)]


def test_normalize_equals_the_reference() -> None:
    rng = random.Random(8)
    for _ in range(500):
        n = rng.randrange(0, 12)
        scores = [rng.choice((0, rng.randrange(200))) for _ in range(n)]
        ignored = np.array([rng.random() < rng.choice((0.0, 0.3, 1.0)) for _ in range(n)], dtype=bool)
        state = PreScoreState([], False, ignored=ignored, some_ignored=bool(ignored.any()))
        assert normalize(state, np.array(scores, dtype=np.int64)).tolist() == _normalize_reference(ignored, scores)
