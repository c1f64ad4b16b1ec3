"""Preemption's evaluator: who may preempt, where, and whom (upstream's framework/preemption).

`Evaluator.preempt` runs upstream's five steps for a pod that fits nowhere:

1. eligibility: `preemptionPolicy: Never`, or victims of an earlier preemption still
   terminating on the pod's nominated node, stop it;
2. candidates: a dry run over the nodes where removing pods might help (Filter said
   Unschedulable, not UnschedulableAndUnresolvable), starting at a random offset and
   stopping once enough candidates were found;
3. victims per node: remove every lower-priority pod, check the pod fits, then reprieve as
   many as possible — PDB-protected pods first, most important first;
4. the best candidate (`candidates.pick_one_node_for_preemption`);
5. the API side effects (delete victims, reject waiting ones, clear lower-priority
   nominations), run as a supervised task because PostFilter never awaits: upstream's async
   preemption, the victims deleted concurrently, the pod kept out of activeQ meanwhile by
   DefaultPreemption's PreEnqueue (`is_pod_running_preemption`).

The dry run has three modes, one module each, with the same outcome: `node_by_node` (when a
PreFilter extension is active), `batched` (vectorised over many nodes) and `deferred`
(without PDBs: the reprieves wait until the search has stopped). It works on clones of the
NodeInfo and the CycleState, so the cycle's snapshot is never touched.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Any, TypeVar

import numpy as np

from kopfsched.framework.client import NotFoundError
from kopfsched.framework.cycle_state import CycleState
from kopfsched.framework.diagnosis import Diagnosis, FitError, uniform_rejection_counts
from kopfsched.framework.handle import Handle
from kopfsched.framework.interface import NodeToStatus, PostFilterResult, RowPart
from kopfsched.framework.preemption import batched, deferred, node_by_node
from kopfsched.framework.preemption.candidates import (
    DISRUPTION_TARGET,
    MSG_NO_CANDIDATE,
    MSG_NO_VICTIMS,
    MSG_NOT_ELIGIBLE_NEVER,
    MSG_NOT_ELIGIBLE_TERMINATING,
    MSG_NOT_HELPFUL,
    REASON_PREEMPTION_BY_SCHEDULER,
    Candidate,
    DisruptionBudget,
    IsEligiblePod,
    calculate_num_candidates,
    pick_one_node_for_preemption,
    pod_terminating_by_preemption,
)
from kopfsched.framework.status import Code, Status, TalliedStatuses
from kopfsched.framework.types import NodeInfo, PodInfo, rfc3339

logger = logging.getLogger(__name__)

_T = TypeVar("_T")
_node_name = attrgetter("name")

PARALLELISM = 16
"""Victims deleted at once, at most: upstream's Parallelizer at its default parallelism."""
DELETED_MEMORY = 4096
"""How many victims' delete calls the evaluator remembers (Evaluator.deleted_victims)."""


