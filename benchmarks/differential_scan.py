"""Many random clusters through kopfsched and kube-scheduler's own framework (the oracle of
tests/differential); the number of pending pods compared and of differences per plugin and
field, with one example of each.

    python -m benchmarks.differential_scan --examples 1000 --seeds 0-7 -o json
    python -m benchmarks.differential_scan --partitioned --examples 200    # DRA's partitions and shares

Each example is one cluster from tests/differential/strategies.py, drawn with hypothesis
(generation only, no shrinking: run the example's seed through tests/differential to shrink
one). Needs Go (the oracle is built once per source hash under ~/.cache/kopfsched) and the
test extra.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from hypothesis import Phase, given, seed, settings

from tests.differential.harness import differences, pending_in_queue_order
from tests.differential.oracle import Oracle, build_oracle
from tests.differential.strategies import clusters, partitioned_clusters


def scan(oracle: Oracle, examples: int, run_seed: int, *, partitioned: bool = False) -> dict[str, Any]:
    """One seed's examples: pods compared, differences per (plugin, field), one of each."""
    counts: collections.Counter[tuple[str, str]] = collections.Counter()
    first: dict[tuple[str, str], str] = {}
    pods = clusters_seen = 0

    @seed(run_seed)
    @settings(max_examples=examples, deadline=None, database=None, phases=[Phase.generate])
    @given(partitioned_clusters() if partitioned else clusters())
    def one(objects: list[dict[str, Any]]) -> None:
        nonlocal pods, clusters_seen
        clusters_seen += 1
        pods += len(pending_in_queue_order(objects))
        with tempfile.TemporaryDirectory() as workdir:
            found = differences(oracle, objects, Path(workdir))
        for difference in found:
            key = (difference.plugin(), difference.field.split(".")[0])
            counts[key] += 1
            first.setdefault(key, str(difference))

    one()
    return {"seed": run_seed, "clusters": clusters_seen, "pods": pods, "counts": counts, "first": first}


def seeds(text: str) -> list[int]:
    """`3` or `0-7`."""
    low, _, high = text.partition("-")
    try:
        return list(range(int(low), int(high or low) + 1))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a seed or a range like 0-7, not {text!r}") from None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=1000, help="random clusters per seed (default: 1000)")
    parser.add_argument("--seeds", type=seeds, default=[0], metavar="N|A-B", help="hypothesis seeds (default: 0)")
    parser.add_argument("--partitioned", action="store_true",
                        help="clusters that always have partitionable and shared DRA devices")
    parser.add_argument("-o", "--output", choices=("table", "json"), default="table")
    args = parser.parse_args()
    oracle = Oracle(build_oracle())
    started = time.monotonic()
    runs = [scan(oracle, args.examples, run_seed, partitioned=args.partitioned) for run_seed in args.seeds]
    oracle.close()
    counts: collections.Counter[tuple[str, str]] = sum((run["counts"] for run in runs), collections.Counter())
    first: dict[tuple[str, str], str] = {}
    for run in runs:
        for key, text in run["first"].items():
            first.setdefault(key, text)
    summary = {
        "seeds": args.seeds, "clusters": sum(run["clusters"] for run in runs),
        "pods": sum(run["pods"] for run in runs), "differences": sum(counts.values()),
        "seconds": round(time.monotonic() - started, 1),
        "byPlugin": [{"plugin": plugin, "field": field, "count": count, "example": first[(plugin, field)]}
                     for (plugin, field), count in counts.most_common()],
    }
    if args.output == "json":
        print(json.dumps(summary))
        return 0
    print(f"{summary['pods']} pending pods in {summary['clusters']} clusters compared (seeds {args.seeds}), "
          f"{summary['differences']} differences, {summary['seconds']} s")
    for row in summary["byPlugin"]:
        print(f"{row['count']:6d}  {row['plugin']} {row['field']}\n        {row['example'][:400]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
