"""Preemption's evaluator: who may preempt, where, and whom (upstream's framework/preemption).

`Evaluator.preempt` runs upstream's five steps for a pod that fits nowhere:

1. eligibility: `preemptionPolicy: Never`, or victims of an earlier preemption still
   terminating on the pod's nominated node, stop it;
2. candidates: a dry run over the nodes where removing pods might help (Filter said
   Unschedulable, not UnschedulableAndUnresolvable), starting at a random offset and
   stopping once enough candidates were found;
3. victims per node (`select_victims_on_node`): remove every lower-priority pod, check
   the pod fits, then reprieve as many as possible — PDB-protected pods first, most
   important first;
4. the best candidate (`pick_one_node_for_preemption`);
5. the API side effects (delete victims, reject waiting ones, clear lower-priority
   nominations), run as a supervised task because PostFilter never awaits.

The dry run works on clones of the NodeInfo and the CycleState, so the cycle's snapshot
is never touched. The pure parts (PDB split, candidate ordering, counts) are module
functions so they can be tested on their own.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import compress
from typing import Any

import numpy as np

from kopfsched.framework.client import NotFoundError
from kopfsched.framework.cycle_state import CycleState
from kopfsched.framework.diagnosis import Diagnosis, FitError
from kopfsched.framework.handle import Handle
from kopfsched.framework.interface import NodeToStatus, PostFilterResult
from kopfsched.framework.labels import SelectorError, label_selector
from kopfsched.framework.node_table import NodeTable, PodSlots, WhatIfTable
from kopfsched.framework.status import Code, Status
from kopfsched.framework.types import NodeInfo, Obj, PodInfo

logger = logging.getLogger(__name__)

MSG_NOT_ELIGIBLE_NEVER = "not eligible due to preemptionPolicy=Never."
MSG_NOT_ELIGIBLE_TERMINATING = "not eligible due to a terminating pod on the nominated node."
MSG_NO_VICTIMS = "No preemption victims found for incoming pod"
MSG_NOT_HELPFUL = "Preemption is not helpful for scheduling"
MSG_NO_CANDIDATE = "no candidate node for preemption"

DISRUPTION_TARGET = "DisruptionTarget"
REASON_PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"

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


def more_important_pod(a: PodInfo, b: PodInfo) -> bool:
    return importance_key(a) < importance_key(b)


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


class _Victims:
    """What an extender's ProcessPreemption reads per node (extenderv1.Victims)."""

    __slots__ = ("num_pdb_violations", "pods")

    def __init__(self, pods: list[PodInfo], num_pdb_violations: int) -> None:
        self.pods = pods
        self.num_pdb_violations = num_pdb_violations


@dataclass(frozen=True, slots=True)
class Candidate:
    """A node the preemptor fits on once `victims` (most important first) are gone."""

    name: str
    victims: tuple[PodInfo, ...]
    num_pdb_violations: int = 0


_CHOSEN_LATER = Candidate("", ())
"""A deferred candidate's place in the dry run's list until its victims are chosen."""


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


def _utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# -- the evaluator ------------------------------------------------------------------------------


@dataclass(slots=True)
class DryRunResult:
    candidates: list[Candidate]
    """Candidates that violate no PDB first, then the others, each in dry-run order."""
    statuses: NodeToStatus
    """Why each node checked without success is not a candidate."""
    errors: list[Status]


