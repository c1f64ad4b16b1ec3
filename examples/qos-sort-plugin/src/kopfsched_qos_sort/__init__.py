"""QoSSort: a QueueSort plugin for kopfsched, packaged out of tree.

Pods with higher priority first; among equal priorities, the better QoS class first
(Guaranteed > Burstable > BestEffort); then the pod that entered the queue earlier.
The same order as scheduler-plugins' QOSSort (pkg/qos), which this package also
registers under that name so a scheduler-plugins configuration works unchanged.
"""

from kopfsched_qos_sort.plugin import QOSSort, QoSSort
from kopfsched_qos_sort.qos import BEST_EFFORT, BURSTABLE, GUARANTEED, compute_pod_qos, get_pod_qos

__all__ = ["BEST_EFFORT", "BURSTABLE", "GUARANTEED", "QOSSort", "QoSSort", "compute_pod_qos", "get_pod_qos"]
