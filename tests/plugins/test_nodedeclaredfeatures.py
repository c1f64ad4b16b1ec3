"""NodeDeclaredFeatures: the cases of v1.37.2's
pkg/scheduler/framework/plugins/nodedeclaredfeatures/nodedeclaredfeatures_test.go (upstream's
mock features become Feature entries; "plugin disabled" cases are gone, the gate being locked
on), then the real registry's inference and the plugin through the default profile."""

from __future__ import annotations

import pytest

from kopfsched.framework.cycle_state import CycleState
from kopfsched.framework.events import QueueingHint
from kopfsched.framework.status import Code
from kopfsched.framework.types import NodeInfo, PodInfo
from kopfsched.plugins.nodedeclaredfeatures import (
    ERR_REASON_UNSATISFIED_REQUIREMENTS,
    STATE_KEY,
    Feature,
    NodeDeclaredFeatures,
    infer_for_pod_scheduling,
)
from tests.builders import make_node, make_pod
from tests.harness import Harness

FEATURE1, FEATURE2 = "TestFeature1", "TestFeature2"


def mock(name: str, infer: bool, max_version: tuple[int, ...] | None = None) -> Feature:
    return Feature(name, lambda spec: infer, max_version)


def declaring(name: str, *features: str) -> dict:
    node = make_node(name)
    if features:
        node["status"]["declaredFeatures"] = list(features)
    return node


@pytest.mark.parametrize(("features", "version", "code", "state"), [
    pytest.param([mock(FEATURE1, True), mock(FEATURE2, False)], (1, 35, 0), None, {FEATURE1},
                 id="Pod with feature requirements"),
    pytest.param([mock(FEATURE1, True, (1, 38, 0)), mock(FEATURE2, True, (1, 38, 0))], (1, 35, 0), None,
                 {FEATURE1, FEATURE2}, id="Pod with multiple feature requirements"),
    pytest.param([mock(FEATURE1, False), mock(FEATURE2, False)], (1, 35, 0), Code.SKIP, None,
                 id="Pod with no requirements"),
    pytest.param([mock(FEATURE1, True, (1, 33, 0)), mock(FEATURE2, False)], (1, 34, 0), Code.SKIP, None,
                 id="Feature not required, version > MaxVersion"),
])
def test_pre_filter(features, version, code, state):
    plugin = NodeDeclaredFeatures(features=features, version=version)
    cycle = CycleState()
    status = plugin.pre_filter(cycle, PodInfo(make_pod("test-pod")), [])
    assert (status.code if status is not None else None) == code
    assert cycle.get(STATE_KEY) == (frozenset(state) if state is not None else None)


@pytest.mark.parametrize(("declared", "required", "expected"), [
    pytest.param(["FeatureA", "FeatureB"], ["FeatureA"], None, id="Node matches requirements"),
    pytest.param(["FeatureB"], ["FeatureA"], (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_UNSATISFIED_REQUIREMENTS),
                 id="Node does not match requirements"),
    pytest.param(["FeatureA", "FeatureB", "FeatureC"], ["FeatureA", "FeatureC"], None,
                 id="Node with multiple features, pod requires subset"),
    pytest.param([], ["FeatureA"], (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_UNSATISFIED_REQUIREMENTS),
                 id="Node has no declared features"),
    pytest.param(["FeatureA"], ["FeatureA", "FeatureB"],
                 (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_UNSATISFIED_REQUIREMENTS),
                 id="Node with some but not all required features"),
    pytest.param([], None, (Code.ERROR, 'error reading "PreFilterNodeDeclaredFeatures" from cycle-state: not found'),
                 id="Error getting pre-filter state"),
])
def test_filter(declared, required, expected):
    plugin = NodeDeclaredFeatures()
    cycle = CycleState()
    if required is not None:
        cycle.write(STATE_KEY, frozenset(required))
    status = plugin.filter(cycle, PodInfo(make_pod("test-pod")), NodeInfo(declaring("node-1", *declared)))
    assert (None if status is None else (status.code, status.message)) == expected


@pytest.mark.parametrize(("old", "new", "hint"), [
    pytest.param(None, declaring("node-1", "FeatureA"), QueueingHint.QUEUE, id="Node Add with feature"),
    pytest.param(declaring("node-1"), declaring("node-1", "FeatureA"), QueueingHint.QUEUE,
                 id="Node Update (Features Added)"),
    pytest.param(declaring("node-1", "FeatureA"), declaring("node-1", "FeatureA"), QueueingHint.SKIP,
                 id="Node Update (Features Unchanged)"),
])
def test_enqueue_extensions_node_update(old, new, hint):
    plugin = NodeDeclaredFeatures(features=[])
    assert plugin.is_schedulable_after_node_change(make_pod("test-pod"), old, new) is hint


