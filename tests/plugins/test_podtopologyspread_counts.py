"""MatchCounts: per-node counts of the pods a selector matches, kept current from node
generations, equal to counting every node's pods after each change."""

from __future__ import annotations

import random

import numpy as np

from kopfsched.framework.node_table import NodeTable
from kopfsched.framework.types import NodeInfo, PodInfo
from kopfsched.plugins.podtopologyspread.common import Selector, count_pods_match_selector
from kopfsched.plugins.podtopologyspread.counts import MatchCounts
from tests.builders import make_node, make_pod

SELECTORS = [
    Selector.of({"matchLabels": {"app": "a"}}),
    Selector.of({"matchExpressions": [{"key": "app", "operator": "In", "values": ["b"]}]}),
    Selector.of({"matchExpressions": [{"key": "app", "operator": "In", "values": ["a", "c"]}]}),
    Selector.of({"matchExpressions": [{"key": "tier", "operator": "Exists"}]}),
    Selector.of({"matchLabels": {"app": "a", "tier": "x"}}),
    Selector.of({}),  # empty: counts nothing
]


def _pod(rng: random.Random, i: int) -> PodInfo:
    namespace = rng.choice(("default", "other"))
    labels = {"app": rng.choice("abc")}
    if rng.random() < 0.5:
        labels["tier"] = rng.choice("xy")
    pod = make_pod(f"p{i}", namespace, labels=labels)
    if rng.random() < 0.1:
        pod["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return PodInfo(pod)


def test_counts_follow_every_change_as_a_full_count() -> None:
    rng = random.Random(3)
    nodes = [NodeInfo(make_node(f"n{i}")) for i in range(12)]
    table = NodeTable(nodes)
    counts = MatchCounts()
    pods: list[tuple[NodeInfo, PodInfo]] = []
    checked = 0
    for step in range(400):
        row = rng.randrange(len(nodes))
        if pods and rng.random() < 0.35:
            node, pod = pods.pop(rng.randrange(len(pods)))
            node.remove_pod(pod)
            row = nodes.index(node)
        else:
            pod = _pod(rng, step)
            nodes[row].add_pod(pod)
            pods.append((nodes[row], pod))
        table.refresh([row], node_static=False)
        for selector in rng.sample(SELECTORS, 2):
            for namespace in ("default", "other"):
                expected = [count_pods_match_selector(n, selector, namespace) for n in nodes]
                assert counts.counts(table, selector, namespace).tolist() == expected
                checked += sum(expected)
    assert checked > 1000  # the selectors matched pods, in both namespaces
    # A new table (nodes added or removed) starts the index over.
    other = NodeTable(nodes[:5])
    assert np.array_equal(counts.counts(other, SELECTORS[0], "default"),
                          [count_pods_match_selector(n, SELECTORS[0], "default") for n in nodes[:5]])
