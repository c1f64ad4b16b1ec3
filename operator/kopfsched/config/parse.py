"""Parsing SchedulerProfile resources and KubeSchedulerConfiguration files into
`ProfileConfig`s, with upstream's merge rules.

How a profile's plugins come about (kube-scheduler v1 `mergePluginSet` in
default_plugins.go, then the framework runtime's multiPoint expansion):

1. Merge each plugin set with its defaults. Only multiPoint has defaults (upstream's
   default plugins); `disabled` removes defaults by name, `"*"` removes them all; a
   default that is enabled again keeps its place with the new settings (e.g. a weight);
   other enabled plugins are appended after the defaults.
2. Expand multiPoint into every extension point the plugin implements, unless the point
   disables it (or disables `"*"`). A plugin also listed at the point itself is an
   explicit override: those come first, in the point's own order, then the multiPoint
   plugins, then the point's other plugins.
3. Score weights: the point's own entry wins over multiPoint; unset means 1.

So: specific extension point > explicit multiPoint > default multiPoint.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kopfsched.config.defaults import UPSTREAM_DEFAULTS_NOT_IMPLEMENTED, default_multipoint
from kopfsched.config.extenders import parse_extenders, with_extenders
from kopfsched.config.field_checks import (
    KSC_PROFILE_SOURCE,
    SCHEDULER_PROFILE_SOURCE,
    check_backoff,
    check_known_fields,
    check_percentage,
    expect_list,
    expect_mapping,
    join,
    optional,
    profile_conflicts,
)
from kopfsched.config.schema import check_extenders, check_profile, check_spec, type_name
from kopfsched.config.types import (
    DEFAULT_BURST,
    DEFAULT_QPS,
    DEFAULT_SCHEDULER_NAME,
    ClientConnectionConfig,
    LeaderElectionConfig,
    PluginRef,
    Problem,
    ProfileConfig,
    SchedulerConfig,
)
from kopfsched.documents import object_label, problem_line, read_documents
from kopfsched.framework.duration import parse_duration
from kopfsched.framework.interface import EXTENSION_POINTS, implemented_points
from kopfsched.framework.registry import ArgsError, PluginFactory, PluginLoadError, Registry

GROUP = "kopfsched.dev"
VERSION = "v1alpha1"
SCHEDULER_PROFILE_API_VERSION = f"{GROUP}/{VERSION}"
SCHEDULER_PROFILE_KIND = "SchedulerProfile"
KSC_API_VERSION = "kubescheduler.config.k8s.io/v1"
KSC_KIND = "KubeSchedulerConfiguration"

MULTI_POINT = "multiPoint"
PLUGIN_SET_FIELDS: tuple[str, ...] = (MULTI_POINT, *EXTENSION_POINTS)
"""The fields of `plugins`, multiPoint first."""

# The structure of a profile (fields, types, ranges) is the CRD's schema (config/schema.py);
# the top level of a KubeSchedulerConfiguration has no schema of ours, so its fields are
# listed and checked here.
KSC_FIELDS = (
    "apiVersion", "kind", "parallelism", "leaderElection", "clientConnection", "enableProfiling",
    "enableContentionProfiling", "percentageOfNodesToScore", "podInitialBackoffSeconds", "podMaxBackoffSeconds",
    "profiles", "extenders", "delayCacheUntilActive",
)
LEADER_ELECTION_FIELDS = (
    "leaderElect", "leaseDuration", "renewDeadline", "retryPeriod", "resourceLock", "resourceName",
    "resourceNamespace",
)
WILDCARD = "*"


@dataclass(slots=True)
class _Entry:
    """One `enabled` entry as written, with the path of the entry for messages."""

    name: str
    weight: int | None
    path: str


@dataclass(slots=True)
class _PluginSet:
    enabled: list[_Entry] = field(default_factory=list)
    disabled: set[str] = field(default_factory=set)


class _ProfileParser:
    """Parses one profile object; collects every problem instead of stopping at the first."""

    def __init__(self, registry: Registry, *, path: str, source: str) -> None:
        self.registry = registry
        self.path = path
        self.source = source
        self.problems: list[Problem] = []
        self._points: dict[str, list[str] | None] = {}
        self._broken: dict[str, str] = {}

    def add(self, path: str, message: str) -> None:
        self.problems.append(Problem(path, message))

    def at(self, child: str) -> str:
        return join(self.path, child)

    # Registry lookups --------------------------------------------------------------

    def factory(self, name: str) -> PluginFactory | None:
        """The plugin's factory; None when it is unknown, or installed but broken (then its
        one-line reason is in `_broken`). Plugins come only from the registry: a name is
        never imported as a module path."""
        try:
            return self.registry.get(name)
        except PluginLoadError as error:
            self._broken.setdefault(name, str(error))
            return None

    def points_of(self, name: str) -> list[str] | None:
        """The extension points `name` implements; None when its class is unknown."""
        if name not in self._points:
            factory = self.factory(name)
            plugin_type = factory.plugin_type if factory is not None else None
            self._points[name] = implemented_points(plugin_type) if plugin_type is not None else None
        return self._points[name]

    def unknown_plugin(self, name: str) -> str:
        if name in UPSTREAM_DEFAULTS_NOT_IMPLEMENTED:
            return f'unknown plugin "{name}" (an upstream plugin kopfsched does not implement yet)'
        return f'unknown plugin "{name}": neither built in nor installed'

    # Plugin sets -------------------------------------------------------------------

    # The raw profile went through the schema (config/schema.py): what is left of it has the
    # right types and every entry its name; a list item that was wrong is None.

    def plugin_sets(self, plugins: Mapping[str, Any] | None) -> dict[str, _PluginSet]:
        path = self.at("plugins")
        plugins = plugins or {}
        return {point: self.plugin_set(plugins.get(point) or {}, point, join(path, point))
                for point in PLUGIN_SET_FIELDS}

    def plugin_set(self, plugin_set: Mapping[str, Any], point: str, path: str) -> _PluginSet:
        result = _PluginSet()
        # Names are not checked: disabling an upstream plugin that kopfsched lacks is harmless.
        for index, item in enumerate(plugin_set.get("disabled") or ()):
            if item is None:
                continue
            if item["name"] in result.disabled:  # the CRD's list-type map refuses it too
                self.add(f"{path}.disabled[{index}].name",
                         f'plugin "{item["name"]}" is disabled more than once at {point}')
            result.disabled.add(item["name"])
        seen: set[str] = set()
        for index, item in enumerate(plugin_set.get("enabled") or ()):
            if item is None:
                continue
            entry = self.enabled_entry(item, point, f"{path}.enabled[{index}]")
            if entry is None:
                continue
            if entry.name in seen:
                self.add(join(entry.path, "name"), f'plugin "{entry.name}" is enabled more than once at {point}')
                continue
            seen.add(entry.name)
            result.enabled.append(entry)
        return result

    def enabled_entry(self, item: Mapping[str, Any], point: str, path: str) -> _Entry | None:
        name: str = item["name"]
        if name == WILDCARD:
            self.add(join(path, "name"), '"*" can only be disabled')
            return None
        if name not in self.registry:
            self.add(join(path, "name"), self.unknown_plugin(name))
            return None
        if self.factory(name) is None:
            self.add(join(path, "name"), self._broken[name])
            return None
        points = self.points_of(name)
        if point != MULTI_POINT and points is not None and point not in points:
            self.add(join(path, "name"), f'plugin "{name}" does not implement the {point} extension point')
            return None
        if point == MULTI_POINT and points is None:
            self.add(join(path, "name"), f'cannot tell which extension points plugin "{name}" implements')
            return None
        # Weights matter only where the plugin scores; elsewhere upstream ignores them.
        scores = point == "score" or (point == MULTI_POINT and "score" in (points or ()))
        return _Entry(name, item.get("weight") if scores else None, path)

    # Merging and expansion ---------------------------------------------------------

    def effective_plugins(self, sets: dict[str, _PluginSet]) -> dict[str, list[PluginRef]]:
        defaults = [_Entry(ref.name, ref.weight, "") for ref in default_multipoint(self.registry)]
        multi_point = _merge(defaults, sets[MULTI_POINT])
        weights: dict[str, int] = {}
        for entry in [*sets["score"].enabled, *multi_point]:
            weights.setdefault(entry.name, entry.weight or 1)
        effective: dict[str, list[PluginRef]] = {}
        for point in EXTENSION_POINTS:
            names = self.expand(point, sets[point], multi_point)
            effective[point] = [PluginRef(name, weights[name] if point == "score" else None) for name in names]
        return effective

    def expand(self, point: str, own: _PluginSet, multi_point: list[_Entry]) -> list[str]:
        specific = [entry.name for entry in own.enabled]
        if WILDCARD in own.disabled:
            return specific
        overrides: list[str] = []
        from_multi_point: list[str] = []
        for entry in multi_point:
            if point not in (self.points_of(entry.name) or ()) or entry.name in own.disabled:
                continue
            if entry.name in specific:
                overrides.append(entry.name)
            elif entry.name not in from_multi_point:
                from_multi_point.append(entry.name)
        first = [name for name in specific if name in overrides]
        rest = [name for name in specific if name not in overrides]
        return [*first, *from_multi_point, *rest]

    def check_required_points(self, plugins: dict[str, list[PluginRef]]) -> None:
        queue_sort = [ref.name for ref in plugins["queueSort"]]
        if not queue_sort:
            self.add(self.at("plugins.queueSort"), "no queue sort plugin is enabled")
        elif len(queue_sort) > 1:
            names = ", ".join(f'"{name}"' for name in queue_sort)
            self.add(self.at("plugins.queueSort"), f"only one queue sort plugin can be enabled, got {names}")
        if not plugins["bind"]:
            self.add(self.at("plugins.bind"), "at least one bind plugin is needed")

    # Plugin args -------------------------------------------------------------------

    def plugin_config(self, raw: list[Mapping[str, Any]] | None) -> dict[str, Any]:
        """Decoded args per configured plugin."""
        path = self.at("pluginConfig")
        decoded: dict[str, Any] = {}
        for index, config in enumerate(raw or ()):
            if config is None:
                continue
            item_path = f"{path}[{index}]"
            name: str = config["name"]
            if name in decoded:
                self.add(join(item_path, "name"), f'repeated config for plugin "{name}"')
                continue
            factory = self.factory(name)
            if factory is None:
                if name in self._broken:
                    self.add(join(item_path, "name"), self._broken[name])
                elif name not in UPSTREAM_DEFAULTS_NOT_IMPLEMENTED:
                    self.add(join(item_path, "name"), self.unknown_plugin(name))
                continue
            decoded[name] = self.decode_args(factory, config.get("args"), join(item_path, "args"))
        return decoded

    def decode_args(self, factory: Any, raw: Any, path: str) -> Any:
        try:
            return factory.decode_args(raw)
        except ArgsError as error:
            for arg_path, message in error.problems:
                self.add(join(path, arg_path) if arg_path else path, message)
        except Exception as error:  # a decoder choking on odd input is still a user problem
            self.add(path, f"invalid args: {error}")
        return None

    # The whole profile -------------------------------------------------------------

    def parse(self, raw: Mapping[str, Any], *, default_name: str | None, backoff: tuple[int, int],
              structure: list[Problem]) -> ProfileConfig | None:
        """`raw` went through the schema (config/schema.py), which found `structure`; what is
        left is semantics."""
        name: str | None = raw.get("schedulerName")
        if name is None:
            name = default_name
        name_path = self.at("schedulerName")
        if not name and not any(problem.path == name_path for problem in structure):
            self.add(name_path, "required")
        percentage: int | None = raw.get("percentageOfNodesToScore")
        sets = self.plugin_sets(raw.get("plugins"))
        configured = self.plugin_config(raw.get("pluginConfig"))
        if self.problems or structure:
            return None  # expanding a broken plugin set would only add noise
        plugins = self.effective_plugins(sets)
        self.check_required_points(plugins)
        if self.problems or name is None:
            return None
        enabled = dict.fromkeys(ref.name for refs in plugins.values() for ref in refs)
        args = {plugin: configured[plugin] if plugin in configured else self.default_args(plugin) for plugin in enabled}
        if self.problems:
            return None
        return ProfileConfig(
            scheduler_name=name, plugins=plugins, plugin_args=args, percentage_of_nodes_to_score=percentage,
            pod_initial_backoff_seconds=backoff[0], pod_max_backoff_seconds=backoff[1], source=self.source,
        )

    def default_args(self, name: str) -> Any:
        factory = self.factory(name)
        return self.decode_args(factory, None, self.at("pluginConfig")) if factory is not None else None


def _merge(defaults: list[_Entry], custom: _PluginSet) -> list[_Entry]:
    """Upstream's mergePluginSet for the enabled list."""
    by_name = {entry.name: entry for entry in custom.enabled}
    merged: list[_Entry] = []
    replaced: set[str] = set()
    if WILDCARD not in custom.disabled:
        for entry in defaults:
            if entry.name in custom.disabled:
                continue
            if entry.name in by_name:
                entry = by_name[entry.name]
                replaced.add(entry.name)
            merged.append(entry)
    merged.extend(entry for entry in custom.enabled if entry.name not in replaced)
    return merged