def _answers(*answers: bool) -> Feature:
    """A mock feature answering InferForScheduling in turn (upstream's call-counting mock)."""
    calls = iter(answers)
    return Feature("TestFeature", lambda spec: next(calls))


@pytest.mark.parametrize(("feature", "version", "hint"), [
    pytest.param(_answers(False, True), (1, 35, 0), QueueingHint.QUEUE, id="Pod Update adds requirement"),
    pytest.param(_answers(True, False), (1, 35, 0), QueueingHint.QUEUE, id="Pod Update removes requirement"),
    pytest.param(mock("TestFeature", False), (1, 35, 0), QueueingHint.SKIP,
                 id="Pod Update with no change in requirements"),
    pytest.param(mock("TestFeature", True), None, QueueingHint.QUEUE, id="Infer returns error"),
])
def test_is_schedulable_after_target_pod_update(feature, version, hint):
    plugin = NodeDeclaredFeatures(features=[feature], version=version)
    target = make_pod("test-pod", uid="123")
    updated = make_pod("test-pod", uid="123", labels={"foo": "bar"})
    assert plugin.is_schedulable_after_target_pod_update(target, target, updated) is hint


def test_infer_needs_a_version():
    with pytest.raises(ValueError, match=r"^target version cannot be nil$"):
        infer_for_pod_scheduling([mock("TestFeature", True)], {}, None)


def test_events_to_register():
    assert len(list(NodeDeclaredFeatures().events_to_register())) == 2


# The real registry (component-helpers/nodedeclaredfeatures/features at v0.37.2).
RESTART_ALL = {"name": "c", "image": "i", "restartPolicy": "Always",
               "restartPolicyRules": [{"action": "RestartAllContainers",
                                       "exitCodes": {"operator": "In", "values": [42]}}]}


@pytest.mark.parametrize(("spec", "required"), [
    pytest.param({"containers": [{"name": "c", "image": "i"}]}, set(), id="plain-pod"),
    pytest.param({"containers": [RESTART_ALL]}, {"RestartAllContainersOnContainerExits"}, id="restart-all-containers"),
    pytest.param({"containers": [{"name": "c"}], "initContainers": [RESTART_ALL]},
                 {"RestartAllContainersOnContainerExits"}, id="restart-all-in-init-container"),
    pytest.param({"containers": [{"name": "c", "restartPolicyRules": [{"action": "Restart"}]}]}, set(),
                 id="restart-one-container"),
    pytest.param({"hostNetwork": True, "hostUsers": False, "containers": [{"name": "c"}]},
                 {"UserNamespacesHostNetworkSupport"}, id="user-namespace-host-network"),
    pytest.param({"hostNetwork": True, "containers": [{"name": "c"}]}, set(), id="host-network-host-users-unset"),
    pytest.param({"hostUsers": False, "containers": [{"name": "c"}]}, set(), id="user-namespace-pod-network"),
    pytest.param({"containers": [{"name": "c", "volumeMounts": [{"name": "v", "mountPath": "/v",
                                                                 "bindMountOptions": ["nosuid"]}]}]},
                 {"VolumeBindMountOptions"}, id="bind-mount-options"),
    pytest.param({"containers": [{"name": "c"}],
                  "ephemeralContainers": [{"name": "e", "volumeMounts": [{"name": "v", "bindMountOptions": ["ro"]}]}]},
                 {"VolumeBindMountOptions"}, id="bind-mount-options-ephemeral"),
])
def test_the_registry_infers_what_a_pod_needs(spec, required):
    assert NodeDeclaredFeatures()._requirements(spec) == required


async def test_a_pod_that_needs_a_feature_goes_to_a_node_that_declares_it_on_the_default_profile():
    h = Harness([declaring("plain"), declaring("featured", "RestartAllContainersOnContainerExits")])
    h.add_pods(make_pod("needs", containers=[RESTART_ALL]), make_pod("plain-pod"))
    await h.settle()
    assert h.node_of("needs") == "featured"
    h.add_pods(make_pod("needs-2", containers=[RESTART_ALL], node_selector={"kubernetes.io/hostname": "plain"}))
    await h.settle()
    assert h.condition("needs-2")["message"] == (
        "0/2 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 1 node(s) didn't match "
        "Pod's required features. preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.")
    # The kubelet of "plain" comes to declare the feature: the pod is queued again and placed.
    old = declaring("plain")
    new = declaring("plain", "RestartAllContainersOnContainerExits")
    h.handlers.on_node_upsert(new, old)
    await h.settle()
    assert h.node_of("needs-2") == "plain"
