"""DynamicResources: Dynamic Resource Allocation with structured parameters (resource.k8s.io/v1)."""

from kopfsched.plugins.dynamicresources.plugin import NAME, PLUGIN, DynamicResources, DynamicResourcesArgs

__all__ = ["NAME", "PLUGIN", "DynamicResources", "DynamicResourcesArgs"]
