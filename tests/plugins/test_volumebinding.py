"""VolumeBinding: PreFilter/Filter reasons and codes, Reserve's assume cache, Unreserve,
PreBind's API writes and wait, args and queueing hints (upstream's volume_binding_test.go
and binder_test.go intents)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kopfsched.framework.cycle_state import CycleState
from kopfsched.framework.events import ActionType, EventResource, QueueingHint
from kopfsched.framework.registry import ArgsError
from kopfsched.framework.status import Code, Status
from kopfsched.framework.types import PodInfo
from kopfsched.plugins.volumebinding import PLUGIN, VolumeBinding, VolumeBindingArgs
from kopfsched.plugins.volumebinding.binder import (
    ERR_REASON_BIND_CONFLICT,
    ERR_REASON_NODE_CONFLICT,
    ERR_REASON_NOT_ENOUGH_SPACE,
    ERR_REASON_PV_NOT_EXIST,
)
from kopfsched.plugins.volumebinding.plugin import ERR_REASON_UNBOUND_IMMEDIATE, STATE_KEY
from kopfsched.simulate.client import InMemoryClusterClient
from kopfsched.testing import RecordingClient, make_handle, make_node, make_pod, run_filter
from tests.plugins.claims import DYNAMIC, HOSTNAME, IMMEDIATE, WFFC, ZONE, ZONED, pv, pvc, storage_class

UNRESOLVABLE = Code.UNSCHEDULABLE_AND_UNRESOLVABLE

NODES = [make_node("node-a", labels={ZONE: "z1"}), make_node("node-b", labels={ZONE: "z2"})]


def pod_with(*claims: str, name: str = "pod", ephemeral: tuple[str, ...] = ()) -> dict:
    volumes = [{"name": f"vol-{c}", "persistentVolumeClaim": {"claimName": c}} for c in claims]
    volumes += [{"name": v, "ephemeral": {"volumeClaimTemplate": {"spec": {}}}} for v in ephemeral]
    return make_pod(name, uid=f"uid-{name}", volumes=volumes)


def plugin(objects: list[dict], *, client: Any = None, **args: Any) -> VolumeBinding:
    handle = make_handle(NODES, objects=objects, client=client)
    return PLUGIN.new(PLUGIN.decode_args(args or None), handle)


def csi_driver(name: str = "example.com/csi", *, capacity: bool | None = True) -> dict:
    spec = {} if capacity is None else {"storageCapacity": capacity}
    return {"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver", "metadata": {"name": name}, "spec": spec}


def storage_capacity(name: str, zone: str, capacity: str | None = "10Gi", *, sc: str = "dynamic",
                     maximum: str | None = None) -> dict:
    obj = {"apiVersion": "storage.k8s.io/v1", "kind": "CSIStorageCapacity",
           "metadata": {"name": name, "namespace": "kube-system"}, "storageClassName": sc,
           "nodeTopology": {"matchLabels": {ZONE: zone}}}
    if capacity is not None:
        obj["capacity"] = capacity
    if maximum is not None:
        obj["maximumVolumeSize"] = maximum
    return obj


NO_SPACE = (UNRESOLVABLE, (ERR_REASON_NOT_ENOUGH_SPACE,))


def answers(statuses: dict[str, Status | None]) -> dict[str, tuple[Code, tuple[str, ...]] | None]:
    return {node: (s.code, s.reasons) if s is not None else None for node, s in statuses.items()}


# --- PreFilter -----------------------------------------------------------------------------

PRE_FILTER_CASES = [
    pytest.param(make_pod("pod"), [], Code.SKIP, (), id="no-volumes-skip"),
    pytest.param(make_pod("pod", volumes=[{"name": "v", "emptyDir": {}}]), [], Code.SKIP, (), id="no-claims-skip"),
    pytest.param(pod_with("data"), [], UNRESOLVABLE, ('persistentvolumeclaim "data" not found',), id="pvc-not-found"),
    pytest.param(pod_with(ephemeral=("scratch",)), [], UNRESOLVABLE,
                 ('waiting for ephemeral volume controller to create the persistentvolumeclaim "pod-scratch"',),
                 id="ephemeral-pvc-not-created-yet"),
    pytest.param(pod_with(ephemeral=("scratch",)), [pvc("pod-scratch")], UNRESOLVABLE,
                 ("PVC default/pod-scratch was not created for pod default/pod (pod is not owner)",),
                 id="ephemeral-pvc-not-owned"),
    pytest.param(pod_with("data"), [WFFC, pvc("data", deleting=True)], UNRESOLVABLE,
                 ('persistentvolumeclaim "data" is being deleted',), id="pvc-being-deleted"),
    pytest.param(pod_with("data"), [WFFC, pvc("data", volume="gone", phase="Lost")], UNRESOLVABLE,
                 ('persistentvolumeclaim "data" bound to non-existent persistentvolume "gone"',), id="pvc-lost"),
    pytest.param(pod_with("data"), [IMMEDIATE, pvc("data", sc="standard")], UNRESOLVABLE,
                 (ERR_REASON_UNBOUND_IMMEDIATE,), id="unbound-immediate"),
    pytest.param(pod_with("data"), [pvc("data", sc=None)], UNRESOLVABLE, (ERR_REASON_UNBOUND_IMMEDIATE,),
                 id="no-class-is-immediate"),
    pytest.param(pod_with("data"), [pvc("data", sc="missing")], UNRESOLVABLE, (ERR_REASON_UNBOUND_IMMEDIATE,),
                 id="missing-class-is-immediate"),
    pytest.param(pod_with("data"), [WFFC, pvc("data", volume="pv-a")], UNRESOLVABLE, (ERR_REASON_UNBOUND_IMMEDIATE,),
                 id="prebound-not-yet-bound-is-immediate"),
    pytest.param(pod_with("data"), [WFFC, pvc("data")], None, (), id="wait-for-first-consumer"),
    pytest.param(pod_with("data"), [IMMEDIATE, pvc("data", sc="standard", volume="pv-a", bound=True)], None, (),
                 id="bound"),
]


@pytest.mark.parametrize(("pod", "objects", "code", "reasons"), PRE_FILTER_CASES)
def test_pre_filter(pod: dict, objects: list[dict], code: Code | None, reasons: tuple[str, ...]):
    answer = plugin(objects).pre_filter(CycleState(), PodInfo(pod), [])
    got = (answer.code, answer.reasons) if answer is not None else None
    assert got == ((code, reasons) if code is not None else None)


def test_pre_filter_never_narrows_the_nodes():
    """Upstream dropped the PreFilterResult of bound local PVs (kubernetes#125398: a node's
    hostname label need not be its name); Filter checks the PV's node affinity instead."""
    objects = [WFFC, pvc("data", volume="pv-a", bound=True), pv("pv-a", node="node-a", claim="data", phase="Bound")]
    assert plugin(objects).pre_filter(CycleState(), PodInfo(pod_with("data")), []) is None


