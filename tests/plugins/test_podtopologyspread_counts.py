"""MatchCounts: per-node counts of the pods a selector matches, kept current from node
generations, equal to counting every node's pods after each change."""

from __future__ import annotations

import copy
import random

import numpy as np
import pytest

from kopfsched.framework.node_table import NodeTable, label_value_codes
from kopfsched.framework.types import NodeInfo, PodInfo
from kopfsched.plugins.podtopologyspread import PodTopologySpread, PodTopologySpreadArgs
from kopfsched.plugins.podtopologyspread import counts as counts_module
from kopfsched.plugins.podtopologyspread.common import (
    HONOR,
    IGNORE,
    Selector,
    TopologySpreadConstraint,
    count_pods_match_selector,
    required_node_affinity,
)
from kopfsched.plugins.podtopologyspread.counts import MatchCounts
from kopfsched.testing import make_handle
from tests.builders import make_node, make_pod, taint

ZONE = "test.kopfsched/zone"

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


@pytest.fixture(params=[0, 2, 8], ids=["change-log", "some-followed", "followed"])
def groups_replayed(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Catch up from the change log, or follow the matching groups' changes (with 2, selectors
    that come to match more groups stop following them)."""
    monkeypatch.setattr(counts_module, "_GROUPS_FOLLOWED", request.param)


def _bind_or_remove(rng: random.Random, nodes: list[NodeInfo], pods: list[tuple[NodeInfo, PodInfo]], row: int,
                    step: int, *, remove: bool) -> int:
    """Remove a random placed pod, or place a new one on `row`; the row that changed."""
    if remove:
        owner, pod = pods.pop(rng.randrange(len(pods)))
        owner.remove_pod(pod)
        return nodes.index(owner)
    pod = _pod(rng, step)
    nodes[row].add_pod(pod)
    pods.append((nodes[row], pod))
    return row


@pytest.mark.usefixtures("groups_replayed")
@pytest.mark.parametrize("kept", [1024, 3], ids=["all-kept", "some-forgotten"])
def test_counts_follow_every_change_as_a_full_count(kept: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # With 3 kept, the least recently used selectors go (and stop following their groups).
    monkeypatch.setattr(counts_module, "_SELECTORS_KEPT", kept)
    rng = random.Random(3)
    nodes = [NodeInfo(make_node(f"n{i}")) for i in range(12)]
    table = NodeTable(nodes)
    counts = MatchCounts()
    pods: list[tuple[NodeInfo, PodInfo]] = []
    checked = 0
    for step in range(400):
        row = _bind_or_remove(rng, nodes, pods, rng.randrange(len(nodes)), step,
                              remove=bool(pods) and rng.random() < 0.35)
        table.refresh([row], node_static=False)
        for selector in rng.sample(SELECTORS, 2):
            for namespace in ("default", "other"):
                expected = [count_pods_match_selector(n, selector, namespace) for n in nodes]
                assert counts.counts(table, selector, namespace).tolist() == expected
                checked += sum(expected)
    assert checked > 1000  # the selectors matched pods, in both namespaces
    # Exactly the kept selectors that follow are their groups' followers.
    following = {id(entry) for entry in counts._entries.values() if entry.following}
    assert {id(entry) for followers in counts._followers for entry in followers} == following
    # A new table (nodes added or removed) starts the index over.
    other = NodeTable(nodes[:5])
    assert np.array_equal(counts.counts(other, SELECTORS[0], "default"),
                          [count_pods_match_selector(n, SELECTORS[0], "default") for n in nodes[:5]])


@pytest.mark.usefixtures("groups_replayed")
def test_domain_totals_follow_every_change_as_a_full_count() -> None:
    rng = random.Random(5)
    zone_of = [rng.choice(("z0", "z1", "z2", None)) for _ in range(12)]

    def node(i: int) -> dict[str, object]:
        labels = {ZONE: zone_of[i]} if zone_of[i] is not None else {}
        return make_node(f"n{i}", labels=labels)

    nodes = [NodeInfo(node(i)) for i in range(12)]
    table = NodeTable(nodes)
    counts = MatchCounts()
    pods: list[tuple[NodeInfo, PodInfo]] = []
    checked = 0
    for step in range(2000):
        row = rng.randrange(len(nodes))
        draw = rng.random()
        if draw < 0.05:  # relabelled: new codes for the totals
            zone_of[row] = rng.choice(("z0", "z1", "z2", "z3", None))
            nodes[row].set_node(node(row))
            table.refresh([row])
        else:
            row = _bind_or_remove(rng, nodes, pods, row, step, remove=bool(pods) and draw < 0.4)
            table.refresh([row], node_static=False)
        chosen = rng.sample(SELECTORS[1:], rng.randrange(4))
        if step % 200 == 199:
            chosen.append(SELECTORS[0])  # far behind
        for selector in chosen:
            for namespace in ("default", "other"):
                got = counts.domain_totals(table, selector, namespace, ZONE).tolist()
                codes = label_value_codes(ZONE)  # interned as the table's column reads the nodes
                expected = [0] * (len(codes) + 1)
                for n in nodes:
                    value = n.labels.get(ZONE)
                    expected[0 if value is None else codes[value] + 1] += count_pods_match_selector(
                        n, selector, namespace)
                assert got == expected
                checked += sum(expected)
    assert checked > 1000
    following = sum(entry.following for entry in counts._entries.values())
    assert (following > 0) == (counts_module._GROUPS_FOLLOWED > 0)
    assert following < len(counts._entries) or counts_module._GROUPS_FOLLOWED == 8


def test_plugin_domain_counts_equal_the_node_by_node_count() -> None:
    rng = random.Random(11)
    raw_nodes = []
    for i in range(10):
        labels = {"kubernetes.io/hostname": f"n{i}"}
        if rng.random() < 0.85:
            labels[ZONE] = rng.choice(("z0", "z1", "z2"))
        if rng.random() < 0.8:
            labels["rack"] = rng.choice(("r0", "r1"))
        raw_nodes.append(make_node(f"n{i}", labels=labels,
                                   taints=[taint("t", effect="NoSchedule")] if rng.random() < 0.2 else None))
    nodes = [NodeInfo(n) for n in raw_nodes]
    handle = make_handle(nodes)
    plugin = PodTopologySpread(PodTopologySpreadArgs(), handle)
    table = handle.snapshot.table
    pods: list[tuple[NodeInfo, PodInfo]] = []
    checked = 0
    for step in range(300):
        if pods and rng.random() < 0.35:
            owner, pod = pods.pop(rng.randrange(len(pods)))
            owner.remove_pod(pod)
        else:
            owner, pod = rng.choice(nodes), _pod(rng, step)
            owner.add_pod(pod)
            pods.append((owner, pod))
        table.refresh([nodes.index(owner)], node_static=False)
        keys = rng.sample((ZONE, "rack", "kubernetes.io/hostname"), rng.randrange(1, 3))
        constraints = [TopologySpreadConstraint(1, key, rng.choice(SELECTORS),
                                                node_taints_policy=rng.choice((HONOR, IGNORE)))
                       for key in keys]
        incoming = PodInfo(make_pod("in", rng.choice(("default", "other")),
                                    node_selector={"rack": "r0"} if rng.random() < 0.2 else None))
        affinity = required_node_affinity(incoming)
        required = rng.choice(([], keys))
        fast = plugin._domain_counts(constraints, incoming, nodes, affinity, required_keys=required)
        # A row-less node in the list takes the node-by-node path (and counts for nothing).
        slow = plugin._domain_counts(constraints, incoming, [*nodes, NodeInfo()], affinity, required_keys=required)
        assert fast == slow
        checked += sum(sum(d.values()) for d in fast)
    assert checked > 300


def _new_version(rng: random.Random, pod: PodInfo) -> PodInfo:
    """The same pod (uid) with other labels, or terminating."""
    raw = copy.deepcopy(pod.pod)
    if rng.random() < 0.3:
        raw["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    else:
        raw["metadata"]["labels"] = {"app": rng.choice("abc")}
    return PodInfo(raw)


def _mask(rng: random.Random, size: int) -> np.ndarray:
    return np.array([rng.random() < 0.6 for _ in range(size)], dtype=bool)


@pytest.mark.usefixtures("groups_replayed")
@pytest.mark.parametrize("forgotten", [0.0, 0.05], ids=["refreshed-named", "refreshed-forgotten"])
def test_counts_and_masked_totals_follow_changes_of_several_rows(forgotten: float,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Several rows changed between reads (pods placed, gone, or replaced by a new version of
    the same pod), nodes relabelled, more refreshes than the table's log of refreshed rows
    keeps: the counts and the totals over every row or over a mask equal counting every
    node's pods."""
    monkeypatch.setattr(counts_module, "_MASKED_TOTALS_KEPT", 3)  # masks' totals forgotten too
    rng = random.Random(9)
    zone_of = [rng.choice(("z0", "z1", "")) for _ in range(14)]

    def node(i: int) -> dict[str, object]:
        return make_node(f"n{i}", labels={ZONE: zone_of[i]} if zone_of[i] else {})

    nodes = [NodeInfo(node(i)) for i in range(14)]
    table = NodeTable(nodes)
    counts = MatchCounts()
    masks = [_mask(rng, len(nodes)) for _ in range(5)]  # kept by identity, as the plugin keeps them
    pods: list[tuple[NodeInfo, PodInfo]] = []
    checked = 0
    for step in range(1500):
        for _ in range(rng.choice((0, 1, 1, 2, 5))):
            row = rng.randrange(len(nodes))
            draw = rng.random()
            if draw < 0.03:
                zone_of[row] = rng.choice(("z0", "z1", "z2", ""))
                nodes[row].set_node(node(row))
                table.refresh([row])
                masks[rng.randrange(len(masks))] = _mask(rng, len(nodes))  # a mask of the new nodes
                continue
            if pods and draw < 0.25:
                i = rng.randrange(len(pods))
                owner, pod = pods[i]
                owner.remove_pod(pod)
                newer = _new_version(rng, pod)
                owner.add_pod(newer)
                pods[i] = (owner, newer)
                row = nodes.index(owner)
            else:
                row = _bind_or_remove(rng, nodes, pods, row, step, remove=bool(pods) and draw < 0.5)
            table.refresh([row], node_static=False)
        if rng.random() < forgotten:
            # Beyond what the log keeps (a few times the table's rows), behind it a pod came.
            row = _bind_or_remove(rng, nodes, pods, rng.randrange(len(nodes)), 10_000 + step, remove=False)
            table.refresh([row], node_static=False)
            for _ in range(100):
                table.refresh([rng.randrange(len(nodes))], node_static=False)
            assert table.refreshed_since(counts._refresh_position)[1] is None
        codes = label_value_codes(ZONE)
        for selector in rng.sample(SELECTORS, 2):
            namespace = rng.choice(("default", "other"))
            per_node = [count_pods_match_selector(n, selector, namespace) for n in nodes]
            assert counts.counts(table, selector, namespace).tolist() == per_node
            mask = rng.choice([None, *masks])
            got = counts.domain_totals(table, selector, namespace, ZONE, mask).tolist()
            expected = [0] * (len(codes) + 1)
            for r, n in enumerate(nodes):
                if mask is None or mask[r]:
                    value = n.labels.get(ZONE)
                    expected[0 if value is None else codes[value] + 1] += per_node[r]
            assert got == expected
            checked += sum(expected)
    assert checked > 2000
