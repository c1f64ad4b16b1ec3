"""InterPodAffinity's PreFilter counts from its index of alike pods and terms: equal to the pod
walk, kept current as nodes change, and the batched Filter's cached lookups dropped when AddPod/RemovePod run."""

from __future__ import annotations

import json
import random
from typing import Any

import numpy as np
import pytest

from kopfsched.framework.cycle_state import CycleState
from kopfsched.framework.status import Code, TalliedStatuses
from kopfsched.framework.types import NodeInfo, PodInfo
from kopfsched.plugins.interpodaffinity import filtering, scoring
from kopfsched.plugins.interpodaffinity import index as pod_index
from kopfsched.plugins.interpodaffinity.plugin import PRE_FILTER_STATE, PRE_SCORE_STATE
from kopfsched.testing import FakeObjects
from tests.builders import make_node, make_pod
from tests.plugins.affinity import (
    AFF,
    ANTI,
    EXISTING,
    HOST,
    ZONE,
    build,
    namespace,
    preferred,
    required,
    term,
)


def zoned_cluster() -> list[dict[str, Any]]:
    return [make_node(f"n{i}", labels={ZONE: f"z{i % 2}", HOST: f"n{i}"}) for i in range(4)]


GUARD = make_pod("guard", "ns-a", labels={"app": "db"}, affinity=required(
    "podAntiAffinity", term({"app": "web"}),
    term({"app": "web"}, ZONE, namespaceSelector={"matchLabels": {"team": "a"}})))

CASES = [
    pytest.param({"n0": [GUARD]}, make_pod("p", "ns-a", labels={"app": "web"}),
                 {HOST: {"n0": 1}, ZONE: {"z0": 1}}, {}, {}, id="existing-anti-affinity-two-keys"),
    pytest.param({"n1": [make_pod("a", labels={"app": "db"}), make_pod("b", labels={"app": "db"})],
                  "n2": [make_pod("c", labels={"app": "db"})]},
                 make_pod("p", affinity=required("podAffinity", term({"app": "db"}, ZONE))),
                 {}, {ZONE: {"z1": 2, "z0": 1}}, {}, id="affinity-counts-per-zone"),
    pytest.param({"n1": [make_pod("a", labels={"app": "db"})], "n3": [make_pod("b", "other", labels={"app": "db"})]},
                 make_pod("p", affinity=required("podAntiAffinity", term({"app": "db"}), term({"app": "db"}, ZONE))),
                 {}, {}, {HOST: {"n1": 1}, ZONE: {"z1": 1}}, id="anti-affinity-own-namespace-only"),
    pytest.param({"n0": [make_pod("a", labels={"app": "db", "v": "1"})],
                  "n1": [make_pod("b", labels={"app": "db", "v": "2"})]},
                 make_pod("p", labels={"v": "2"}, affinity=required(
                     "podAntiAffinity", term({"app": "db"}, HOST, matchLabelKeys=["v"]))),
                 {}, {}, {HOST: {"n1": 1}}, id="match-label-keys"),
]


@pytest.mark.parametrize(("existing", "pod", "want_existing", "want_affinity", "want_anti"), CASES)
def test_column_counts_equal_the_pod_walk(existing: dict[str, list[dict[str, Any]]], pod: dict[str, Any],
                                          want_existing: dict, want_affinity: dict, want_anti: dict) -> None:
    objects = FakeObjects([namespace("ns-a", team="a"), namespace("default"), namespace("other")])
    plugin, infos = build(existing, nodes=zoned_cluster(), objects=objects)
    info = PodInfo(pod)
    state = CycleState()
    assert plugin.pre_filter(state, info, infos) is None
    got = state.read(PRE_FILTER_STATE)
    assert (got.existing_anti_affinity_counts, got.affinity_counts, got.anti_affinity_counts) == (
        want_existing, want_affinity, want_anti)
    # The walk over every pod (the path taken when the table does not cover the nodes) agrees.
    ns_labels = plugin.namespace_labels(info.namespace)
    assert filtering.existing_anti_affinity_counts(info, ns_labels, infos) == want_existing
    assert filtering.incoming_affinity_counts(got.affinity_terms, got.anti_affinity_terms, infos) == (
        want_affinity, want_anti)


