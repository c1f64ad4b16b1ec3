"""Coscheduling (gang scheduling of scheduler-plugins' PodGroups): a thin plugin over the
separately tested PodGroupManager in `core`. See `plugin` for the extension points."""

from kopfsched.plugins.coscheduling.core import (
    POD_GROUP_LABEL,
    PodGroupManager,
    pod_group_status,
    pod_group_statuses,
    served_pod_group_statuses,
)
from kopfsched.plugins.coscheduling.plugin import NAME, PLUGIN, Coscheduling, CoschedulingArgs

__all__ = ["NAME", "PLUGIN", "POD_GROUP_LABEL", "Coscheduling", "CoschedulingArgs", "PodGroupManager",
           "pod_group_status", "pod_group_statuses", "served_pod_group_statuses"]
