"""NodeTable.refresh of one row (the refresh between two cycles) against the straightforward
reading: every column it reads is recomputed, node-static ones only with node_static, and the
row is logged as changed exactly when some value changed."""

from __future__ import annotations

import random

import numpy as np
import pytest

from kopfsched.bench.workloads import default_node
from kopfsched.framework.node_table import ColumnSpec, NodeTable
from kopfsched.framework.types import NodeInfo

POD_VALUE = ColumnSpec("test/refresh/pods", lambda n: int(n.labels.get("pods", "0")))
STATIC_VALUE = ColumnSpec("test/refresh/static", lambda n: int(n.labels.get("static", "0")), node_static=True)
RATIO = ColumnSpec("test/refresh/ratio", lambda n: float(n.labels.get("ratio", "nan")), dtype=np.float64)
SPECS = (POD_VALUE, STATIC_VALUE, RATIO)


def fresh(nodes: list[NodeInfo], spec: ColumnSpec) -> list[float]:
    return [spec.extract(n) for n in nodes]


@pytest.mark.parametrize("seed", range(10))
def test_one_row_refresh_is_the_straightforward_reading(seed: int) -> None:
    rng = random.Random(seed)
    nodes = [NodeInfo(default_node(i)) for i in range(12)]
    table = NodeTable(nodes)
    for spec in SPECS:
        table.column(spec)
    table.derived("keep a change log", lambda t, rows: t.column(POD_VALUE)[rows], np.arange(12))
    table.derived("keep a change log", lambda t, rows: t.column(POD_VALUE)[rows], np.arange(12))
    expected = {spec.name: fresh(nodes, spec) for spec in SPECS}
    for _ in range(200):
        row = rng.randrange(len(nodes))
        node = nodes[row]
        labels = dict(node.labels)
        for key in rng.sample(["pods", "static", "ratio"], rng.choice([0, 1, 2])):
            labels[key] = str(rng.choice([0, 1, 2])) if key != "ratio" else rng.choice(["0.5", "1.5", "nan"])
        node.labels = labels
        node_static = rng.random() < 0.4
        logged, node_logged, refreshed = table._log.end, table._node_log.end, table._refreshed.end
        version, node_version = table.version, table.node_version
        changed = False
        for spec in SPECS:
            if spec.node_static and not node_static:
                continue
            value = spec.extract(node)
            old = expected[spec.name][row]
            if value != old:  # NaN: never equal, so always changed
                changed = True
            expected[spec.name][row] = value
        table.refresh([row], node_static=node_static)
        for spec in SPECS:
            np.testing.assert_array_equal(table.column(spec), np.array(expected[spec.name], dtype=spec.dtype))
        assert table._log.since(logged) == ([row] if changed else [])
        assert table._node_log.since(node_logged) == ([row] if changed and node_static else [])
        assert table._refreshed.since(refreshed) == [row]
        assert (table.version, table.node_version) == (version + 1, node_version + int(node_static))