# --- Filter ------------------------------------------------------------------------------

BIND = (UNRESOLVABLE, (ERR_REASON_BIND_CONFLICT,))
AFFINITY = (UNRESOLVABLE, (ERR_REASON_NODE_CONFLICT,))

FILTER_CASES = [
    pytest.param([pvc("data", volume="pv-a", bound=True), pv("pv-a", node="node-a", claim="data", phase="Bound")],
                 {"node-a": None, "node-b": AFFINITY}, id="bound-pv-node-affinity"),
    pytest.param([pvc("data", volume="pv-a", bound=True), pv("pv-a", claim="data", phase="Bound")],
                 {"node-a": None, "node-b": None}, id="bound-pv-without-affinity"),
    pytest.param([pvc("data", volume="pv-a", bound=True)],
                 {"node-a": (UNRESOLVABLE, (ERR_REASON_PV_NOT_EXIST,)),
                  "node-b": (UNRESOLVABLE, (ERR_REASON_PV_NOT_EXIST,))}, id="bound-to-missing-pv"),
    pytest.param([WFFC, pvc("data"), pv("pv-a", node="node-a")], {"node-a": None, "node-b": BIND},
                 id="wffc-local-pv-on-one-node"),
    pytest.param([WFFC, pvc("data"), pv("pv-a", node="node-a"), pv("pv-b", node="node-b")],
                 {"node-a": None, "node-b": None}, id="wffc-local-pv-on-each-node"),
    pytest.param([WFFC, pvc("data"), pv("pv-a", node="node-a", size="1Gi")], {"node-a": BIND, "node-b": BIND},
                 id="wffc-pv-too-small"),
    pytest.param([WFFC, pvc("data", modes=("ReadWriteMany",)), pv("pv-a", node="node-a")],
                 {"node-a": BIND, "node-b": BIND}, id="wffc-access-modes-mismatch"),
    pytest.param([WFFC, pvc("data"), pv("pv-a", node="node-a", sc="other")], {"node-a": BIND, "node-b": BIND},
                 id="wffc-other-class"),
    pytest.param([WFFC, pvc("data"), pv("pv-a", node="node-a", phase="Released")],
                 {"node-a": BIND, "node-b": BIND}, id="wffc-pv-not-available"),
    pytest.param([WFFC, pvc("data"), pv("pv-a", node="node-a", claim="other")], {"node-a": BIND, "node-b": BIND},
                 id="wffc-pv-claimed-by-another"),
    pytest.param([WFFC, pvc("data", selector={"matchLabels": {"tier": "fast"}}),
                  pv("pv-a", node="node-a", labels={"tier": "slow"}),
                  pv("pv-b", node="node-b", labels={"tier": "fast"})],
                 {"node-a": BIND, "node-b": None}, id="wffc-claim-selector"),
    pytest.param([WFFC, pvc("data"), pv("pv-a", node="node-b", claim="data", phase="Available")],
                 {"node-a": BIND, "node-b": None}, id="wffc-pv-prebound-to-claim"),
    pytest.param([DYNAMIC, pvc("data", sc="dynamic")], {"node-a": None, "node-b": None}, id="dynamic-provisioning"),
    pytest.param([ZONED, pvc("data", sc="zoned")], {"node-a": BIND, "node-b": None},
                 id="dynamic-provisioning-allowed-topologies"),
    pytest.param([DYNAMIC, pvc("data", sc="dynamic", annotations={"volume.kubernetes.io/selected-node": "node-b"})],
                 {"node-a": BIND, "node-b": None}, id="provisioning-already-selected-a-node"),
    pytest.param([WFFC, pvc("data", volume="pv-a", bound=True), pv("pv-a", node="node-a", claim="data", phase="Bound"),
                  pvc("logs"), pv("pv-b", node="node-b")],
                 {"node-a": BIND, "node-b": AFFINITY}, id="bound-and-unbound-on-different-nodes"),
    # Storage capacity (upstream's CSIStorageCapacity cases): only for a driver that opts in.
    pytest.param([DYNAMIC, csi_driver(), storage_capacity("z1", "z1"), storage_capacity("z2", "z2", "1Gi"),
                  pvc("data", sc="dynamic")], {"node-a": None, "node-b": NO_SPACE}, id="capacity-enough-on-one-node"),
    pytest.param([DYNAMIC, csi_driver(), pvc("data", sc="dynamic")], {"node-a": NO_SPACE, "node-b": NO_SPACE},
                 id="capacity-no-capacity-objects"),
    pytest.param([DYNAMIC, csi_driver(capacity=False), pvc("data", sc="dynamic")], {"node-a": None, "node-b": None},
                 id="capacity-driver-does-not-publish-it"),
    pytest.param([DYNAMIC, pvc("data", sc="dynamic")], {"node-a": None, "node-b": None},
                 id="capacity-no-csi-driver-object"),
    pytest.param([DYNAMIC, csi_driver(), storage_capacity("z1", "z1", "100Gi", maximum="1Gi"),
                  storage_capacity("z2", "z2", "1Gi", maximum="100Gi"), pvc("data", sc="dynamic")],
                 {"node-a": NO_SPACE, "node-b": None}, id="capacity-maximum-volume-size-preferred"),
    pytest.param([DYNAMIC, csi_driver(), storage_capacity("z1", "z1", sc="other"), pvc("data", sc="dynamic")],
                 {"node-a": NO_SPACE, "node-b": NO_SPACE}, id="capacity-of-another-class"),
    pytest.param([DYNAMIC, csi_driver(), storage_capacity("z1", "z1", None), pvc("data", sc="dynamic")],
                 {"node-a": NO_SPACE, "node-b": NO_SPACE}, id="capacity-unknown"),
]


