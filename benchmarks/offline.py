"""One snapshot through `kopfsched simulate` and through upstream's scheduler (`oracle simulate`),
each in a process of its own, with the CPU time of the scheduling loop alone (not of reading
the snapshot or building the scheduler). Used by side_by_side --offline and trace_compare.

    python -m benchmarks.offline FILE...    kopfsched's side: simulate -o json's document plus
                                            "measure": {"load_cpu_s", "loop_cpu_s", "loop_s"}

The kopfsched side runs what `kopfsched simulate` runs (runner.load_scheduler, then
runner.drain with simulate's budget) and reads time.process_time() around drain; the oracle
side reports its own process CPU time from its first ScheduleOne to its last
(tests/kubeenv/cmd/oracle/simulate.go).
"""
from __future__ import annotations

import asyncio
import json
import os
import pathlib
import subprocess
import sys
import time
from typing import Any

ROOT = pathlib.Path(__file__).parents[1]


def _child_env() -> dict[str, str]:
    return {**os.environ, 'PYTHONPATH': f'{ROOT / "operator"}:{ROOT}'}


def kopfsched_simulate(paths: list[pathlib.Path], *, timeout: float) -> dict[str, Any]:
    """simulate -o json's document for the snapshot, with "measure"."""
    done = subprocess.run([sys.executable, '-m', 'benchmarks.offline', *map(str, paths)], capture_output=True,
                          text=True, timeout=timeout, check=False, env=_child_env(), cwd=ROOT)
    if done.returncode != 0:
        raise RuntimeError(f'kopfsched simulate failed ({done.returncode}): {done.stderr[-2000:]}')
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def oracle_simulate(oracle: pathlib.Path, paths: list[pathlib.Path], *, timeout: float) -> dict[str, Any]:
    """`oracle simulate`'s document for the snapshot (its summary has cpuSeconds)."""
    done = subprocess.run([str(oracle), 'simulate', *map(str, paths)], capture_output=True, text=True,
                          timeout=timeout, check=False)
    if done.returncode != 0:
        raise RuntimeError(f'oracle simulate failed ({done.returncode}): {done.stderr[-2000:]}')
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def _measure(files: list[str]) -> dict[str, Any]:
    from kopfsched.cli import _plugin_registry, _read_input
    from kopfsched.simulate.output import to_json
    from kopfsched.simulate.runner import MAX_ATTEMPTS_PER_POD, drain, load_scheduler

    began = time.process_time()
    inputs = _read_input(files, None)
    if inputs.problems:
        raise SystemExit('\n'.join(inputs.problems[:20]))
    sim, clock, pending = load_scheduler(inputs, registry=_plugin_registry(), seed=0)
    loaded = time.process_time()

    async def run() -> float:
        started = time.perf_counter()
        await drain(sim.scheduler, clock, budget=MAX_ATTEMPTS_PER_POD * max(pending, 1), order=sim.order)
        return time.perf_counter() - started

    wall = asyncio.run(run())
    cpu = time.process_time() - loaded
    sim.seconds = wall
    report = to_json(sim, explain=False)
    report['measure'] = {'load_cpu_s': round(loaded - began, 3), 'loop_cpu_s': round(cpu, 3), 'loop_s': round(wall, 3)}
    return report


def main(argv: list[str] | None = None) -> int:
    files = sys.argv[1:] if argv is None else argv
    if not files or files[0] in ('-h', '--help'):
        print(__doc__)
        return 0 if files else 2
    print(json.dumps(_measure(files)))
    return 0


if __name__ == '__main__':
    sys.exit(main())
