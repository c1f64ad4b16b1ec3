"""The scheduling algorithm of one cycle: find the nodes that fit, score them, pick one.

As upstream's schedule_one.go: PreFilter (which may narrow the nodes), the pod's
nominated node tried alone first, Filter over the nodes in a rotating order that stops
once enough feasible nodes were found (percentageOfNodesToScore), PreScore, Score,
NormalizeScore times weight, and a random choice among the best. The Filter and Score loops
run over NodeTable rows, so plugins with vectorised methods judge all nodes at once.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import numpy as np

from kopfsched.cache.cache import Cache
from kopfsched.cache.snapshot import Snapshot
from kopfsched.framework.cycle_state import CycleState
from kopfsched.framework.diagnosis import ERR_NO_NODES_AVAILABLE, Diagnosis, FitError
from kopfsched.framework.runtime import Framework
from kopfsched.framework.status import Code, Status
from kopfsched.framework.types import PodInfo

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
    extra: dict[str, object] = field(default_factory=dict)


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
                 percentage_of_nodes_to_score: int = 0, explain: bool = False) -> None:
        self.cache = cache
        self.snapshot = snapshot
        self.rng = rng
        self.percentage_of_nodes_to_score = percentage_of_nodes_to_score
        self.next_start_node_index = 0
        self.explain = explain

    def schedule_pod(self, fwk: Framework, state: CycleState, pod: PodInfo, *,
                     exhaustive: bool = False) -> ScheduleResult:
        """Raises FitError when no node fits and SchedulingError on errors.

        `exhaustive` (kopfsched explain): every node is filtered, in snapshot order, with no
        nominated-node shortcut and no percentageOfNodesToScore sampling; every feasible node
        is scored, even a single one; scores are kept; the rotating start index stays put."""
        self.cache.update_snapshot(self.snapshot)
        num_nodes = self.snapshot.num_nodes()
        if num_nodes == 0:
            raise SchedulingError(Status.unresolvable(ERR_NO_NODES_AVAILABLE))
        feasible, diagnosis = self.find_nodes_that_fit_pod(fwk, state, pod, exhaustive=exhaustive)
        nodes = self.snapshot.table.nodes
        if not len(feasible):
            raise FitError(pod_key=pod.key, num_all_nodes=num_nodes, diagnosis=diagnosis)
        evaluated = len(feasible) + len(diagnosis.node_to_status)
        if len(feasible) == 1 and not exhaustive:
            return ScheduleResult(nodes[int(feasible[0])].name, evaluated, 1, diagnosis)
        totals, per_plugin = self.prioritize_nodes(fwk, state, pod, feasible)
        best = self.select_host(totals)
        result = ScheduleResult(nodes[int(feasible[best])].name, evaluated, len(feasible), diagnosis)
        if self.explain or exhaustive:
            result.scores = _explain_scores(nodes, feasible, totals, per_plugin)
        return result

    def find_nodes_that_fit_pod(self, fwk: Framework, state: CycleState, pod: PodInfo, *,
                                exhaustive: bool = False) -> tuple[np.ndarray, Diagnosis]:
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
        if nominated and nominated in index and not exhaustive:
            feasible, _ = self.find_nodes_that_pass_filters(
                fwk, state, pod, diagnosis, np.array([index[nominated]], dtype=np.int64))
            if len(feasible):
                return feasible, diagnosis
        if pre_result is not None and pre_result.node_names is not None:
            rows = np.array(sorted(index[n] for n in pre_result.node_names if n in index), dtype=np.int64)
            absent = Status.unresolvable(f"node(s) didn't satisfy plugin(s) [{' '.join(sorted(narrowing))}]")
            diagnosis.node_to_status.absent = absent.with_plugin(", ".join(sorted(narrowing)))
        else:
            rows = np.arange(len(all_nodes), dtype=np.int64)
        feasible, processed = self.find_nodes_that_pass_filters(fwk, state, pod, diagnosis, rows,
                                                                exhaustive=exhaustive)
        if exhaustive:
            return feasible, diagnosis
        # As upstream: advance over all the snapshot's nodes, whatever subset was filtered, and
        # only here (the nominated node alone does not move the start).
        self.next_start_node_index = (self.next_start_node_index + processed) % len(all_nodes)
        return feasible, diagnosis

    def find_nodes_that_pass_filters(self, fwk: Framework, state: CycleState, pod: PodInfo,
                                     diagnosis: Diagnosis, rows: np.ndarray, *,
                                     exhaustive: bool = False) -> tuple[np.ndarray, int]:
        """(feasible rows, how many nodes were examined), starting at the rotating start index."""
        num_all = len(rows)
        if num_all == 0:
            return rows, 0
        percentage = fwk.percentage_of_nodes_to_score
        if percentage is None:
            percentage = self.percentage_of_nodes_to_score
        to_find = num_all if exhaustive else num_feasible_nodes_to_find(percentage, num_all)
        start = 0 if exhaustive else self.next_start_node_index % num_all
        order = np.roll(rows, -start) if start else rows
        if not fwk.has_filter_plugins():
            return order[:to_find], to_find
        found: list[np.ndarray] = []
        count = 0
        processed = 0
        nodes = self.snapshot.table.nodes
        nominator = fwk.handle.nominator
        while processed < num_all and count < to_find:
            chunk = order[processed:processed + max(to_find - count, 64)]
            mask, rejected = self._filter_chunk(fwk, state, pod, chunk, nominator)
            positions = np.flatnonzero(mask)
            needed = to_find - count
            if len(positions) >= needed:
                last = int(positions[needed - 1])
                positions = positions[:needed]
                kept = {int(r) for r in chunk[: last + 1].tolist()}
                rejected = {r: s for r, s in rejected.items() if r in kept}
                processed += last + 1
            else:
                processed += len(chunk)
            for row, status in rejected.items():
                if status.code is Code.ERROR:
                    raise SchedulingError(status)
                diagnosis.node_to_status.statuses[nodes[row].name] = status
                diagnosis.add_plugin_status(status)
            found.append(chunk[positions])
            count += len(positions)
        return (np.concatenate(found) if found else rows[:0]), processed

    def _filter_chunk(self, fwk: Framework, state: CycleState, pod: PodInfo, chunk: np.ndarray,
                      nominator) -> tuple[np.ndarray, dict]:
        """Vectorised filtering, except for nodes with nominated pods that Filter must count
        (two passes, per node). A node whose nominated pods are all less important than `pod`
        (or `pod` itself) is filtered as it is, so it stays on the vectorised path."""
        if not _has_nominated_pods(nominator):
            return fwk.run_filter_plugins_on_rows(state, pod, self.snapshot.table, chunk)
        nodes = self.snapshot.table.nodes
        counted = [
            fwk.nominated_pods_to_count(pod=pod, node_name=name) if nominator.nominated_pods_for_node(name) else []
            for name in (nodes[r].name for r in chunk.tolist())
        ]
        slow = np.fromiter((bool(c) for c in counted), dtype=bool, count=len(chunk))
        if not slow.any():
            return fwk.run_filter_plugins_on_rows(state, pod, self.snapshot.table, chunk)
        mask = np.zeros(len(chunk), dtype=bool)
        rejected: dict[int, Status] = {}
        fast_pos = np.flatnonzero(~slow)
        if len(fast_pos):
            fast_mask, rejected = fwk.run_filter_plugins_on_rows(state, pod, self.snapshot.table, chunk[fast_pos])
            mask[fast_pos] = fast_mask
        for pos in np.flatnonzero(slow).tolist():
            row = int(chunk[pos])
            status = fwk.run_filter_plugins_with_pods(state, pod, nodes[row], nominated=counted[pos])
            if status is None:
                mask[pos] = True
            else:
                rejected[row] = status
        return mask, rejected

    def prioritize_nodes(self, fwk: Framework, state: CycleState, pod: PodInfo,
                         feasible: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        if not fwk.has_score_plugins():
            return np.ones(len(feasible), dtype=np.int64), {}
        nodes = self.snapshot.table.nodes
        status = fwk.run_pre_score_plugins(state, pod, [nodes[r] for r in feasible.tolist()])
        if status is not None:
            raise SchedulingError(status)
        totals, per_plugin, status = fwk.run_score_plugins_on_rows(state, pod, self.snapshot.table, feasible)
        if status is not None:
            raise SchedulingError(status)
        return totals, per_plugin

    def select_host(self, totals: np.ndarray) -> int:
        """Index of a best-scored node, chosen uniformly at random among ties."""
        best = np.flatnonzero(totals == totals.max())
        return int(best[0]) if len(best) == 1 else int(best[self.rng.randrange(len(best))])


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
