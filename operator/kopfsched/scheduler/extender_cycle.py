"""The scheduling cycle of a profile that calls HTTP extenders.

A profile without extenders keeps the synchronous cycle (`Scheduler.schedule_one`): it
never awaits, so the cache cannot change under it. Extender calls are HTTP, so a profile
with extenders runs this cycle instead, from the same single scheduling task. It awaits
only at the extender calls and, around them:

- keeps holding the cycle: the scheduling task is the only one that pops pods, so no
  other pod is scheduled (or assumed) meanwhile; watch events and binding tasks run;
- never carries snapshot row numbers across an await — the snapshot shares NodeInfo
  objects with the cache, so after each await it refreshes the snapshot and goes on by
  node name (a node deleted meanwhile drops out);
- before assuming, runs the Filter plugins again on the chosen node against the current
  cache, so a pod placed there by someone else while the extenders answered cannot
  overcommit it. Should the node no longer fit, the whole cycle runs once more; if it
  fails again the pod fails with that node's status (as a Reserve rejection would).

The order is upstream's (schedule_one.go): PreFilter and Filter plugins, then the filter
extenders one after another on the shrinking list, then PreScore/Score on what is left,
plus each interested prioritize extender's `score * weight * (MaxNodeScore /
MaxExtenderPriority)` (those are called concurrently, and their errors ignored), then the
best node. Extender rejections are recorded as node statuses of the pseudo plugin
"Extender", which any cluster event requeues.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from kopfsched.framework.cycle_state import CycleState
from kopfsched.framework.diagnosis import ERR_NO_NODES_AVAILABLE, Diagnosis, FitError
from kopfsched.framework.runtime import Framework
from kopfsched.framework.status import Code, Status
from kopfsched.framework.types import NodeInfo, PodInfo
from kopfsched.scheduler.extender import (
    EXTENDER_NAME,
    MAX_EXTENDER_PRIORITY,
    MAX_NODE_SCORE,
    ExtenderError,
    HTTPExtender,
)
from kopfsched.scheduler.schedule_one import ScheduleResult, SchedulingAlgorithm, SchedulingError

if TYPE_CHECKING:
    from kopfsched.framework.queued import QueuedPodInfo
    from kopfsched.scheduler.scheduler import Scheduler

logger = logging.getLogger(__name__)

MAX_CYCLE_ATTEMPTS = 2
"""Runs of the cycle when the chosen node stopped fitting while the extenders answered."""


async def schedule_one_with_extenders(sched: Scheduler, qpi: QueuedPodInfo,
                                      extenders: Sequence[HTTPExtender]) -> None:
    """`Scheduler.schedule_one` with the extender calls awaited in the middle."""
    from kopfsched.scheduler.scheduler import _single_node_failure

    pod = qpi.pod_info
    fwk = sched.framework_for(pod)
    if fwk is None or pod.is_terminating or sched.cache.is_assumed(pod.uid):
        sched.queue.done(pod.uid)
        return
    start = sched.clock()
    for _ in range(MAX_CYCLE_ATTEMPTS):
        state = CycleState()
        try:
            result = await schedule_pod_with_extenders(sched.algorithm, fwk, state, pod, extenders)
        except FitError as fit:
            sched.cache.update_snapshot(sched.snapshot)  # preemption looks at the cluster as it is now
            nominated, victims = sched._run_post_filter(fwk, state, pod, fit)
            sched._fail(fwk, qpi, fit, start, nominated_node=nominated, victims=victims)
            return
        except SchedulingError as err:
            sched._fail(fwk, qpi, err.status, start)
            return
        host = result.suggested_host
        status = _recheck_host(sched, fwk, state, pod, host)
        if status is None:
            sched._assume_and_bind(fwk, state, qpi, result, start, extenders=extenders)
            return
        logger.info("node %s stopped fitting pod %s while extenders answered: %s", host, pod.key, status.message)
    sched._fail(fwk, qpi, _single_node_failure(pod, host, status), start, result=result)


def _recheck_host(sched: Scheduler, fwk: Framework, state: CycleState, pod: PodInfo, host: str) -> Status | None:
    """The Filter plugins again on the chosen node, as the cache is after the awaits."""
    sched.cache.update_snapshot(sched.snapshot)
    node = sched.snapshot.get(host)
    if node is None or node.node is None:
        return Status.unresolvable(f'nodeinfo not found for node name "{host}"')
    if not fwk.has_filter_plugins():
        return None
    return fwk.run_filter_plugins_with_nominated_pods(state, pod, node)


async def schedule_pod_with_extenders(algorithm: SchedulingAlgorithm, fwk: Framework, state: CycleState,
                                      pod: PodInfo, extenders: Sequence[HTTPExtender]) -> ScheduleResult:
    """SchedulingAlgorithm.schedule_pod plus the extenders. Raises FitError or SchedulingError."""
    cache, snapshot = algorithm.cache, algorithm.snapshot
    cache.update_snapshot(snapshot)
    num_nodes = snapshot.num_nodes()
    if num_nodes == 0:
        raise SchedulingError(Status.unresolvable(ERR_NO_NODES_AVAILABLE))
    rows, diagnosis = algorithm.find_nodes_that_fit_pod(fwk, state, pod)
    feasible = [snapshot.table.nodes[r] for r in rows.tolist()]
    filters = [e for e in extenders if e.is_filter() and e.is_interested(pod)]
    if feasible and filters:
        feasible = await find_nodes_that_pass_extenders(filters, pod, feasible, diagnosis)
        cache.update_snapshot(snapshot)
        feasible = [node for node in (snapshot.get(n.name) for n in feasible) if node is not None and node.node]
    if not feasible:
        raise FitError(pod_key=pod.key, num_all_nodes=num_nodes, diagnosis=diagnosis)
    evaluated = len(feasible) + len(diagnosis.node_to_status)
    if len(feasible) == 1:
        return ScheduleResult(feasible[0].name, evaluated, 1, diagnosis)
    names = [node.name for node in feasible]
    index = snapshot.table.index
    totals, per_plugin = algorithm.prioritize_nodes(fwk, state, pod, np.array([index[n] for n in names],
                                                                               dtype=np.int64))
    totals = totals.astype(np.int64, copy=True)
    prioritizers = [e for e in extenders if e.is_prioritizer() and e.is_interested(pod)]
    if prioritizers:
        for extender, scores in await prioritize_with_extenders(prioritizers, pod, feasible):
            column = np.array([scores.get(host, 0) for host in names], dtype=np.int64)
            totals += column * extender.weight
            per_plugin[extender.name] = per_plugin[extender.name] + column if extender.name in per_plugin else column
    best = algorithm.select_host(totals)
    result = ScheduleResult(names[best], evaluated, len(feasible), diagnosis)
    if algorithm.explain:
        result.scores = {host: {**{p: int(s[i]) for p, s in per_plugin.items()}, "total": int(totals[i])}
                         for i, host in enumerate(names)}
    return result


async def find_nodes_that_pass_extenders(extenders: Sequence[HTTPExtender], pod: PodInfo,
                                         nodes: list[NodeInfo], diagnosis: Diagnosis) -> list[NodeInfo]:
    """Upstream's findNodesThatPassExtenders: sequential calls on a shrinking list; failed
    nodes get Unschedulable (or UnschedulableAndUnresolvable, which wins) statuses."""
    statuses = diagnosis.node_to_status.statuses
    for extender in extenders:
        if not nodes:
            break
        try:
            result = await extender.filter(pod, nodes)
        except ExtenderError as error:
            if extender.is_ignorable():
                logger.info("skipping extender %s as it returned error and has ignorable flag set: %s",
                            extender.name, error)
                continue
            raise SchedulingError(Status.as_error(str(error))) from error
        for name, message in result.failed_and_unresolvable.items():
            statuses[name] = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (message,), EXTENDER_NAME)
        for name, message in result.failed.items():
            if name not in result.failed_and_unresolvable:
                statuses[name] = Status(Code.UNSCHEDULABLE, (message,), EXTENDER_NAME)
        by_name = {node.name: node for node in nodes}
        kept = [by_name[name] for name in result.node_names]
        if len(kept) != len(nodes):
            # Extenders register no events: any cluster event may help the pod (as upstream).
            diagnosis.unschedulable_plugins.add(EXTENDER_NAME)
        nodes = kept
    return nodes


async def prioritize_with_extenders(extenders: Sequence[HTTPExtender], pod: PodInfo,
                                    nodes: Sequence[NodeInfo]) -> list[tuple[HTTPExtender, dict[str, int]]]:
    """(extender, host → score scaled to 0..100, weight not yet applied) for each extender
    that answered. Called concurrently; one that fails gives no scores (as upstream)."""
    answers = await asyncio.gather(*(e.prioritize(pod, nodes) for e in extenders), return_exceptions=True)
    scale = MAX_NODE_SCORE // MAX_EXTENDER_PRIORITY
    out: list[tuple[HTTPExtender, dict[str, int]]] = []
    for extender, answer in zip(extenders, answers, strict=True):
        if isinstance(answer, BaseException):
            if not isinstance(answer, ExtenderError):
                raise answer
            logger.debug("extender %s failed to prioritize pod %s: %s", extender.name, pod.key, answer)
            continue
        scores: dict[str, int] = {}
        for host, score in answer:
            scores[host] = scores.get(host, 0) + score * scale
        out.append((extender, scores))
    return out


async def extenders_binding(extenders: Sequence[HTTPExtender], pod: PodInfo, node: str) -> tuple[bool, Status | None]:
    """(bound, status): the first interested binder extender binds; an ignorable one that
    fails lets the next binder (or the Bind plugins) try."""
    for extender in extenders:
        if not extender.is_binder() or not extender.is_interested(pod):
            continue
        try:
            await extender.bind(pod, node)
        except ExtenderError as error:
            if extender.is_ignorable():
                logger.info("skipping extender %s in bind as it returned error and has ignorable flag set: %s",
                            extender.name, error)
                continue
            return True, Status.as_error(str(error))
        return True, None
    return False, None
