"""PodTopologySpread: Filter reasons/codes, minDomains, inclusion policies, scores, defaulting, add/remove."""

from __future__ import annotations

from typing import Any

import pytest

from kopfsched.framework.cycle_state import CycleState
from kopfsched.framework.registry import ArgsError
from kopfsched.framework.types import NodeInfo, PodInfo
from kopfsched.plugins.podtopologyspread import PLUGIN, PodTopologySpread, PodTopologySpreadArgs
from kopfsched.plugins.podtopologyspread.plugin import PRE_FILTER_STATE
from kopfsched.testing import FakeObjects, make_handle
from tests.builders import make_node, make_pod, node_info, taint
from tests.plugins.outcomes import filter_outcomes, score_outcomes

SPREAD = "node(s) didn't match pod topology spread constraints"
MISSING = "node(s) didn't match pod topology spread constraints (missing required label)"
ZONE = "topology.kubernetes.io/zone"
U, UU = "UNSCHEDULABLE", "UNSCHEDULABLE_AND_UNRESOLVABLE"
WEB = {"app": "web"}


def constraint(key: str = ZONE, max_skew: int = 1, action: str = "DoNotSchedule", **extra: Any) -> dict[str, Any]:
    return {"maxSkew": max_skew, "topologyKey": key, "whenUnsatisfiable": action,
            "labelSelector": {"matchLabels": WEB}, **extra}


def web(name: str, **kw: Any) -> dict[str, Any]:
    return make_pod(name, labels={**WEB, **kw.pop("labels", {})}, **kw)


def incoming(*constraints: dict[str, Any], **kw: Any) -> dict[str, Any]:
    return web("p", topologySpreadConstraints=list(constraints), **kw)


