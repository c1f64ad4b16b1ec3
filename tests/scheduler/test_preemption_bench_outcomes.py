"""Preemption's exact outcomes on a small PreemptionBasic, pinned: speed work must not change them.

The recording (`benchmarks/preemption_outcomes.py`, virtual time) was made before the dry
run was optimised; every attempt's result, node, nominated node and victims must stay the
same. 120 nodes and 130 preemptors: the dry run stops at 100 candidates early on, visits
every node late, and the last ten preemptors find no candidate at all.
"""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.preemption_outcomes import record

RECORDED = Path(__file__).with_name("preemption_bench_outcomes.jsonl")


async def test_preemption_bench_outcomes_unchanged() -> None:
    lines, _ = await record("preemption", 120, 480, 130)
    expected = [json.loads(line) for line in RECORDED.read_text(encoding="utf-8").splitlines()]
    assert len(lines) == len(expected)
    for got, want in zip(lines, expected, strict=True):
        assert got == want
