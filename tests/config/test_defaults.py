"""The default profile: upstream's v1 default plugins, order and weights."""

from __future__ import annotations

import pytest

from kopfsched.config import UPSTREAM_DEFAULT_PLUGINS, UPSTREAM_DEFAULTS_NOT_IMPLEMENTED, PluginRef, default_profile
from kopfsched.framework.interface import EXTENSION_POINTS
from kopfsched.plugins.registry import IN_TREE_MODULES
from tests.config.fakes import FAKE_POINTS, every_in_tree_plugin, fake_registry

# kube-scheduler v1.37.2 pkg/scheduler/apis/config/v1/default_plugins.go getDefaultPlugins
# (multiPoint): DynamicResources (weight 2) inserted before DefaultPreemption by the
# DynamicResourceAllocation gate, NodeDeclaredFeatures appended by its gate (both locked on).
UPSTREAM = [
    ("SchedulingGates", None), ("PrioritySort", None), ("NodeName", None), ("NodeUnschedulable", None),
    ("TaintToleration", 3), ("NodeAffinity", 2), ("NodePorts", None), ("NodeResourcesFit", 1),
    ("VolumeRestrictions", None), ("NodeVolumeLimits", None), ("VolumeBinding", None), ("VolumeZone", None),
    ("PodTopologySpread", 2), ("InterPodAffinity", 2), ("DynamicResources", 2), ("DefaultPreemption", None),
    ("NodeResourcesBalancedAllocation", 1), ("ImageLocality", 1), ("DefaultBinder", None),
    ("NodeDeclaredFeatures", None),
]

# Upstream's ExpandedPluginsV1 (pkg/scheduler/apis/config/testing/defaults at v1.37.2), less what
# kopfsched's plugins do not implement there: PreFilter of NodeName (narrows to spec.nodeName,
# which pending pods here never have), NodeUnschedulable and TaintToleration (no-ops unless the
# alpha InPlacePodVerticalScalingSchedulerPreemption is on).
EXPANDED = {
    "queueSort": ["PrioritySort"],
    "preEnqueue": ["SchedulingGates", "DynamicResources", "DefaultPreemption"],
    "preFilter": ["NodeAffinity", "NodePorts", "NodeResourcesFit", "VolumeRestrictions", "NodeVolumeLimits",
                  "VolumeBinding", "VolumeZone", "PodTopologySpread", "InterPodAffinity", "DynamicResources",
                  "NodeDeclaredFeatures"],
    "filter": ["NodeName", "NodeUnschedulable", "TaintToleration", "NodeAffinity", "NodePorts", "NodeResourcesFit",
               "VolumeRestrictions", "NodeVolumeLimits", "VolumeBinding", "VolumeZone", "PodTopologySpread",
               "InterPodAffinity", "DynamicResources", "NodeDeclaredFeatures"],
    "postFilter": ["DynamicResources", "DefaultPreemption"],
    "preScore": ["TaintToleration", "NodeAffinity", "NodeResourcesFit", "VolumeBinding", "PodTopologySpread",
                 "InterPodAffinity", "NodeResourcesBalancedAllocation"],
    "score": ["TaintToleration", "NodeAffinity", "NodeResourcesFit", "VolumeBinding", "PodTopologySpread",
              "InterPodAffinity", "DynamicResources", "NodeResourcesBalancedAllocation", "ImageLocality"],
    "reserve": ["VolumeBinding", "DynamicResources"], "permit": [], "preBind": ["VolumeBinding", "DynamicResources"],
    "bind": ["DefaultBinder"],
    "postBind": [],
}
SCORE_WEIGHTS = {"TaintToleration": 3, "NodeAffinity": 2, "NodeResourcesFit": 1, "VolumeBinding": 1,
                 "PodTopologySpread": 2, "InterPodAffinity": 2, "DynamicResources": 2,
                 "NodeResourcesBalancedAllocation": 1, "ImageLocality": 1}


def test_upstream_default_plugins_in_order_with_weights():
    assert [(ref.name, ref.weight) for ref in UPSTREAM_DEFAULT_PLUGINS] == UPSTREAM


def test_not_implemented_defaults_are_exactly_those_missing_from_the_in_tree_registry():
    missing = [ref.name for ref in UPSTREAM_DEFAULT_PLUGINS if ref.name not in IN_TREE_MODULES]
    assert list(UPSTREAM_DEFAULTS_NOT_IMPLEMENTED) == missing


def test_default_profile_expands_multipoint_per_extension_point():
    profile = default_profile(fake_registry())
    faked = {point: [name for name in names if name in FAKE_POINTS] for point, names in EXPANDED.items()}
    assert list(profile.plugins) == list(EXTENSION_POINTS)
    assert {point: profile.enabled(point) for point in EXTENSION_POINTS} == faked
    assert profile.score_weights() == {name: w for name, w in SCORE_WEIGHTS.items() if name in FAKE_POINTS}
    assert profile.plugins["filter"][0] == PluginRef("NodeName", None)


def test_default_profile_fields():
    profile = default_profile(fake_registry(), scheduler_name="other")
    assert (profile.scheduler_name, profile.percentage_of_nodes_to_score, profile.pod_initial_backoff_seconds,
            profile.pod_max_backoff_seconds, profile.source) == ("other", None, 1, 10, "default")


def test_default_profile_leaves_out_plugins_the_registry_lacks():
    names = ["PrioritySort", "NodeName", "TaintToleration", "DefaultBinder"]
    profile = default_profile(fake_registry(names))
    assert profile.plugin_names() == names
    assert profile.score_weights() == {"TaintToleration": 3}


def test_default_profile_decodes_default_args():
    profile = default_profile(fake_registry())
    assert profile.plugin_args["NodeResourcesFit"].level == 10
    assert profile.plugin_args["NodeName"] is None
    assert set(profile.plugin_args) == set(profile.plugin_names())


def test_default_profile_without_a_binder_is_a_bug():
    with pytest.raises(ValueError, match="at least one bind plugin is needed"):
        default_profile(fake_registry(["PrioritySort", "NodeName"]))


def test_default_profile_with_real_plugins_matches_upstream_expansion():
    registry = every_in_tree_plugin()
    profile = default_profile(registry)
    assert {point: profile.enabled(point) for point in EXTENSION_POINTS} == EXPANDED
    assert profile.score_weights() == SCORE_WEIGHTS


def test_node_resources_fit_args_default_to_least_allocated_cpu_and_memory():
    registry = every_in_tree_plugin()
    args = default_profile(registry).plugin_args["NodeResourcesFit"]
    strategy = args.scoring_strategy
    assert strategy.type == "LeastAllocated"
    assert [(r.name, r.weight) for r in strategy.resources] == [("cpu", 1), ("memory", 1)]