@pytest.mark.parametrize(("objects", "expected"), FILTER_CASES)
def test_filter(objects: list[dict], expected: dict):
    claims = [o["metadata"]["name"] for o in objects if o["kind"] == "PersistentVolumeClaim"]
    assert answers(run_filter(plugin(objects), pod_with(*claims), NODES)) == expected


def test_filter_reports_every_conflict_of_a_node_in_upstream_order():
    objects = [WFFC, pvc("data", volume="pv-a", bound=True), pv("pv-a", node="node-a", claim="data", phase="Bound"),
               pvc("logs", sc="local")]
    assert answers(run_filter(plugin(objects), pod_with("data", "logs"), NODES))["node-b"] == (
        UNRESOLVABLE, (ERR_REASON_NODE_CONFLICT, ERR_REASON_BIND_CONFLICT))


def test_filter_picks_the_smallest_fitting_pv_and_one_pv_per_claim():
    objects = [WFFC, pvc("small", size="1Gi"), pvc("large", size="8Gi"),
               pv("pv-10", node="node-a", size="10Gi"), pv("pv-2", node="node-a", size="2Gi"),
               pv("pv-20", node="node-a", size="20Gi")]
    vb, state = plugin(objects), CycleState()
    run_filter(vb, pod_with("large", "small"), NODES[:1], state=state)
    volumes = state.read(STATE_KEY).pod_volumes_by_node["node-a"]
    assert [(b.pvc["metadata"]["name"], b.pv["metadata"]["name"]) for b in volumes.static_bindings] == [
        ("small", "pv-2"), ("large", "pv-10")]


