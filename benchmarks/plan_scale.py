"""Time `kopfsched plan` on a generated cluster: N nodes in three zones, most of them full,
some nearly empty, P pending pods that fit no node, and two node templates with prices.

    PYTHONPATH=operator python benchmarks/plan_scale.py --nodes 1500 --pending 500

Prints the cluster's shape, the plan's summary, the wall time of each stage, and the whole
run's wall and CPU time (on a shared machine the CPU time is the figure to compare)."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time

from kopfsched.simulate.loader import load_objects
from kopfsched.simulate.plan import NodeTemplate, Planner
from kopfsched.testing import make_node, make_pod

ZONES = ("z-a", "z-b", "z-c")
OWNER = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "app", "uid": "rs-app", "controller": True}]


def cluster(nodes: int, pending: int) -> list[dict]:
    objects: list[dict] = []
    for i in range(nodes):
        name = f"node-{i:05}"
        objects.append(make_node(name, cpu="8", memory="32Gi", labels={"topology.kubernetes.io/zone": ZONES[i % 3]}))
        light = i % 50 == 0  # one node in fifty runs a single small pod: scale-down candidates
        for j in range(1 if light else 3):
            pod = make_pod(f"app-{i:05}-{j}", requests={"cpu": "500m" if light else "2", "memory": "2Gi"},
                           node_name=name, labels={"app": "app"})
            pod["metadata"]["ownerReferences"] = OWNER
            objects.append(pod)
    for k in range(pending):
        objects.append(make_pod(f"batch-{k:05}", requests={"cpu": "3", "memory": "4Gi"},
                                creation_timestamp="2026-01-01T00:00:00Z"))
    return objects


def templates() -> list[NodeTemplate]:
    out = []
    for name, cpu, price in (("m-16", "16", 0.77), ("m-32", "32", 1.54)):
        node = make_node(name, cpu=cpu, memory="128Gi", labels={"topology.kubernetes.io/zone": "z-a"})
        del node["metadata"]["labels"]["kubernetes.io/hostname"]
        out.append(NodeTemplate(name, node, price=price))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1500)
    parser.add_argument("--pending", type=int, default=500)
    args = parser.parse_args()
    began = time.perf_counter()
    inputs = load_objects(cluster(args.nodes, args.pending), "generated")
    print(f"{args.nodes} nodes, {args.pending} pending pods; load {time.perf_counter() - began:.1f}s; "
          f"loadavg {os.getloadavg()[0]:.2f}", flush=True)
    planner = Planner(inputs, templates())
    stages: dict[str, float] = {}
    for stage in ("probe", "greedy", "search", "scale_down"):
        original = getattr(planner, stage)

        async def timed(*a, _original=original, _stage=stage, **kw):
            start = time.perf_counter()
            try:
                return await _original(*a, **kw)
            finally:
                stages[_stage] = stages.get(_stage, 0.0) + time.perf_counter() - start
        setattr(planner, stage, timed)
    result = asyncio.run(planner.plan())
    summary = result.report["summary"]
    print(json.dumps({"add": [(g["template"], g["count"]) for g in result.report["add"]], **summary,
                      "stages": {k: round(v, 1) for k, v in stages.items()}}))
    print(f"total {time.perf_counter() - began:.1f}s wall, {time.process_time():.1f}s CPU; "
          f"loadavg {os.getloadavg()[0]:.2f}", file=sys.stderr)


if __name__ == "__main__":
    main()
