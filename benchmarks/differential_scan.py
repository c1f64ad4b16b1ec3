"""Many random clusters through kopfsched and the upstream oracle; the number of differences
per plugin and field, with one example of each.

    PYTHONPATH=operator:. python benchmarks/differential_scan.py [EXAMPLES] [SEED]

Needs Go (the oracle is built once per source hash under ~/.cache/kopfsched) and hypothesis.
"""

from __future__ import annotations

import collections
import sys
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import Phase, given, seed, settings

from tests.differential.harness import differences
from tests.differential.oracle import Oracle, build_oracle
from tests.differential.strategies import clusters


def main(examples: int, run_seed: int) -> None:
    oracle = Oracle(build_oracle())
    counts: collections.Counter[tuple[str, str]] = collections.Counter()
    first: dict[tuple[str, str], str] = {}
    pods = 0

    @seed(run_seed)
    @settings(max_examples=examples, deadline=None, database=None, phases=[Phase.generate])
    @given(clusters())
    def scan(objects: list[dict[str, Any]]) -> None:
        nonlocal pods
        with tempfile.TemporaryDirectory() as workdir:
            found = differences(oracle, objects, Path(workdir))
        pods += sum(1 for o in objects if o["kind"] == "Pod" and not o["spec"].get("nodeName"))
        for difference in found:
            key = (difference.plugin(), difference.field.split(".")[0])
            counts[key] += 1
            first.setdefault(key, str(difference))

    scan()
    oracle.close()
    print(f"{pods} pending pods compared, {sum(counts.values())} differences")
    for (plugin, field), count in counts.most_common():
        print(f"{count:6d}  {plugin} {field}\n        {first[(plugin, field)][:400]}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1000, int(sys.argv[2]) if len(sys.argv) > 2 else 0)