def test_columns_follow_node_changes() -> None:
    plugin, infos = build({"n0": [make_pod("a", labels={"app": "db"})]}, nodes=zoned_cluster())
    pod = PodInfo(make_pod("p", affinity=required("podAntiAffinity", term({"app": "db"}, ZONE))))
    first = CycleState()
    plugin.pre_filter(first, pod, infos)
    assert first.read(PRE_FILTER_STATE).anti_affinity_counts == {ZONE: {"z0": 1}}
    # A matching pod lands on n1; the cache refreshes that row, as it does between cycles.
    added = make_pod("b", labels={"app": "db"})
    added["spec"]["nodeName"] = "n1"
    infos[1].add_pod(PodInfo(added))
    plugin.handle.snapshot.table.refresh([1])
    second = CycleState()
    plugin.pre_filter(second, pod, infos)
    assert second.read(PRE_FILTER_STATE).anti_affinity_counts == {ZONE: {"z0": 1, "z1": 1}}


def test_add_pod_drops_cached_lookups() -> None:
    plugin, infos = build({"n0": [make_pod("a", labels={"app": "web"})]}, nodes=zoned_cluster())
    pod = PodInfo(make_pod("p", labels={"app": "web"},
                           affinity=required("podAntiAffinity", term({"app": "web"}, ZONE))))
    state = CycleState()
    assert plugin.pre_filter(state, pod, infos) is None
    table = plugin.handle.snapshot.table
    rows = np.arange(len(table))
    assert plugin.filter_nodes(state, pod, table, rows).tolist() == [False, True, False, True]
    web = make_pod("w", labels={"app": "web"})
    web["spec"]["nodeName"] = "n1"
    plugin.add_pod(state, pod, PodInfo(web), infos[1])
    assert plugin.filter_nodes(state, pod, table, rows).tolist() == [False, False, False, False]
    plugin.remove_pod(state, pod, PodInfo(web), infos[1])
    assert plugin.filter_nodes(state, pod, table, rows).tolist() == [False, True, False, True]
    assert plugin.filter(state, pod, infos[2]).reasons == (ANTI,)


def test_rejections_name_the_plugin() -> None:
    plugin, infos = build({"n0": [GUARD]}, nodes=zoned_cluster(),
                          objects=FakeObjects([namespace("ns-a", team="a")]))
    state, pod = CycleState(), PodInfo(make_pod("p", "ns-a", labels={"app": "web"}))
    plugin.pre_filter(state, pod, infos)
    status = plugin.filter(state, pod, infos[0])
    assert (status.code, status.reasons, status.plugin) == (Code.UNSCHEDULABLE, (EXISTING,), "InterPodAffinity")


@pytest.mark.parametrize(("existing", "expected"), [
    pytest.param({"n0": [make_pod("a", affinity=required("podAntiAffinity", term({"app": "web"})))]}, "SKIP",
                 id="required-anti-affinity-alone-never-scores"),
    pytest.param({"n0": [make_pod("a", affinity=preferred("podAffinity", (10, term({"app": "web"}, ZONE))))]},
                 {"n0": 100, "n1": 0, "n2": 100, "n3": 0}, id="preferred-term-of-existing-pod-scores"),
])
def test_pre_score_looks_only_at_pods_that_can_score(existing: dict[str, list[dict[str, Any]]],
                                                     expected: str | dict[str, int]) -> None:
    plugin, infos = build(existing, nodes=zoned_cluster())
    state, pod = CycleState(), PodInfo(make_pod("p", labels={"app": "web"}))
    status = plugin.pre_score(state, pod, infos)
    if status is not None:
        assert status.code.name == expected
        return
    raw = np.array([plugin.score(state, pod, n) for n in infos], dtype=np.int64)
    got = plugin.normalize_score(state, pod, raw).tolist()
    assert dict(zip([n.name for n in infos], got, strict=True)) == expected


