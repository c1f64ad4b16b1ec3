"""Upstream's default plugin set (kube-scheduler v1.37.2's `getDefaultPlugins` with its
`applyFeatureGates` at the default gates), and the default profile built from the part of it
that this registry implements.

Every default is enabled through multiPoint, so a plugin runs at every extension point
it implements; the weights below apply at the score point. Two gates add plugins, both
locked on at v1.37: `DynamicResourceAllocation` puts `DynamicResources` (weight 2) right
before `DefaultPreemption`, and `NodeDeclaredFeatures` appends its plugin after
`DefaultBinder`. The other gates that would add plugins (GenericWorkload: GangScheduling;
TopologyAwareWorkloadScheduling; InPlacePodVerticalScalingSchedulerPreemption) are off.
"""

from __future__ import annotations

from kopfsched.config.types import DEFAULT_SCHEDULER_NAME, PluginRef, ProfileConfig
from kopfsched.framework.registry import Registry

UPSTREAM_DEFAULT_PLUGINS: tuple[PluginRef, ...] = (
    PluginRef("SchedulingGates"),
    PluginRef("PrioritySort"),
    PluginRef("NodeName"),
    PluginRef("NodeUnschedulable"),
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
    PluginRef("DynamicResources", 2),
    PluginRef("DefaultPreemption"),
    PluginRef("NodeResourcesBalancedAllocation", 1),
    PluginRef("ImageLocality", 1),
    PluginRef("DefaultBinder"),
    PluginRef("NodeDeclaredFeatures"),
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
