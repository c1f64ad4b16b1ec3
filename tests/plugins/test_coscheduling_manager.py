"""PodGroupManager on its own: PreFilter reasons, Permit outcomes, the TTL memories on a
fake clock, the minResources gap, sibling activation and the computed PodGroup status."""

from __future__ import annotations

from typing import Any

import pytest

from kopfsched.framework.types import PodInfo
from kopfsched.plugins.coscheduling.core import (
    POD_GROUP_LABEL,
    PermitOutcome,
    PodGroupManager,
    pod_group_status,
    pod_group_statuses,
)
from kopfsched.testing import FakeObjects, FakeSnapshot
from tests.builders import make_node, make_pod, node_info, pod_group
from tests.fakes import FakeClock


def member(name: str, group: str, *, node: str | None = None, cpu: str = "1", phase: str | None = None,
           namespace: str = "default") -> PodInfo:
    pod = make_pod(name, namespace, labels={POD_GROUP_LABEL: group}, requests={"cpu": cpu}, node_name=node)
    if phase:
        pod["status"] = {"phase": phase}
    return PodInfo(pod)


class Pods:
    def __init__(self, *pods: PodInfo) -> None:
        self.pods = list(pods)

    def list(self, namespace: str | None = None) -> list[PodInfo]:
        return [p for p in self.pods if namespace is None or p.namespace == namespace]


def manager(groups: list[dict[str, Any]], pods: list[PodInfo], *, nodes: list[Any] | None = None,
            clock: FakeClock | None = None, timeout: float = 60.0) -> PodGroupManager:
    return PodGroupManager(objects=FakeObjects(groups), pods=Pods(*pods), snapshot=FakeSnapshot(nodes or []),
                           clock=clock or FakeClock(100.0), schedule_timeout=timeout)


@pytest.mark.parametrize(("groups", "pods", "reason"), [
    pytest.param([], [member("p1", "g")], None, id="group-missing-passes-prefilter"),
    pytest.param([pod_group("g", 3)], [member("p1", "g"), member("p2", "g")],
                 "pre-filter pod p1 cannot find enough sibling pods, current pods number: 2, minMember of group: 3",
                 id="too-few-pods"),
    pytest.param([pod_group("g", 2)], [member("p1", "g"), member("p2", "g")], None, id="enough-pods"),
    pytest.param([pod_group("g", 2)], [member("p1", "g"), member("x", "g", namespace="other")],
                 "pre-filter pod p1 cannot find enough sibling pods, current pods number: 1, minMember of group: 2",
                 id="siblings-in-other-namespace-do-not-count"),
])
def test_pre_filter_reasons(groups, pods, reason):
    assert manager(groups, pods).pre_filter(pods[0]) == reason


def test_pre_filter_refuses_a_backed_off_group_until_the_backoff_ends():
    clock = FakeClock(100.0)
    pods = [member("p1", "g"), member("p2", "g")]
    mgr = manager([pod_group("g", 2)], pods, clock=clock)
    mgr.backoff_pod_group("default/g", 10)
    assert mgr.pre_filter(pods[0]) == "podGroup default/g failed recently"
    clock.now += 9.9
    assert mgr.pre_filter(pods[0]) == "podGroup default/g failed recently"
    clock.now += 0.1
    assert mgr.pre_filter(pods[0]) is None


def test_zero_backoff_does_not_back_off():
    pods = [member("p1", "g")]
    mgr = manager([pod_group("g", 1)], pods)
    mgr.backoff_pod_group("default/g", 0)
    assert mgr.pre_filter(pods[0]) is None


@pytest.mark.parametrize(("min_resources", "reason"), [
    pytest.param({"cpu": "6"}, None, id="fits-across-nodes"),
    pytest.param({"cpu": "7"}, "resource gap: map[cpu:1]", id="cpu-gap"),
    pytest.param({"cpu": "500m", "memory": "70Gi"}, "resource gap: map[memory:6Gi]", id="memory-gap"),
    pytest.param({"example.com/gpu": "1"}, "resource gap: map[example.com/gpu:1]", id="unknown-resource"),
])
def test_min_resources_gap(min_resources, reason):
    # Two 4-cpu/32Gi nodes; n1 runs a 2-cpu pod of another group: 6 cpus are free.
    n1 = node_info(make_node("n1"), make_pod("other", requests={"cpu": "2"}))
    n2 = node_info(make_node("n2"))
    pods = [member("p1", "g"), member("p2", "g")]
    mgr = manager([pod_group("g", 2, min_resources=min_resources)], pods, nodes=[n1, n2])
    assert mgr.pre_filter(pods[0]) == reason


def test_min_resources_counts_the_groups_own_pods_as_free():
    n1 = node_info(make_node("n1", cpu="4"), make_pod("a", labels={POD_GROUP_LABEL: "g"}, requests={"cpu": "3"}))
    pods = [member("a", "g", node="n1", cpu="3"), member("b", "g")]
    mgr = manager([pod_group("g", 2, min_resources={"cpu": "4"})], pods, nodes=[n1])
    assert mgr.pre_filter(pods[1]) is None


