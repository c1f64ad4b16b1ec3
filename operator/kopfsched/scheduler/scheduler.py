"""The scheduler: one serialized scheduling cycle, concurrent binding cycles.

`schedule_one` runs a whole scheduling cycle — pop, PreFilter..Score (with the HTTP
extenders' steps where upstream has them), assume, Reserve, Permit — suspending only at
extender calls, so for a profile without extenders the cache cannot change under it; it
then hands the pod to a binding task (WaitOnPermit, PreBind, Bind, PostBind) and returns.
When the cycle did await extenders, the chosen node is filtered again against the cache
as it is now before assuming, and the cycle runs once more should it no longer fit. A failure anywhere
after assume runs Unreserve, forgets the assumed pod and requeues the pod with backoff.
Side effects (condition patches, events, binds) go through the ClusterClient in
supervised tasks whose failures are logged, never lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Awaitable, Callable, Container, Iterable, Iterator, Sequence
from typing import Any

from kopfsched import features
from kopfsched.cache.cache import Cache
from kopfsched.cache.snapshot import Snapshot
from kopfsched.config.types import ProfileConfig
from kopfsched.framework.client import ClusterClient, ConflictError
from kopfsched.framework.cycle_state import CycleState
from kopfsched.framework.diagnosis import Diagnosis, FitError
from kopfsched.framework.events import ASSIGNED_POD_DELETE
from kopfsched.framework.handle import Handle, WaitingPods
from kopfsched.framework.interface import NodeToStatus
from kopfsched.framework.queued import QueuedPodInfo
from kopfsched.framework.registry import Registry
from kopfsched.framework.runtime import Framework
from kopfsched.framework.status import SKIP, Code, Status
from kopfsched.framework.types import PodInfo, rfc3339
from kopfsched.queue.nominator import status_nominated_node
from kopfsched.queue.scheduling_queue import SchedulingQueue
from kopfsched.scheduler.broadcaster import EventBroadcaster
from kopfsched.scheduler.extender import ExtenderError, HTTPExtender
from kopfsched.scheduler.observer import Attempt, NullObserver, SchedulingObserver
from kopfsched.scheduler.pending import PendingPods
from kopfsched.scheduler.profile_set import ProfileSet
from kopfsched.scheduler.schedule_one import ScheduleResult, SchedulingAlgorithm, SchedulingError
from kopfsched.scheduler.tasks import TaskSet

logger = logging.getLogger(__name__)

EVENT_NOTE_LENGTH_LIMIT = 1024
SHUTDOWN_GRACE = 10.0
"""Seconds in-flight bindings get to finish on shutdown: well inside a Pod's default
terminationGracePeriodSeconds (30 s), with room for the Lease and kopf to stop after them."""
MAX_CYCLE_ATTEMPTS = 2
"""Runs of the cycle when the chosen node stopped fitting while the extenders answered."""


def truncate_message(message: str, limit: int = EVENT_NOTE_LENGTH_LIMIT) -> str:
    """Upstream's truncateMessage: cut to the event note limit, ending with " ..."."""
    suffix = " ..."
    return message if len(message) <= limit else message[: limit - len(suffix)] + suffix


def pod_scheduled_condition(reason: str, message: str, now: str, generation: int | None = None) -> dict[str, Any]:
    """The PodScheduled=False condition; with the pod's metadata.generation as observedGeneration
    when the pod has one (upstream's PodObservedGenerationTracking, on by default since v1.34)."""
    condition: dict[str, Any] = {"type": "PodScheduled", "status": "False", "reason": reason, "message": message,
                                 "lastProbeTime": None, "lastTransitionTime": now}
    if generation is not None:
        condition["observedGeneration"] = generation
    return condition


