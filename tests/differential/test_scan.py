"""benchmarks/differential_scan.py as documented: it compares the pods of every seed's clusters
and counts differences per plugin (none, on the seeds the suite runs)."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import pytest

from benchmarks.differential_scan import seeds
from tests.conftest import ROOT
from tests.differential.oracle import Oracle


@pytest.mark.timeout(600)
def test_the_scan_compares_every_seeds_pods_and_finds_no_difference(oracle: Oracle) -> None:
    proc = subprocess.run([sys.executable, "-m", "benchmarks.differential_scan", "--examples", "4", "--seeds", "3-4",
                           "-o", "json"], cwd=ROOT, capture_output=True, text=True, timeout=580, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout)
    assert (summary["seeds"], summary["clusters"]) == ([3, 4], 8)
    assert summary["pods"] >= 8  # every generated cluster has at least one pending pod
    assert (summary["differences"], summary["byPlugin"]) == (0, [])


def test_seeds_are_one_or_a_range() -> None:
    assert seeds("5") == [5]
    assert seeds("0-3") == [0, 1, 2, 3]
    with pytest.raises(argparse.ArgumentTypeError, match="not 'a-b'"):
        seeds("a-b")