def cluster(extra: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    return [make_node("n1", labels={ZONE: "z1"}), make_node("n2", labels={ZONE: "z1"}),
            make_node("n3", labels={ZONE: "z2"}), *(extra or [])]


def build(pods_by_node: dict[str, list[dict[str, Any]]], nodes: list[dict[str, Any]] | None = None,
          args: PodTopologySpreadArgs | None = None, objects: FakeObjects | None = None,
          ) -> tuple[PodTopologySpread, list[NodeInfo]]:
    infos = [node_info(n, *pods_by_node.get(n["metadata"]["name"], [])) for n in nodes or cluster()]
    handle = make_handle(infos)
    if objects is not None:
        handle.objects = objects
    return PodTopologySpread(args or PodTopologySpreadArgs(defaulting_type="List"), handle), infos


FILTER_CASES = [
    pytest.param({}, web("p"), None, {"<prefilter>": ("SKIP", ())}, id="no-constraints-skips"),
    pytest.param({"n1": [web("a"), web("b")]}, incoming(constraint()), None,
                 {"n1": (U, (SPREAD,)), "n2": (U, (SPREAD,))}, id="zone-skew"),
    pytest.param({"n1": [web("a")]}, incoming(constraint(max_skew=2)), None, {}, id="zone-skew-within-max"),
    pytest.param({"n1": [web("a"), make_pod("x", labels={"app": "db"})]}, incoming(constraint(max_skew=1)), None,
                 {"n1": (U, (SPREAD,)), "n2": (U, (SPREAD,))}, id="non-matching-pods-not-counted"),
    pytest.param({}, incoming(constraint()), cluster([make_node("n4")]),
                 {"n4": (UU, (MISSING,))}, id="missing-topology-label"),
    pytest.param({"n1": [web("a")], "n3": [web("b")]}, incoming(constraint(minDomains=3)), None,
                 {"n1": (U, (SPREAD,)), "n2": (U, (SPREAD,)), "n3": (U, (SPREAD,))}, id="min-domains-not-reached"),
    pytest.param({"n1": [web("a")], "n3": [web("b")], "n4": [web("c")]}, incoming(constraint(minDomains=3)),
                 cluster([make_node("n4", labels={ZONE: "z3"})]), {}, id="min-domains-reached"),
    pytest.param({"n1": [web("a")]}, incoming(constraint(), node_selector={ZONE: "z1"}), None,
                 {}, id="node-affinity-honor-drops-other-zones"),
    pytest.param({"n1": [web("a")]},
                 incoming(constraint(nodeAffinityPolicy="Ignore"), node_selector={ZONE: "z1"}), None,
                 {"n1": (U, (SPREAD,)), "n2": (U, (SPREAD,))}, id="node-affinity-ignore"),
    pytest.param({"n1": [web("a")]}, incoming(constraint(nodeTaintsPolicy="Honor")),
                 [make_node("n1", labels={ZONE: "z1"}), make_node("n3", labels={ZONE: "z2"}, taints=[taint("t")])],
                 {}, id="node-taints-honor-drops-tainted-zone"),
    pytest.param({"n1": [web("a")]}, incoming(constraint()),
                 [make_node("n1", labels={ZONE: "z1"}), make_node("n3", labels={ZONE: "z2"}, taints=[taint("t")])],
                 {"n1": (U, (SPREAD,))}, id="node-taints-ignore-by-default"),
    pytest.param({"n1": [web("a", labels={"rev": "1"}), web("b", labels={"rev": "1"})],
                  "n3": [web("c", labels={"rev": "2"})]},
                 incoming(constraint(matchLabelKeys=["rev"]), labels={"rev": "2"}), None,
                 {"n3": (U, (SPREAD,))}, id="match-label-keys"),
    pytest.param({"n1": [web("a", namespace="other"), web("b", namespace="other")]}, incoming(constraint()), None,
                 {}, id="other-namespace-not-counted"),
]


@pytest.mark.parametrize(("existing", "pod", "nodes", "expected"), FILTER_CASES)
def test_filter(existing: dict[str, list[dict[str, Any]]], pod: dict[str, Any], nodes: list[dict[str, Any]] | None,
                expected: dict[str, tuple]) -> None:
    plugin, infos = build(existing, nodes)
    assert filter_outcomes(plugin, pod, infos) == expected


def test_multi_zone_min_domains_state() -> None:
    nodes = cluster([make_node("n4", labels={ZONE: "z3"})])
    plugin, infos = build({"n1": [web("a"), web("b")], "n3": [web("c")]}, nodes)
    state = CycleState()
    plugin.pre_filter(state, PodInfo(incoming(constraint(max_skew=2, minDomains=4))), infos)
    s = state.read(PRE_FILTER_STATE)
    assert s.tp_value_to_match_num == [{"z1": 2, "z2": 1, "z3": 0}]
    assert s.critical_paths[0].min_match_num == 0
    assert s.min_match_num(0) == 0
    # z1: 2 + 1 - 0 > 2 rejects; z2 and z3 pass.
    assert filter_outcomes(plugin, incoming(constraint(max_skew=2, minDomains=4)), infos) == {
        "n1": (U, (SPREAD,)), "n2": (U, (SPREAD,))}


@pytest.mark.parametrize("delta", ["add", "remove"])
def test_add_remove_pod_matches_fresh_prefilter(delta: str) -> None:
    extra = web("x")
    pod = PodInfo(incoming(constraint()))
    base, base_infos = build({"n1": [web("a")], "n3": [web("b")]})
    more, more_infos = build({"n1": [web("a")], "n3": [web("b"), extra]})
    plugin, before, after = (base, base_infos, more) if delta == "add" else (more, more_infos, base)
    state = CycleState()
    plugin.pre_filter(state, pod, before)
    extra_info = next(p for p in more_infos[2].pods.values() if p.name == "x")
    (plugin.add_pod if delta == "add" else plugin.remove_pod)(state, pod, extra_info, more_infos[2])
    fresh = CycleState()
    after.pre_filter(fresh, pod, after.handle.snapshot.node_infos())
    got, want = state.read(PRE_FILTER_STATE), fresh.read(PRE_FILTER_STATE)
    assert got.tp_value_to_match_num == want.tp_value_to_match_num
    assert got.min_match_num(0) == want.min_match_num(0)




def service(selector: dict[str, str]) -> dict[str, Any]:
    return {"kind": "Service", "metadata": {"name": "svc", "namespace": "default"}, "spec": {"selector": selector}}


SCORE_CASES = [
    # weight ln(2 zones + 2); raw n1=n2=round(2*1.386)=3, n3=round(1.386)=1; 100*(3+1-s)/3.
    pytest.param({"n1": [web("a"), web("b")], "n3": [web("c")]}, incoming(constraint(action="ScheduleAnyway")),
                 None, None, None, {"n1": 33, "n2": 33, "n3": 100}, id="zone-schedule-anyway"),
    pytest.param({}, incoming(constraint(action="ScheduleAnyway")), None, None, None,
                 {"n1": 100, "n2": 100, "n3": 100}, id="all-empty"),
    pytest.param({"n1": [web("a")]}, incoming(constraint(action="ScheduleAnyway")),
                 cluster([make_node("n4")]), None, None, {"n1": 0, "n2": 0, "n3": 100, "n4": 0},
                 id="ignored-node-scores-0"),
    pytest.param({}, incoming(constraint()), None, None, None, "SKIP", id="only-hard-constraints"),
    # System: hostname (w ln5, skew 3) + zone (w ln4, skew 5); raw n1=9, n2=7, n3=6.
    pytest.param({"n1": [web("a")]}, web("p"), None, PodTopologySpreadArgs(), FakeObjects([service(WEB)]),
                 {"n1": 66, "n2": 88, "n3": 100}, id="system-defaulting-with-service"),
    pytest.param({"n1": [web("a")]}, web("p"), None, PodTopologySpreadArgs(), FakeObjects(), "SKIP",
                 id="system-defaulting-without-selector"),
]


@pytest.mark.parametrize(("existing", "pod", "nodes", "args", "objects", "expected"), SCORE_CASES)
def test_score(existing: dict[str, list[dict[str, Any]]], pod: dict[str, Any], nodes: list[dict[str, Any]] | None,
               args: PodTopologySpreadArgs | None, objects: FakeObjects | None, expected: dict[str, int] | str) -> None:
    plugin, infos = build(existing, nodes, args, objects)
    assert score_outcomes(plugin, pod, infos) == expected


def test_filter_with_system_defaults_skips() -> None:
    plugin, infos = build({}, args=PodTopologySpreadArgs(), objects=FakeObjects([service(WEB)]))
    assert filter_outcomes(plugin, web("p"), infos) == {"<prefilter>": ("SKIP", ())}


@pytest.mark.parametrize(("raw", "expected"), [
    pytest.param({}, PodTopologySpreadArgs(), id="defaults-to-system"),
    pytest.param({"defaultingType": "List", "defaultConstraints": [
        {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"}]},
        PodTopologySpreadArgs(({"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"},), "List"),
        id="list"),
])
def test_args(raw: dict[str, Any], expected: PodTopologySpreadArgs) -> None:
    assert PLUGIN.decode_args(raw) == expected


@pytest.mark.parametrize(("raw", "path"), [
    pytest.param({"defaultingType": "Other"}, "defaultingType", id="bad-type"),
    pytest.param({"defaultConstraints": [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"}]},
                 "defaultingType", id="system-with-constraints"),
    pytest.param({"defaultingType": "List", "defaultConstraints": [
        {"maxSkew": 0, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"}]},
        "defaultConstraints[0].maxSkew", id="max-skew"),
    pytest.param({"defaultingType": "List", "defaultConstraints": [
        {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {}}]},
        "defaultConstraints[0].labelSelector", id="selector-forbidden"),
])
def test_args_invalid(raw: dict[str, Any], path: str) -> None:
    with pytest.raises(ArgsError) as error:
        PLUGIN.decode_args(raw)
    assert path in [p for p, _ in error.value.problems]


@pytest.mark.parametrize(("constraint", "problems"), [
    # Upstream's validateWhenUnsatisfiable: Required when empty, NotSupported (sorted) otherwise.
    pytest.param({"maxSkew": 1, "topologyKey": ZONE},
                 [("defaultConstraints[0].whenUnsatisfiable", "Required value: can not be empty")],
                 id="when-unsatisfiable-missing"),
    pytest.param({"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "Sometimes"},
                 [("defaultConstraints[0].whenUnsatisfiable",
                   'Unsupported value: "Sometimes": supported values: "DoNotSchedule", "ScheduleAnyway"')],
                 id="when-unsatisfiable-unsupported"),
    # A missing maxSkew is 0 after decoding.
    pytest.param({"topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"},
                 [("defaultConstraints[0].maxSkew", "Invalid value: 0: not in valid range (0, inf)")],
                 id="max-skew-missing"),
])
def test_args_default_constraint_problems(constraint: dict[str, Any], problems: list[tuple[str, str]]) -> None:
    with pytest.raises(ArgsError) as error:
        PLUGIN.decode_args({"defaultingType": "List", "defaultConstraints": [constraint]})
    assert error.value.problems == problems