def test_filter_errors_on_a_delayed_claim_whose_class_has_gone():
    objects = [WFFC, pvc("data", sc="local", annotations={"volume.kubernetes.io/selected-node": "node-a"})]
    vb, state, pod = plugin(objects), CycleState(), PodInfo(pod_with("data"))
    assert vb.pre_filter(state, pod, []) is None
    vb.handle.objects.objects.remove(WFFC)
    status = vb.filter(state, pod, make_handle(NODES).snapshot.get("node-a"))
    assert (status.code, status.reasons) == (Code.ERROR, ('failed to find storage class "local"',))


# --- Reserve / Unreserve -------------------------------------------------------------------


def schedule_to(vb: VolumeBinding, pod: dict, node: str) -> tuple[CycleState, dict[str, Any]]:
    """PreFilter, Filter on every node, Reserve on `node`: (state, each node's Filter answer)."""
    state = CycleState()
    statuses = answers(run_filter(vb, pod, NODES, state=state))
    if statuses[node] is None:
        assert vb.reserve(state, PodInfo(pod), node) is None
    return state, statuses


def test_reserve_assumes_the_pv_so_the_next_pod_does_not_take_it():
    objects = [WFFC, pvc("a"), pvc("b"), pv("pv-a", node="node-a")]
    vb = plugin(objects)
    schedule_to(vb, pod_with("a", name="first"), "node-a")
    _, second = schedule_to(vb, pod_with("b", name="second"), "node-a")
    assert second == {"node-a": BIND, "node-b": BIND}
    assumed = vb.binder.pv_cache.get("pv-a")
    assert assumed["spec"]["claimRef"]["name"] == "a"
    assert assumed["metadata"]["annotations"] == {"pv.kubernetes.io/bound-by-controller": "yes"}
    assert "claimRef" not in vb.handle.objects.get("PersistentVolume", "pv-a")["spec"]  # API object untouched


def test_unreserve_releases_the_assumed_pv():
    objects = [WFFC, pvc("a"), pvc("b"), pv("pv-a", node="node-a")]
    vb = plugin(objects)
    first = pod_with("a", name="first")
    state, _ = schedule_to(vb, first, "node-a")
    vb.unreserve(state, PodInfo(first), "node-a")
    vb.unreserve(state, PodInfo(first), "node-a")  # idempotent
    _, second = schedule_to(vb, pod_with("b", name="second"), "node-a")
    assert second == {"node-a": None, "node-b": BIND}


def test_assumption_ends_when_the_cluster_updates_the_pv():
    objects = [WFFC, pvc("a"), pvc("b"), pv("pv-a", node="node-a")]
    vb = plugin(objects)
    schedule_to(vb, pod_with("a", name="first"), "node-a")
    store = vb.handle.objects.objects
    store[store.index(objects[3])] = pv("pv-a", node="node-a")  # a newer version, still unbound
    _, second = schedule_to(vb, pod_with("b", name="second"), "node-a")
    assert second == {"node-a": None, "node-b": BIND}


def test_reserve_of_bound_claims_leaves_nothing_for_prebind():
    objects = [pvc("data", volume="pv-a", bound=True), pv("pv-a", node="node-a", claim="data", phase="Bound")]
    client = RecordingClient()
    vb = plugin(objects, client=client)
    pod = pod_with("data")
    state, _ = schedule_to(vb, pod, "node-a")
    assert asyncio.run(vb.pre_bind(state, PodInfo(pod), "node-a")) is None
    assert client.calls == []


# --- PreBind -------------------------------------------------------------------------------


class BindingClient(InMemoryClusterClient):
    """The in-memory client over the handle's objects: records each patch_object call, applies
    it as the API server would and, with `complete`, binds as the PV controller would."""

    def __init__(self, store: list[dict], *, complete: bool = True) -> None:
        super().__init__(volume_controllers=complete)
        self.calls: list[tuple[str, dict]] = []
        for obj in store:
            self.add_object(obj)

        def replace(kind: str, obj: dict) -> None:
            old = next((i for i, o in enumerate(store) if o["kind"] == kind
                        and o["metadata"]["name"] == obj["metadata"]["name"]), None)
            if old is None:
                store.append(obj)
            else:
                store[old] = obj

        self.on_object_change = replace

    async def patch_object(self, *, kind: str, obj: dict, patch: Any) -> dict:
        self.calls.append(("patch_object", {"kind": kind, "obj": obj, "patch": patch}))
        return await super().patch_object(kind=kind, obj=obj, patch=patch)


