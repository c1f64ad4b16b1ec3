"""examples/gang.yaml through simulate: one gang fully scheduled, the other not at all, its
reservations released (nodes hold only the scheduled gang's requests)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from kopfsched.simulate.loader import load_files
from kopfsched.simulate.output import to_json
from kopfsched.simulate.runner import simulate

GANG = str(Path(__file__).resolve().parents[2] / "examples" / "gang.yaml")

REJECTED_IN_POST_FILTER = ("0/2 nodes are available: podGroup default/trainer failed recently. preemption: 0/2 "
                           "nodes are available: 2 Preemption is not helpful for scheduling., PodGroup "
                           "default/trainer gets rejected due to Pod {} is unschedulable even after PostFilter")


def pod(name: str, result: str, node: str | None = None, message: str = "") -> dict:
    return {"namespace": "default", "name": name, "schedulerName": "gang-scheduler", "result": result,
            "node": node, "nominatedNode": None, "victims": [], "message": message}


def node(name: str, pods: int, requested: dict[str, str]) -> dict:
    return {"name": name, "pods": pods, "allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"},
            "requested": requested}


def test_gang_example_is_all_or_nothing():
    inputs = load_files([GANG])
    assert inputs.problems == []
    sim = asyncio.run(simulate(inputs, seed=0))
    assert inputs.problems == []
    report = to_json(sim, explain=False)
    del report["summary"]["seconds"]
    assert report == {
        "pods": [
            pod("web-1", "Scheduled", "node-2"),
            pod("web-2", "Scheduled", "node-1"),
            # trainer-1 and trainer-2 were reserved and waited at Permit; trainer-3 fitted
            # nowhere, so PostFilter rejected them and backed the group off; the retries that
            # the released nodes triggered were refused at PreFilter.
            pod("trainer-1", "Unschedulable", message=REJECTED_IN_POST_FILTER.format("trainer-1")),
            pod("trainer-2", "Unschedulable", message="0/1 nodes are available: 1 optimistic rejection in PostFilter."),
            pod("trainer-3", "Unschedulable", message=REJECTED_IN_POST_FILTER.format("trainer-3")),
        ],
        "nodes": [node("node-1", 1, {"cpu": "1", "memory": "1Gi"}), node("node-2", 1, {"cpu": "1", "memory": "1Gi"})],
        "summary": {"scheduled": 2, "unschedulable": 3, "notHandled": 0, "preempted": 0, "batchHintsUsed": 0},
    }
    assert sorted(sim.client.bindings) == [("default/web-1", "node-2"), ("default/web-2", "node-1")]
    assert len(sim.scheduler.waiting_pods) == 0
