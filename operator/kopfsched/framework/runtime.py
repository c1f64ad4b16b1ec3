"""The runtime: runs one profile's plugins at each extension point.

The runtime, not the plugins, records which plugin answered and turns exceptions into
Error statuses. Filter and Score have two paths: per node (`run_filter_plugins`, used by
preemption and for nodes with nominated pods) and over many NodeTable rows at once
(`run_filter_plugins_on_rows` / `run_score_plugins_on_rows`, run by `rows.RowRunner`),
which uses a plugin's vectorised method when it has one and its per-node method otherwise;
`what_if` filters preemption's hypothetical nodes the same way.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from kopfsched.framework import what_if
from kopfsched.framework.cycle_state import CycleState
from kopfsched.framework.events import ClusterEventWithHint
from kopfsched.framework.handle import Handle, WaitingPod
from kopfsched.framework.interface import (
    AsyncPostFilterPlugin,
    BindPlugin,
    EnqueueExtensions,
    FilterPlugin,
    NodeToStatus,
    PermitPlugin,
    PostBindPlugin,
    PostFilterPlugin,
    PostFilterResult,
    PreBindPlugin,
    PreEnqueuePlugin,
    PreFilterExtensions,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    QueueSortPlugin,
    ReservePlugin,
    ScorePlugin,
)
from kopfsched.framework.node_table import NodeTable, WhatIfTable
from kopfsched.framework.rows import Deferred, RowRunner, filter_failure
from kopfsched.framework.status import SKIP, Code, Status
from kopfsched.framework.timing import Observer, ignore, no_status, timed
from kopfsched.framework.types import NodeInfo, PodInfo

logger = logging.getLogger(__name__)

MAX_PERMIT_TIMEOUT = 15 * 60.0
"""Upstream caps a Permit plugin's wait at 15 minutes."""

PostFilterOutcome = tuple[PostFilterResult | None, Status | None]

class _PostFilterRun:
    """PostFilter plugins in turn, as upstream's RunPostFilterPlugins: the first success, error
    or UnschedulableAndUnresolvable ends the run; when every plugin rejects, the outcome is
    Unschedulable with all their reasons, blamed on the first rejector, and the last result
    that says something about the nomination (None says nothing)."""

    def __init__(self) -> None:
        self._result: PostFilterResult | None = None
        self._reasons: list[str] = []
        self._rejector = ""
        self._final: PostFilterOutcome | None = None

    def stops_at(self, plugin: Any, outcome: PostFilterOutcome | Exception) -> bool:
        """Take one plugin's answer (or the exception it raised); True when the run ends."""
        if isinstance(outcome, Exception):
            self._final = None, Status.as_error(outcome).with_plugin(plugin.name)
            return True
        answer, status = outcome
        if status is None or status.code is Code.SUCCESS:
            # A success's message is kept: upstream's FitError carries it (v1.37's preemption
            # says where it found room).
            self._final = answer, status if status is not None and status.message else None
        elif status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
            self._final = answer, status.with_plugin(plugin.name)
        elif not status.is_rejection:  # anything but a rejection is an error
            self._final = None, Status(Code.ERROR, status.reasons, plugin.name, status.error)
        else:
            self._result = answer if answer is not None else self._result
            self._reasons.extend(status.reasons)
            self._rejector = self._rejector or plugin.name
            return False
        return True

    def outcome(self) -> PostFilterOutcome:
        if self._final is not None:
            return self._final
        return self._result, Status(Code.UNSCHEDULABLE, tuple(self._reasons), self._rejector)


SCHEDULER_NAME_SIGNER = "v1.Pod.Spec.SchedulerName"


def _signers(plugins: list[Any]) -> list[Callable[[PodInfo], Any]] | None:
    """Each plugin's sign_pod, once per plugin in order; None when one has none or refuses
    every pod (`signs_no_pod`)."""
    signers: dict[str, Callable[[PodInfo], Any]] = {}
    for plugin in plugins:
        if plugin.name in signers:
            continue
        sign = getattr(plugin, "sign_pod", None)
        if sign is None or getattr(plugin, "signs_no_pod", False):
            return None
        signers[plugin.name] = sign
    return list(signers.values())