def binding_plugin(objects: list[dict], *, complete: bool = True, **handle_fields: Any) -> tuple[VolumeBinding,
                                                                                                BindingClient]:
    """A plugin whose client writes into (and binds in) the handle's own objects."""
    handle = make_handle(NODES, objects=objects, **handle_fields)
    client = BindingClient(handle.objects.objects, complete=complete)
    handle.client = client
    return PLUGIN.new(PLUGIN.decode_args(None), handle), client


def patches(client: BindingClient) -> list[tuple[str, str, dict]]:
    return [(kw["kind"], kw["obj"]["metadata"]["name"], kw["patch"]) for name, kw in client.calls
            if name == "patch_object"]


def test_pre_bind_sets_the_claim_ref_of_a_static_binding_and_waits_for_the_pv_controller():
    vb, client = binding_plugin([WFFC, pvc("data"), pv("pv-a", node="node-a")])
    pod = pod_with("data")
    state, _ = schedule_to(vb, pod, "node-a")
    assert asyncio.run(vb.pre_bind(state, PodInfo(pod), "node-a")) is None
    assert patches(client) == [("PersistentVolume", "pv-a", {
        "metadata": {"annotations": {"pv.kubernetes.io/bound-by-controller": "yes"}},
        "spec": {"claimRef": {"kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": "default",
                              "name": "data", "uid": "uid-data"}}})]
    assert vb.handle.objects.get("PersistentVolumeClaim", "data", "default")["spec"]["volumeName"] == "pv-a"


def test_pre_bind_annotates_a_claim_to_provision_with_the_selected_node():
    vb, client = binding_plugin([DYNAMIC, pvc("data", sc="dynamic")])
    pod = pod_with("data")
    state, _ = schedule_to(vb, pod, "node-b")
    assert asyncio.run(vb.pre_bind(state, PodInfo(pod), "node-b")) is None
    assert patches(client) == [("PersistentVolumeClaim", "data", {
        "metadata": {"annotations": {"volume.kubernetes.io/selected-node": "node-b"}}})]
    assert vb.handle.objects.get("PersistentVolumeClaim", "data", "default")["spec"]["volumeName"] == "pvc-uid-data"


def test_pre_bind_times_out_after_bind_timeout_seconds_on_the_injected_clock():
    now = [0.0]
    sleeps: list[float] = []

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        now[0] += seconds

    vb, _ = binding_plugin([WFFC, pvc("data"), pv("pv-a", node="node-a")], complete=False, clock=lambda: now[0])
    vb.binder.bind_timeout = 5.0
    vb.binder.sleep = sleep
    pod = pod_with("data")
    state, _ = schedule_to(vb, pod, "node-a")
    status = asyncio.run(vb.pre_bind(state, PodInfo(pod), "node-a"))
    assert (status.code, status.reasons) == (Code.ERROR, ("binding volumes: context deadline exceeded",))
    assert sleeps == [1.0] * 5


def test_pre_bind_fails_when_the_pv_lost_its_claim_ref():
    objects = [WFFC, pvc("data"), pv("pv-a", node="node-a")]
    client = RecordingClient()  # writes nothing: the API PV keeps no claimRef
    vb = plugin(objects, client=client)
    pod = pod_with("data")
    state, _ = schedule_to(vb, pod, "node-a")
    status = asyncio.run(vb.pre_bind(state, PodInfo(pod), "node-a"))
    assert (status.code, status.reasons) == (Code.ERROR, ('binding volumes: ClaimRef got reset for pv "pv-a"',))


# --- args and queueing ---------------------------------------------------------------------


@pytest.mark.parametrize(("raw", "expected"), [
    pytest.param(None, VolumeBindingArgs(600), id="default"),
    pytest.param({"bindTimeoutSeconds": 0}, VolumeBindingArgs(0), id="zero"),
    pytest.param({"bindTimeoutSeconds": 10}, VolumeBindingArgs(10), id="positive"),
])
def test_args(raw: dict | None, expected: VolumeBindingArgs):
    assert PLUGIN.decode_args(raw) == expected


