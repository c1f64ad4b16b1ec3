"""Dry-run mode 3, deferred: without PDBs every candidate violates none, so whether a node is a
candidate is known once the pod fits there with its victims gone (`batched.judge_batch`). The
reprieves (which victims) wait until the search has stopped and run once, for the candidates
kept, instead of for every node judged. A node whose reprieves would give back every victim
(impossible for a node Filter rejected) makes the search run again undeferred, so the outcome
is the batched mode's in any case.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from kopfsched.framework.cycle_state import CycleState
from kopfsched.framework.preemption import batched
from kopfsched.framework.preemption.candidates import Candidate, DisruptionBudget
from kopfsched.framework.types import NodeInfo, PodInfo

if TYPE_CHECKING:
    from kopfsched.framework.preemption.evaluator import Evaluator

CHOSEN_LATER = Candidate("", ())
"""A deferred candidate's place in the dry run's list until its victims are chosen."""


def choose_victims(ev: Evaluator, state: CycleState, pod: PodInfo,
                   pending: Mapping[int, tuple[NodeInfo, list[PodInfo]]],
                   pdbs: Sequence[DisruptionBudget]) -> dict[int, Candidate] | None:
    """The kept candidates (by their index in the dry run's list, from their node and potential
    victims) with their victims chosen; None when one of them would need no victim at all."""
    chosen = list(pending.items())
    found = batched.reprieve(ev, state, pod, [node for _, (node, _) in chosen],
                             [batched.reprieve_queue(lower, pdbs) for _, (_, lower) in chosen])
    candidates: dict[int, Candidate] = {}
    for (index, (node, _)), (victims, num_violations, _) in zip(chosen, found, strict=True):
        if not victims:
            return None
        candidates[index] = Candidate(node.name, tuple(victims), num_violations)
    return candidates