# Public entry points ---------------------------------------------------------------------


def parse_profile_spec(spec: Any, registry: Registry, *, source: str, path: str = "spec",
                       default_name: str | None = DEFAULT_SCHEDULER_NAME) -> tuple[ProfileConfig | None, list[Problem]]:
    """Parse a SchedulerProfile `spec` (one KubeSchedulerProfile plus the backoff fields).

    The structure is checked against the CRD's schema; the semantic rules run on the parts
    whose structure is right, so every problem is reported at once."""
    problems, raw = check_spec({} if spec is None else spec, path)
    if raw is None:
        return None, problems
    initial, maximum = raw.get("podInitialBackoffSeconds"), raw.get("podMaxBackoffSeconds")
    check_backoff(initial, maximum, path, problems)
    extenders = parse_extenders(raw.get("extenders"), join(path, "extenders"), problems)
    parser = _ProfileParser(registry, path=path, source=source)
    profile = parser.parse(raw, default_name=default_name, backoff=(initial or 1, maximum or 10),
                           structure=problems)
    problems.extend(parser.problems)
    if profile is not None:
        profile = with_extenders(profile, extenders)
    return (profile if not problems else None), problems


def parse_scheduler_profile(obj: Any, registry: Registry) -> tuple[ProfileConfig | None, list[Problem]]:
    """Parse a SchedulerProfile custom resource (kopfsched.dev/v1alpha1, cluster-scoped).

    Returns the profile, or None with every problem found. Never raises on user input."""
    problems: list[Problem] = []
    if not isinstance(obj, Mapping):
        return None, [Problem("", f"must be an object, got {type_name(obj)}")]
    if obj.get("apiVersion") != SCHEDULER_PROFILE_API_VERSION:
        got = obj.get("apiVersion")
        problems.append(Problem("apiVersion", f'must be "{SCHEDULER_PROFILE_API_VERSION}", got {got!r}'))
    if obj.get("kind") != SCHEDULER_PROFILE_KIND:
        problems.append(Problem("kind", f'must be "{SCHEDULER_PROFILE_KIND}", got {obj.get("kind")!r}'))
    metadata = expect_mapping(obj.get("metadata"), "metadata", problems) or {}
    name = metadata.get("name")
    if not isinstance(name, str) or not name:
        problems.append(Problem("metadata.name", "required"))
        name = None
    profile, spec_problems = parse_profile_spec(
        obj.get("spec"), registry, source=SCHEDULER_PROFILE_SOURCE.format(name=name or ""), default_name=name)
    problems.extend(spec_problems)
    return (profile if not problems else None), problems