@pytest.mark.parametrize(("raw", "problems"), [
    # Upstream's field.Invalid(path, value, detail) reads "Invalid value: <value>: <detail>".
    pytest.param({"bindTimeoutSeconds": -10},
                 [("bindTimeoutSeconds",
                   "Invalid value: -10: invalid BindTimeoutSeconds, should not be a negative value")],
                 id="negative"),
    pytest.param({"bindTimeout": 1}, [("bindTimeout", "unknown field")], id="unknown-field"),
    # v1.37.2 validation_pluginargs_test.go, TestValidateVolumeBindingArgs with StorageCapacityScoring on.
    pytest.param({"shape": []}, [("shape", "Required value: at least one point must be specified")],
                 id="[StorageCapacityScoring=on] shape should not be empty"),
    pytest.param({"shape": [{"utilization": 3, "score": 3}, {"utilization": 1, "score": 1}]},
                 [("shape[1].utilization", "Invalid value: 1: values must be sorted in increasing order")],
                 id="[StorageCapacityScoring=on] shape points must be sorted in increasing order"),
    pytest.param({"shape": [{"utilization": -1, "score": 1}, {"utilization": 10, "score": -1},
                            {"utilization": 20, "score": 11}, {"utilization": 101, "score": 1}]},
                 [("shape[0].utilization", "Invalid value: -1: not in valid range [0, 100]"),
                  ("shape[1].score", "Invalid value: -1: not in valid range [0, 10]"),
                  ("shape[2].score", "Invalid value: 11: not in valid range [0, 10]"),
                  ("shape[3].utilization", "Invalid value: 101: not in valid range [0, 100]")],
                 id="[StorageCapacityScoring=on] shape point: invalid utilization and score"),
])
def test_args_validation(raw: dict, problems: list[tuple[str, str]]):
    with pytest.raises(ArgsError) as info:
        PLUGIN.decode_args(raw)
    assert info.value.problems == problems


@pytest.fixture
def capacity_scoring_off():
    from kopfsched import features

    saved = features.GATES
    features.set_gates(features.parse("StorageCapacityScoring=false"))
    yield
    features.set_gates(saved)


def test_without_storage_capacity_scoring_shape_is_refused_and_pre_score_skips(capacity_scoring_off):
    with pytest.raises(ArgsError) as info:
        PLUGIN.decode_args({"shape": [{"utilization": 0, "score": 0}]})
    assert info.value.problems == [
        ("shape", "unexpected field `shape`, remove it or turn on the feature gate StorageCapacityScoring")]
    assert PLUGIN.decode_args(None) == VolumeBindingArgs(600)
    assert plugin([]).pre_score(CycleState(), PodInfo(pod_with("data")), []).code is Code.SKIP


