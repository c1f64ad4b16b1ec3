import itertools

import numpy as np
import pytest

from kopfsched.framework.cycle_state import CycleState
from kopfsched.framework.events import ActionType, EventResource, QueueingHint
from kopfsched.framework.node_table import NodeTable
from kopfsched.framework.status import Code
from kopfsched.framework.types import NodeInfo, PodInfo
from kopfsched.plugins.helper.normalize_score import default_normalize_score
from kopfsched.plugins.helper.tolerations import tolerates_taint
from kopfsched.plugins.tainttoleration import (
    PLUGIN,
    TaintToleration,
    is_schedulable_after_node_change,
    is_schedulable_after_pod_toleration_change,
)
from tests.builders import make_node, make_pod, taint

REASON = "node(s) had untolerated taint(s)"


def tol(key: str = "", value: str = "", effect: str = "", operator: str = "") -> dict:
    t = {"key": key, "value": value, "effect": effect}
    if operator:
        t["operator"] = operator
    return {k: v for k, v in t.items() if v}


@pytest.mark.parametrize(
    ("toleration", "tainted", "tolerated"),
    [
        pytest.param(tol("foo", "bar", "NoSchedule"), taint("foo", "bar"), True, id="equal-all-match"),
        pytest.param(tol("foo", "bar", "NoSchedule", "Equal"), taint("foo", "bar"), True, id="explicit-equal"),
        pytest.param(tol("foo", "baz", "NoSchedule"), taint("foo", "bar"), False, id="equal-value-differs"),
        pytest.param(tol("foo", effect="NoSchedule", operator="Exists"), taint("foo", "bar"), True,
                     id="exists-any-value"),
        pytest.param(tol("foo", "bar"), taint("foo", "bar", "NoExecute"), True, id="empty-effect-matches-all"),
        pytest.param(tol("foo", "bar", "PreferNoSchedule"), taint("foo", "bar"), False, id="effect-differs"),
        pytest.param(tol(operator="Exists"), taint("anything", "x", "NoExecute"), True, id="empty-key-exists"),
        pytest.param(tol(effect="NoSchedule", operator="Exists"), taint("k", "v", "NoExecute"), False,
                     id="empty-key-exists-effect-differs"),
        pytest.param(tol("other", operator="Exists"), taint("foo"), False, id="key-differs"),
        pytest.param(tol("foo"), taint("foo"), True, id="equal-both-values-empty"),
        pytest.param(tol("foo", "5", operator="Gt"), taint("foo", "9"), False, id="gt-off-by-default"),
        pytest.param(tol("foo", "5", operator="Bogus"), taint("foo", "5"), False, id="unknown-operator"),
    ],
)
def test_tolerates_taint(toleration: dict, tainted: dict, tolerated: bool) -> None:
    assert tolerates_taint(toleration, tainted) is tolerated


@pytest.mark.parametrize(
    ("operator", "toleration_value", "taint_value", "tolerated"),
    [
        pytest.param("Gt", "5", "9", True, id="gt-greater"),
        pytest.param("Gt", "5", "5", False, id="gt-equal"),
        pytest.param("Lt", "5", "3", True, id="lt-less"),
        pytest.param("Lt", "5", "5", False, id="lt-equal"),
        pytest.param("Lt", "5", "7", False, id="lt-greater"),
        pytest.param("Gt", "5", "3", False, id="gt-less"),
        pytest.param("Lt", "5", "x", False, id="lt-not-a-number"),
        pytest.param("Gt", "x", "5", False, id="gt-toleration-not-a-number"),
    ],
)
def test_comparison_operators_behind_feature_gate(operator: str, toleration_value: str, taint_value: str,
                                                  tolerated: bool) -> None:
    toleration = tol("foo", toleration_value, operator=operator)
    assert tolerates_taint(toleration, taint("foo", taint_value), comparison_operators=True) is tolerated