def parse_kube_scheduler_configuration(obj: Any, registry: Registry) -> tuple[SchedulerConfig | None, list[Problem]]:
    """Parse a KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1) with upstream's
    defaults and validation. Never raises on user input."""
    if not isinstance(obj, Mapping):
        return None, [Problem("", f"must be an object, got {type_name(obj)}")]
    problems: list[Problem] = []
    if obj.get("apiVersion") != KSC_API_VERSION:
        problems.append(Problem("apiVersion", f'must be "{KSC_API_VERSION}", got {obj.get("apiVersion")!r}'))
    if obj.get("kind") != KSC_KIND:
        problems.append(Problem("kind", f'must be "{KSC_KIND}", got {obj.get("kind")!r}'))
    check_known_fields(obj, (*KSC_FIELDS, "metadata"), "", problems)

    parallelism = optional(obj, "parallelism", "", problems, int)
    if parallelism is not None and parallelism <= 0:
        problems.append(Problem("parallelism", f"should be an integer value greater than zero, got {parallelism}"))
    percentage = optional(obj, "percentageOfNodesToScore", "", problems, int)
    check_percentage(percentage, "percentageOfNodesToScore", problems)
    initial = optional(obj, "podInitialBackoffSeconds", "", problems, int)
    maximum = optional(obj, "podMaxBackoffSeconds", "", problems, int)
    check_backoff(initial, maximum, "", problems)
    backoff = (initial or 1, maximum or 10)
    delay_cache = optional(obj, "delayCacheUntilActive", "", problems, bool)
    leader_election = _leader_election(obj.get("leaderElection"), problems)
    client_connection = _client_connection(obj.get("clientConnection"), problems)
    # The extenders list has the shape of a SchedulerProfile's spec.extenders: its schema.
    extender_problems, raw_extenders = check_extenders(obj.get("extenders") or [], "extenders")
    problems.extend(extender_problems)
    extenders = parse_extenders(raw_extenders, "extenders", problems)

    raw_profiles = expect_list(obj.get("profiles"), "profiles", problems) or [{}]
    profiles: list[ProfileConfig] = []
    for index, raw in enumerate(raw_profiles):
        path = f"profiles[{index}]"
        # The SchedulerProfile spec's schema, restricted to the profile fields.
        structure, raw = check_profile(raw, path)
        problems.extend(structure)
        if raw is None:
            continue
        parser = _ProfileParser(registry, path=path, source=KSC_PROFILE_SOURCE.format(index=index))
        # Upstream names the profile only when it is the only one.
        default_name = DEFAULT_SCHEDULER_NAME if len(raw_profiles) == 1 else None
        profile = parser.parse(raw, default_name=default_name, backoff=backoff, structure=structure)
        problems.extend(parser.problems)
        if profile is not None:
            profiles.append(with_extenders(profile, extenders))  # upstream's extenders serve every profile
    problems.extend(problem for _, problem in profile_conflicts(profiles))
    if problems:
        return None, problems
    return SchedulerConfig(
        profiles=profiles, parallelism=parallelism or 16, percentage_of_nodes_to_score=percentage or 0,
        pod_initial_backoff_seconds=backoff[0], pod_max_backoff_seconds=backoff[1],
        leader_election=leader_election, client_connection=client_connection, extenders=list(extenders),
        delay_cache_until_active=bool(delay_cache),
    ), problems


