"""Regressions in the scheduling cycle against upstream's schedule_one.go."""

from __future__ import annotations

import pytest

from kopfsched.framework.cycle_state import CycleState
from kopfsched.framework.events import ActionType, ClusterEvent, ClusterEventWithHint, EventResource
from kopfsched.framework.handle import WaitingPod
from kopfsched.framework.registry import PluginFactory, Registry
from kopfsched.framework.status import Status
from kopfsched.framework.types import PodInfo
from kopfsched.plugins.registry import in_tree_registry
from tests.builders import make_node, make_pod, taint
from tests.harness import Harness, profile_from_spec


def _on_node_named(name: str) -> dict:
    """Required node affinity on metadata.name: NodeAffinity's PreFilter narrows to that node."""
    field = {"key": "metadata.name", "operator": "In", "values": [name]}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchFields": [field]}]}}}


async def test_a_pod_narrowed_to_a_missing_node_waits_for_it_instead_of_retrying_forever():
    # Upstream puts the plugins whose PreFilterResult narrowed the nodes into the
    # diagnosis' UnschedulablePlugins, so the pod waits in the unschedulable pool for a
    # NodeAffinity event; with no rejector at all it would be retried as an error.
    h = Harness([make_node("n1")])
    h.add_pods(make_pod("p", affinity=_on_node_named("n9")))
    await h.settle()
    assert h.scheduler.queue.pending_counts() == {"active": 0, "backoff": 0, "unschedulable": 1, "gated": 0}
    attempt = h.recorder.last("p")
    assert attempt.result == "unschedulable"
    assert attempt.diagnosis.unschedulable_plugins == {"NodeAffinity"}
    assert h.condition("p")["message"] == (
        "0/1 nodes are available: 1 node(s) didn't satisfy plugin(s) [NodeAffinity]. "
        "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.")
    h.handlers.on_node_upsert(make_node("n9"))
    await h.settle()
    assert h.node_of("p") == "n9"


async def test_narrowing_plugins_count_among_the_rejectors():
    h = Harness([make_node("n1", taints=[taint("dedicated", "gpu")]), make_node("n2")])
    h.add_pods(make_pod("p", affinity=_on_node_named("n1")))
    await h.settle()
    assert h.recorder.last("p").diagnosis.unschedulable_plugins == {"NodeAffinity", "TaintToleration"}


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        pytest.param(make_pod("narrowed", affinity=_on_node_named("n007")), 101, id="prefilter-narrowed-to-one"),
        pytest.param(make_pod("nominated", priority=10), 100, id="nominated-node-fits"),
    ],
)
async def test_start_index_advances_over_all_nodes(pod, expected):
    # Upstream: nextStartNodeIndex = (nextStartNodeIndex + processed) % len(allNodes), and
    # only after the full pass (a nominated node that fits returns before it).
    h = Harness([make_node(f"n{i:03}") for i in range(200)], explain=False)
    h.add_pods(make_pod("first", requests={"cpu": "1"}))
    await h.settle()
    assert h.scheduler.algorithm.next_start_node_index == 100
    if pod["metadata"]["name"] == "nominated":
        pod["status"]["nominatedNodeName"] = "n050"
    h.add_pods(pod)
    await h.settle()
    assert h.scheduler.algorithm.next_start_node_index == expected


async def test_a_permit_plugin_that_allowed_no_longer_times_the_pod_out():
    # Upstream stops a plugin's timer when it allows the pod.
    waiting = WaitingPod(PodInfo(make_pod("p")), "n1", {"Fast": 1.0, "Slow": 10.0}, registered_at=100.0)
    waiting.allow("Fast")
    assert waiting.deadline == 110.0
    assert not waiting.expire(105.0)
    assert waiting.expire(110.0)
    assert await waiting.wait() == (False, "Slow", "rejected due to timeout after waiting 10s at plugin Slow")


class RejectingPermit:
    """Makes pods wait, then rejects them when told; retries on any assigned pod deletion."""

    name = "RejectingPermit"

    def __init__(self, args, handle) -> None:
        self.handle = handle

    def permit(self, state, pod, node_name):
        return Status.wait(), 30.0

    def events_to_register(self):
        return (ClusterEventWithHint(ClusterEvent(EventResource.ASSIGNED_POD, ActionType.DELETE)),)


async def test_a_pod_rejected_at_permit_is_not_woken_by_forgetting_itself():
    # Upstream defers the AssignedPodDelete of a rejected binding cycle until the pod is
    # requeued, so the pod's own forgetting is not replayed as an in-flight event. (With
    # NominatedNodeNameForExpectation the clearing of the pod's own nomination, as it waited
    # at Permit, wakes it: tests/scheduler/test_nominated_for_expectation.py.)
    custom = Registry()
    custom.register(PluginFactory(name="RejectingPermit", factory=RejectingPermit))
    registry = in_tree_registry().merged(custom)
    profile = profile_from_spec({"schedulerName": "default-scheduler", "plugins": {
        "permit": {"enabled": [{"name": "RejectingPermit"}]}}}, registry)
    h = Harness([make_node("n1")], profiles=[profile], registry=registry,
                gates="NominatedNodeNameForExpectation=false")
    h.add_pods(make_pod("p", requests={"cpu": "1"}))
    await h.scheduler.schedule_one(h.scheduler.queue.pop())
    waiting = h.scheduler.waiting_pods.get(h.client.pods["default/p"]["metadata"]["uid"])
    waiting.reject("RejectingPermit", "not now")
    await h.scheduler.settle_tasks()
    assert h.scheduler.queue.pending_counts() == {"active": 0, "backoff": 0, "unschedulable": 1, "gated": 0}
    assert h.scheduler.cache.get_node("n1").requested.milli_cpu == 0


