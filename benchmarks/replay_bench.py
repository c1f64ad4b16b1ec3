"""How fast `kopfsched replay` runs a long history: generated nodes and a CSV trace of pods
arriving at a steady rate, each running for a while, through the real scheduler.

    PYTHONPATH=operator python benchmarks/replay_bench.py --nodes 1500 --pods 8000
    PYTHONPATH=operator python benchmarks/replay_bench.py --nodes 5000 --pods 100000

The arrival rate is set so the requests keep about --load of the cluster's CPU busy (some pods
wait when the load peaks); one node in ten has GPUs and one pod in twenty asks for them. Prints
one JSON line: seconds (wall, loading included), pods per second, attempts, and the replay's own
figures. Bounded: at most 200 000 pods and 10 000 nodes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import resource
import sys
import time

from kopfsched.simulate.history import build
from kopfsched.simulate.loader import load_objects
from kopfsched.simulate.replay import replay
from kopfsched.simulate.replay_output import to_json

CPU_SHAPES = ((0.5, 1), (1, 2), (1, 4), (2, 4), (2, 8), (4, 16))
"""(cores, GiB) of the CPU pods, equally likely."""
GPU_SHAPES = ((4, 32, 1), (8, 64, 2))
"""(cores, GiB, GPUs) of the GPU pods."""
MEAN_DURATION = 1800.0


def nodes(count: int) -> list[dict]:
    made = []
    for i in range(count):
        gpu = i % 10 == 9
        allocatable = {"cpu": "16" if gpu else "8", "memory": "128Gi" if gpu else "32Gi", "pods": "110"}
        if gpu:
            allocatable["nvidia.com/gpu"] = "4"
        made.append({"apiVersion": "v1", "kind": "Node",
                     "metadata": {"name": f"node-{i}", "labels": {"kubernetes.io/hostname": f"node-{i}",
                                                                  "topology.kubernetes.io/zone": f"zone-{i % 3}"}},
                     "status": {"allocatable": allocatable, "capacity": dict(allocatable)}})
    return made


def trace(pods: int, node_count: int, load: float, rng: random.Random) -> str:
    cores = sum(16 if i % 10 == 9 else 8 for i in range(node_count))
    mean_cpu = (0.95 * sum(c for c, _ in CPU_SHAPES) / len(CPU_SHAPES)
                + 0.05 * sum(c for c, _, _ in GPU_SHAPES) / len(GPU_SHAPES))
    rate = load * cores / (MEAN_DURATION * mean_cpu)
    rows = ["name,arrival,duration,cpu,memory,nvidia.com/gpu"]
    t = 0.0
    for i in range(pods):
        t += rng.expovariate(rate)
        duration = round(rng.expovariate(1 / MEAN_DURATION), 1) + 1
        if rng.random() < 0.05:
            cpu, mem, gpu = rng.choice(GPU_SHAPES)
            rows.append(f"gpu-{i},{t:.3f},{duration},{cpu},{mem}Gi,{gpu}")
        else:
            cpu, mem = rng.choice(CPU_SHAPES)
            rows.append(f"pod-{i},{t:.3f},{duration},{cpu},{mem}Gi,")
    return "\n".join(rows) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=1500)
    parser.add_argument("--pods", type=int, default=8000)
    parser.add_argument("--load", type=float, default=0.8, help="CPU share the arrivals keep busy (default 0.8)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if not (1 <= args.nodes <= 10_000 and 1 <= args.pods <= 200_000):
        parser.error("--nodes 1..10000, --pods 1..200000")
    rng = random.Random(args.seed)
    began = time.perf_counter()
    cpu_began = time.process_time()
    hist = build(load_objects(nodes(args.nodes), "generated"), ["trace.csv"],
                 texts={"trace.csv": trace(args.pods, args.nodes, args.load, rng)})
    if hist.problems:
        print("\n".join(hist.problems), file=sys.stderr)
        return 1
    loaded = time.perf_counter() - began
    run = asyncio.run(replay(hist, progress=True))
    report = to_json(run)
    seconds = time.perf_counter() - began
    summary, wait = report["summary"], report["wait"]
    print(json.dumps({
        "nodes": args.nodes, "pods": args.pods, "load": args.load,
        "seconds": round(seconds, 1), "cpuSeconds": round(time.process_time() - cpu_began, 1),
        "loadSeconds": round(loaded, 1), "replaySeconds": round(run.seconds, 1),
        "podsPerSecond": round(args.pods / seconds, 1), "attempts": summary["attempts"],
        "scheduled": summary["scheduled"], "pendingAtEnd": summary["pending"], "peakPending": summary["peakPending"],
        "virtualSeconds": round(report["end"] - report["start"], 1), "samples": len(report["series"]["t"]),
        "waitP90": wait["p90"], "waitMax": wait["max"],
        "cpuAllocationMean": report["allocation"]["cpu"]["mean"],
        "cpuAllocationPeak": report["allocation"]["cpu"]["peak"],
        "peakRssMiB": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