def _leader_election(raw: Any, problems: list[Problem]) -> LeaderElectionConfig:
    path = "leaderElection"
    config = expect_mapping(raw, path, problems)
    if config is None:
        return LeaderElectionConfig()
    check_known_fields(config, LEADER_ELECTION_FIELDS, path, problems)
    defaults = LeaderElectionConfig()
    durations: dict[str, float] = {}
    for key, default in (("leaseDuration", defaults.lease_duration_seconds),
                         ("renewDeadline", defaults.renew_deadline_seconds),
                         ("retryPeriod", defaults.retry_period_seconds)):
        value = config.get(key)
        seconds = default if value is None else parse_duration(value)
        if seconds is None:
            problems.append(Problem(join(path, key), f'must be a duration such as "15s", got {value!r}'))
            seconds = default
        elif seconds <= 0:
            problems.append(Problem(join(path, key), "must be greater than zero"))
        durations[key] = seconds
    if durations["leaseDuration"] <= durations["renewDeadline"]:
        problems.append(Problem(join(path, "leaseDuration"), "LeaseDuration must be greater than RenewDeadline"))
    elect = optional(config, "leaderElect", path, problems, bool)
    lock = optional(config, "resourceLock", path, problems, str) or defaults.resource_lock
    if elect is not False and lock != "leases":
        problems.append(Problem(join(path, "resourceLock"), f'resourceLock value must be "leases", got {lock!r}'))
    return LeaderElectionConfig(
        leader_elect=elect if elect is not None else True,
        lease_duration_seconds=durations["leaseDuration"],
        renew_deadline_seconds=durations["renewDeadline"],
        retry_period_seconds=durations["retryPeriod"],
        resource_lock=lock,
        resource_name=optional(config, "resourceName", path, problems, str) or defaults.resource_name,
        resource_namespace=optional(config, "resourceNamespace", path, problems, str) or defaults.resource_namespace,
    )


