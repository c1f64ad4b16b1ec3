"""Record every scheduling attempt of a bench workload, to prove a speed-up changed no outcome.

    python -m tests.perf.preemption_outcomes /tmp/before.jsonl           # PreemptionBasic, bench size
    python -m tests.perf.preemption_outcomes /tmp/after.jsonl
    python -m tests.perf.preemption_outcomes --compare /tmp/before.jsonl /tmp/after.jsonl

The workload is `kopfsched bench`'s (same nodes, running pods, measured pods, profile and
seed), but time is virtual, as in `kopfsched simulate`: the clock jumps to the next backoff
expiry only when activeQ is empty. So the order of attempts does not depend on how fast the
code runs, and two runs of code with the same behaviour write identical files: one line per
attempt, [attempt, pod, result, node, nominated node, victims]. (On PreemptionBasic the
bench's order is the same: every preemptor's first attempt sorts before every retry, whose
queue timestamp is later; `--real-time` records the bench's own run to show it.)
`--profile FILE` writes a cProfile of the scheduling part alone. `--feature-gates` as the CLI's
(e.g. `SchedulerPopFromBackoffQ=false` for the queue's classic timing; on PreemptionBasic both
record the same attempts). CONTRIBUTING.md says when and how to use it.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import random
import sys
import time
from typing import Any

from kopfsched import features
from kopfsched.bench.runner import load_workload, run_workload
from kopfsched.bench.workloads import WORKLOADS
from kopfsched.cache.cache import Cache
from kopfsched.config.defaults import default_profile
from kopfsched.plugins.registry import full_registry
from kopfsched.scheduler.observer import Attempt, NullObserver
from kopfsched.scheduler.scheduler import Scheduler
from kopfsched.simulate.client import InMemoryClusterClient
from kopfsched.simulate.runner import VirtualClock, drain


class Recorder(NullObserver):
    def __init__(self) -> None:
        self.lines: list[list[Any]] = []

    def attempted(self, attempt: Attempt) -> None:
        self.lines.append([len(self.lines), attempt.pod.key, attempt.result, attempt.node,
                           attempt.nominated_node, list(attempt.victims)])


async def record(workload: str, nodes: int, init_pods: int, pods: int, *, seed: int = 0,
                 profile_to: str | None = None) -> tuple[list[list[Any]], float]:
    """(one line per attempt, CPU seconds of the scheduling part)."""
    registry = full_registry()
    client = InMemoryClusterClient(record_events=False)
    recorder = Recorder()
    clock = VirtualClock(0.0)
    scheduler = Scheduler(cache=Cache(), client=client, registry=registry, clock=clock,
                          rng=random.Random(seed), observer=recorder)
    load_workload(WORKLOADS[workload](nodes, init_pods, pods), scheduler, client, default_profile(registry))
    profiler = cProfile.Profile() if profile_to else None
    began = time.process_time()
    if profiler is not None:
        profiler.enable()
    settled = await drain(scheduler, clock, budget=20 * max(pods, 1))
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(profile_to)
    seconds = time.process_time() - began
    await scheduler.wait_for_tasks()
    if not settled:
        print("preemption_outcomes: attempt budget ran out before the queue settled", file=sys.stderr)
    return recorder.lines, seconds


async def record_real_time(workload: str, nodes: int, init_pods: int, pods: int, *,
                           seed: int = 0) -> tuple[list[list[Any]], float]:
    """As `record`, through the bench's own real-time run."""
    recorder = Recorder()
    began = time.process_time()
    await run_workload(WORKLOADS[workload](nodes, init_pods, pods), seed=seed, also_observe=recorder)
    return recorder.lines, time.process_time() - began


def compare(before: str, after: str) -> int:
    with open(before, encoding="utf-8") as a, open(after, encoding="utf-8") as b:
        old, new = a.read().splitlines(), b.read().splitlines()
    for n, (x, y) in enumerate(zip(old, new, strict=False)):
        if x != y:
            print(f"attempt {n} differs:\n  {before}: {x}\n  {after}: {y}")
            return 1
    if len(old) != len(new):
        print(f"{before} has {len(old)} attempts, {after} has {len(new)}")
        return 1
    print(f"identical: {len(old)} attempts")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", nargs="?", help="file to write, one JSON line per attempt")
    parser.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"), help="compare two recordings")
    parser.add_argument("--workload", default="preemption", choices=sorted(WORKLOADS))
    parser.add_argument("--nodes", type=int, default=500, help="nodes (default: 500)")
    parser.add_argument("--init-pods", type=int, default=2000, help="running pods (default: 2000)")
    parser.add_argument("--pods", type=int, default=500, help="measured pods (default: 500)")
    parser.add_argument("--seed", type=int, default=0, help="the scheduler's random seed (default: 0, as bench)")
    parser.add_argument("--real-time", action="store_true", help="record the bench's real-time run instead")
    parser.add_argument("--profile", metavar="FILE", help="write a cProfile of the scheduling part")
    parser.add_argument("--feature-gates", type=features.parse, metavar="GATES",
                        help="Name=true|false,... as kopfsched's --feature-gates (default: the defaults)")
    args = parser.parse_args(argv)
    if args.feature_gates is not None:
        features.set_gates(args.feature_gates)
    if args.compare:
        return compare(*args.compare)
    if not args.out:
        parser.error("give a file to write, or --compare BEFORE AFTER")
    if args.real_time:
        lines, seconds = asyncio.run(record_real_time(args.workload, args.nodes, args.init_pods, args.pods,
                                                      seed=args.seed))
    else:
        lines, seconds = asyncio.run(record(args.workload, args.nodes, args.init_pods, args.pods, seed=args.seed,
                                            profile_to=args.profile))
    with open(args.out, "w", encoding="utf-8") as out:
        for line in lines:
            out.write(json.dumps(line) + "\n")
    preempting = sum(1 for line in lines if line[5])
    print(f"{len(lines)} attempts ({preempting} preempted), scheduling CPU {seconds:.2f} s -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
