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
