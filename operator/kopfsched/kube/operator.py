"""The operator assembled: one scheduler replica — kopf's watches feeding the scheduler
core through the informer, acting through kubernetes-asyncio.

Start-up: the secure port (HTTPS, reviews delegated to the API server) and the metrics port
(plain HTTP on 127.0.0.1); kopf's thread, whose discovery, LISTs and watches are relayed to the
informer (kube.watches, kube.informer): once every served kind's first LIST has been fed to the
cache and queue, /readyz is ok. Then, with leader election, wait for the Lease; followers
keep their cache warm meanwhile. The leader runs the scheduling loop, the queue's
flushes, the status writer and the periodic reconcile.

Shutdown (SIGTERM/SIGINT or a stop flag): close the queue and let in-flight bindings
finish (waiting pods are rejected and unreserved), release the Lease, stop kopf.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from kubernetes_asyncio import client as k8s
from kubernetes_asyncio import config as k8s_config

from kopfsched import gcpolicy
from kopfsched.cache.cache import Cache
from kopfsched.config.types import DEFAULT_BURST, DEFAULT_QPS, SchedulerConfig
from kopfsched.kube.client import KubeClusterClient, reporting_instance, without_env_lookups
from kopfsched.kube.dashboard import OperatorDashboard
from kopfsched.kube.delegation import ApiServerReviews
from kopfsched.kube.feed import ClusterFeed
from kopfsched.kube.handlers import LIST_PAGE_SIZE, build_registry, operator_settings
from kopfsched.kube.informer import Informer
from kopfsched.kube.kopf_thread import Inbox, KopfThread, Relay, call
from kopfsched.kube.leader import LeaderElector, LeaseConfig
from kopfsched.kube.podgroups import PodGroupStatusWriter
from kopfsched.kube.profile_manager import ProfileFeedHandlers, ProfileManager
from kopfsched.kube.reachability import ApiReachability
from kopfsched.kube.reachability import install as install_request_retries
from kopfsched.kube.status_writer import StatusWriter
from kopfsched.kube.waiting import first, stopped_within, wait_any
from kopfsched.kube.watches import DOWN_AFTER, MAX_BACKOFF, WatchHealth
from kopfsched.kube.watches import install as install_watch_relay
from kopfsched.observability.health import HealthServer
from kopfsched.observability.metrics import SchedulerMetrics
from kopfsched.observability.secure import DEFAULT_ALWAYS_ALLOW_PATHS, DelegatedAuth, ServingCertError, serving_context
from kopfsched.plugins.registry import full_registry
from kopfsched.scheduler.activity import Activity
from kopfsched.scheduler.event_handlers import EventHandlers
from kopfsched.scheduler.observer import Observers
from kopfsched.scheduler.scheduler import Scheduler
from kopfsched.scheduler.stats import SchedulingStats
from kopfsched.scheduler.tasks import TaskSet

logger = logging.getLogger(__name__)

EXIT_OK, EXIT_FAILED = 0, 1
STUCK_AFTER = 30.0
"""/healthz fails when pods wait in activeQ and no cycle ran for this long."""
POD_RESOURCE, NODE_RESOURCE = "pods", "nodes"
"""kopf stops watching these only when it shuts down (unlike a CRD's resource, which may go)."""


@dataclass(slots=True)
class OperatorOptions:
    kubeconfig: str | None = None
    """kubeconfig file; None: in-cluster, then $KUBECONFIG / ~/.kube/config."""
    scheduler_config: SchedulerConfig | None = None
    """Profiles of the --config file (served beside the SchedulerProfiles)."""
    leader_elect: bool = True
    lease: LeaseConfig = field(default_factory=LeaseConfig)
    metrics_port: int | None = 10251
    """Plain-HTTP port of the dashboard, /debug/*, /metrics and the health paths, on
    `metrics_host`; 0 picks a free one, None serves none."""
    metrics_host: str = "127.0.0.1"
    """Loopback: reached from outside the pod only through `kubectl port-forward`, which the
    API server authorizes (pods/portforward)."""
    secure_port: int | None = None
    """HTTPS port of the same routes, each request but `always_allow_paths` authenticated
    (TokenReview) and authorized (SubjectAccessReview); 0 picks a free one, None serves none
    (`kopfsched run` serves 10259, kube-scheduler's secure port)."""
    bind_address: str = "0.0.0.0"
    always_allow_paths: tuple[str, ...] = DEFAULT_ALWAYS_ALLOW_PATHS
    tls_cert_file: str | None = None
    tls_private_key_file: str | None = None
    cert_dir: str | None = None
    """Where a self-signed pair is written (and read again) when no pair is given; neither:
    the pair is made in memory at each start."""
    qps: float = DEFAULT_QPS
    burst: int = DEFAULT_BURST
    status_interval: float = 5.0
    """Seconds between SchedulerProfile and PodGroup status refreshes (written only when changed)."""
    reconcile_interval: float | None = None
    """Seconds between full LIST reconciles of every kind; None: never, as kube-scheduler's
    informers (a kind relisted after 410 Expired or a watch error is reconciled on its own)."""
    watch_down_after: float = DOWN_AFTER
    """/healthz fails once a watch has been failing (backing off and relisting) for this long."""
    watch_max_backoff: float = MAX_BACKOFF
    """Longest back-off (before jitter) between relists of a failing watch; client-go's is 30 s."""
    list_page_size: int = LIST_PAGE_SIZE
    """Objects per page of every LIST (kopf's, and the periodic reconcile's)."""
    identity: str = field(default_factory=reporting_instance)
    seed_default_profile: bool = True
    """Create SchedulerProfile/kopfsched when the cluster has no SchedulerProfile and
    --config defines no profile, so a fresh install serves `schedulerName: kopfsched`."""


class UnhealthyError(Exception):
    """Why /healthz fails."""


class NotReadyError(Exception):
    """Why /readyz fails."""


class StartupError(Exception):
    """A user error found while starting (kubeconfig, API server, port): one line, no traceback."""


class Operator:
    """One scheduler replica: watches, cache, queue, scheduling loop, status and health.

    Every part is built here, in the event loop that will run it (kopf's thread forwards
    events to that loop); `Operator.connected` builds one from the options' kubeconfig."""

    def __init__(self, options: OperatorOptions, *, api: k8s.ApiClient, configuration: k8s.Configuration) -> None:
        self.options = options
        self.stats = SchedulingStats()
        self.activity = Activity()
        """Recent throughput, latency and bindings, for the dashboard."""
        self.metrics = SchedulerMetrics()
        self.cache = Cache()
        self.client = KubeClusterClient(api, qps=options.qps, burst=options.burst, instance=options.identity)
        config = options.scheduler_config
        registry = full_registry()
        for problem in registry.problems:
            logger.warning("installed plugins: %s", problem)
        self.scheduler = Scheduler(cache=self.cache, client=self.client, registry=registry,
                                   observer=Observers(self.stats, self.metrics, self.activity),
                                   percentage_of_nodes_to_score=config.percentage_of_nodes_to_score if config else 0)
        profiles_changed = asyncio.Event()
        self.profiles = ProfileManager(scheduler=self.scheduler, registry=registry, stats=self.stats,
                                       config_profiles=list(config.profiles) if config else [],
                                       on_change=profiles_changed.set)
        self.tasks = TaskSet(logger)
        """The operator's own loops, cancelled on shutdown (bindings are the scheduler's)."""
        self.informer = Informer(
            client=self.client, feed=ClusterFeed(EventHandlers(self.scheduler)),
            profile_feed=ClusterFeed(ProfileFeedHandlers(self.profiles)),  # type: ignore[arg-type]
            tasks=self.tasks, seed_default_profile=options.seed_default_profile and not (config and config.profiles),
            reconcile_interval=options.reconcile_interval, list_page_size=options.list_page_size)
        self.pod_groups = PodGroupStatusWriter(scheduler=self.scheduler, client=self.client)
        self.status_writer = StatusWriter(client=self.client, profiles=self.profiles, pod_groups=self.pod_groups,
                                          interval=options.status_interval, profiles_changed=profiles_changed)
        self.watch_health = WatchHealth(down_after=options.watch_down_after, max_backoff=options.watch_max_backoff)
        install_watch_relay()
        install_request_retries()
        self.api_reachability = ApiReachability(configuration.host or "", max_backoff=options.watch_max_backoff)
        """Whether kopf's requests reach the API server (they retry for ever while they do not)."""
        self._loop = asyncio.get_running_loop()
        self._inbox: Inbox[tuple[Callable[..., None], tuple[Any, ...]]] = Inbox(self._loop, call)
        self.kopf = KopfThread(build_registry(configuration=configuration), settings=operator_settings(
            watch_health=self.watch_health, watch_sink=Relay(self._inbox, self.informer),
            list_page_size=options.list_page_size, api_reachability=self.api_reachability))
        dashboard = OperatorDashboard(
            scheduler=self.scheduler, cache=self.cache, activity=self.activity, stats=self.stats,
            profiles=self.profiles, identity=options.identity, leading=lambda: self.leading)
        self.health = None if options.metrics_port is None else HealthServer(
            port=options.metrics_port, host=options.metrics_host, healthy=self._check_healthy, ready=self._check_ready,
            registry=self.metrics.registry, dashboard=dashboard)
        """The metrics port: plain HTTP, not checked (loopback by default)."""
        self.reviews = ApiServerReviews(self.client)
        self.secure = None if options.secure_port is None else HealthServer(
            port=options.secure_port, host=options.bind_address, healthy=self._check_healthy,
            ready=self._check_ready, registry=self.metrics.registry, dashboard=dashboard,
            auth=DelegatedAuth(authenticate=self.reviews.authenticate, authorize=self.reviews.authorize,
                               always_allow_paths=options.always_allow_paths))
        """The secure port: HTTPS (its certificate loaded in run()), reviews by the API server."""
        self.elector = None if not options.leader_elect else LeaderElector(
            self.client, config=options.lease, identity=options.identity)
        self.failure: str | None = None
        """Why the run ended badly (kopf stopped, the lease was lost); None while all is well."""
        self._scheduling: asyncio.Task[None] | None = None
        self._last_cycle = (0, time.monotonic())

    @classmethod
    @contextlib.asynccontextmanager
    async def connected(cls, options: OperatorOptions) -> AsyncIterator[Operator]:
        """An operator with an API client for the options' kubeconfig, closed on exit."""
        configuration = await load_configuration(options.kubeconfig)
        api = k8s.ApiClient(configuration)
        without_env_lookups(api)
        try:
            operator = cls(options, api=api, configuration=configuration)
            try:
                yield operator
            finally:
                await operator.client.close()
        finally:
            await api.close()

    # -- probes ------------------------------------------------------------------------------

    def ready(self) -> bool:
        """The initial listing is done (the cache holds every node and pod) and the API server
        answers."""
        return self.informer.synced and self.api_reachability.reachable

    def _check_ready(self) -> bool:
        """/readyz: ready(), with why not in the 503's body."""
        if problem := self.api_reachability.problem():
            raise NotReadyError(problem)
        if not self.informer.synced:
            raise NotReadyError("the initial listing is not done yet")
        return True

    @property
    def leading(self) -> bool:
        """This replica runs the scheduling loop (it holds the Lease, or elects none)."""
        return self._scheduling is not None

    def healthy(self) -> bool:
        """kopf's watches run and, on the leader, the scheduling loop is alive and not stuck."""
        if not self.kopf.alive or self.kopf.crashed or self.watch_problems():
            return False
        if self._scheduling is None:
            return True  # a follower, or still listing
        if self._scheduling.done():
            return False
        cycle, since = self._last_cycle
        active = self.scheduler.queue.pending_counts().get("active", 0)
        return not active or self.scheduler.queue.scheduling_cycle != cycle or time.monotonic() - since < STUCK_AFTER

    def watch_problems(self) -> list[str]:
        """Watches failing for longer than watch_down_after, or pods/nodes no longer watched."""
        return self.watch_health.problems(required=(POD_RESOURCE, NODE_RESOURCE))

    def _check_healthy(self) -> bool:
        """/healthz: healthy(), with the failing watches named in the 503's body."""
        if problems := self.watch_problems():
            raise UnhealthyError("; ".join(problems))
        return self.healthy()

    # -- the whole run -----------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> int:
        await self._start_servers()
        self.kopf.start()
        lost = asyncio.Event()
        try:
            self._spawn(self._watch_kopf(lost), "kopf watchdog")
            await wait_any(stop, lost, self.informer.synced_flag)
            if not self.informer.synced:
                if self.failure is not None:  # e.g. kopf's discovery found no API server
                    raise StartupError(self.failure)
                return self._exit_code()
            freeze_the_listed_heap()
            self._spawn(self._metrics_loop(stop), "metrics")
            if self.elector is not None:
                if not await first(self.elector.acquire(stop), stop, lost):
                    return self._exit_code()
                self._spawn(self._hold_lease(self.elector, stop, lost), "lease")
            self._start_scheduling(stop)
            await wait_any(stop, lost)
            return self._exit_code()
        finally:
            await self._shutdown()

    async def _start_servers(self) -> None:
        options = self.options
        if self.secure is not None:
            try:
                self.secure.ssl_context = serving_context(
                    cert_file=options.tls_cert_file, key_file=options.tls_private_key_file, cert_dir=options.cert_dir,
                    hosts=() if options.bind_address in ("0.0.0.0", "::") else [options.bind_address])
            except ServingCertError as exc:
                raise StartupError(str(exc)) from exc
        for server, flag, port in ((self.secure, "--secure-port", options.secure_port),
                                   (self.health, "--metrics-port", options.metrics_port)):
            if server is None:
                continue
            try:
                await server.start()
            except OSError as exc:  # e.g. the port is in use
                await self._stop_servers()
                raise StartupError(f"{flag} {port}: {exc.strerror or exc}") from exc

    async def _stop_servers(self) -> None:
        for server in (self.health, self.secure):
            if server is not None:
                await server.stop()

    def _exit_code(self) -> int:
        if self.failure is not None:
            logger.error("stopping: %s", self.failure)
            return EXIT_FAILED
        return EXIT_OK

    def _start_scheduling(self, stop: asyncio.Event) -> None:
        logger.info("scheduling starts")
        self._scheduling = self._spawn(self.scheduler.run(), "scheduling loop")
        self._spawn(self.scheduler.queue.run(stop), "queue flushes")
        self._spawn(self.scheduler.run_permit_timeouts(stop), "permit timeouts")
        self._spawn(self.status_writer.run(stop), "status writer")
        self._spawn(self.client.run_event_series(stop), "event series")
        self._spawn(self.informer.reconcile_loop(stop), "reconcile")

    async def _shutdown(self) -> None:
        steps: list[str] = []
        clock = time.monotonic()

        def done(step: str) -> None:
            nonlocal clock
            now = time.monotonic()
            steps.append(f"{step} {now - clock:.1f} s")
            clock = now

        # In-flight bindings finish; pods waiting on Permit are rejected and unreserved.
        await self.scheduler.shutdown()
        done("bindings")
        if self.leading:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.status_writer.write_profiles(), timeout=5)
            done("profile status")
        await self.tasks.cancel()
        if self.elector is not None:
            await self.elector.release()
            done("lease")
        await self.kopf.stop()
        done("watches")
        await self._stop_servers()
        gcpolicy.thaw()
        # Which step a slow stop spent its time in (a Pod's terminationGracePeriodSeconds is 30 s).
        logger.info("stopped: %s", ", ".join(steps))

    # -- periodic work -----------------------------------------------------------------------

    async def _metrics_loop(self, stop: asyncio.Event) -> None:
        while True:
            self.metrics.set_pending(self.scheduler.queue.pending_counts())
            self.metrics.set_cache_size(**self.cache.stats())
            cycle = self.scheduler.queue.scheduling_cycle
            if cycle != self._last_cycle[0]:
                self._last_cycle = (cycle, time.monotonic())
            if await stopped_within(stop, 1.0):
                return

    async def _watch_kopf(self, lost: asyncio.Event) -> None:
        # kopf stops watching pods and nodes only when it shuts down, here on its own (this task
        # is cancelled before we stop kopf): its thread may then hang in shutdown, still alive.
        stopped: list[str] = []
        while self.kopf.alive and self.kopf.crashed is None and \
                not (stopped := self.watch_health.stopped_of((POD_RESOURCE, NODE_RESOURCE))):
            await asyncio.sleep(0.5)
        self.failure = f"kopf stopped watching {', '.join(stopped)}" if stopped else \
            self.kopf.crashed or f"kopf stopped: {self.kopf.error!r}"
        lost.set()

    async def _hold_lease(self, elector: LeaderElector, stop: asyncio.Event, lost: asyncio.Event) -> None:
        await elector.hold(stop)
        if not stop.is_set():
            self.failure = "leader election lost"
            self.client.fence(self.failure)  # bindings in flight must not bind any more
            lost.set()

    def _spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        return self.tasks.spawn(coro, name)