def test_filter_statuses_are_tallied_by_first_failed_check() -> None:
    web_anti = required("podAntiAffinity", term({"app": "web"}))
    plugin, infos = build({"n0": [make_pod("a", labels={"app": "db"}), make_pod("c", affinity=web_anti)],
                           "n2": [make_pod("b", labels={"app": "cache"})]}, nodes=zoned_cluster())
    pod = PodInfo(make_pod("p", labels={"app": "web"}, affinity={
        **required("podAffinity", term({"app": "db"}, ZONE)),
        **required("podAntiAffinity", term({"app": "cache"}))}))
    state = CycleState()
    assert plugin.pre_filter(state, pod, infos) is None
    table = plugin.handle.snapshot.table
    rows = np.arange(len(table))
    assert not plugin.filter_nodes(state, pod, table, rows).any()
    statuses = plugin.filter_statuses(state, pod, table, rows)
    assert [s.reasons for s in statuses] == [(EXISTING,), (AFF,), (ANTI,), (AFF,)]
    assert [s.reasons for s in statuses] == [plugin.filter(state, pod, n).reasons for n in infos]
    assert isinstance(statuses, TalliedStatuses)
    assert [(s.reasons, s.plugin) for s in statuses.distinct] == [
        ((EXISTING,), "InterPodAffinity"), ((AFF,), "InterPodAffinity"), ((ANTI,), "InterPodAffinity")]
    assert statuses.counts == [1, 2, 1]


def _random_term(rng: random.Random) -> dict[str, Any]:
    labels = {"app": rng.choice("abc")}
    if rng.random() < 0.3:
        labels["tier"] = rng.choice("xy")
    raw = term(labels, rng.choice((HOST, ZONE, ZONE)))
    if rng.random() < 0.2:  # no matchLabels pair to index it by
        raw["labelSelector"] = {"matchExpressions": [{"key": "app", "operator": "In", "values": ["a", "b"]}]}
    choice = rng.random()
    if choice < 0.15:
        raw["namespaces"] = ["ns-a", "ns-b"]
    elif choice < 0.3:
        raw["namespaceSelector"] = rng.choice(({"matchLabels": {"team": "a"}}, {}))
    if rng.random() < 0.15:
        raw["matchLabelKeys"] = ["tier"]
    return raw


def _random_pod(rng: random.Random, name: str) -> dict[str, Any]:
    labels = {"app": rng.choice("abc")}
    if rng.random() < 0.5:
        labels["tier"] = rng.choice("xy")
    affinity: dict[str, Any] = {}
    for kind in ("podAffinity", "podAntiAffinity"):
        if rng.random() < 0.2:
            affinity.setdefault(kind, {}).update(required(kind, _random_term(rng))[kind])
        if rng.random() < 0.3:
            affinity.setdefault(kind, {}).update(preferred(kind, *(
                (rng.randint(1, 100), _random_term(rng)) for _ in range(rng.choice((1, 2)))))[kind])
    return make_pod(name, rng.choice(("ns-a", "ns-b")), labels=labels, affinity=affinity or None)


def _walk_counts(plugin: Any, pod: PodInfo, infos: list[Any]) -> tuple[Any, ...]:
    ns_labels = plugin.namespace_labels(pod.namespace)
    existing = filtering.existing_anti_affinity_counts(pod, ns_labels, [n for n in infos
                                                                        if n.pods_with_required_anti_affinity])
    affinity, anti = filtering.incoming_affinity_counts(plugin._resolve(pod.required_affinity_terms),
                                                        plugin._resolve(pod.required_anti_affinity_terms), infos)
    scores = plugin._scores_by_walk(infos, pod, ns_labels, pod.preferred_affinity_terms,
                                    pod.preferred_anti_affinity_terms)
    return existing, affinity, anti, scores


