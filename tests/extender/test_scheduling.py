"""Profiles with HTTP extenders, end to end through the scheduler against a fake extender."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from aiohttp import web

from kopfsched.framework.events import ActionType, EventResource
from kopfsched.plugins.registry import in_tree_registry
from tests.builders import make_node, make_pod
from tests.harness import Harness, profile_from_spec

from .conftest import FakeExtender

PROFILE = "ext"


@pytest.fixture
async def harness() -> AsyncIterator[Callable[..., Harness]]:
    """Harness(es) with one profile calling `extenders`; their HTTP sessions closed after."""
    made: list[Harness] = []

    def make(extenders: list[dict[str, Any]], nodes: int = 3, **spec: Any) -> Harness:
        registry = in_tree_registry()
        profile = profile_from_spec({"extenders": extenders, **spec}, registry, name=PROFILE)
        made.append(Harness([make_node(f"n{i}") for i in range(1, nodes + 1)], profiles=[profile], registry=registry))
        return made[-1]

    yield make
    for h in made:
        await h.scheduler.shutdown()


async def settle(h: Harness) -> None:
    """The harness' settle (the product's own loop) drives extender profiles too; backoffs
    are not waited out, so a failing pod is attempted once."""
    await h.settle(advance=False)
    await h.scheduler.wait_for_tasks()  # binding tasks waiting on a real HTTP binder


def node_names(body: dict[str, Any]) -> list[str]:
    return sorted(item["metadata"]["name"] for item in body["Nodes"]["items"])


async def test_filter_and_prioritize_decide_placement(harness, extender: FakeExtender):
    extender.on("filter", lambda body: {
        "Nodes": {"items": [n for n in body["Nodes"]["items"] if n["metadata"]["name"] != "n1"]},
        "FailedNodes": {"n1": "n1 is reserved"}, "Error": ""})
    extender.on("prioritize", lambda body: [{"Host": "n2", "Score": 0}, {"Host": "n3", "Score": 10}])
    h = harness([{"urlPrefix": extender.url, "filterVerb": "filter", "prioritizeVerb": "prioritize", "weight": 5}])
    h.add_pods(make_pod("p", scheduler_name=PROFILE, requests={"cpu": "100m"}))
    await settle(h)

    assert h.node_of("p") == "n3"
    [filtered] = extender.bodies("filter")
    assert set(filtered) == {"Pod", "Nodes", "NodeNames"}
    assert filtered["NodeNames"] is None
    assert filtered["Pod"]["metadata"]["name"] == "p"
    assert node_names(filtered) == ["n1", "n2", "n3"]
    [prioritized] = extender.bodies("prioritize")
    assert node_names(prioritized) == ["n2", "n3"]
    scores = h.recorder.last("p").scores
    # 10 * weight 5 * (MaxNodeScore 100 / MaxExtenderPriority 10) on top of equal plugin scores.
    assert (scores["n3"][extender.url], scores["n2"][extender.url]) == (100, 0)
    assert scores["n3"]["total"] - scores["n2"]["total"] == 500


async def test_node_cache_capable_extender_gets_and_returns_node_names(harness, extender: FakeExtender):
    extender.on("filter", lambda body: {"NodeNames": ["n2"], "FailedNodes": {}, "Error": ""})
    h = harness([{"urlPrefix": extender.url + "/", "filterVerb": "filter", "nodeCacheCapable": True}])
    h.add_pods(make_pod("p", scheduler_name=PROFILE))
    await settle(h)

    assert h.node_of("p") == "n2"
    [body] = extender.bodies("filter")
    assert (body["Nodes"], sorted(body["NodeNames"])) == (None, ["n1", "n2", "n3"])


async def test_rejections_give_upstreams_fit_error_and_requeue_on_any_event(harness, extender: FakeExtender):
    extender.on("filter", lambda body: {
        "NodeNames": [], "FailedNodes": {"n1": "busy", "n2": "busy"},
        "FailedAndUnresolvableNodes": {"n2": "wrong rack", "n3": "wrong rack"}, "Error": ""})
    h = harness([{"urlPrefix": extender.url, "filterVerb": "filter", "nodeCacheCapable": True}])
    h.add_pods(make_pod("p", scheduler_name=PROFILE))
    await settle(h)

    assert h.node_of("p") is None
    condition = h.condition("p")
    assert (condition["reason"], condition["message"]) == (
        "Unschedulable", "0/3 nodes are available: 1 busy, 2 wrong rack. preemption: 0/3 nodes are available: "
                         "1 No preemption victims found for incoming pod, 2 Preemption is not helpful for scheduling.")
    assert "Extender" in h.recorder.last("p").diagnosis.unschedulable_plugins
    # Extenders register no events, so any event requeues the pod (even its own status update).
    [registered] = h.scheduler.profiles[PROFILE].queue_profile.hints["Extender"]
    assert (registered.event.resource, registered.event.action, registered.hint) == (
        EventResource.WILDCARD, ActionType.ALL, None)


@pytest.mark.parametrize("ignored, called, message", [
    pytest.param(True, ["foo"], "0/1 nodes are available: 1 no foo left. preemption: 0/1 nodes are available: "
                 "1 No preemption victims found for incoming pod.", id="ignoredByScheduler"),
    pytest.param(False, [], "0/1 nodes are available: 1 Insufficient example.com/foo. preemption: 0/1 nodes are "
                 "available: 1 Preemption is not helpful for scheduling.", id="checked-by-NodeResourcesFit"),
])
async def test_managed_resources_choose_the_pods_that_call_the_extender(harness, extender: FakeExtender,
                                                                         ignored, called, message):
    extender.on("filter", lambda body: {"NodeNames": [], "FailedNodes": {"n1": "no foo left"}, "Error": ""})
    h = harness([{"urlPrefix": extender.url, "filterVerb": "filter", "nodeCacheCapable": True,
                  "managedResources": [{"name": "example.com/foo", "ignoredByScheduler": ignored}]}], nodes=1)
    h.add_pods(make_pod("plain", scheduler_name=PROFILE),
               make_pod("foo", scheduler_name=PROFILE, requests={"cpu": "100m", "example.com/foo": "1"}))
    await settle(h)

    assert h.node_of("plain") == "n1"
    # Only pods requesting a managed resource call it, and only once NodeResourcesFit let them through.
    # (How often: the rejected pod's own status update requeues it, extenders registering no events,
    # and with SchedulerPopFromBackoffQ an idle scheduler retries it from backoffQ at once.)
    assert sorted({body["Pod"]["metadata"]["name"] for body in extender.bodies("filter")}) == called
    assert h.condition("foo")["message"] == message


async def test_ignorable_extender_that_times_out_does_not_stop_scheduling(harness, extender: FakeExtender):
    extender.on("filter", lambda body: extender.hang())
    h = harness([{"urlPrefix": extender.url, "filterVerb": "filter", "ignorable": True, "httpTimeout": "200ms"}])
    h.add_pods(make_pod("p", scheduler_name=PROFILE))
    await settle(h)

    assert len(extender.bodies("filter")) == 1
    assert h.node_of("p") in {"n1", "n2", "n3"}


@pytest.mark.parametrize("answer, message", [
    pytest.param(lambda url: web.Response(status=500),
                 lambda url: f"failed filter with extender at URL {url}/filter, code 500", id="http-500"),
    pytest.param(lambda url: {"Error": "extender is sad"}, lambda url: "extender is sad", id="error-field"),
])
async def test_non_ignorable_filter_failure_is_a_scheduler_error(harness, extender: FakeExtender, answer, message):
    extender.on("filter", lambda body: answer(extender.url))
    h = harness([{"urlPrefix": extender.url, "filterVerb": "filter"}])
    h.add_pods(make_pod("p", scheduler_name=PROFILE))
    await settle(h)

    assert h.node_of("p") is None
    condition = h.condition("p")
    assert (condition["reason"], condition["message"]) == ("SchedulerError", message(extender.url))


async def test_prioritize_errors_are_ignored(harness, extender: FakeExtender):
    extender.on("prioritize", lambda body: web.Response(status=503))
    h = harness([{"urlPrefix": extender.url, "prioritizeVerb": "prioritize", "weight": 1}])
    h.add_pods(make_pod("p", scheduler_name=PROFILE))
    await settle(h)

    assert len(extender.bodies("prioritize")) == 1
    assert h.node_of("p") in {"n1", "n2", "n3"}


async def test_bind_extender_binds_instead_of_the_bind_plugins(harness, extender: FakeExtender):
    extender.on("bind", lambda body: {"Error": ""})
    h = harness([{"urlPrefix": extender.url, "bindVerb": "bind"}], nodes=1)
    h.add_pods(make_pod("p", scheduler_name=PROFILE, uid="uid-p"))
    await settle(h)

    assert extender.bodies("bind") == [{"PodName": "p", "PodNamespace": "default", "PodUID": "uid-p", "Node": "n1"}]
    assert h.node_of("p") is None  # DefaultBinder did not run: the extender owns the binding
    assert h.recorder.last("p").result == "scheduled"


async def test_a_node_filled_while_extenders_answer_is_checked_again_before_assuming(harness, extender: FakeExtender):
    h = harness([{"urlPrefix": extender.url, "filterVerb": "filter", "prioritizeVerb": "prioritize",
                  "weight": 1, "nodeCacheCapable": True}], nodes=2)

    def fill_n1_then_keep_all(body: dict[str, Any]) -> dict[str, Any]:
        if len(extender.bodies("filter")) == 1:  # someone else's pod lands on n1 meanwhile
            h.handlers.on_pod_upsert(make_pod("big", node_name="n1", requests={"cpu": "4"}, uid="uid-big"))
        return {"NodeNames": body["NodeNames"], "FailedNodes": {}, "Error": ""}

    extender.on("filter", fill_n1_then_keep_all)
    extender.on("prioritize", lambda body: [{"Host": "n1", "Score": 10}, {"Host": "n2", "Score": 0}])
    h.add_pods(make_pod("p", scheduler_name=PROFILE, requests={"cpu": "1"}))
    await settle(h)

    assert h.node_of("p") == "n2"
    assert [sorted(b["NodeNames"]) for b in extender.bodies("filter")] == [["n1", "n2"], ["n2"]]


async def test_a_pod_bound_by_someone_else_while_extenders_answer_is_dropped_not_fatal(harness,
                                                                                     extender: FakeExtender):
    h = harness([{"urlPrefix": extender.url, "filterVerb": "filter", "weight": 1, "nodeCacheCapable": True}])

    def bind_elsewhere_then_keep_all(body: dict[str, Any]) -> dict[str, Any]:
        bound = make_pod("p", scheduler_name=PROFILE, node_name="n3", requests={"cpu": "1"}, uid="uid-p")
        h.client.pods["default/p"] = bound
        h.handlers.on_pod_upsert(bound, pending)
        return {"NodeNames": body["NodeNames"], "FailedNodes": {}, "Error": ""}

    extender.on("filter", bind_elsewhere_then_keep_all)
    pending = make_pod("p", scheduler_name=PROFILE, requests={"cpu": "1"}, uid="uid-p")
    h.add_pods(pending)
    await settle(h)

    assert h.client.bindings == []
    assert h.node_of("p") == "n3"
    assert not h.scheduler.cache.is_assumed("uid-p")
    assert h.scheduler.cache.get_node("n3").requested.milli_cpu == 1000
    assert h.scheduler.queue.is_settled()
    assert h.scheduler.queue.pending_counts() == {"active": 0, "backoff": 0, "unschedulable": 0, "gated": 0}


async def test_a_deleting_pod_of_an_extender_profile_is_skipped_with_upstreams_event(harness, extender: FakeExtender):
    h = harness([{"urlPrefix": extender.url, "filterVerb": "filter"}])
    pod = make_pod("leaving", scheduler_name=PROFILE)
    pod["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    h.add_pods(pod)
    await settle(h)
    assert extender.bodies("filter") == []
    assert [(e.reason, e.message) for e in h.client.events] == [
        ("FailedScheduling", "skip schedule deleting pod: default/leaving")]


NO_SCORING = {"plugins": {"preScore": {"disabled": [{"name": "*"}]}, "score": {"disabled": [{"name": "*"}]}}}


async def test_a_filter_extender_gets_the_usual_share_of_nodes_even_without_scoring(harness, extender: FakeExtender):
    """Upstream stops at the first feasible node only when nothing scores and no extender filters."""
    extender.on("filter", lambda body: {"NodeNames": body["NodeNames"], "FailedNodes": {}, "Error": ""})
    h = harness([{"urlPrefix": extender.url, "filterVerb": "filter", "nodeCacheCapable": True}], nodes=200,
                **NO_SCORING)
    h.add_pods(make_pod("p", scheduler_name=PROFILE))
    await settle(h)
    [body] = extender.bodies("filter")
    assert len(body["NodeNames"]) == 100  # numFeasibleNodesToFind(0, 200)
    assert h.node_of("p") is not None


async def test_a_nominated_node_the_extender_rejects_falls_back_to_the_other_nodes(harness, extender: FakeExtender):
    """As upstream's evaluateNominatedNode: the extenders judge the nominated node too."""
    extender.on("filter", lambda body: {"NodeNames": [n for n in body["NodeNames"] if n != "n1"],
                                        "FailedNodes": {"n1": "n1 is draining"}, "Error": ""})
    h = harness([{"urlPrefix": extender.url, "filterVerb": "filter", "nodeCacheCapable": True}])
    pod = make_pod("p", scheduler_name=PROFILE)
    pod["status"] = {"nominatedNodeName": "n1"}
    h.add_pods(pod)
    await settle(h)
    assert [sorted(body["NodeNames"]) for body in extender.bodies("filter")] == [["n1"], ["n1", "n2", "n3"]]
    assert h.node_of("p") in {"n2", "n3"}


