"""The scheduling algorithm of one cycle: find the nodes that fit, score them, pick one.

As upstream's schedule_one.go: PreFilter (which may narrow the nodes), the pod's
nominated node tried alone first, Filter over the nodes in a rotating order that stops
once enough feasible nodes were found (percentageOfNodesToScore; one is enough when
nothing scores and no extender filters), the filter extenders one after another on the
shrinking list (findNodesThatPassExtenders), PreScore, Score, NormalizeScore times
weight plus each interested prioritize extender's `score * weight * (MaxNodeScore /
MaxExtenderPriority)` (prioritizeNodes), and a random choice among the best. The Filter
and Score loops run over NodeTable rows, so plugins with vectorised methods judge all
nodes at once.

The cycle is a coroutine, but it suspends only at the HTTP extender calls: a profile
without extenders runs it from start to end without yielding to the event loop, so the
cache cannot change under it. Around an extender call it never carries snapshot rows
across the await (the snapshot shares NodeInfo objects with the cache): it refreshes the
snapshot and goes on by node name, so a node deleted meanwhile drops out.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import cast, overload

import numpy as np

try:  # numpy's C function, without np.count_nonzero's Python dispatch
    from numpy._core.multiarray import count_nonzero
except ImportError:  # numpy < 2
    from numpy.core.multiarray import count_nonzero  # type: ignore[no-redef]

from kopfsched.cache.cache import Cache
from kopfsched.cache.snapshot import Snapshot
from kopfsched.framework.cycle_state import CycleState
from kopfsched.framework.diagnosis import ERR_NO_NODES_AVAILABLE, Diagnosis, FitError
from kopfsched.framework.interface import RowPart
from kopfsched.framework.node_table import NodeTable, WhatIfTable
from kopfsched.framework.rows import Deferred, deferred_rejections
from kopfsched.framework.runtime import Framework
from kopfsched.framework.status import Code, Status
from kopfsched.framework.types import NodeInfo, PodInfo
from kopfsched.scheduler.batch import OpportunisticBatch
from kopfsched.scheduler.extender import (
    EXTENDER_NAME,
    MAX_EXTENDER_PRIORITY,
    MAX_NODE_SCORE,
    ExtenderError,
    HTTPExtender,
)

logger = logging.getLogger(__name__)

MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5


class SchedulingError(Exception):
    """The cycle failed for a reason other than "no node fits" (a plugin error, no nodes)."""

    def __init__(self, status: Status) -> None:
        super().__init__(status.message)
        self.status = status


@dataclass(slots=True)
class ScheduleResult:
    suggested_host: str
    evaluated_nodes: int
    feasible_nodes: int
    diagnosis: Diagnosis
    scores: dict[str, dict[str, int]] | None = None
    """With explain: node -> {plugin: normalized score, "total": weighted sum}."""


def num_feasible_nodes_to_find(percentage: int, num_all_nodes: int) -> int:
    """How many feasible nodes to look for before scoring (upstream's adaptive rule)."""
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND:
        return num_all_nodes
    if percentage == 0:
        percentage = max(50 - num_all_nodes // 125, MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND)
    return max(num_all_nodes * percentage // 100, MIN_FEASIBLE_NODES_TO_FIND)


class SchedulingAlgorithm:
    """Holds what persists between cycles: the snapshot and the rotating start index."""

    def __init__(self, *, cache: Cache, snapshot: Snapshot, rng: random.Random,
                 percentage_of_nodes_to_score: int = 0, explain: bool = False,
                 batching: bool = False, clock: Callable[[], float] = time.monotonic) -> None:
        self.cache = cache
        self.batching = batching
        """OpportunisticBatching: a signed pod may take the previous pod's next node (batch.py)."""
        self.clock = clock
        self._batches: dict[str, OpportunisticBatch] = {}
        self.snapshot = snapshot
        self.rng = rng
        self.percentage_of_nodes_to_score = percentage_of_nodes_to_score
        self.next_start_node_index = 0
        self.explain = explain
        self._names: list[str] = []
        self._twice = np.zeros(0, dtype=np.int64)
        self._all = self._twice
        self._names_of: object = None
        self._objects = np.empty(0, dtype=object)
        self._objects_of: object = None
        self._deferred: list[Deferred] = []
        """The batch rejections the last pass without reasons left out (rows.deferred_statuses)."""
        self._examined: np.ndarray = np.empty(0, dtype=np.int64)
        """The rows the last find_nodes_that_pass_filters examined, in order."""
        self._hit_rate = 1.0
        """The share of the nodes examined that passed, in the last pass over many nodes: what
        the first chunk of the next one is sized by (pods of a cluster tend to repeat)."""
        self._marked: tuple[object, object, np.ndarray] | None = None
        """(the nominator's node-name list, the table, its rows marked) for _nominated_positions."""

    def batched_pods(self) -> int:
        """Pods OpportunisticBatching placed on a hint, over every profile."""
        return sum(batch.batched_pods for batch in self._batches.values())

    async def schedule_pod(self, fwk: Framework, state: CycleState, pod: PodInfo, *,
                           extenders: Sequence[HTTPExtender] = (), exhaustive: bool = False,
                           cycle: int | None = None) -> ScheduleResult:
        """Raises FitError when no node fits and SchedulingError on errors.

        `exhaustive` (kopfsched explain): every node is filtered, in snapshot order, with no
        nominated-node shortcut and no percentageOfNodesToScore sampling; every feasible node
        is scored, even a single one; scores are kept; the rotating start index stays put.
        `cycle`: the queue's scheduling cycle, for OpportunisticBatching (None: no batching)."""
        self.cache.update_snapshot(self.snapshot)
        num_nodes = self.snapshot.num_nodes()
        if num_nodes == 0:
            raise SchedulingError(Status.unresolvable(ERR_NO_NODES_AVAILABLE))
        batch = None
        signature = None
        if self.batching and cycle is not None and not exhaustive and not extenders and fwk.signs_pods():
            batch = self._batches.get(fwk.profile_name)
            if batch is None:
                batch = self._batches[fwk.profile_name] = OpportunisticBatch(clock=self.clock, rng=self.rng)
            signature = fwk.sign_pod(pod)
        feasible, diagnosis = await self.find_nodes_that_fit_pod(fwk, state, pod, extenders=extenders,
                                                                 exhaustive=exhaustive, batch=batch,
                                                                 signature=signature, cycle=cycle)
        nodes = self.snapshot.table.nodes
        if not len(feasible):
            raise FitError(pod_key=pod.key, num_all_nodes=num_nodes, diagnosis=diagnosis)
        evaluated = len(feasible) + len(diagnosis.node_to_status)
        if len(feasible) == 1 and not exhaustive:
            chosen = nodes[int(feasible[0])].name
            if batch is not None:
                batch.store(signature, chosen, cast(int, cycle))
            return ScheduleResult(chosen, evaluated, 1, diagnosis)
        raw: dict[str, np.ndarray] | None = {} if batch is not None and signature is not None else None
        totals, per_plugin = await self.prioritize_nodes(fwk, state, pod, feasible, extenders=extenders, raw=raw)
        best = self.select_host(totals)
        result = ScheduleResult(nodes[int(feasible[best])].name, evaluated, len(feasible), diagnosis)
        if batch is not None:
            names = self._row_names()
            batch.store(signature, result.suggested_host, cast(int, cycle),
                        names=[names[row] for row in feasible.tolist()], totals=totals, raw=raw, best=best)
        if self.explain or exhaustive:
            result.scores = _explain_scores(nodes, feasible, totals, per_plugin)
        return result

    async def find_nodes_that_fit_pod(self, fwk: Framework, state: CycleState, pod: PodInfo, *,
                                      extenders: Sequence[HTTPExtender] = (), exhaustive: bool = False,
                                      batch: OpportunisticBatch | None = None, signature: str | None = None,
                                      cycle: int | None = None) -> tuple[np.ndarray, Diagnosis]:
        diagnosis = Diagnosis()
        all_nodes = self.snapshot.node_infos()
        pre_result, status, narrowing = fwk.run_pre_filter_plugins(state, pod, all_nodes)
        # As upstream, the plugins that narrowed the nodes are rejectors too: their events
        # (a node that now matches) must be able to bring the pod back.
        diagnosis.unschedulable_plugins.update(narrowing)
        if status is not None:
            if not status.is_rejection:
                raise SchedulingError(status)
            diagnosis.node_to_status.absent = status
            diagnosis.pre_filter_msg = status.message
            diagnosis.add_plugin_status(status)
            return np.empty(0, dtype=np.int64), diagnosis
        index = self.snapshot.table.index
        nominated = (pod.pod.get("status") or {}).get("nominatedNodeName")
        hint = batch.node_hint(fwk, state, pod, signature, cast(int, cycle), self.snapshot) \
            if batch is not None else ""
        # The nominated node, else the batch's hint, is tried alone first (upstream's
        # evaluateNominatedNode).
        first = nominated or hint
        if first and first in index and not exhaustive:
            feasible, _ = self.find_nodes_that_pass_filters(
                fwk, state, pod, diagnosis, np.array([index[first]], dtype=np.int64), extenders=extenders)
            if len(feasible) and extenders:
                feasible = await self.find_nodes_that_pass_extenders(extenders, pod, feasible, diagnosis)
            if len(feasible):
                return feasible, diagnosis
        if pre_result is not None and pre_result.node_names is not None:
            rows = np.array(sorted(index[n] for n in pre_result.node_names if n in index), dtype=np.int64)
            absent = Status.unresolvable(f"node(s) didn't satisfy plugin(s) [{' '.join(sorted(narrowing))}]")
            diagnosis.node_to_status.absent = absent.with_plugin(", ".join(sorted(narrowing)))
        else:
            rows = self._all_rows(len(all_nodes))
        # A pod that lands somewhere needs no reasons for the nodes it skipped (unless they are
        # shown): filter for the masks alone, and only when no node fits build every node's
        # exact Status from what the batch plugins rejected (same cycle: same state and table).
        reasons = self.explain or exhaustive or bool(extenders)
        feasible, processed = self.find_nodes_that_pass_filters(fwk, state, pod, diagnosis, rows,
                                                                extenders=extenders, exhaustive=exhaustive,
                                                                reasons=reasons)
        if not reasons:
            if not len(feasible):
                self._record_deferred(state, pod, diagnosis)
            else:  # upstream's len(feasible) + NodeToStatus.Len(): every node examined, and the
                # nominated (or hinted) node when it failed before and the pass did not reach it
                first_row = index.get(first) if first else None
                missed = first_row is not None and first in diagnosis.node_to_status.statuses and \
                    not count_nonzero(self._examined == first_row)
                diagnosis.evaluated_nodes = processed + missed
        if not exhaustive:
            # As upstream: advance over all the snapshot's nodes, whatever subset was filtered, and
            # only here (the nominated node alone does not move the start).
            self.next_start_node_index = (self.next_start_node_index + processed) % len(all_nodes)
        if len(feasible) and extenders:
            feasible = await self.find_nodes_that_pass_extenders(extenders, pod, feasible, diagnosis)
        return feasible, diagnosis

    async def find_nodes_that_pass_extenders(self, extenders: Sequence[HTTPExtender], pod: PodInfo,
                                             rows: np.ndarray, diagnosis: Diagnosis) -> np.ndarray:
        """Upstream's findNodesThatPassExtenders: the interested filter extenders called one
        after another on a shrinking list; failed nodes get Unschedulable (or
        UnschedulableAndUnresolvable, which wins) statuses of the pseudo plugin "Extender",
        which any cluster event requeues. Returns rows of the snapshot as it is afterwards."""
        filters = [e for e in extenders if e.is_filter() and e.is_interested(pod)]
        if not filters:
            return rows
        table = self.snapshot.table
        nodes = [table.nodes[r] for r in rows.tolist()]
        statuses = diagnosis.node_to_status.statuses
        for extender in filters:
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
        # The cache moved on while the extenders answered: go on with the nodes still there.
        self.cache.update_snapshot(self.snapshot)
        index = self.snapshot.table.index
        return np.array([index[n.name] for n in nodes if n.name in index], dtype=np.int64)

    def find_nodes_that_pass_filters(self, fwk: Framework, state: CycleState, pod: PodInfo,
                                     diagnosis: Diagnosis, rows: np.ndarray, *,
                                     extenders: Sequence[HTTPExtender] = (),
                                     exhaustive: bool = False, reasons: bool = True) -> tuple[np.ndarray, int]:
        """(feasible rows, how many nodes were examined), starting at the rotating start index.
        `reasons=False`: the rejections of batch Filter plugins are not recorded in `diagnosis`
        but kept in `_deferred` (the examined rows in `_examined`)."""
        num_all = len(rows)
        self._examined = rows[:0]
        self._deferred = []
        if num_all == 0:
            return rows, 0
        percentage = fwk.percentage_of_nodes_to_score
        if percentage is None:
            percentage = self.percentage_of_nodes_to_score
        if exhaustive:
            to_find = num_all
        elif not _has_scoring(fwk, extenders) and not any(e.is_filter() for e in extenders):
            to_find = 1  # as upstream: without scoring, the first feasible node is as good as any
        else:
            to_find = num_feasible_nodes_to_find(percentage, num_all)
        start = 0 if exhaustive else self.next_start_node_index % num_all
        if not start:
            order = rows
        elif rows is self._all:
            order = self._twice[start:start + num_all]  # every node, rotated: a view, no copy
        else:
            order = np.concatenate((rows[start:], rows[:start]))  # np.roll, cheaper
        if not fwk.has_filter_plugins():
            return order[:to_find], to_find
        found: list[np.ndarray] = []
        count = 0
        processed = 0
        names = self._row_names()
        nominator = fwk.handle.nominator
        while processed < num_all and count < to_find:
            chunk = order[processed:processed + _chunk_size(to_find - count, count, processed, self._hit_rate)]
            mask, rejected = self._filter_chunk(fwk, state, pod, chunk, nominator,
                                                None if reasons else self._deferred)
            needed = to_find - count
            if not rejected and count_nonzero(mask) == len(chunk):
                # Every node passed (the usual chunk): the first `needed` of them, as a view.
                take = min(needed, len(chunk))
                processed += take
                found.append(chunk[:take])
                count += take
                continue
            positions = mask.nonzero()[0]
            if len(positions) >= needed:
                last = int(positions[needed - 1])
                positions = positions[:needed]
                if rejected:
                    kept = set(chunk[: last + 1].tolist())
                    rejected = {r: s for r, s in rejected.items() if r in kept}
                processed += last + 1
            else:
                processed += len(chunk)
            # Rejections share Status objects (one per distinct answer): judge each once. The
            # per-node work is left to C (map, zip, dict.update): thousands of nodes may fail.
            statuses = rejected.values()
            distinct = dict(zip(map(id, statuses), statuses, strict=True))
            diagnosis.node_to_status.statuses.update(zip(map(names.__getitem__, rejected), statuses, strict=True))
            for status in distinct.values():
                if status.code is Code.ERROR:
                    raise SchedulingError(status)
                diagnosis.add_plugin_status(status)
            found.append(chunk[positions])
            count += len(positions)
        self._examined = order[:processed]
        if processed >= _MIN_CHUNK:
            self._hit_rate = count / processed
        if count == processed:  # every node examined passed: they are order's first ones, as a view
            return order[:processed], processed
        return (np.concatenate(found) if found else rows[:0]), processed

    def _record_deferred(self, state: CycleState, pod: PodInfo, diagnosis: Diagnosis) -> None:
        """The statuses of the batch rejections the pass left out, into `diagnosis`; with
        their tally (Diagnosis.tally) when every plugin counted its own and no status was
        recorded before (each row is rejected once, so the counts add up)."""
        names = self._row_names()
        node_to_status = diagnosis.node_to_status
        # Nothing recorded before: the rows go in as they are (disjoint: each row is rejected
        # once), the name -> Status dict built only if someone reads it.
        as_rows = not len(node_to_status)
        tally: dict[int, list] | None = {} if as_rows else None
        nodes = self.snapshot.table.nodes
        for entry in self._deferred:
            rows, rejected, counted = deferred_rejections(entry, state, pod, listed=False)
            if as_rows:  # the rows as an array: a list of them only if the name -> Status dict is built
                row_array = rows if isinstance(rows, np.ndarray) else np.asarray(rows, dtype=np.int64)
                node_to_status.add_rows(RowPart(nodes, names, None, row_array, rejected,
                                                None if counted is None else [status for status, _ in counted]))
            else:
                listed = rows.tolist() if isinstance(rows, np.ndarray) else rows
                node_to_status.statuses.update(zip(map(names.__getitem__, listed), rejected, strict=True))
            if counted is None:
                # Rejections share Status objects: judge each distinct one once, found in C.
                distinct = list(dict(zip(map(id, rejected), rejected, strict=True)).values())
                tally = None
            else:
                distinct = [status for status, _ in counted]
                if tally is not None:
                    for status, times in counted:
                        held = tally.get(id(status))
                        if held is None:
                            tally[id(status)] = [status, times]
                        else:
                            held[1] += times
            for status in distinct:
                if status.code is Code.ERROR:
                    raise SchedulingError(status)
                diagnosis.add_plugin_status(status)
        if tally is not None:
            diagnosis.tally = [(status, times) for status, times in tally.values()]
        self._deferred = []

    def _all_rows(self, count: int) -> np.ndarray:
        """np.arange(count) as a read-only view of 0..count-1 twice over, which any rotation
        of it is a view of too (see find_nodes_that_pass_filters)."""
        if len(self._twice) != 2 * count:
            twice = np.arange(2 * count, dtype=np.int64) % max(count, 1)
            twice.flags.writeable = False
            self._twice = twice
            self._all = twice[:count]
        return self._all

    def _node_objects(self) -> np.ndarray:
        """The snapshot's NodeInfo objects by row in an object array (kept until the table is
        rebuilt): any selection of rows is then one fancy index and a tolist, in C."""
        table = self.snapshot.table
        if self._objects_of is not table:
            objects = np.empty(len(table.nodes), dtype=object)
            objects[:] = table.nodes
            self._objects, self._objects_of = objects, table
        return self._objects

    def _row_names(self) -> list[str]:
        """The snapshot's node names by row (kept until the table is rebuilt)."""
        table = self.snapshot.table
        if self._names_of is not table:
            self._names = [node.name for node in table.nodes]
            self._names_of = table
        return self._names

    def _filter_chunk(self, fwk: Framework, state: CycleState, pod: PodInfo, chunk: np.ndarray,
                      nominator, deferred: list[Deferred] | None = None) -> tuple[np.ndarray, dict]:
        """Vectorised filtering, except for nodes with nominated pods that Filter must count
        (two passes, per node). A node whose nominated pods are all less important than `pod`
        (or `pod` itself) is filtered as it is, so it stays on the vectorised path."""
        if not _has_nominated_pods(nominator):
            return fwk.run_filter_plugins_on_rows(state, pod, self.snapshot.table, chunk,
                                                  reasons=deferred is None, deferred=deferred)
        nodes = self.snapshot.table.nodes
        counted: dict[int, list[PodInfo]] = {}  # position in chunk -> nominated pods to count there
        by_node = nominator.pods_to_count(pod)  # every node at once, kept by the nominator
        if not by_node:
            return fwk.run_filter_plugins_on_rows(state, pod, self.snapshot.table, chunk,
                                                  reasons=deferred is None, deferred=deferred)
        slow_rows: dict[int, int] = {}  # row -> its position in chunk, for the rows in `counted`
        positions = self._nominated_positions(chunk, nominator)
        for pos, row in zip(positions, chunk[positions].tolist(), strict=True):
            others = by_node.get(nodes[row].name)
            if others:
                counted[pos] = others
                slow_rows[row] = pos
        if not counted:
            return fwk.run_filter_plugins_on_rows(state, pod, self.snapshot.table, chunk,
                                                  reasons=deferred is None, deferred=deferred)
        # Upstream's first pass (with the nominated pods) goes first on the slow rows, node by
        # node or in one what-if call; a node it rejects gets that status and no second pass,
        # so a later plugin's Error on it (e.g. DRA's "currently being updated") never happens.
        # The vectorised pass over the other rows is the slow rows' second pass too.
        if fwk.has_active_pre_filter_extensions(state):
            firsts = [fwk.run_filter_plugins_first_pass(state, pod, nodes[row], nominated=counted[pos])
                      for row, pos in slow_rows.items()]
        else:  # no node needs state of its own: every first pass in one vectorised call
            with_nominated = WhatIfTable(self.snapshot.table, np.fromiter(slow_rows, dtype=np.int64),
                                         added=[counted[pos] for pos in slow_rows.values()])
            firsts = fwk.run_filter_plugins_what_if(state.clone(), pod, with_nominated)
        first_rejected = {pos: status for pos, status in zip(slow_rows.values(), firsts, strict=True)
                          if status is not None}
        if not first_rejected:
            return fwk.run_filter_plugins_on_rows(state, pod, self.snapshot.table, chunk)
        second = np.ones(len(chunk), dtype=bool)
        second[list(first_rejected)] = False
        passed, rejected = fwk.run_filter_plugins_on_rows(state, pod, self.snapshot.table, chunk[second])
        mask = np.zeros(len(chunk), dtype=bool)
        mask[second] = passed
        for pos, status in first_rejected.items():
            rejected[int(chunk[pos])] = status
        return mask, rejected

    def _nominated_positions(self, chunk: np.ndarray, nominator) -> list[int]:
        """Positions in `chunk` of the nodes with nominated pods: from the nominator's few
        nodes when it can list them, else asked node by node."""
        names = getattr(nominator, "nominated_node_names", None)
        nodes = self.snapshot.table.nodes
        if names is None:
            return [pos for pos, row in enumerate(chunk.tolist())
                    if nominator.nominated_pods_for_node(nodes[row].name)]
        # The nominator keeps its list until a node gains or loses its nominations, the snapshot
        # its table until the node set changes: the marked rows are kept as long as both.
        listed, table = names(), self.snapshot.table
        cached = self._marked
        if cached is not None and cached[0] is listed and cached[1] is table:
            marked = cached[2]
        else:
            index = table.index
            marked = np.zeros(len(nodes), dtype=bool)
            marked[[index[name] for name in listed if name in index]] = True
            self._marked = (listed, table, marked)
        return np.flatnonzero(marked[chunk]).tolist()

    async def prioritize_nodes(self, fwk: Framework, state: CycleState, pod: PodInfo, feasible: np.ndarray, *,
                               extenders: Sequence[HTTPExtender] = (), raw: dict[str, np.ndarray] | None = None,
                               ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """(total per feasible row, score per plugin and extender): PreScore, Score plugins,
        then the interested prioritize extenders (called concurrently; one that fails
        gives no scores, as upstream)."""
        if fwk.has_score_plugins():
            # The feasible nodes as a list only if a PreScore plugin reads them (PodTopologySpread
            # with constraints): building it is a pass over some 600 rows per pod.
            nodes = self.snapshot.table.nodes
            status = fwk.run_pre_score_plugins(state, pod, LazyNodes(
                len(feasible), lambda: _nodes_of(nodes, feasible, self._twice, self._node_objects),
                rows_of=(self.snapshot.table, feasible)))
            if status is not None:
                raise SchedulingError(status)
            totals, per_plugin, status = fwk.run_score_plugins_on_rows(state, pod, self.snapshot.table, feasible,
                                                                       raw=raw)
            if status is not None:
                raise SchedulingError(status)
        else:
            totals, per_plugin = np.ones(len(feasible), dtype=np.int64), {}
        prioritizers = [e for e in extenders if e.is_prioritizer() and e.is_interested(pod)]
        if not prioritizers:
            return totals, per_plugin
        nodes = [self.snapshot.table.nodes[r] for r in feasible.tolist()]
        names = [node.name for node in nodes]
        totals = totals.astype(np.int64, copy=True)
        answers = await asyncio.gather(*(e.prioritize(pod, nodes) for e in prioritizers), return_exceptions=True)
        scale = MAX_NODE_SCORE // MAX_EXTENDER_PRIORITY
        for extender, answer in zip(prioritizers, answers, strict=True):
            if isinstance(answer, BaseException):
                if not isinstance(answer, ExtenderError):
                    raise answer
                logger.debug("extender %s failed to prioritize pod %s: %s", extender.name, pod.key, answer)
                continue
            scores: dict[str, int] = {}
            for host, score in answer:
                scores[host] = scores.get(host, 0) + score * scale
            column = np.array([scores.get(host, 0) for host in names], dtype=np.int64)
            totals += column * extender.weight
            per_plugin[extender.name] = per_plugin[extender.name] + column if extender.name in per_plugin else column
        return totals, per_plugin

    def select_host(self, totals: np.ndarray) -> int:
        """Index of a best-scored node, chosen uniformly at random among ties."""
        best = (totals == totals[totals.argmax()]).nonzero()[0]  # the maximum, cheaper than totals.max()
        return int(best[0]) if len(best) == 1 else int(best[self.rng.randrange(len(best))])


def _has_scoring(fwk: Framework, extenders: Sequence[HTTPExtender]) -> bool:
    """Upstream's hasScoring: Score plugins or a prioritize extender."""
    return fwk.has_score_plugins() or any(e.is_prioritizer() for e in extenders)


_MIN_CHUNK = 64


def _chunk_size(needed: int, found: int, processed: int, last_rate: float = 1.0) -> int:
    """How many nodes to filter next: at first as many as the last pass's hit rate says
    should hold the nodes needed (the nodes needed themselves when every node passed, every
    node when none did), then as many as this pass's hit rate says, doubling while none was
    found; at least 64. The outcome does not depend on it: nodes filtered past the one that
    completes the count are dropped, statuses and all; only fewer, larger numpy passes (each
    costs a fixed amount per plugin) for a pod that fits few nodes."""
    if not processed:
        if last_rate >= 1.0:
            return max(needed, _MIN_CHUNK)
        if last_rate <= 0.0:
            return 1 << 62  # every node: slices stop at the end
        return max(int(needed / last_rate * 5 / 4), _MIN_CHUNK)
    if not found:
        return max(2 * processed, _MIN_CHUNK)
    return max(needed * processed // found * 5 // 4, _MIN_CHUNK)


def _nodes_of(nodes: list, rows: np.ndarray, twice: np.ndarray | None = None,
              objects: Callable[[], np.ndarray] | None = None) -> list:
    """[nodes[r] for r in rows], by slices where the rows run in steps of one (the feasible
    rows are mostly a stretch or two of the rotated node order): a slice copies a list at C
    speed, where the comprehension touches each node object. Rows that are a view of `twice`
    (0..n-1 twice over, the rotated order when every node examined passed) run in steps of
    one around the end by construction, so they need no look at all. Scattered rows (some
    nodes rejected here and there) are one fancy index of `objects()`, the nodes as an
    object array, when given."""
    count = len(rows)
    if twice is not None and rows.base is twice and len(twice) == 2 * len(nodes) and rows.strides == twice.strides:
        start = int(rows[0]) if count else 0
        wrapped = start + count - len(nodes)
        return nodes[start:start + count] + nodes[:wrapped] if wrapped > 0 else nodes[start:start + count]
    if count < 16:
        return [nodes[r] for r in rows.tolist()]
    breaks = ((rows[1:] - rows[:-1]) != 1).nonzero()[0]  # np.diff, without its Python wrapper
    if len(breaks) > count // 16:
        return objects()[rows].tolist() if objects is not None else [nodes[r] for r in rows.tolist()]
    out: list = []
    first = 0
    for end in [*(breaks + 1).tolist(), count]:
        start = int(rows[first])
        out += nodes[start:start + end - first]
        first = end
    return out


class LazyNodes(Sequence[NodeInfo]):
    """A list of nodes built on first read (its length known before)."""

    __slots__ = ("_build", "_count", "_nodes", "rows_of")

    def __init__(self, count: int, build: Callable[[], list[NodeInfo]], *,
                 rows_of: tuple[NodeTable, np.ndarray] | None = None) -> None:
        self._count = count
        self._build = build
        self._nodes: list[NodeInfo] | None = None
        self.rows_of = rows_of
        """(table, rows) when the nodes are `table.nodes[rows]`: lets a plugin read columns
        instead of building the list."""

    def _list(self) -> list[NodeInfo]:
        if self._nodes is None:
            self._nodes = self._build()
        return self._nodes

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, index: int) -> NodeInfo: ...

    @overload
    def __getitem__(self, index: slice) -> list[NodeInfo]: ...

    def __getitem__(self, index: int | slice) -> NodeInfo | list[NodeInfo]:
        return self._list()[index]

    def __iter__(self) -> Iterator[NodeInfo]:
        return iter(self._list())


def _has_nominated_pods(nominator) -> bool:
    try:
        return len(nominator) > 0
    except TypeError:  # a nominator that cannot count: check node by node
        return True


def _explain_scores(nodes, feasible: np.ndarray, totals: np.ndarray,
                    per_plugin: dict[str, np.ndarray]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for i, row in enumerate(feasible.tolist()):
        entry = {name: int(scores[i]) for name, scores in per_plugin.items()}
        entry["total"] = int(totals[i])
        out[nodes[row].name] = entry
    return out