@pytest.mark.parametrize("seed", range(4))
def test_index_counts_equal_the_pod_walk_as_nodes_change(seed: int) -> None:
    """Random pods and terms of every kind (namespaces, namespaceSelector, matchLabelKeys,
    selectors without a pair), then pods added and removed and a node relabelled: PreFilter's
    counts and PreScore's scores from the index are the walk's."""
    rng = random.Random(seed)
    nodes = [make_node(f"n{i}", labels={HOST: f"n{i}", **({ZONE: f"z{i % 3}"} if i % 5 else {})}) for i in range(8)]
    existing = {f"n{i}": [_random_pod(rng, f"e{i}-{j}") for j in range(rng.randrange(4))] for i in range(8)}
    plugin, infos = build(existing, nodes=nodes, objects=FakeObjects([namespace("ns-a", team="a"),
                                                                      namespace("ns-b")]))
    table = plugin.handle.snapshot.table
    for step in range(12):
        for i in range(6):
            pod = PodInfo(_random_pod(rng, f"p{step}-{i}"))
            state = CycleState()
            walk_existing, walk_affinity, walk_anti, walk_scores = _walk_counts(plugin, pod, infos)
            if plugin.pre_filter(state, pod, infos) is None:
                got = state.read(PRE_FILTER_STATE)
                assert (got.existing_anti_affinity_counts, got.affinity_counts, got.anti_affinity_counts) == (
                    walk_existing, walk_affinity, walk_anti)
            else:
                assert not walk_existing and not pod.required_affinity_terms and not pod.required_anti_affinity_terms
            plugin.pre_score(state, pod, infos)
            scored = state.get(PRE_SCORE_STATE)
            assert (scored.topology_score if scored is not None else {}) == walk_scores
        row = rng.randrange(len(infos))
        node = infos[row]
        if node.pods and rng.random() < 0.4:
            node.remove_pod(next(iter(node.pods.values())))
        elif step == 6:
            node.set_node({**node.node, "metadata": {**node.node["metadata"], "labels": {HOST: node.name,
                                                                                           ZONE: "z9"}}})
        else:
            added = _random_pod(rng, f"added-{step}")
            added["spec"]["nodeName"] = node.name
            node.add_pod(PodInfo(added))
        table.refresh([row])


def _groups(groups: Any) -> tuple[dict[Any, dict[int, int]], dict[Any, set[Any]]]:
    return ({key: dict(g.rows) for key, g in groups.by_key.items() if g.rows},
            {pair: set(same) for pair, same in groups.by_pair.items()})


def _confirm_a_pod(rng: random.Random, node: Any) -> None:
    """One of the node's pods replaced by the PodInfo of its bind's echo (same labels and terms)."""
    pod = rng.choice(list(node.pods.values()))
    node.remove_pod(pod)
    node.add_pod(pod.placed({**pod.pod}))


def _random_cluster(rng: random.Random) -> tuple[list[Any], list[Any], Any]:
    """Six nodes over three zones, each with up to three random pods: (their Node objects,
    their NodeInfos, the snapshot table)."""
    nodes = [make_node(f"n{i}", labels={HOST: f"n{i}", ZONE: f"z{i % 3}"}) for i in range(6)]
    existing = {f"n{i}": [_random_pod(rng, f"e{i}-{j}") for j in range(rng.randrange(4))] for i in range(6)}
    plugin, infos = build(existing, nodes=nodes)
    return nodes, infos, plugin.handle.snapshot.table


