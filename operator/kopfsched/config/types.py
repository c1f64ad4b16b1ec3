"""Configuration objects: what a SchedulerProfile or KubeSchedulerConfiguration means once
defaults are applied, multiPoint is expanded and every plugin's args are decoded.

They are built only by `kopfsched.config.parse` after validation, so whoever holds one
may trust it: known plugins, each at a point it implements, weights >= 1, exactly one
queueSort plugin and at least one bind plugin.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

DEFAULT_SCHEDULER_NAME = "default-scheduler"


@dataclass(frozen=True, slots=True)
class ExtenderTLSConfig:
    """`tlsConfig` of an extender (upstream's ExtenderTLSConfig)."""

    insecure: bool = False
    """Skip verifying the server certificate (testing only)."""

    server_name: str = ""
    """Server name for SNI and certificate checks; default: the URL's host."""

    cert_file: str = ""
    """Client certificate file (PEM)."""

    key_file: str = ""
    """Client key file (PEM)."""

    ca_file: str = ""
    """Trusted root certificates file (PEM)."""

    cert_data: bytes = b""
    """Client certificate (PEM bytes; base64 in YAML/JSON); wins over cert_file."""

    key_data: bytes = b""
    """Client key (PEM bytes; base64 in YAML/JSON); wins over key_file."""

    ca_data: bytes = b""
    """Trusted root certificates (PEM bytes; base64 in YAML/JSON); wins over ca_file."""


@dataclass(frozen=True, slots=True)
class ExtenderManagedResource:
    """An extended resource an extender manages (upstream's ExtenderManagedResource)."""

    name: str
    """The extended resource name, e.g. "example.com/foo"."""

    ignored_by_scheduler: bool = False
    """NodeResourcesFit skips this resource (its ignoredResources are set to these names)."""


DEFAULT_EXTENDER_TIMEOUT_SECONDS = 5.0
"""Upstream's DefaultExtenderTimeout, used when httpTimeout is unset or zero."""


@dataclass(frozen=True, slots=True)
class ExtenderConfig:
    """One HTTP extender (kubescheduler.config.k8s.io/v1 Extender), defaults applied."""

    url_prefix: str
    """Base URL; each verb is POSTed to `<urlPrefix>/<verb>`."""

    filter_verb: str = ""
    """Verb for the filter call; empty: the extender does not filter."""

    preempt_verb: str = ""
    """Verb for the preempt call; empty: the extender is not asked about preemption."""

    prioritize_verb: str = ""
    """Verb for the prioritize call; empty: the extender does not score."""

    bind_verb: str = ""
    """Verb for the bind call; empty: the extender does not bind. At most one extender binds."""

    weight: int = 0
    """Multiplies the extender's 0..10 scores (positive when prioritizeVerb is set)."""

    enable_https: bool = False
    """Use TLS (without a CA in tlsConfig the server certificate is not verified, as upstream)."""

    tls_config: ExtenderTLSConfig | None = None
    """Client TLS settings."""

    http_timeout_seconds: float = DEFAULT_EXTENDER_TIMEOUT_SECONDS
    """Timeout of each call; an unset or zero httpTimeout means 5 s."""

    node_cache_capable: bool = False
    """The extender caches nodes itself: send node names instead of whole Node objects."""

    managed_resources: tuple[ExtenderManagedResource, ...] = ()
    """Call the extender only for pods that request one of these; empty: for every pod."""

    ignorable: bool = False
    """Errors (unreachable, timeout, non-200) skip the extender instead of failing the pod."""


@dataclass(frozen=True, slots=True)
class PluginRef:
    """One plugin enabled at one extension point."""

    name: str
    """The plugin's registered name, e.g. "NodeResourcesFit"."""

    weight: int | None = None
    """The score weight (>= 1) at the score point; None at every other point, where
    upstream ignores weights."""


@dataclass(frozen=True, slots=True)
class ProfileConfig:
    """One scheduling profile, ready for the framework runtime."""

    scheduler_name: str
    """Pods opt in with `spec.schedulerName` equal to this."""

    plugins: dict[str, list[PluginRef]]
    """Extension point config name → the enabled plugins in the order they run, after
    multiPoint expansion and merging with the defaults. Every point of
    `framework.interface.EXTENSION_POINTS` is a key, in that order (possibly empty)."""

    plugin_args: dict[str, Any] = field(default_factory=dict)
    """Plugin name → decoded args (upstream defaults for what pluginConfig leaves out;
    None for plugins without args), for every enabled plugin."""

    percentage_of_nodes_to_score: int | None = None
    """0..100; 0 means adaptive; None means the scheduler-wide value applies."""

    pod_initial_backoff_seconds: int = 1
    """The first backoff of a pod that failed to schedule (upstream default 1 s)."""

    pod_max_backoff_seconds: int = 10
    """The backoff doubles per attempt up to this (upstream default 10 s)."""

    source: str = ""
    """Where it came from, for messages: "SchedulerProfile/foo",
    "KubeSchedulerConfiguration profiles[0]", or "default"."""

    extenders: tuple[ExtenderConfig, ...] = ()
    """HTTP extenders this profile calls, as configured: a KubeSchedulerConfiguration's
    `extenders` (shared by all its profiles, as upstream) or a SchedulerProfile's
    `spec.extenders`."""

    def enabled(self, point: str) -> list[str]:
        """Names of the plugins enabled at `point`, in order."""
        return [ref.name for ref in self.plugins.get(point, ())]

    def score_weights(self) -> dict[str, int]:
        """Score plugin name → weight."""
        return {ref.name: ref.weight or 1 for ref in self.plugins.get("score", ())}

    def plugin_names(self) -> list[str]:
        """Every enabled plugin once, in order of first appearance."""
        return list(dict.fromkeys(ref.name for refs in self.plugins.values() for ref in refs))


@dataclass(frozen=True, slots=True)
class LeaderElectionConfig:
    """Lease-based leader election (component-base LeaderElectionConfiguration)."""

    leader_elect: bool = True
    """Run leader election; only the leader schedules."""

    lease_duration_seconds: float = 15.0
    """How long followers wait after the last renewal before taking over."""

    renew_deadline_seconds: float = 10.0
    """How long the leader keeps retrying a renewal before it steps down."""

    retry_period_seconds: float = 2.0
    """Pause between acquire/renew attempts."""

    resource_lock: str = "leases"
    """Lock kind; upstream accepts only "leases"."""

    resource_name: str | None = None
    """Name of the Lease object; None: "kopfsched" (upstream's default, kube-scheduler,
    is the default scheduler's own lease)."""

    resource_namespace: str | None = None
    """Namespace of the Lease object; None: the operator's own namespace."""


DEFAULT_QPS = 50.0
DEFAULT_BURST = 100
"""kube-scheduler's clientConnection defaults."""


@dataclass(frozen=True, slots=True)
class ClientConnectionConfig:
    """clientConnection's rate limits (component-base ClientConnectionConfiguration); 0 or
    absent means kube-scheduler's defaults."""

    qps: float = DEFAULT_QPS
    burst: int = DEFAULT_BURST


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    """A KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1)."""

    profiles: list[ProfileConfig]
    """One per scheduler name; all share one queueSort plugin."""

    parallelism: int = 16
    """Upstream's worker count for Filter/Score; kept for fidelity."""

    percentage_of_nodes_to_score: int = 0
    """Scheduler-wide 0..100; 0 means adaptive (50% at 100 nodes down to 5%)."""

    pod_initial_backoff_seconds: int = 1
    """The first backoff of a pod that failed to schedule."""

    pod_max_backoff_seconds: int = 10
    """The cap of the doubling backoff."""

    leader_election: LeaderElectionConfig = field(default_factory=LeaderElectionConfig)
    """Leader election settings."""

    client_connection: ClientConnectionConfig = field(default_factory=ClientConnectionConfig)
    """API client rate limits."""

    extenders: list[ExtenderConfig] = field(default_factory=list)
    """HTTP extenders, shared by every profile (each profile's `extenders` holds them too)."""

    delay_cache_until_active: bool = False
    """Fill the cache only after becoming leader."""


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong with a configuration, at a field path such as
    `spec.plugins.score.enabled[0].name`."""

    path: str
    """Field path inside the object ("" for the object as a whole)."""

    message: str
    """What is wrong, in upstream's words where it has them."""

    source: str = ""
    """The object it concerns when that is not obvious from the context, e.g.
    "SchedulerProfile/b" for problems found by comparing profiles."""

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message
