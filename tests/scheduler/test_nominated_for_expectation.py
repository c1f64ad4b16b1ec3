"""NominatedNodeNameForExpectation (KEP-5278, beta and on in v1.37): at the start of its binding
cycle a pod that will wait at Permit or whose PreBind has work (PreBindPreFlight) gets
status.nominatedNodeName = the chosen node, before anything else of its binding reaches the
API; a plain pod gets no patch; a failed binding clears the nomination with the condition, as
upstream's clearNominatedNode; the gate off gives the behaviour before it (schedule_one.go's
bindingCycle, framework/runtime RunPreBindPreFlights, v1.37.2)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kopfsched.framework.events import ActionType, ClusterEvent, ClusterEventWithHint, EventResource
from kopfsched.framework.interface import ALLOW_PARALLEL
from kopfsched.framework.registry import PluginFactory, Registry
from kopfsched.framework.status import SKIP, Status
from kopfsched.plugins.registry import in_tree_registry
from kopfsched.simulate.client import InMemoryClusterClient
from tests.builders import make_node, make_pod
from tests.harness import Harness, profile_from_spec
from tests.plugins.claims import WFFC, pv, pvc

GATE_OFF = "NominatedNodeNameForExpectation=false"


class RecordingClient(InMemoryClusterClient):
    """The in-memory cluster, with every write in the order the API receives it."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[Any, ...]] = []

    async def patch_pod_status(self, *, pod, condition=None, nominated_node_name=None) -> None:
        self.calls.append(("status", pod["metadata"]["name"], nominated_node_name,
                           condition["reason"] if condition else None))
        await super().patch_pod_status(pod=pod, condition=condition, nominated_node_name=nominated_node_name)

    async def patch_object(self, *, kind, obj, patch):
        self.calls.append(("patch", kind, obj["metadata"]["name"]))
        return await super().patch_object(kind=kind, obj=obj, patch=patch)

    async def bind(self, *, pod, node_name) -> None:
        self.calls.append(("bind", pod["metadata"]["name"], node_name))
        await super().bind(pod=pod, node_name=node_name)

    def pod_calls(self, name: str) -> list[tuple[Any, ...]]:
        return [c for c in self.calls if c[0] != "patch" and c[1] == name]


class GatePermit:
    """Pods labelled gate=wait wait; gate=deny are refused; gate=open allow every waiting pod."""

    name = "GatePermit"

    def __init__(self, args, handle) -> None:
        self.handle = handle

    def permit(self, state, pod, node_name):
        gate = pod.labels.get("gate")
        if gate == "wait":
            return Status.wait(), 30.0
        if gate == "open":
            for waiting in self.handle.waiting_pods:
                waiting.allow(self.name)
        return None, 0.0

    def events_to_register(self):
        return (ClusterEventWithHint(ClusterEvent(EventResource.ASSIGNED_POD, ActionType.DELETE)),)


class FlakyPreBind:
    """PreBind with work for pods labelled prebind=...: 'fail-once' fails the first time."""

    name = "FlakyPreBind"
    calls: list[str] = []
    failed: set[str] = set()

    def __init__(self, args, handle) -> None:
        pass

    def pre_bind_pre_flight(self, state, pod, node_name):
        kind = pod.labels.get("prebind")
        if kind == "preflight-error":
            return None, Status.as_error("boom")
        if kind == "preflight-unschedulable":
            return None, Status.unschedulable("no")
        return None, (None if kind else SKIP)

    async def pre_bind(self, state, pod, node_name):
        FlakyPreBind.calls.append(pod.name)
        if pod.labels.get("prebind") == "fail-once" and pod.name not in FlakyPreBind.failed:
            FlakyPreBind.failed.add(pod.name)
            return Status.as_error("volume not ready")
        return None


def _harness(nodes: list[dict], *, gates: str = "", client: RecordingClient | None = None) -> Harness:
    custom = Registry()
    custom.register(PluginFactory(name="GatePermit", factory=GatePermit))
    custom.register(PluginFactory(name="FlakyPreBind", factory=FlakyPreBind))
    registry = in_tree_registry().merged(custom)
    profile = profile_from_spec({"schedulerName": "default-scheduler", "plugins": {
        "permit": {"enabled": [{"name": "GatePermit"}]},
        "preBind": {"enabled": [{"name": "FlakyPreBind"}]},
    }}, registry)
    FlakyPreBind.calls, FlakyPreBind.failed = [], set()
    return Harness(nodes, profiles=[profile], registry=registry, client=client or RecordingClient(), gates=gates)