# --- preemption: the extenders' preempt verb (upstream's ProcessPreemption) --------------------


def _full_cluster(h: Harness) -> None:
    """Each of n1..n3 full with one low-priority pod; a high-priority pod must preempt one."""
    for i in (1, 2, 3):
        h.add_pods(make_pod(f"low-{i}", node_name=f"n{i}", uid=f"uid-low-{i}", priority=0, requests={"cpu": "3"}))
    h.add_pods(make_pod("high", scheduler_name=PROFILE, uid="uid-high", priority=100, requests={"cpu": "3"}))


async def test_preempt_verb_chooses_among_the_candidates_and_their_victims(harness, extender: FakeExtender):
    extender.on("preempt", lambda body: {"NodeNameToMetaVictims": {
        "n2": {"Pods": [{"UID": "uid-low-2"}], "NumPDBViolations": 0}}})
    h = harness([{"urlPrefix": extender.url, "preemptVerb": "preempt"}])
    _full_cluster(h)
    await settle(h)

    [body] = extender.bodies("preempt")
    assert body["Pod"]["metadata"]["name"] == "high"
    assert body["NodeNameToMetaVictims"] is None
    assert {node: [p["metadata"]["name"] for p in victims["Pods"]]
            for node, victims in body["NodeNameToVictims"].items()} == {
        "n1": ["low-1"], "n2": ["low-2"], "n3": ["low-3"]}
    assert h.client.deleted == ["default/low-2"]
    # Nominated to n2 when its victim was deleted, then bound there once the deletion freed it
    # (the binding cleared the nomination, as the API server does).
    assert ([a.nominated_node for a in h.recorder.attempts if a.pod.name == "high"], h.node_of("high")) == (
        ["n2", ""], "n2")
    assert "nominatedNodeName" not in h.client.pods["default/high"]["status"]


