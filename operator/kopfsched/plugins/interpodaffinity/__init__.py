"""InterPodAffinity: pods placed with (or away from) other pods by topology, as upstream's plugin."""

from kopfsched.framework.registry import PluginFactory
from kopfsched.plugins.interpodaffinity.filtering import (
    ERR_REASON_AFFINITY_RULES_NOT_MATCH,
    ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH,
    ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH,
)
from kopfsched.plugins.interpodaffinity.plugin import NAME, InterPodAffinity, InterPodAffinityArgs

PLUGIN = PluginFactory(name=NAME, factory=InterPodAffinity, args_type=InterPodAffinityArgs)

__all__ = [
    "ERR_REASON_AFFINITY_RULES_NOT_MATCH",
    "ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH",
    "ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH",
    "NAME",
    "PLUGIN",
    "InterPodAffinity",
    "InterPodAffinityArgs",
]