class _Victims:
    """What an extender's ProcessPreemption reads per node (extenderv1.Victims)."""

    __slots__ = ("num_pdb_violations", "pods")

    def __init__(self, pods: list[PodInfo], num_pdb_violations: int) -> None:
        self.pods = pods
        self.num_pdb_violations = num_pdb_violations



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
                 wall_clock: Callable[[], str] = rfc3339) -> None:
        self.plugin_name = plugin_name
        self.handle = handle
        self.min_candidate_nodes_percentage = min_candidate_nodes_percentage
        self.min_candidate_nodes_absolute = min_candidate_nodes_absolute
        self.is_eligible_pod: IsEligiblePod = is_eligible_pod or (lambda node, victim, preemptor: True)
        self.custom_eligibility = is_eligible_pod is not None
        self.wall_clock = wall_clock
        self.preempting: set[str] = set()
        """Pods whose preemption is not over (upstream's Executor.preempting)."""
        self._calling: set[str] = set()
        """Pods of `preempting` whose preemption's API calls are under way."""
        self.last_victims: dict[str, str] = {}
        """Preemptor uid -> the uid of its last victim, once only that one is left to delete."""
        self.deleted_victims: OrderedDict[str, None] = OrderedDict()
        """Victims (uids) a delete call was sent for, the latest DELETED_MEMORY: the cache may
        show one a little longer, until the watch brings its deletion; no second call is sent
        for it (upstream sends one and gets NotFound), as none is for a terminating victim."""

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
        # From the Filter pass's row parts, the rows alone: no node list unless a dry run runs.
        parts = statuses.row_parts()
        rows = _helpful_row_array(len(all_nodes), parts, statuses.absent) \
            if parts is not None and all(part.nodes is all_nodes for part in parts) else None
        potential = self.nodes_where_preemption_might_help(all_nodes, statuses) if rows is None else None
        count = len(rows) if rows is not None else len(potential or ())
        no_victims: Status | None = None
        if count:
            pdbs = self.pod_disruption_budgets()
            offset = self.handle.rng.randrange(count)
            num_candidates = self.num_candidates(count)
            if self._no_victims_anywhere(pod):
                # What the dry run finds, node after node from the offset: no pod to remove anywhere.
                no_victims = Status.unresolvable(MSG_NO_VICTIMS)
                if rows is not None and parts is not None:  # as rows: the name -> Status dict only if read
                    rotated = np.concatenate((rows[offset:], rows[:offset]))
                    found = NodeToStatus()
                    found.add_rows(RowPart(all_nodes, parts[0].names, None, rotated,
                                           [no_victims] * count, [no_victims]))
                else:
                    assert potential is not None
                    names = map(_node_name, potential[offset:] + potential[:offset])  # from the offset, round robin
                    found = NodeToStatus(dict.fromkeys(names, no_victims))
                dry_run = DryRunResult([], found, [])
            else:
                if potential is None:
                    assert rows is not None
                    potential = [all_nodes[row] for row in rows.tolist()]
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
            if no_victims is not None:  # one status on every potential node: counted without a pass
                fit.counts = uniform_rejection_counts(dry_run.statuses, no_victims, len(all_nodes))
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

    def _no_victims_anywhere(self, pod: PodInfo) -> bool:
        """No node runs a pod of lower priority than `pod` (with the default eligibility, the
        only possible victims): one look at the table's lower-priority counts, instead of a
        dry run that would find that on every node."""
        if self.custom_eligibility:
            return False
        return not np.count_nonzero(self.handle.snapshot.table.lower_priority(None, pod.priority))

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
        parts = statuses.row_parts()
        if parts is not None and isinstance(nodes, list) and all(part.nodes is nodes for part in parts):
            return _helpful_rows(nodes, parts, statuses.absent)
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
        judged a batch at a time (the `batched` mode, or without PDBs the `deferred` one);
        the outcome is the `node_by_node` one, batch results being consumed in the same order
        and up to the same stopping point."""
        non_violating: list[Candidate] = []
        violating: list[Candidate] = []
        statuses = NodeToStatus()
        errors: list[Status] = []
        n = len(potential)
        vectorised = not self.framework.has_active_pre_filter_extensions(state)
        shared_state = state.clone() if vectorised else state
        deferring = vectorised and not pdbs and defer  # the deferred mode (see `deferred`)
        pending: dict[int, tuple[NodeInfo, list[PodInfo]]] = {}  # candidate index -> its node and victims

        def done() -> DryRunResult:
            if pending:
                chosen = deferred.choose_victims(self, shared_state, pod, pending, pdbs)
                if chosen is None:
                    return self.dry_run_preemption(state, pod, potential, pdbs, offset=offset,
                                                   num_candidates=num_candidates, defer=False)
                for index, candidate in chosen.items():
                    non_violating[index] = candidate
            return DryRunResult(non_violating + violating, statuses, errors)

        i = size = 0
        while i < n:
            reprieving: dict[int, list[PodInfo]] = {}
            if vectorised:
                so_far = len(non_violating) + len(violating)
                size = min(n - i, batched.batch_size(wanted=max(num_candidates - so_far, 1), found=so_far, judged=i,
                                             last=size))
                nodes = [potential[(offset + i + k) % n] for k in range(size)]
                if deferring:
                    results, reprieving = batched.judge_batch(self, shared_state, pod, nodes, pdbs)
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
                        non_violating.append(deferred.CHOSEN_LATER)  # replaced in done()
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
                                pdbs: Sequence[DisruptionBudget]) -> list[batched.Victims]:
        """The batched mode (`batched.select_victims_on_nodes`)."""
        return batched.select_victims_on_nodes(self, state, pod, nodes, pdbs)

    def select_victims_on_node(self, state: CycleState, pod: PodInfo, node: NodeInfo,
                               pdbs: Sequence[DisruptionBudget]) -> batched.Victims:
        """The node-by-node mode (`node_by_node.select_victims_on_node`)."""
        return node_by_node.select_victims_on_node(self, state, pod, node, pdbs)

    def prepare_candidate(self, candidate: Candidate, pod: PodInfo) -> None:
        """Start evicting the victims and free the node from lower-priority nominations
        (upstream's prepareCandidateAsync, async preemption being on by default).

        A victim already terminating, or already sent a delete call (`deleted_victims`), needs
        no API call; with none left, nothing is done.
        Otherwise the pod is marked as running preemption until the API calls are done
        (`is_pod_running_preemption`: DefaultPreemption's PreEnqueue keeps it out of activeQ
        meanwhile). The nominator forgets the lower-priority pods at once, so the next cycle
        no longer reserves room for them; the API calls run in one supervised task."""
        deleted = self.deleted_victims
        victims = [v for v in candidate.victims if not v.is_terminating and v.uid not in deleted]
        if not victims:
            return
        lower = [p for p in self.handle.nominator.nominated_pods_for_node(candidate.name)
                 if p.priority < pod.priority]
        for other in lower:
            self.handle.nominator.delete_nominated_pod(other)
        if len(self.preempting) > len(self._calling) + DELETED_MEMORY:
            self._forget_finished()
        self.preempting.add(pod.uid)
        self._calling.add(pod.uid)
        self.last_victims.pop(pod.uid, None)
        self.handle.spawn(self._preempt(candidate, pod, victims, lower), f"preemption for {pod.key}")

    def _forget_finished(self) -> None:
        """Drop the finished preemptions whose last victim the cache no longer shows (their
        preemptor was deleted, or never asked again)."""
        for uid in [u for u in self.preempting if u not in self._calling]:
            self.is_pod_running_preemption(uid)

    def is_pod_running_preemption(self, uid: str) -> bool:
        """The pod's preemption is not over (upstream's IsPodRunningPreemption): until its last
        victim is being deleted, that is, gone from the cache or terminating.

        Upstream's preemption is over when its goroutine ends too, at about the time its
        informer sees the last deletion; here the watch may show it well after the delete call
        returned, and the earlier victims' deletions (shown before it) would bring the pod back
        while the cache still holds the others. So a preemption whose calls all succeeded stays
        on until the cache shows its last victim gone or terminating. For the same reason a
        victim terminating with no grace period and no finalizer counts as still there: the API
        server removes it right after marking it, and its DELETED event is on its way (upstream's
        window between the two is a few milliseconds, where the watch here may show other
        pods' deletions, each bringing the pod back to a cycle that sees the victim and says
        "not eligible due to a terminating pod on the nominated node.")."""
        if uid not in self.preempting:
            return False
        last = self.last_victims.get(uid)
        if last is None:
            return True  # the victims but the last are being deleted
        victim = self.handle.assigned_pod(last)
        if victim is not None and (not victim.is_terminating or _removed_at_once(victim)):
            return True
        if uid not in self._calling:
            self.preempting.discard(uid)
            self.last_victims.pop(uid, None)
        return False

    async def _preempt(self, candidate: Candidate, pod: PodInfo, victims: list[PodInfo],
                       lower: list[PodInfo]) -> None:
        """The victims but the last deleted concurrently (at most PARALLELISM at a time), then
        the last one, as upstream: the pod's PreEnqueue watches that last victim alone. An API
        error, or a last victim preempted in memory (no deletion event will come), activates
        the pod, which could otherwise wait forever."""
        client = self.handle.client
        failed = in_memory = last_deleted = False
        try:
            for other in lower:
                try:
                    await client.patch_pod_status(pod=other.pod, nominated_node_name="")
                except NotFoundError:
                    pass
                except Exception as exc:  # not critical: the pod is retried anyway
                    logger.warning("cannot clear nominatedNodeName of %s: %s", other.key, exc)
            if len(victims) > 1:
                failures = await in_parallel(victims[:-1], lambda victim: self.preempt_pod(candidate, pod, victim),
                                             PARALLELISM)
                for victim, error in failures:
                    failed = True
                    logger.error("preempting %s for %s on %s failed: %s", victim.key, pod.key, candidate.name, error)
            if not failed:  # after a failure the pod is retried at once, without the last call
                last = victims[-1]
                self.last_victims[pod.uid] = last.uid
                try:
                    in_memory = await self.preempt_pod(candidate, pod, last)
                    last_deleted = not in_memory and last.uid in self.deleted_victims
                except Exception as exc:
                    failed = True
                    logger.error("preempting %s for %s on %s failed: %s", last.key, pod.key, candidate.name, exc)
        finally:
            self._calling.discard(pod.uid)
            if not last_deleted or not self.is_pod_running_preemption(pod.uid):
                self.preempting.discard(pod.uid)
                self.last_victims.pop(pod.uid, None)
        if failed or in_memory:
            self.handle.activate([pod])

    async def preempt_pod(self, candidate: Candidate, preemptor: PodInfo, victim: PodInfo) -> bool:
        """Reject a victim waiting at Permit (True: preempted in memory), or mark it
        DisruptionTarget and delete it; then post the Preempted event. False too when the
        victim was gone already (no event then)."""
        waiting = self.handle.waiting_pods.get(victim.uid)
        in_memory = waiting is not None
        if waiting is not None:
            waiting.reject(self.plugin_name, "preempted")
        else:
            wanted = {
                "type": DISRUPTION_TARGET, "status": "True", "reason": REASON_PREEMPTION_BY_SCHEDULER,
                "message": f"{preemptor.scheduler_name}: preempting to accommodate a higher priority pod",
                "lastTransitionTime": self.wall_clock(),
            }
            # Upstream's UpdatePodCondition: no patch when the victim has the condition already.
            condition = None if _has_condition(victim, wanted) else wanted
            deleted = self.deleted_victims
            deleted[victim.uid] = None
            if len(deleted) > DELETED_MEMORY:
                deleted.popitem(last=False)
            try:
                await self.handle.client.delete_pod(pod=victim.pod, condition=condition)
            except NotFoundError:
                return False  # already gone
            except BaseException:
                deleted.pop(victim.uid, None)  # a later preemption may try again
                raise
        fwk = self.handle.framework
        try:
            await self.handle.client.record_event(
                regarding=victim.pod, type="Normal", reason="Preempted", action="Preempting",
                message=f"Preempted by pod {preemptor.uid} on node {candidate.name}",
                reporting_controller=fwk.profile_name if fwk is not None else self.plugin_name)
        except Exception as exc:  # an event is informational only
            logger.warning("failed to record the Preempted event for %s: %s", victim.key, exc)
        return in_memory


async def in_parallel(items: Sequence[_T], call: Callable[[_T], Awaitable[Any]],
                      limit: int) -> list[tuple[_T, Exception]]:
    """`call(item)` for every item, at most `limit` at once (upstream's Parallelizer.Until); the
    items whose call raised, with the exception.

    The caller's task is the first worker; the others start only once it has suspended (on
    its first call's I/O). Calls that never suspend (the in-memory client's) so all run in the
    caller's task, in the same step, exactly as one call after another did: an offline run
    sees the same order of events, and pays for no task."""
    remaining = iter(items)
    failures: list[tuple[_T, Exception]] = []

    async def work() -> None:
        for item in remaining:  # shared by the workers: each item is called once
            try:
                await call(item)
            except Exception as exc:
                failures.append((item, exc))

    helpers: list[asyncio.Future[None]] = []

    def start_helpers() -> None:  # runs only if the caller's task suspended meanwhile
        helpers.extend(asyncio.ensure_future(work()) for _ in range(min(limit, len(items)) - 1))

    starting = asyncio.get_running_loop().call_soon(start_helpers)
    try:
        await work()
    except BaseException:
        for helper in helpers:
            helper.cancel()
        raise
    finally:
        starting.cancel()
    if helpers:
        await asyncio.gather(*helpers)
    return failures


def _removed_at_once(pod: PodInfo) -> bool:
    """Marked for deletion with no grace period and no finalizer: about to be removed."""
    meta = pod.pod.get("metadata") or {}
    return meta.get("deletionGracePeriodSeconds") == 0 and not meta.get("finalizers")


def _has_condition(pod: PodInfo, condition: dict[str, Any]) -> bool:
    """The pod has that condition already, but for its transition time."""
    for current in (pod.pod.get("status") or {}).get("conditions") or ():
        if current.get("type") == condition["type"]:
            return all(current.get(k) == condition[k] for k in ("status", "reason", "message"))
    return False


def _helpful_rows(nodes: list[NodeInfo], parts: list[RowPart], absent: Status | None) -> list[NodeInfo]:
    """nodes_where_preemption_might_help from the Filter pass's rejected rows (see
    _helpful_row_array), in node order, as the look node by node."""
    return [nodes[row] for row in _helpful_row_array(len(nodes), parts, absent).tolist()]


def _helpful_row_array(count: int, parts: list[RowPart], absent: Status | None) -> np.ndarray:
    """The rows of nodes_where_preemption_might_help, ascending, from the Filter pass's rejected
    rows: a part whose distinct statuses are all UnschedulableAndUnresolvable (or all
    Unschedulable) is judged without a look at its rows, one whose statuses know each row's
    place among the distinct ones (TalliedStatuses.of_row) by that; nodes in no part get
    `absent`."""
    unschedulable = Code.UNSCHEDULABLE
    helps = np.zeros(count, dtype=bool)
    covered = np.zeros(count, dtype=bool) if absent is not None and absent.code is unschedulable else None
    for part in parts:
        if covered is not None:
            covered[part.row_array] = True
        statuses = part.statuses
        tallied = statuses if isinstance(statuses, TalliedStatuses) else None
        of_row = tallied.of_row if tallied is not None else None
        distinct = tallied.distinct if tallied is not None and of_row is not None else part.distinct
        if distinct is None:
            distinct = list(dict(zip(map(id, statuses), statuses, strict=True)).values())
        judged = [status.code is unschedulable for status in distinct]
        if not any(judged):
            continue
        if all(judged):
            helps[part.row_array] = True
            continue
        if of_row is not None:
            each = np.array(judged, dtype=bool)[of_row]
        else:
            each = np.fromiter((status.code is unschedulable for status in statuses), dtype=bool,
                               count=len(statuses))
        helps[part.row_array[each]] = True
    if covered is not None:
        helps |= ~covered
    return np.flatnonzero(helps)


def _nominated_node_name(pod: PodInfo) -> str:
    return (pod.pod.get("status") or {}).get("nominatedNodeName") or ""
