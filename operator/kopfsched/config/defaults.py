"""Upstream's default plugin set (kube-scheduler v1 `getDefaultPlugins`), and the default
profile built from the part of it that this registry implements.

Every default is enabled through multiPoint, so a plugin runs at every extension point
it implements; the weights below apply at the score point. `DynamicResources` is added
by upstream's feature gate `DynamicResourceAllocation` (GA, on by default), right
before `DefaultPreemption`.
"""

from __future__ import annotations

from kopfsched.config.types import DEFAULT_SCHEDULER_NAME, PluginRef, ProfileConfig
from kopfsched.framework.registry import Registry

UPSTREAM_DEFAULT_PLUGINS: tuple[PluginRef, ...] = (
    PluginRef("SchedulingGates"),
    PluginRef("PrioritySort"),
    PluginRef("NodeUnschedulable"),
    PluginRef("NodeName"),
    PluginRef("TaintToleration", 3),
    PluginRef("NodeAffinity", 2),
    PluginRef("NodePorts"),
    PluginRef("NodeResourcesFit", 1),
    PluginRef("VolumeRestrictions"),
    PluginRef("NodeVolumeLimits"),
    PluginRef("VolumeBinding"),
    PluginRef("VolumeZone"),
    PluginRef("PodTopologySpread", 2),
    PluginRef("InterPodAffinity", 2),
    PluginRef("DynamicResources"),
    PluginRef("DefaultPreemption"),
    PluginRef("NodeResourcesBalancedAllocation", 1),
    PluginRef("ImageLocality", 1),
    PluginRef("DefaultBinder"),
)
"""The multiPoint defaults in upstream's order, with upstream's score weights."""

UPSTREAM_DEFAULTS_NOT_IMPLEMENTED: tuple[str, ...] = ()
"""Upstream defaults kopfsched does not implement yet: left out of the default profile.
Disabling them in a pasted configuration, or giving them pluginConfig, is accepted and
has no effect."""


def default_multipoint(registry: Registry) -> list[PluginRef]:
    """The upstream defaults that `registry` has, in upstream's order."""
    return [ref for ref in UPSTREAM_DEFAULT_PLUGINS if ref.name in registry]


def default_profile(registry: Registry, scheduler_name: str = DEFAULT_SCHEDULER_NAME) -> ProfileConfig:
    """The profile kube-scheduler runs when nothing is configured, minus what `registry` lacks."""
    from kopfsched.config.parse import parse_profile_spec  # late: profiles imports this module

    profile, problems = parse_profile_spec({"schedulerName": scheduler_name}, registry, source="default")
    if profile is None:
        raise ValueError("the default profile is invalid for this registry: " + "; ".join(map(str, problems)))
    return profile