@pytest.mark.parametrize(
    ("tolerations", "taints", "fits"),
    [
        pytest.param(None, [taint("dedicated", "user1")], False, id="no-tolerations-tainted-node"),
        pytest.param([tol("dedicated", "user1", "NoSchedule", "Equal")], [taint("dedicated", "user1")], True,
                     id="dedicated-to-user1"),
        pytest.param([tol("dedicated", "user2", "NoSchedule", "Equal")], [taint("dedicated", "user1")], False,
                     id="dedicated-to-someone-else"),
        pytest.param([tol("foo", effect="NoSchedule", operator="Exists")], [taint("foo", "bar")], True,
                     id="exists-tolerates"),
        pytest.param([tol("dedicated", "user2", "NoSchedule", "Equal"), tol("foo", effect="NoSchedule",
                                                                            operator="Exists")],
                     [taint("dedicated", "user2"), taint("foo")], True, id="all-of-many-taints-tolerated"),
        pytest.param([tol("foo", "bar", "PreferNoSchedule", "Equal")], [taint("foo", "bar")], False,
                     id="effect-mismatch"),
        pytest.param([tol("foo", "bar", operator="Equal")], [taint("foo", "bar")], True, id="empty-effect"),
        pytest.param([tol("dedicated", "user2", "NoSchedule", "Equal")],
                     [taint("dedicated", "user1", "PreferNoSchedule")], True, id="prefer-no-schedule-ignored"),
        pytest.param(None, [taint("dedicated", "user1", "PreferNoSchedule")], True, id="only-soft-taint"),
        pytest.param(None, [taint("evict", effect="NoExecute")], False, id="no-execute-untolerated"),
        pytest.param([tol(operator="Exists")], [taint("a"), taint("b", effect="NoExecute")], True,
                     id="tolerate-everything"),
        pytest.param([tol("a", operator="Exists")], [taint("a"), taint("b", effect="NoExecute")], False,
                     id="second-taint-untolerated"),
    ],
)
def test_filter(tolerations: list[dict] | None, taints: list[dict], fits: bool) -> None:
    node = NodeInfo(make_node("n", taints=taints))
    status = TaintToleration(None, None).filter(CycleState(), PodInfo(make_pod(tolerations=tolerations)), node)
    if fits:
        assert status is None
    else:
        assert status is not None
        assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        assert status.reasons == (REASON,)


def score_all(pod: dict, nodes: list[dict]) -> list[int]:
    plugin, state, info = TaintToleration(None, None), CycleState(), PodInfo(pod)
    infos = [NodeInfo(n) for n in nodes]
    assert plugin.pre_score(state, info, infos) is None
    raw = np.array([plugin.score(state, info, n) for n in infos], dtype=np.int64)
    batch = plugin.score_nodes(state, info, NodeTable(infos), np.arange(len(infos)))
    assert batch.tolist() == raw.tolist()
    return plugin.normalize_score(state, info, raw).tolist()


def soft(key: str, value: str) -> dict:
    return taint(key, value, "PreferNoSchedule")


@pytest.mark.parametrize(
    ("tolerations", "node_taints", "expected"),
    [
        pytest.param([tol("foo", "bar", "PreferNoSchedule", "Equal")],
                     [[soft("foo", "bar")], [soft("foo", "blah")]], [100, 0], id="tolerated-beats-intolerable"),
        pytest.param([tol("cpu-type", "arm64", "PreferNoSchedule", "Equal"),
                      tol("disk-type", "ssd", "PreferNoSchedule", "Equal")],
                     [[], [soft("cpu-type", "arm64")], [soft("cpu-type", "arm64"), soft("disk-type", "ssd")]],
                     [100, 100, 100], id="all-tolerated-score-equal"),
        pytest.param([tol("foo", "bar", "PreferNoSchedule", "Equal")],
                     [[], [soft("cpu-type", "arm64")], [soft("cpu-type", "arm64"), soft("disk-type", "ssd")]],
                     [100, 50, 0], id="more-intolerable-lower"),
        pytest.param([tol("cpu-type", "arm64", "NoSchedule", "Equal"), tol("disk-type", "ssd", "NoSchedule", "Equal")],
                     [[], [taint("cpu-type", "arm64")], [soft("cpu-type", "arm64"), soft("disk-type", "ssd")]],
                     [100, 100, 0], id="only-prefer-no-schedule-counts"),
        pytest.param(None, [[], [soft("cpu-type", "arm64")]], [100, 0], id="no-tolerations"),
        pytest.param(None, [[soft("a", "1")], [soft("a", "1"), soft("b", "2"), soft("c", "3")]], [67, 0],
                     id="reverse-truncates"),
        pytest.param(None, [[], []], [100, 100], id="no-taints-anywhere"),
    ],
)
def test_score(tolerations: list[dict] | None, node_taints: list[list[dict]], expected: list[int]) -> None:
    nodes = [make_node(f"n{i}", taints=t) for i, t in enumerate(node_taints)]
    assert score_all(make_pod(tolerations=tolerations), nodes) == expected


@pytest.mark.parametrize(
    ("scores", "reverse", "expected"),
    [
        pytest.param([0, 0], False, [0, 0], id="all-zero"),
        pytest.param([0, 0], True, [100, 100], id="all-zero-reversed"),
        pytest.param([1, 2, 3], False, [33, 66, 100], id="scaled"),
        pytest.param([1, 2, 3], True, [67, 34, 0], id="scaled-reversed"),
        pytest.param([], True, [], id="empty"),
    ],
)
def test_default_normalize_score(scores: list[int], reverse: bool, expected: list[int]) -> None:
    assert default_normalize_score(np.array(scores, dtype=np.int64), reverse=reverse).tolist() == expected


NODE_TAINTS = [
    [],
    [taint("dedicated", "gpu")],
    [taint("dedicated", "gpu", "PreferNoSchedule")],
    [taint("evict", effect="NoExecute")],
    [taint("dedicated", "gpu"), taint("evict", effect="NoExecute")],
    [taint("node.kubernetes.io/unschedulable")],
    [taint("dedicated", "gpu")],  # a taint set seen before: judged once for both nodes
    [taint("evict", effect="NoExecute"), taint("dedicated", "gpu"), taint("soft", effect="PreferNoSchedule")],
]
POD_TOLERATIONS = [
    None,
    [tol("dedicated", "gpu", "NoSchedule", "Equal")],
    [tol("dedicated", operator="Exists")],
    [tol("evict", effect="NoExecute", operator="Exists")],
    [tol(operator="Exists")],
]