def freeze_the_listed_heap() -> None:
    """Move what the initial listing built (every node and pod, each many objects the cyclic GC
    tracks) out of the collector's generations (gc.freeze). Those objects live about as long as
    the process, and each full collection traversed them all again: a pause of the scheduling
    loop (docs/performance.md) each time the heap had grown by a quarter. Young garbage is collected first; cycles
    that became garbage in the oldest generation before this point stay (once, bounded).
    Frozen objects are still freed by reference counting when the cache drops them."""
    started = time.monotonic()
    frozen = gcpolicy.freeze_heap()
    logger.info("froze %d objects of the initial listing out of the GC's generations (%.0f ms)",
                frozen, 1000 * (time.monotonic() - started))


async def load_configuration(kubeconfig: str | None) -> k8s.Configuration:
    """The kubeconfig given, else the in-cluster service account, else $KUBECONFIG."""
    configuration = k8s.Configuration()
    if kubeconfig:
        try:
            with open(kubeconfig, encoding="utf-8"):
                pass  # kubernetes_asyncio reads a missing file as an empty one, with a misleading error
            await k8s_config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
        except Exception as exc:  # the user's file (the CLI checked its shape): a line, never a traceback
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


__all__ = ["EXIT_FAILED", "EXIT_OK", "Operator", "OperatorOptions", "StartupError", "load_configuration"]
