import numpy as np
import pytest

from kopfsched.framework.cycle_state import CycleState
from kopfsched.framework.events import ActionType, EventResource, QueueingHint
from kopfsched.framework.node_table import NodeTable
from kopfsched.framework.status import Code
from kopfsched.framework.types import NodeInfo, PodInfo
from kopfsched.plugins.nodeunschedulable import (
    PLUGIN,
    NodeUnschedulable,
    is_schedulable_after_node_change,
    is_schedulable_after_pod_toleration_change,
)
from tests.builders import make_node, make_pod

UNSCHEDULABLE = "node(s) were unschedulable"
UNKNOWN = "node(s) had unknown conditions"
TOLERATE_UNSCHEDULABLE = {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}


def ghost() -> NodeInfo:
    info = NodeInfo(make_node("ghost"))
    info.remove_node()
    return info


@pytest.mark.parametrize(
    ("unschedulable", "tolerations", "reason"),
    [
        pytest.param(False, None, None, id="schedulable-node"),
        pytest.param(True, None, UNSCHEDULABLE, id="cordoned-no-toleration"),
        pytest.param(True, [TOLERATE_UNSCHEDULABLE], None, id="cordoned-tolerated"),
        pytest.param(True, [{"operator": "Exists"}], None, id="cordoned-tolerate-everything"),
        pytest.param(True, [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoExecute"}],
                     UNSCHEDULABLE, id="cordoned-wrong-effect"),
        pytest.param(True, [{"key": "node.kubernetes.io/unschedulable", "value": "x", "effect": "NoSchedule"}],
                     UNSCHEDULABLE, id="cordoned-equal-with-value"),
        pytest.param(True, [{"key": "node.kubernetes.io/unschedulable", "operator": "Equal"}],
                     None, id="cordoned-equal-empty-value-any-effect"),
    ],
)
def test_filter(unschedulable: bool, tolerations: list[dict] | None, reason: str | None) -> None:
    node = NodeInfo(make_node("n", unschedulable=unschedulable))
    status = NodeUnschedulable(None, None).filter(CycleState(), PodInfo(make_pod(tolerations=tolerations)), node)
    if reason is None:
        assert status is None
    else:
        assert status is not None
        assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        assert status.reasons == (reason,)


def test_filter_without_node_object() -> None:
    status = NodeUnschedulable(None, None).filter(CycleState(), PodInfo(make_pod()), ghost())
    assert status is not None
    assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.reasons == (UNKNOWN,)


@pytest.mark.parametrize("tolerations", [None, [TOLERATE_UNSCHEDULABLE]], ids=["plain-pod", "tolerating-pod"])
def test_filter_nodes_agrees_with_filter(tolerations: list[dict] | None) -> None:
    nodes = [NodeInfo(make_node("a")), NodeInfo(make_node("b", unschedulable=True)), ghost(),
             NodeInfo(make_node("d")), NodeInfo(make_node("e", unschedulable=True))]
    plugin, pod, state = NodeUnschedulable(None, None), PodInfo(make_pod(tolerations=tolerations)), CycleState()
    rows = np.array([0, 1, 2, 3, 4])
    expected = [plugin.filter(state, pod, n) is None for n in nodes]
    assert plugin.filter_nodes(state, pod, NodeTable(nodes), rows).tolist() == expected
    assert expected.count(True) == (4 if tolerations else 2)


def test_events_to_register() -> None:
    node_event, pod_event = NodeUnschedulable(None, None).events_to_register()
    assert node_event.event.resource is EventResource.NODE
    assert node_event.event.action == ActionType.ADD | ActionType.UPDATE_NODE_TAINT
    assert pod_event.event.resource is EventResource.POD
    assert pod_event.event.action == ActionType.UPDATE_POD_TOLERATION


@pytest.mark.parametrize(
    ("old", "new", "hint"),
    [
        pytest.param(None, make_node("n"), QueueingHint.QUEUE, id="schedulable-node-added"),
        pytest.param(None, make_node("n", unschedulable=True), QueueingHint.SKIP, id="cordoned-node-added"),
        pytest.param(make_node("n", unschedulable=True), make_node("n"), QueueingHint.QUEUE, id="uncordoned"),
        pytest.param(make_node("n"), make_node("n", labels={"a": "b"}), QueueingHint.SKIP, id="stays-schedulable"),
        pytest.param(make_node("n", unschedulable=True), make_node("n", unschedulable=True), QueueingHint.SKIP,
                     id="stays-cordoned"),
    ],
)
def test_node_change_hint(old: dict | None, new: dict, hint: QueueingHint) -> None:
    assert is_schedulable_after_node_change(make_pod(), old, new) is hint


@pytest.mark.parametrize(
    ("same_pod", "tolerations", "hint"),
    [
        pytest.param(True, [TOLERATE_UNSCHEDULABLE], QueueingHint.QUEUE, id="pod-gains-toleration"),
        pytest.param(True, [{"key": "other", "operator": "Exists"}], QueueingHint.SKIP, id="unrelated-toleration"),
        pytest.param(False, [TOLERATE_UNSCHEDULABLE], QueueingHint.SKIP, id="another-pod"),
    ],
)
def test_pod_toleration_change_hint(same_pod: bool, tolerations: list[dict], hint: QueueingHint) -> None:
    pod = make_pod("p", uid="uid-p")
    new = make_pod("p" if same_pod else "q", uid="uid-p" if same_pod else "uid-q", tolerations=tolerations)
    assert is_schedulable_after_pod_toleration_change(PodInfo(pod), pod, new) is hint


def test_factory() -> None:
    assert PLUGIN.name == "NodeUnschedulable"


@pytest.mark.parametrize("tolerations", [None, [TOLERATE_UNSCHEDULABLE]], ids=["plain-pod", "tolerating-pod"])
def test_passes_every_node_exactly_when_every_node_passes(tolerations: list[dict] | None) -> None:
    plugin, pod, state = NodeUnschedulable(None, None), PodInfo(make_pod(tolerations=tolerations)), CycleState()
    for nodes in ([NodeInfo(make_node("a")), NodeInfo(make_node("b"))],
                  [NodeInfo(make_node("a")), NodeInfo(make_node("b", unschedulable=True))],
                  [NodeInfo(make_node("a")), ghost()]):
        table = NodeTable(nodes)
        every = all(plugin.filter(state, pod, node) is None for node in nodes)
        assert plugin.passes_every_node(state, pod, table) is every
    table = NodeTable([NodeInfo(make_node("a")), NodeInfo(make_node("b"))])
    assert plugin.passes_every_node(state, pod, table)
    table.nodes[1] = NodeInfo(make_node("b", unschedulable=True))  # cordoned: the next refresh tells
    table.refresh([1])
    assert plugin.passes_every_node(state, pod, table) is bool(tolerations)
