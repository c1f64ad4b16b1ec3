"""Filter and Score over many NodeTable rows at once: the runtime's hot path.

`RowRunner` holds one profile's Filter and Score plugins sorted by what they can do over
rows (a vectorised `filter_nodes` / `filter_statuses` / `score_nodes`, node-static or not)
and runs them over a table's rows with the outcome of running them node by node: each node's
status from the first plugin that rejects it, each score checked against [0, 100] with the
first invalid one blamed. The Framework's `run_*_on_rows` methods time these runs;
`what_if` runs the same filters over preemption's hypothetical nodes.
"""

from __future__ import annotations

import operator
from typing import Any, cast

import numpy as np

try:  # numpy's C function, without np.count_nonzero's Python dispatch
    from numpy._core.multiarray import count_nonzero
except ImportError:  # numpy < 2
    from numpy.core.multiarray import count_nonzero  # type: ignore[no-redef]

from kopfsched.framework.cycle_state import CycleState
from kopfsched.framework.interface import (
    MAX_NODE_SCORE,
    MIN_NODE_SCORE,
    BatchFilterPlugin,
    BatchFilterStatusesPlugin,
    BatchScorePlugin,
    EveryNodeFilterPlugin,
    FilterPlugin,
    NodeStaticFilterPlugin,
    NormalizeScorePlugin,
    ScorePlugin,
)
from kopfsched.framework.node_table import NodeTable, WhatIfTable
from kopfsched.framework.status import Code, Status, TalliedStatuses
from kopfsched.framework.types import NodeInfo, PodInfo

assert MIN_NODE_SCORE == 0  # RowRunner.score checks both bounds with one unsigned maximum


def filter_failure(plugin: Any, status: Status) -> Status:
    """A Filter plugin's non-success answer as the runtime reports it."""
    if not status.is_rejection:
        status = Status.as_error(f'running "{plugin.name}" filter plugin: {status.message}')
    return status.with_plugin(plugin.name)


