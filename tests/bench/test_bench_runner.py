"""`kopfsched bench`'s runner: a run whose measured pods cannot all settle stops at its
timeout and says so, rather than passing for a finished measurement."""

from __future__ import annotations

import asyncio

from kopfsched.bench import runner
from kopfsched.bench.workloads import pod_anti_affinity
from kopfsched.cli import main


def test_a_run_that_cannot_finish_stops_at_its_timeout_and_says_so():
    # Two nodes, each with an init pod that repels the measured one by hostname.
    result = asyncio.run(runner.run_workload(pod_anti_affinity(2, 2, 1), timeout=0.5))
    assert (result["scheduled"], result["timedOut"]) == (0, True)
    assert result["failedAttempts"] >= 1
    assert result["seconds"] >= 0.5


def test_a_finished_run_has_not_timed_out():
    result = asyncio.run(runner.run_workload(pod_anti_affinity(3, 1, 2), timeout=60))
    assert (result["scheduled"], result["timedOut"]) == (2, False)


def test_the_cli_warns_when_the_bench_timed_out(monkeypatch, capsys):
    real = runner.run_workload

    def short(workload, **kwargs):
        return real(workload, **{**kwargs, "timeout": 0.3})

    monkeypatch.setattr(runner, "run_workload", short)
    assert main(["bench", "--workload", "pod-anti-affinity", "--nodes", "2", "--init-pods", "2", "--pods", "1",
                 "-o", "json"]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("kopfsched bench: stopped after 0 s with 0 of 1 measured pods scheduled")
