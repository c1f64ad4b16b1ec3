"""gpu-trace's outcomes on a reduced size, pinned: speed work on the Filter, Score and
preemption paths must not change them.

Recorded before the vectorisation of issue 22's last bullet. Every attempt of the bench's own
run (pod, result, node, nomination, message: FitError and PostFilter text) is hashed, and a
few messages are spelled out; `kopfsched simulate` with and without `--explain` (every node's
Filter status and score) and `kopfsched explain` of a pod that fits nowhere are hashed too.
150 nodes of the trace's mix: about one pod in ten fits nowhere.
"""

from __future__ import annotations

import asyncio
import collections
import hashlib
import json
from typing import Any

import pytest

from kopfsched.bench import runner
from kopfsched.bench.workloads import gpu_trace, gpu_trace_affinity, gpu_trace_workloads
from kopfsched.framework.diagnosis import rejection_counts, tallied_rejection_counts
from kopfsched.scheduler.observer import Attempt, NullObserver
from kopfsched.simulate.explain import explain_pod
from kopfsched.simulate.loader import load_objects
from kopfsched.simulate.output import to_json
from kopfsched.simulate.runner import simulate


class _Recorder(NullObserver):
    def __init__(self) -> None:
        self.lines: list[list[Any]] = []

    def attempted(self, attempt: Attempt) -> None:
        self.lines.append([attempt.pod.key, attempt.result, attempt.node, attempt.nominated_node,
                           list(attempt.victims), attempt.message])


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


@pytest.mark.parametrize(("workload", "scheduled", "unschedulable", "digest", "messages"), [
    (gpu_trace, 716, 84, "4ea9e2b3c772fd52f36615e3ae3b14c5df9182a6ee6de1024525630f8abf719f", {
        "0/150 nodes are available: 124 node(s) had untolerated taint(s), 26 Insufficient cpu. preemption: "
        "0/150 nodes are available: 150 Preemption is not helpful for scheduling.": 11,
        "0/150 nodes are available: 1 Insufficient cpu, 12 Insufficient memory, 149 Insufficient nvidia.com/gpu. "
        "preemption: 0/150 nodes are available: 122 No preemption victims found for incoming pod, "
        "28 Preemption is not helpful for scheduling.": 10,
    }),
    (gpu_trace_affinity, 674, 126, "5f056c0169e48eae7d64a0284cfef887864770736b7122d738baf231f84ef6af", {
        "0/150 nodes are available: 148 node(s) didn't match Pod's node affinity/selector, 2 Insufficient "
        "nvidia.com/gpu. preemption: 0/150 nodes are available: 148 Preemption is not helpful for scheduling, "
        "2 No preemption victims found for incoming pod.": 17,
        "0/150 nodes are available: 150 node(s) didn't match Pod's node affinity/selector. preemption: "
        "0/150 nodes are available: 150 Preemption is not helpful for scheduling.": 5,
    }),
    (gpu_trace_workloads, 674, 126, "ad3d35fe1c696c4b353e18dff09bd7c44345c5467e9b7933668e61ab7c475da7", {
        "0/150 nodes are available: 146 node(s) didn't match Pod's node affinity/selector, 4 Insufficient "
        "nvidia.com/gpu. preemption: 0/150 nodes are available: 146 Preemption is not helpful for scheduling, "
        "4 No preemption victims found for incoming pod.": 18,
        "0/150 nodes are available: 124 node(s) had untolerated taint(s), 26 Insufficient cpu. preemption: "
        "0/150 nodes are available: 150 Preemption is not helpful for scheduling.": 11,
    }),
], ids=["gpu-trace", "gpu-trace-affinity", "gpu-trace-workloads"])
def test_bench_attempts_unchanged(workload: Any, scheduled: int, unschedulable: int, digest: str,
                                  messages: dict[str, int]) -> None:
    recorder = _Recorder()
    result = asyncio.run(runner.run_workload(workload(150, 0, 800), also_observe=recorder))
    assert (result["scheduled"], result["unschedulable"], len(recorder.lines)) == (scheduled, unschedulable, 800)
    counts = collections.Counter(line[5] for line in recorder.lines if line[1] != "scheduled")
    for message, count in messages.items():
        assert counts[message] == count
    assert _digest(recorder.lines) == digest


