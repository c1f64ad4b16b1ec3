"""Filter outcomes of a plugin over a handful of nodes, for table-driven plugin tests."""

from __future__ import annotations

from typing import Any

import numpy as np

from kopfsched.framework.cycle_state import CycleState
from kopfsched.framework.types import NodeInfo, PodInfo


def filter_outcomes(plugin: Any, pod: dict[str, Any], infos: list[NodeInfo]) -> dict[str, tuple]:
    """{node: (code name, reasons)} for rejected nodes, or {"<prefilter>": ...} when PreFilter
    answered; also checks that the plugin's filter_nodes agrees with its filter."""
    state, info = CycleState(), PodInfo(pod)
    status = plugin.pre_filter(state, info, infos)
    if status is not None:
        return {"<prefilter>": (status.code.name, status.reasons)}
    result = {}
    for node in infos:
        s = plugin.filter(state, info, node)
        if s is not None:
            result[node.name] = (s.code.name, s.reasons)
    table = plugin.handle.snapshot.table
    batch = plugin.filter_nodes(state, info, table, np.arange(len(table)))
    assert {infos[i].name for i in np.flatnonzero(~batch)} == set(result)
    if callable(getattr(plugin, "filter_statuses", None)):
        rejected = np.flatnonzero(~batch)
        statuses = plugin.filter_statuses(state, info, table, rejected)
        assert {infos[i].name: (s.code.name, s.reasons) for i, s in zip(rejected, statuses, strict=True)} == result
    return result


def score_outcomes(plugin: Any, pod: dict[str, Any], infos: list[NodeInfo]) -> dict[str, int] | str:
    """{node: normalized score}, or PreScore's code name when it answered; also checks that
    the plugin's score_nodes agrees with its score."""
    state, info = CycleState(), PodInfo(pod)
    status = plugin.pre_score(state, info, infos)
    if status is not None:
        return status.code.name
    raw = np.array([plugin.score(state, info, n) for n in infos], dtype=np.int64)
    table = plugin.handle.snapshot.table
    assert plugin.score_nodes(state, info, table, np.arange(len(table))).tolist() == raw.tolist()
    return dict(zip([n.name for n in infos], plugin.normalize_score(state, info, raw).tolist(), strict=True))