@pytest.mark.parametrize("seed", range(6))
def test_index_kept_by_changed_pods_equals_a_rebuild(seed: int) -> None:
    """Pods added, removed, placed (the assumed one confirmed: a new PodInfo sharing labels and
    affinity) and relabelled, a node lost and back: after every change the index kept pod by
    pod holds the groups, rows and counts of one built from scratch."""
    rng = random.Random(seed)
    nodes, infos, table = _random_cluster(rng)
    index = pod_index.AffinityIndex()
    index.update(table)
    for step in range(150):
        row = rng.randrange(len(infos))
        node = infos[row]
        choice = rng.random()
        if node.node is None:
            node.set_node(nodes[row])
        elif node.pods and choice < 0.3:
            node.remove_pod(rng.choice(list(node.pods.values())))
        elif node.pods and choice < 0.5:
            _confirm_a_pod(rng, node)
        elif node.pods and choice < 0.6:
            pod = rng.choice(list(node.pods.values()))
            relabelled = {**pod.pod, "metadata": {**pod.pod["metadata"], "labels": {"app": rng.choice("abc")}}}
            node.remove_pod(pod)
            node.add_pod(PodInfo(relabelled))
        elif choice < 0.65:
            node.remove_node()
        else:
            added = _random_pod(rng, f"added-{step}")
            added["spec"]["nodeName"] = node.name
            node.add_pod(PodInfo(added))
        table.refresh([row])
        if rng.random() < 0.7:
            index.update(table)
            rebuilt = pod_index.AffinityIndex()
            rebuilt.update(table)
            assert _groups(index.pods) == _groups(rebuilt.pods)
            assert _groups(index.terms) == _groups(rebuilt.terms)


class _FullCompare(pod_index.AffinityIndex):
    """The index as it finds changed rows without the table's log: every row's generation compared."""

    def update(self, table: Any) -> None:
        self._refresh_position = -1  # before any log: forgotten, so every row is compared
        super().update(table)


def _exactly(groups: Any) -> list[tuple[Any, list[tuple[int, int]]]]:
    return [(key, list(g.rows.items())) for key, g in groups.by_key.items()]


def _remove_or_add_pod(rng: random.Random, infos: list[NodeInfo], remove_share: float, prefix: str) -> int:
    """On a random node: remove one of its pods (at `remove_share`), else add a random one; its row."""
    row = rng.randrange(len(infos))
    node = infos[row]
    if node.pods and rng.random() < remove_share:
        node.remove_pod(rng.choice(list(node.pods.values())))
    else:
        added = _random_pod(rng, f"{prefix}-{row}-{len(node.pods)}")
        added["spec"]["nodeName"] = node.name
        node.add_pod(PodInfo(added))
    return row


@pytest.mark.parametrize("seed", range(6))
def test_index_redoing_refreshed_rows_equals_comparing_every_row(seed: int) -> None:
    """Several nodes changed between updates, refreshes of rows that did not change, of the pods
    alone, repeated rows, and gaps long enough for the table to forget: the index that redoes
    the rows refreshed since holds the groups, in the same order, of one comparing every row."""
    rng = random.Random(seed)
    _, infos, table = _random_cluster(rng)
    index, reference = pod_index.AffinityIndex(), _FullCompare()
    index.update(table)
    reference.update(table)
    for step in range(200):
        for _ in range(rng.choice((0, 1, 1, 2, 3))):
            _remove_or_add_pod(rng, infos, 0.3, f"added-{step}")
        refreshed = [rng.randrange(len(infos)) for _ in range(rng.choice((0, 1, 2, 4)))]
        table.refresh(refreshed, node_static=rng.random() < 0.5)
        if rng.random() < 0.1:  # more refreshes than the table remembers
            for _ in range(40):
                table.refresh([rng.randrange(len(infos))])
        for row in range(len(infos)):  # what the cache does: every changed node is refreshed
            if table.column(pod_index.GENERATION)[row] != infos[row].generation and rng.random() < 0.8:
                table.refresh([row])
        if rng.random() < 0.7:
            index.update(table)
            reference.update(table)
            assert _exactly(index.pods) == _exactly(reference.pods)
            assert _exactly(index.terms) == _exactly(reference.terms)
            assert [list(r) for r in index._row_pods] == [list(r) for r in reference._row_pods]


