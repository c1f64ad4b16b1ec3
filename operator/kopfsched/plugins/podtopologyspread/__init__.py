"""PodTopologySpread: spread pods over zones, nodes or any topology, as upstream's plugin."""

from kopfsched.framework.registry import PluginFactory
from kopfsched.plugins.podtopologyspread.filtering import (
    ERR_REASON_CONSTRAINTS_NOT_MATCH,
    ERR_REASON_NODE_LABEL_NOT_MATCH,
)
from kopfsched.plugins.podtopologyspread.plugin import NAME, PodTopologySpread, PodTopologySpreadArgs

PLUGIN = PluginFactory(name=NAME, factory=PodTopologySpread, args_type=PodTopologySpreadArgs)

__all__ = [
    "ERR_REASON_CONSTRAINTS_NOT_MATCH",
    "ERR_REASON_NODE_LABEL_NOT_MATCH",
    "NAME",
    "PLUGIN",
    "PodTopologySpread",
    "PodTopologySpreadArgs",
]
