"""InterPodAffinity: Filter reasons/codes, symmetry, namespaces, matchLabelKeys, scores, add/remove."""

from __future__ import annotations

from typing import Any

import pytest

from kopfsched.framework.cycle_state import CycleState
from kopfsched.framework.registry import ArgsError
from kopfsched.framework.status import Code
from kopfsched.framework.types import PodInfo
from kopfsched.plugins.interpodaffinity import PLUGIN, InterPodAffinityArgs
from kopfsched.plugins.interpodaffinity.plugin import PRE_FILTER_STATE
from kopfsched.testing import FakeObjects
from tests.builders import make_node, make_pod
from tests.plugins.affinity import AFF, ANTI, EXISTING, ZONE, build, namespace, preferred, required, term
from tests.plugins.outcomes import filter_outcomes, score_outcomes

U, UU = "UNSCHEDULABLE", "UNSCHEDULABLE_AND_UNRESOLVABLE"

FILTER_CASES = [
    pytest.param({}, make_pod("p"), {"<prefilter>": ("SKIP", ())}, id="no-affinity-skips"),
    pytest.param({"n1": [make_pod("a", labels={"app": "db"})]},
                 make_pod("p", affinity=required("podAffinity", term({"app": "db"}, ZONE))),
                 {"n3": (UU, (AFF,))}, id="affinity-zone"),
    pytest.param({"n1": [make_pod("a", labels={"app": "db"})]},
                 make_pod("p", affinity=required("podAntiAffinity", term({"app": "db"}, ZONE))),
                 {"n1": (U, (ANTI,)), "n2": (U, (ANTI,))}, id="anti-affinity-zone"),
    pytest.param({"n1": [make_pod("a", labels={"app": "db"},
                                  affinity=required("podAntiAffinity", term({"app": "web"})))]},
                 make_pod("p", labels={"app": "web"}),
                 {"n1": (U, (EXISTING,))}, id="symmetry-existing-anti-affinity"),
    pytest.param({}, make_pod("p", labels={"app": "web"},
                              affinity=required("podAffinity", term({"app": "web"}, ZONE))),
                 {}, id="self-affinity-first-pod"),
    pytest.param({}, make_pod("p", labels={"app": "other"},
                              affinity=required("podAffinity", term({"app": "web"}, ZONE))),
                 {"n1": (UU, (AFF,)), "n2": (UU, (AFF,)), "n3": (UU, (AFF,))}, id="affinity-nobody-matches"),
    pytest.param({}, make_pod("p", labels={"app": "web"},
                              affinity=required("podAffinity", term({"app": "web"}, "rack"))),
                 {"n1": (UU, (AFF,)), "n2": (UU, (AFF,)), "n3": (UU, (AFF,))}, id="affinity-missing-topology-label"),
    pytest.param({"n1": [make_pod("a", "other", labels={"app": "db"})]},
                 make_pod("p", affinity=required("podAntiAffinity", term({"app": "db"}, ZONE))),
                 {}, id="anti-affinity-other-namespace-ignored"),
    pytest.param({"n1": [make_pod("a", "other", labels={"app": "db"})]},
                 make_pod("p", affinity=required("podAntiAffinity", term({"app": "db"}, ZONE, namespaces=["other"]))),
                 {"n1": (U, (ANTI,)), "n2": (U, (ANTI,))}, id="anti-affinity-namespaces-list"),
    pytest.param({"n1": [make_pod("a", labels={"app": "db", "ver": "1"})],
                  "n3": [make_pod("b", labels={"app": "db", "ver": "2"})]},
                 make_pod("p", labels={"ver": "2"},
                          affinity=required("podAntiAffinity", term({"app": "db"}, ZONE, matchLabelKeys=["ver"]))),
                 {"n3": (U, (ANTI,))}, id="match-label-keys"),
    pytest.param({"n1": [make_pod("a", labels={"app": "db", "ver": "1"})],
                  "n3": [make_pod("b", labels={"app": "db", "ver": "2"})]},
                 make_pod("p", labels={"ver": "2"},
                          affinity=required("podAntiAffinity", term({"app": "db"}, ZONE, mismatchLabelKeys=["ver"]))),
                 {"n1": (U, (ANTI,)), "n2": (U, (ANTI,))}, id="mismatch-label-keys"),
]


@pytest.mark.parametrize(("existing", "pod", "expected"), FILTER_CASES)
def test_filter(existing: dict[str, list[dict[str, Any]]], pod: dict[str, Any], expected: dict[str, tuple]) -> None:
    plugin, infos = build(existing)
    assert filter_outcomes(plugin, pod, infos) == expected