@pytest.mark.parametrize("seed", range(6))
def test_matched_term_groups_kept_equal_matching_again(seed: int) -> None:
    """Pods of a few label sets (in either order) and namespaces looked up again and again while
    term groups come and go under their pairs, or under none: the groups kept are, in order,
    the ones matching every candidate again gives."""
    rng = random.Random(seed)
    nodes = [make_node(f"n{i}", labels={HOST: f"n{i}", ZONE: f"z{i % 3}"}) for i in range(5)]
    existing = {f"n{i}": [_random_pod(rng, f"e{i}-{j}") for j in range(rng.randrange(3))] for i in range(5)}
    plugin, infos = build(existing, nodes=nodes)
    table = plugin.handle.snapshot.table
    index = pod_index.AffinityIndex()
    label_sets = [{"app": "a"}, {"app": "b", "tier": "x"}, {"tier": "x", "app": "b"}, {"app": "c", "tier": "y"},
                  {"tier": "y"}, {}]
    namespace_labels = [{}, {"team": "a"}, {"team": "a", "x": "1"}]
    kinds = [frozenset((pod_index.REQUIRED_ANTI,)), frozenset((pod_index.PREFERRED_AFFINITY, pod_index.PREFERRED_ANTI)),
             frozenset((pod_index.PREFERRED_AFFINITY, pod_index.PREFERRED_ANTI, pod_index.REQUIRED_AFFINITY))]
    for step in range(120):
        row = _remove_or_add_pod(rng, infos, 0.4, f"added-{step}")
        table.refresh([row])
        index.update(table)
        for _ in range(rng.randrange(1, 6)):
            pod = PodInfo(make_pod(f"p{step}", rng.choice(("ns-a", "ns-b")), labels=dict(rng.choice(label_sets))))
            ns_labels = rng.choice(namespace_labels)
            wanted = rng.choice(kinds)
            again = [g for g in index.terms.candidates([None, *pod.labels.items()])
                     if g.kind in wanted and g.representative.matches(pod, ns_labels)]
            assert [id(g) for g in index.matching_term_groups(pod, ns_labels, wanted)] == [id(g) for g in again]


@pytest.mark.parametrize("seed", range(4))
def test_batched_filter_and_score_equal_node_by_node(seed: int) -> None:
    """Random pods over random existing pods (nodes with and without the topology labels): the
    batched Filter's mask and statuses and the batched Score are the per-node ones."""
    rng = random.Random(seed)
    nodes = [make_node(f"n{i}", labels={HOST: f"n{i}", **({ZONE: f"z{i % 3}"} if i % 4 else {})}) for i in range(9)]
    existing = {f"n{i}": [_random_pod(rng, f"e{i}-{j}") for j in range(rng.randrange(4))] for i in range(9)}
    plugin, infos = build(existing, nodes=nodes, objects=FakeObjects([namespace("ns-a", team="a"),
                                                                      namespace("ns-b")]))
    table = plugin.handle.snapshot.table
    for i in range(60):
        raw = _random_pod(rng, f"p{i}")
        for kind in ("podAffinity", "podAntiAffinity"):  # some with two required terms of a kind
            if rng.random() < 0.3:
                affinity = raw["spec"].setdefault("affinity", {}).setdefault(kind, {})
                affinity.setdefault("requiredDuringSchedulingIgnoredDuringExecution", []).extend(
                    [_random_term(rng), _random_term(rng)])
        pod = PodInfo(raw)
        state = CycleState()
        rows = np.array(sorted(rng.sample(range(len(infos)), rng.randrange(1, len(infos) + 1))), dtype=np.int64)
        if plugin.pre_filter(state, pod, infos) is None:
            want = [plugin.filter(state, pod, infos[r]) for r in rows.tolist()]
            assert plugin.filter_nodes(state, pod, table, rows).tolist() == [s is None for s in want]
            rejected = np.array([r for r, s in zip(rows.tolist(), want, strict=True) if s is not None],
                                dtype=np.int64)
            statuses = plugin.filter_statuses(state, pod, table, rejected)
            assert [statuses[j] for j in range(len(rejected))] == [s for s in want if s is not None]
        if plugin.pre_score(state, pod, infos) is None:
            got = plugin.score_nodes(state, pod, table, rows)
            assert got.dtype == np.int64
            assert got.tolist() == [plugin.score(state, pod, infos[r]) for r in rows.tolist()]


