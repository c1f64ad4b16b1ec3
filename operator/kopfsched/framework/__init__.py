"""The scheduling framework: extension points, statuses, cycle state, node/pod views, runtime.

Imports nothing of kopfsched outside this package, and nothing outside the standard
library but numpy.
"""

from kopfsched.framework.cycle_state import CycleState, StateKey
from kopfsched.framework.events import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    EventResource,
    QueueingHint,
)
from kopfsched.framework.handle import Handle
from kopfsched.framework.interface import (
    MAX_NODE_SCORE,
    MIN_NODE_SCORE,
    NodeToStatus,
    PostFilterResult,
    PreBindPreFlightResult,
    PreFilterResult,
)
from kopfsched.framework.node_table import ColumnSpec, NodeTable
from kopfsched.framework.queued import QueuedPodInfo
from kopfsched.framework.registry import ArgsError, PluginFactory, PluginLoadError, Registry
from kopfsched.framework.status import SKIP, Code, Status
from kopfsched.framework.types import NodeInfo, PodInfo

__all__ = [
    "MAX_NODE_SCORE",
    "MIN_NODE_SCORE",
    "SKIP",
    "ActionType",
    "ArgsError",
    "ClusterEvent",
    "ClusterEventWithHint",
    "Code",
    "ColumnSpec",
    "CycleState",
    "EventResource",
    "Handle",
    "NodeInfo",
    "NodeTable",
    "NodeToStatus",
    "PluginFactory",
    "PluginLoadError",
    "PodInfo",
    "PostFilterResult",
    "PreBindPreFlightResult",
    "PreFilterResult",
    "QueuedPodInfo",
    "QueueingHint",
    "Registry",
    "StateKey",
    "Status",
]
