"""Filter over hypothetical nodes: preemption's dry run asks whether a pod fits a node with
some pods removed (its victims) or added (nominated pods, reprieved victims), for many nodes
at once. The nodes are WhatIfTable rows over the snapshot's NodeTable, so no NodeInfo is
copied, and one `RowRunner.filter` pass judges them all.

One CycleState serves every node, so the caller must know that no PreFilter extension is
active (`Framework.has_active_pre_filter_extensions`): then no node has state of its own.
"""

from __future__ import annotations

import numpy as np

from kopfsched.framework.cycle_state import CycleState
from kopfsched.framework.node_table import WhatIfTable
from kopfsched.framework.rows import RowRunner
from kopfsched.framework.status import Code, Status
from kopfsched.framework.types import PodInfo


def statuses(rows: RowRunner, state: CycleState, pod: PodInfo, table: WhatIfTable, *,
             pod_dependent_only: bool = False) -> list[Status | None]:
    """Each row's Filter status, in one vectorised pass over the WhatIfTable. An error stops
    the batch; every node not judged by then gets it, as each would have."""
    if not len(table):
        return []
    mask, rejected = rows.filter(state, pod, table, np.arange(len(table), dtype=np.int64),
                                 pod_dependent_only=pod_dependent_only)
    out: list[Status | None] = [rejected.get(i) for i in range(len(table))]
    error = next((s for s in rejected.values() if s.code is Code.ERROR), None)
    if error is not None:
        out = [error if s is None and not ok else s for s, ok in zip(out, mask.tolist(), strict=True)]
    return out


def passes(rows: RowRunner, state: CycleState, pod: PodInfo, table: WhatIfTable, *,
           pod_dependent_only: bool = False) -> np.ndarray:
    """Which rows of `table` pass, as `statuses` would answer None for them, without working
    out why the others failed (preemption's reprieves need no reasons)."""
    if not len(table):
        return np.zeros(0, dtype=bool)
    mask, _ = rows.filter(state, pod, table, np.arange(len(table), dtype=np.int64),
                          pod_dependent_only=pod_dependent_only, reasons=False)
    return mask