@pytest.mark.parametrize("seed", range(4))
def test_normalize_is_upstreams_float_formula(seed: int) -> None:
    """NormalizeScore as upstream computes it, int64(float64(MaxNodeScore) * (float64(s - min) /
    float64(max - min))), per score in Python: spreads that do not divide 100 (where x / spread
    * 100 falls just below an integer, as 29 / 100 * 100 does), negative scores, one score, all equal."""
    rng = random.Random(seed)
    for _ in range(200):
        spread = rng.choice((1, 3, 7, 100, 101, 299, 1000, rng.randrange(1, 10**6)))
        low = rng.randrange(-10**6, 10**6)
        values = [low, low + spread] if rng.random() < 0.9 else [low]
        values += [low + rng.randrange(spread + 1) for _ in range(rng.randrange(0, 40))]
        rng.shuffle(values)
        scores = np.array(values, dtype=np.int64)
        high = max(values)
        want = [int(100.0 * (float(v - low) / float(high - low))) if high > low else 0 for v in values]
        got = scoring.normalize(scores.copy())
        assert got.dtype == np.int64
        assert got.tolist() == want
    assert scoring.normalize(np.array([29, 0, 100], dtype=np.int64)).tolist() == [28, 0, 100]
    assert scoring.normalize(np.zeros(0, dtype=np.int64)).tolist() == []


def _written_term(rng: random.Random) -> dict[str, Any]:
    """Terms near the plain shape (a topology key and matchLabels alone) and just off it."""
    labels = {rng.choice(("app", "tier")): rng.choice("ab")}
    if rng.random() < 0.3:
        labels["v"] = rng.choice(("1", "2"))
    raw: dict[str, Any] = term(labels, rng.choice((HOST, ZONE)))
    choice = rng.random()
    if choice < 0.1:
        raw["labelSelector"]["matchExpressions"] = [{"key": "app", "operator": "Exists"}]
    elif choice < 0.2:
        raw["namespaces"] = [rng.choice(("ns-a", "ns-b"))]
    elif choice < 0.3:
        raw["matchLabelKeys"] = ["v"]
    elif choice < 0.35:
        del raw["topologyKey"]
    elif choice < 0.4:
        raw["labelSelector"] = {}
    return raw


def test_term_keys_group_as_the_written_terms_do() -> None:
    """Term groups are keyed without JSON for plain terms: two terms share a key exactly when
    their terms as written, the owner's values of matchLabelKeys and the namespaces do."""
    rng = random.Random(3)
    written = []
    for i in range(400):
        raw = _written_term(rng)
        pod = PodInfo(make_pod(f"p{i}", rng.choice(("ns-a", "ns-b")), labels={"v": rng.choice(("1", "2"))},
                               affinity=required("podAntiAffinity", raw)))
        (parsed,) = pod.required_anti_affinity_terms
        general = json.dumps([raw, [pod.labels.get(k) for k in raw.get("matchLabelKeys") or ()],
                              sorted(parsed.namespaces)], sort_keys=True, default=str)
        written.append((pod_index._term_key(raw, parsed, pod), general))
    assert any(isinstance(key, tuple) for key, _ in written)
    assert any(isinstance(key, str) for key, _ in written)
    for key, general in written:
        for other_key, other_general in written:
            assert (key == other_key) == (general == other_general)