def test_shape_defaults_as_upstream():
    assert PLUGIN.decode_args(None).shape == ((0, 10), (100, 0))
    assert PLUGIN.decode_args({"shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]}).shape \
        == ((0, 0), (100, 10))


# --- Score (StorageCapacityScoring): v1.37.2 volume_binding_test.go TestVolumeBinding's wantScores -----

WAIT = "wait-sc"
WITH_CAPACITY = "wait-sc-with-storage-capacity"
CAPACITY_DRIVER = "driver-with-storage-capacity"
NODE_LABEL = "node-label"  # upstream's nodeLabelKey: each node's capacity is reached by its own label
SCORE_NODES = [make_node(n, labels={NODE_LABEL: n}) for n in ("node-a", "node-b", "node-c")]
CLASSES = [storage_class(WAIT), storage_class(WITH_CAPACITY, provisioner=CAPACITY_DRIVER),
           csi_driver(CAPACITY_DRIVER)]


def node_capacity(node: str, size: str) -> dict:
    return {"apiVersion": "storage.k8s.io/v1", "kind": "CSIStorageCapacity",
            "metadata": {"name": node, "namespace": "kube-system"}, "storageClassName": WITH_CAPACITY,
            "nodeTopology": {"matchLabels": {NODE_LABEL: node}}, "capacity": size}


LOCAL_PVS = [pv("pv-a-0", sc=WAIT, size="200Gi", node="node-a"), pv("pv-a-1", sc=WAIT, size="200Gi", node="node-a"),
             pv("pv-b-0", sc=WAIT, size="100Gi", node="node-b"), pv("pv-b-1", sc=WAIT, size="100Gi", node="node-b")]
CAPACITIES = [node_capacity("node-a", "100Gi"), node_capacity("node-b", "50Gi"), node_capacity("node-c", "10Gi")]
STATIC_PVS = [pv(f"pv-static-{n}", sc=WAIT, size="100Gi", node=f"node-{n}") for n in "abc"]


@pytest.mark.parametrize(("claims", "objects", "shape", "scores"), [
    pytest.param([pvc("pvc-a", sc=WAIT, size="50Gi")], LOCAL_PVS, None, {"node-a": 75, "node-b": 50},
                 id="local volumes with close capacity are preferred"),
    pytest.param([pvc("pvc-dynamic", sc=WITH_CAPACITY, size="10Gi")], CAPACITIES, None,
                 {"node-a": 90, "node-b": 80, "node-c": 0}, id="storage capacity score"),
    pytest.param([pvc("pvc-dynamic", sc=WITH_CAPACITY, size="10Gi"), pvc("pvc-static", sc=WAIT, size="50Gi")],
                 [*STATIC_PVS, *CAPACITIES], None, {"node-a": 50, "node-b": 50, "node-c": 50},
                 id="storage capacity score with static binds"),
    pytest.param([pvc("pvc-dynamic-0", sc=WITH_CAPACITY, size="50Gi"), pvc("pvc-dynamic-1", sc=WITH_CAPACITY,
                                                                           size="50Gi")],
                 [node_capacity("node-a", "100Gi")], None, {"node-a": 0},
                 id="dynamic provisioning with multiple PVCs of the same StorageClass"),
    pytest.param([pvc("pvc-dynamic", sc=WITH_CAPACITY, size="10Gi")],
                 [node_capacity("node-a", "100Gi"), node_capacity("node-b", "20Gi"), node_capacity("node-c", "10Gi")],
                 [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}],
                 {"node-a": 10, "node-b": 50, "node-c": 100}, id="prefer node with least allocatable"),
    pytest.param([pvc("pvc-dynamic", sc=WITH_CAPACITY, size="10Gi")],
                 [node_capacity("node-a", "100Gi"), node_capacity("node-b", "20Gi"), node_capacity("node-c", "10Gi")],
                 [{"utilization": 0, "score": 10}, {"utilization": 100, "score": 0}],
                 {"node-a": 90, "node-b": 50, "node-c": 0}, id="prefer node with maximum allocatable"),
])
def test_score(claims, objects, shape, scores):
    pod = pod_with(*(c["metadata"]["name"] for c in claims))
    handle = make_handle(SCORE_NODES, objects=[*CLASSES, *claims, *objects])
    plugin = PLUGIN.new(PLUGIN.decode_args({"bindTimeoutSeconds": 300, **({"shape": shape} if shape else {})}),
                        handle)
    state, info = CycleState(), PodInfo(pod)
    assert plugin.pre_filter(state, info, []) is None
    feasible = [n for n in handle.snapshot.node_infos() if plugin.filter(state, info, n) is None]
    assert plugin.pre_score(state, info, feasible) is None
    assert {n.name: plugin.score(state, info, n) for n in feasible} == scores


def test_a_pod_without_claims_scores_zero_everywhere():
    handle = make_handle(SCORE_NODES, objects=CLASSES)
    plugin = PLUGIN.new(PLUGIN.decode_args(None), handle)
    state, info = CycleState(), PodInfo(make_pod("plain"))
    assert plugin.pre_filter(state, info, []) is not None  # Skip: nothing to filter
    assert plugin.pre_score(state, info, []) is None
    assert [plugin.score(state, info, n) for n in handle.snapshot.node_infos()] == [0, 0, 0]


@pytest.mark.parametrize(("old", "new", "hint"), [
    pytest.param(None, pvc("data"), QueueingHint.QUEUE, id="pvc-of-the-pod"),
    pytest.param(None, pvc("other"), QueueingHint.SKIP, id="other-pvc"),
    pytest.param(None, {**pvc("data"), "metadata": {"name": "data", "namespace": "prod"}}, QueueingHint.SKIP,
                 id="other-namespace"),
])
def test_pvc_hint(old: dict | None, new: dict, hint: QueueingHint):
    assert plugin([]).is_schedulable_after_persistent_volume_claim_change(pod_with("data"), old, new) is hint


@pytest.mark.parametrize(("old", "new", "hint"), [
    pytest.param(None, WFFC, QueueingHint.QUEUE, id="new-class"),
    pytest.param(DYNAMIC, ZONED | {"metadata": {"name": "dynamic"}}, QueueingHint.QUEUE, id="topologies-changed"),
    pytest.param(WFFC, WFFC | {"parameters": {"a": "b"}}, QueueingHint.SKIP, id="other-change"),
])
def test_storage_class_hint(old: dict | None, new: dict, hint: QueueingHint):
    assert plugin([]).is_schedulable_after_storage_class_change(pod_with("data"), old, new) is hint


def test_events_to_register():
    add_update = ActionType.ADD | ActionType.UPDATE
    events = [(e.event.resource, e.event.action, e.hint is not None) for e in plugin([]).events_to_register()]
    assert events == [(EventResource.STORAGE_CLASS, add_update, True),
                      (EventResource.PERSISTENT_VOLUME_CLAIM, add_update, True),
                      (EventResource.PERSISTENT_VOLUME, add_update, False),
                      (EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL, False),
                      (EventResource.CSI_NODE, add_update, True),
                      (EventResource.CSI_DRIVER, ActionType.UPDATE, True),
                      (EventResource.CSI_STORAGE_CAPACITY, add_update, True)]


def test_hints_for_storage_capacity_and_csi_drivers():
    hint = plugin([]).is_schedulable_after_csi_storage_capacity_change
    small, large = storage_capacity("z1", "z1", "1Gi"), storage_capacity("z1", "z1", "5Gi")
    assert hint(pod_with("data"), None, small) is QueueingHint.QUEUE
    assert hint(pod_with("data"), small, large) is QueueingHint.QUEUE
    assert hint(pod_with("data"), large, small) is QueueingHint.SKIP
    assert hint(pod_with("data"), small, storage_capacity("z1", "z2", "1Gi")) is QueueingHint.QUEUE
    driver_hint = plugin([]).is_schedulable_after_csi_driver_change
    assert driver_hint(pod_with("data"), csi_driver(), csi_driver(capacity=False)) is QueueingHint.QUEUE
    assert driver_hint(pod_with("data"), csi_driver(capacity=False), csi_driver()) is QueueingHint.SKIP


# --- the matching hoisted out of the per-node loop ------------------------------------------


def _reference_match(claim: dict, volumes: list[dict], labels: dict, excluded: dict) -> dict | None:
    """FindMatchingVolume's loop as upstream writes it (pv_helpers.go), every check per node."""
    from kopfsched.plugins.volumebinding.volumes import (
        check_node_affinity,
        is_volume_bound_to_claim,
        requested_storage,
        volume_capacity,
        volume_class,
    )
    best = None
    for volume in volumes:
        spec = volume["spec"]
        if volume["metadata"]["name"] in excluded:
            continue
        bound = is_volume_bound_to_claim(volume, claim)
        if spec.get("claimRef") and not bound:
            continue
        if volume_capacity(volume) < requested_storage(claim):
            continue
        if volume["metadata"].get("deletionTimestamp"):
            continue
        fits = check_node_affinity(volume, labels)
        if bound:
            return volume if fits else None
        if volume["status"]["phase"] != "Available" or volume_class(volume) != claim["spec"]["storageClassName"]:
            continue
        wanted = (claim["spec"].get("selector") or {}).get("matchLabels") or {}
        if any((volume["metadata"].get("labels") or {}).get(k) != v for k, v in wanted.items()):
            continue
        if not fits or not set(claim["spec"]["accessModes"]) <= set(spec["accessModes"]):
            continue
        if best is None or volume_capacity(best) > volume_capacity(volume):
            best = volume
    return best


def _random_pv(rng: Any, i: int) -> dict:
    volume = pv(f"pv-{i}", size=rng.choice(("5Gi", "10Gi", "10Gi")),
                sc=rng.choice(("local", "local", "local", "other")),
                claim=rng.choice(("", "", "", "", "data", "someone-else")),
                phase=rng.choice(("Available",) * 6 + ("Bound", "Released")),
                modes=rng.choice((("ReadWriteOnce",), ("ReadWriteOnce",), ("ReadOnlyMany",),
                                  ("ReadWriteOnce", "ReadOnlyMany"))),
                labels=rng.choice((None, {"tier": "fast"}, {"tier": "slow"})))
    kind = rng.randrange(6)
    node = f"node-{rng.randrange(6)}"

    def one(key: str, operator: str, values: list[str] | None = None) -> dict:
        return {"matchExpressions": [{"key": key, "operator": operator, **({"values": values} if values else {})}]}

    terms = {0: None, 1: [one(HOSTNAME, "In", [node])], 2: [one(ZONE, "In", ["z1", "z2"]), one(HOSTNAME, "In", [node])],
             3: [one(HOSTNAME, "NotIn", [node])], 4: [one(HOSTNAME, "In", [node, "bad/v!"])],
             5: [{"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["z2"]},
                                       {"key": HOSTNAME, "operator": "Exists"}]}]}[kind]
    if terms is not None:
        volume["spec"]["nodeAffinity"] = {"required": {"nodeSelectorTerms": terms}}
    if rng.random() < 0.05:
        volume["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return volume


@pytest.mark.parametrize("seed", range(40))
def test_candidates_then_pick_match_upstreams_loop_on_every_node(seed: int):
    """Ties of size (the first wins), pre-bound volumes reached in order (or skipped when
    excluded), local PVs found through the hostname index, terms the index cannot read."""
    import random

    from kopfsched.plugins.volumebinding.volumes import find_matching_volume
    rng = random.Random(seed)
    volumes = [_random_pv(rng, i) for i in range(rng.randrange(1, 30))]
    claim = pvc("data", size=rng.choice(("1Gi", "5Gi", "8Gi")),
                selector=rng.choice((None, {"matchLabels": {"tier": "fast"}})))
    for n in range(7):
        labels = {HOSTNAME: f"node-{n}", ZONE: f"z{n % 3}"}
        excluded = {v["metadata"]["name"]: v for v in rng.sample(volumes, rng.randrange(min(3, len(volumes)) + 1))}
        for exclude in ({}, excluded):
            expected = _reference_match(claim, volumes, labels, exclude)
            assert find_matching_volume(claim, volumes, labels, exclude) is expected
