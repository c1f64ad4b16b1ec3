"""Write a large cluster snapshot for timing `kopfsched simulate` on big inputs.

    python -m benchmarks.big_snapshot /tmp/big.yaml            # 2000 nodes, 150 000 pods, ~50 MB
    python -m benchmarks.big_snapshot /tmp/big.json --json     # the same as one kubectl-style List
    time kopfsched simulate /tmp/big.yaml -o json >/dev/null

The shape of a `kubectl get nodes,pods -A -o yaml` export of a busy cluster: nodes in three
zones, most pods already running (spec.nodeName set), the rest pending and scheduled by
the default profile. Deterministic, so runs are comparable.
"""

from __future__ import annotations

import argparse
import json
import sys

import yaml

from kopfsched.bench.workloads import default_node, default_pod


def objects(nodes: int, pods: int, pending: int):
    for i in range(nodes):
        node = default_node(i, zones=True)
        node["status"]["allocatable"] = {"cpu": "32", "memory": "128Gi", "pods": "110"}
        node["status"]["capacity"] = dict(node["status"]["allocatable"])
        yield node
    running = pods - pending
    for i in range(pods):
        bound = i < running
        pod = default_pod(f"app-{i // 10}-{i % 10}", namespace=f"team-{i % 40}",
                          labels={"app": f"app-{i // 10}"}, node_name=f"node-{i % nodes}" if bound else None,
                          cpu="100m", memory="256Mi")
        pod["metadata"]["creationTimestamp"] = f"2026-01-01T00:{(i // 60) % 60:02d}:{i % 60:02d}Z"
        pod["status"] = {"phase": "Running" if bound else "Pending"}
        del pod["metadata"]["uid"]
        container = pod["spec"]["containers"][0]
        del container["ports"], container["resources"]["limits"]
        yield pod


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", help="file to write (- for stdout)")
    parser.add_argument("--nodes", type=int, default=2000, help="nodes (default: 2000)")
    parser.add_argument("--pods", type=int, default=150_000, help="pods in all (default: 150000)")
    parser.add_argument("--pending", type=int, default=5000, help="of which pending (default: 5000)")
    parser.add_argument("--json", action="store_true", help="one JSON List instead of multi-document YAML")
    args = parser.parse_args(argv)
    out = sys.stdout if args.out == "-" else open(args.out, "w", encoding="utf-8")  # noqa: SIM115
    with out:
        if args.json:
            items = list(objects(args.nodes, args.pods, args.pending))
            json.dump({"apiVersion": "v1", "kind": "List", "items": items}, out)
        else:
            dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
            yaml.dump_all(objects(args.nodes, args.pods, args.pending), out, Dumper=dumper, sort_keys=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
