"""kopfsched against kube-scheduler's own framework (the release tests/kubeenv pins) on random
clusters: per pod, the result, the message, every node's Filter verdict, every Score plugin's
normalized score and total, the chosen node where the best total is unique, and preemption's
candidates, victims and nominated node (tests/differential/harness.py)."""

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
from tests.differential.strategies import clusters

# Bounded so that the suite stays within its minute: each example is a few pods, each pod one
# scheduler built on both sides.
EXAMPLES = 100


@pytest.mark.timeout(900)  # the oracle's build (once per hash) and 100 examples on a busy machine
@seed(21)
@settings(max_examples=EXAMPLES, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(objects=clusters())
def test_kopfsched_matches_upstream(oracle: Oracle, objects: list[dict[str, Any]]) -> None:
    with tempfile.TemporaryDirectory() as workdir:
        found = differences(oracle, objects, Path(workdir))
    assert not found, "\n".join(str(d) for d in found)
