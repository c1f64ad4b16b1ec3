"""Pod and node update diffs as upstream's UpdateNode* / UpdatePod* action types."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from kopfsched.framework.events import ActionType, EventResource
from kopfsched.queue.events import node_update_actions, node_update_events, pod_update_actions, pod_update_events
from tests.builders import make_node, make_pod, taint

A = ActionType
Obj = dict[str, Any]


def changed(obj: Obj, change: Callable[[Obj], None]) -> Obj:
    new = copy.deepcopy(obj)
    change(new)
    return new


def condition(kind: str, status: str, heartbeat: str = "t0") -> Obj:
    return {"type": kind, "status": status, "lastHeartbeatTime": heartbeat}


NODE = make_node("n", labels={"zone": "a"}, taints=[taint("x")])
NODE["status"]["conditions"] = [condition("Ready", "True")]
CORDONED = changed(NODE, lambda n: n["spec"].update(unschedulable=True))


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        pytest.param(NODE, copy.deepcopy(NODE), A(0), id="unchanged"),
        pytest.param(NODE, changed(NODE, lambda n: n["status"]["conditions"][0].update(lastHeartbeatTime="t1")),
                     A(0), id="heartbeat-only"),
        pytest.param(NODE, changed(NODE, lambda n: n["status"]["allocatable"].update(cpu="8")),
                     A.UPDATE_NODE_ALLOCATABLE, id="allocatable"),
        pytest.param(NODE, changed(NODE, lambda n: n["metadata"]["labels"].update(zone="b")),
                     A.UPDATE_NODE_LABEL, id="label"),
        pytest.param(NODE, changed(NODE, lambda n: n["spec"].update(taints=[])), A.UPDATE_NODE_TAINT, id="taint"),
        pytest.param(NODE, changed(NODE, lambda n: n["status"]["conditions"][0].update(status="False")),
                     A.UPDATE_NODE_CONDITION, id="condition"),
        pytest.param(NODE, changed(NODE, lambda n: n["metadata"].update(annotations={"a": "b"})),
                     A.UPDATE_NODE_ANNOTATION, id="annotation"),
        pytest.param(CORDONED, NODE, A.UPDATE_NODE_TAINT, id="uncordoned-counts-as-taint"),
        pytest.param(NODE, CORDONED, A(0), id="cordoned-is-no-event"),
        pytest.param(NODE, changed(NODE, lambda n: (n["metadata"]["labels"].update(zone="b"),
                                                    n["status"]["allocatable"].update(pods="10"))),
                     A.UPDATE_NODE_ALLOCATABLE | A.UPDATE_NODE_LABEL, id="two-changes"),
    ],
)
def test_node_update_actions(old: Obj, new: Obj, expected: ActionType) -> None:
    assert node_update_actions(old, new) == expected


def test_node_update_events_one_per_change_with_upstream_labels() -> None:
    new = changed(NODE, lambda n: (n["metadata"]["labels"].update(zone="b"), n["spec"].update(taints=[])))
    events = node_update_events(NODE, new)
    assert [(e.resource, e.action, str(e)) for e in events] == [
        (EventResource.NODE, A.UPDATE_NODE_LABEL, "NodeUpdateNodeLabel"),
        (EventResource.NODE, A.UPDATE_NODE_TAINT, "NodeUpdateNodeTaint"),
    ]


POD = make_pod("p", uid="u", labels={"app": "a"}, requests={"cpu": "2", "memory": "1Gi"},
               tolerations=[{"key": "k", "operator": "Exists"}], scheduling_gates=["g"])


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        pytest.param(lambda p: None, A.UPDATE_OTHER, id="nothing-specific"),
        pytest.param(lambda p: p["metadata"].update(annotations={"a": "b"}), A.UPDATE_OTHER, id="annotation"),
        pytest.param(lambda p: p["metadata"]["labels"].update(app="b"), A.UPDATE_POD_LABEL, id="label"),
        pytest.param(lambda p: p["spec"]["containers"][0]["resources"]["requests"].update(cpu="1"),
                     A.UPDATE_POD_SCALE_DOWN, id="cpu-scaled-down"),
        pytest.param(lambda p: p["spec"]["containers"][0]["resources"]["requests"].pop("memory"),
                     A.UPDATE_POD_SCALE_DOWN, id="request-removed"),
        pytest.param(lambda p: p["spec"]["containers"][0]["resources"]["requests"].update(cpu="3"),
                     A.UPDATE_OTHER, id="scaled-up"),
        pytest.param(lambda p: p["spec"].pop("schedulingGates"), A.UPDATE_POD_SCHEDULING_GATES_ELIMINATED,
                     id="gates-removed"),
        pytest.param(lambda p: p["spec"]["tolerations"].append({"key": "j", "operator": "Exists"}),
                     A.UPDATE_POD_TOLERATION, id="toleration-added"),
        pytest.param(lambda p: (p["metadata"]["labels"].update(app="b"), p["spec"].update(schedulingGates=[])),
                     A.UPDATE_POD_LABEL | A.UPDATE_POD_SCHEDULING_GATES_ELIMINATED, id="label-and-gates"),
        pytest.param(lambda p: p.setdefault("status", {}).update(resourceClaimStatuses=[
            {"name": "gpu", "resourceClaimName": "p-gpu-x"}]), A.UPDATE_POD_GENERATED_RESOURCE_CLAIM,
                     id="generated-claim"),
        pytest.param(lambda p: p.setdefault("status", {}).update(extendedResourceClaimStatus={
            "resourceClaimName": "p-extended-resources-x", "requestMappings": []}),
                     A.UPDATE_POD_GENERATED_RESOURCE_CLAIM, id="extended-resource-claim"),
    ],
)
def test_pod_update_actions(change: Callable[[Obj], Any], expected: ActionType) -> None:
    assert pod_update_actions(POD, changed(POD, change)) == expected


@pytest.mark.parametrize(
    ("node_name", "resource", "label"),
    [
        pytest.param("", EventResource.UNSCHEDULED_POD, "UnscheduledPodUpdatePodLabel", id="unscheduled"),
        pytest.param("n1", EventResource.ASSIGNED_POD, "AssignedPodUpdatePodLabel", id="assigned"),
    ],
)
def test_pod_update_events_resource(node_name: str, resource: EventResource, label: str) -> None:
    new = changed(POD, lambda p: (p["metadata"]["labels"].update(app="b"), p["spec"].update(nodeName=node_name)))
    events = pod_update_events(POD, new)
    assert [(e.resource, e.action, str(e)) for e in events] == [(resource, A.UPDATE_POD_LABEL, label)]


def _slow_scaled_down(old: Obj, new: Obj) -> bool:
    from kopfsched.framework.resources import pod_requests
    new_requests = pod_requests(new)
    return any(name not in new_requests or new_requests[name] < amount
               for name, amount in pod_requests(old).items())


@pytest.mark.parametrize("seed", range(40))
def test_update_events_equal_the_straightforward_diff(seed: int) -> None:
    """pod_update_events (its scale-down check skipped when the spec and the status parts requests
    read are the very same objects, its events shared) against the diff computed in full, over
    random status patches and resizes of one pod."""
    import random

    from kopfsched.queue import events
    rng = random.Random(seed)
    statuses = [
        {"containerStatuses": [{"name": "c0", "allocatedResources": {"cpu": "2"}}]},
        {"containerStatuses": [{"name": "c0", "resources": {"requests": {"cpu": "500m"}}}]},
        {"initContainerStatuses": [{"name": "i0", "allocatedResources": {"cpu": "3"}}]},
        {"containerStatuses": [{"name": "c0", "allocatedResources": {"cpu": "250m"}}]},
        {},
    ]
    conditions = [[], [{"type": "PodScheduled", "status": "False"}],
                  [{"type": "PodResizePending", "status": "True", "reason": "Infeasible"}],
                  [{"type": "PodResizePending", "status": "True", "reason": "Deferred"}]]
    spec = make_pod("p", requests={"cpu": "1"}, init_requests=[{"cpu": "1"}])["spec"]
    current: Obj = {"metadata": {"name": "p", "uid": "u"}, "spec": spec, "status": {}}
    seen: set[tuple[bool, bool]] = set()
    for _ in range(60):
        status = dict(current["status"])
        roll = rng.random()
        if roll < 0.4:  # a status patch: only the conditions or the nomination change
            status["conditions"] = rng.choice(conditions)
            status["nominatedNodeName"] = rng.choice(["", "n1"])
        elif roll < 0.7:  # the kubelet's view of the containers changes
            for key in ("containerStatuses", "initContainerStatuses", "resources", "allocatedResources"):
                status.pop(key, None)
            status.update(copy.deepcopy(rng.choice(statuses)))
        elif roll < 0.85:  # a copy of equal parts: equal, not the same objects
            status = copy.deepcopy(status)
        new: Obj = {**current, "status": status}
        if rng.random() < 0.2:  # a resize of the spec, or of the pod's own requests
            new["spec"] = changed(current["spec"], lambda s: s["containers"][0]["resources"]["requests"].update(
                cpu=rng.choice(["500m", "1", "2"])))
        elif rng.random() < 0.3:
            if rng.random() < 0.5:
                new["spec"] = {**current["spec"], "resources": {"requests": {"cpu": rng.choice(["1", "3"])}}}
            new["status"] = {**status, "resources": {"requests": {"cpu": rng.choice(["1", "2"])}}}
        scaled_down = _slow_scaled_down(current, new)
        seen.add((scaled_down, events.same_requests(current, new)))
        assert events._scaled_down(current, new) == scaled_down
        expected = [events.event_for(EventResource.UNSCHEDULED_POD, a)
                    for a in events.split_actions(pod_update_actions(current, new))]
        assert pod_update_events(current, new) == expected
        current = new
    assert (False, True) in seen and (True, False) in seen