class RejectingReserve:
    name = "RejectingReserve"

    def __init__(self, args, handle) -> None:
        pass

    def reserve(self, state, pod, node_name):
        return Status.unschedulable("reservation refused")

    def unreserve(self, state, pod, node_name):
        pass


def _rejecting_reserve_harness(nodes: list[dict]) -> Harness:
    custom = Registry()
    custom.register(PluginFactory(name="RejectingReserve", factory=RejectingReserve))
    registry = in_tree_registry().merged(custom)
    profile = profile_from_spec({"schedulerName": "default-scheduler", "plugins": {
        "reserve": {"enabled": [{"name": "RejectingReserve"}]}}}, registry)
    return Harness(nodes, profiles=[profile], registry=registry)


@pytest.mark.parametrize(
    ("nodes", "reason"),
    [
        pytest.param([make_node("n1")], "Unschedulable", id="reserve-rejection"),
        pytest.param([], "Unschedulable", id="no-nodes"),
    ],
)
async def test_a_failure_outside_filtering_clears_the_nomination(nodes, reason):
    # Upstream hands clearNominatedNode to the failure handler for errors and for
    # rejections after the node was chosen: the pod gives up the node it was promised.
    h = _rejecting_reserve_harness(nodes)
    pod = make_pod("pre", priority=100, requests={"cpu": "1"})
    pod["status"]["nominatedNodeName"] = "n1"
    h.add_pods(pod)
    await h.scheduler.schedule_one(h.scheduler.queue.pop())
    await h.scheduler.settle_tasks()
    assert h.condition("pre")["reason"] == reason
    assert "nominatedNodeName" not in h.client.pods["default/pre"]["status"]
    assert h.scheduler.queue.nominator.nominated_pods_for_node("n1") == []


async def test_without_scoring_the_first_feasible_node_in_the_rotating_order_is_taken():
    """Upstream's findNodesThatPassFilters: numNodesToFind = 1 when the profile has no Score
    plugins and no extender filters, so nothing is filtered beyond the first feasible node."""
    registry = in_tree_registry()
    profile = profile_from_spec({"schedulerName": "default-scheduler", "plugins": {
        "preScore": {"disabled": [{"name": "*"}]}, "score": {"disabled": [{"name": "*"}]}}}, registry)
    h = Harness([make_node(f"n{i:03}", cpu="1") for i in range(200)], profiles=[profile], registry=registry)
    h.add_pods(make_pod("big", requests={"cpu": "2"}))  # fits nowhere: every node is examined
    await h.settle()
    assert h.scheduler.algorithm.next_start_node_index == 0  # 200 examined: once around
    h.add_pods(*(make_pod(f"p{i}", requests={"cpu": "1"}) for i in range(3)))
    await h.settle()
    assert [h.node_of(f"p{i}") for i in range(3)] == ["n000", "n001", "n002"]
    assert h.scheduler.algorithm.next_start_node_index == 3


@pytest.mark.parametrize(
    ("priority", "rejected"),
    [
        pytest.param(0, {"n005", "n137", "n250"}, id="less-important-than-the-nominated"),
        pytest.param(20, set(), id="more-important-than-the-nominated"),
    ],
)
async def test_nodes_holding_nominated_pods_are_found_wherever_they_sit_in_the_chunk(priority, rejected):
    # Filter counts the nominated pods at least as important as the pod (upstream's
    # addNominatedPods) on exactly their nodes, among rows filtered in vectorised chunks.
    h = Harness([make_node(f"n{i:03}", cpu="1") for i in range(300)])
    for node in ["n250", "n005", "n137"]:
        h.scheduler.queue.nominator.add_nominated_pod(
            PodInfo(make_pod(f"preemptor-{node}", priority=10, requests={"cpu": "1"})), node)
    pod = PodInfo(make_pod("p", priority=priority, requests={"cpu": "1"}))
    fwk = h.scheduler.profiles.get(pod.scheduler_name).framework
    result = await h.scheduler.algorithm.schedule_pod(fwk, CycleState(), pod, exhaustive=True)
    assert set(result.diagnosis.node_to_status.statuses) == rejected
    assert result.feasible_nodes == 300 - len(rejected)


def test_pre_score_nodes_are_built_on_first_read_and_once():
    from kopfsched.scheduler.schedule_one import LazyNodes

    built: list[int] = []

    def build() -> list:
        built.append(1)
        return ["a", "b", "c"]

    nodes = LazyNodes(3, build)
    assert len(nodes) == 3 and not built  # the length alone: nothing built
    assert list(nodes) == ["a", "b", "c"] and nodes[1] == "b" and nodes[-1:] == ["c"]
    assert built == [1]
