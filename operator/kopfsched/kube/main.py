"""`kopfsched run`: the operator — kopf watches feeding the scheduler core, acting through
kubernetes-asyncio.

Threads and loops. kopf cancels every task created after it started when it exits, and
installs its own signal handlers in the main thread; a binding cancelled half-way would
leave an assumed pod behind. So kopf runs in a thread of its own with its own loop (the
embedding kopf's docs recommend), and its on.event handlers only forward raw events to
the scheduler's loop (the main thread's). The scheduler's tasks are never kopf's to cancel.

Start-up: health server; kopf's thread (its watches start listing); our own LIST of
SchedulerProfiles, nodes, pods and the other kinds, fed to the cache and queue (kopf
gives no signal when its initial listing is done): from then on /readyz is ok. Then,
with leader election, wait for the Lease; followers keep their cache warm meanwhile. The
leader runs the scheduling loop, the queue's flushes, the status writer and reconciles.

Shutdown (SIGTERM/SIGINT or a stop flag): close the queue and let in-flight bindings
finish (waiting pods are rejected and unreserved), release the Lease, stop kopf.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any

import kopf
import yaml
from kubernetes_asyncio import client as k8s
from kubernetes_asyncio import config as k8s_config

from kopfsched.cache.cache import Cache
from kopfsched.config.profiles import parse_kube_scheduler_configuration
from kopfsched.config.types import SchedulerConfig
from kopfsched.framework.client import ClusterError, ConflictError, NotFoundError
from kopfsched.kube.client import KubeClusterClient, reporting_instance
from kopfsched.kube.feed import NODE, POD, ClusterFeed
from kopfsched.kube.handlers import (
    POD_FIELD_SELECTOR,
    PROFILE_KIND,
    WATCHED,
    WatchedKind,
    build_registry,
    operator_settings,
)
from kopfsched.kube.leader import LeaderElector, LeaseConfig
from kopfsched.kube.podgroups import PodGroupStatusWriter
from kopfsched.kube.profiles import ProfileManager
from kopfsched.kube.ratelimit import DEFAULT_BURST, DEFAULT_QPS
from kopfsched.observability.health import HealthServer
from kopfsched.observability.metrics import SchedulerMetrics
from kopfsched.plugins.registry import full_registry
from kopfsched.scheduler.event_handlers import EventHandlers
from kopfsched.scheduler.observer import Observers
from kopfsched.scheduler.scheduler import Scheduler
from kopfsched.scheduler.stats import SchedulingStats
from kopfsched.scheduler.tasks import TaskSet

logger = logging.getLogger(__name__)

EXIT_OK, EXIT_FAILED = 0, 1
LIST_PAGE_SIZE = 500
STUCK_AFTER = 30.0
"""/healthz fails when pods wait in activeQ and no cycle ran for this long."""
SERVICE_ACCOUNT_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


@dataclass(slots=True)
class OperatorOptions:
    kubeconfig: str | None = None
    """kubeconfig file; None: in-cluster, then $KUBECONFIG / ~/.kube/config."""
    scheduler_config: SchedulerConfig | None = None
    """Profiles of the --config file (served beside the SchedulerProfiles)."""
    leader_elect: bool = True
    lease: LeaseConfig = field(default_factory=LeaseConfig)
    metrics_port: int | None = 10259
    """Port of /healthz, /readyz, /metrics; 0 picks a free one, None serves none."""
    metrics_host: str = "0.0.0.0"
    qps: float = DEFAULT_QPS
    burst: int = DEFAULT_BURST
    status_interval: float = 5.0
    """Seconds between SchedulerProfile and PodGroup status refreshes (written only when changed)."""
    reconcile_interval: float = 300.0
    """Seconds between full LIST reconciles of pods and nodes (ghost removal)."""
    relist_reconcile_delay: float = 1.0
    """After kopf relists (e.g. after 410 Gone), reconcile this many seconds later."""
    identity: str = field(default_factory=reporting_instance)
    seed_default_profile: bool = True
    """Create SchedulerProfile/kopfsched when the cluster has no SchedulerProfile and
    --config defines no profile, so a fresh install serves `schedulerName: kopfsched`."""


DEFAULT_SCHEDULER_PROFILE: dict[str, Any] = {
    "apiVersion": PROFILE_KIND.group_version,
    "kind": PROFILE_KIND.kind,
    "metadata": {"name": "kopfsched", "labels": {"app.kubernetes.io/name": "kopfsched",
                                                 "app.kubernetes.io/part-of": "kopfsched"}},
    "spec": {"schedulerName": "kopfsched", "podInitialBackoffSeconds": 1, "podMaxBackoffSeconds": 10},
}
"""Upstream's default plugins and weights, served as `schedulerName: kopfsched`."""