class Scheduler:
    def __init__(
        self,
        *,
        cache: Cache,
        client: ClusterClient,
        registry: Registry,
        clock: Callable[[], float] = time.monotonic,
        rng: random.Random | None = None,
        percentage_of_nodes_to_score: int = 0,
        observer: SchedulingObserver | None = None,
        explain: bool = False,
        wall_clock: Callable[[], str] = rfc3339,
        pending: PendingPods | None = None,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
    ) -> None:
        self.cache = cache
        self.client = client
        self.clock = clock
        self.rng = rng or random.Random()
        self.observer = observer or NullObserver()
        self.wall_clock = wall_clock
        self.sleep = sleep
        """How a binding cycle waits on `clock` (the plugins' Handle.sleep)."""
        self.pending = pending if pending is not None else PendingPods()
        """The last failed attempt's diagnosis of every pod still pending (/debug/pending)."""
        self.waiting_pods = WaitingPods()
        self._tasks = TaskSet(logger)
        self.profiles = ProfileSet(registry=registry, new_handle=self.new_handle, observer=self.observer,
                                   spawn=self.spawn)
        self.queue = SchedulingQueue(less=self.profiles.less, rank=self.profiles.rank, clock=clock,
                                     profile_for=self.profiles.queue_profile_for,
                                     pop_from_backoff=features.enabled(features.POP_FROM_BACKOFF_Q))
        self.nominate_for_expectation = features.enabled(features.NOMINATED_NODE_NAME_FOR_EXPECTATION)
        """NominatedNodeNameForExpectation: a pod that will wait at Permit or has PreBind work
        gets status.nominatedNodeName at the start of its binding cycle."""
        self.algorithm = SchedulingAlgorithm(cache=cache, snapshot=Snapshot(), rng=self.rng,
                                             percentage_of_nodes_to_score=percentage_of_nodes_to_score,
                                             explain=explain, clock=clock,
                                             batching=features.enabled(features.OPPORTUNISTIC_BATCHING))
        self.unmanaged = UnmanagedPods()
        self._shared: dict[str, Any] = {}
        """Handle.shared: one for every profile's plugins."""
        self.events = EventBroadcaster(client=client, spawn=self.spawn)

    @property
    def snapshot(self) -> Snapshot:
        return self.algorithm.snapshot

    # -- profiles -------------------------------------------------------------------------

    def new_handle(self) -> Handle:
        return Handle(
            snapshot=self.algorithm.snapshot,
            client=self.client,
            objects=self.cache.objects,
            pods=_KnownPods(self),
            assigned_pod=self.cache.get_pod,
            nominator=self.queue.nominator,
            waiting_pods=self.waiting_pods,
            activate=self.queue.activate,
            rng=self.rng,
            clock=self.clock,
            sleep=self.sleep,
            spawn=self.spawn,
            shared=self._shared,
        )

    def set_profiles(self, configs: Iterable[ProfileConfig]) -> None:
        """Swap in a new set of profiles (between two cycles: schedule_one never awaits).

        Unchanged profiles keep their plugins (and whatever those cache). Pods of a scheduler
        name that appears are queued; pods of one that disappears leave the queue, untouched
        on the API side; pods of a changed profile are retried at once, as the new
        configuration may accept what the old one refused."""
        changed = self.profiles.replace(configs)
        self.queue.set_rank(self.profiles.rank)
        queued = self._queued_pods()
        for pod in queued:
            if not self.profiles.responsible_for(pod):
                self.queue.delete(pod)
                self.pending.forget(pod.uid)
                self.unmanaged.add(pod)
        for pod in self.unmanaged.take_served(self.profiles):
            self.queue.add(pod)
        self.queue.activate(p for p in queued if p.scheduler_name in changed)

    def _queued_pods(self) -> list[PodInfo]:
        queues = (self.queue.active_pods(), self.queue.backoff_pods(), self.queue.unschedulable_pods(),
                  self.queue.gated_pods())
        return [qpi.pod_info for pods in queues for qpi in pods]

    # -- the loop ---------------------------------------------------------------------------

    async def run(self) -> None:
        """Schedule pods until the queue is closed."""
        while True:
            qpi = await self.queue.pop_wait()
            if qpi is None:
                return
            await self.schedule_one(qpi)
            await asyncio.sleep(0)  # let binding tasks and watch events in between cycles

    async def schedule_one(self, qpi: QueuedPodInfo) -> None:
        """One scheduling cycle for one popped pod. It suspends only at HTTP extender calls,
        so a profile without extenders runs it whole between two event-loop steps."""
        pod = qpi.pod_info
        profile = self.profiles.get(pod.scheduler_name)
        if profile is None:
            self.queue.done(pod.uid)
            return
        fwk = profile.framework
        if pod.is_terminating:
            self.queue.done(pod.uid)
            self.spawn(self._call_api(self.client.record_event(
                regarding=pod.pod, type="Warning", reason="FailedScheduling", action="Scheduling",
                message=f"skip schedule deleting pod: {pod.key}", reporting_controller=fwk.profile_name),
                "FailedScheduling event"), f"report {pod.key}")
            return
        if self.cache.is_assumed(pod.uid):
            self.queue.done(pod.uid)
            return
        start = self.clock()
        status: Status | None = None
        for _ in range(MAX_CYCLE_ATTEMPTS):
            state = CycleState()
            try:
                result = await self.algorithm.schedule_pod(fwk, state, pod, extenders=profile.extenders,
                                                           cycle=self.queue.scheduling_cycle)
            except FitError as fit:
                if profile.extenders:  # preemption looks at the cluster as it is now
                    self.cache.update_snapshot(self.snapshot)
                nominated, victims = await self._run_post_filter(fwk, state, pod, fit,
                                                                 extenders=bool(profile.extenders))
                self._fail(fwk, qpi, fit, start, nominated_node=nominated, victims=victims)
                return
            except SchedulingError as err:
                self._fail(fwk, qpi, err.status, start)
                return
            except Exception as exc:  # a bug of ours: the pod is retried, the loop goes on
                logger.exception("scheduling cycle of pod %s failed", pod.key)
                self._fail(fwk, qpi, Status.as_error(f"scheduling cycle: {exc!r}"), start)
                return
            if not profile.extenders:
                break
            status = self._recheck_host(fwk, state, pod, result.suggested_host)
            if status is None:
                break
            logger.info("node %s stopped fitting pod %s while extenders answered: %s",
                        result.suggested_host, pod.key, status.message)
        if status is not None:  # the chosen node stopped fitting twice
            self._fail(fwk, qpi, _single_node_failure(pod, result.suggested_host, status), start, result=result)
            return
        self._assume_and_bind(fwk, state, qpi, result, start, extenders=profile.extenders)

    def _recheck_host(self, fwk: Framework, state: CycleState, pod: PodInfo, host: str) -> Status | None:
        """The Filter plugins again on the chosen node, as the cache is after the extenders'
        awaits: a pod placed there meanwhile by someone else must not overcommit it."""
        self.cache.update_snapshot(self.snapshot)
        node = self.snapshot.get(host)
        if node is None or node.node is None:
            return Status.unresolvable(f'nodeinfo not found for node name "{host}"')
        if not fwk.has_filter_plugins():
            return None
        return fwk.run_filter_plugins_with_nominated_pods(state, pod, node)

    def _assume_and_bind(self, fwk: Framework, state: CycleState, qpi: QueuedPodInfo, result: ScheduleResult,
                         start: float, *, extenders: tuple[HTTPExtender, ...] = ()) -> None:
        """The end of the scheduling cycle: assume, Reserve, Permit, then the binding task."""
        pod = qpi.pod_info
        host = result.suggested_host
        try:
            assumed = self.cache.assume_pod(pod, host)
        except ValueError as err:
            # The cache has the pod already: bound by someone else while extenders answered.
            # Upstream reports an error, then does not requeue a pod the informer shows bound;
            # like a bind Conflict, we drop it without writing PodScheduled=False on it.
            logger.info("not assuming pod %s: %s", pod.key, err)
            self.queue.done(pod.uid)
            return
        try:
            self.queue.nominator.delete_nominated_pod(pod)
            status = fwk.run_reserve_plugins_reserve(state, assumed, host)
            if status is None:
                status = fwk.run_permit_plugins(state, assumed, host)
        except Exception as exc:  # a bug of ours: the assumed pod must be forgotten all the same
            logger.exception("reserving pod %s on %s failed", pod.key, host)
            status = Status.as_error(f"scheduling cycle: {exc!r}")
        if status is not None and status.code is not Code.WAIT:
            fwk.run_reserve_plugins_unreserve(state, assumed, host)
            self.cache.forget_pod(assumed)
            self._fail(fwk, qpi, _single_node_failure(pod, host, status), start, result=result)
            return
        self.spawn(self._binding_cycle(fwk, state, qpi, assumed, host, start, result, extenders=extenders),
                   f"binding {pod.key}")

    async def _run_post_filter(self, fwk: Framework, state: CycleState, pod: PodInfo, fit: FitError, *,
                               extenders: bool) -> tuple[str | None, tuple[str, ...]]:
        """(nominated node: None leaves the pod's nomination alone, "" clears it; victims).
        Awaits (and so may suspend the cycle) only in a profile with extenders."""
        if not fwk.has_post_filter_plugins():
            return "", ()
        statuses = fit.diagnosis.node_to_status
        if extenders:
            post_result, status = await fwk.run_post_filter_plugins_async(state, pod, statuses)
        else:
            post_result, status = fwk.run_post_filter_plugins(state, pod, statuses)
        # As upstream, the PostFilter status only adds its message: PostFilter plugins are
        # not rejectors whose events bring the pod back.
        if status is not None and status.message:
            fit.diagnosis.post_filter_msg = status.message
        if post_result is None:
            return None, ()
        return post_result.nominated_node_name, post_result.victims

    async def _binding_cycle(self, fwk: Framework, state: CycleState, qpi: QueuedPodInfo, assumed: PodInfo,
                             host: str, start: float, result: ScheduleResult, *,
                             extenders: tuple[HTTPExtender, ...] = ()) -> None:
        nominated = False
        try:
            status = None
            if self.nominate_for_expectation:
                status, nominate = self._pre_bind_pre_flight(fwk, state, assumed, host)
                if nominate:
                    nominated = await self._nominate_for_expectation(assumed, host)
            if status is None:
                status = await self._bind(fwk, state, assumed, host, extenders)
        except asyncio.CancelledError:  # shutdown's grace is over: release the node, report nothing
            fwk.run_reserve_plugins_unreserve(state, assumed, host)
            self.cache.forget_pod(assumed)
            self.queue.done(assumed.uid)
            raise
        except Exception as exc:
            # A bug of ours (plugins' errors are statuses already): the pod must not stay
            # assumed, holding its node, with the error lost in a task's log.
            logger.exception("binding cycle of pod %s failed", assumed.key)
            status = Status.as_error(f"binding cycle: {exc!r}")
        if status is not None:
            await self._binding_failed(fwk, state, qpi, assumed, host, start, status, result,
                                       nominated=host if nominated else None)
            return
        # Bound: what follows reports the success; a failure here cannot unbind the pod, and
        # the watch confirms the assumed pod whatever happens.
        self.pending.forget(assumed.uid)
        reported = False
        try:
            self.observer.attempted(Attempt(
                pod=qpi.pod_info, profile=fwk.profile_name, result="scheduled", seconds=self.clock() - start,
                node=host, diagnosis=result.diagnosis, scores=result.scores, attempts=qpi.attempts,
                since_first_queued=self.clock() - qpi.initial_attempt_timestamp
                if qpi.initial_attempt_timestamp is not None else None))
            reported = True
            fwk.run_post_bind_plugins(state, assumed, host)
        except Exception:
            logger.exception("reporting the binding of pod %s to %s failed", assumed.key, host)
        if reported:
            # Last, by this task: the binding cycle is over, nothing waits on the Event.
            await self.events.post(
                regarding=assumed.pod, type="Normal", reason="Scheduled", action="Binding",
                message=f"Successfully assigned {assumed.key} to {host}", reporting_controller=fwk.profile_name)

    def _pre_bind_pre_flight(self, fwk: Framework, state: CycleState, assumed: PodInfo,
                             host: str) -> tuple[Status | None, bool]:
        """The start of upstream's binding cycle with NominatedNodeNameForExpectation:
        PreBindPreFlight; (the status that fails the binding cycle, whether the pod is to be
        nominated to `host`: PreBind has work or the pod waits at Permit, and its
        status.nominatedNodeName is not `host` already). Otherwise the pod is bound soon
        anyway: nothing to tell."""
        pre_flight = fwk.run_pre_bind_pre_flights(state, assumed, host)
        if pre_flight is not None and pre_flight is not SKIP:  # an Error (never anything else)
            return pre_flight, False
        if pre_flight is SKIP and not fwk.will_wait_on_permit(assumed):
            return None, False
        return None, status_nominated_node(assumed) != host

    async def _nominate_for_expectation(self, assumed: PodInfo, host: str) -> bool:
        """status.nominatedNodeName = `host`, awaited before anything else of the binding goes
        to the API, so that others (e.g. a cluster autoscaler) know where the pod is about to
        go. A failed write is logged and the binding goes on (False)."""
        try:
            await self.client.patch_pod_status(pod=assumed.pod, nominated_node_name=host)
        except Exception as exc:  # not critical enough to stop the binding
            logger.error("Failed to update the nominated node name in the binding cycle of pod %s "
                         "(nominatedNodeName %s): %s", assumed.key, host, exc)
            return False
        return True

    async def _bind(self, fwk: Framework, state: CycleState, assumed: PodInfo, host: str,
                    extenders: tuple[HTTPExtender, ...]) -> Status | None:
        """WaitOnPermit, PreBind, Bind (a binder extender first); None when bound."""
        status = await fwk.wait_on_permit(assumed)
        if status is not None:
            return status
        self.queue.done(assumed.uid)
        status = await fwk.run_pre_bind_plugins(state, assumed, host)
        if status is not None:
            return status
        # As upstream's bind(): a binder extender goes before the Bind plugins.
        bound, status = await extenders_binding(extenders, assumed, host) if extenders else (False, None)
        if not bound:
            status = await fwk.run_bind_plugins(state, assumed, host)
        if status is not None and status.code is Code.SKIP:
            status = Status.as_error("no Bind plugin bound the pod")
        return status

    async def _binding_failed(self, fwk: Framework, state: CycleState, qpi: QueuedPodInfo, assumed: PodInfo,
                              host: str, start: float, status: Status, result: ScheduleResult, *,
                              nominated: str | None = None) -> None:
        """`nominated`: the node the binding cycle wrote into status.nominatedNodeName (the
        API's pod has it, the popped one not): the failure report clears it, as upstream's
        clearNominatedNode does against its informer's pod."""
        fwk.run_reserve_plugins_unreserve(state, assumed, host)
        self.cache.forget_pod(assumed)
        if isinstance(status.error, ConflictError):
            # Another scheduler bound the pod first: the watch will show where; do not retry.
            logger.info("pod %s was bound by someone else; forgetting it", assumed.key)
            self.queue.done(assumed.uid)
            self.queue.delete(qpi.pod_info)
            self.pending.forget(assumed.uid)
            return
        # Forgetting the assumed pod frees its node, like a deleted pod. As upstream, after a
        # rejection (Permit) the event goes out only once the pod is requeued, so that the
        # pod, still in flight, does not take its own forgetting for a reason to retry.
        if status.is_rejection:
            self._fail(fwk, qpi, _single_node_failure(qpi.pod_info, host, status), start, result=result,
                       api_nomination=nominated)
            self.queue.move_all_to_active_or_backoff(ASSIGNED_POD_DELETE, assumed, None,
                                                     pre_check=lambda p: p.uid != assumed.uid)
        else:
            self.queue.move_all_to_active_or_backoff(ASSIGNED_POD_DELETE, assumed, None)
            self._fail(fwk, qpi, status, start, result=result, api_nomination=nominated)

    # -- failures -----------------------------------------------------------------------------

    def _fail(self, fwk: Framework, qpi: QueuedPodInfo, failure: FitError | Status, start: float, *,
              nominated_node: str | None = "", victims: tuple[str, ...] = (),
              result: ScheduleResult | None = None, api_nomination: str | None = None) -> None:
        """Upstream's handleSchedulingFailure: requeue, then report on the pod and in an Event.

        `nominated_node` defaults to "" (upstream's clearNominatedNode, for errors and for
        rejections after the node was chosen); None keeps the nomination as it is.
        `api_nomination`: the pod's status.nominatedNodeName in the API when the binding cycle
        wrote it (the pod as popped does not show it)."""
        pod = qpi.pod_info
        if isinstance(failure, FitError):
            reason, message, diagnosis = "Unschedulable", str(failure), failure.diagnosis
            qpi.unschedulable_plugins = set(diagnosis.unschedulable_plugins)
            qpi.pending_plugins = set(diagnosis.pending_plugins)
            outcome = "unschedulable"
        elif failure.is_rejection:  # a rejection no plugin is to blame for: "no nodes available"
            reason, message, diagnosis = "Unschedulable", failure.message, None
            qpi.unschedulable_plugins = set()
            qpi.pending_plugins = set()
            outcome = "unschedulable"
        else:
            reason, message, diagnosis = "SchedulerError", failure.message, None
            qpi.unschedulable_plugins = set()
            qpi.pending_plugins = set()
            outcome = "error"
            logger.warning("error scheduling pod %s: %s", pod.key, message)
        self.queue.add_unschedulable_if_not_present(qpi)
        if nominated_node:
            self.queue.nominator.add_nominated_pod(pod, nominated_node)
        elif nominated_node == "":  # preemption found nothing: give up the old nomination
            self.queue.nominator.delete_nominated_pod(pod)
        attempt = Attempt(
            pod=pod, profile=fwk.profile_name, result=outcome, seconds=self.clock() - start, message=message,
            reason=reason, diagnosis=diagnosis, nominated_node=nominated_node or "", victims=victims,
            attempts=qpi.attempts, scores=result.scores if result else None)
        self.pending.record(attempt, failure if isinstance(failure, FitError) else None)
        self.observer.attempted(attempt)
        if not self.queue.closed:  # shutting down: the next leader reports, not a message about us
            self.spawn(self._report_failure(fwk, pod, reason, message, nominated_node, api_nomination),
                       f"report {pod.key}")

    async def _report_failure(self, fwk: Framework, pod: PodInfo, reason: str, message: str,
                              nominated_node: str | None, api_nomination: str | None = None) -> None:
        """One status patch for the condition and the nomination, skipped when neither changes."""
        current = _pod_scheduled_condition(pod.pod)
        generation = (pod.pod.get("metadata") or {}).get("generation")
        generation = generation if isinstance(generation, int) and not isinstance(generation, bool) else None
        unchanged = (current is not None and current.get("status") == "False"
                     and current.get("reason") == reason and current.get("message") == message
                     and current.get("observedGeneration") == generation)
        nominated_before = api_nomination if api_nomination is not None else status_nominated_node(pod)
        renominated = nominated_node is not None and nominated_node != nominated_before
        if not unchanged or renominated:
            # As upstream's two-way patch: an unchanged condition is not sent again (it would
            # get a new lastTransitionTime), only the nomination.
            condition = None if unchanged else pod_scheduled_condition(reason, message, self.wall_clock(), generation)
            await self._call_api(self.client.patch_pod_status(
                pod=pod.pod, condition=condition,
                nominated_node_name=nominated_node if renominated else None), "pod condition")
        await self._call_api(self.client.record_event(
            regarding=pod.pod, type="Warning", reason="FailedScheduling", action="Scheduling",
            message=truncate_message(message), reporting_controller=fwk.profile_name), "FailedScheduling event")

    async def _call_api(self, call: Awaitable[Any], what: str) -> None:
        try:
            await call
        except Exception as exc:  # reported, never fatal: the next attempt reports again
            logger.warning("failed to write %s: %s", what, exc)

    # -- supervised tasks -------------------------------------------------------------------

    def spawn(self, coro: Awaitable[Any], name: str) -> asyncio.Task[Any]:
        """A binding or reporting task whose failure is logged, never lost."""
        return self._tasks.spawn(coro, name)

    async def settle_tasks(self) -> None:
        """Until every task has finished or is a binding task parked at Permit, waiting for
        other pods (offline runs: a gang's first members wait while later members schedule).

        Every parked WaitingPod blocks exactly one pending task, so when the counts match
        only parked tasks are left. Tasks of the in-memory client never wait on real I/O."""
        while True:
            if self._tasks.pending() <= self.waiting_pods.parked_count():
                return
            await asyncio.sleep(0)

    async def run_permit_timeouts(self, stop_event: asyncio.Event, *, interval: float = 1.0) -> None:
        """Reject pods whose Permit wait has timed out, every `interval` seconds, until
        `stop_event` is set. The operator runs this beside `run`: Permit timeouts are
        measured on `self.clock`, not by real-time timers."""
        while not stop_event.is_set():
            self.waiting_pods.expire(self.clock())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop_event.wait(), interval)

    @property
    def in_flight_tasks(self) -> int:
        return len(self._tasks)

    async def wait_for_tasks(self) -> None:
        """Until every binding and reporting task has finished."""
        await self._tasks.wait()

    async def shutdown(self, *, grace: float = SHUTDOWN_GRACE) -> None:
        """Stop scheduling; let in-flight bindings finish (waiting pods are rejected) for up
        to `grace` seconds, then cancel what is left: their pods stay pending for the next
        scheduler, as kube-scheduler's cancelled context leaves them."""
        self.queue.close()
        for waiting in self.waiting_pods:
            waiting.reject("", "scheduler is shutting down")
        try:
            await asyncio.wait_for(asyncio.shield(self.wait_for_tasks()), grace)  # counted before cancelled
        except TimeoutError:
            left = self._tasks.pending()
            logger.warning("stopping: %d binding and reporting tasks still running after %.0f s, cancelled",
                           left, grace)
            await self._tasks.cancel()
        await self.profiles.close()