class _TallyChecker(NullObserver):
    """Compares, for every pod that fits nowhere, the counts from the Filter pass's tally with
    those of a pass over the nodes: the same reasons and plugins, in the same order."""

    def __init__(self) -> None:
        self.tallied = 0
        self.differ: list[str] = []

    def attempted(self, attempt: Attempt) -> None:
        diagnosis = attempt.diagnosis
        if diagnosis is None or diagnosis.tally is None:
            return
        self.tallied += 1
        nodes = 150
        fast = tallied_rejection_counts(diagnosis.node_to_status, diagnosis.tally, nodes)
        slow = rejection_counts(diagnosis.node_to_status, nodes)
        if list(fast.reasons.items()) != list(slow.reasons.items()) or \
                list(fast.plugins.items()) != list(slow.plugins.items()):
            self.differ.append(attempt.pod.key)


@pytest.mark.parametrize(("workload", "untallied"), [(gpu_trace, 0), (gpu_trace_affinity, 0),
                                                    (gpu_trace_workloads, 0)],
                         ids=["gpu-trace", "gpu-trace-affinity", "gpu-trace-workloads"])
def test_tallied_counts_are_the_counted_ones(workload: Any, untallied: int) -> None:
    checker = _TallyChecker()
    result = asyncio.run(runner.run_workload(workload(150, 0, 800), also_observe=checker))
    assert checker.tallied == result["unschedulable"] - untallied and not checker.differ


def _without_seconds(out: dict[str, Any]) -> dict[str, Any]:
    out["summary"].pop("seconds")
    assert out["summary"].pop("batchHintsUsed") == 0  # the default profile signs no pod
    return out


@pytest.mark.parametrize(("workload", "explain", "scheduled", "digest"), [
    (gpu_trace_affinity, False, 375, "31b2d5207022e9e4704dbe9ef0b467cef0074ff7190dc9c7cf45b4de69ee0aaf"),
    (gpu_trace_affinity, True, 375, "7c88418a0505d2a170eeb2694540b48829de4cc6b80add981d17f42736d63af9"),
    (gpu_trace_workloads, False, 376, "ef1adf3541d72142966cbc2e6793d22c0932d84a2f157b7cf10ac3bcbcdb7fab"),
    (gpu_trace_workloads, True, 376, "4dd19c844acc18f03978e91a102c1e90a2fa1f92ca9eafec20cce9fe42a9b5d3"),
], ids=["simulate", "simulate-explain", "workloads-simulate", "workloads-simulate-explain"])
def test_simulate_unchanged(workload: Any, explain: bool, scheduled: int, digest: str) -> None:
    built = workload(150, 0, 400)
    inputs = load_objects(built.objects + built.nodes + built.pods, "test")
    out = _without_seconds(to_json(asyncio.run(simulate(inputs, seed=7, explain=explain)), explain=explain))
    assert (out["summary"]["scheduled"], out["summary"]["unschedulable"]) == (scheduled, 400 - scheduled)
    assert _digest(out) == digest


@pytest.mark.parametrize(("workload", "ref", "result", "digest"), [
    (gpu_trace_affinity, "trace/pod-399", "Unschedulable",
     "fc7699327549643722a3a2fca6b74afb1816362f1760a5c5d1b41bfa4618080f"),
    (gpu_trace_affinity, "trace/pod-390", "Scheduled",
     "563c079cbd084e4fbc2e82b06a7989c58974c28a15fb9e6653f1bd49775c45fc"),
    (gpu_trace_workloads, "trace/pod-390", "Scheduled",
     "a0b81c2180369fd9f4492f2705b366fb3c3f08261801ada61b05dc539d973296"),
])
def test_explain_unchanged(workload: Any, ref: str, result: str, digest: str) -> None:
    built = workload(150, 0, 400)
    entry = asyncio.run(explain_pod(load_objects(built.objects + built.nodes + built.pods, "test"), ref)).entry
    assert entry["result"] == result
    assert _digest(entry) == digest