async def test_node_cache_capable_preempt_verb_gets_victims_by_uid(harness, extender: FakeExtender):
    extender.on("preempt", lambda body: {"NodeNameToMetaVictims": {
        node: victims for node, victims in body["NodeNameToMetaVictims"].items() if node == "n3"}})
    h = harness([{"urlPrefix": extender.url, "preemptVerb": "preempt", "nodeCacheCapable": True}])
    _full_cluster(h)
    await settle(h)

    [body] = extender.bodies("preempt")
    assert body["NodeNameToVictims"] is None
    assert body["NodeNameToMetaVictims"]["n1"] == {"Pods": [{"UID": "uid-low-1"}], "NumPDBViolations": 0}
    assert h.client.deleted == ["default/low-3"]


async def test_an_extender_that_accepts_no_candidate_stops_preemption(harness, extender: FakeExtender):
    extender.on("preempt", lambda body: {"NodeNameToMetaVictims": {}})
    h = harness([{"urlPrefix": extender.url, "preemptVerb": "preempt"}])
    _full_cluster(h)
    await settle(h)
    assert h.client.deleted == []
    assert h.recorder.last("high").message.endswith("preemption: no candidate node for preemption")


@pytest.mark.parametrize(("ignorable", "deleted"), [(True, 1), (False, 0)], ids=["ignorable", "not-ignorable"])
async def test_a_failing_preempt_verb(harness, extender: FakeExtender, ignorable: bool, deleted: int):
    extender.on("preempt", lambda body: web.Response(status=500, text="boom"))
    h = harness([{"urlPrefix": extender.url, "preemptVerb": "preempt", "ignorable": ignorable}])
    _full_cluster(h)
    await settle(h)
    # Ignorable: preemption goes on without it; otherwise the attempt is an error.
    assert len(h.client.deleted) == deleted