class Framework:
    """One profile's plugins, by extension point, in configured order."""

    def __init__(
        self,
        *,
        profile_name: str,
        plugins: dict[str, list[tuple[Any, int]]],
        handle: Handle,
        percentage_of_nodes_to_score: int | None = None,
        observe: Observer | None = None,
    ) -> None:
        self.profile_name = profile_name
        self.handle = handle
        self.percentage_of_nodes_to_score = percentage_of_nodes_to_score
        self.observe = observe or ignore

        def at(point: str) -> list[Any]:
            return [plugin for plugin, _ in plugins.get(point, ())]

        queue_sort = at("queueSort")
        self.queue_sort_plugin: QueueSortPlugin | None = queue_sort[0] if queue_sort else None
        self.pre_enqueue_plugins: list[PreEnqueuePlugin] = at("preEnqueue")
        self.pre_filter_plugins: list[PreFilterPlugin] = at("preFilter")
        self.filter_plugins: list[FilterPlugin] = at("filter")
        self.post_filter_plugins: list[PostFilterPlugin] = at("postFilter")
        self.pre_score_plugins: list[PreScorePlugin] = at("preScore")
        self.score_plugins: list[tuple[ScorePlugin, int]] = list(plugins.get("score", ()))
        self.reserve_plugins: list[ReservePlugin] = at("reserve")
        self.permit_plugins: list[PermitPlugin] = at("permit")
        self.pre_bind_plugins: list[PreBindPlugin] = at("preBind")
        self._pre_bind_pre_flights = [(plugin, getattr(plugin, "pre_bind_pre_flight", None))
                                      for plugin in self.pre_bind_plugins]
        """(plugin, its PreBindPreFlight or None) of every PreBind plugin."""
        self._all_pre_bind = frozenset(plugin.name for plugin in self.pre_bind_plugins)
        self.bind_plugins: list[BindPlugin] = at("bind")
        self.post_bind_plugins: list[PostBindPlugin] = at("postBind")
        self.pre_filter_extensions: list[PreFilterExtensions] = [
            p for p in self.pre_filter_plugins if isinstance(p, PreFilterExtensions)]
        self.rows = RowRunner(filter_plugins=self.filter_plugins, score_plugins=self.score_plugins)
        """Filter and Score over NodeTable rows (`rows`), and preemption's what-if filters (`what_if`)."""
        # Filters whose answer may change when pods are added to or removed from a node: the
        # only ones preemption's reprieve steps and the second nominated-pods pass re-run.
        self.pod_dependent_filter_plugins = self.rows.pod_dependent_filter_plugins
        seen: dict[str, Any] = {}
        for point_plugins in plugins.values():
            for plugin, _ in point_plugins:
                seen.setdefault(plugin.name, plugin)
        self.plugins_by_name = seen
        self._signers = _signers([*self.pre_filter_plugins, *self.filter_plugins, *self.pre_score_plugins,
                                  *(plugin for plugin, _ in self.score_plugins)])
        handle.framework = self

    # -- introspection ----------------------------------------------------------------------

    def has_filter_plugins(self) -> bool:
        return bool(self.filter_plugins)

    def has_score_plugins(self) -> bool:
        return bool(self.score_plugins)

    def has_post_filter_plugins(self) -> bool:
        return bool(self.post_filter_plugins)

    def queue_sort_less(self) -> Callable[[Any, Any], bool] | None:
        return self.queue_sort_plugin.less if self.queue_sort_plugin is not None else None

    def enqueue_hints(self) -> dict[str, list[ClusterEventWithHint]]:
        """Each plugin's registered events; plugins that register none get every event."""
        hints: dict[str, list[ClusterEventWithHint]] = {}
        for name, plugin in self.plugins_by_name.items():
            if isinstance(plugin, EnqueueExtensions):
                hints[name] = list(plugin.events_to_register())
        return hints

    def effective_plugins(self) -> dict[str, list[dict[str, Any]]]:
        """Extension point -> [{name, weight?}], for the profile's status."""
        points: dict[str, Sequence[Any]] = {
            "queueSort": [self.queue_sort_plugin] if self.queue_sort_plugin else [],
            "preEnqueue": self.pre_enqueue_plugins, "preFilter": self.pre_filter_plugins,
            "filter": self.filter_plugins, "postFilter": self.post_filter_plugins,
            "preScore": self.pre_score_plugins, "reserve": self.reserve_plugins, "permit": self.permit_plugins,
            "preBind": self.pre_bind_plugins, "bind": self.bind_plugins, "postBind": self.post_bind_plugins,
        }
        out = {point: [{"name": p.name} for p in plugins] for point, plugins in points.items() if plugins}
        if self.score_plugins:
            out["score"] = [{"name": p.name, "weight": w} for p, w in self.score_plugins]
        return out

    # -- PreEnqueue ----------------------------------------------------------------------------

    def run_pre_enqueue_plugins(self, pod: PodInfo) -> Status | None:
        for plugin in self.pre_enqueue_plugins:
            try:
                status = plugin.pre_enqueue(pod)
            except Exception as exc:  # a plugin bug: the pod stays out of activeQ, visibly
                return Status.as_error(exc).with_plugin(plugin.name)
            if status is not None and status.code is not Code.SUCCESS:
                return status.with_plugin(plugin.name)
        return None

    # -- PreFilter -----------------------------------------------------------------------------

    @timed("PreFilter", lambda result: result[1])
    def run_pre_filter_plugins(
        self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None, list[str]]:
        """(merged result, status, plugins that narrowed the nodes). As upstream, an
        Unschedulable answer lets the remaining PreFilters run (preemption needs their
        state), while UnschedulableAndUnresolvable and errors stop at once."""
        result: PreFilterResult | None = None
        returned: Status | None = None
        narrowing: list[str] = []
        skipped: set[str] = set()
        for plugin in self.pre_filter_plugins:
            try:
                answer = plugin.pre_filter(state, pod, nodes)
            except Exception as exc:
                status = Status.as_error(f'running PreFilter plugin "{plugin.name}": {exc}')
                return None, status.with_plugin(plugin.name), []
            if answer is None:
                continue
            if isinstance(answer, PreFilterResult):
                if answer.node_names is not None:
                    narrowing.append(plugin.name)
                result = answer.merge(result)
                if result.node_names is not None and not result.node_names:
                    if len(narrowing) == 1:
                        message = f"node(s) didn't satisfy plugin {narrowing[0]}"
                    else:
                        message = f"node(s) didn't satisfy plugins [{' '.join(narrowing)}] simultaneously"
                    status = Status.unresolvable(message).with_plugin(narrowing[-1])
                    return None, status, narrowing
                continue
            if answer.code is Code.SKIP:
                skipped.add(plugin.name)
                continue
            if answer.code is Code.SUCCESS:
                continue
            answer = answer.with_plugin(plugin.name)
            if answer.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                return None, answer, []
            if answer.code in (Code.UNSCHEDULABLE, Code.PENDING):
                returned = answer
                continue
            status = Status.as_error(f'running PreFilter plugin "{plugin.name}": {answer.message}')
            return None, status.with_plugin(plugin.name), []
        state.skip_filter_plugins = skipped
        return result, returned, narrowing

    def run_pre_filter_extension_add_pod(self, state: CycleState, pod: PodInfo, pod_to_add: PodInfo,
                                         node: NodeInfo) -> Status | None:
        return self._run_pre_filter_extension("AddPod", state, pod, pod_to_add, node)

    def run_pre_filter_extension_remove_pod(self, state: CycleState, pod: PodInfo, pod_to_remove: PodInfo,
                                            node: NodeInfo) -> Status | None:
        return self._run_pre_filter_extension("RemovePod", state, pod, pod_to_remove, node)

    def _run_pre_filter_extension(self, which: str, state: CycleState, pod: PodInfo, other: PodInfo,
                                  node: NodeInfo) -> Status | None:
        """AddPod/RemovePod of every PreFilter plugin that did not Skip this cycle."""
        for plugin in self.pre_filter_extensions:
            if plugin.name in state.skip_filter_plugins:
                continue
            if which == "AddPod":
                status = plugin.add_pod(state, pod, other, node)
            else:
                status = plugin.remove_pod(state, pod, other, node)
            if status is not None and status.code is not Code.SUCCESS:
                return Status.as_error(f'running {which} on PreFilter plugin "{plugin.name}": {status.message}')
        return None

    # -- Filter --------------------------------------------------------------------------------

    def run_filter_plugins(self, state: CycleState, pod: PodInfo, node: NodeInfo, *,
                           pod_dependent_only: bool = False) -> Status | None:
        """Filter one node, stopping at the first plugin that rejects it. With
        `pod_dependent_only`, node-static plugins are left out: for callers that know they
        already passed on this node (their answer cannot have changed since)."""
        # rows.filter_one inlined: this runs several times per node in preemption's dry runs.
        skipped = state.skip_filter_plugins
        for plugin in self.pod_dependent_filter_plugins if pod_dependent_only else self.filter_plugins:
            if plugin.name in skipped:
                continue
            try:
                status = plugin.filter(state, pod, node)
            except Exception as exc:
                return Status.as_error(f'running "{plugin.name}" filter plugin: {exc}').with_plugin(plugin.name)
            if status is not None and status.code is not Code.SUCCESS:
                return filter_failure(plugin, status)
        return None

    def run_filter_plugins_with_nominated_pods(self, state: CycleState, pod: PodInfo,
                                               node: NodeInfo) -> Status | None:
        """Upstream's two passes: first with the pods nominated to this node that are at
        least as important as `pod` counted on it, then (if any were added) without them."""
        return self.run_filter_plugins_with_pods(
            state, pod, node, nominated=self.nominated_pods_to_count(pod=pod, node_name=node.name))

    def nominated_pods_to_count(self, *, pod: PodInfo, node_name: str) -> list[PodInfo]:
        """The pods nominated to `node_name` that Filter counts as running there when it
        checks `pod`: the others that are at least as important."""
        return [
            p for p in self.handle.nominator.nominated_pods_for_node(node_name)
            if p.uid != pod.uid and p.priority >= pod.priority
        ]

    def run_filter_plugins_with_pods(self, state: CycleState, pod: PodInfo, node: NodeInfo, *,
                                     nominated: list[PodInfo], pod_dependent_only: bool = False,
                                     scratch_node: bool = False) -> Status | None:
        """`run_filter_plugins_with_nominated_pods` with the nominated pods already looked up
        (`nominated_pods_to_count`), for callers that filter the same node many times.

        The second pass leaves out node-static plugins: the first one just passed them on
        the same node. `scratch_node` says `node` is the caller's own copy: the nominated pods
        are added to it and removed again instead of cloning it (and, when no PreFilter
        extension is active, the state is not cloned either)."""
        if nominated:
            if scratch_node and not any(other.uid in node.pods for other in nominated):
                extensions = self.has_active_pre_filter_extensions(state)
                state_with = state.clone() if extensions else state
                status = None
                added: list[PodInfo] = []
                for other in nominated:
                    node.add_pod(other)
                    added.append(other)
                    if extensions:
                        status = self.run_pre_filter_extension_add_pod(state_with, pod, other, node)
                        if status is not None:
                            break
                if status is None:
                    status = self.run_filter_plugins(state_with, pod, node, pod_dependent_only=pod_dependent_only)
                for other in added:
                    node.remove_pod(other)
            else:
                status = self.run_filter_plugins_first_pass(state, pod, node, nominated=nominated,
                                                            pod_dependent_only=pod_dependent_only)
            if status is not None:
                return status
            return self.run_filter_plugins(state, pod, node, pod_dependent_only=True)
        return self.run_filter_plugins(state, pod, node, pod_dependent_only=pod_dependent_only)

    def run_filter_plugins_first_pass(self, state: CycleState, pod: PodInfo, node: NodeInfo, *,
                                      nominated: list[PodInfo], pod_dependent_only: bool = False) -> Status | None:
        """Upstream's first pass alone: the nominated pods counted on a copy of the node."""
        state_with = state.clone()
        node_with = node.clone()
        for other in nominated:
            node_with.add_pod(other)
            status = self.run_pre_filter_extension_add_pod(state_with, pod, other, node_with)
            if status is not None:
                return status
        return self.run_filter_plugins(state_with, pod, node_with, pod_dependent_only=pod_dependent_only)

    def has_active_pre_filter_extensions(self, state: CycleState) -> bool:
        """Whether some PreFilter plugin with AddPod/RemovePod did not Skip this cycle."""
        skipped = state.skip_filter_plugins
        return any(p.name not in skipped for p in self.pre_filter_extensions)

    @timed("Filter", no_status)
    def run_filter_plugins_on_rows(
        self, state: CycleState, pod: PodInfo, table: NodeTable, rows: np.ndarray, *,
        pod_dependent_only: bool = False, reasons: bool = True, deferred: list[Deferred] | None = None,
    ) -> tuple[np.ndarray, dict[int, Status]]:
        """Filter many nodes: (boolean mask over `rows`, True where the node passed;
        row -> first rejection).

        Each node's status comes from the first plugin that rejects it, exactly as if the
        nodes were filtered one by one. An Error status is returned among the rejections;
        the caller aborts the cycle on it. `reasons=False`: the mask (and errors) alone are
        exact; the rejections of batch plugins are left out (no Status per node is built), and
        `deferred` receives what `rows.deferred_statuses` builds them from later in the cycle."""
        return self.rows.filter(state, pod, table, rows, pod_dependent_only=pod_dependent_only, reasons=reasons,
                                deferred=deferred)

    # -- PostFilter ----------------------------------------------------------------------------

    @timed("PostFilter", lambda result: result[1])
    def run_post_filter_plugins(self, state: CycleState, pod: PodInfo,
                                statuses: NodeToStatus) -> tuple[PostFilterResult | None, Status | None]:
        """Stops at the first plugin that succeeds or errors; returns the last rejection otherwise."""
        run = _PostFilterRun()
        for plugin in self.post_filter_plugins:
            try:
                outcome: PostFilterOutcome | Exception = plugin.post_filter(state, pod, statuses)
            except Exception as exc:
                outcome = exc
            if run.stops_at(plugin, outcome):
                break
        return run.outcome()

    @timed("PostFilter", lambda result: result[1])
    async def run_post_filter_plugins_async(self, state: CycleState, pod: PodInfo, statuses: NodeToStatus
                                            ) -> tuple[PostFilterResult | None, Status | None]:
        """`run_post_filter_plugins` for profiles with extenders: a plugin that has
        `post_filter_async` (AsyncPostFilterPlugin) is awaited."""
        run = _PostFilterRun()
        for plugin in self.post_filter_plugins:
            try:
                if isinstance(plugin, AsyncPostFilterPlugin):
                    outcome: PostFilterOutcome | Exception = await plugin.post_filter_async(state, pod, statuses)
                else:
                    outcome = plugin.post_filter(state, pod, statuses)
            except Exception as exc:
                outcome = exc
            if run.stops_at(plugin, outcome):
                break
        return run.outcome()

    # -- PreScore / Score ------------------------------------------------------------------------

    @timed("PreScore")
    def run_pre_score_plugins(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> Status | None:
        skipped: set[str] = set()
        result: Status | None = None
        for plugin in self.pre_score_plugins:
            try:
                status = plugin.pre_score(state, pod, nodes)
            except Exception as exc:
                result = Status.as_error(f'running PreScore plugin "{plugin.name}": {exc}').with_plugin(plugin.name)
                break
            if status is None or status.code is Code.SUCCESS:
                continue
            if status.code is Code.SKIP:
                skipped.add(plugin.name)
                continue
            result = Status.as_error(f'running PreScore plugin "{plugin.name}": {status.message}')
            result = result.with_plugin(plugin.name)
            break
        state.skip_score_plugins = skipped
        return result

    @timed("Score", lambda result: result[2])
    def run_score_plugins_on_rows(
        self, state: CycleState, pod: PodInfo, table: NodeTable, rows: np.ndarray,
        raw: dict[str, np.ndarray] | None = None,
    ) -> tuple[np.ndarray, dict[str, np.ndarray], Status | None]:
        """(weighted totals, normalized pre-weight scores per plugin, error). With an error,
        totals and scores are those of the plugins before the one it blames. `raw` receives
        the scores before NormalizeScore."""
        return self.rows.score(state, pod, table, rows, raw)

    @timed("Score", lambda result: result[2])
    def normalize_scores(self, state: CycleState, pod: PodInfo, raw: dict[str, np.ndarray], count: int
                         ) -> tuple[np.ndarray, dict[str, np.ndarray], Status | None]:
        """Upstream's NormalizeScores over raw scores kept from `run_score_plugins_on_rows`."""
        return self.rows.normalize(state, pod, raw, count)

    # -- signatures (OpportunisticBatching) ------------------------------------------------------

    def signs_pods(self) -> bool:
        """Whether this profile can sign any pod: every PreFilter, Filter, PreScore and Score
        plugin is a SignPlugin, and none refuses every pod (upstream's computeBatchablePlugins)."""
        return self._signers is not None

    def sign_pod(self, pod: PodInfo) -> str | None:
        """The pod's scheduling signature (upstream's SignPod): two pods with the same one are
        judged and scored alike on the same nodes. None when some plugin cannot sign it."""
        if self._signers is None:
            return None
        signature: dict[str, object] = {SCHEDULER_NAME_SIGNER: pod.scheduler_name}
        for sign in self._signers:
            fragments = sign(pod)
            if fragments is None:
                return None
            signature.update(fragments)
        return json.dumps(signature, sort_keys=True, separators=(",", ":"), default=repr)

    def run_filter_plugins_what_if(self, state: CycleState, pod: PodInfo, table: WhatIfTable, *,
                                   pod_dependent_only: bool = False) -> list[Status | None]:
        """Each row's Filter status for preemption's hypothetical nodes (`what_if.statuses`)."""
        return what_if.statuses(self.rows, state, pod, table, pod_dependent_only=pod_dependent_only)

    def run_filter_plugins_what_if_passes(self, state: CycleState, pod: PodInfo, table: WhatIfTable, *,
                                          pod_dependent_only: bool = False) -> np.ndarray:
        """Which rows of `table` pass (`what_if.passes`)."""
        return what_if.passes(self.rows, state, pod, table, pod_dependent_only=pod_dependent_only)

    # -- Reserve / Permit ----------------------------------------------------------------------

    @timed("Reserve")
    def run_reserve_plugins_reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        result: Status | None = None
        for plugin in self.reserve_plugins:
            try:
                status = plugin.reserve(state, pod, node_name)
            except Exception as exc:
                status = Status.as_error(exc)
            if status is not None and status.code is not Code.SUCCESS:
                if not status.is_rejection:
                    status = Status.as_error(f'running Reserve plugin "{plugin.name}": {status.message}')
                result = status.with_plugin(plugin.name)
                break
        return result

    @timed("Unreserve", no_status)
    def run_reserve_plugins_unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        """Every Reserve plugin's unreserve, in reverse order; failures cannot stop the others."""
        for plugin in reversed(self.reserve_plugins):
            try:
                plugin.unreserve(state, pod, node_name)
            except Exception:  # unreserve must reach every plugin
                logger.exception("Unreserve plugin %s failed for pod %s", plugin.name, pod.key)

    @timed("Permit")
    def run_permit_plugins(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        """None (allowed), a rejection, an error, or Wait after registering a WaitingPod."""
        waits: dict[str, float] = {}
        result: Status | None = None
        for plugin in self.permit_plugins:
            try:
                status, timeout = plugin.permit(state, pod, node_name)
            except Exception as exc:
                status, timeout = Status.as_error(exc), 0.0
            if status is None or status.code is Code.SUCCESS:
                continue
            if status.is_rejection:
                result = status.with_plugin(plugin.name)
                break
            if status.code is Code.WAIT:
                waits[plugin.name] = min(timeout, MAX_PERMIT_TIMEOUT)
                continue
            result = Status.as_error(f'running Permit plugin "{plugin.name}": {status.message}')
            result = result.with_plugin(plugin.name)
            break
        if result is None and waits:
            self.handle.waiting_pods.add(WaitingPod(pod, node_name, waits, registered_at=self.handle.clock()))
            result = Status.wait(
                f'one or more plugins asked to wait and no plugin rejected pod "{pod.name}"'
            )
        return result

    async def wait_on_permit(self, pod: PodInfo) -> Status | None:
        waiting = self.handle.waiting_pods.get(pod.uid)
        if waiting is None:
            return None
        try:
            allowed, plugin, message = await waiting.wait()
        finally:
            self.handle.waiting_pods.remove(pod.uid)
        if allowed:
            return None
        return Status.unschedulable(message).with_plugin(plugin)

    def will_wait_on_permit(self, pod: PodInfo) -> bool:
        """Whether Permit told the pod to wait (its binding task will wait on it)."""
        return self.handle.waiting_pods.get(pod.uid) is not None

    # -- binding ---------------------------------------------------------------------------

    @timed("PreBindPreFlight")
    def run_pre_bind_pre_flights(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        """Upstream's RunPreBindPreFlights: None when some PreBind plugin will have work for
        the pod, SKIP when none will, an Error when one failed (or answered anything but
        Success, Skip or Error). Records in `state` the plugins that skip, which PreBind
        leaves out, and those that allow running in parallel."""
        skipped: list[str] = []
        parallel: list[str] = []
        result: Status | None = SKIP
        for plugin, pre_flight in self._pre_bind_pre_flights:
            if pre_flight is None:  # no PreBindPreFlight: PreBind has work, alone
                result = None
                continue
            try:
                answer, status = pre_flight(state, pod, node_name)
            except Exception as exc:
                return Status.as_error(f'running PreBindPreFlight "{plugin.name}": {exc}')
            if answer is not None and answer.allow_parallel:
                parallel.append(plugin.name)
            # Every pod asks this: the shared SKIP is told apart without reading its code.
            if status is SKIP or (status is not None and status.code is Code.SKIP):
                skipped.append(plugin.name)
            elif status is None or status.code is Code.SUCCESS:
                result = None
            elif status.code is Code.ERROR:
                logger.error("PreBindPreFlight plugin %s failed for pod %s on node %s: %s", plugin.name, pod.key,
                             node_name, status.message)
                return Status(Code.ERROR, (f'running PreBindPreFlight "{plugin.name}": {status.message}',),
                              error=status.error)
            else:
                return Status.as_error(f'PreBindPreFlight {plugin.name} returned "{status.code.upstream_name}", '
                                       "which is unsupported. It is supposed to return Success, Skip, or Error "
                                       "status")
        if result is SKIP:  # every plugin skips (most pods): PreBind runs none, in no groups
            state.skip_pre_bind_plugins = self._all_pre_bind
            return result
        if skipped:
            state.skip_pre_bind_plugins = frozenset(skipped)
        if parallel:
            state.parallel_pre_bind_plugins = frozenset(parallel)
        return result

    @timed("PreBind")
    async def run_pre_bind_plugins(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        """The PreBind plugins in order, but those PreBindPreFlight said skip; neighbours it
        allowed to run in parallel run at the same time, and the first failure among them
        cancels the others (upstream's getPreBindPluginGroups)."""
        skipped, parallel = state.skip_pre_bind_plugins, state.parallel_pre_bind_plugins
        if not parallel:
            for plugin in self.pre_bind_plugins:
                if plugin.name in skipped:
                    continue
                status = await self._run_pre_bind_plugin(plugin, state, pod, node_name)
                if status is not None:
                    return status
            return None
        for group in _pre_bind_groups(self.pre_bind_plugins, skipped, parallel):
            if len(group) == 1:
                status = await self._run_pre_bind_plugin(group[0], state, pod, node_name)
            else:
                status = await self._run_pre_bind_group(group, state, pod, node_name)
            if status is not None:
                return status
        return None

    async def _run_pre_bind_group(self, group: list[PreBindPlugin], state: CycleState, pod: PodInfo,
                                  node_name: str) -> Status | None:
        tasks = [asyncio.ensure_future(self._run_pre_bind_plugin(plugin, state, pod, node_name))
                 for plugin in group]
        try:
            for next_done in asyncio.as_completed(tasks):
                status = await next_done
                if status is not None:
                    return status
            return None
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _run_pre_bind_plugin(self, plugin: PreBindPlugin, state: CycleState, pod: PodInfo,
                                   node_name: str) -> Status | None:
        try:
            status = await plugin.pre_bind(state, pod, node_name)
        except Exception as exc:
            status = Status.as_error(exc)
        if status is None or status.code in (Code.SUCCESS, Code.SKIP):
            return None
        if not status.is_rejection:
            status = Status(Code.ERROR, (f'running PreBind plugin "{plugin.name}": {status.message}',),
                            error=status.error)
        return status.with_plugin(plugin.name)

    @timed("Bind")
    async def run_bind_plugins(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        """The first Bind plugin that does not Skip decides; all skipping gives SKIP."""
        result: Status | None = SKIP
        for plugin in self.bind_plugins:
            try:
                status = await plugin.bind(state, pod, node_name)
            except Exception as exc:
                status = Status.as_error(exc)
            if status is not None and status.code is Code.SKIP:
                continue
            if status is None or status.code is Code.SUCCESS:
                result = None
            elif status.is_rejection:
                result = status.with_plugin(plugin.name)
            else:
                result = Status(Code.ERROR, (f'running Bind plugin "{plugin.name}": {status.message}',),
                                error=status.error).with_plugin(plugin.name)
            break
        return result

    @timed("PostBind", no_status)
    def run_post_bind_plugins(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        for plugin in self.post_bind_plugins:
            try:
                plugin.post_bind(state, pod, node_name)
            except Exception:  # informational only: the pod is bound
                logger.exception("PostBind plugin %s failed for pod %s", plugin.name, pod.key)


def _pre_bind_groups(plugins: list[PreBindPlugin], skipped: frozenset[str],
                     parallel: frozenset[str]) -> list[list[PreBindPlugin]]:
    """The PreBind plugins not skipped, in order, in groups to run together: a run of
    neighbours that allow parallel runs is one group, any other plugin a group of its own
    (a skipped plugin does not break a run, as upstream)."""
    groups: list[list[PreBindPlugin]] = []
    group: list[PreBindPlugin] = []
    for plugin in plugins:
        if plugin.name in parallel:
            if plugin.name not in skipped:
                group.append(plugin)
            continue
        if group:
            groups.append(group)
            group = []
        if plugin.name not in skipped:
            groups.append([plugin])
    if group:
        groups.append(group)
    return groups