def _uid(h: Harness, name: str) -> str:
    return h.client.pods[f"default/{name}"]["metadata"]["uid"]


def _nominated(h: Harness, name: str) -> str | None:
    return (h.client.pods[f"default/{name}"].get("status") or {}).get("nominatedNodeName")


def _volume_harness(*, gates: str = "") -> tuple[Harness, RecordingClient]:
    client = RecordingClient()
    h = Harness([make_node("node-a"), make_node("node-b")], client=client, gates=gates)
    h.add_objects("StorageClass", WFFC)
    h.add_objects("PersistentVolume", pv("on-b", node="node-b"))
    h.add_objects("PersistentVolumeClaim", pvc("data"))
    h.add_pods(make_pod("app", volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]))
    return h, client


async def test_a_pod_with_a_claim_to_bind_is_nominated_before_prebind_writes_anything():
    h, client = _volume_harness()
    await h.settle()
    assert h.node_of("app") == "node-b"
    # As upstream: the status patch (awaited), then PreBind's write of the PV's claimRef (the
    # in-memory PV controller completes the binding at once), then the binding.
    assert client.calls == [
        ("status", "app", "node-b", None),
        ("patch", "PersistentVolume", "on-b"),
        ("bind", "app", "node-b"),
    ]
    # The binding cleared it, as the API server does (ClearingNominatedNodeNameAfterBinding).
    assert _nominated(h, "app") is None
    assert h.scheduler.queue.nominator.nominated_node(_uid(h, "app")) == ""


