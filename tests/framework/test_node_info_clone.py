"""NodeInfo.clone: a dry run's copy and the original never see each other's changes."""

import pytest

from kopfsched.framework.types import NodeInfo, PodInfo
from tests.builders import make_node, make_pod, node_info


def _pod(name: str, *, cpu: str = "500m", port: int | None = None, claim: str | None = None,
         anti_affinity: bool = False) -> PodInfo:
    pod = make_pod(name, uid=f"uid-{name}", requests={"cpu": cpu, "memory": "1Gi", "example.com/gpu": "1"})
    container = pod["spec"]["containers"][0]
    if port is not None:
        container["ports"] = [{"containerPort": port, "hostPort": port}]
    if claim is not None:
        pod["spec"]["volumes"] = [{"name": "v", "persistentVolumeClaim": {"claimName": claim}}]
    if anti_affinity:
        term = {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "kubernetes.io/hostname"}
        pod["spec"]["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    pod["spec"]["nodeName"] = "n1"
    return PodInfo(pod)


def _view(node: NodeInfo) -> tuple:
    return (
        list(node.pods), list(node.pods_with_affinity), list(node.pods_with_required_anti_affinity),
        node.requested.as_dict(), node.non_zero_requested.as_dict(), len(node.used_ports),
        node.used_ports.check_conflict("0.0.0.0", "TCP", 8080), dict(node.pvc_ref_counts),
    )


def _base() -> NodeInfo:
    node = node_info(make_node("n1", extended={"example.com/gpu": "4"}))
    node.add_pod(_pod("a", port=8080, claim="data", anti_affinity=True))
    node.add_pod(_pod("b"))
    return node


CHANGES = {
    "add plain pod": lambda n: n.add_pod(_pod("c")),
    "add pod with port, claim, anti-affinity": lambda n: n.add_pod(_pod("d", port=9090, claim="other",
                                                                        anti_affinity=True)),
    "remove pod with port, claim, anti-affinity": lambda n: n.remove_pod(_pod("a")),
    "remove plain pod": lambda n: n.remove_pod(_pod("b")),
}


@pytest.mark.parametrize("change", list(CHANGES.values()), ids=list(CHANGES))
def test_changing_a_clone_leaves_the_original(change) -> None:
    original = _base()
    before = _view(original)
    clone = original.clone()
    change(clone)
    assert _view(original) == before
    assert _view(clone) != before


@pytest.mark.parametrize("change", list(CHANGES.values()), ids=list(CHANGES))
def test_changing_the_original_leaves_a_clone(change) -> None:
    original = _base()
    clone = original.clone()
    before = _view(clone)
    change(original)
    assert _view(clone) == before


def test_clone_of_an_empty_node_is_independent() -> None:
    original = node_info(make_node("n1"))
    clone = original.clone()
    clone.add_pod(_pod("a", port=8080, claim="data", anti_affinity=True))
    assert _view(original) == ([], [], [], {}, {}, 0, False, {})


@pytest.mark.parametrize(
    ("volumes", "expected"),
    [
        pytest.param(None, (), id="no volumes"),
        pytest.param([{"name": "e", "emptyDir": {}}], (), id="no claim"),
        pytest.param([{"name": "a", "persistentVolumeClaim": {"claimName": "x"}},
                      {"name": "b", "persistentVolumeClaim": {"claimName": "x"}}],
                     ("ns/x", "ns/x"), id="same claim twice"),
    ],
)
def test_pvc_keys(volumes, expected) -> None:
    pod = make_pod("p", "ns")
    if volumes is not None:
        pod["spec"]["volumes"] = volumes
    assert PodInfo(pod).pvc_keys == expected


def test_same_claim_twice_is_counted_twice() -> None:
    pod = make_pod("p", "ns")
    pod["spec"]["volumes"] = [{"name": "a", "persistentVolumeClaim": {"claimName": "x"}},
                              {"name": "b", "persistentVolumeClaim": {"claimName": "x"}}]
    node = node_info(make_node("n1"))
    info = PodInfo(pod)
    node.add_pod(info)
    assert node.pvc_ref_counts == {"ns/x": 2}
    node.remove_pod(info)
    assert node.pvc_ref_counts == {}


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        pytest.param(None, None, id="not started"),
        pytest.param({"startTime": "2026-01-01T00:00:00Z"}, 1767225600.0, id="started"),
    ],
)
def test_start_time(status, expected) -> None:
    pod = make_pod("p")
    if status is not None:
        pod["status"] = status
    assert PodInfo(pod).start_time == expected


def test_a_placed_pod_info_has_every_attribute_a_new_one_has():
    """PodInfo.placed copies the computed parts: one left out fails on the first read."""
    import copy

    pod = make_pod("p", requests={"cpu": "1"})
    bound = copy.deepcopy(pod)
    bound["spec"]["nodeName"] = "n1"
    placed = PodInfo(pod).placed(bound)
    fresh = PodInfo(bound)
    for name in PodInfo.__slots__:
        if name != "__dict__":
            assert getattr(placed, name) == getattr(fresh, name), name
