"""The in-tree registry: every built-in plugin by its upstream name.

Modules are imported only when a profile enables the plugin, so start-up stays quick.
"""

from __future__ import annotations

import importlib

from kopfsched.framework.registry import PluginFactory, Registry

IN_TREE_MODULES: dict[str, str] = {
    "PrioritySort": "kopfsched.plugins.prioritysort",
    "SchedulingGates": "kopfsched.plugins.schedulinggates",
    "NodeUnschedulable": "kopfsched.plugins.nodeunschedulable",
    "NodeName": "kopfsched.plugins.nodename",
    "NodePorts": "kopfsched.plugins.nodeports",
    "NodeResourcesFit": "kopfsched.plugins.noderesources.fit",
    "NodeResourcesBalancedAllocation": "kopfsched.plugins.noderesources.balanced_allocation",
    "TaintToleration": "kopfsched.plugins.tainttoleration",
    "NodeAffinity": "kopfsched.plugins.nodeaffinity",
    "ImageLocality": "kopfsched.plugins.imagelocality",
    "DefaultBinder": "kopfsched.plugins.defaultbinder",
    "InterPodAffinity": "kopfsched.plugins.interpodaffinity",
    "PodTopologySpread": "kopfsched.plugins.podtopologyspread",
    "DefaultPreemption": "kopfsched.plugins.defaultpreemption",
}


def _loader(module: str):
    def load() -> PluginFactory:
        return importlib.import_module(module).PLUGIN

    return load


def in_tree_registry() -> Registry:
    registry = Registry()
    for name, module in IN_TREE_MODULES.items():
        registry.register_lazy(name, _loader(module))
    return registry