def filter_one(plugin: Any, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
    """One Filter plugin on one node, as the runtime reports it: None when it passes."""
    try:
        status = plugin.filter(state, pod, node)
    except Exception as exc:
        return Status.as_error(f'running "{plugin.name}" filter plugin: {exc}').with_plugin(plugin.name)
    if status is None or status.code is Code.SUCCESS:
        return None
    return filter_failure(plugin, status)


def weighted_totals(per_plugin: dict[str, np.ndarray], weights: list[int], count: int) -> np.ndarray:
    """The sum of each plugin's scores times its weight (exact integers: the order of the
    additions does not matter). The first term is the totals' own array; a weight of 1
    multiplies nothing: two numpy calls per plugin at most, cheaper than np.dot's integer loop."""
    totals: np.ndarray | None = None
    for scores, weight in zip(per_plugin.values(), weights, strict=True):
        if totals is None:
            totals = scores * weight if weight != 1 else np.array(scores, dtype=np.int64)
        elif weight == 1:
            totals += scores
        else:
            totals += scores * weight
    return np.zeros(count, dtype=np.int64) if totals is None else totals


def first_invalid_score(per_plugin: dict[str, np.ndarray], score_plugins: list[tuple[Any, int]], count: int
                         ) -> tuple[np.ndarray, dict[str, np.ndarray], Status] | None:
    """The outcome of the Score run at the first plugin (in `per_plugin`'s order)
    whose scores leave [MIN_NODE_SCORE, MAX_NODE_SCORE]: the totals and scores of the
    plugins before it, and its error."""
    weights = {plugin.name: weight for plugin, weight in score_plugins}
    totals = np.zeros(count, dtype=np.int64)
    before: dict[str, np.ndarray] = {}
    for name, scores in per_plugin.items():
        if len(scores) and (scores.max() > MAX_NODE_SCORE or scores.min() < MIN_NODE_SCORE):
            bad = int(scores.max() if scores.max() > MAX_NODE_SCORE else scores.min())
            status = Status.as_error(
                f'plugin "{name}" returns an invalid score {bad}, it should in the range of '
                f"[{MIN_NODE_SCORE}, {MAX_NODE_SCORE}] after normalizing"
            ).with_plugin(name)
            return totals, before, status
        before[name] = scores
        totals += scores * weights[name]
    return None


Deferred = tuple[Any, Any, NodeTable, np.ndarray, np.ndarray, np.ndarray | None]
"""(plugin, the plugin if it has filter_statuses else None, the table it judged, the rows it
was given, a mask of those it rejected, the rows of the judged table behind the rows given or
None when it judged those): one batch rejection whose statuses were not built."""


def deferred_statuses(entry: Deferred, state: CycleState, pod: PodInfo) -> dict[int, Status]:
    """Row -> Status of a batch rejection left out by `RowRunner.filter(reasons=False)`: what
    the run with reasons would have recorded, if asked in the same cycle (same state, same
    table). A plugin that fails here gives an Error status on the first row, as there."""
    rows, statuses, _ = deferred_rejections(entry, state, pod)
    return dict(zip(rows, statuses, strict=True))


def deferred_rejections(entry: Deferred, state: CycleState, pod: PodInfo, *, listed: bool = True
                        ) -> tuple[list[int] | np.ndarray, list[Status], list[tuple[Status, int]] | None]:
    """`deferred_statuses` as (the rows, their statuses, each distinct status with how many
    rows have it in order of first appearance, or None when the plugin did not count them:
    see TalliedStatuses). `listed=False`: the rows may come as the entry's array of them."""
    plugin, with_statuses, judged, given, rejected, judged_rows = entry
    failed = given[rejected]
    on_judged = failed if judged_rows is None else judged_rows[failed]
    if with_statuses is None:
        nodes = judged.nodes
        out: dict[int, Status] = {}
        for row, judged_row in zip(failed.tolist(), on_judged.tolist(), strict=True):
            one = filter_one(plugin, state, pod, nodes[judged_row])
            out[row] = one if one is not None else Status.as_error(
                f'"{plugin.name}" batch filter rejected node {nodes[judged_row].name} but its '
                "filter accepted it").with_plugin(plugin.name)
        return list(out), list(out.values()), None
    try:
        statuses = with_statuses.filter_statuses(state, pod, judged, on_judged)
    except Exception as exc:
        return [int(failed[0])], [Status.as_error(f'running "{plugin.name}" filter plugin: {exc}').with_plugin(
            plugin.name)], None
    rows: list[int] | np.ndarray = failed.tolist() if listed else failed
    if isinstance(statuses, TalliedStatuses) and sum(statuses.counts) == len(statuses) == len(rows):
        wrapped = [filter_failure(plugin, answer) for answer in statuses.distinct]
        tally = list(zip(wrapped, statuses.counts, strict=True))
        if all(map(operator.is_, wrapped, statuses.distinct)):
            return rows, statuses, tally  # already the runtime's statuses (the plugin's name on them)
        if len(wrapped) == 1:
            return rows, [wrapped[0]] * len(rows), tally
        by_id = dict(zip(map(id, statuses.distinct), wrapped, strict=True))
        return rows, list(map(by_id.__getitem__, map(id, statuses))), tally
    statuses = statuses if isinstance(statuses, list) else list(statuses)
    distinct = dict(zip(map(id, statuses), statuses, strict=True))
    wrapped_by_id = {key: filter_failure(plugin, answer) for key, answer in distinct.items()}
    return rows, list(map(wrapped_by_id.__getitem__, map(id, statuses))), None


class RowRunner:
    """One profile's Filter and Score plugins, run over NodeTable rows."""

    def __init__(self, *, filter_plugins: list[FilterPlugin], score_plugins: list[tuple[ScorePlugin, int]]) -> None:
        self.filter_plugins = filter_plugins
        self.score_plugins = score_plugins
        self._batch_filter: dict[str, BatchFilterPlugin] = {
            p.name: p for p in filter_plugins if isinstance(p, BatchFilterPlugin)}
        # Filters whose answer may change when pods are added to or removed from a node: the
        # only ones preemption's reprieve steps and the second nominated-pods pass re-run.
        self.pod_dependent_filter_plugins: list[FilterPlugin] = [
            p for p in filter_plugins
            if not (isinstance(p, NodeStaticFilterPlugin) and p.node_static_filter is True)]
        self._node_static_names = {p.name for p in filter_plugins} - {
            p.name for p in self.pod_dependent_filter_plugins}
        self._batch_statuses: dict[str, BatchFilterStatusesPlugin] = {
            p.name: p for p in filter_plugins if isinstance(p, BatchFilterStatusesPlugin)}
        self._every: dict[str, EveryNodeFilterPlugin] = {
            p.name: p for p in filter_plugins if isinstance(p, EveryNodeFilterPlugin)}
        # What the loop over the plugins reads, looked up once: (name, plugin, its filter_nodes
        # or None, its passes_every_node or None, its filter_statuses plugin or None).
        self._entries = [self._entry(p) for p in filter_plugins]
        self._pod_dependent_entries = [self._entry(p) for p in self.pod_dependent_filter_plugins]
        self._batch_score: dict[str, BatchScorePlugin] = {
            p.name: p for p, _ in score_plugins if isinstance(p, BatchScorePlugin)}
        self._normalizers = {p.name: p.normalize_score for p, _ in score_plugins
                             if isinstance(p, NormalizeScorePlugin)}

    def _entry(self, plugin: FilterPlugin) -> tuple[str, FilterPlugin, Any, Any, BatchFilterStatusesPlugin | None]:
        name = plugin.name
        batch = self._batch_filter.get(name)
        every = self._every.get(name)
        return (name, plugin, batch.filter_nodes if batch is not None else None,
                every.passes_every_node if every is not None else None, self._batch_statuses.get(name))

    def filter(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: np.ndarray, *,
                     pod_dependent_only: bool, reasons: bool = True,
                     deferred: list[Deferred] | None = None) -> tuple[np.ndarray, dict[int, Status]]:
        """Framework.run_filter_plugins_on_rows, untimed (preemption's what-if batches count as PostFilter).

        With `reasons=False` the rejections of batch plugins are left out of the answer;
        `deferred` then receives what `deferred_statuses` needs to give them later.

        On a WhatIfTable, node-static plugins judge the real nodes behind its rows (their
        answer is the same) so that no NodeInfo copy is built for them."""
        rejected: dict[int, Status] = {}
        alive = rows  # the rows every plugin so far passed
        alive_pos: np.ndarray | None = None  # their positions in `rows`; None: all of them
        skipped = state.skip_filter_plugins
        static = self._node_static_names if isinstance(table, WhatIfTable) else ()
        for name, plugin, filter_nodes, every, with_statuses in (
                self._pod_dependent_entries if pod_dependent_only else self._entries):
            if not len(alive):
                break
            if name in skipped:
                continue
            judged: NodeTable = table
            judged_rows: np.ndarray | None = None
            if name in static:
                judged, judged_rows = cast(WhatIfTable, table).root, cast(WhatIfTable, table).root_rows
            if filter_nodes is not None:
                try:
                    if every is not None and every(state, pod, judged):
                        continue
                    passed = np.asarray(filter_nodes(
                        state, pod, judged, alive if judged_rows is None else judged_rows[alive]), dtype=bool)
                except Exception as exc:
                    error = Status.as_error(f'running "{plugin.name}" filter plugin: {exc}')
                    rejected[int(alive[0])] = error.with_plugin(plugin.name)
                    alive = alive[:0]
                    break
                if count_nonzero(passed) == passed.size:  # passed.all(), without its Python wrapper
                    continue
                if not reasons:  # the caller reads the mask alone, and maybe the reasons later
                    if deferred is not None:  # the rejected rows found only if they are asked for
                        deferred.append((plugin, with_statuses, judged, alive, ~passed, judged_rows))
                elif with_statuses is not None:
                    failed = alive[~passed]
                    try:
                        statuses = with_statuses.filter_statuses(
                            state, pod, judged, failed if judged_rows is None else judged_rows[failed])
                    except Exception as exc:
                        error = Status.as_error(f'running "{plugin.name}" filter plugin: {exc}')
                        rejected[int(failed[0])] = error.with_plugin(plugin.name)
                        alive = alive[:0]
                        break
                    # Statuses are shared: wrap each distinct one once; the per-node work is
                    # left to C (map, zip, dict.update), as thousands of nodes may fail.
                    statuses = statuses if isinstance(statuses, list) else list(statuses)
                    distinct = dict(zip(map(id, statuses), statuses, strict=True))
                    wrapped = {key: filter_failure(plugin, answer) for key, answer in distinct.items()}
                    rejected.update(zip(failed.tolist(), map(wrapped.__getitem__, map(id, statuses)), strict=True))
                else:
                    failed = alive[~passed]
                    on_judged = failed if judged_rows is None else judged_rows[failed]
                    nodes = judged.nodes
                    for row, judged_row in zip(failed.tolist(), on_judged.tolist(), strict=True):
                        one = filter_one(plugin, state, pod, nodes[judged_row])
                        rejected[row] = one if one is not None else Status.as_error(
                            f'"{plugin.name}" batch filter rejected node {nodes[judged_row].name} but its '
                            "filter accepted it").with_plugin(plugin.name)
                kept = passed.nonzero()[0]  # an index by positions: cheaper than one by the mask
                alive_pos = kept if alive_pos is None else alive_pos[kept]
                alive = alive[kept]
            else:
                nodes = judged.nodes
                keep: list[int] = []
                on_judged = alive if judged_rows is None else judged_rows[alive]
                for i, (row, judged_row) in enumerate(zip(alive.tolist(), on_judged.tolist(), strict=True)):
                    status = filter_one(plugin, state, pod, nodes[judged_row])
                    if status is None:
                        keep.append(i)
                    else:
                        rejected[row] = status
                if len(keep) < len(alive):
                    kept = np.asarray(keep, dtype=np.int64)
                    alive_pos = kept if alive_pos is None else alive_pos[kept]
                    alive = alive[kept]
        if alive_pos is None and len(alive):
            mask = np.empty(len(rows), dtype=bool)
            mask.fill(True)  # np.ones, without its Python wrapper
            return mask, rejected
        mask = np.zeros(len(rows), dtype=bool)
        if len(alive):
            mask[alive_pos] = True
        return mask, rejected

    def score(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: np.ndarray,
              raw: dict[str, np.ndarray] | None = None) -> tuple[np.ndarray, dict[str, np.ndarray], Status | None]:
        """Framework.run_score_plugins_on_rows, untimed. `raw` receives each plugin's scores
        before NormalizeScore (OpportunisticBatching keeps them to rescore a node later)."""
        per_plugin: dict[str, np.ndarray] = {}
        weights: list[int] = []
        skipped = state.skip_score_plugins
        nodes = table.nodes
        for plugin, weight in self.score_plugins:
            name = plugin.name
            if name in skipped:
                continue
            try:
                batch = self._batch_score.get(name)
                if batch is not None:
                    scores = np.asarray(batch.score_nodes(state, pod, table, rows), dtype=np.int64)
                else:
                    scores = np.fromiter((plugin.score(state, pod, nodes[r]) for r in rows.tolist()),
                                         dtype=np.int64, count=len(rows))
                normalize = self._normalizers.get(name)
                if raw is not None:
                    raw[name] = scores.copy() if normalize is not None else scores
                if normalize is not None:
                    scores = np.asarray(normalize(state, pod, scores), dtype=np.int64)
            except Exception as exc:
                # An earlier plugin's invalid score is reported first, as a check per plugin would.
                invalid = first_invalid_score(per_plugin, self.score_plugins, len(rows))
                if invalid is None:
                    status = Status.as_error(f'running Score plugins: plugin "{name}": {exc}').with_plugin(name)
                    invalid = weighted_totals(per_plugin, weights, len(rows)), per_plugin, status
                return invalid
            per_plugin[name] = scores
            weights.append(weight)
        # Every plugin's scores in one block: the range checked and the weighted sum taken in a
        # few numpy calls rather than three per plugin.
        if per_plugin and len(rows):
            every = np.concatenate(list(per_plugin.values())) if len(per_plugin) > 1 else scores
            # One look for both bounds: as unsigned, a negative score is above the maximum (and
            # a[a.argmax()] is the maximum for a third of the fixed cost of a reduction).
            unsigned = every.view(np.uint64)
            if unsigned[unsigned.argmax()] > MAX_NODE_SCORE:
                invalid = first_invalid_score(per_plugin, self.score_plugins, len(rows))
                assert invalid is not None
                return invalid
        return weighted_totals(per_plugin, weights, len(rows)), per_plugin, None

    def normalize(self, state: CycleState, pod: PodInfo, raw: dict[str, np.ndarray], count: int
                  ) -> tuple[np.ndarray, dict[str, np.ndarray], Status | None]:
        """Upstream's NormalizeScores: the plugins' raw scores (`raw`, as `score` keeps them;
        a plugin missing from it was skipped) normalized and weighted again, over `count` nodes."""
        per_plugin: dict[str, np.ndarray] = {}
        weights: list[int] = []
        for plugin, weight in self.score_plugins:
            scores = raw.get(plugin.name)
            if scores is None:
                continue
            normalize = self._normalizers.get(plugin.name)
            if normalize is not None:
                try:
                    scores = np.asarray(normalize(state, pod, scores.copy()), dtype=np.int64)
                except Exception as exc:
                    status = Status.as_error(f'running Normalize on Score plugins: plugin "{plugin.name}" '
                                             f"failed with: {exc}").with_plugin(plugin.name)
                    return weighted_totals(per_plugin, weights, count), per_plugin, status
            per_plugin[plugin.name] = scores
            weights.append(weight)
        invalid = first_invalid_score(per_plugin, self.score_plugins, count)
        if invalid is not None:
            return invalid
        return weighted_totals(per_plugin, weights, count), per_plugin, None
