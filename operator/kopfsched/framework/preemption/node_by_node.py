"""Dry-run mode 1, node by node: upstream's SelectVictimsOnNode on a cloned NodeInfo and
CycleState, running the PreFilter extensions (AddPod/RemovePod) as victims leave and come
back. The only mode valid when a PreFilter extension is active (a node needs state of its
own); the other two modes answer exactly as this one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from kopfsched.framework.cycle_state import CycleState
from kopfsched.framework.preemption.candidates import (
    MSG_NO_VICTIMS,
    DisruptionBudget,
    filter_pods_with_pdb_violation,
    importance_key,
)
from kopfsched.framework.status import Status
from kopfsched.framework.types import NodeInfo, PodInfo

if TYPE_CHECKING:
    from kopfsched.framework.preemption.evaluator import Evaluator


def select_victims_on_node(ev: Evaluator, state: CycleState, pod: PodInfo, node: NodeInfo,
                           pdbs: Sequence[DisruptionBudget]) -> tuple[list[PodInfo], int, Status | None]:
    """The fewest pods to remove from `node` (a clone, as is `state`) so `pod` fits:
    (victims most important first, how many of them violate a PDB, status)."""
    fwk = ev.framework
    potential = [p for p in node.iter_pods() if ev.is_preemption_allowed(node, p, pod)]
    for victim in potential:
        node.remove_pod(victim)
        status = fwk.run_pre_filter_extension_remove_pod(state, pod, victim, node)
        if status is not None:
            return [], 0, status
    if not potential:
        return [], 0, Status.unresolvable(MSG_NO_VICTIMS)
    # If the pod does not fit even with every lower-priority pod gone, this node cannot help.
    # (Affinity of the pod to its own victims is deliberately not considered, as upstream.)
    # The nominator does not change during a dry run: look the node's nominated pods up once.
    nominated = fwk.nominated_pods_to_count(pod=pod, node_name=node.name)
    status = fwk.run_filter_plugins_with_pods(state, pod, node, nominated=nominated, scratch_node=True)
    if status is not None:
        return [], 0, status
    potential.sort(key=importance_key)
    violating, non_violating = filter_pods_with_pdb_violation(potential, pdbs)
    victims: list[PodInfo] = []

    def reprieve(candidate: PodInfo) -> tuple[bool, Status | None]:
        node.add_pod(candidate)
        status = fwk.run_pre_filter_extension_add_pod(state, pod, candidate, node)
        if status is not None:
            return False, status
        # Node-static plugins passed just above and cannot change as pods come back.
        if fwk.run_filter_plugins_with_pods(state, pod, node, nominated=nominated, pod_dependent_only=True,
                                            scratch_node=True) is None:
            return True, None
        node.remove_pod(candidate)
        status = fwk.run_pre_filter_extension_remove_pod(state, pod, candidate, node)
        victims.append(candidate)
        return False, status

    num_violating = 0
    for candidate in violating:
        fits, status = reprieve(candidate)
        if status is not None:
            return [], 0, status
        if not fits:
            num_violating += 1
    for candidate in non_violating:
        _, status = reprieve(candidate)
        if status is not None:
            return [], 0, status
    if violating and non_violating:
        victims.sort(key=importance_key)
    return victims, num_violating, None

# -- side effects -------------------------------------------------------------------------

