"""The `gpu-trace` bench workloads (Alibaba's cluster-trace-gpu-v2023 shape): the trace's node
mix, its pod mix, and a run that ends when every measured pod is placed or found unschedulable."""

from __future__ import annotations

import asyncio
import collections

from kopfsched.bench import runner
from kopfsched.bench.workloads import (
    GPU_MODEL_LABEL,
    GPU_RESOURCE,
    GPU_TRACE_NODE_SHAPES,
    gpu_trace,
    gpu_trace_affinity,
)


def _gpus(obj: dict) -> int:
    if obj["kind"] == "Node":
        return int(obj["status"]["allocatable"].get(GPU_RESOURCE, 0))
    return int(obj["spec"]["containers"][0]["resources"]["requests"].get(GPU_RESOURCE, 0))


def test_gpu_trace_nodes_are_the_traces_shapes():
    nodes = gpu_trace(1523, 0, 1).nodes
    assert len(nodes) == sum(shape[0] for shape in GPU_TRACE_NODE_SHAPES) == 1523
    models = collections.Counter(n["metadata"]["labels"].get(GPU_MODEL_LABEL, "") for n in nodes)
    assert models == {"": 310, "G2": 549, "T4": 404, "P100": 134, "G3": 39, "V100M32": 30, "V100M16": 55, "A10": 2}
    assert sum(map(_gpus, nodes)) == 6212  # the trace's GPUs
    tainted = [n for n in nodes if n["spec"].get("taints")]
    assert len(tainted) == 1213 and all(_gpus(n) for n in tainted)


def test_gpu_trace_pods_in_arrival_order():
    plain, affinity = gpu_trace(1523, 0, 8000), gpu_trace_affinity(1523, 0, 8000)
    gpu_pods = [p for p in plain.pods if _gpus(p)]
    assert 6700 < len(gpu_pods) < 7200  # the trace: 7064 of 8152 pods ask for GPUs
    assert sum(map(_gpus, plain.pods)) > 6212  # more GPUs are asked for than the cluster has
    assert all(p["spec"]["tolerations"][0]["key"] == GPU_RESOURCE for p in gpu_pods)
    assert [p["metadata"]["name"] for p in plain.pods[:3]] == ["pod-0", "pod-1", "pod-2"]
    # The same draws: pod for pod the same requests, a third of the GPU pods with required affinity.
    assert [p["spec"]["containers"] for p in affinity.pods] == [p["spec"]["containers"] for p in plain.pods]
    with_affinity = [p for p in affinity.pods if "affinity" in p["spec"]]
    assert all(_gpus(p) for p in with_affinity) and not any("affinity" in p["spec"] for p in plain.pods)
    assert abs(len(with_affinity) / len(gpu_pods) - 1 / 3) < 0.03


def test_gpu_trace_run_settles_with_pods_that_fit_nowhere():
    # 40 nodes cannot hold 300 pods: the run ends when each is placed or found unschedulable.
    result = asyncio.run(runner.run_workload(gpu_trace_affinity(40, 0, 300)))
    assert result["scheduled"] + result["unschedulable"] == 300
    assert result["unschedulable"] > 0 and result["scheduled"] > 0