def test_affinity_rejection_code_is_unresolvable_and_anti_is_unschedulable() -> None:
    plugin, infos = build({"n1": [make_pod("a", labels={"app": "db"})]})
    state, pod = CycleState(), PodInfo(make_pod("p", affinity={
        **required("podAntiAffinity", term({"app": "db"}))}))
    plugin.pre_filter(state, pod, infos)
    assert plugin.filter(state, pod, infos[0]).code is Code.UNSCHEDULABLE


@pytest.mark.parametrize(("ns_selector", "expected"), [
    pytest.param({"matchLabels": {"team": "a"}}, {"n1": (U, (ANTI,)), "n2": (U, (ANTI,))}, id="selects-ns"),
    pytest.param({"matchLabels": {"team": "b"}}, {"n3": (U, (ANTI,))}, id="selects-other-ns"),
    pytest.param({"matchLabels": {"team": "c"}}, {}, id="selects-no-ns"),
    pytest.param({}, {"n1": (U, (ANTI,)), "n2": (U, (ANTI,)), "n3": (U, (ANTI,))}, id="empty-selects-all"),
])
def test_namespace_selector(ns_selector: dict[str, Any], expected: dict[str, tuple]) -> None:
    objects = FakeObjects([namespace("ns-a", team="a"), namespace("ns-b", team="b"), namespace("default")])
    plugin, infos = build({"n1": [make_pod("a", "ns-a", labels={"app": "db"})],
                           "n3": [make_pod("b", "ns-b", labels={"app": "db"})]}, objects=objects)
    pod = make_pod("p", affinity=required("podAntiAffinity", term({"app": "db"}, ZONE, namespaceSelector=ns_selector)))
    assert filter_outcomes(plugin, pod, infos) == expected


def test_existing_pod_namespace_selector_uses_incoming_namespace_labels() -> None:
    objects = FakeObjects([namespace("ns-a", team="a")])
    guard = make_pod("a", "other", labels={"app": "db"}, affinity=required(
        "podAntiAffinity", term({"app": "web"}, namespaceSelector={"matchLabels": {"team": "a"}})))
    plugin, infos = build({"n2": [guard]}, objects=objects)
    assert filter_outcomes(plugin, make_pod("p", "ns-a", labels={"app": "web"}), infos) == {"n2": (U, (EXISTING,))}
    # Nothing can reject a pod from another namespace: PreFilter skips.
    assert filter_outcomes(plugin, make_pod("q", "ns-b", labels={"app": "web"}), infos) == {"<prefilter>": ("SKIP", ())}


@pytest.mark.parametrize("delta", ["add", "remove"])
def test_add_remove_pod_matches_fresh_prefilter(delta: str) -> None:
    db = make_pod("a", labels={"app": "db"}, affinity=required("podAntiAffinity", term({"app": "web"}, ZONE)))
    pod = PodInfo(make_pod("p", labels={"app": "web"}, affinity={
        **required("podAffinity", term({"app": "db"}, ZONE)),
        **required("podAntiAffinity", term({"app": "web"}))}))
    with_db, infos_with = build({"n3": [db]})
    without, infos_without = build({})
    before, after = (infos_without, infos_with) if delta == "add" else (infos_with, infos_without)
    plugin = without if delta == "add" else with_db
    state = CycleState()
    plugin.pre_filter(state, pod, before)
    db_info = next(iter(infos_with[2].pods.values()))
    if delta == "add":
        plugin.add_pod(state, pod, db_info, infos_with[2])
    else:
        plugin.remove_pod(state, pod, db_info, infos_with[2])
    fresh = CycleState()
    (with_db if delta == "add" else without).pre_filter(fresh, pod, after)
    got, want = state.read(PRE_FILTER_STATE), fresh.read(PRE_FILTER_STATE)
    assert got.existing_anti_affinity_counts == want.existing_anti_affinity_counts
    assert got.affinity_counts == want.affinity_counts
    assert got.anti_affinity_counts == want.anti_affinity_counts




