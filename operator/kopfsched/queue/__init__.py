"""The scheduling queue: activeQ, backoffQ, the unschedulable pool with gated pods, the nominator.

Modelled on kube-scheduler's pkg/scheduler/backend/queue. Imports only the framework.
"""

from kopfsched.queue.events import node_update_actions, node_update_events, pod_update_actions, pod_update_events
from kopfsched.queue.heap import Heap
from kopfsched.queue.nominator import Nominator
from kopfsched.queue.profile import (
    DEFAULT_POD_INITIAL_BACKOFF_SECONDS,
    DEFAULT_POD_MAX_BACKOFF_SECONDS,
    DEFAULT_POD_MAX_IN_UNSCHEDULABLE_SECONDS,
    QueueProfile,
)
from kopfsched.queue.scheduling_queue import SchedulingQueue, Strategy

__all__ = [
    "DEFAULT_POD_INITIAL_BACKOFF_SECONDS",
    "DEFAULT_POD_MAX_BACKOFF_SECONDS",
    "DEFAULT_POD_MAX_IN_UNSCHEDULABLE_SECONDS",
    "Heap",
    "Nominator",
    "QueueProfile",
    "SchedulingQueue",
    "Strategy",
    "node_update_actions",
    "node_update_events",
    "pod_update_actions",
    "pod_update_events",
]
