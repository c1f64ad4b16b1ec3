import pytest

from kopfsched.framework.cycle_state import CycleState
from kopfsched.framework.events import ActionType, EventResource, QueueingHint
from kopfsched.framework.status import Code
from kopfsched.framework.types import PodInfo
from kopfsched.plugins.nodeports import PLUGIN, NodePorts, host_ports, is_schedulable_after_pod_deleted
from tests.builders import make_node, make_pod, node_info

REASON = "node(s) didn't have free ports for the requested pod ports"


def ports_pod(*ports: int | tuple[str, str, int], name: str = "p") -> dict:
    return make_pod(name, host_ports=list(ports) or None)


def run(pod: dict, *existing: dict):
    plugin, state, info = NodePorts(None, None), CycleState(), PodInfo(pod)
    result = plugin.pre_filter(state, info, [])
    if result is not None:
        return result
    return plugin.filter(state, info, node_info(make_node("n"), *existing))


@pytest.mark.parametrize(
    ("pod", "existing", "fits"),
    [
        pytest.param(ports_pod(8080), [], True, id="nothing-running"),
        pytest.param(ports_pod(("127.0.0.1", "UDP", 8080)), [ports_pod(("127.0.0.1", "UDP", 9090))], True,
                     id="other-port"),
        pytest.param(ports_pod(("127.0.0.1", "UDP", 8080)), [ports_pod(("127.0.0.1", "UDP", 8080))], False,
                     id="same-udp-port"),
        pytest.param(ports_pod(("127.0.0.1", "TCP", 8080)), [ports_pod(("127.0.0.1", "UDP", 8080))], True,
                     id="same-port-other-protocol"),
        pytest.param(ports_pod(("127.0.0.2", "UDP", 8080)), [ports_pod(("127.0.0.1", "UDP", 8080))], True,
                     id="same-port-other-ip"),
        pytest.param(ports_pod(("127.0.0.1", "TCP", 8001), ("127.0.0.1", "UDP", 8080)),
                     [ports_pod(("127.0.0.1", "TCP", 8001))], False, id="second-port-conflicts"),
        pytest.param(ports_pod(("0.0.0.0", "TCP", 8001)), [ports_pod(("127.0.0.1", "TCP", 8001))], False,
                     id="wildcard-wants-specific-used"),
        pytest.param(ports_pod(("127.0.0.1", "TCP", 8001)), [ports_pod(("0.0.0.0", "TCP", 8001))], False,
                     id="specific-wants-wildcard-used"),
        pytest.param(ports_pod(8001), [ports_pod(("0.0.0.0", "TCP", 8001))], False, id="defaults-are-wildcard-tcp"),
        pytest.param(ports_pod(("0.0.0.0", "UDP", 8001)), [ports_pod(("127.0.0.1", "TCP", 8001))], True,
                     id="wildcard-other-protocol"),
    ],
)
def test_filter(pod: dict, existing: list[dict], fits: bool) -> None:
    status = run(pod, *existing)
    if fits:
        assert status is None
    else:
        assert status is not None
        assert status.code is Code.UNSCHEDULABLE
        assert status.reasons == (REASON,)


def test_pre_filter_skips_pod_without_host_ports() -> None:
    pod = make_pod()
    pod["spec"]["containers"][0]["ports"] = [{"containerPort": 80}]
    status = NodePorts(None, None).pre_filter(CycleState(), PodInfo(pod), [])
    assert status is not None
    assert status.code is Code.SKIP


def test_host_ports_include_sidecars_only() -> None:
    pod = make_pod()
    pod["spec"]["initContainers"] = [
        {"name": "init", "ports": [{"hostPort": 1, "containerPort": 1}]},
        {"name": "sidecar", "restartPolicy": "Always", "ports": [{"hostPort": 2, "containerPort": 2,
                                                                   "protocol": "UDP", "hostIP": "10.0.0.1"}]},
    ]
    pod["spec"]["containers"][0]["ports"] = [{"hostPort": 3, "containerPort": 3}, {"containerPort": 4}]
    assert host_ports(pod) == (("10.0.0.1", "UDP", 2), ("0.0.0.0", "TCP", 3))


def test_filter_without_pre_filter_state() -> None:
    node = node_info(make_node("n"), ports_pod(8080, name="old"))
    status = NodePorts(None, None).filter(CycleState(), PodInfo(ports_pod(8080)), node)
    assert status is not None
    assert status.reasons == (REASON,)


def test_events_to_register() -> None:
    deleted, node_add = NodePorts(None, None).events_to_register()
    assert deleted.event.resource is EventResource.ASSIGNED_POD
    assert deleted.event.action == ActionType.DELETE
    assert node_add.event.resource is EventResource.NODE
    assert node_add.event.action == ActionType.ADD
    assert node_add.hint is None


def bound(pod: dict, node: str = "n") -> dict:
    pod["spec"]["nodeName"] = node
    return pod


@pytest.mark.parametrize(
    ("deleted", "hint"),
    [
        pytest.param(bound(ports_pod(8080, name="d")), QueueingHint.QUEUE, id="freed-same-port"),
        pytest.param(bound(ports_pod(("0.0.0.0", "TCP", 8080), name="d")), QueueingHint.QUEUE, id="freed-wildcard"),
        pytest.param(bound(ports_pod(9090, name="d")), QueueingHint.SKIP, id="freed-other-port"),
        pytest.param(bound(ports_pod(("127.0.0.1", "UDP", 8080), name="d")), QueueingHint.SKIP,
                     id="freed-other-protocol"),
        pytest.param(bound(make_pod("d")), QueueingHint.SKIP, id="deleted-has-no-ports"),
        pytest.param(ports_pod(8080, name="d"), QueueingHint.SKIP, id="deleted-was-unassigned"),
    ],
)
def test_pod_deleted_hint(deleted: dict, hint: QueueingHint) -> None:
    pod = ports_pod(8080)
    assert is_schedulable_after_pod_deleted(PodInfo(pod), deleted, None) is hint


def test_factory() -> None:
    assert PLUGIN.name == "NodePorts"
