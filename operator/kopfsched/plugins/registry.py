"""The plugin registries: `in_tree_registry()` (every built-in plugin by its upstream
name) and `full_registry()` (those plus every installed out-of-tree plugin), which is
what the scheduler serves from and what `kopfsched validate` checks against.

Modules are imported only when a profile enables the plugin, so start-up stays quick.
"""

from __future__ import annotations

import importlib
import importlib.util

from kopfsched.framework.registry import PluginFactory, Registry
from kopfsched.plugins.entry_points import add_installed_plugins

IN_TREE_MODULES: dict[str, str] = {
    "PrioritySort": "kopfsched.plugins.prioritysort",
    "SchedulingGates": "kopfsched.plugins.schedulinggates",
    "NodeUnschedulable": "kopfsched.plugins.nodeunschedulable",
    "NodeName": "kopfsched.plugins.nodename",
    "NodePorts": "kopfsched.plugins.nodeports",
    "NodeResourcesFit": "kopfsched.plugins.noderesources.fit",
    "VolumeRestrictions": "kopfsched.plugins.volumerestrictions",
    "NodeVolumeLimits": "kopfsched.plugins.nodevolumelimits",
    "VolumeZone": "kopfsched.plugins.volumezone",
    "VolumeBinding": "kopfsched.plugins.volumebinding",
    "NodeResourcesBalancedAllocation": "kopfsched.plugins.noderesources.balanced_allocation",
    "TaintToleration": "kopfsched.plugins.tainttoleration",
    "NodeAffinity": "kopfsched.plugins.nodeaffinity",
    "ImageLocality": "kopfsched.plugins.imagelocality",
    "DefaultBinder": "kopfsched.plugins.defaultbinder",
    "InterPodAffinity": "kopfsched.plugins.interpodaffinity",
    "PodTopologySpread": "kopfsched.plugins.podtopologyspread",
    "DynamicResources": "kopfsched.plugins.dynamicresources",
    "DefaultPreemption": "kopfsched.plugins.defaultpreemption",
    "NodeDeclaredFeatures": "kopfsched.plugins.nodedeclaredfeatures",
    "Coscheduling": "kopfsched.plugins.coscheduling",
}


def _loader(module: str):
    def load() -> PluginFactory:
        return importlib.import_module(module).PLUGIN

    return load


def in_tree_registry() -> Registry:
    """Every built-in plugin whose module is present."""
    registry = Registry()
    for name, module in IN_TREE_MODULES.items():
        if importlib.util.find_spec(module) is not None:
            registry.register_lazy(name, _loader(module))
    return registry


def full_registry() -> Registry:
    """Built-in plugins, then every plugin installed under the `kopfsched.plugins` entry-point
    group (see kopfsched.plugins.entry_points). Problems with installed plugins are in
    `registry.problems` (report them; they never stop start-up) or surface as profile
    problems when a profile enables a broken plugin."""
    registry = in_tree_registry()
    add_installed_plugins(registry)
    return registry
