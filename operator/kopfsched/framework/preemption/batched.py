"""Dry-run mode 2, batched: many nodes judged at once with vectorised filters over
WhatIfTable rows (the snapshot's NodeTable with victims removed or added back), so the
resource checks need no NodeInfo copies. Valid when no PreFilter extension is active; it
answers as `node_by_node.select_victims_on_node` does for each node.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import compress
from typing import TYPE_CHECKING

import numpy as np

from kopfsched.framework.cycle_state import CycleState
from kopfsched.framework.node_table import NodeTable, PodSlots, WhatIfTable
from kopfsched.framework.preemption.candidates import (
    MSG_NO_VICTIMS,
    DisruptionBudget,
    filter_pods_with_pdb_violation,
    importance_key,
)
from kopfsched.framework.preemption.node_by_node import select_victims_on_node
from kopfsched.framework.status import Status
from kopfsched.framework.types import NodeInfo, PodInfo

if TYPE_CHECKING:
    from kopfsched.framework.preemption.evaluator import Evaluator

Victims = tuple[list[PodInfo], int, Status | None]
"""A node's answer: (victims most important first, how many violate a PDB, status)."""

_MIN_BATCH = 32
"""Fewest nodes the batched dry run judges at once (more than needed are judged in vain)."""


def batch_size(*, wanted: int, found: int, judged: int, last: int) -> int:
    """How many nodes the batched dry run judges next to find the `wanted` more candidates:
    as many as the hit rate so far says it takes (twice the last batch while nothing was
    found). Nodes past the stopping point are judged in vain, too few batches cost Python
    overhead per batch; the outcome is the same either way."""
    if not judged:
        return max(wanted, _MIN_BATCH)
    if not found:
        return max(2 * last, _MIN_BATCH)
    return max(-(-wanted * judged // found), _MIN_BATCH)


def select_victims_on_nodes(ev: Evaluator, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo],
                            pdbs: Sequence[DisruptionBudget]) -> list[Victims]:
    """`select_victims_on_node` for each of `nodes` (left untouched), vectorised over them:
    one Filter pass for all nodes with their victims gone, then the reprieves step by
    step, each step adding every node's next victim back and filtering them together.
    The hypothetical nodes are WhatIfTable rows over the snapshot's table, so the
    resource checks need no NodeInfo copies.

    Only valid when no PreFilter extension is active, so `state` serves every node (and
    AddPod/RemovePod, which would all be skipped, need not run). Nodes with nominated pods
    that Filter counts reprieve node by node, as `select_victims_on_node` does."""
    results, reprieving = judge_batch(ev, state, pod, nodes, pdbs)
    if reprieving:
        found = reprieve(ev, state, pod, [nodes[i] for i in reprieving],
                              [reprieve_queue(potential, pdbs) for potential in reprieving.values()])
        for i, answer in zip(reprieving, found, strict=True):
            results[i] = answer
    return results


def judge_batch(ev: Evaluator, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo],
                 pdbs: Sequence[DisruptionBudget]
                 ) -> tuple[list[Victims], dict[int, list[PodInfo]]]:
    """`select_victims_on_nodes` up to the reprieves: (each node's answer, and for the nodes where
    the pod fits with their victims gone, their victims, for `_reprieve_queue`)."""
    fwk = ev.framework
    results: list[Victims] = [([], 0, None)] * len(nodes)
    base, base_rows = _table_rows(ev, nodes)
    potentials: dict[int, list[PodInfo]] = {}
    nominated: dict[int, list[PodInfo]] = {}
    priority = pod.priority
    if ev.custom_eligibility:
        eligible = ev.is_eligible_pod
        for i, node in enumerate(nodes):
            potential = [p for p in node.pods.values() if p.priority < priority and eligible(node, p, pod)]
            if potential:
                potentials[i] = potential
        with_victims = list(potentials)
    else:
        # Every lower-priority pod is a potential victim: counted and summed by the table's
        # lower-priority columns, listed only for the nodes that get as far as the reprieves.
        with_victims = np.flatnonzero(base.lower_priority(None, priority)[base_rows]).tolist()
    no_victims = Status.unresolvable(MSG_NO_VICTIMS)
    has_victims = set(with_victims)
    for i in range(len(nodes)):
        if i not in has_victims:
            results[i] = ([], 0, no_victims)
    by_node = ev.handle.nominator.pods_to_count(pod)  # every node at once, kept by the nominator
    if by_node:
        for i in with_victims:
            counted = by_node.get(nodes[i].name)
            if counted:
                nominated[i] = counted
    # Does the pod fit with every lower-priority pod gone? Upstream's two passes: with the
    # nominated pods counted first, then without them (node-static plugins already passed).
    order = with_victims
    first: dict[int, Status | None] = {}

    def what_if(rows: list[int], added: list[list[PodInfo]] | None = None) -> WhatIfTable:
        if ev.custom_eligibility:
            return WhatIfTable(base, base_rows[rows], added=added, removed=[potentials[i] for i in rows])
        return WhatIfTable(base, base_rows[rows], added=added, removed_below=priority)

    if nominated:
        with_nominated = what_if(list(nominated), list(nominated.values()))
        first = dict(zip(nominated, fwk.run_filter_plugins_what_if(state, pod, with_nominated), strict=True))
    second_rows = [i for i in order if first.get(i) is None]
    without = what_if(second_rows)
    second = dict(zip(second_rows, fwk.run_filter_plugins_what_if(state, pod, without), strict=True))
    reprieving: dict[int, list[PodInfo]] = {}
    for i in order:
        status = first.get(i)
        if status is None:
            status = second[i]
        if status is not None:
            results[i] = ([], 0, status)
            continue
        if i in nominated:
            results[i] = select_victims_on_node(ev, state.clone(), pod, nodes[i].clone(), pdbs)
            continue
        listed = potentials.get(i)
        if listed is None:
            listed = [p for p in nodes[i].pods.values() if p.priority < priority]
        reprieving[i] = listed
    return results, reprieving


