"""Partitionable devices and consumable capacity (v1.37.2: DRAPartitionableDevices,
DRAConsumableCapacity and DRAFractionalCapacityRange beta, on) against kube-scheduler's own
framework on random clusters that always have them: MIG-style partitions whose counter sets
run out, partitions reaching their nodes one by one (perDeviceNodeSelection), shared NICs with
bandwidth requests and request policies, and running pods holding partitions and shares.
Compared field by field as tests/differential/test_differential.py does."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import pytest

if os.environ.get("CI") != "true":  # under CI the test extra has it, and these tests must run
    pytest.importorskip("hypothesis", reason="hypothesis is not installed (the test extra has it)")

from hypothesis import HealthCheck, given, seed, settings

from tests.differential.harness import differences
from tests.differential.oracle import Oracle
from tests.differential.strategies import partitioned_clusters

EXAMPLES = int(os.environ.get("KOPFSCHED_PARTITIONABLE_EXAMPLES", "60"))


@pytest.mark.timeout(900)
@seed(37)
@settings(max_examples=EXAMPLES, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(objects=partitioned_clusters())
def test_partitionable_devices_match_upstream(oracle: Oracle, objects: list[dict[str, Any]]) -> None:
    with tempfile.TemporaryDirectory() as workdir:
        found = differences(oracle, objects, Path(workdir))
    assert not found, "\n".join(str(d) for d in found)
