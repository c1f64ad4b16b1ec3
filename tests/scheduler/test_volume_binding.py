"""VolumeBinding end to end on the offline scheduler: a WaitForFirstConsumer claim takes the
local PV of the node the pod lands on, and the in-memory cluster ends up with both bound."""

from __future__ import annotations

import asyncio

from kopfsched.testing import make_node, make_pod
from tests.harness import Harness
from tests.plugins.claims import WFFC, pv, pvc


def test_wait_for_first_consumer_claim_binds_the_local_pv_of_the_chosen_node():
    harness = Harness([make_node("node-a"), make_node("node-b"), make_node("node-c")])
    harness.add_objects("StorageClass", WFFC)
    harness.add_objects("PersistentVolume", pv("small-on-a", node="node-a", size="1Gi"), pv("big-on-b", node="node-b"))
    harness.add_objects("PersistentVolumeClaim", pvc("data"), pvc("more"))
    volume = {"name": "data", "persistentVolumeClaim": {"claimName": "data"}}
    second = {"name": "data", "persistentVolumeClaim": {"claimName": "more"}}
    harness.add_pods(make_pod("app", uid="uid-app", volumes=[volume]),
                     make_pod("other", uid="uid-other", volumes=[second], creation_timestamp="2026-01-01T00:00:01Z"))
    asyncio.run(harness.settle())

    assert harness.node_of("app") == "node-b"
    claim = harness.client.get_object("PersistentVolumeClaim", "data", "default")
    assert (claim["spec"]["volumeName"], claim["metadata"]["annotations"]["pv.kubernetes.io/bind-completed"],
            claim["status"]["phase"]) == ("big-on-b", "yes", "Bound")
    volume_b = harness.client.get_object("PersistentVolume", "big-on-b")
    assert (volume_b["spec"]["claimRef"]["name"], volume_b["status"]["phase"]) == ("data", "Bound")
    # The only other PV is too small: the second pod waits, its claim untouched.
    assert harness.node_of("other") is None
    assert harness.condition("other")["message"] == (
        "0/3 nodes are available: 3 node(s) didn't find available persistent volumes to bind. "
        "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.")
    assert "volumeName" not in harness.client.get_object("PersistentVolumeClaim", "more", "default")["spec"]
    # The scheduler's cache saw the bindings through the watch, as in a cluster.
    cached = harness.scheduler.cache.objects.get("PersistentVolumeClaim", "data", "default")
    assert cached["spec"]["volumeName"] == "big-on-b"


def test_a_new_pv_brings_the_waiting_pod_back():
    harness = Harness([make_node("node-a"), make_node("node-b")])
    harness.add_objects("StorageClass", WFFC)
    harness.add_objects("PersistentVolumeClaim", pvc("data"))
    claim = {"name": "d", "persistentVolumeClaim": {"claimName": "data"}}
    harness.add_pods(make_pod("app", uid="uid-app", volumes=[claim]))
    asyncio.run(harness.settle())
    assert harness.node_of("app") is None
    harness.add_objects("PersistentVolume", pv("on-a", node="node-a"))
    asyncio.run(harness.settle())
    assert harness.node_of("app") == "node-a"


def _place_with_storage_capacity(gates: str) -> tuple[str | None, dict]:
    """A 10Gi claim to provision; node-a's storage has 100Gi free, node-b's 20Gi, but node-b
    has more free cpu: the storage score decides only when StorageCapacityScoring is on."""
    from kopfsched import features
    from tests.plugins.claims import storage_class

    saved = features.GATES
    features.set_gates(features.parse(gates))
    try:
        harness = Harness([make_node("node-a", labels={"pool": "a"}), make_node("node-b", labels={"pool": "b"})])
    finally:
        features.set_gates(saved)
    harness.add_objects("StorageClass", storage_class("csi", provisioner="csi.example.com"))
    harness.add_objects("CSIDriver", {"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver",
                                      "metadata": {"name": "csi.example.com"}, "spec": {"storageCapacity": True}})
    for pool, size in (("a", "100Gi"), ("b", "20Gi")):
        harness.add_objects("CSIStorageCapacity", {
            "apiVersion": "storage.k8s.io/v1", "kind": "CSIStorageCapacity",
            "metadata": {"name": f"capacity-{pool}", "namespace": "kube-system"}, "storageClassName": "csi",
            "nodeTopology": {"matchLabels": {"pool": pool}}, "capacity": size})
    harness.add_objects("PersistentVolumeClaim", pvc("data", sc="csi", size="10Gi"))
    harness.add_pods(make_pod("busy", requests={"cpu": "2"}, node_name="node-a"),
                     make_pod("app", uid="uid-app", requests={"cpu": "1", "memory": "1Gi"},
                              volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]))
    asyncio.run(harness.settle())
    return harness.node_of("app"), harness.recorder.last("app").scores


def test_storage_capacity_scoring_prefers_the_emptiest_storage_and_switches_off():
    node, scores = _place_with_storage_capacity("")
    assert (node, scores["node-a"]["VolumeBinding"], scores["node-b"]["VolumeBinding"]) == ("node-a", 90, 50)
    node, scores = _place_with_storage_capacity("StorageCapacityScoring=false")
    assert (node, "VolumeBinding" in scores["node-b"]) == ("node-b", False)