def reprieve_queue(potential: list[PodInfo], pdbs: Sequence[DisruptionBudget]) -> tuple[list[PodInfo], int]:
    """A node's victims in the order the reprieves try them back: the PDB-violating ones first,
    each part most important first; and how many violate."""
    potential.sort(key=importance_key)
    violating, non_violating = filter_pods_with_pdb_violation(potential, pdbs)
    return violating + non_violating, len(violating)


def reprieve(ev: Evaluator, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo],
              queues: Sequence[tuple[list[PodInfo], int]]) -> list[Victims]:
    """The reprieves of `select_victims_on_nodes` for `nodes`, each with its queue from
    `judge_batch`: step by step, every node's next victim is added back to the node with its
    victims gone and the ones reprieved so far, and all are filtered together (slot j of a
    node's queue is its j-th victim, `kept` marks the slots reprieved, the trial tables sum the
    selected slots' shares with numpy). (victims most important first, how many violate a PDB)."""
    fwk = ev.framework
    base, base_rows = _table_rows(ev, nodes)
    if ev.custom_eligibility:
        without = WhatIfTable(base, base_rows, removed=[list(queue) for queue, _ in queues])
    else:
        without = WhatIfTable(base, base_rows, removed_below=pod.priority)
    slots = PodSlots([queue for queue, _ in queues])
    lengths = np.fromiter((len(queue) for queue, _ in queues), dtype=np.int64, count=len(queues))
    kept = np.zeros((len(queues), slots.width), dtype=bool)
    for step in range(slots.width):
        active = np.flatnonzero(lengths > step)
        mask = kept[active]
        mask[:, step] = True
        trial = WhatIfTable(without, active, added_slots=(slots, active, mask))
        fits = fwk.run_filter_plugins_what_if_passes(state, pod, trial, pod_dependent_only=True)
        kept[active[fits], step] = True
    results: list[Victims] = []
    for (queue, violating_count), gone in zip(queues, (~kept).tolist(), strict=True):
        found = list(compress(queue, gone))  # the slots not reprieved (past the queue's end: none)
        if violating_count:
            if violating_count < len(queue):
                found.sort(key=importance_key)
            results.append((found, sum(gone[:violating_count]), None))
        else:
            results.append((found, 0, None))
    return results


def _table_rows(ev: Evaluator, nodes: Sequence[NodeInfo]) -> tuple[NodeTable, np.ndarray]:
    """The snapshot's table and the rows of `nodes` in it; a table of their own for nodes
    that are not the snapshot's."""
    table = ev.handle.snapshot.table
    index, rows_nodes = table.index, table.nodes
    rows = [index.get(node.name, -1) for node in nodes]
    if all(row >= 0 and rows_nodes[row] is node for row, node in zip(rows, nodes, strict=True)):
        return table, np.array(rows, dtype=np.int64)
    return NodeTable(list(nodes)), np.arange(len(nodes), dtype=np.int64)

