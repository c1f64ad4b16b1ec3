import numpy as np
import pytest

from kopfsched.framework.cycle_state import CycleState
from kopfsched.framework.events import ActionType, EventResource
from kopfsched.framework.node_table import NodeTable
from kopfsched.framework.status import Code
from kopfsched.framework.types import NodeInfo, PodInfo
from kopfsched.plugins.nodename import ERR_REASON, PLUGIN, NodeName
from tests.builders import make_node, make_pod

REASON = "node(s) didn't match the requested node name"


def test_reason_is_upstreams() -> None:
    assert ERR_REASON == REASON


@pytest.mark.parametrize(
    ("node_name", "fits"),
    [
        pytest.param(None, True, id="no-node-name"),
        pytest.param("foo", True, id="same-node-name"),
        pytest.param("bar", False, id="different-node-name"),
    ],
)
def test_filter(node_name: str | None, fits: bool) -> None:
    pod = make_pod()
    if node_name:
        pod["spec"]["nodeName"] = node_name
    status = NodeName(None, None).filter(CycleState(), PodInfo(pod), NodeInfo(make_node("foo")))
    if fits:
        assert status is None
    else:
        assert status is not None
        assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        assert status.reasons == (REASON,)


@pytest.mark.parametrize("wanted", [None, "n0", "n3", "n4", "missing"], ids=lambda w: f"wanted-{w}")
def test_filter_nodes_agrees_with_filter(wanted: str | None) -> None:
    nodes = [NodeInfo(make_node(f"n{i}")) for i in range(5)]
    table = NodeTable(nodes)
    pod = make_pod()
    if wanted:
        pod["spec"]["nodeName"] = wanted
    plugin, info, state = NodeName(None, None), PodInfo(pod), CycleState()
    rows = np.array([4, 0, 3, 1])
    expected = [plugin.filter(state, info, nodes[r]) is None for r in rows]
    assert plugin.filter_nodes(state, info, table, rows).tolist() == expected
    assert plugin.passes_every_node(state, info, table) is (wanted is None)  # only without a name


def test_events_to_register() -> None:
    (registration,) = NodeName(None, None).events_to_register()
    assert registration.event.resource is EventResource.NODE
    assert registration.event.action == ActionType.ADD
    assert registration.hint is None


def test_factory() -> None:
    assert PLUGIN.name == "NodeName"