@pytest.mark.parametrize("seed", range(6))
def test_group_values_kept_equal_counting_the_rows(seed: int) -> None:
    """Pods added, removed and placed, nodes relabelled (a zone moved, a label dropped) and lost:
    what each group keeps per topology value, asked for at random times, is the count over its
    rows of their nodes' values."""
    rng = random.Random(seed)
    nodes, infos, table = _random_cluster(rng)
    index = pod_index.AffinityIndex()
    for step in range(200):
        row = rng.randrange(len(infos))
        node = infos[row]
        choice = rng.random()
        if node.node is None:
            node.set_node(nodes[row])
        elif choice < 0.15:
            labels = {HOST: node.name, **({ZONE: rng.choice(("z0", "z1", "z9"))} if rng.random() < 0.8 else {})}
            node.set_node({**node.node, "metadata": {**node.node["metadata"], "labels": labels}})
        elif choice < 0.2:
            node.remove_node()
        elif node.pods and choice < 0.45:
            node.remove_pod(rng.choice(list(node.pods.values())))
        elif node.pods and choice < 0.55:
            _confirm_a_pod(rng, node)
        else:
            row = _remove_or_add_pod(rng, infos, 0.0, f"added-{step}")
        table.refresh([row])
        index.update(table)
        for groups in (index.pods, index.terms):
            for group in groups.by_key.values():
                if rng.random() < 0.5:
                    continue
                key = rng.choice((HOST, ZONE))
                want: dict[str, dict[str, int]] = {}
                for r, n in group.rows.items():
                    value = table.nodes[r].labels.get(key)
                    if value is not None:
                        want.setdefault(key, {})[value] = want.get(key, {}).get(value, 0) + 2 * n
                got: dict[str, dict[str, int]] = {}
                index.per_value(group, key, 2, got)
                assert got == want


def test_pre_score_looks_again_when_the_cluster_changed_since_pre_filter() -> None:
    """PreScore reads the term groups PreFilter found only while the table and the namespace
    labels are the ones PreFilter saw: a pod bound in between (its preferred term matching the
    incoming pod), or the namespace relabelled (a namespaceSelector now matching), counts."""
    guard = make_pod("guard", labels={"app": "db"}, affinity=required("podAntiAffinity", term({"app": "cache"})))
    objects = FakeObjects([namespace("default")])
    plugin, infos = build({"n0": [guard]}, nodes=zoned_cluster(), objects=objects)
    table = plugin.handle.snapshot.table
    pod = PodInfo(make_pod("p", labels={"app": "web"}))
    state = CycleState()
    assert plugin.pre_filter(state, pod, infos) is not None  # SKIP: nothing rejects it
    scorer = make_pod("s", labels={"app": "db"}, affinity=preferred("podAffinity", (10, term({"app": "web"}, ZONE))))
    scorer["spec"]["nodeName"] = "n1"
    infos[1].add_pod(PodInfo(scorer))
    table.refresh([1])
    assert plugin.pre_score(state, pod, infos) is None
    assert state.read(PRE_SCORE_STATE).topology_score == {ZONE: {"z1": 10}}

    selecting = make_pod("t", "other", labels={"app": "db"}, affinity=preferred(
        "podAffinity", (5, term({"app": "web"}, namespaceSelector={"matchLabels": {"team": "a"}}))))
    selecting["spec"]["nodeName"] = "n2"
    infos[2].add_pod(PodInfo(selecting))
    table.refresh([2])
    state = CycleState()
    plugin.pre_filter(state, pod, infos)
    objects.objects = [namespace("default", team="a")]
    assert plugin.pre_score(state, pod, infos) is None
    assert state.read(PRE_SCORE_STATE).topology_score == {ZONE: {"z1": 10}, HOST: {"n2": 5}}