def test_min_resources_pods_limit_is_min_member():
    n1 = node_info(make_node("n1", pods=1))
    pods = [member("p1", "g"), member("p2", "g")]
    mgr = manager([pod_group("g", 2, min_resources={"cpu": "1"})], pods, nodes=[n1])
    assert mgr.pre_filter(pods[0]) == "resource gap: map[pods:1]"


def test_permitted_group_skips_the_resource_check_until_it_expires_or_is_deleted():
    clock = FakeClock(100.0)
    n1 = node_info(make_node("n1", cpu="4"))
    pods = [member("p1", "g"), member("p2", "g")]
    mgr = manager([pod_group("g", 2, min_resources={"cpu": "4"})], pods, nodes=[n1], clock=clock, timeout=30)
    assert mgr.pre_filter(pods[0]) is None
    n1.add_pod(PodInfo(make_pod("intruder", requests={"cpu": "1"}, node_name="n1")))
    assert mgr.pre_filter(pods[0]) is None  # remembered as permitted
    clock.now += 30
    assert mgr.pre_filter(pods[0]) == "resource gap: map[cpu:1]"
    mgr.permitted.add("default/g", 30)
    mgr.delete_permitted_pod_group("default/g")
    assert mgr.pre_filter(pods[0]) == "resource gap: map[cpu:1]"


@pytest.mark.parametrize(("pods", "outcome"), [
    pytest.param([PodInfo(make_pod("solo"))], PermitOutcome.POD_GROUP_NOT_SPECIFIED, id="no-group"),
    pytest.param([member("p1", "missing", node="n1")], PermitOutcome.POD_GROUP_NOT_FOUND, id="group-not-found"),
    pytest.param([member("p1", "g", node="n1"), member("p2", "g"), member("p3", "g")], PermitOutcome.WAIT,
                 id="first-assumed-waits"),
    pytest.param([member("p1", "g", node="n1"), member("p2", "g", node="n1"), member("p3", "g")],
                 PermitOutcome.WAIT, id="second-assumed-waits"),
    pytest.param([member("p1", "g", node="n1"), member("p2", "g", node="n1"), member("p3", "g", node="n2")],
                 PermitOutcome.SUCCESS, id="quorum-reached"),
])
def test_permit_outcomes(pods, outcome):
    assert manager([pod_group("g", 3)], pods).permit(pods[0]) is outcome


def test_siblings_are_activated_only_by_the_first_assigned_member():
    p1, p2, p3 = member("p1", "g", node="n1"), member("p2", "g"), member("p3", "g")
    assert manager([pod_group("g", 3)], [p1, p2, p3]).siblings_to_activate(p1) == [p2, p3]
    p2_assigned = member("p2", "g", node="n1")
    assert manager([pod_group("g", 3)], [p1, p2_assigned, p3]).siblings_to_activate(p2_assigned) == []


def test_creation_timestamp_is_the_groups_or_the_default():
    mgr = manager([pod_group("g", 1, created="2024-01-01T00:00:10Z"), pod_group("bare", 1)], [])
    assert mgr.creation_timestamp(member("p", "g"), 5.0) == 1704067210.0
    assert mgr.creation_timestamp(member("p", "bare"), 5.0) == 5.0
    assert mgr.creation_timestamp(member("p", "missing"), 5.0) == 5.0
    assert mgr.creation_timestamp(PodInfo(make_pod("solo")), 5.0) == 5.0


@pytest.mark.parametrize(("pods", "assumed", "expected"), [
    pytest.param([member("a", "g")], set(), ("Pending", 0, 0), id="fewer-than-min-member"),
    pytest.param([member("a", "g"), member("b", "g")], set(), ("PreScheduling", 0, 0), id="all-pending"),
    pytest.param([member("a", "g", node="n1"), member("b", "g")], {"a"}, ("Scheduling", 0, 0),
                 id="one-assumed"),
    pytest.param([member("a", "g", node="n1"), member("b", "g")], set(), ("Scheduling", 1, 0), id="one-bound"),
    pytest.param([member("a", "g", node="n1"), member("b", "g", node="n2")], set(), ("Scheduled", 2, 0),
                 id="all-bound"),
    pytest.param([member("a", "g", node="n1", phase="Running"), member("b", "g", node="n2", phase="Running")],
                 set(), ("Running", 2, 2), id="running"),
])
def test_pod_group_status(pods, assumed, expected):
    assumed_uids = {p.uid for p in pods if p.name in assumed}
    status = pod_group_status(pod_group("g", 2), pods, is_assumed=lambda uid: uid in assumed_uids)
    assert (status["phase"], status["scheduled"], status["running"]) == expected


def test_pod_group_statuses_cover_every_group():
    objects = FakeObjects([pod_group("b", 1), pod_group("a", 2, namespace="ns")])
    pods = Pods(member("x", "b", node="n1"), member("y", "a", namespace="ns"))
    assert pod_group_statuses(objects, pods) == {
        "default/b": {"phase": "Scheduled", "scheduled": 1, "running": 0, "succeeded": 0, "failed": 0},
        "ns/a": {"phase": "Pending", "scheduled": 0, "running": 0, "succeeded": 0, "failed": 0},
    }