async def test_a_pod_whose_claims_are_bound_already_or_that_has_none_gets_no_patch():
    client = RecordingClient()
    h = Harness([make_node("node-a")], client=client)
    h.add_objects("StorageClass", WFFC)
    h.add_objects("PersistentVolume", pv("on-a", node="node-a", claim="data", phase="Bound"))
    h.add_objects("PersistentVolumeClaim", pvc("data", volume="on-a", bound=True, phase="Bound"))
    h.add_pods(make_pod("bound-claim", volumes=[{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]),
               make_pod("plain", creation_timestamp="2026-01-01T00:00:01Z"))
    await h.settle()
    assert client.calls == [("bind", "bound-claim", "node-a"), ("bind", "plain", "node-a")]


async def test_with_the_gate_off_a_pod_with_a_claim_to_bind_gets_no_nomination():
    h, client = _volume_harness(gates=GATE_OFF)
    await h.settle()
    assert client.calls == [("patch", "PersistentVolume", "on-b"), ("bind", "app", "node-b")]


async def test_a_pod_waiting_at_permit_is_nominated_but_counted_once_by_the_pods_after_it():
    h = _harness([make_node("n1", cpu="2")])
    h.add_pods(make_pod("waiter", labels={"gate": "wait"}, requests={"cpu": "1"}))
    await h.scheduler.schedule_one(h.scheduler.queue.pop())
    await asyncio.sleep(0)  # the binding task starts, writes the nomination and waits at Permit
    assert h.client.pod_calls("waiter") == [("status", "waiter", "n1", None)]
    assert _nominated(h, "waiter") == "n1"
    # The pod is assumed on n1 (its update event is not queued): the nominator does not count
    # it a second time, so a pod of the same priority still fits in the cpu left.
    assert h.scheduler.queue.nominator.nominated_node(_uid(h, "waiter")) == ""
    h.add_pods(make_pod("opener", labels={"gate": "open"}, requests={"cpu": "1"}))
    await h.settle()
    assert (h.node_of("waiter"), h.node_of("opener")) == ("n1", "n1")
    assert _nominated(h, "waiter") is None  # the binding cleared it
    assert h.client.pod_calls("opener") == [("bind", "opener", "n1")]  # nothing to wait for: no patch


async def test_a_pod_nominated_to_its_node_already_is_not_patched_again():
    h = _harness([make_node("n1")])
    pod = make_pod("waiter", labels={"gate": "wait"}, requests={"cpu": "1"})
    pod["status"]["nominatedNodeName"] = "n1"
    h.add_pods(pod)
    await h.scheduler.schedule_one(h.scheduler.queue.pop())
    await asyncio.sleep(0)
    assert h.client.pod_calls("waiter") == []


async def test_a_pod_nominated_elsewhere_is_nominated_to_the_node_it_binds_to():
    h = _harness([make_node("n1")])
    pod = make_pod("waiter", labels={"gate": "wait"}, requests={"cpu": "1"})
    pod["status"]["nominatedNodeName"] = "gone"
    h.add_pods(pod)
    await h.scheduler.schedule_one(h.scheduler.queue.pop())
    await asyncio.sleep(0)
    assert h.client.pod_calls("waiter") == [("status", "waiter", "n1", None)]


async def test_a_rejection_at_permit_clears_the_nomination_with_the_condition():
    h = _harness([make_node("n1")])
    h.add_pods(make_pod("waiter", labels={"gate": "wait"}, requests={"cpu": "1"}))
    await h.scheduler.schedule_one(h.scheduler.queue.pop())
    await asyncio.sleep(0)
    h.scheduler.waiting_pods.get(_uid(h, "waiter")).reject("GatePermit", "not now")
    await h.scheduler.settle_tasks()
    # Upstream's handleSchedulingFailure with clearNominatedNode: one patch, condition and nomination.
    assert h.client.pod_calls("waiter") == [("status", "waiter", "n1", None),
                                            ("status", "waiter", "", "Unschedulable")]
    assert _nominated(h, "waiter") is None
    assert h.condition("waiter")["message"] == "0/1 nodes are available: 1 not now."
    assert h.scheduler.queue.nominator.nominated_node(_uid(h, "waiter")) == ""
    assert h.scheduler.cache.get_node("n1").requested.milli_cpu == 0
    # The pod gave up its nomination (an update the watch shows): as upstream, pods of at most
    # its priority are retried on it, the pod itself included (GatePermit's event is AssignedPodDelete).
    assert h.scheduler.queue.pending_counts() == {"active": 0, "backoff": 1, "unschedulable": 0, "gated": 0}


async def test_a_second_rejection_with_the_same_message_clears_only_the_nomination():
    h = _harness([make_node("n1")])
    h.add_pods(make_pod("waiter", labels={"gate": "wait"}, requests={"cpu": "1"}))
    for _ in range(2):
        await h.scheduler.schedule_one(h.scheduler.queue.pop())  # from backoffQ the second time
        await asyncio.sleep(0)
        h.scheduler.waiting_pods.get(_uid(h, "waiter")).reject("GatePermit", "not now")
        await h.scheduler.settle_tasks()
    # The condition is what it was: as upstream's patch, only the nomination changes.
    assert h.client.pod_calls("waiter") == [("status", "waiter", "n1", None), ("status", "waiter", "", "Unschedulable"),
                                            ("status", "waiter", "n1", None), ("status", "waiter", "", None)]
    assert h.condition("waiter")["message"] == "0/1 nodes are available: 1 not now."


async def test_with_the_gate_off_a_pod_waiting_at_permit_gets_no_nomination():
    h = _harness([make_node("n1")], gates=GATE_OFF)
    h.add_pods(make_pod("waiter", labels={"gate": "wait"}, requests={"cpu": "1"}))
    await h.scheduler.schedule_one(h.scheduler.queue.pop())
    await asyncio.sleep(0)
    h.scheduler.waiting_pods.get(_uid(h, "waiter")).reject("GatePermit", "not now")
    await h.scheduler.settle_tasks()
    assert h.client.pod_calls("waiter") == [("status", "waiter", None, "Unschedulable")]
    assert h.scheduler.queue.pending_counts() == {"active": 0, "backoff": 0, "unschedulable": 1, "gated": 0}


async def test_a_prebind_failure_clears_the_nomination_and_the_retry_nominates_again():
    h = _harness([make_node("n1")])
    h.add_pods(make_pod("p", labels={"prebind": "fail-once"}, requests={"cpu": "1"}))
    await h.settle()
    assert h.node_of("p") == "n1"
    assert h.client.pod_calls("p") == [
        ("status", "p", "n1", None),
        ("status", "p", "", "SchedulerError"),
        ("status", "p", "n1", None),
        ("bind", "p", "n1"),
    ]
    assert [a.message for a in h.recorder.attempts if a.result == "error"] == [
        'running PreBind plugin "FlakyPreBind": volume not ready']
    assert FlakyPreBind.calls == ["p", "p"]


@pytest.mark.parametrize(("label", "message"), [
    pytest.param("preflight-error", 'running PreBindPreFlight "FlakyPreBind": boom', id="error"),
    pytest.param("preflight-unschedulable", 'PreBindPreFlight FlakyPreBind returned "Unschedulable", which is '
                 "unsupported. It is supposed to return Success, Skip, or Error status", id="unsupported-code"),
])
async def test_a_prebind_preflight_failure_fails_the_binding_cycle_before_any_write(label, message):
    h = _harness([make_node("n1")])
    h.add_pods(make_pod("p", labels={"prebind": label}, requests={"cpu": "1"}))
    await h.scheduler.schedule_one(h.scheduler.queue.pop())
    await h.scheduler.settle_tasks()
    attempt = h.recorder.last("p")
    assert (attempt.result, attempt.reason, attempt.message) == ("error", "SchedulerError", message)
    assert h.client.pod_calls("p") == [("status", "p", None, "SchedulerError")]
    assert FlakyPreBind.calls == []
    assert h.scheduler.cache.get_node("n1").requested.milli_cpu == 0


async def test_a_prebind_plugin_whose_preflight_skips_is_not_called():
    h = _harness([make_node("n1")])
    h.add_pods(make_pod("p", requests={"cpu": "1"}))
    await h.settle()
    assert h.client.pod_calls("p") == [("bind", "p", "n1")]
    assert FlakyPreBind.calls == []


async def test_with_the_gate_off_prebind_runs_every_plugin_without_preflight():
    h = _harness([make_node("n1")], gates=GATE_OFF)
    h.add_pods(make_pod("p", requests={"cpu": "1"}), make_pod("q", labels={"prebind": "preflight-error"},
                                                               creation_timestamp="2026-01-01T00:00:01Z"))
    await h.settle()
    assert FlakyPreBind.calls == ["p", "q"]
    assert h.client.calls == [("bind", "p", "n1"), ("bind", "q", "n1")]


async def test_a_failed_nomination_write_is_logged_and_the_pod_binds(caplog):
    class Failing(RecordingClient):
        async def patch_pod_status(self, *, pod, condition=None, nominated_node_name=None) -> None:
            raise RuntimeError("503 Service Unavailable")

    h = _harness([make_node("n1")], client=Failing())
    h.add_pods(make_pod("p", labels={"prebind": "yes"}, requests={"cpu": "1"}))
    await h.settle()
    assert h.node_of("p") == "n1"
    assert "Failed to update the nominated node name in the binding cycle of pod default/p" in caplog.text


class Parallel:
    """Two PreBind plugins that allow parallel runs: each waits until the other has started."""

    started: dict[str, asyncio.Event]
    fail: str = ""
    cancelled: list[str]

    def __init__(self, args, handle) -> None:
        pass

    def pre_bind_pre_flight(self, state, pod, node_name):
        return ALLOW_PARALLEL, None

    async def pre_bind(self, state, pod, node_name):
        other = "B" if self.name == "A" else "A"
        Parallel.started[self.name].set()
        if Parallel.fail == self.name:
            return Status.as_error("failed")
        try:
            await Parallel.started[other].wait()
            if Parallel.fail:
                await asyncio.Event().wait()  # until cancelled
        except asyncio.CancelledError:
            Parallel.cancelled.append(self.name)
            raise
        return None


@pytest.mark.parametrize(("fail", "bound", "cancelled"), [
    pytest.param("", True, [], id="both-succeed"),
    pytest.param("B", False, ["A"], id="first-failure-cancels-the-other"),
])
async def test_prebind_plugins_that_allow_it_run_in_parallel(fail, bound, cancelled):
    custom = Registry()
    for name in ("A", "B"):
        custom.register(PluginFactory(name=name, factory=type(name, (Parallel,), {"name": name})))
    registry = in_tree_registry().merged(custom)
    profile = profile_from_spec({"schedulerName": "default-scheduler", "plugins": {
        "preBind": {"enabled": [{"name": "A"}, {"name": "B"}]}}}, registry)
    Parallel.started, Parallel.fail, Parallel.cancelled = {"A": asyncio.Event(), "B": asyncio.Event()}, fail, []
    h = Harness([make_node("n1")], profiles=[profile], registry=registry)
    h.add_pods(make_pod("p", requests={"cpu": "1"}))
    await h.scheduler.schedule_one(h.scheduler.queue.pop())
    await asyncio.wait_for(h.scheduler.wait_for_tasks(), 5)  # one after the other, A would wait forever
    assert (h.node_of("p") == "n1") is bound
    assert Parallel.cancelled == cancelled
    if fail:
        assert h.recorder.last("p").message == 'running PreBind plugin "B": failed'