class Evaluator:
    """Preemption for one profile, over the handle's snapshot, nominator and client."""

    def __init__(self, *, plugin_name: str, handle: Handle, min_candidate_nodes_percentage: int,
                 min_candidate_nodes_absolute: int, is_eligible_pod: IsEligiblePod | None = None,
                 wall_clock: Callable[[], str] = _utc_now) -> None:
        self.plugin_name = plugin_name
        self.handle = handle
        self.min_candidate_nodes_percentage = min_candidate_nodes_percentage
        self.min_candidate_nodes_absolute = min_candidate_nodes_absolute
        self.is_eligible_pod: IsEligiblePod = is_eligible_pod or (lambda node, victim, preemptor: True)
        self._custom_eligibility = is_eligible_pod is not None
        self.wall_clock = wall_clock

    @property
    def framework(self) -> Any:
        fwk = self.handle.framework
        if fwk is None:
            raise RuntimeError("preemption needs the profile's framework on the handle")
        return fwk

    # -- the five steps -----------------------------------------------------------------------

    def preempt(self, state: CycleState, pod: PodInfo,
                statuses: NodeToStatus) -> tuple[PostFilterResult | None, Status | None]:
        """(result, status) as upstream's Evaluator.Preempt: (None, rejection) keeps the
        pod's nomination, (result with no node, rejection) clears it, (result, None) nominates."""
        found = self._find_candidates(state, pod, statuses)
        if not isinstance(found, list):
            return found
        return self._pick(found, pod)

    async def preempt_with_extenders(self, state: CycleState, pod: PodInfo,
                                     statuses: NodeToStatus) -> tuple[PostFilterResult | None, Status | None]:
        """`preempt` with upstream's step 3: the profile's extenders that support preemption
        (their preempt verb, ProcessPreemption) may drop candidates or change their victims."""
        found = self._find_candidates(state, pod, statuses)
        if not isinstance(found, list):
            return found
        try:
            candidates = await self.call_extenders(pod, found)
        except Exception as exc:  # an extender that is not ignorable failed: the attempt errs
            return None, Status.as_error(exc)
        return self._pick(candidates, pod)

    def _find_candidates(self, state: CycleState, pod: PodInfo, statuses: NodeToStatus
                         ) -> list[Candidate] | tuple[PostFilterResult | None, Status | None]:
        """Steps 0-2: eligibility, the dry run; the candidates, or the answer when there are none."""
        nominated = _nominated_node_name(pod)
        eligible, message = self.pod_eligible_to_preempt_others(pod, statuses.get(nominated) if nominated else None)
        if not eligible:
            return None, Status.unschedulable(message)

        all_nodes = self.handle.snapshot.node_infos()
        if not all_nodes:
            return None, Status.as_error("no nodes available")
        potential = self.nodes_where_preemption_might_help(all_nodes, statuses)
        if potential:
            pdbs = self.pod_disruption_budgets()
            offset = self.handle.rng.randrange(len(potential))
            num_candidates = self.num_candidates(len(potential))
            dry_run = self.dry_run_preemption(state, pod, potential, pdbs, offset=offset,
                                              num_candidates=num_candidates)
        else:
            dry_run = DryRunResult([], NodeToStatus(), [])
        if not dry_run.candidates:
            if dry_run.errors:
                return None, Status.as_error("; ".join(e.message for e in dry_run.errors))
            dry_run.statuses.absent = Status.unresolvable(MSG_NOT_HELPFUL)
            fit = FitError(pod_key=pod.key, num_all_nodes=len(all_nodes),
                           diagnosis=Diagnosis(node_to_status=dry_run.statuses))
            return PostFilterResult(nominated_node_name=""), Status.unschedulable(str(fit))
        return list(dry_run.candidates)

    def _pick(self, candidates: Sequence[Candidate], pod: PodInfo) -> tuple[PostFilterResult | None, Status | None]:
        """Steps 4-5: the best candidate, its victims prepared for deletion."""
        best = pick_one_node_for_preemption(candidates)
        if best is None or not best.name:
            return None, Status.unschedulable(MSG_NO_CANDIDATE)
        self.prepare_candidate(best, pod)
        victims = tuple(v.key for v in best.victims)
        found = f"found a potential placement for pod on node {best.name}, preempting {len(victims)} victims"
        return PostFilterResult(nominated_node_name=best.name, victims=victims), Status(Code.SUCCESS, (found,))

    async def call_extenders(self, pod: PodInfo, candidates: list[Candidate]) -> list[Candidate]:
        """Upstream's callExtenders: each interested extender with a preempt verb gets the
        candidates' victims and answers the nodes (and victims) it accepts; the next one sees
        that answer. An ignorable extender's failure, or a node it leaves without victims, is
        skipped; anyone else's is an error."""
        extenders = [e for e in self.handle.extenders if e.supports_preemption() and e.is_interested(pod)]
        victims: dict[str, Any] = {c.name: _Victims(list(c.victims), c.num_pdb_violations)
                                   for c in candidates if c.name}
        if not extenders or not victims:
            return candidates
        nodes = {node.name: node for node in self.handle.snapshot.node_infos()}
        for extender in extenders:
            try:
                answer = dict(await extender.process_preemption(pod, victims, nodes))
            except Exception:
                if extender.is_ignorable():
                    continue
                raise
            for node_name, node_victims in list(answer.items()):
                if node_victims is None or not node_victims.pods:
                    if extender.is_ignorable():
                        del answer[node_name]
                        continue
                    raise ValueError(f'expected at least one victim pod on node "{node_name}"')
            victims = answer
            if not victims:
                break
        return [Candidate(name, tuple(v.pods), v.num_pdb_violations) for name, v in victims.items()]

    def pod_eligible_to_preempt_others(self, pod: PodInfo, nominated_node_status: Status | None) -> tuple[bool, str]:
        if pod.spec.get("preemptionPolicy") == "Never":
            return False, MSG_NOT_ELIGIBLE_NEVER
        nominated = _nominated_node_name(pod)
        if nominated:
            # A nominated node that no longer fits at all frees the pod to preempt elsewhere
            # (a node with no status counts as such, as upstream's absent-node default).
            if nominated_node_status is None or nominated_node_status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                return True, ""
            node = self.handle.snapshot.get(nominated)
            if node is not None:
                for other in node.iter_pods():
                    if self.is_preemption_allowed(node, other, pod) and pod_terminating_by_preemption(other):
                        return False, MSG_NOT_ELIGIBLE_TERMINATING
        return True, ""

    def is_preemption_allowed(self, node: NodeInfo, victim: PodInfo, preemptor: PodInfo) -> bool:
        return victim.priority < preemptor.priority and self.is_eligible_pod(node, victim, preemptor)

    @staticmethod
    def nodes_where_preemption_might_help(nodes: Iterable[NodeInfo], statuses: NodeToStatus) -> list[NodeInfo]:
        """Nodes whose Filter status is Unschedulable: removing pods might make room there."""
        get, absent, unschedulable = statuses.statuses.get, statuses.absent, Code.UNSCHEDULABLE
        return [node for node in nodes
                if (status := get(node.name, absent)) is not None and status.code is unschedulable]

    def num_candidates(self, num_nodes: int) -> int:
        return calculate_num_candidates(num_nodes, percentage=self.min_candidate_nodes_percentage,
                                        absolute=self.min_candidate_nodes_absolute)

    def pod_disruption_budgets(self) -> list[DisruptionBudget]:
        return [DisruptionBudget.from_obj(pdb) for pdb in self.handle.objects.list("PodDisruptionBudget")]

    def dry_run_preemption(self, state: CycleState, pod: PodInfo, potential: Sequence[NodeInfo],
                           pdbs: Sequence[DisruptionBudget], *, offset: int, num_candidates: int,
                           defer: bool = True) -> DryRunResult:
        """Check the potential nodes from `offset` on, round robin, until `num_candidates`
        candidates were found including at least one that violates no PDB.

        When no PreFilter extension is active (no node needs state of its own), nodes are
        judged a batch at a time with vectorised filters (`select_victims_on_nodes`); the
        outcome is the node-by-node one, batch results being consumed in the same order and
        up to the same stopping point."""
        non_violating: list[Candidate] = []
        violating: list[Candidate] = []
        statuses = NodeToStatus()
        errors: list[Status] = []
        n = len(potential)
        batched = not self.framework.has_active_pre_filter_extensions(state)
        shared_state = state.clone() if batched else state
        # Without PDBs every candidate violates none, so whether a node is a candidate is known once
        # the pod fits there with its victims gone: the reprieves (which victims) wait until the
        # search stopped and run once, for the candidates kept. A node whose reprieves would give
        # back every victim (impossible for a node Filter rejected) makes the search run again
        # the other way, so the outcome is the same in any case.
        deferring = batched and not pdbs and defer
        pending: dict[int, tuple[NodeInfo, list[PodInfo]]] = {}  # candidate index -> its node and victims

        def done() -> DryRunResult:
            if pending:
                chosen = list(pending.items())
                found = self._reprieve(shared_state, pod, [node for _, (node, _) in chosen],
                                       [self._reprieve_queue(lower, pdbs) for _, (_, lower) in chosen])
                for (index, (node, _)), (victims, num_violations, _) in zip(chosen, found, strict=True):
                    if not victims:
                        return self.dry_run_preemption(state, pod, potential, pdbs, offset=offset,
                                                       num_candidates=num_candidates, defer=False)
                    non_violating[index] = Candidate(node.name, tuple(victims), num_violations)
            return DryRunResult(non_violating + violating, statuses, errors)

        i = size = 0
        while i < n:
            reprieving: dict[int, list[PodInfo]] = {}
            if batched:
                so_far = len(non_violating) + len(violating)
                size = min(n - i, batch_size(wanted=max(num_candidates - so_far, 1), found=so_far, judged=i,
                                             last=size))
                nodes = [potential[(offset + i + k) % n] for k in range(size)]
                if deferring:
                    results, reprieving = self._judge_batch(shared_state, pod, nodes, pdbs)
                else:
                    results = self.select_victims_on_nodes(shared_state, pod, nodes, pdbs)
            else:
                node = potential[(offset + i) % n].clone()
                nodes = [node]
                results = [self.select_victims_on_node(state.clone(), pod, node, pdbs)]
            i += len(nodes)
            for k, (node, (victims, num_violations, status)) in enumerate(zip(nodes, results, strict=True)):
                queued = reprieving.get(k)
                if queued is not None:
                    if len(non_violating) < num_candidates:
                        pending[len(non_violating)] = (node, queued)
                        non_violating.append(_CHOSEN_LATER)  # replaced in done()
                    if len(non_violating) + len(violating) >= num_candidates:
                        return done()
                    continue
                if status is None and victims:
                    found = non_violating if num_violations == 0 else violating
                    if len(found) < num_candidates:
                        found.append(Candidate(node.name, tuple(victims), num_violations))
                    if non_violating and len(non_violating) + len(violating) >= num_candidates:
                        return done()
                    continue
                if status is None:
                    status = Status.as_error(f'expected at least one victim pod on node "{node.name}"')
                if status.code is Code.ERROR:
                    errors.append(status)
                statuses.statuses[node.name] = status
        return done()

    def select_victims_on_nodes(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo],
                                pdbs: Sequence[DisruptionBudget]) -> list[tuple[list[PodInfo], int, Status | None]]:
        """`select_victims_on_node` for each of `nodes` (left untouched), vectorised over them:
        one Filter pass for all nodes with their victims gone, then the reprieves step by
        step, each step adding every node's next victim back and filtering them together.
        The hypothetical nodes are WhatIfTable rows over the snapshot's table, so the
        resource checks need no NodeInfo copies.

        Only valid when no PreFilter extension is active, so `state` serves every node (and
        AddPod/RemovePod, which would all be skipped, need not run). Nodes with nominated pods
        that Filter counts reprieve node by node, as `select_victims_on_node` does."""
        results, reprieving = self._judge_batch(state, pod, nodes, pdbs)
        if reprieving:
            found = self._reprieve(state, pod, [nodes[i] for i in reprieving],
                                   [self._reprieve_queue(potential, pdbs) for potential in reprieving.values()])
            for i, answer in zip(reprieving, found, strict=True):
                results[i] = answer
        return results

    def _judge_batch(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo],
                     pdbs: Sequence[DisruptionBudget]
                     ) -> tuple[list[tuple[list[PodInfo], int, Status | None]], dict[int, list[PodInfo]]]:
        """`select_victims_on_nodes` up to the reprieves: (each node's answer, and for the nodes where
        the pod fits with their victims gone, their victims, for `_reprieve_queue`)."""
        fwk = self.framework
        results: list[tuple[list[PodInfo], int, Status | None]] = [([], 0, None)] * len(nodes)
        base, base_rows = self._table_rows(nodes)
        potentials: dict[int, list[PodInfo]] = {}
        nominated: dict[int, list[PodInfo]] = {}
        priority = pod.priority
        if self._custom_eligibility:
            eligible = self.is_eligible_pod
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
        by_node = self.handle.nominator.pods_to_count(pod)  # every node at once, kept by the nominator
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
            if self._custom_eligibility:
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
                results[i] = self.select_victims_on_node(state.clone(), pod, nodes[i].clone(), pdbs)
                continue
            listed = potentials.get(i)
            if listed is None:
                listed = [p for p in nodes[i].pods.values() if p.priority < priority]
            reprieving[i] = listed
        return results, reprieving

    @staticmethod
    def _reprieve_queue(potential: list[PodInfo], pdbs: Sequence[DisruptionBudget]) -> tuple[list[PodInfo], int]:
        """A node's victims in the order the reprieves try them back: the PDB-violating ones first,
        each part most important first; and how many violate."""
        potential.sort(key=importance_key)
        violating, non_violating = filter_pods_with_pdb_violation(potential, pdbs)
        return violating + non_violating, len(violating)

    def _reprieve(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo],
                  queues: Sequence[tuple[list[PodInfo], int]]) -> list[tuple[list[PodInfo], int, Status | None]]:
        """The reprieves of `select_victims_on_nodes` for `nodes`, each with its queue from
        `_judge_batch`: step by step, every node's next victim is added back to the node with its
        victims gone and the ones reprieved so far, and all are filtered together (slot j of a
        node's queue is its j-th victim, `kept` marks the slots reprieved, the trial tables sum the
        selected slots' shares with numpy). (victims most important first, how many violate a PDB)."""
        fwk = self.framework
        base, base_rows = self._table_rows(nodes)
        if self._custom_eligibility:
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
        results: list[tuple[list[PodInfo], int, Status | None]] = []
        for (queue, violating_count), gone in zip(queues, (~kept).tolist(), strict=True):
            found = list(compress(queue, gone))  # the slots not reprieved (past the queue's end: none)
            if violating_count:
                if violating_count < len(queue):
                    found.sort(key=importance_key)
                results.append((found, sum(gone[:violating_count]), None))
            else:
                results.append((found, 0, None))
        return results

    def _table_rows(self, nodes: Sequence[NodeInfo]) -> tuple[NodeTable, np.ndarray]:
        """The snapshot's table and the rows of `nodes` in it; a table of their own for nodes
        that are not the snapshot's."""
        table = self.handle.snapshot.table
        index, rows_nodes = table.index, table.nodes
        rows = [index.get(node.name, -1) for node in nodes]
        if all(row >= 0 and rows_nodes[row] is node for row, node in zip(rows, nodes, strict=True)):
            return table, np.array(rows, dtype=np.int64)
        return NodeTable(list(nodes)), np.arange(len(nodes), dtype=np.int64)

    def select_victims_on_node(self, state: CycleState, pod: PodInfo, node: NodeInfo,
                               pdbs: Sequence[DisruptionBudget]) -> tuple[list[PodInfo], int, Status | None]:
        """The fewest pods to remove from `node` (a clone, as is `state`) so `pod` fits:
        (victims most important first, how many of them violate a PDB, status)."""
        fwk = self.framework
        potential = [p for p in node.iter_pods() if self.is_preemption_allowed(node, p, pod)]
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

    def prepare_candidate(self, candidate: Candidate, pod: PodInfo) -> None:
        """Start evicting the victims and free the node from lower-priority nominations.

        The nominator forgets those pods at once, so the next cycle no longer reserves room
        for them; the API calls run in one supervised task."""
        lower = [p for p in self.handle.nominator.nominated_pods_for_node(candidate.name)
                 if p.priority < pod.priority]
        for other in lower:
            self.handle.nominator.delete_nominated_pod(other)
        victims = [v for v in candidate.victims if not v.is_terminating]
        if victims or lower:
            self.handle.spawn(self._preempt(candidate, pod, victims, lower), f"preemption for {pod.key}")

    async def _preempt(self, candidate: Candidate, pod: PodInfo, victims: list[PodInfo],
                       lower: list[PodInfo]) -> None:
        client = self.handle.client
        for other in lower:
            try:
                await client.patch_pod_status(pod=other.pod, nominated_node_name="")
            except NotFoundError:
                pass
            except Exception as exc:  # not critical: the pod is retried anyway
                logger.warning("cannot clear nominatedNodeName of %s: %s", other.key, exc)
        failed = False
        for victim in victims:
            try:
                await self.preempt_pod(candidate, pod, victim)
            except Exception as exc:
                failed = True
                logger.error("preempting %s for %s on %s failed: %s", victim.key, pod.key, candidate.name, exc)
        if failed:
            # The pod could wait forever for a deletion that never comes: retry it now.
            self.handle.activate([pod])

    async def preempt_pod(self, candidate: Candidate, preemptor: PodInfo, victim: PodInfo) -> None:
        """Reject a victim waiting at Permit, or mark it DisruptionTarget and delete it;
        then post the Preempted event."""
        waiting = self.handle.waiting_pods.get(victim.uid)
        if waiting is not None:
            waiting.reject(self.plugin_name, "preempted")
        else:
            condition = {
                "type": DISRUPTION_TARGET, "status": "True", "reason": REASON_PREEMPTION_BY_SCHEDULER,
                "message": f"{preemptor.scheduler_name}: preempting to accommodate a higher priority pod",
                "lastTransitionTime": self.wall_clock(),
            }
            try:
                await self.handle.client.delete_pod(pod=victim.pod, condition=condition)
            except NotFoundError:
                return  # already gone
        fwk = self.handle.framework
        try:
            await self.handle.client.record_event(
                regarding=victim.pod, type="Normal", reason="Preempted", action="Preempting",
                message=f"Preempted by pod {preemptor.uid} on node {candidate.name}",
                reporting_controller=fwk.profile_name if fwk is not None else self.plugin_name)
        except Exception as exc:  # an event is informational only
            logger.warning("failed to record the Preempted event for %s: %s", victim.key, exc)


def _nominated_node_name(pod: PodInfo) -> str:
    return (pod.pod.get("status") or {}).get("nominatedNodeName") or ""
