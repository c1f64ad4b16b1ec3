"""examples/volumes.yaml through simulate: claims bound to the local PV that fits, provisioning
only in the allowed zone, a bound PV pinning its pod, and upstream's messages for the rest."""

from __future__ import annotations

import asyncio
from pathlib import Path

from kopfsched.simulate.loader import load_files
from kopfsched.simulate.output import to_json
from kopfsched.simulate.runner import simulate

VOLUMES = str(Path(__file__).resolve().parents[2] / "examples" / "volumes.yaml")
NO_PREEMPTION = "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."


def test_volumes_example():
    inputs = load_files([VOLUMES])
    assert inputs.problems == []
    sim = asyncio.run(simulate(inputs, seed=0))
    report = to_json(sim, explain=False)
    assert [(p["name"], p["result"], p["node"], p["message"]) for p in report["pods"]] == [
        ("db", "Scheduled", "storage-2", ""),
        ("cache", "Scheduled", "storage-1", ""),
        ("scratch", "Unschedulable", None,
         f"0/3 nodes are available: 3 node(s) didn't find available persistent volumes to bind. {NO_PREEMPTION}"),
        ("web", "Scheduled", "worker-1", ""),
        ("logger", "Scheduled", "worker-1", ""),
        # VolumeBinding's PreFilter rejects it before DynamicResources' PreFilter runs, so
        # v1.37.2's PostFilter ends in DynamicResources' Error ("not found"), not in preemption.
        ("waiting", "Unschedulable", None,
         "0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims. not found"),
    ]
    claims = {key[2]: obj for key, obj in sim.client.objects.items() if key[0] == "PersistentVolumeClaim"}
    assert {name: pvc["spec"].get("volumeName") for name, pvc in claims.items()} == {
        "db-data": "local-storage-2", "cache-data": "local-storage-1", "scratch-data": None,
        "web-data": "pvc-default-web-data", "logs": "logs-volume", "pending-claim": None}
    assert claims["web-data"]["metadata"]["annotations"]["volume.kubernetes.io/selected-node"] == "worker-1"
    volume = sim.client.get_object("PersistentVolume", "local-storage-2")
    assert (volume["spec"]["claimRef"]["name"], volume["status"]["phase"]) == ("db-data", "Bound")