class KopfThread:
    """kopf.operator in a thread with its own event loop, stopped through a threading.Event."""

    def __init__(self, registry: kopf.OperatorRegistry) -> None:
        self.registry = registry
        self.stop_flag = threading.Event()
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, name="kopf", daemon=True)

    def start(self) -> None:
        # kopf logs every on.event call at INFO: per pod event, that is noise and CPU.
        logging.getLogger("kopf.objects").setLevel(logging.WARNING)
        self._thread.start()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def _main(self) -> None:
        try:
            asyncio.run(kopf.operator(registry=self.registry, settings=operator_settings(), clusterwide=True,
                                      standalone=True, stop_flag=self.stop_flag))
        except BaseException as exc:
            self.error = exc
            logger.exception("kopf stopped with an error")

    async def stop(self, timeout: float = 15.0) -> None:
        self.stop_flag.set()
        await asyncio.to_thread(self._thread.join, timeout)


class Operator:
    """One scheduler replica: watches, cache, queue, scheduling loop, status and health."""

    def __init__(self, options: OperatorOptions) -> None:
        self.options = options
        self.listed = False
        self.stats = SchedulingStats()
        self.metrics = SchedulerMetrics()
        self.cache = Cache()
        self.api: k8s.ApiClient | None = None
        self.client: KubeClusterClient | None = None
        self.scheduler: Scheduler | None = None
        self.feed: ClusterFeed | None = None
        self.profiles: ProfileManager | None = None
        self.profile_feed: ClusterFeed | None = None
        self.pod_groups: PodGroupStatusWriter | None = None
        self.kopf: KopfThread | None = None
        self.health: HealthServer | None = None
        self.elector: LeaderElector | None = None
        self.failure: str | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._scheduling: asyncio.Task[None] | None = None
        self._tasks = TaskSet(logger)
        self._status_dirty = asyncio.Event()
        self._written: dict[str, dict[str, Any]] = {}
        self._reconcile_pending = False
        self._last_cycle = (0, time.monotonic())

    # -- probes ------------------------------------------------------------------------------

    def ready(self) -> bool:
        """The initial listing is done (the cache holds every node and pod)."""
        return self.listed

    def healthy(self) -> bool:
        """kopf's watches run and, on the leader, the scheduling loop is alive and not stuck."""
        if self.kopf is None or not self.kopf.alive:
            return False
        if self._scheduling is None or self.scheduler is None:
            return True  # a follower, or still listing
        if self._scheduling.done():
            return False
        cycle, since = self._last_cycle
        active = self.scheduler.queue.pending_counts().get("active", 0)
        return not active or self.scheduler.queue.scheduling_cycle != cycle or time.monotonic() - since < STUCK_AFTER

    # -- the whole run -----------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> int:
        self._loop = asyncio.get_running_loop()
        configuration = await load_configuration(self.options.kubeconfig)
        self.api = k8s.ApiClient(configuration)
        try:
            return await self._run(stop, configuration)
        finally:
            await self.api.close()

    async def _run(self, stop: asyncio.Event, configuration: k8s.Configuration) -> int:
        self._build()
        assert self.scheduler is not None and self.client is not None
        if self.options.metrics_port is not None:
            health = HealthServer(port=self.options.metrics_port, host=self.options.metrics_host,
                                  healthy=self.healthy, ready=self.ready, registry=self.metrics.registry)
            try:
                await health.start()
            except OSError as exc:  # e.g. the port is in use
                raise StartupError(f"--metrics-port {self.options.metrics_port}: {exc.strerror or exc}") from exc
            self.health = health
        self.kopf = KopfThread(build_registry(forward=self._forward, configuration=configuration))
        self.kopf.start()
        lost = asyncio.Event()
        try:
            try:
                await self._initial_listing()
            except ClusterError as exc:  # unreachable, forbidden, ...: the Deployment restarts us
                raise StartupError(str(exc)) from exc
            self._spawn(self._metrics_loop(stop), "metrics")
            self._spawn(self._watch_kopf(lost), "kopf watchdog")
            if self.options.leader_elect:
                self.elector = LeaderElector(self.client, config=self.options.lease, identity=self.options.identity)
                if not await _first(self.elector.acquire(stop), stop, lost):
                    return self._exit_code(stop)
                self._spawn(self._hold_lease(stop, lost), "lease")
            self._start_scheduling(stop)
            await _wait_any(stop, lost)
            return self._exit_code(stop)
        finally:
            await self._shutdown()

    def _exit_code(self, stop: asyncio.Event) -> int:
        if self.failure is not None:
            logger.error("stopping: %s", self.failure)
            return EXIT_FAILED
        return EXIT_OK

    def _build(self) -> None:
        assert self.api is not None
        self.client = KubeClusterClient(self.api, qps=self.options.qps, burst=self.options.burst,
                                        instance=self.options.identity)
        config = self.options.scheduler_config
        registry = full_registry()
        for problem in registry.problems:
            logger.warning("installed plugins: %s", problem)
        self.scheduler = Scheduler(cache=self.cache, client=self.client, registry=registry,
                                   observer=Observers(self.stats, self.metrics),
                                   percentage_of_nodes_to_score=config.percentage_of_nodes_to_score if config else 0)
        self.feed = ClusterFeed(EventHandlers(self.scheduler))
        self.profiles = ProfileManager(scheduler=self.scheduler, registry=self.scheduler.registry, stats=self.stats,
                                       config_profiles=list(config.profiles) if config else [],
                                       on_change=self._status_dirty.set)
        # SchedulerProfiles get the feed's ordering (by resourceVersion) and relist reconciling too.
        self.profile_feed = ClusterFeed(_ProfileSink(self.profiles))  # type: ignore[arg-type]
        self.pod_groups = PodGroupStatusWriter(scheduler=self.scheduler, client=self.client)

    def _start_scheduling(self, stop: asyncio.Event) -> None:
        assert self.scheduler is not None
        logger.info("scheduling starts")
        self._scheduling = self._spawn(self.scheduler.run(), "scheduling loop")
        self._spawn(self.scheduler.queue.run(stop), "queue flushes")
        self._spawn(self.scheduler.run_permit_timeouts(stop), "permit timeouts")
        self._spawn(self._status_loop(stop), "profile status")
        self._spawn(self._pod_group_status_loop(stop), "PodGroup status")
        self._spawn(self._reconcile_loop(stop), "reconcile")

    async def _shutdown(self) -> None:
        if self.scheduler is not None:
            # In-flight bindings finish; pods waiting on Permit are rejected and unreserved.
            await self.scheduler.shutdown()
        if self.profiles is not None and self.client is not None and self._scheduling is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._write_statuses(), timeout=5)
        await self._tasks.cancel()
        if self.elector is not None:
            await self.elector.release()
        if self.kopf is not None:
            await self.kopf.stop()
        if self.health is not None:
            await self.health.stop()

    # -- events from kopf's thread ---------------------------------------------------------

    def _forward(self, kind: str, type: str | None, obj: dict[str, Any]) -> None:
        """Called in kopf's thread: hand the event to the scheduler's loop, in order."""
        assert self._loop is not None
        self._loop.call_soon_threadsafe(self.on_event, kind, type, obj)

    def on_event(self, kind: str, type: str | None, obj: dict[str, Any]) -> None:
        assert self.feed is not None and self.profile_feed is not None
        feed = self.feed
        if kind == PROFILE_KIND.kind:
            obj = {**obj, "apiVersion": obj.get("apiVersion") or PROFILE_KIND.group_version, "kind": kind}
            feed = self.profile_feed
        if type == "DELETED":
            feed.delete(kind, obj)
            return
        feed.upsert(kind, obj)
        if type is None and self.listed:
            # kopf (re)listed: after 410 Gone it says nothing of what vanished meanwhile.
            self._schedule_reconcile()

    # -- listing and reconciling -------------------------------------------------------------

    async def _initial_listing(self) -> None:
        assert self.feed is not None and self.profile_feed is not None
        token = self.profile_feed.begin_listing()
        profiles = await self._list(PROFILE_KIND, missing_ok=True)
        if not profiles and self._should_seed():
            profiles = await self._seed_default_profile()
        self.profile_feed.reconcile(PROFILE_KIND.kind, profiles, token=token)
        for watched in WATCHED:  # nodes and pods first
            await self._reconcile_kind(watched)
        self.listed = True
        logger.info("initial listing done: %d nodes, %d pods", self.feed.count(NODE), self.feed.count(POD))

    def _should_seed(self) -> bool:
        config = self.options.scheduler_config
        return self.options.seed_default_profile and not (config is not None and config.profiles)

    async def _seed_default_profile(self) -> list[dict[str, Any]]:
        """`kubectl apply -f crds/ -f manifests/` cannot create a custom resource in the same
        run as its CRD (kubectl maps every kind before the CRD is established), so the
        default profile is created here, once, when there is no profile at all."""
        assert self.client is not None
        path = f"/apis/{PROFILE_KIND.group_version}/{PROFILE_KIND.plural}"
        try:
            created = await self.client.request("POST", path, body=DEFAULT_SCHEDULER_PROFILE,
                                                what="creating the default SchedulerProfile")
        except ConflictError:  # another replica was first; the watch delivers it
            return []
        except NotFoundError:
            logger.warning("SchedulerProfile CRD is not installed: apply crds/ first")
            return []
        logger.info("created the default SchedulerProfile %r", DEFAULT_SCHEDULER_PROFILE["metadata"]["name"])
        return [created] if isinstance(created, dict) and created.get("spec") else [DEFAULT_SCHEDULER_PROFILE]

    async def _reconcile_kind(self, watched: WatchedKind) -> int:
        assert self.feed is not None and self.profile_feed is not None
        feed = self.profile_feed if watched is PROFILE_KIND else self.feed
        token = feed.begin_listing()
        listed = await self._list(watched, missing_ok=watched.kind not in (NODE, POD))
        return feed.reconcile(watched.kind, listed, token=token)

    async def reconcile(self) -> int:
        """LIST every watched kind and drop what the cache knows but the API no longer has."""
        removed = 0
        for watched in (*WATCHED, PROFILE_KIND):
            removed += await self._reconcile_kind(watched)
        return removed

    def _schedule_reconcile(self) -> None:
        if self._reconcile_pending:
            return
        self._reconcile_pending = True

        async def later() -> None:
            await asyncio.sleep(self.options.relist_reconcile_delay)
            self._reconcile_pending = False
            await self.reconcile()
        self._spawn(later(), "relist reconcile")

    async def _reconcile_loop(self, stop: asyncio.Event) -> None:
        while not await _stopped_within(stop, self.options.reconcile_interval):
            try:
                await self.reconcile()
            except ClusterError as exc:
                logger.warning("reconcile failed: %s", exc)

    async def _list(self, watched: WatchedKind, *, missing_ok: bool = False) -> list[dict[str, Any]]:
        assert self.client is not None
        prefix = "/api/v1" if watched.group_version == "v1" else f"/apis/{watched.group_version}"
        query = {"limit": str(LIST_PAGE_SIZE)}
        if watched.kind == POD:
            query["fieldSelector"] = POD_FIELD_SELECTOR
        items: list[dict[str, Any]] = []
        while True:
            try:
                page = await self.client.request("GET", f"{prefix}/{watched.plural}", query=query,
                                                 rate_limited=False, what=f"listing {watched.plural}")
            except NotFoundError:
                if missing_ok:
                    return []
                raise
            for item in page.get("items") or ():
                item.setdefault("apiVersion", watched.group_version)
                item.setdefault("kind", watched.kind)
                items.append(item)
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                return items
            query["continue"] = token

    # -- periodic work -----------------------------------------------------------------------

    async def _status_loop(self, stop: asyncio.Event) -> None:
        """Refresh SchedulerProfile status at most every status_interval (sooner after a
        profile change), writing only what changed."""
        while not stop.is_set():
            self._status_dirty.clear()
            try:
                await self._write_statuses()
            except Exception:
                logger.exception("writing SchedulerProfile status failed")
            await _sleep_or(stop, self.options.status_interval, self._status_dirty)
            await _stopped_within(stop, 0.2)  # coalesce a burst of profile changes

    async def _write_statuses(self) -> None:
        assert self.profiles is not None and self.client is not None
        for name, status in self.profiles.statuses().items():
            if self._written.get(name) == status:
                continue
            try:
                await self.client.patch_profile_status(name=name, status=_merge_nulls(self._written.get(name), status))
            except NotFoundError:
                continue  # deleted meanwhile
            except ClusterError as exc:  # one profile's failure must not hold the others back
                logger.warning("%s; retrying on the next refresh", exc)
                continue
            self._written[name] = status
        for gone in set(self._written) - set(self.profiles.crs):
            del self._written[gone]

    async def _pod_group_status_loop(self, stop: asyncio.Event) -> None:
        """Write the status of Coscheduling's PodGroups every status_interval, when changed."""
        assert self.pod_groups is not None
        while True:
            try:
                await self.pod_groups.write()
            except Exception:
                logger.exception("writing PodGroup status failed")
            if await _stopped_within(stop, self.options.status_interval):
                return

    async def _metrics_loop(self, stop: asyncio.Event) -> None:
        assert self.scheduler is not None
        while True:
            self.metrics.set_pending(self.scheduler.queue.pending_counts())
            self.metrics.set_cache_size(**self.cache.stats())
            cycle = self.scheduler.queue.scheduling_cycle
            if cycle != self._last_cycle[0]:
                self._last_cycle = (cycle, time.monotonic())
            if await _stopped_within(stop, 1.0):
                return

    async def _watch_kopf(self, lost: asyncio.Event) -> None:
        assert self.kopf is not None
        while self.kopf.alive:
            await asyncio.sleep(0.5)
        self.failure = f"kopf stopped: {self.kopf.error!r}"
        lost.set()

    async def _hold_lease(self, stop: asyncio.Event, lost: asyncio.Event) -> None:
        assert self.elector is not None
        await self.elector.hold(stop)
        if not stop.is_set():
            self.failure = "leader election lost"
            assert self.client is not None
            self.client.fence(self.failure)  # bindings in flight must not bind any more
            lost.set()

    def _spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        return self._tasks.spawn(coro, name)