@pytest.mark.parametrize("tolerations", POD_TOLERATIONS, ids=lambda t: f"tolerations-{t}")
def test_batch_agrees_with_per_node(tolerations: list[dict] | None) -> None:
    nodes = [NodeInfo(make_node(f"n{i}", taints=t)) for i, t in enumerate(NODE_TAINTS)]
    table = NodeTable(nodes)
    plugin, pod = TaintToleration(None, None), PodInfo(make_pod(tolerations=tolerations))
    for rows in (np.arange(len(nodes)), np.array([5, 3, 1]), np.array([], dtype=np.int64)):
        state = CycleState()
        statuses = [plugin.filter(state, pod, nodes[r]) for r in rows]
        passed = plugin.filter_nodes(state, pod, table, rows)
        assert passed.tolist() == [status is None for status in statuses]
        assert [(s.code, s.reasons) for s in plugin.filter_statuses(state, pod, table, rows[~passed])] == [
            (s.code, s.reasons) for s in statuses if s is not None]
        plugin.pre_score(state, pod, nodes)
        assert plugin.score_nodes(state, pod, table, rows).tolist() == [plugin.score(state, pod, nodes[r])
                                                                         for r in rows]


@pytest.mark.parametrize("tolerations", POD_TOLERATIONS, ids=lambda t: f"tolerations-{t}")
def test_passes_every_node_exactly_when_every_node_passes(tolerations: list[dict] | None) -> None:
    plugin, pod, state = TaintToleration(None, None), PodInfo(make_pod(tolerations=tolerations)), CycleState()
    for taints in (NODE_TAINTS, NODE_TAINTS[:3], [[], [taint("dedicated", "gpu", "PreferNoSchedule")]]):
        nodes = [NodeInfo(make_node(f"n{i}", taints=t)) for i, t in enumerate(taints)]
        table = NodeTable(nodes)
        every = all(plugin.filter(state, pod, node) is None for node in nodes)
        assert plugin.passes_every_node(state, pod, table) is every
        assert plugin.filter_nodes(state, pod, table, np.arange(len(nodes))).all() == every
    nodes[1].node = {**nodes[1].node, "spec": {"taints": [taint("new")]}}  # a Node refresh changes the answer
    nodes[1] = NodeInfo(nodes[1].node)
    table = NodeTable(nodes)
    assert plugin.passes_every_node(state, pod, table) is (plugin.filter(state, pod, nodes[1]) is None)


def test_events_to_register() -> None:
    node_event, pod_event = TaintToleration(None, None).events_to_register()
    assert node_event.event.resource is EventResource.NODE
    assert node_event.event.action == ActionType.ADD | ActionType.UPDATE_NODE_TAINT
    assert pod_event.event.resource is EventResource.POD
    assert pod_event.event.action == ActionType.UPDATE_POD_TOLERATION


@pytest.mark.parametrize(
    ("old_taints", "new_taints", "hint"),
    [
        pytest.param(None, [], QueueingHint.QUEUE, id="untainted-node-added"),
        pytest.param(None, [taint("foo")], QueueingHint.SKIP, id="untolerated-node-added"),
        pytest.param(None, [taint("tolerated")], QueueingHint.QUEUE, id="tolerated-node-added"),
        pytest.param([taint("foo")], [], QueueingHint.QUEUE, id="taint-removed"),
        pytest.param([taint("foo")], [taint("bar")], QueueingHint.SKIP, id="still-untolerated"),
        pytest.param([], [soft("foo", "x")], QueueingHint.SKIP, id="was-tolerated"),
    ],
)
def test_node_change_hint(old_taints: list[dict] | None, new_taints: list[dict], hint: QueueingHint) -> None:
    pod = make_pod(tolerations=[tol("tolerated", operator="Exists")])
    old = None if old_taints is None else make_node("n", taints=old_taints)
    assert is_schedulable_after_node_change(PodInfo(pod), old, make_node("n", taints=new_taints)) is hint


def test_pod_toleration_change_hint() -> None:
    pod = make_pod("p", uid="uid-p")
    same = make_pod("p", uid="uid-p", tolerations=[tol(operator="Exists")])
    other = make_pod("q", uid="uid-q", tolerations=[tol(operator="Exists")])
    assert is_schedulable_after_pod_toleration_change(PodInfo(pod), pod, same) is QueueingHint.QUEUE
    assert is_schedulable_after_pod_toleration_change(PodInfo(pod), None, other) is QueueingHint.SKIP


def test_factory() -> None:
    assert PLUGIN.name == "TaintToleration"
    assert list(itertools.islice(PLUGIN.new(None, None).events_to_register(), 1))