class UnmanagedPods:
    """Pending pods whose scheduler name no profile serves: kept so that a profile appearing
    for them queues them, and so that plugins count them among the known pods."""

    def __init__(self) -> None:
        self._pods: dict[str, PodInfo] = {}

    def add(self, pod: PodInfo) -> None:
        self._pods[pod.uid] = pod

    def discard(self, uid: str) -> None:
        self._pods.pop(uid, None)

    def take_served(self, scheduler_names: Container[str]) -> list[PodInfo]:
        """Remove and return the pods a profile of `scheduler_names` now serves."""
        served = [pod for pod in self._pods.values() if pod.scheduler_name in scheduler_names]
        for pod in served:
            del self._pods[pod.uid]
        return served

    def __iter__(self) -> Iterator[PodInfo]:
        return iter(list(self._pods.values()))

    def __len__(self) -> int:
        return len(self._pods)


class _KnownPods:
    """Handle.pods: assigned pods from the cache, then pending pods from the queue (in
    flight included) and pending pods of other schedulers."""

    def __init__(self, scheduler: Scheduler) -> None:
        self._scheduler = scheduler

    def list(self, namespace: str | None = None) -> list[PodInfo]:
        sched = self._scheduler
        queue = sched.queue
        seen: dict[str, PodInfo] = {}
        queued = (*queue.active_pods(), *queue.backoff_pods(), *queue.unschedulable_pods(), *queue.gated_pods())
        sources = (sched.cache.pods(), (q.pod_info for q in queued), queue.in_flight_pods(),
                   sched.unmanaged)
        for source in sources:
            for pod in source:
                if namespace is None or pod.namespace == namespace:
                    seen.setdefault(pod.uid, pod)
        return list(seen.values())


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


def _pod_scheduled_condition(pod: dict[str, Any]) -> dict[str, Any] | None:
    for condition in (pod.get("status") or {}).get("conditions") or ():
        if condition.get("type") == "PodScheduled":
            return condition
    return None


def _single_node_failure(pod: PodInfo, host: str, status: Status) -> FitError | Status:
    """A rejection after the node was chosen (Reserve, Permit, PreBind): upstream reports
    it as a FitError over that one node."""
    if not status.is_rejection:
        return status
    diagnosis = Diagnosis(node_to_status=NodeToStatus({host: status}))
    diagnosis.add_plugin_status(status)
    return FitError(pod_key=pod.key, num_all_nodes=1, diagnosis=diagnosis)
