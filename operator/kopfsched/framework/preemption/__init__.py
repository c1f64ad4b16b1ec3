"""Preemption, for any PostFilter plugin (upstream's pkg/scheduler/framework/preemption).

DefaultPreemption is a thin adapter over `Evaluator`; an out-of-tree PostFilter can build
its own Evaluator (with `is_eligible_pod` to narrow the victims) over its Handle.

- `evaluator`: the five steps, the dry-run loop over the candidate nodes, the API side effects;
- `candidates`: pure helpers (PDBs, candidate ordering, counts, messages);
- the dry run's three modes, one module each: `node_by_node`, `batched`, `deferred`.
"""

from kopfsched.framework.preemption.candidates import (
    MSG_NO_CANDIDATE,
    MSG_NO_VICTIMS,
    MSG_NOT_ELIGIBLE_NEVER,
    MSG_NOT_ELIGIBLE_TERMINATING,
    MSG_NOT_HELPFUL,
    Candidate,
    DisruptionBudget,
    IsEligiblePod,
    calculate_num_candidates,
    filter_pods_with_pdb_violation,
    pick_one_node_for_preemption,
)
from kopfsched.framework.preemption.evaluator import DryRunResult, Evaluator

__all__ = [
    "MSG_NOT_ELIGIBLE_NEVER",
    "MSG_NOT_ELIGIBLE_TERMINATING",
    "MSG_NOT_HELPFUL",
    "MSG_NO_CANDIDATE",
    "MSG_NO_VICTIMS",
    "Candidate",
    "DisruptionBudget",
    "DryRunResult",
    "Evaluator",
    "IsEligiblePod",
    "calculate_num_candidates",
    "filter_pods_with_pdb_violation",
    "pick_one_node_for_preemption",
]
