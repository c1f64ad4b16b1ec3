"""DynamicResources: Dynamic Resource Allocation with structured parameters (resource.k8s.io/v1)."""

from kopfsched.plugins.dynamicresources.inventory import rule_selects
from kopfsched.plugins.dynamicresources.manager import DEVICE_TAINT_RULE, RESOURCE_SLICE
from kopfsched.plugins.dynamicresources.plugin import NAME, PLUGIN, DynamicResources, DynamicResourcesArgs

__all__ = ["DEVICE_TAINT_RULE", "NAME", "PLUGIN", "RESOURCE_SLICE", "DynamicResources", "DynamicResourcesArgs",
           "rule_selects"]