SCORE_CASES = [
    pytest.param({}, make_pod("p"), None, "SKIP", id="nothing-to-score"),
    pytest.param({"n1": [make_pod("a", labels={"app": "db"})]},
                 make_pod("p", affinity=preferred("podAffinity", (5, term({"app": "db"}, ZONE)))), None,
                 {"n1": 100, "n2": 100, "n3": 0}, id="preferred-affinity-zone"),
    pytest.param({"n1": [make_pod("a", labels={"app": "db"})], "n3": [make_pod("b", labels={"app": "db"})]},
                 make_pod("p", affinity={**preferred("podAffinity", (4, term({"app": "db"}))),
                                         **preferred("podAntiAffinity", (2, term({"app": "db"}, ZONE)))}), None,
                 # raw: n1 4-2=2, n2 -2, n3 4-2=2 -> min-max
                 {"n1": 100, "n2": 0, "n3": 100}, id="preferred-affinity-and-anti"),
    pytest.param({"n2": [make_pod("a", labels={"app": "db"},
                                  affinity=required("podAffinity", term({"app": "web"}, ZONE)))]},
                 make_pod("p", labels={"app": "web"}), InterPodAffinityArgs(hard_pod_affinity_weight=7),
                 {"n1": 100, "n2": 100, "n3": 0}, id="existing-required-affinity-hard-weight"),
    pytest.param({"n2": [make_pod("a", labels={"app": "db"},
                                  affinity=required("podAffinity", term({"app": "web"}, ZONE)))]},
                 make_pod("p", labels={"app": "web"}), InterPodAffinityArgs(hard_pod_affinity_weight=0),
                 "SKIP", id="hard-weight-zero"),
    pytest.param({"n1": [make_pod("a", labels={"app": "db"}, affinity={
                    **preferred("podAffinity", (3, term({"app": "web"}))),
                    **preferred("podAntiAffinity", (9, term({"app": "web"}, ZONE)))})]},
                 make_pod("p", labels={"app": "web"}), None,
                 # raw: n1 3-9=-6, n2 -9, n3 0
                 {"n1": 33, "n2": 0, "n3": 100}, id="existing-preferred-terms"),
    pytest.param({"n1": [make_pod("a", labels={"app": "db"}, affinity=preferred(
                    "podAffinity", (3, term({"app": "web"}))))]},
                 make_pod("p", labels={"app": "web"}),
                 InterPodAffinityArgs(ignore_preferred_terms_of_existing_pods=True),
                 "SKIP", id="ignore-preferred-terms-of-existing-pods"),
]


@pytest.mark.parametrize(("existing", "pod", "args", "expected"), SCORE_CASES)
def test_score(existing: dict[str, list[dict[str, Any]]], pod: dict[str, Any], args: InterPodAffinityArgs | None,
               expected: dict[str, int] | str) -> None:
    plugin, infos = build(existing, args=args)
    assert score_outcomes(plugin, pod, infos) == expected


@pytest.mark.parametrize(("raw", "expected"), [
    pytest.param({}, InterPodAffinityArgs(1, False), id="defaults"),
    pytest.param({"hardPodAffinityWeight": 100, "ignorePreferredTermsOfExistingPods": True},
                 InterPodAffinityArgs(100, True), id="set"),
])
def test_args(raw: dict[str, Any], expected: InterPodAffinityArgs) -> None:
    assert PLUGIN.decode_args(raw) == expected


@pytest.mark.parametrize(("raw", "problems"), [
    # validation_pluginargs.go validateHardPodAffinityWeight: "not in valid range [%d, %d]".
    pytest.param({"hardPodAffinityWeight": 101},
                 [("hardPodAffinityWeight", "Invalid value: 101: not in valid range [0, 100]")], id="above"),
    pytest.param({"hardPodAffinityWeight": -1},
                 [("hardPodAffinityWeight", "Invalid value: -1: not in valid range [0, 100]")], id="negative"),
    pytest.param({"bogus": 1}, [("bogus", "unknown field")], id="unknown-field"),
])
def test_args_invalid(raw: dict[str, Any], problems: list[tuple[str, str]]) -> None:
    with pytest.raises(ArgsError) as error:
        PLUGIN.decode_args(raw)
    assert error.value.problems == problems


def test_queueing_hints() -> None:
    plugin, _ = build({})
    target = make_pod("p", labels={"app": "web"}, affinity={
        **required("podAffinity", term({"app": "db"}, ZONE)),
        **required("podAntiAffinity", term({"app": "cache"}))})
    db = make_pod("a", labels={"app": "db"}, node_name="n1")
    cache = make_pod("c", labels={"app": "cache"}, node_name="n1")
    unscheduled = make_pod("u", labels={"app": "db"})
    q, s = "QUEUE", "SKIP"
    hint = plugin.is_schedulable_after_pod_change
    assert hint(target, None, db).name == q
    assert hint(target, None, cache).name == s
    assert hint(target, None, unscheduled).name == s
    assert hint(target, cache, None).name == q
    assert hint(target, db, None).name == s
    node_hint = plugin.is_schedulable_after_node_change
    assert node_hint(target, None, make_node("x", labels={ZONE: "z9"})).name == q
    assert node_hint(PodInfo(make_pod("p", affinity=required("podAffinity", term({"a": "b"}, "rack")))),
                     None, make_node("x")).name == s
