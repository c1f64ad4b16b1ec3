"""The QueueSort plugin: priority, then QoS class, then queue time."""

from __future__ import annotations

from typing import Any

from kopfsched.framework import Handle, QueuedPodInfo

from kopfsched_qos_sort.qos import QOS_RANK, get_pod_qos


class QoSSort:
    """QueueSort: higher `spec.priority` first; then Guaranteed > Burstable > BestEffort;
    then the pod that entered the queue earlier. Takes no args."""

    name = "QoSSort"

    def __init__(self, args: Any = None, handle: Handle | None = None) -> None:
        pass

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        if a.priority != b.priority:
            return a.priority > b.priority
        qos_a, qos_b = QOS_RANK[get_pod_qos(a.pod_info.pod)], QOS_RANK[get_pod_qos(b.pod_info.pod)]
        if qos_a != qos_b:
            return qos_a > qos_b
        return a.timestamp < b.timestamp


class QOSSort(QoSSort):
    """The same plugin under scheduler-plugins' name, so its configurations work unchanged."""

    name = "QOSSort"