def _client_connection(raw: Any, problems: list[Problem]) -> ClientConnectionConfig:
    """qps and burst; the section's other fields (kubeconfig, contentType...) are accepted
    and unused: the operator's --kubeconfig says where the API server is."""
    path = "clientConnection"
    config = expect_mapping(raw, path, problems)
    if config is None:
        return ClientConnectionConfig()
    qps, burst = config.get("qps"), config.get("burst")
    valid = True
    if qps is not None and (isinstance(qps, bool) or not isinstance(qps, int | float)):
        problems.append(Problem(join(path, "qps"), f"must be a number, got {qps!r}"))
        valid = False
    elif qps is not None and qps < 0:
        problems.append(Problem(join(path, "qps"), f"must be non-negative, got {qps}"))
        valid = False
    if burst is not None and (isinstance(burst, bool) or not isinstance(burst, int)):
        problems.append(Problem(join(path, "burst"), f"must be an integer, got {burst!r}"))
        valid = False
    elif burst is not None and burst < 0:
        problems.append(Problem(join(path, "burst"), f"must be non-negative, got {burst}"))
        valid = False
    if not valid:
        return ClientConnectionConfig()
    return ClientConnectionConfig(qps=float(qps or DEFAULT_QPS), burst=int(burst or DEFAULT_BURST))


class ConfigFileError(Exception):
    """A --config file that cannot be read or is not a valid KubeSchedulerConfiguration:
    one line per problem, worded as every other input problem (kopfsched.documents)."""

    def __init__(self, lines: list[str]) -> None:
        super().__init__("\n".join(lines))
        self.lines = lines


def load_config_file(path: str, registry: Registry) -> SchedulerConfig:
    """Read and parse a KubeSchedulerConfiguration file; raises ConfigFileError."""
    problems: list[str] = []
    documents = list(read_documents([path], problems))
    if problems:
        raise ConfigFileError(problems)
    if len(documents) != 1:
        raise ConfigFileError([f"{path}: expected one KubeSchedulerConfiguration, found {len(documents)} objects"])
    [document] = documents
    kind = document.obj.get("kind")
    if kind != KSC_KIND:
        problem = "kind: required" if not isinstance(kind, str) or not kind else f"kind: must be {KSC_KIND}"
        raise ConfigFileError([problem_line(document.where, object_label(document.obj), problem)])
    parsed, config_problems = parse_kube_scheduler_configuration(document.obj, registry)
    if parsed is None or config_problems:
        raise ConfigFileError([problem_line(document.where, KSC_KIND, str(p)) for p in config_problems])
    return parsed