class _ProfileSink:
    """The profile feed's handler side: SchedulerProfiles go to the ProfileManager."""

    def __init__(self, profiles: ProfileManager) -> None:
        self.profiles = profiles

    def on_object_upsert(self, kind: str, obj: dict[str, Any]) -> None:
        self.profiles.upsert(obj)

    def on_object_delete(self, kind: str, obj: dict[str, Any]) -> None:
        self.profiles.delete(obj)


def _merge_nulls(previous: dict[str, Any] | None, status: dict[str, Any]) -> dict[str, Any]:
    """A merge patch that also removes top-level status fields no longer reported."""
    removed = {key: None for key in (previous or {}) if key not in status}
    return {**removed, **status}


async def _first(acquire: Coroutine[Any, Any, bool], stop: asyncio.Event, lost: asyncio.Event) -> bool:
    """Run `acquire` until it returns, or until `lost` is set (then False)."""
    task = asyncio.ensure_future(acquire)
    waiter = asyncio.ensure_future(lost.wait())
    try:
        await asyncio.wait([task, waiter], return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
    if not task.done():
        stop.set()  # acquire returns once stop is set
        await task
        return False
    return task.result()


async def _wait_any(*events: asyncio.Event) -> None:
    waiters = [asyncio.ensure_future(event.wait()) for event in events]
    try:
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()


async def _stopped_within(stop: asyncio.Event, seconds: float) -> bool:
    """Sleep up to `seconds`; True when `stop` was set."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), timeout=seconds)
    return stop.is_set()


async def _sleep_or(stop: asyncio.Event, seconds: float, wake: asyncio.Event) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(_wait_any(stop, wake), timeout=seconds)


# -- configuration and the CLI entry point ---------------------------------------------------


class StartupError(Exception):
    """A user error found while starting (kubeconfig, API server, port): one line, no traceback."""


async def load_configuration(kubeconfig: str | None) -> k8s.Configuration:
    """The kubeconfig given, else the in-cluster service account, else $KUBECONFIG."""
    configuration = k8s.Configuration()
    if kubeconfig:
        try:
            with open(kubeconfig, encoding="utf-8"):
                pass  # kubernetes_asyncio reads a missing file as an empty one, with a misleading error
            await k8s_config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
        except (OSError, k8s_config.ConfigException) as exc:
            message = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise StartupError(f"--kubeconfig {kubeconfig}: {' '.join(message.split())}") from exc
        return configuration
    try:
        k8s_config.load_incluster_config(client_configuration=configuration)
    except k8s_config.ConfigException:
        try:
            await k8s_config.load_kube_config(client_configuration=configuration)
        except (OSError, k8s_config.ConfigException) as exc:
            raise StartupError(f"no in-cluster service account and no usable kubeconfig: {exc}") from exc
    return configuration


class ConfigFileError(Exception):
    pass


def load_config_file(path: str) -> tuple[SchedulerConfig, dict[str, Any]]:
    """The parsed KubeSchedulerConfiguration and its raw document (for clientConnection
    and leaderElection fields the parsed form does not keep). Raises ConfigFileError with
    one line naming every problem."""
    try:
        with open(path, encoding="utf-8") as file:
            raw = yaml.safe_load(file)
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigFileError(f"{path}: {' '.join(str(exc).split())}") from exc
    parsed, problems = parse_kube_scheduler_configuration(raw, full_registry())
    if parsed is None or problems:
        raise ConfigFileError(f"{path}: " + "; ".join(str(p) for p in problems))
    return parsed, raw


def options_from(*, kubeconfig: str | None, config_file: str | None, leader_elect: bool | None,
                 metrics_port: int | None) -> OperatorOptions:
    options = OperatorOptions(kubeconfig=kubeconfig, metrics_port=metrics_port)
    raw: dict[str, Any] = {}
    if config_file:
        options.scheduler_config, raw = load_config_file(config_file)
    options.qps, options.burst = client_connection(raw.get("clientConnection"), source=config_file or "")
    election = options.scheduler_config.leader_election if options.scheduler_config else None
    options.leader_elect = leader_elect if leader_elect is not None else (election.leader_elect if election else True)
    raw_election = raw.get("leaderElection") or {}
    # Upstream's default lease is kube-system/kube-scheduler: the default scheduler's own. Ours
    # defaults to a name of its own in the operator's namespace.
    options.lease = LeaseConfig(
        name=raw_election.get("resourceName") or "kopfsched",
        namespace=raw_election.get("resourceNamespace") or own_namespace(),
        lease_duration=election.lease_duration_seconds if election else 15.0,
        renew_deadline=election.renew_deadline_seconds if election else 10.0,
        retry_period=election.retry_period_seconds if election else 2.0,
    )
    return options


def client_connection(raw: Any, *, source: str) -> tuple[float, int]:
    """clientConnection's qps and burst (0 or absent: kube-scheduler's defaults). The
    configuration parser does not read this section: check its types here."""
    if raw is None:
        return DEFAULT_QPS, DEFAULT_BURST
    if not isinstance(raw, dict):
        raise ConfigFileError(f"{source}: clientConnection: must be an object, got {_json_type(raw)}")
    problems: list[str] = []
    qps, burst = raw.get("qps"), raw.get("burst")
    if qps is not None and (isinstance(qps, bool) or not isinstance(qps, int | float)):
        problems.append(f"clientConnection.qps: must be a number, got {qps!r}")
    elif qps is not None and qps < 0:
        problems.append(f"clientConnection.qps: must be non-negative, got {qps}")
    if burst is not None and (isinstance(burst, bool) or not isinstance(burst, int)):
        problems.append(f"clientConnection.burst: must be an integer, got {burst!r}")
    elif burst is not None and burst < 0:
        problems.append(f"clientConnection.burst: must be non-negative, got {burst}")
    if problems:
        raise ConfigFileError(f"{source}: " + "; ".join(problems))
    return float(qps or DEFAULT_QPS), int(burst or DEFAULT_BURST)


def _json_type(value: Any) -> str:
    names = {bool: "boolean", int: "integer", float: "number", str: "string", list: "array"}
    return names.get(type(value), type(value).__name__)


def own_namespace() -> str:
    if os.environ.get("POD_NAMESPACE"):
        return os.environ["POD_NAMESPACE"]
    with contextlib.suppress(OSError), open(SERVICE_ACCOUNT_NAMESPACE, encoding="utf-8") as file:
        return file.read().strip()
    return "kopfsched-system"


def run_operator(*, kubeconfig: str | None, config_file: str | None, leader_elect: bool | None,
                 metrics_port: int | None) -> int:
    """The `kopfsched run` command: runs until SIGTERM/SIGINT; 1 on an invalid --config."""
    try:
        options = options_from(kubeconfig=kubeconfig, config_file=config_file, leader_elect=leader_elect,
                               metrics_port=metrics_port)
    except ConfigFileError as exc:
        print(f"invalid --config {exc}", file=sys.stderr)
        return EXIT_FAILED
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        return asyncio.run(_main(options))
    except StartupError as exc:
        print(f"kopfsched run: {exc}", file=sys.stderr)
        return EXIT_FAILED


async def _main(options: OperatorOptions) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    return await Operator(options).run(stop)


__all__ = ["KopfThread", "Operator", "OperatorOptions", "StartupError", "load_config_file", "options_from",
           "run_operator"]
