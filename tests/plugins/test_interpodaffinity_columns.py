"""InterPodAffinity's PreFilter counts from its index of alike pods and terms: equal to the pod
walk, kept current as nodes change, and the batched Filter's cached lookups dropped when AddPod/RemovePod run."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from kopfsched.framework.cycle_state import CycleState
from kopfsched.framework.status import Code, TalliedStatuses
from kopfsched.framework.types import PodInfo
from kopfsched.plugins.interpodaffinity import filtering
from kopfsched.plugins.interpodaffinity.plugin import PRE_FILTER_STATE
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
