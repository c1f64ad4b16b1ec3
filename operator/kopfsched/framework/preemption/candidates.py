"""What preemption decides with, as pure functions (upstream's framework/preemption helpers):
PodDisruptionBudgets and who violates them, candidates and how the best is picked, how many
candidates the dry run looks for, the order of importance of pods.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from kopfsched.framework.labels import SelectorError, label_selector
from kopfsched.framework.types import NodeInfo, Obj, PodInfo

MSG_NOT_ELIGIBLE_NEVER = "not eligible due to preemptionPolicy=Never."
MSG_NOT_ELIGIBLE_TERMINATING = "not eligible due to a terminating pod on the nominated node."
MSG_NO_VICTIMS = "No preemption victims found for incoming pod"
MSG_NOT_HELPFUL = "Preemption is not helpful for scheduling"
MSG_NO_CANDIDATE = "no candidate node for preemption"

DISRUPTION_TARGET = "DisruptionTarget"
REASON_PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"

_PRIORITY_OFFSET = 2**31
"""MaxInt32+1: makes every priority non-negative before summing (upstream's minSumPriorities)."""

IsEligiblePod = Callable[[NodeInfo, PodInfo, PodInfo], bool]
"""(node, victim, preemptor) -> may the victim be preempted, beyond having a lower priority."""


# -- pure helpers -------------------------------------------------------------------------------


def pod_start_time(pod: PodInfo) -> float:
    """status.startTime in epoch seconds; a pod that has not started counts as starting now,
    i.e. later than any real start time (upstream's GetPodStartTime)."""
    started = pod.start_time  # parsed once per PodInfo: the dry run sorts the same pods per node
    return math.inf if started is None else started


def importance_key(pod: PodInfo) -> tuple[int, float]:
    """Sort key, most important first: higher priority, then the longer-running pod
    (upstream's MoreImportantPod)."""
    started = pod.start_time  # pod_start_time, inline: the dry run sorts every candidate's victims
    return -pod.priority, math.inf if started is None else started



def calculate_num_candidates(num_nodes: int, *, percentage: int, absolute: int) -> int:
    """How many candidates the dry run looks for: max(n*percentage/100, absolute), at most n."""
    n = num_nodes * percentage // 100
    n = max(n, absolute)
    return min(n, num_nodes)


@dataclass(frozen=True, slots=True)
class DisruptionBudget:
    """The parts of a PodDisruptionBudget preemption reads."""

    namespace: str
    matches: Callable[[Mapping[str, str]], bool] | None
    """None when the selector is missing, empty or invalid: such a PDB matches no pod."""
    disruptions_allowed: int
    disrupted_pods: frozenset[str]

    @classmethod
    def from_obj(cls, pdb: Obj) -> DisruptionBudget:
        meta = pdb.get("metadata") or {}
        selector = (pdb.get("spec") or {}).get("selector")
        status = pdb.get("status") or {}
        matches = None
        if selector and (selector.get("matchLabels") or selector.get("matchExpressions")):
            try:
                matches = label_selector(selector)
            except SelectorError:
                matches = None
        allowed = status.get("disruptionsAllowed")
        return cls(
            namespace=meta.get("namespace") or "default",
            matches=matches,
            disruptions_allowed=allowed if isinstance(allowed, int) else 0,
            disrupted_pods=frozenset(status.get("disruptedPods") or ()),
        )


def filter_pods_with_pdb_violation(
    pods: Sequence[PodInfo], pdbs: Sequence[DisruptionBudget]
) -> tuple[list[PodInfo], list[PodInfo]]:
    """(violating, non-violating), each in the input order.

    Every matching PDB's budget is decremented per pod (pods already in its disruptedPods
    were counted by the API server and are skipped); a pod whose removal drives any of
    its PDBs below zero violates."""
    if not pdbs:
        return [], list(pods)
    allowed = [pdb.disruptions_allowed for pdb in pdbs]
    violating: list[PodInfo] = []
    non_violating: list[PodInfo] = []
    for pod in pods:
        violated = False
        if pod.labels:  # a pod without labels matches no PDB
            for i, pdb in enumerate(pdbs):
                if pdb.namespace != pod.namespace or pdb.matches is None or not pdb.matches(pod.labels):
                    continue
                if pod.name in pdb.disrupted_pods:
                    continue
                allowed[i] -= 1
                if allowed[i] < 0:
                    violated = True
        (violating if violated else non_violating).append(pod)
    return violating, non_violating


@dataclass(frozen=True, slots=True)
class Candidate:
    """A node the preemptor fits on once `victims` (most important first) are gone."""

    name: str
    victims: tuple[PodInfo, ...]
    num_pdb_violations: int = 0


def _candidate_score(c: Candidate) -> tuple[float, ...]:
    """Upstream's five criteria, each higher is better, as one tuple compared lexicographically:
    fewest PDB violations, lowest highest-victim priority, smallest priority sum (each priority
    offset to be non-negative), fewest victims, latest start of the highest-priority victims
    (the earliest of their `pod_start_time`s, in one loop: every preemptor scores every candidate)."""
    victims = c.victims
    priorities = [v.priority for v in victims]
    top = max(priorities)
    earliest = math.inf
    for v, priority in zip(victims, priorities, strict=True):
        if priority == top:
            started = v.start_time
            if started is not None and started < earliest:
                earliest = started
    return (-c.num_pdb_violations, -victims[0].priority,
            -(sum(priorities) + _PRIORITY_OFFSET * len(victims)), -len(victims), earliest)


def pick_one_node_for_preemption(candidates: Sequence[Candidate]) -> Candidate | None:
    """Upstream's ordering: each criterion keeps the best-scoring candidates; the first
    criterion that leaves one decides, and the first of the remaining ones wins ties. That is
    the first candidate with the greatest tuple of criteria, as `max` finds it."""
    if not candidates:
        return None
    return max(candidates, key=_candidate_score)


def pod_terminating_by_preemption(pod: PodInfo) -> bool:
    """Being deleted, with DisruptionTarget=True set by scheduler preemption."""
    if not pod.is_terminating:
        return False
    for condition in (pod.pod.get("status") or {}).get("conditions") or ():
        if condition.get("type") == DISRUPTION_TARGET:
            return condition.get("status") == "True" and condition.get("reason") == REASON_PREEMPTION_BY_SCHEDULER
    return False


