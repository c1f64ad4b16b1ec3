"""Nominator: pods promised a node, by node."""

from __future__ import annotations

from kopfsched.framework.types import PodInfo
from kopfsched.queue.nominator import Nominator
from tests.builders import make_pod


def pod(name: str, nominated: str = "", node_name: str | None = None) -> PodInfo:
    raw = make_pod(name, uid=f"uid-{name}", node_name=node_name)
    if nominated:
        raw["status"]["nominatedNodeName"] = nominated
    return PodInfo(raw)


def test_add_from_status_or_argument_and_delete() -> None:
    nominator = Nominator()
    nominator.add_nominated_pod(pod("a", "n1"))
    nominator.add_nominated_pod(pod("b"), "n1")
    nominator.add_nominated_pod(pod("c"))  # no node anywhere: not nominated
    assert [p.name for p in nominator.nominated_pods_for_node("n1")] == ["a", "b"]
    assert len(nominator) == 2
    nominator.delete_nominated_pod(pod("a"))
    assert [p.name for p in nominator.nominated_pods_for_node("n1")] == ["b"]
    assert nominator.nominated_node("uid-a") == ""


def test_renomination_moves_the_pod() -> None:
    nominator = Nominator()
    nominator.add_nominated_pod(pod("a"), "n1")
    nominator.add_nominated_pod(pod("a"), "n2")
    assert nominator.nominated_pods_for_node("n1") == []
    assert nominator.nominated_node("uid-a") == "n2"


def test_bound_pod_is_not_nominated() -> None:
    nominator = Nominator()
    nominator.add_nominated_pod(pod("a", node_name="n1"), "n1")
    assert len(nominator) == 0


def test_update_keeps_in_memory_nomination_until_status_speaks() -> None:
    nominator = Nominator()
    nominator.add_nominated_pod(pod("a"), "n1")
    nominator.update_nominated_pod(pod("a"), pod("a"))
    assert nominator.nominated_node("uid-a") == "n1"
    nominator.update_nominated_pod(pod("a"), pod("a", "n2"))
    assert nominator.nominated_node("uid-a") == "n2"
    nominator.update_nominated_pod(pod("a", "n2"), pod("a"))  # nomination cleared in the API
    assert nominator.nominated_node("uid-a") == ""


def test_lists_handed_out_are_kept_until_the_node_changes() -> None:
    nominator = Nominator()
    a, b = pod("a"), pod("b")
    nominator.add_nominated_pod(a, "n1")
    first = nominator.nominated_pods_for_node("n1")
    assert nominator.nominated_pods_for_node("n1") is first and nominator.nominated_node_names() == ["n1"]
    nominator.add_nominated_pod(b, "n1")
    assert first == [a] and nominator.nominated_pods_for_node("n1") == [a, b]
    nominator.add_nominated_pod(a, "n2")  # moves a: both nodes change
    assert nominator.nominated_pods_for_node("n1") == [b] and nominator.nominated_pods_for_node("n2") == [a]
    assert nominator.nominated_node_names() == ["n1", "n2"]
    nominator.delete_nominated_pod(b)
    assert nominator.nominated_pods_for_node("n1") == [] and nominator.nominated_node_names() == ["n2"]
